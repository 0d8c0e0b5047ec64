#include "aon/config/agent_env.h"

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
