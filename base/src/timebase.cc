#include "aon/base/timebase.h"

#include <sys/stat.h>

#include <fstream>

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

std::string TimebaseClockId() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  if (boot_id.empty()) return "";  // cannot prove sameness: nobody follows us, we follow nobody
  // Kernels without time namespaces (before 5.6) have one CLOCK_MONOTONIC.
  struct stat st {};
  const std::string timens =
      stat("/proc/self/ns/time", &st) == 0 ? std::to_string(st.st_ino) : std::string("none");
  return boot_id + "/timens:" + timens;
}

}  // namespace aon
