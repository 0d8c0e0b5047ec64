// Settings of the AON SPANK plugin, apart from Slurm so they can be unit-tested:
//   SiteConfig   the administrator's plugstack.conf arguments (policy),
//   UserOptions  what the user asked for with --aon* (srun/sbatch/salloc),
//   StepPlan     what one step does: both combined and checked.
// Parsing is strict: an unknown plugstack.conf key or a bad option value is an
// error whose message names it (the plugin then fails closed). Option names,
// help and value checks come from the table aon-run reads too
// (aon/config/options.h); the agent's environment is built by the same code as
// aon-run's (aon/config/agent_env.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aon/base/status.h"
#include "aon/config/agent_env.h"
#include "aon/config/options.h"

namespace aon::spank {

// Profiling modes: --aon[=MODE]. kOn records the agent's default kinds, kFull
// every kind (CUDA API calls included), kLight kernels and NVTX ranges only.
enum class Mode { kOff, kOn, kFull, kLight };
const char* ModeName(Mode mode);
StatusOr<Mode> ParseMode(std::string_view text);

struct SiteConfig {
  bool disabled = false;            // kill switch: options exist, nothing happens
  bool enabled_by_default = false;  // profile every step unless --aon=off
  bool strict = false;              // profiler failures fail the step (with `required`)
  std::string output_root;          // default root of job directories ("" = submit dir)
  std::vector<Mode> allowed_modes{Mode::kOff, Mode::kOn, Mode::kFull, Mode::kLight};
  uint64_t max_memory_cap = 0;      // 0 = no limit
  uint64_t default_memory_cap = 0;  // 0 = the agent's default
  std::string nccl;                 // default of --aon-nccl ("" = the agent's: default)
  // GPU counters: the default of --aon-counters and the most a user may ask
  // for, in kCounterModes order off < gpm < auto ("" = the agent's, auto).
  std::string counters;
  std::string agent;   // libaon_agent.so ("" = next to the plugin)
  std::string bindir;  // where aon-merge / aon-report are ("" = next to the plugin)

  bool ModeAllowed(Mode m) const;
};

// The plugstack.conf arguments ("key=value" or "key"); names the unknown ones.
StatusOr<SiteConfig> ParseSiteArgs(const std::vector<std::string>& args);

struct UserOptions {
  std::optional<Mode> mode;            // --aon[=MODE]; nullopt = not given
  std::string output;                  // --aon-output=DIR
  std::string kinds;                   // --aon-kinds=LIST (validated)
  std::string source;                  // --aon-source=cupti|synthetic
  std::optional<std::string> nccl;     // --aon-nccl=MODE (canonical: on -> default)
  std::optional<uint64_t> memory_cap;  // --aon-memory-cap=SIZE
  std::string memory_cap_text;
  bool verbose = false;       // --aon-verbose
  std::optional<bool> merge;  // --aon-merge=on|off
  std::string flight_window;  // --aon-flight=SECONDS ("" = full mode)
  // Options that set one agent variable as typed (--aon-mode, --aon-overhead-budget, ...).
  std::map<session::SessionOption, std::string> passthrough;
};

// The srun/sbatch/salloc options, from the shared table: what
// spank_option_register needs of each.
struct SpankOptionSpec {
  session::SessionOption id;
  std::string name;     // "aon-kinds"
  std::string arginfo;  // "LIST"; "" for a flag
  std::string usage;    // "AON: ..."
  int has_arg = 0;      // 0 flag, 1 required, 2 optional (spank_option's convention)
};
const std::vector<SpankOptionSpec>& SpankOptionSpecs();

// Option setters: each checks its value with the check aon-run runs on its twin
// (session::CheckOptionValue) and says what was wrong ("--aon-kinds=x: ...").
// Calling one twice with the same value is harmless (Slurm does that).
Status SetUserOption(UserOptions& o, session::SessionOption option, const char* optarg);
Status SetModeOption(UserOptions& o, const char* optarg);  // null = "on"
Status SetOutputOption(UserOptions& o, const char* optarg);
Status SetKindsOption(UserOptions& o, const char* optarg);
Status SetSourceOption(UserOptions& o, const char* optarg);
Status SetNcclOption(UserOptions& o, const char* optarg);
Status SetMemoryCapOption(UserOptions& o, const char* optarg);
Status SetMergeOption(UserOptions& o, const char* optarg);
Status SetFlightOption(UserOptions& o, const char* optarg);

struct StepPlan {
  bool profile = false;
  Mode mode = Mode::kOff;
  std::string kinds;       // AON_KINDS value
  std::string memory_cap;  // AON_MEMORY_CAP value ("" = agent default)
  std::string source;      // AON_SOURCE value ("" = agent default)
  std::string nccl;        // AON_NCCL value ("" = agent default: NCCL captured)
  bool verbose = false;
  bool merge = true;
  std::string flight_window;  // AON_WINDOW with AON_MODE=flight ("" = full mode)
  std::string output_root;    // unexpanded template (user's, else site's, else "")
  std::map<session::SessionOption, std::string> passthrough;  // as the user typed them
};

// Combines site policy and user options; an error names the option and the policy.
StatusOr<StepPlan> MakeStepPlan(const SiteConfig& site, const UserOptions& user);

// What one step's tasks get besides the plan.
struct StepPaths {
  std::string agent;       // libaon_agent.so
  std::string job_dir;     // AON_OUTPUT_DIR
  std::string job_id;      // AON_JOB_ID: <job>.<step>
  std::string collector;   // AON_COLLECTOR ("" = the agent looks beside itself)
  std::string pythonpath;  // the job's own PYTHONPATH: AON's hook directory goes before it
};

// The agent's environment for the step's tasks (aon::AgentEnvironment: the
// injection hooks, the AON_* variables the user or the site chose, the NCCL
// profiler plugin unless --aon-nccl=off). Only what was chosen is set: the
// job's own AON_* variables reach the tasks otherwise.
StatusOr<std::vector<EnvVar>> StepEnvironment(const StepPlan& plan, const StepPaths& paths);
// The AON_* settings of the step (what StepEnvironment sets).
StatusOr<AgentSettings> StepSettings(const StepPlan& plan, const StepPaths& paths);
// The AON_* variables of srun's environment (`env`) that the step would pass on
// as they are: refused when the agent would refuse them (CheckInheritedAgentVariables).
Status CheckStepInheritance(const StepPlan& plan, const EnvLookupFn& env = nullptr);

// Expands %u (user name), %U (uid), %j (job id), %s (step id), %% in `tmpl`.
StatusOr<std::string> ExpandPathTemplate(std::string_view tmpl, std::string_view user, uint32_t uid,
                                         uint32_t job_id, uint32_t step_id);

// The step's job directory: <root>/aon-<job>.<step>, root = the expanded
// template, relative paths against `base_dir` (the submit directory).
StatusOr<std::string> JobDirectory(const StepPlan& plan, std::string_view base_dir,
                                   std::string_view user, uint32_t uid, uint32_t job_id,
                                   uint32_t step_id);

}  // namespace aon::spank
