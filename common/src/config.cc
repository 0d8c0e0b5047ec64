#include "aon/config.h"

#include <cstdlib>

namespace aon {

const std::array<ConfigVariable, 8>& AgentConfigVariables() {
  static const std::array<ConfigVariable, 8> vars = {{
      {"AON_OUTPUT_DIR", "", "directory for the per-rank trace files (set by aon-run / srun --aon)"},
      {"AON_KINDS", "default",
       "record kinds to capture: all, default, or a list of kernels,memcpy,memset,sync,api,nvtx,nccl"},
      {"AON_MEMORY_CAP", "64M", "hard cap on the agent's record memory per rank; beyond it records are dropped and counted"},
      {"AON_SOURCE", "cupti", "GPU activity source: cupti (real GPUs) or synthetic (labeled fake GPU for CPU-only demos and tests)"},
      {"AON_VERBOSE", "0", "1 prints the agent's progress to stderr"},
      {"AON_JOB_ID", "", "job id written into every rank file (default: from Slurm/Open MPI)"},
      {"AON_LAUNCHER_PARENT_PID", "",
       "set by aon-run for launchers such as torchrun: a process whose parent has this pid is the "
       "launcher itself, not a rank, and records nothing"},
      {"AON_NCCL", "default",
       "NCCL capture when AON is NCCL's profiler plugin: default (operations, each tied to the "
       "kernel that ran it), channels (also per-channel GPU timing; costly for small messages), "
       "coll (operations only), off"},
  }};
  return vars;
}

std::string AgentConfig::KindsString() const {
  std::string s;
  for (size_t i = 0; i < kRecordKindCount; ++i) {
    if (!kinds[i]) continue;
    if (!s.empty()) s += ',';
    s += RecordKindName(static_cast<RecordKind>(i));
  }
  return s;
}

StatusOr<std::array<bool, kRecordKindCount>> ParseKinds(std::string_view list) {
  std::array<bool, kRecordKindCount> kinds{};
  if (list == "all" || list == "default" || list.empty()) {
    kinds.fill(true);
    return kinds;
  }
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view item = list.substr(pos, comma - pos);
    RecordKind k;
    if (item == "kernel") item = "kernels";
    if (item == "runtime" || item == "driver") item = "api";
    if (!ParseRecordKind(item, &k)) {
      return InvalidArgument("AON_KINDS: unknown record kind '" + std::string(item) +
                             "' (known: kernels, memcpy, memset, sync, api, nvtx, nccl, "
                             "external_correlation, all)");
    }
    kinds[static_cast<size_t>(k)] = true;
    pos = comma + 1;
  }
  // Correlation records are what tie API calls to GPU work: keep them with either.
  if (kinds[static_cast<size_t>(RecordKind::kApi)] || kinds[static_cast<size_t>(RecordKind::kKernel)])
    kinds[static_cast<size_t>(RecordKind::kExternalCorrelation)] = true;
  return kinds;
}

StatusOr<uint64_t> ParseSize(std::string_view text) {
  if (text.empty()) return InvalidArgument("empty size");
  size_t i = 0;
  uint64_t v = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    const auto digit = static_cast<uint64_t>(text[i] - '0');
    // Checked before multiplying: a wrapped product can still compare >= v.
    if (v > (UINT64_MAX - digit) / 10) return InvalidArgument("size '" + std::string(text) + "' overflows");
    v = v * 10 + digit;
    ++i;
  }
  if (i == 0) return InvalidArgument("size '" + std::string(text) + "' does not start with a number");
  std::string_view unit = text.substr(i);
  uint64_t mult = 1;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KiB" || unit == "k") mult = 1ull << 10;
  else if (unit == "M" || unit == "MiB" || unit == "m") mult = 1ull << 20;
  else if (unit == "G" || unit == "GiB" || unit == "g") mult = 1ull << 30;
  else return InvalidArgument("size '" + std::string(text) + "' has an unknown unit (use K, M or G)");
  if (v > UINT64_MAX / mult) return InvalidArgument("size '" + std::string(text) + "' overflows");
  return v * mult;
}

StatusOr<AgentConfig> LoadAgentConfig(const EnvLookupFn& lookup) {
  EnvLookupFn env = lookup ? lookup : EnvLookupFn([](const char* n) { return std::getenv(n); });
  auto get = [&](const char* name) -> std::string {
    const char* v = env(name);
    return v ? v : "";
  };
  AgentConfig c;
  c.output_dir = get("AON_OUTPUT_DIR");
  c.job_id = get("AON_JOB_ID");
  AON_ASSIGN_OR_RETURN(c.kinds, ParseKinds(get("AON_KINDS")));
  if (std::string cap = get("AON_MEMORY_CAP"); !cap.empty()) {
    auto v = ParseSize(cap);
    if (!v.ok()) return InvalidArgument("AON_MEMORY_CAP: " + v.status().message());
    if (*v < (1ull << 20)) return InvalidArgument("AON_MEMORY_CAP: '" + cap + "' is below the 1M minimum");
    c.memory_cap_bytes = *v;
  }
  if (std::string src = get("AON_SOURCE"); !src.empty()) {
    if (src != "cupti" && src != "synthetic") {
      return InvalidArgument("AON_SOURCE: unknown source '" + src + "' (cupti or synthetic)");
    }
    c.source = src;
  }
  if (std::string v = get("AON_VERBOSE"); !v.empty()) c.verbose = std::atoi(v.c_str());
  if (std::string v = get("AON_NCCL"); !v.empty()) {
    if (v != "default" && v != "channels" && v != "coll" && v != "off") {
      return InvalidArgument("AON_NCCL: unknown mode '" + v + "' (default, channels, coll or off)");
    }
    c.nccl = v;
  }
  if (std::string v = get("AON_LAUNCHER_PARENT_PID"); !v.empty()) c.launcher_parent_pid = std::atol(v.c_str());
  return c;
}

}  // namespace aon
