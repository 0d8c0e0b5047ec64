#include "aon/config/agent_env.h"

#include <cstdlib>
#include <string>

namespace aon {

Status AgentSettings::Set(AgentVar var, std::string value) {
  AON_RETURN_IF_ERROR(CheckAgentVariable(var, value));
  values_[Index(var)] = std::move(value);
  return Status::Ok();
}

std::string PythonHookDir(const std::string& agent_path) {
  const size_t slash = agent_path.rfind('/');
  return (slash == std::string::npos ? std::string(".") : agent_path.substr(0, slash)) +
         "/aon-python";
}

Status CheckInheritedAgentVariables(const AgentSettings& settings, const EnvLookupFn& env,
                                    bool spank) {
  for (const ConfigVariable& var : AgentConfigVariables()) {
    if (settings.Get(var.id).has_value()) continue;  // the front end's value replaces it
    const char* value = env ? env(var.env) : std::getenv(var.env);
    if (value == nullptr) continue;
    const Status ok = CheckAgentVariable(var.id, value);
    if (ok.ok()) continue;
    std::string fix = "unset it";
    const char* option = spank ? var.front_end.spank : var.front_end.run;
    if (option != nullptr) fix += std::string(" or pass ") + (spank ? "--" : "") + option;
    return InvalidArgument("inherited from the environment: " + ok.message() +
                           " (every rank would get it, and its agent would refuse it and "
                           "disable capture): " +
                           fix);
  }
  return Status::Ok();
}

std::vector<EnvVar> AgentEnvironment(const AgentSettings& settings, const std::string& agent_path,
                                     std::string_view job_pythonpath) {
  std::vector<EnvVar> env = {{kCudaInjectionVar, agent_path}, {kNvtxInjectionVar, agent_path}};
  for (const ConfigVariable& var : AgentConfigVariables()) {
    if (const auto& value = settings.Get(var.id)) env.push_back({var.env, *value});
  }
  const auto& nccl = settings.Get(AgentVar::kNccl);
  if (!nccl || *nccl != ChoiceName(NcclMode::kOff))
    env.push_back({kNcclProfilerPluginVar, agent_path});
  const auto& python = settings.Get(AgentVar::kPythonHook);
  if (!python || *python != "off") {
    std::string path = PythonHookDir(agent_path);
    if (!job_pythonpath.empty()) path += ":" + std::string(job_pythonpath);
    env.push_back({"PYTHONPATH", path});
  }
  return env;
}

}  // namespace aon
