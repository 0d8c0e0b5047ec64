// aon::launcher: how `aon-run` turns a user's command into a profiled run.
//
// Everything that decides *what* to run lives here as plain functions over
// strings, so it can be unit-tested without starting a process:
//
//   RunOptions (as typed) --ValidateOptions--> ok / error naming the option
//        |
//        +--PlanLaunch(options, HostContext)--> LaunchPlan
//              * the launcher program, found in PATH, and its kind
//                (Open MPI / Slurm / torchrun / plain program);
//              * the agent library (AON_AGENT_PATH, else <exe dir>/../lib:
//                aon/config/tool_paths.h);
//              * the job directory (absolute; default ./aon-<job id or time>);
//              * the variables the agent reads (AgentEnvironment, built as the
//                SPANK plugin builds them: aon/config/agent_env.h);
//              * the argv, rewritten so those variables reach every rank
//                (RewriteCommand: `-x VAR` for Open MPI, `--export` for srun),
//                and what the launcher's own environment gets (LauncherEnvironment).
//
// PrepareOutputDir creates the job directory (0700) and checks it can be used;
// child_process.h runs the plan. Nothing here throws; errors are aon::Status
// with messages that name the option or path, ready to print.
#pragma once

#include <ctime>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "aon/config/options.h"

#include "aon/config/agent_config.h"
#include "aon/config/agent_env.h"
#include "aon/config/merge_report.h"
#include "aon/base/status.h"

namespace aon::launcher {

// How a launcher carries environment variables to the processes it starts.
enum class LauncherKind {
  kOpenMpi,   // mpirun/mpiexec/orterun: remote ranks only see variables named by -x
  kSlurm,     // srun: forwards everything unless --export (or SLURM_EXPORT_ENV) narrows it
  kTorchrun,  // torchrun: children inherit the environment
  kPlain,     // any other program (python, MPICH's Hydra, ...): inheritance
};
const char* LauncherKindName(LauncherKind kind);  // "openmpi", "slurm", "torchrun", "plain"

// Classifies by the command word's basename ("/usr/bin/mpirun" -> kOpenMpi).
// `resolved_path` is where the word led in PATH after following symlinks; it
// tells Debian's alternatives apart (mpirun -> mpirun.mpich is Hydra, which
// forwards the whole environment and has no -x).
LauncherKind ClassifyLauncher(std::string_view command, std::string_view resolved_path = {});

// What the user asked for, as typed on the command line (options and their
// help: the table in aon/config/options.h, shared with the SPANK plugin).
struct RunOptions {
  std::string output_dir;            // -o; "" = DefaultJobDirName() in the current directory
  std::string kinds = "default";     // --kinds
  std::string memory_cap = "64M";    // --memory-cap
  std::string source = "cupti";      // --source: cupti | synthetic
  std::string nccl = "default";      // --nccl: default | channels | coll | proxy | off
  std::string mode = "budgeted";     // --mode: budgeted | full | flight
  std::string window = "60";         // --window: flight-mode seconds
  std::string collector;             // aon-collector path ("" : the agent looks beside itself)
  int verbose = 0;                   // -v, counted
  bool merge = true;                 // false with --no-merge
  int merge_procs = 0;               // --merge-procs: 0 = one per host the job names, else N local
  // Options that set one agent variable as typed (FrontEndOption::passthrough:
  // --overhead-budget, --capture-steps, ...); absent or "" = the agent's default.
  std::map<session::SessionOption, std::string> passthrough;
  std::vector<std::string> command;  // launcher word and its arguments
};

// Checks every value without touching the system, with the checks the SPANK
// plugin runs on its twins (session::CheckOptionValue). Errors name the option
// ("--kinds 'foo': unknown record kind 'foo' ...").
Status ValidateOptions(const RunOptions& options);

// The facts about this process and host that a plan depends on; tests make
// their own.
struct HostContext {
  std::string exe_path;  // this program (/proc/self/exe)
  std::string cwd;       // absolute
  EnvLookupFn env;       // getenv-like; nullptr reads the real environment
  std::time_t now = 0;
  long pid = 0;
};
StatusOr<HostContext> CurrentHostContext();

// "aon-<SLURM_JOB_ID>" when Slurm set one, else "aon-YYYYmmdd-HHMMSS-<pid>" (local time).
std::string DefaultJobDirName(const EnvLookupFn& env, std::time_t now, long pid);

// Absolute, lexically normal form of `path` taken relative to `cwd`.
std::string AbsolutePath(const std::string& path, const std::string& cwd);

// libaon_agent.so: $AON_AGENT_PATH if set, else <dir of exe_path>/../lib/libaon_agent.so.
// The result is absolute and names an existing regular file; the error says
// where it looked.
StatusOr<std::string> ResolveAgentPath(const std::string& exe_path, const EnvLookupFn& env);

// execvp's search: a word with a '/' is used as is, else the first executable
// regular file named `name` in the colon-separated `path_env` (empty entries
// mean the current directory). The error names the program and the PATH.
StatusOr<std::string> FindProgram(const std::string& name, const std::string& path_env,
                                  const std::string& cwd);

using aon::EnvVar;

// The agent variables aon-run sets (all of them that have an option, each with
// its default when not given). AON_JOB_ID keeps a value the user already set;
// otherwise it is the job directory's name.
StatusOr<AgentSettings> AgentSettingsFor(const RunOptions& options, const std::string& job_dir,
                                         const EnvLookupFn& env);

// The agent's environment for these options (aon::AgentEnvironment: the two
// injection hooks that make the CUDA driver and NVTX load it, the AON_*
// variables, NCCL_PROFILER_PLUGIN). Errors name the variable.
StatusOr<std::vector<EnvVar>> AgentEnvironment(const RunOptions& options,
                                               const std::string& agent_path,
                                               const std::string& job_dir, const EnvLookupFn& env);

// `command` with what its launcher needs to pass `vars` on to every rank:
//   Open MPI: `-x NAME` for each variable, right after the launcher word; the
//         two injection paths as `-x NAME=VALUE` (see LauncherEnvironment);
//   srun: an --export that narrows the environment (theirs, or SLURM_EXPORT_ENV
//         when they gave none) gets our names appended; NONE becomes the list of
//         our names (the list form exports SLURM_* plus the listed variables,
//         which is NONE plus ours); ALL or no --export is left alone;
//   torchrun and plain programs: unchanged (children inherit the environment).
// srun gets names only, never NAME=value, so values with commas survive.
std::vector<std::string> RewriteCommand(const std::vector<std::string>& command, LauncherKind kind,
                                        const std::vector<EnvVar>& vars, const EnvLookupFn& env);

// The part of `vars` to set in the launcher's own environment. Open MPI built
// with CUDA support calls cuInit inside mpirun, so with the injection variables
// in its environment the agent would also run in mpirun and write a bogus rank
// file; for Open MPI they reach the ranks through `-x NAME=VALUE` instead and
// their names are added to `unset` (removed from mpirun's environment, in case
// the user's environment had them). Other launchers get everything.
std::vector<EnvVar> LauncherEnvironment(LauncherKind kind, const std::vector<EnvVar>& vars,
                                        std::vector<std::string>* unset);

// Everything aon-run needs to start the job.
struct LaunchPlan {
  LauncherKind launcher = LauncherKind::kPlain;
  std::string program_path;                 // the launcher executable, resolved in PATH
  std::vector<std::string> argv;            // argv[0] as the user typed it, then rewritten args
  std::vector<EnvVar> agent_env;            // what every rank must see
  std::vector<EnvVar> launcher_env;         // set on top of aon-run's environment for the launcher
  std::vector<std::string> launcher_unset;  // removed from the launcher's environment
  std::string job_dir;                      // absolute; created by PrepareOutputDir
  std::string agent_path;
  std::string bin_dir;     // aon-run's own directory: aon-merge, aon-report are there
  std::string merge_path;  // aon-merge next to aon-run (may not exist)
  // How the merge runs after the job: argv[0] is the program (aon-merge, or the
  // job's mpirun with its host options and one merge process per host).
  std::vector<std::string> merge_argv;
};

// The host-selecting options of an Open MPI command line (-H/--host,
// --hostfile/--machinefile/--default-hostfile, with their values), scanned up
// to the application: the merge runs one process on each of those hosts.
std::vector<std::string> OpenMpiHostOptions(const std::vector<std::string>& command);

// Validates the options, finds the launcher and the agent and picks the job
// directory. Creates nothing. A default job directory that already exists gets
// a "-2", "-3", ... suffix so two runs in one Slurm allocation don't mix.
StatusOr<LaunchPlan> PlanLaunch(const RunOptions& options, const HostContext& host);

// aon-run's exit status when PlanLaunch fails: 127 when the launcher was not
// found, 126 when it is not executable, else 125 (kExit* below).
int PlanErrorExitStatus(const Status& status);

// mkdir -p with mode 0700 for every directory it creates, checked as the SPANK
// plugin checks its job directories (aon/base/secure_fs.h, WalkPrivateDirectory):
// `dir` must end up a directory of the caller, mode 0700 (tightened if it had
// group/other bits); a symbolic link on the way is followed only when root or
// the caller owns it; a directory on the way that every user may write (not
// sticky) is refused; one its group may write or another user owns is accepted
// with a warning (appended to *warnings, "-o/--output: ..."). Then checks that
// `dir` takes new files and holds no trace files of an earlier run (merging them
// with this run's would silently mix two jobs).
Status PrepareOutputDir(const std::string& dir, std::vector<std::string>* warnings = nullptr);

// Names of the rank trace files (rank-*.h5) in `dir`, sorted.
using aon::ListRankFiles;

// aon-run's exit status for a waitpid() status: the exit code, or 128 + signal
// number when the process was killed (the shell's convention).
int ExitStatusFromWaitStatus(int wait_status);

// Exit statuses of aon-run's own failures, as env(1) and timeout(1) use them.
inline constexpr int kExitAonError = 125;       // bad option, unusable output dir, no agent
inline constexpr int kExitCannotExecute = 126;  // launcher found but could not be executed
inline constexpr int kExitNotFound = 127;       // launcher not found

}  // namespace aon::launcher
