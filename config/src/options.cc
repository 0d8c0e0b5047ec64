#include "aon/config/options.h"

#include <cstdlib>

namespace aon::session {
namespace {

using A = OptionArg;
using O = SessionOption;

// The agent's message without its "AON_X: " prefix: the user typed an option.
std::string WithoutVariable(const Status& s, AgentVar var) {
  const std::string prefix = std::string(AgentConfigVariable(var).env) + ": ";
  std::string m = s.message();
  if (m.rfind(prefix, 0) == 0) m.erase(0, prefix.size());
  return m;
}

StatusOr<std::string> CheckAsAgent(AgentVar var, std::string_view value) {
  if (value.empty()) return InvalidArgument("needs a value");
  Status s = CheckAgentVariable(var, value);
  if (!s.ok()) return Status(s.code(), WithoutVariable(s, var));
  return std::string(value);
}

// The named options, with the agent variables' pass-through options (their rows'
// FrontEndNames) placed before --merge-procs, the last named one.
std::vector<FrontEndOption> WithPassthroughOptions(std::vector<FrontEndOption> named) {
  std::vector<FrontEndOption> passthrough;
  for (const ConfigVariable& var : AgentConfigVariables()) {
    const FrontEndNames& fe = var.front_end;
    if (fe.run == nullptr && fe.spank == nullptr) continue;
    passthrough.push_back({PassthroughOption(var.id), fe.run, fe.run ? A::kRequired : A::kAbsent,
                           fe.spank, fe.spank ? A::kRequired : A::kAbsent, fe.value, fe.help,
                           nullptr, nullptr, true, var.id});
  }
  auto last = named.end();
  if (!named.empty() && named.back().id == O::kMergeProcs) --last;
  named.insert(last, passthrough.begin(), passthrough.end());
  return named;
}

}  // namespace

bool ParseOnOff(std::string_view v, bool* on) {
  if (v == "on" || v == "1" || v == "yes" || v == "true") {
    *on = true;
    return true;
  }
  if (v == "off" || v == "0" || v == "no" || v == "false") {
    *on = false;
    return true;
  }
  return false;
}

const std::vector<FrontEndOption>& FrontEndOptions() {
  // {id, aon-run, its arg, srun, its arg, value, help, aon-run's help, differs}
  static const std::vector<FrontEndOption> options = WithPassthroughOptions({
      {O::kOutput, "-o,--output", A::kRequired, "aon-output", A::kRequired, "DIR",
       "put each step's trace in DIR/aon-<job>.<step> (%u %U %j %s expanded; default: the site's "
       "output root, else the submit directory)",
       "job directory for the traces (created 0700; default ./aon-<job id>)",
       "aon-run's DIR is the job directory itself; srun's is where the step directories go, "
       "because one srun --aon in a batch script profiles each of its steps"},
      {O::kKinds, "--kinds", A::kRequired, "aon-kinds", A::kRequired, "LIST",
       "what to record: all, default (both: every kind), or a list of "
       "kernels,memcpy,memset,sync,api,nvtx,nccl,counters,ops",
       nullptr, nullptr},
      {O::kMemoryCap, "--memory-cap", A::kRequired, "aon-memory-cap", A::kRequired, "SIZE",
       "trace memory per rank (e.g. 64M, 1G; from 1M to 32G); beyond it records are dropped and "
       "counted",
       nullptr, nullptr},
      {O::kSource, "--source", A::kRequired, "aon-source", A::kRequired, "cupti|synthetic",
       "cupti = real GPUs; synthetic = a labeled FAKE GPU for CPU-only machines (made-up kernels "
       "and copies, emitted by aon-synthetic-app for demos and tests)",
       nullptr, nullptr},
      {O::kNccl, "--nccl", A::kRequired, "aon-nccl", A::kRequired,
       "default|channels|coll|proxy|off",
       "NCCL capture (AON is NCCL's profiler plugin): default = every collective and p2p "
       "operation, tied to the kernel that ran it, and the NCCL API calls (ncclGroupStart..End, "
       "ncclAllReduce, ncclSend, ...); channels = also per-channel GPU timing (makes NCCL slower "
       "for small messages); coll = operations only; proxy = default plus NCCL's network proxy "
       "operations and steps (one record per network step: costly for large transfers; none on a "
       "single node over NVLink); off = none (on is taken for default)",
       nullptr, nullptr},
      {O::kMode, "--mode", A::kRequired, "aon-mode", A::kRequired, "budgeted|full|flight",
       "budgeted (default) = NVTX, NCCL and step times always, GPU activity (CUPTI) in short "
       "capture windows on the same steps of every rank, spaced to cost at most "
       "--overhead-budget percent of step time; full = CUPTI all the time, every record reaches "
       "the rank files; flight = full capture kept in memory for the last --window seconds, "
       "written when a trigger fires (SIGUSR1 to aon-collector, a rank dying, the job failing, an "
       "NCCL stall, a step spike)",
       nullptr, nullptr, true, AgentVar::kMode},
      {O::kWindow, "--window", A::kRequired, nullptr, A::kAbsent, "SECONDS",
       "flight mode: seconds of history kept", nullptr,
       "srun's --aon-flight=SECONDS takes the same seconds and turns flight mode on"},
      {O::kFlight, nullptr, A::kAbsent, "aon-flight", A::kRequired, "SECONDS",
       "flight recorder: keep only the last SECONDS in memory and write them when something goes "
       "wrong (a task dies, an NCCL stall, a step-time spike, or aon ctl trigger DIR REASON)",
       nullptr, "aon-run spells it --mode flight --window SECONDS"},
      {O::kVerbose, "-v,--verbose", A::kFlag, "aon-verbose", A::kFlag, nullptr,
       "the agent reports its progress on stderr",
       "print the command and environment aon-run uses; the agent reports its progress",
       "a flag on both; aon-run's also prints what it runs (the agent's AON_VERBOSE is the same)"},
      {O::kProfile, nullptr, A::kAbsent, "aon", A::kOptional, "MODE",
       "Profile this job's GPUs with AON. MODE: on (default), full (also CUDA API calls), light "
       "(kernels and NVTX only), off",
       nullptr,
       "aon-run is itself the switch; srun's full and light are aon-run's --kinds all and "
       "--kinds kernels,nvtx"},
      {O::kMerge, "--no-merge", A::kFlag, "aon-merge", A::kRequired, "on|off",
       "merge the step's rank files when it ends (default on)",
       "leave the rank files; don't run aon-merge",
       "srun's options reach the srun steps of a batch script as text, so srun takes on|off "
       "where aon-run has the flag --no-merge (= --aon-merge=off)"},
      {O::kReport, "--no-report", A::kFlag, nullptr, A::kAbsent, nullptr,
       "don't run aon-report after the merge", nullptr,
       "srun runs aon-report after every merge where it is installed; --aon-merge=off skips "
       "both"},
      {O::kMergeProcs, "--merge-procs", A::kRequired, nullptr, A::kAbsent, "N",
       "merge with N processes on this host (aon-merge --procs N); default: one per host an Open "
       "MPI job names (-H/--hostfile), else 1",
       nullptr,
       "srun merges a step of several nodes inside an allocation with one aon-merge per node of "
       "the step, else with one process: the step already says where its files are"},
  });
  return options;
}

const FrontEndOption& FrontEndOptionOf(SessionOption option) {
  for (const FrontEndOption& o : FrontEndOptions())
    if (o.id == option) return o;
  // Unreachable for a named option (each has an entry: tested) or a variable's row that
  // names front-end options; another value is a caller's bug: answer the first entry,
  // whose checks then refuse it, rather than crash inside a front end.
  return FrontEndOptions().front();
}

std::string RunName(SessionOption option) {
  const char* names = FrontEndOptionOf(option).run;
  if (names == nullptr) return "";
  std::string_view all(names);
  const size_t comma = all.rfind(',');
  return std::string(comma == std::string_view::npos ? all : all.substr(comma + 1));
}

std::string SpankName(SessionOption option) {
  const char* name = FrontEndOptionOf(option).spank;
  return name == nullptr ? "" : std::string("--") + name;
}

StatusOr<std::string> CheckOptionValue(SessionOption option, std::string_view value) {
  if (const FrontEndOption& entry = FrontEndOptionOf(option); entry.passthrough) {
    return CheckAsAgent(entry.var, value);
  }
  switch (option) {
    case O::kOutput:
      if (value.empty()) return InvalidArgument("needs a directory");
      return std::string(value);
    case O::kKinds:
      if (value.empty()) return InvalidArgument("needs a list");
      return CheckAsAgent(AgentVar::kKinds, value);
    case O::kMemoryCap:
      return CheckAsAgent(AgentVar::kMemoryCap, value);
    case O::kSource:
      return CheckAsAgent(AgentVar::kSource, value);
    case O::kNccl:
      // The SPANK option took on|off before it took the agent's five modes.
      return CheckAsAgent(AgentVar::kNccl, value == "on" ? std::string_view("default") : value);
    case O::kWindow:
    case O::kFlight:
      return CheckAsAgent(AgentVar::kWindow, value);
    default:
      // Only the passthrough options (the table's `passthrough`, checked above)
      // have no case: another one here is an option added without its check.
      return Internal(RunName(option) + SpankName(option) +
                      ": an option without a passthrough variable and without a check "
                      "(session/options.cc, CheckOptionValue)");
    case O::kVerbose: {
      char* end = nullptr;
      const std::string v(value);
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 0 || n > 100)
        return InvalidArgument("'" + v + "' is not a count of 0 or more");
      return v;
    }
    case O::kProfile:
      for (std::string_view mode : {"on", "full", "light", "off"})
        if (value == mode) return std::string(value);
      return InvalidArgument("unknown mode '" + std::string(value) + "' (off, on, full or light)");
    case O::kMerge:
    case O::kReport: {
      bool on = true;
      if (!ParseOnOff(value, &on)) return InvalidArgument("expected on or off");
      return std::string(on ? "on" : "off");
    }
    case O::kMergeProcs: {
      char* end = nullptr;
      const std::string v(value);
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 4096)
        return InvalidArgument("'" + v + "' is not a number of processes in [1, 4096]");
      return v;
    }
  }
  return Internal("unknown option");
}

Status ApplyOption(AgentSettings& settings, SessionOption option, std::string_view value) {
  AON_ASSIGN_OR_RETURN(std::string canonical, CheckOptionValue(option, value));
  if (const FrontEndOption& entry = FrontEndOptionOf(option); entry.passthrough) {
    return settings.Set(entry.var, canonical);
  }
  switch (option) {
    case O::kKinds:
      return settings.Set(AgentVar::kKinds, canonical);
    case O::kMemoryCap:
      return settings.Set(AgentVar::kMemoryCap, canonical);
    case O::kSource:
      return settings.Set(AgentVar::kSource, canonical);
    case O::kNccl:
      return settings.Set(AgentVar::kNccl, canonical);
    case O::kWindow:
      return settings.Set(AgentVar::kWindow, canonical);
    case O::kFlight:
      AON_RETURN_IF_ERROR(settings.Set(AgentVar::kMode, "flight"));
      return settings.Set(AgentVar::kWindow, canonical);
    case O::kVerbose:
      return settings.Set(AgentVar::kVerbose, canonical);
    case O::kOutput:
    case O::kProfile:
    case O::kMerge:
    case O::kReport:
    case O::kMergeProcs:
    default:  // the passthrough options, set above
      break;
  }
  return Internal(RunName(option) + SpankName(option) + " sets no agent variable");
}

}  // namespace aon::session
