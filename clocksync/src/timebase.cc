#include "aon/timebase.h"

namespace aon {

RealtimeAnchor TakeRealtimeAnchor() {
  RealtimeAnchor best;
  best.uncertainty_ns = UINT64_MAX;
  for (int i = 0; i < 16; ++i) {
    uint64_t before = TimebaseNowNs();
    timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t after = TimebaseNowNs();
    if (after - before < best.uncertainty_ns) {
      best.uncertainty_ns = after - before;
      best.timebase_ns = before + (after - before) / 2;
      best.realtime_ns = static_cast<uint64_t>(rt.tv_sec) * 1000000000ull + static_cast<uint64_t>(rt.tv_nsec);
    }
  }
  return best;
}

}  // namespace aon
