#include "aon/launcher/launch_plan.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include "aon/base/secure_fs.h"
#include "aon/base/spawn.h"
#include "aon/config/options.h"
#include "aon/config/tool_paths.h"

namespace aon::launcher {
namespace {

namespace fs = std::filesystem;

const char* Lookup(const EnvLookupFn& env, const char* name) {
  return env ? env(name) : std::getenv(name);
}

std::string Basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::vector<std::string> Split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t next = text.find(sep, pos);
    out.emplace_back(text.substr(pos, next == std::string_view::npos ? next : next - pos));
    if (next == std::string_view::npos) break;
    pos = next + 1;
  }
  return out;
}

std::string Join(const std::vector<std::string>& items, char sep) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// ---- srun --export ----------------------------------------------------------
//
// To find the user's --export we must know where srun's own options end and the
// program begins, which needs to know which options take a separate value.
// These tables follow srun(1) (checked against Slurm's doc/man/man1/srun.1, 2026); an option
// missing from them only matters if it appears before --export (we then stop scanning early) or,
// for a long flag taken as needing a value, if the program's own arguments
// contain --export.

// Short options that take a value (-n 4, -n4).
constexpr std::string_view kSrunShortWithValue = "ABCDFGJLMNSTWbcdeimnopqrtwx";
// Long options that take no value or only an attached one (--exclusive[=user]);
// every other long option written without '=' consumes the next word.
const std::set<std::string, std::less<>>& SrunLongFlags() {
  static const std::set<std::string, std::less<>> flags = {
      "async",
      "bcast",
      "compress",
      "consolidate-segments",
      "contiguous",
      "disable-status",
      "exact",
      "exclusive",
      "external-launcher",
      "help",
      "hold",
      "immediate",
      "kill-on-bad-exit",
      "label",
      "multi-prog",
      "nice",
      "no-allocate",
      "no-kill",
      "oom-kill-step",
      "overcommit",
      "overlap",
      "oversubscribe",
      "parsable",
      "preserve-env",
      "propagate",
      "pty",
      "quiet",
      "quit-on-interrupt",
      "reboot",
      "resv-ports",
      "send-libs",
      "spread-job",
      "spread-segments",
      "stepmgr",
      "test-only",
      "unbuffered",
      "usage",
      "use-min-nodes",
      "verbose",
      "version",
      "wait-for-children",
      "whole",
      "x11",
  };
  return flags;
}

// Where the user's --export is in an srun command line: the index of the word
// that holds its value, and whether that word is "--export=VALUE" (prefix to
// keep) or the bare VALUE after "--export". The last one wins, as in getopt.
struct ExportArg {
  size_t index = 0;
  bool attached = false;
};

std::optional<ExportArg> FindSrunExport(const std::vector<std::string>& command) {
  std::optional<ExportArg> found;
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string& word = command[i];
    if (word == "--" || word.size() < 2 || word[0] != '-') break;  // the program starts here
    if (word.rfind("--", 0) == 0) {
      std::string_view name = std::string_view(word).substr(2);
      size_t eq = name.find('=');
      if (eq != std::string_view::npos) {
        if (name.substr(0, eq) == "export") found = ExportArg{i, true};
        continue;
      }
      if (name == "export") {
        if (i + 1 < command.size()) found = ExportArg{i + 1, false};
        ++i;
        continue;
      }
      if (!SrunLongFlags().contains(name)) ++i;  // its value is the next word
      continue;
    }
    // A cluster of short options: -l, -n4, -ln 4.
    for (size_t c = 1; c < word.size(); ++c) {
      if (kSrunShortWithValue.find(word[c]) == std::string_view::npos) continue;
      if (c + 1 == word.size()) ++i;  // value in the next word
      break;
    }
  }
  return found;
}

// The user's export list with our variable names added, or nullopt when it
// already exports everything.
std::optional<std::string> ExtendExportList(std::string_view list,
                                            const std::vector<EnvVar>& vars) {
  std::vector<std::string> items = Split(list, ',');
  if (!items.empty() && EqualsIgnoreCase(items[0], "ALL")) return std::nullopt;
  // NONE cannot be combined with names; the plain list form means "SLURM_*
  // plus these", which is NONE plus ours.
  std::erase_if(items, [](const std::string& item) {
    return item.empty() || EqualsIgnoreCase(item, "NONE");
  });
  std::set<std::string, std::less<>> listed;
  for (const std::string& item : items) listed.insert(item.substr(0, item.find('=')));
  for (const EnvVar& var : vars) {
    // A value the user exported explicitly wins over ours.
    if (!listed.contains(var.name)) items.push_back(var.name);
  }
  return Join(items, ',');
}

std::vector<std::string> RewriteSrun(const std::vector<std::string>& command,
                                     const std::vector<EnvVar>& vars, const EnvLookupFn& env) {
  std::vector<std::string> out = command;
  if (std::optional<ExportArg> arg = FindSrunExport(command)) {
    std::string& word = out[arg->index];
    std::string prefix = arg->attached ? "--export=" : "";
    std::string_view value = std::string_view(word).substr(prefix.size());
    if (std::optional<std::string> extended = ExtendExportList(value, vars))
      word = prefix + *extended;
    return out;
  }
  // No --export: srun takes the mode from SLURM_EXPORT_ENV (sbatch --export
  // sets it for the steps of a batch job), else ALL.
  const char* inherited = Lookup(env, "SLURM_EXPORT_ENV");
  if (inherited != nullptr && *inherited != '\0') {
    if (std::optional<std::string> extended = ExtendExportList(inherited, vars))
      out.insert(out.begin() + 1, "--export=" + *extended);
  }
  return out;
}

// Open MPI built with CUDA support (as on Ubuntu) calls cuInit inside mpirun
// itself: with the injection variables in its environment the agent would run
// in mpirun too and write a bogus "rank 0" file. So for Open MPI they are given
// to the ranks only, as -x NAME=VALUE, and kept out of mpirun's environment.
// Open MPI's -x parser does not understand quoting, so that is done only for
// values made of plain path characters; others fall back to -x NAME.
bool PassedByValueToOpenMpiRanks(const EnvVar& var) {
  if (var.name != "CUDA_INJECTION64_PATH" && var.name != "NVTX_INJECTION64_PATH") return false;
  return !var.value.empty() && std::all_of(var.value.begin(), var.value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '.' || c == '_' ||
           c == '-' || c == '+';
  });
}

std::vector<std::string> RewriteOpenMpi(const std::vector<std::string>& command,
                                        const std::vector<EnvVar>& vars) {
  std::vector<std::string> out;
  out.reserve(command.size() + 2 * vars.size());
  out.push_back(command[0]);
  for (const EnvVar& var : vars) {
    out.push_back("-x");
    out.push_back(PassedByValueToOpenMpiRanks(var) ? var.name + "=" + var.value : var.name);
  }
  out.insert(out.end(), command.begin() + 1, command.end());
  return out;
}

// Open MPI options that take a value (so that the value is not taken for the
// application); the host options are handled separately.
bool OpenMpiOptionTakesValue(std::string_view w) {
  static const std::set<std::string_view> kWithValue = {"-np",
                                                        "-n",
                                                        "-c",
                                                        "--np",
                                                        "-N",
                                                        "-npernode",
                                                        "--npernode",
                                                        "-npersocket",
                                                        "--map-by",
                                                        "-map-by",
                                                        "--bind-to",
                                                        "-bind-to",
                                                        "--rank-by",
                                                        "-rank-by",
                                                        "-x",
                                                        "--output-filename",
                                                        "-output-filename",
                                                        "--wdir",
                                                        "-wdir",
                                                        "--prefix",
                                                        "-prefix",
                                                        "--report-bindings-file",
                                                        "--timeout",
                                                        "-timeout",
                                                        "--cpus-per-proc",
                                                        "-cpus-per-proc",
                                                        "--personality",
                                                        "--preload-files",
                                                        "-s",
                                                        "--path",
                                                        "-path",
                                                        "--launch-agent",
                                                        "-am",
                                                        "--am",
                                                        "--app",
                                                        "-app",
                                                        "--tune",
                                                        "-tune"};
  return kWithValue.count(w) > 0;
}

// A job id from the environment, made safe as a path component.
std::string SanitizeForPath(std::string_view text) {
  std::string out;
  for (char c : text) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    out += ok ? c : '_';
  }
  return out;
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

const char* LauncherKindName(LauncherKind kind) {
  switch (kind) {
    case LauncherKind::kOpenMpi:
      return "openmpi";
    case LauncherKind::kSlurm:
      return "slurm";
    case LauncherKind::kTorchrun:
      return "torchrun";
    case LauncherKind::kPlain:
      return "plain";
  }
  return "plain";
}

LauncherKind ClassifyLauncher(std::string_view command, std::string_view resolved_path) {
  const std::string name = Basename(command);
  const std::string target = Basename(resolved_path);
  if (name == "srun") return LauncherKind::kSlurm;
  if (name == "torchrun") return LauncherKind::kTorchrun;
  const bool mpi_word = name == "mpirun" || name == "mpiexec" || name == "orterun" ||
                        name == "mpirun.openmpi" || name == "mpiexec.openmpi";
  if (!mpi_word) return LauncherKind::kPlain;
  // MPICH's Hydra forwards the whole environment and rejects -x.
  if (target.find("mpich") != std::string::npos || target.find("hydra") != std::string::npos)
    return LauncherKind::kPlain;
  return LauncherKind::kOpenMpi;
}

Status ValidateOptions(const RunOptions& options) {
  // The values every front end checks alike (aon/config/options.h).
  const std::pair<session::SessionOption, const std::string*> values[] = {
      {session::SessionOption::kKinds, &options.kinds},
      {session::SessionOption::kMode, &options.mode},
      {session::SessionOption::kWindow, &options.window},
      {session::SessionOption::kMemoryCap, &options.memory_cap},
      {session::SessionOption::kSource, &options.source},
      {session::SessionOption::kNccl, &options.nccl},
  };
  for (const auto& [option, value] : values) {
    if (auto checked = session::CheckOptionValue(option, *value); !checked.ok()) {
      return InvalidArgument(session::RunName(option) + " '" + *value +
                             "': " + checked.status().message());
    }
  }
  for (const auto& [option, value] : options.passthrough) {
    if (value.empty()) continue;
    if (auto checked = session::CheckOptionValue(option, value); !checked.ok()) {
      return InvalidArgument(session::RunName(option) + " '" + value +
                             "': " + checked.status().message());
    }
  }
  if (options.verbose < 0) return InvalidArgument("--verbose: must not be negative");
  if (options.command.empty() || options.command[0].empty()) {
    return InvalidArgument(
        "no command to run: usage is aon-run [options] [--] <launcher> <args...>, "
        "e.g. aon-run mpirun -np 4 ./train");
  }
  return Status::Ok();
}

StatusOr<HostContext> CurrentHostContext() {
  HostContext host;
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n < 0) return ErrnoStatus("cannot read /proc/self/exe to find aon-run's own location", errno);
  host.exe_path.assign(buf, static_cast<size_t>(n));
  if (::getcwd(buf, sizeof(buf)) == nullptr)
    return ErrnoStatus("cannot get the current directory", errno);
  host.cwd = buf;
  host.now = std::time(nullptr);
  host.pid = static_cast<long>(::getpid());
  return host;
}

std::string DefaultJobDirName(const EnvLookupFn& env, std::time_t now, long pid) {
  const char* slurm_job = Lookup(env, "SLURM_JOB_ID");
  if (slurm_job != nullptr && *slurm_job != '\0') return "aon-" + SanitizeForPath(slurm_job);
  std::tm local{};
  ::localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &local);
  return std::string("aon-") + stamp + "-" + std::to_string(pid);
}

std::string AbsolutePath(const std::string& path, const std::string& cwd) {
  fs::path p(path);
  if (p.is_relative()) p = fs::path(cwd) / p;
  std::string out = p.lexically_normal().string();
  // "/a/b/" -> "/a/b": the job id is the last component.
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

StatusOr<std::string> ResolveAgentPath(const std::string& exe_path, const EnvLookupFn& env) {
  std::string candidate;
  std::string where;
  const char* override_path = Lookup(env, "AON_AGENT_PATH");
  if (override_path != nullptr && *override_path != '\0') {
    candidate = override_path;
    where = "AON_AGENT_PATH=" + candidate;
  } else {
    candidate = ToolCandidates(ToolOrigin::kProgram, DirectoryOf(exe_path), Tool::kAgent).front();
    where = candidate + " (next to aon-run at " + exe_path +
            "; set AON_AGENT_PATH to use another agent library)";
  }
  auto usable = UsableToolFile(candidate, Tool::kAgent);
  if (!usable.ok()) {
    return Status(usable.status().code(), "agent library not found: looked for " + where + ": " +
                                              usable.status().message());
  }
  return usable;
}

StatusOr<std::string> FindProgram(const std::string& name, const std::string& path_env,
                                  const std::string& cwd) {
  if (name.empty()) return InvalidArgument("empty program name");
  if (name.find('/') != std::string::npos) {
    std::string path = AbsolutePath(name, cwd);
    if (!PathExists(path))
      return NotFound("launcher '" + name + "' not found (no file " + path + ")");
    if (!IsExecutableFile(path))
      return Status(StatusCode::kPermissionDenied,
                    "launcher '" + name + "' (" + path + ") is not an executable file");
    return path;
  }
  std::string not_executable;
  for (const std::string& dir : Split(path_env, ':')) {
    std::string path = AbsolutePath((dir.empty() ? "." : dir) + "/" + name, cwd);
    if (IsExecutableFile(path)) return path;
    if (not_executable.empty() && PathExists(path)) not_executable = path;
  }
  if (!not_executable.empty())
    return Status(StatusCode::kPermissionDenied, "launcher '" + name + "' found at " +
                                                     not_executable + " but it is not executable");
  return NotFound("launcher '" + name + "' not found in PATH (" + path_env +
                  "); is it installed, or did you mean ./" + name + "?");
}

StatusOr<AgentSettings> AgentSettingsFor(const RunOptions& options, const std::string& job_dir,
                                         const EnvLookupFn& env) {
  using session::SessionOption;
  AgentSettings settings;
  const char* job_id = Lookup(env, "AON_JOB_ID");
  AON_RETURN_IF_ERROR(settings.Set(AgentVar::kOutputDir, job_dir));
  AON_RETURN_IF_ERROR(settings.Set(
      AgentVar::kJobId, job_id != nullptr && *job_id != '\0' ? job_id : Basename(job_dir)));
  // Every option of aon-run has a default, so each of these is set.
  const std::pair<SessionOption, std::string> values[] = {
      {SessionOption::kKinds, options.kinds},
      {SessionOption::kMemoryCap, options.memory_cap},
      {SessionOption::kSource, options.source},
      {SessionOption::kVerbose, std::to_string(options.verbose)},
      {SessionOption::kNccl, options.nccl},
      {SessionOption::kMode, options.mode},
      {SessionOption::kWindow, options.window},
  };
  for (const auto& [option, value] : values) {
    AON_RETURN_IF_ERROR(session::ApplyOption(settings, option, value));
  }
  for (const auto& [option, value] : options.passthrough) {
    if (!value.empty()) AON_RETURN_IF_ERROR(session::ApplyOption(settings, option, value));
  }
  if (!options.collector.empty()) {
    AON_RETURN_IF_ERROR(settings.Set(AgentVar::kCollector, options.collector));
  }
  return settings;
}

StatusOr<std::vector<EnvVar>> AgentEnvironment(const RunOptions& options,
                                               const std::string& agent_path,
                                               const std::string& job_dir, const EnvLookupFn& env) {
  AON_ASSIGN_OR_RETURN(AgentSettings settings, AgentSettingsFor(options, job_dir, env));
  const char* pythonpath = Lookup(env, "PYTHONPATH");
  return aon::AgentEnvironment(settings, agent_path, pythonpath ? pythonpath : "");
}

std::vector<EnvVar> LauncherEnvironment(LauncherKind kind, const std::vector<EnvVar>& vars,
                                        std::vector<std::string>* unset) {
  std::vector<EnvVar> out;
  for (const EnvVar& var : vars) {
    if (kind == LauncherKind::kOpenMpi && PassedByValueToOpenMpiRanks(var)) {
      if (unset != nullptr) unset->push_back(var.name);
    } else {
      out.push_back(var);
    }
  }
  return out;
}

std::vector<std::string> RewriteCommand(const std::vector<std::string>& command, LauncherKind kind,
                                        const std::vector<EnvVar>& vars, const EnvLookupFn& env) {
  if (command.empty()) return command;
  switch (kind) {
    case LauncherKind::kOpenMpi:
      return RewriteOpenMpi(command, vars);
    case LauncherKind::kSlurm:
      return RewriteSrun(command, vars, env);
    case LauncherKind::kTorchrun:
    case LauncherKind::kPlain:
      return command;
  }
  return command;
}

std::vector<std::string> OpenMpiHostOptions(const std::vector<std::string>& command) {
  static const std::set<std::string_view> kHostOptions = {"-H",
                                                          "--host",
                                                          "-host",
                                                          "--hostfile",
                                                          "-hostfile",
                                                          "--machinefile",
                                                          "-machinefile",
                                                          "--default-hostfile",
                                                          "-default-hostfile"};
  std::vector<std::string> out;
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string& w = command[i];
    if (w.empty() || w[0] != '-') break;  // the application
    if (w == "--") break;
    const size_t eq = w.find('=');
    const std::string_view name = std::string_view(w).substr(0, eq);
    if (kHostOptions.count(name) > 0) {
      out.push_back(w);
      if (eq == std::string::npos && i + 1 < command.size()) out.push_back(command[++i]);
    } else if (w == "--mca" || w == "-mca" || w == "--gmca" || w == "-gmca") {
      i += 2;  // two values
    } else if (eq == std::string::npos && OpenMpiOptionTakesValue(w)) {
      ++i;
    }
  }
  return out;
}

StatusOr<LaunchPlan> PlanLaunch(const RunOptions& options, const HostContext& host) {
  AON_RETURN_IF_ERROR(ValidateOptions(options));
  LaunchPlan plan;

  const char* path_env = Lookup(host.env, "PATH");
  // execvp's default when PATH is unset.
  std::string search_path = path_env != nullptr ? path_env : "/bin:/usr/bin";
  AON_ASSIGN_OR_RETURN(plan.program_path, FindProgram(options.command[0], search_path, host.cwd));
  char resolved[PATH_MAX];
  std::string target = ::realpath(plan.program_path.c_str(), resolved) ? resolved : "";
  plan.launcher = ClassifyLauncher(options.command[0], target);

  // Re-coded so that only the launcher lookup yields NotFound/PermissionDenied
  // (PlanErrorExitStatus maps those to 127/126 as env(1) does).
  auto agent = ResolveAgentPath(host.exe_path, host.env);
  if (!agent.ok()) return Status(StatusCode::kUnavailable, agent.status().message());
  plan.agent_path = *agent;

  if (!options.output_dir.empty()) {
    plan.job_dir = AbsolutePath(options.output_dir, host.cwd);
  } else {
    const std::string base =
        AbsolutePath(DefaultJobDirName(host.env, host.now, host.pid), host.cwd);
    plan.job_dir = base;
    for (int n = 2; PathExists(plan.job_dir); ++n) {
      if (n > 1000)
        return InvalidArgument("-o/--output: " + base + "-2 ... -1000 all exist; pass -o");
      plan.job_dir = base + "-" + std::to_string(n);
    }
  }
  AON_ASSIGN_OR_RETURN(AgentSettings settings, AgentSettingsFor(options, plan.job_dir, host.env));
  AON_RETURN_IF_ERROR(CheckInheritedAgentVariables(settings, host.env));
  if (plan.launcher == LauncherKind::kTorchrun) {
    // torchrun's own Python process loads the agent too (through torch's
    // NVTX/CUDA use); it is our direct child, so this tells it apart from its
    // workers, which are the ranks.
    AON_RETURN_IF_ERROR(settings.Set(AgentVar::kLauncherParentPid, std::to_string(host.pid)));
  }
  const char* pythonpath = Lookup(host.env, "PYTHONPATH");
  plan.agent_env = aon::AgentEnvironment(settings, plan.agent_path, pythonpath ? pythonpath : "");
  plan.argv = RewriteCommand(options.command, plan.launcher, plan.agent_env, host.env);
  plan.launcher_env = LauncherEnvironment(plan.launcher, plan.agent_env, &plan.launcher_unset);
  plan.bin_dir = DirectoryOf(host.exe_path);
  plan.merge_path = ToolPath(plan.bin_dir, Tool::kMerge);
  // The merge: N local processes when asked; else, for an Open MPI job that names
  // its hosts, one merge process per host through the same mpirun options (each
  // reads the rank files of its node when the job directory is node-local, and
  // a share of them when it is shared); else one process.
  const std::vector<std::string> hosts = plan.launcher == LauncherKind::kOpenMpi
                                             ? OpenMpiHostOptions(options.command)
                                             : std::vector<std::string>();
  if (options.merge_procs > 1) {
    plan.merge_argv = {plan.merge_path, "--procs", std::to_string(options.merge_procs),
                       plan.job_dir};
  } else if (options.merge_procs == 0 && !hosts.empty()) {
    plan.merge_argv = {plan.program_path};
    plan.merge_argv.insert(plan.merge_argv.end(), hosts.begin(), hosts.end());
    for (const std::string& w : options.command) {
      if (w == "--allow-run-as-root") plan.merge_argv.push_back(w);
    }
    plan.merge_argv.insert(plan.merge_argv.end(),
                           {"--map-by", "ppr:1:node", plan.merge_path, plan.job_dir});
  } else {
    plan.merge_argv = {plan.merge_path, plan.job_dir};
  }
  return plan;
}

int PlanErrorExitStatus(const Status& status) {
  if (status.code() == StatusCode::kNotFound) return kExitNotFound;
  if (status.code() == StatusCode::kPermissionDenied) return kExitCannotExecute;
  return kExitAonError;
}

Status PrepareOutputDir(const std::string& dir, std::vector<std::string>* warnings) {
  if (dir.empty() || dir[0] != '/')
    return InvalidArgument("-o/--output: '" + dir + "' must be an absolute path here");
  // Walk down from the root as the SPANK plugin does (aon/base/secure_fs.h), creating
  // what is missing with mode 0700: the trace files say what the user's job ran,
  // and nobody else should read, move or replace them. Unlike the plugin, links
  // that root or the user made are followed (/home -> /export/home).
  auto walk = std::make_unique<DirWalk>();
  const int dir_fd = WalkPrivateDirectory(dir.c_str(), PathPolicy::kOwnedSymlinks, walk.get());
  if (dir_fd < 0) {
    if (walk->refusal == DirWalk::Refusal::kNotDirectory && dir == walk->at)
      return InvalidArgument("-o/--output: " + dir + " exists and is not a directory");
    const Status s = DescribeDirWalk(dir, *walk, nullptr);
    return Status(s.code(), "-o/--output: " + s.message());
  }
  ::close(dir_fd);
  std::vector<std::string> noted;
  (void)DescribeDirWalk(dir, *walk, &noted);
  if (warnings != nullptr) {
    for (std::string& w : noted) warnings->push_back("-o/--output: " + std::move(w));
  }

  // Mode bits say little for root or on read-only mounts: try it.
  std::string probe = dir + "/.aon-run-write-test-XXXXXX";
  int fd = ::mkstemp(probe.data());
  if (fd < 0) return ErrnoStatus("-o/--output: cannot create files in " + dir, errno);
  ::close(fd);
  ::unlink(probe.c_str());

  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool rank_file =
        name.rfind("rank-", 0) == 0 && (name.ends_with(".h5") || name.ends_with(".h5.partial"));
    if (rank_file || name == "timeline.h5") {
      return InvalidArgument("-o/--output: " + dir +
                             " already holds trace files of an earlier run (" + name +
                             "); merging them with this run's would mix two jobs: choose " +
                             "another directory or remove them");
    }
  }
  if (ec) return IoError("-o/--output: cannot list " + dir + ": " + ec.message());
  return Status::Ok();
}

int ExitStatusFromWaitStatus(int wait_status) { return ExitCodeOf(wait_status, kExitAonError); }

}  // namespace aon::launcher
