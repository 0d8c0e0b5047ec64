// The host timebase of every AON timestamp.
//
// CLOCK_MONOTONIC: it never steps (NTP only slews its rate), so intervals and
// ordering within a host are always right, and it is the clock that time
// namespaces shift, which lets tests give "nodes" on one machine real,
// different clocks. CLOCK_REALTIME can jump backwards under NTP or an admin's
// `date`, which would reorder events. A realtime anchor (both clocks read back
// to back, keeping the pair with the shortest gap) lets viewers show wall time.
// CUPTI is told to use the same clock (cuptiActivityRegisterTimestampCallback),
// so GPU and host records share it. Cross-host alignment is clock sync's job.
#pragma once

#include <time.h>

#include <cstdint>
#include <string>

namespace aon {

inline constexpr const char* kTimebaseName = "CLOCK_MONOTONIC";

inline uint64_t TimebaseNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// CLOCK_REALTIME now: wall time, for what must agree across hosts without a
// measured offset (time-slot steps, on-demand request files), never for records.
inline uint64_t RealtimeNowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct RealtimeAnchor {
  uint64_t timebase_ns = 0;
  uint64_t realtime_ns = 0;
  uint64_t uncertainty_ns = 0;  // gap between the two timebase reads around REALTIME
};

// Reads REALTIME between two timebase reads, several times, and keeps the
// tightest bracket; the timebase value is the bracket's midpoint.
RealtimeAnchor TakeRealtimeAnchor();

// Which CLOCK_MONOTONIC this process reads: "<boot id>/timens:<inode>". The
// boot id (/proc/sys/kernel/random/boot_id) names the running kernel; the time
// namespace (/proc/self/ns/time) is needed too, because processes of one kernel
// in different time namespaces read clocks that differ by the namespace's
// offset (tests give "nodes" on one host their own clocks exactly this way).
// Equal ids: the same clock, so one measurement serves both (node leaders,
// aon/format/clock_leaders.h). "" when the boot id cannot be read: an empty id proves
// nothing, so such a rank measures its clock itself.
std::string TimebaseClockId();

}  // namespace aon
