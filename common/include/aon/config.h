// Agent configuration: every setting is one environment variable, described in
// one table (name, default, description), so `aon-run --help`, the SPANK plugin
// and docs/ can list the same settings. Parsing is strict: an unknown kind or a
// malformed size is an error that names the variable and the value.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "aon/records.h"
#include "aon/status.h"

namespace aon {

struct ConfigVariable {
  const char* env;
  const char* default_value;
  const char* description;
};

// The table of AON_* variables read by the agent.
inline constexpr size_t kAgentConfigVariableCount = 15;
const std::array<ConfigVariable, kAgentConfigVariableCount>& AgentConfigVariables();

struct AgentConfig {
  std::string output_dir;  // AON_OUTPUT_DIR: where rank files go ("" = don't write)
  std::array<bool, kRecordKindCount> kinds{};  // AON_KINDS
  uint64_t memory_cap_bytes = 64ull << 20;     // AON_MEMORY_CAP
  std::string source = "cupti";                // AON_SOURCE: cupti | synthetic
  int verbose = 0;                             // AON_VERBOSE
  std::string job_id;                          // AON_JOB_ID
  long launcher_parent_pid = 0;                // AON_LAUNCHER_PARENT_PID
  std::string nccl = "default";                // AON_NCCL: default | channels | coll | proxy | off
  std::string mode = "full";                   // AON_MODE: full | flight
  double window_s = 60;                        // AON_WINDOW (flight)
  int64_t flush_interval_ms = 1000;            // AON_FLUSH_INTERVAL
  std::string collector;                       // AON_COLLECTOR: path, "off", "" (next to agent)
  double flight_nccl_stall_s = 60;             // AON_FLIGHT_NCCL_STALL (0: off)
  std::string flight_step_range = "step";      // AON_FLIGHT_STEP_RANGE ("" : off)
  double flight_step_factor = 3;               // AON_FLIGHT_STEP_FACTOR

  bool enabled(RecordKind k) const { return kinds[static_cast<size_t>(k)]; }
  // "kernels,memcpy,..." of the enabled kinds.
  std::string KindsString() const;
};

// Parses "all", "default" or a comma-separated list of RecordKindName()s (plus
// the aliases "kernel", "runtime"/"driver" = api).
StatusOr<std::array<bool, kRecordKindCount>> ParseKinds(std::string_view list);
// "64M", "1G", "4096", "512K" -> bytes.
StatusOr<uint64_t> ParseSize(std::string_view text);

using EnvLookupFn = std::function<const char*(const char*)>;
StatusOr<AgentConfig> LoadAgentConfig(const EnvLookupFn& env = nullptr);

}  // namespace aon
