// Agent configuration: every setting is one environment variable, described in
// one self-describing table (variable, type, default, description, parser), so
// the agent's parsing, `aon-run --help`, the SPANK plugin, the front ends' own
// checks of what a user typed (aon/config/options.h) and docs/ all read the
// same entries. Parsing is strict: an unknown kind or a malformed size is an
// error that names the variable and the value.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "aon/base/status.h"
#include "aon/format/records.h"
#include "aon/format/trace_format.h"

namespace aon {

// One per AON_* variable, in the order of AgentConfigVariables().
enum class AgentVar : uint8_t {
  kOutputDir,
  kKinds,
  kMemoryCap,
  kSource,
  kVerbose,
  kJobId,
  kLauncherParentPid,
  kNccl,
  kMode,
  kWindow,
  kFlushInterval,
  kCollector,
  kFlightNcclStall,
  kFlightStepRange,
  kFlightStepFactor,
  kOverheadBudget,
  kCaptureSteps,
  kCapturePeriod,
  kStepSource,
  kStepRange,
  kTimeSlot,
  kCounters,
  kCountersInterval,
  kCountersSampleInterval,
  kPythonHook,
  kHostSampleHz,
  kCount,  // not a variable: the number of them
};
inline constexpr size_t kAgentConfigVariableCount = static_cast<size_t>(AgentVar::kCount);

// AON_MODE (aon-run --mode, srun --aon-mode).
inline constexpr std::array<std::string_view, 3> kCaptureModes = {"budgeted", "full", "flight"};
// AON_STEP_SOURCE: where step boundaries come from; auto takes the first of
// api, pytorch, jax, nvtx, xla, nccl, time that marks steps (docs/always-on.md).
// Numbered as StepSourceSetting (jax and xla came last).
inline constexpr std::array<std::string_view, 8> kStepSources = {"auto", "api",  "pytorch", "nvtx",
                                                                 "nccl", "time", "jax",     "xla"};

// AON_COUNTERS: which GPU counters are read (docs/counters.md). auto: every
// tier the node allows (today NVML GPM, read by the node collector); gpm: the
// same, named; off: none. The order is also a site's ceiling (SPANK counters=).
inline constexpr std::array<std::string_view, 3> kCounterModes = {"off", "gpm", "auto"};
// AON_PYTHON_HOOK (aon-run --python-hook, srun --aon-python-hook).
inline constexpr std::array<std::string_view, 2> kOnOff = {"on", "off"};

// The NCCL capture modes of AON_NCCL (aon-run --nccl, srun --aon-nccl).
inline constexpr std::array<std::string_view, 5> kNcclModes = {"default", "channels", "coll",
                                                               "proxy", "off"};

// AON_SOURCE: the GPU activity source.
inline constexpr std::array<std::string_view, 2> kGpuSources = {"cupti", "synthetic"};

// The choices as types, each in the order of its names above; ChoiceName(value)
// is the name a user writes (and the rank file keeps).
// (CaptureMode, aon/format/trace_format.h, numbers them from 1, as the merged file does.)
enum class StepSourceSetting : uint8_t { kAuto, kApi, kPytorch, kNvtx, kNccl, kTime, kJax, kXla };
enum class CounterMode : uint8_t { kOff, kGpm, kAuto };
enum class NcclMode : uint8_t { kDefault, kChannels, kColl, kProxy, kOff };
enum class GpuSource : uint8_t { kCupti, kSynthetic };
constexpr std::string_view ChoiceName(CaptureMode v) { return kCaptureModes[size_t(v) - 1]; }
constexpr std::string_view ChoiceName(StepSourceSetting v) { return kStepSources[size_t(v)]; }
constexpr std::string_view ChoiceName(CounterMode v) { return kCounterModes[size_t(v)]; }
constexpr std::string_view ChoiceName(NcclMode v) { return kNcclModes[size_t(v)]; }
constexpr std::string_view ChoiceName(GpuSource v) { return kGpuSources[size_t(v)]; }
static_assert(kCaptureModes.size() == size_t(CaptureMode::kFlight));
static_assert(kStepSources.size() == size_t(StepSourceSetting::kXla) + 1);
static_assert(kCounterModes.size() == size_t(CounterMode::kAuto) + 1);
static_assert(kNcclModes.size() == size_t(NcclMode::kOff) + 1);
static_assert(kGpuSources.size() == size_t(GpuSource::kSynthetic) + 1);

// AON_MEMORY_CAP's bounds: the agent needs 1M; the ring (half the cap, a power
// of two) holds at most 16G (aon/ipc/shm_ring.h, kMaxRingBytes).
inline constexpr uint64_t kMinMemoryCapBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxMemoryCapBytes = uint64_t{32} << 30;

// The agent's settings. A default-constructed AgentConfig holds every variable's
// default: its row's default_value in AgentConfigVariables(), applied by the row's own
// parser, so a default is written once, in the table.
struct AgentConfig {
  AgentConfig();  // the defaults, parsed once per process and copied

  std::string output_dir;  // AON_OUTPUT_DIR: where rank files go ("" = don't write)
  std::array<bool, kRecordKindCount> kinds{};  // AON_KINDS
  uint64_t memory_cap_bytes{};                 // AON_MEMORY_CAP
  GpuSource source{};                          // AON_SOURCE
  int verbose{};                               // AON_VERBOSE
  std::string job_id;                          // AON_JOB_ID
  long launcher_parent_pid{};                  // AON_LAUNCHER_PARENT_PID
  NcclMode nccl{};                             // AON_NCCL
  CaptureMode mode{};                          // AON_MODE
  double window_s{};                           // AON_WINDOW (flight)
  int64_t flush_interval_ms{};                 // AON_FLUSH_INTERVAL
  std::string collector;                       // AON_COLLECTOR: path, "off", "" (next to agent)
  double flight_nccl_stall_s{};                // AON_FLIGHT_NCCL_STALL (0: off)
  std::string flight_step_range;               // AON_FLIGHT_STEP_RANGE ("" : off)
  double flight_step_factor{};                 // AON_FLIGHT_STEP_FACTOR
  double overhead_budget{};         // AON_OVERHEAD_BUDGET (a fraction; percent on the wire)
  int64_t capture_steps{};          // AON_CAPTURE_STEPS: steps per window, 0 = auto
  int64_t capture_period{};         // AON_CAPTURE_PERIOD: 0 = set by the budget
  StepSourceSetting step_source{};  // AON_STEP_SOURCE
  // AON_STEP_RANGE: NVTX range names that mark steps (comma-separated prefixes,
  // case-insensitive, followed by the end, a digit or one of " _-:#").
  std::string step_range;
  double time_slot_s{};            // AON_TIME_SLOT: steps of the time source
  CounterMode counters{};          // AON_COUNTERS
  int64_t counters_interval_ms{};  // AON_COUNTERS_INTERVAL: GPM sampling interval
  int64_t counters_sample_us{};    // AON_COUNTERS_SAMPLE_INTERVAL: PM sampling, GPU time
  bool python_hook{};              // AON_PYTHON_HOOK: the PyTorch hook (docs/pytorch.md)
  int64_t host_sample_hz{};        // AON_HOST_SAMPLE_HZ: host stack samples per CPU-second, 0 = off

  bool enabled(RecordKind k) const { return kinds[static_cast<size_t>(k)]; }
  // "kernels,memcpy,..." of the enabled kinds.
  std::string KindsString() const;
  bool operator==(const AgentConfig&) const = default;

 private:
  struct ParseDefaults {};
  explicit AgentConfig(ParseDefaults);  // zeros, then every row's default parsed
};

// What a variable's value is, for help text and docs.
enum class ConfigType : uint8_t {
  kPath,
  kText,
  kKinds,
  kSize,
  kInteger,
  kChoice,
  kSeconds,
  kNumber
};
const char* ConfigTypeName(ConfigType type);  // "path", "text", "kinds", "size", ...

// How both front ends (aon-run, srun --aon) offer a variable that only passes its value
// on: a row that names them is an option of both, checked by the row's parser and set as
// typed (aon/config/options.h); nothing else declares it.
struct FrontEndNames {
  const char* run = nullptr;    // aon-run's option ("--capture-steps")
  const char* spank = nullptr;  // srun's, without "--" ("aon-capture-steps")
  const char* value = nullptr;  // what the value is, for help ("N", "auto|gpm|off")
  const char* help = nullptr;   // the option's help, for both front ends
};

struct ConfigVariable {
  AgentVar id;
  const char* env;
  ConfigType type;
  const char* default_value;  // applied by AgentConfig() through `parse` ("" = none)
  const char* description;
  // Parses `value` into its field of `config`. The error names the variable and
  // the value. Called for a set, non-empty value (and for an empty one where
  // empty_is_value: "" means "off" there).
  Status (*parse)(std::string_view value, AgentConfig* config);
  bool empty_is_value;
  FrontEndNames front_end = {};  // set: an option of both front ends (above)
};

// The table of AON_* variables read by the agent.
const std::array<ConfigVariable, kAgentConfigVariableCount>& AgentConfigVariables();
const ConfigVariable& AgentConfigVariable(AgentVar var);

// Checks `value` with the parser the agent runs on it; the error names the
// variable ("AON_MEMORY_CAP: ..."). An empty value is accepted where the agent
// takes it as unset or off.
Status CheckAgentVariable(AgentVar var, std::string_view value);

// Parses "all", "default" or a comma-separated list of RecordKindName()s (plus
// the aliases "kernel", "runtime"/"driver" = api).
StatusOr<std::array<bool, kRecordKindCount>> ParseKinds(std::string_view list);
// "64M", "1G", "4096", "512K" -> bytes.
StatusOr<uint64_t> ParseSize(std::string_view text);

using EnvLookupFn = std::function<const char*(const char*)>;
StatusOr<AgentConfig> LoadAgentConfig(const EnvLookupFn& env = nullptr);

}  // namespace aon
