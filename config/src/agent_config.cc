#include "aon/config/agent_config.h"

#include <cstdio>
#include <cstdlib>
#include <span>

namespace aon {
namespace {

std::string Text(std::string_view v) { return std::string(v); }

// "1", "86400", "1.01": the shortest form, for messages.
std::string Number(double d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", d);
  return buf;
}

// A number in [min, max]; the error names the variable, the value and the range.
Status ParseBounded(const char* name, std::string_view value, double min, double max, double* out) {
  const std::string v(value);
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != 0 || !(d >= min && d <= max)) {
    return InvalidArgument(std::string(name) + ": '" + v + "' is not a number in [" + Number(min) +
                           ", " + Number(max) + "]");
  }
  *out = d;
  return Status::Ok();
}

Status ParseOutputDir(std::string_view v, AgentConfig* c) {
  c->output_dir = Text(v);
  return Status::Ok();
}

Status ParseKindsVar(std::string_view v, AgentConfig* c) {
  AON_ASSIGN_OR_RETURN(c->kinds, ParseKinds(v));
  return Status::Ok();
}

Status ParseMemoryCap(std::string_view v, AgentConfig* c) {
  auto bytes = ParseSize(v);
  if (!bytes.ok()) return InvalidArgument("AON_MEMORY_CAP: " + bytes.status().message());
  if (*bytes < kMinMemoryCapBytes)
    return InvalidArgument("AON_MEMORY_CAP: '" + Text(v) + "' is below the 1M minimum");
  if (*bytes > kMaxMemoryCapBytes)
    return InvalidArgument("AON_MEMORY_CAP: '" + Text(v) +
                           "' is above the 32G maximum (the record ring, half the cap, holds at "
                           "most 16G)");
  c->memory_cap_bytes = *bytes;
  return Status::Ok();
}

// The index of `v` among `choices`, or -1.
int ChoiceIndex(std::string_view v, std::span<const std::string_view> choices) {
  for (size_t i = 0; i < choices.size(); ++i) {
    if (v == choices[i]) return static_cast<int>(i);
  }
  return -1;
}

Status ParseSource(std::string_view v, AgentConfig* c) {
  const int i = ChoiceIndex(v, kGpuSources);
  if (i < 0)
    return InvalidArgument("AON_SOURCE: unknown source '" + Text(v) + "' (cupti or synthetic)");
  c->source = static_cast<GpuSource>(i);
  return Status::Ok();
}

Status ParseVerbose(std::string_view v, AgentConfig* c) {
  double level = 0;
  AON_RETURN_IF_ERROR(ParseBounded("AON_VERBOSE", v, 0, 100, &level));
  if (level != static_cast<int>(level))
    return InvalidArgument("AON_VERBOSE: '" + Text(v) + "' is not a whole number");
  c->verbose = static_cast<int>(level);
  return Status::Ok();
}

Status ParseJobId(std::string_view v, AgentConfig* c) {
  c->job_id = Text(v);
  return Status::Ok();
}

Status ParseLauncherParentPid(std::string_view v, AgentConfig* c) {
  if (v.empty()) {
    c->launcher_parent_pid = 0;
    return Status::Ok();
  }
  // A pid: 1 .. 2^22 (Linux's largest pid_max); "12abc" or "-5" is not one.
  double pid = 0;
  AON_RETURN_IF_ERROR(ParseBounded("AON_LAUNCHER_PARENT_PID", v, 1, 4194304, &pid));
  if (pid != static_cast<double>(static_cast<long>(pid)))
    return InvalidArgument("AON_LAUNCHER_PARENT_PID: '" + Text(v) + "' is not a process id");
  c->launcher_parent_pid = static_cast<long>(pid);
  return Status::Ok();
}

Status ParseNccl(std::string_view v, AgentConfig* c) {
  if (const int i = ChoiceIndex(v, kNcclModes); i >= 0) {
    c->nccl = static_cast<NcclMode>(i);
    return Status::Ok();
  }
  return InvalidArgument("AON_NCCL: unknown mode '" + Text(v) +
                         "' (default, channels, coll, proxy or off)");
}

// `*out` = the choice `v` names, as its enum (whose values are in the order of `choices`).
template <typename E>
Status ParseChoice(const char* name, std::string_view v, std::span<const std::string_view> choices,
                   E* out) {
  if (const int i = ChoiceIndex(v, choices); i >= 0) {
    *out = static_cast<E>(i);
    return Status::Ok();
  }
  std::string known;
  for (std::string_view choice : choices) known += (known.empty() ? "" : ", ") + Text(choice);
  return InvalidArgument(std::string(name) + ": unknown value '" + Text(v) + "' (" + known + ")");
}

Status ParseMode(std::string_view v, AgentConfig* c) {
  int i = 0;
  AON_RETURN_IF_ERROR(ParseChoice("AON_MODE", v, kCaptureModes, &i));
  c->mode = static_cast<CaptureMode>(i + 1);  // kUnknown is 0
  return Status::Ok();
}

Status ParseOverheadBudget(std::string_view v, AgentConfig* c) {
  double percent = 0;
  AON_RETURN_IF_ERROR(ParseBounded("AON_OVERHEAD_BUDGET", v, 0.01, 100, &percent));
  c->overhead_budget = percent / 100;
  return Status::Ok();
}

Status ParseCaptureSteps(std::string_view v, AgentConfig* c) {
  if (v == "auto") {
    c->capture_steps = 0;
    return Status::Ok();
  }
  double n = 0;
  AON_RETURN_IF_ERROR(ParseBounded("AON_CAPTURE_STEPS", v, 1, 1000, &n));
  if (n != static_cast<double>(static_cast<int64_t>(n)))
    return InvalidArgument("AON_CAPTURE_STEPS: '" + Text(v) +
                           "' is not 'auto' or a whole number of steps");
  c->capture_steps = static_cast<int64_t>(n);
  return Status::Ok();
}

Status ParseCapturePeriod(std::string_view v, AgentConfig* c) {
  double n = 0;
  AON_RETURN_IF_ERROR(ParseBounded("AON_CAPTURE_PERIOD", v, 0, 1 << 24, &n));
  const auto p = static_cast<int64_t>(n);
  // Powers of two keep every rank's windows nested (docs/always-on.md).
  if (n != static_cast<double>(p) || (p != 0 && (p & (p - 1)) != 0))
    return InvalidArgument("AON_CAPTURE_PERIOD: '" + Text(v) +
                           "' is not 0 (set by the budget) or a power of two");
  c->capture_period = p;
  return Status::Ok();
}

Status ParseStepSource(std::string_view v, AgentConfig* c) {
  return ParseChoice("AON_STEP_SOURCE", v, kStepSources, &c->step_source);
}

Status ParseStepRangeNames(std::string_view v, AgentConfig* c) {
  c->step_range = Text(v);
  return Status::Ok();
}

Status ParseTimeSlot(std::string_view v, AgentConfig* c) {
  return ParseBounded("AON_TIME_SLOT", v, 0.01, 3600, &c->time_slot_s);
}

Status ParseCounters(std::string_view v, AgentConfig* c) {
  return ParseChoice("AON_COUNTERS", v, kCounterModes, &c->counters);
}

Status ParsePythonHook(std::string_view v, AgentConfig* c) {
  int value = 0;
  AON_RETURN_IF_ERROR(ParseChoice("AON_PYTHON_HOOK", v, kOnOff, &value));
  c->python_hook = value == 0;  // kOnOff[0] == "on"
  return Status::Ok();
}

Status ParseCountersInterval(std::string_view v, AgentConfig* c) {
  double ms = 0;
  AON_RETURN_IF_ERROR(ParseBounded("AON_COUNTERS_INTERVAL", v, 10, 60000, &ms));
  if (ms != static_cast<double>(static_cast<int64_t>(ms)))
    return InvalidArgument("AON_COUNTERS_INTERVAL: '" + Text(v) +
                           "' is not a whole number of milliseconds");
  c->counters_interval_ms = static_cast<int64_t>(ms);
  return Status::Ok();
}

Status ParseHostSampleHz(std::string_view v, AgentConfig* c) {
  double hz = 0;
  AON_RETURN_IF_ERROR(ParseBounded("AON_HOST_SAMPLE_HZ", v, 0, 10000, &hz));
  if (hz != static_cast<double>(static_cast<int64_t>(hz)))
    return InvalidArgument("AON_HOST_SAMPLE_HZ: '" + Text(v) + "' is not a whole number of hertz");
  c->host_sample_hz = static_cast<int64_t>(hz);
  return Status::Ok();
}

Status ParseCountersSampleInterval(std::string_view v, AgentConfig* c) {
  double us = 0;
  AON_RETURN_IF_ERROR(ParseBounded("AON_COUNTERS_SAMPLE_INTERVAL", v, 20, 100000, &us));
  if (us != static_cast<double>(static_cast<int64_t>(us)))
    return InvalidArgument("AON_COUNTERS_SAMPLE_INTERVAL: '" + Text(v) +
                           "' is not a whole number of microseconds");
  c->counters_sample_us = static_cast<int64_t>(us);
  return Status::Ok();
}

Status ParseWindow(std::string_view v, AgentConfig* c) {
  return ParseBounded("AON_WINDOW", v, 1, 86400, &c->window_s);
}

Status ParseFlushInterval(std::string_view v, AgentConfig* c) {
  double ms = 0;
  AON_RETURN_IF_ERROR(ParseBounded("AON_FLUSH_INTERVAL", v, 10, 600000, &ms));
  c->flush_interval_ms = static_cast<int64_t>(ms);
  return Status::Ok();
}

Status ParseCollector(std::string_view v, AgentConfig* c) {
  c->collector = Text(v);
  return Status::Ok();
}

Status ParseNcclStall(std::string_view v, AgentConfig* c) {
  return ParseBounded("AON_FLIGHT_NCCL_STALL", v, 0, 86400, &c->flight_nccl_stall_s);
}

Status ParseStepRange(std::string_view v, AgentConfig* c) {
  c->flight_step_range = Text(v);
  return Status::Ok();
}

Status ParseStepFactor(std::string_view v, AgentConfig* c) {
  return ParseBounded("AON_FLIGHT_STEP_FACTOR", v, 1.01, 1000, &c->flight_step_factor);
}

}  // namespace

const char* ConfigTypeName(ConfigType type) {
  switch (type) {
    case ConfigType::kPath:
      return "path";
    case ConfigType::kText:
      return "text";
    case ConfigType::kKinds:
      return "kinds";
    case ConfigType::kSize:
      return "size";
    case ConfigType::kInteger:
      return "integer";
    case ConfigType::kChoice:
      return "choice";
    case ConfigType::kSeconds:
      return "seconds";
    case ConfigType::kNumber:
      return "number";
  }
  return "?";
}

const std::array<ConfigVariable, kAgentConfigVariableCount>& AgentConfigVariables() {
  using T = ConfigType;
  using V = AgentVar;
  static const std::array<ConfigVariable, kAgentConfigVariableCount> vars = {{
      {V::kOutputDir, "AON_OUTPUT_DIR", T::kPath, "",
       "directory for the per-rank trace files (set by aon-run / srun --aon)", ParseOutputDir,
       false},
      {V::kKinds, "AON_KINDS", T::kKinds, "default",
       "record kinds to capture: all, default (every kind), or a list of "
       "kernels,memcpy,memset,sync,api,nvtx,nccl,steps,counters,ops,host_samples (ops: framework "
       "operators from aon_op_begin, recorded in capture windows with the GPU work they launch; "
       "host_samples: stacks of the application's threads, docs/host-sampling.md)",
       ParseKindsVar, false},
      {V::kMemoryCap, "AON_MEMORY_CAP", T::kSize, "64M",
       "hard cap on the agent's record memory per rank (1M to 32G); beyond it records are dropped "
       "and counted",
       ParseMemoryCap, false},
      {V::kSource, "AON_SOURCE", T::kChoice, "cupti",
       "GPU activity source: cupti (real GPUs) or synthetic (labeled fake GPU for CPU-only demos "
       "and tests)",
       ParseSource, false},
      {V::kVerbose, "AON_VERBOSE", T::kInteger, "0", "1 prints the agent's progress to stderr",
       ParseVerbose, false},
      {V::kJobId, "AON_JOB_ID", T::kText, "",
       "job id written into every rank file (default: from Slurm/Open MPI)", ParseJobId, false},
      {V::kLauncherParentPid, "AON_LAUNCHER_PARENT_PID", T::kInteger, "",
       "set by aon-run for launchers such as torchrun: a process whose parent has this pid is the "
       "launcher itself, not a rank, and records nothing",
       ParseLauncherParentPid, false},
      {V::kNccl, "AON_NCCL", T::kChoice, "default",
       "NCCL capture when AON is NCCL's profiler plugin: default (operations, each tied to the "
       "kernel that ran it), channels (also per-channel GPU timing; costly for small messages), "
       "coll (operations only), proxy (default plus NCCL's network proxy operations and steps; "
       "per network step, none on a single node over NVLink), off. Every mode but off also "
       "records the user's NCCL API calls (group, collective and p2p calls)",
       ParseNccl, false},
      {V::kMode, "AON_MODE", T::kChoice, "budgeted",
       "budgeted: NVTX, NCCL and step times always, CUPTI only in capture windows of "
       "AON_CAPTURE_STEPS steps on the same steps of every rank, as often as AON_OVERHEAD_BUDGET "
       "allows; full: CUPTI all the time, every record reaches the rank file; flight: full "
       "capture kept in memory for the last AON_WINDOW seconds and written when a trigger fires",
       ParseMode, false},
      {V::kWindow, "AON_WINDOW", T::kSeconds, "60", "flight mode: seconds of history kept",
       ParseWindow, false},
      {V::kFlushInterval, "AON_FLUSH_INTERVAL", T::kNumber, "1000",
       "milliseconds between the collector's appends to the rank files", ParseFlushInterval, false},
      {V::kCollector, "AON_COLLECTOR", T::kPath, "",
       "path of aon-collector (default: ../bin/aon-collector next to the agent library); 'off' "
       "writes the rank file from inside the process at exit (degraded: a killed rank loses it)",
       ParseCollector, false},
      {V::kFlightNcclStall, "AON_FLIGHT_NCCL_STALL", T::kSeconds, "60",
       "flight mode: seconds without a new NCCL operation (after some were seen) that trigger a "
       "dump; 0 disables",
       ParseNcclStall, false},
      {V::kFlightStepRange, "AON_FLIGHT_STEP_RANGE", T::kText, "step",
       "flight mode: NVTX ranges whose name contains this are training steps; a step longer than "
       "AON_FLIGHT_STEP_FACTOR x the median of recent steps triggers a dump; empty disables",
       ParseStepRange, true},
      {V::kFlightStepFactor, "AON_FLIGHT_STEP_FACTOR", T::kNumber, "3",
       "flight mode: step-time spike factor (see AON_FLIGHT_STEP_RANGE)", ParseStepFactor, false},
      {V::kOverheadBudget,
       "AON_OVERHEAD_BUDGET",
       T::kNumber,
       "1",
       "budgeted mode: percent of step time capture windows may cost; the agent measures the "
       "cost and spaces the windows to stay inside it",
       ParseOverheadBudget,
       false,
       {"--overhead-budget", "aon-overhead-budget", "PCT",
        "budgeted mode: percent of step time AON may cost (default 1); the agent measures what "
        "its windows cost and spaces them to stay inside it"}},
      {V::kCaptureSteps,
       "AON_CAPTURE_STEPS",
       T::kText,
       "auto",
       "budgeted mode: steps per capture window; auto: at least 3, longer (4 to 32) where "
       "the overhead budget captures more steps that way (a window's fixed cost spread over "
       "more steps)",
       ParseCaptureSteps,
       false,
       {"--capture-steps", "aon-capture-steps", "auto|N",
        "budgeted mode: steps per capture window (default auto: 3 or more, as the overhead "
        "budget captures most steps)"}},
      {V::kCapturePeriod,
       "AON_CAPTURE_PERIOD",
       T::kInteger,
       "0",
       "budgeted mode: a window every N steps (a power of two); 0 lets the budget choose",
       ParseCapturePeriod,
       false,
       {"--capture-period", "aon-capture-period", "N",
        "budgeted mode: a capture window every N steps (a power of two); default 0: as often as "
        "the overhead budget allows"}},
      {V::kStepSource,
       "AON_STEP_SOURCE",
       T::kChoice,
       "auto",
       "what marks steps: auto (the first of api, pytorch, jax, nvtx, xla, nccl, time that "
       "does), "
       "api (aon_step()), pytorch (aon_framework_step(): AON's PyTorch optimizer hook), jax "
       "(aon_jax_step(): AON's JAX hook, at each jax.profiler.StepTraceAnnotation), xla "
       "(executions of the XLA module run once per step), nvtx "
       "(AON_STEP_RANGE), nccl (collectives of the first communicator), time (AON_TIME_SLOT "
       "slots on the synchronized clock)",
       ParseStepSource,
       false,
       {"--step-source", "aon-step-source", "auto|api|pytorch|jax|nvtx|xla|nccl|time",
        "what marks the steps capture windows align on: auto (default: the first of api, "
        "pytorch, jax, nvtx, xla, nccl, time that does), api (aon_step()), pytorch (AON's PyTorch "
        "optimizer hook: aon_framework_step()), jax (AON's JAX hook: each "
        "jax.profiler.StepTraceAnnotation), xla (executions of the XLA module a JAX "
        "program runs once per step), nvtx (ranges named by "
        "--step-range), nccl (collectives of the first communicator), time (one-second slots on "
        "the synchronized clock)"}},
      {V::kStepRange,
       "AON_STEP_RANGE",
       T::kText,
       "step,iteration,iter,train_step,train",
       "NVTX ranges that mark steps: comma-separated name prefixes (case-insensitive), each "
       "followed by the end of the name, a digit or one of ' _-:#'",
       ParseStepRangeNames,
       false,
       {"--step-range", "aon-step-range", "NAMES",
        "NVTX ranges that mark steps: comma-separated name prefixes (default "
        "step,iteration,iter,train_step,train), matched case-insensitively before a digit, a "
        "space or the end"}},
      {V::kTimeSlot,
       "AON_TIME_SLOT",
       T::kSeconds,
       "1",
       "step length of the time source (seconds on the synchronized clock)",
       ParseTimeSlot,
       false,
       {"--time-slot", "aon-time-slot", "SECONDS",
        "budgeted mode: the step length of the time source, which marks the steps of a "
        "program that marks none itself (no aon_step, PyTorch hook, NVTX step range or NCCL): "
        "slots of SECONDS on the synchronized clock, the same on every rank (0.01 to 3600; "
        "default 1)"}},
      {V::kCounters,
       "AON_COUNTERS",
       T::kChoice,
       "auto",
       "GPU counters: auto (every tier the node allows: NVML GPM metrics of every GPU, read by "
       "the node collector outside the application, and CUPTI PM sampling inside capture "
       "windows), gpm (GPM only), off",
       ParseCounters,
       false,
       {"--counters", "aon-counters", "auto|gpm|off",
        "GPU counters: auto (default: every tier the node allows: NVML GPM metrics of every GPU "
        "of the node, read outside the application, and CUPTI PM sampling in capture windows), "
        "gpm (GPM only), off"}},
      {V::kCountersInterval,
       "AON_COUNTERS_INTERVAL",
       T::kNumber,
       "100",
       "milliseconds between two GPM samples of each GPU (10 to 60000)",
       ParseCountersInterval,
       false,
       {"--counters-interval", "aon-counters-interval", "MS",
        "milliseconds between two GPM samples of each GPU (default 100)"}},
      {V::kCountersSampleInterval,
       "AON_COUNTERS_SAMPLE_INTERVAL",
       T::kNumber,
       "100",
       "microseconds of GPU time between two PM samples inside capture windows (20 to 100000)",
       ParseCountersSampleInterval,
       false,
       {"--counters-sample-interval", "aon-counters-sample-interval", "US",
        "microseconds of GPU time between two PM samples in capture windows (default 100)"}},
      {V::kPythonHook,
       "AON_PYTHON_HOOK",
       T::kChoice,
       "on",
       "on: Python processes load AON's hook (PYTHONPATH gets AON's aon-python directory): "
       "PyTorch steps from the optimizer, operator and module ranges in capture windows, "
       "import aon; off: Python is left as it is",
       ParsePythonHook,
       false,
       {"--python-hook", "aon-python-hook", "on|off",
        "Python processes load AON's PyTorch hook (steps from the optimizer, operator and module "
        "ranges in capture windows; docs/pytorch.md): on (default) or off"}},
      {V::kHostSampleHz,
       "AON_HOST_SAMPLE_HZ",
       T::kInteger,
       "1000",
       "host stack samples per second of each thread's CPU time, in capture windows "
       "(docs/host-sampling.md; 0 to 10000, 0 = off)",
       ParseHostSampleHz,
       false,
       {"--host-sample-hz", "aon-host-sample-hz", "HZ",
        "host stack samples per CPU-second of each thread in capture windows (default 1000, 0 = "
        "off; docs/host-sampling.md)"}},
  }};
  return vars;
}

AgentConfig::AgentConfig()
    : AgentConfig([]() -> const AgentConfig& {
        static const AgentConfig defaults{ParseDefaults{}};
        return defaults;
      }()) {}

AgentConfig::AgentConfig(ParseDefaults) {
  for (const ConfigVariable& var : AgentConfigVariables()) {
    // A row left out of the table (all zero) is found by
    // AgentVariables.TableIsIndexedByItsIdsAndSelfDescribing; skip it here.
    if (var.parse == nullptr || var.default_value == nullptr) continue;
    if (var.default_value[0] == '\0') continue;  // the field's zero value is the default
    // A default its own parser refuses is a bug of the table, caught by
    // CommonConfig.EveryDefaultIsWhatItsParserMakesOfIt; the field keeps its zero.
    (void)var.parse(var.default_value, this);
  }
}

const ConfigVariable& AgentConfigVariable(AgentVar var) {
  return AgentConfigVariables()[static_cast<size_t>(var)];
}

Status CheckAgentVariable(AgentVar var, std::string_view value) {
  const ConfigVariable& v = AgentConfigVariable(var);
  if (value.empty() && !v.empty_is_value) return Status::Ok();
  AgentConfig scratch;
  return v.parse(value, &scratch);
}

std::string AgentConfig::KindsString() const {
  std::string s;
  for (size_t i = 0; i < kRecordKindCount; ++i) {
    // Bookkeeping kinds follow the kind they serve and are not named.
    if (!kinds[i] || RecordKindScope(static_cast<RecordKind>(i)) != KindScope::kTimeline) continue;
    if (!s.empty()) s += ',';
    s += RecordKindName(static_cast<RecordKind>(i));
  }
  return s;
}

StatusOr<std::array<bool, kRecordKindCount>> ParseKinds(std::string_view list) {
  std::array<bool, kRecordKindCount> kinds{};
  auto finish = [&] {
    const auto on = [&](RecordKind k) { return kinds[static_cast<size_t>(k)]; };
    // Correlation records are what tie API calls to GPU work, and framework ops
    // to the GPU work they launched: keep them with either.
    const bool gpu_work = on(RecordKind::kKernel) || on(RecordKind::kMemcpy) ||
                          on(RecordKind::kMemset) || on(RecordKind::kApi);
    if (on(RecordKind::kApi) || on(RecordKind::kKernel) || (on(RecordKind::kOps) && gpu_work)) {
      kinds[static_cast<size_t>(RecordKind::kExternalCorrelation)] = true;
    }
    // Steps are the continuous tier's backbone (one record per step, and the
    // capture windows' alignment): always recorded.
    kinds[static_cast<size_t>(RecordKind::kSteps)] = true;
    // Ops captured into CUDA graphs go with ops and the kernels that replay them.
    kinds[static_cast<size_t>(RecordKind::kGraphOps)] =
        on(RecordKind::kOps) && on(RecordKind::kKernel);
    // NCCL's CUDA-graph bookkeeping goes with NCCL.
    kinds[static_cast<size_t>(RecordKind::kNcclGraph)] =
        kinds[static_cast<size_t>(RecordKind::kNccl)];
    return kinds;
  };
  if (list == "all" || list == "default" || list.empty()) {
    kinds.fill(true);
    return finish();
  }
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view item = list.substr(pos, comma - pos);
    RecordKind k;
    if (item == "kernel") item = "kernels";
    if (item == "runtime" || item == "driver") item = "api";
    if (!ParseRecordKind(item, &k) || RecordKindScope(k) != KindScope::kTimeline) {
      std::string known;
      for (size_t i = 0; i < kTimelineKindCount; ++i) {
        known += RecordKindName(static_cast<RecordKind>(i));
        known += ", ";
      }
      return InvalidArgument("AON_KINDS: unknown record kind '" + std::string(item) +
                             "' (known: " + known + "all)");
    }
    kinds[static_cast<size_t>(k)] = true;
    pos = comma + 1;
  }
  return finish();
}

StatusOr<uint64_t> ParseSize(std::string_view text) {
  if (text.empty()) return InvalidArgument("empty size");
  size_t i = 0;
  uint64_t v = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    const auto digit = static_cast<uint64_t>(text[i] - '0');
    // Checked before multiplying: a wrapped product can still compare >= v.
    if (v > (UINT64_MAX - digit) / 10)
      return InvalidArgument("size '" + std::string(text) + "' overflows");
    v = v * 10 + digit;
    ++i;
  }
  if (i == 0)
    return InvalidArgument("size '" + std::string(text) + "' does not start with a number");
  std::string_view unit = text.substr(i);
  uint64_t mult = 1;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "K" || unit == "KiB" || unit == "k")
    mult = 1ull << 10;
  else if (unit == "M" || unit == "MiB" || unit == "m")
    mult = 1ull << 20;
  else if (unit == "G" || unit == "GiB" || unit == "g")
    mult = 1ull << 30;
  else
    return InvalidArgument("size '" + std::string(text) + "' has an unknown unit (use K, M or G)");
  if (v > UINT64_MAX / mult) return InvalidArgument("size '" + std::string(text) + "' overflows");
  return v * mult;
}

StatusOr<AgentConfig> LoadAgentConfig(const EnvLookupFn& lookup) {
  EnvLookupFn env = lookup ? lookup : EnvLookupFn([](const char* n) { return std::getenv(n); });
  AgentConfig c;  // the defaults
  for (const ConfigVariable& var : AgentConfigVariables()) {
    const char* value = env(var.env);
    if (value == nullptr || (*value == '\0' && !var.empty_is_value)) continue;
    AON_RETURN_IF_ERROR(var.parse(value, &c));
  }
  return c;
}

}  // namespace aon
