// The environment that loads the AON agent into a job's processes, built the
// same way by every front end (aon-run in launcher/, srun --aon in slurm/).
//
//   front end's options --(aon/config/options.h)--> AgentSettings --AgentEnvironment--> env
//
// AgentSettings holds the AON_* variables a front end decided to set, each
// value checked by the parser the agent itself runs on it (the table in
// aon/config/agent_config.h), so a value the agent would refuse is refused where the user
// typed it. A variable left unset is not put in the environment at all: the
// job's own value (or the agent's default) applies. aon-run's options all have
// defaults and so it sets each of its variables; srun --aon sets only what the
// user or the site chose.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aon/base/status.h"
#include "aon/config/agent_config.h"

namespace aon {

// The variables, besides the AON_* ones, that make the agent load: the CUDA
// driver reads the first, NVTX the second, NCCL the third (NCCL's profiler plugin).
inline constexpr const char* kCudaInjectionVar = "CUDA_INJECTION64_PATH";
inline constexpr const char* kNvtxInjectionVar = "NVTX_INJECTION64_PATH";
inline constexpr const char* kNcclProfilerPluginVar = "NCCL_PROFILER_PLUGIN";

struct EnvVar {
  std::string name;
  std::string value;
  bool operator==(const EnvVar&) const = default;
};

class AgentSettings {
 public:
  // Sets `var` to `value` after checking it with the agent's parser; the error
  // names the variable and the value, and leaves the setting as it was.
  Status Set(AgentVar var, std::string value);
  void Clear(AgentVar var) { values_[Index(var)].reset(); }
  const std::optional<std::string>& Get(AgentVar var) const { return values_[Index(var)]; }

 private:
  static size_t Index(AgentVar var) { return static_cast<size_t>(var); }
  std::array<std::optional<std::string>, kAgentConfigVariableCount> values_;
};

// The AON_* variables a front end does not set reach every rank as the user's
// environment (`env`) has them: each is checked with the agent's own parser, so
// a bad one (AON_CAPTURE_PERIOD=3) is refused where it enters, naming it, its
// value and the fix ("unset it or pass <the front end's option>"), instead of
// every rank's agent refusing it and disabling capture. `spank`: name srun's
// option (--aon-...) rather than aon-run's.
Status CheckInheritedAgentVariables(const AgentSettings& settings, const EnvLookupFn& env,
                                    bool spank = false);

// The agent's environment, in this order:
//   CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH = agent_path
//   every variable set in `settings`, in the order of AgentConfigVariables()
//   NCCL_PROFILER_PLUGIN = agent_path (NCCL then gets the agent the CUDA driver
//     already loaded), unless AON_NCCL=off: then it is left as the job has it,
//     and the agent ignores NCCL even where it is loaded as the plugin.
//   PYTHONPATH = <agent's directory>/aon-python, then the job's own PYTHONPATH
//     (job_pythonpath), unless AON_PYTHON_HOOK=off: Python processes then load
//     AON's hook and can `import aon` (docs/pytorch.md).
std::vector<EnvVar> AgentEnvironment(const AgentSettings& settings, const std::string& agent_path,
                                     std::string_view job_pythonpath = {});

// Where AON's Python package and start-up hook lie: <agent's dir>/aon-python.
std::string PythonHookDir(const std::string& agent_path);

}  // namespace aon
