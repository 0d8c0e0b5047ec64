// Flight-mode triggers that the collector derives from a rank's records:
//   * NCCL stall: the rank issued NCCL operations, then none for stall_s seconds
//     (a hang: the classic "one rank stuck in a collective");
//   * step spike: an NVTX range whose name contains step_range lasted more than
//     step_factor x the median of the previous steps (at least kMinSteps seen).
// Each fires once per episode (a stall re-arms when NCCL progresses again).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>

#include "aon/format/records.h"

namespace aon::collector {

struct FlightWatchOptions {
  double nccl_stall_s = 60;         // 0: off
  std::string step_range = "step";  // "": off
  double step_factor = 3;
};

class FlightWatch {
 public:
  static constexpr size_t kMinSteps = 8;
  static constexpr size_t kHistory = 32;

  explicit FlightWatch(FlightWatchOptions options) : options_(std::move(options)) {}

  // now_ns: the collector's clock when the record was drained.
  void OnNccl(uint64_t now_ns);
  // Returns a trigger reason ("" if none). `name` is the range's name.
  std::string OnNvtxRange(const NvtxRecord& r, const std::string& name);
  // Periodic check; returns a trigger reason ("" if none).
  std::string Check(uint64_t now_ns);

 private:
  FlightWatchOptions options_;
  bool nccl_seen_ = false;
  bool stall_fired_ = false;
  uint64_t last_nccl_ns_ = 0;
  std::deque<uint64_t> steps_;
};

}  // namespace aon::collector
