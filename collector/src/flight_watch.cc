#include "flight_watch.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace aon::collector {

void FlightWatch::OnNccl(uint64_t now_ns) {
  nccl_seen_ = true;
  stall_fired_ = false;  // progress: a later stall is a new episode
  last_nccl_ns_ = now_ns;
}

std::string FlightWatch::OnNvtxRange(const NvtxRecord& r, const std::string& name) {
  if (options_.step_range.empty() || r.type == static_cast<uint8_t>(NvtxType::kMark) ||
      r.end_ns <= r.start_ns || name.find(options_.step_range) == std::string::npos) {
    return "";
  }
  const uint64_t d = r.end_ns - r.start_ns;
  std::string reason;
  if (steps_.size() >= kMinSteps) {
    std::vector<uint64_t> sorted(steps_.begin(), steps_.end());
    std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
    const double median = static_cast<double>(sorted[sorted.size() / 2]);
    if (static_cast<double>(d) > options_.step_factor * median) {
      char buf[200];
      std::snprintf(buf, sizeof(buf),
                    "step-time spike: '%s' took %.3f ms, %.1fx the median %.3f ms", name.c_str(),
                    static_cast<double>(d) / 1e6, static_cast<double>(d) / median, median / 1e6);
      reason = buf;
    }
  }
  steps_.push_back(d);
  if (steps_.size() > kHistory) steps_.pop_front();
  return reason;
}

std::string FlightWatch::Check(uint64_t now_ns) {
  if (options_.nccl_stall_s <= 0 || !nccl_seen_ || stall_fired_) return "";
  const double idle_s = static_cast<double>(now_ns - last_nccl_ns_) / 1e9;
  if (idle_s < options_.nccl_stall_s) return "";
  stall_fired_ = true;
  char buf[120];
  std::snprintf(buf, sizeof(buf), "no NCCL progress for %.1f s", idle_s);
  return buf;
}

}  // namespace aon::collector
