#include "aon/session/agent_env.h"

namespace aon {

Status AgentSettings::Set(AgentVar var, std::string value) {
  AON_RETURN_IF_ERROR(CheckAgentVariable(var, value));
  values_[Index(var)] = std::move(value);
  return Status::Ok();
}

std::vector<EnvVar> AgentEnvironment(const AgentSettings& settings, const std::string& agent_path) {
  std::vector<EnvVar> env = {{kCudaInjectionVar, agent_path}, {kNvtxInjectionVar, agent_path}};
  for (const ConfigVariable& var : AgentConfigVariables()) {
    if (const auto& value = settings.Get(var.id)) env.push_back({var.env, *value});
  }
  const auto& nccl = settings.Get(AgentVar::kNccl);
  if (!nccl || *nccl != "off") env.push_back({kNcclProfilerPluginVar, agent_path});
  return env;
}

}  // namespace aon
