#include "aon/config.h"

#include <cstdlib>

namespace aon {

const std::array<ConfigVariable, kAgentConfigVariableCount>& AgentConfigVariables() {
  static const std::array<ConfigVariable, kAgentConfigVariableCount> vars = {{
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
       "coll (operations only), proxy (default plus NCCL's network proxy operations and steps; "
       "per network step, none on a single node over NVLink), off. Every mode but off also "
       "records the user's NCCL API calls (group, collective and p2p calls)"},
      {"AON_MODE", "full",
       "full: every record reaches the rank file (appended every flush interval); flight: only "
       "the last AON_WINDOW seconds are kept in memory and written when a trigger fires"},
      {"AON_WINDOW", "60", "flight mode: seconds of history kept"},
      {"AON_FLUSH_INTERVAL", "1000", "milliseconds between the collector's appends to the rank files"},
      {"AON_COLLECTOR", "",
       "path of aon-collector (default: ../bin/aon-collector next to the agent library); 'off' "
       "writes the rank file from inside the process at exit (degraded: a killed rank loses it)"},
      {"AON_FLIGHT_NCCL_STALL", "60",
       "flight mode: seconds without a new NCCL operation (after some were seen) that trigger a "
       "dump; 0 disables"},
      {"AON_FLIGHT_STEP_RANGE", "step",
       "flight mode: NVTX ranges whose name contains this are training steps; a step longer than "
       "AON_FLIGHT_STEP_FACTOR x the median of recent steps triggers a dump; empty disables"},
      {"AON_FLIGHT_STEP_FACTOR", "3", "flight mode: step-time spike factor (see AON_FLIGHT_STEP_RANGE)"},
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
    if (v != "default" && v != "channels" && v != "coll" && v != "proxy" && v != "off") {
      return InvalidArgument("AON_NCCL: unknown mode '" + v +
                             "' (default, channels, coll, proxy or off)");
    }
    c.nccl = v;
  }
  if (std::string v = get("AON_LAUNCHER_PARENT_PID"); !v.empty()) c.launcher_parent_pid = std::atol(v.c_str());
  if (std::string v = get("AON_MODE"); !v.empty()) {
    if (v != "full" && v != "flight") {
      return InvalidArgument("AON_MODE: unknown mode '" + v + "' (full or flight)");
    }
    c.mode = v;
  }
  auto positive = [&](const char* name, double min, double max, double* out) -> Status {
    std::string v = get(name);
    if (v.empty()) return Status::Ok();
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (end == v.c_str() || *end != 0 || !(d >= min && d <= max)) {
      return InvalidArgument(std::string(name) + ": '" + v + "' is not a number in [" +
                             std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    *out = d;
    return Status::Ok();
  };
  AON_RETURN_IF_ERROR(positive("AON_WINDOW", 1, 86400, &c.window_s));
  double flush_ms = static_cast<double>(c.flush_interval_ms);
  AON_RETURN_IF_ERROR(positive("AON_FLUSH_INTERVAL", 10, 600000, &flush_ms));
  c.flush_interval_ms = static_cast<int64_t>(flush_ms);
  AON_RETURN_IF_ERROR(positive("AON_FLIGHT_NCCL_STALL", 0, 86400, &c.flight_nccl_stall_s));
  AON_RETURN_IF_ERROR(positive("AON_FLIGHT_STEP_FACTOR", 1.01, 1000, &c.flight_step_factor));
  if (const char* v = env("AON_FLIGHT_STEP_RANGE")) c.flight_step_range = v;
  c.collector = get("AON_COLLECTOR");
  return c;
}

}  // namespace aon
