// The one clock model of AON: a host clock mapped onto the job's reference clock
// by an offset and a linear drift, with an error bound.
//
//   reference(t) = t + offset_ns + drift * (t - reference_ns)
//
// clocksync/ fits it from ping-pong measurements (ClockModel adds the measured
// span), the agent stores it in its rank file (RankMetadata's clock_* fields,
// drift in ppm there: RankMetadata::clock() / set_clock()), node leaders hand it
// to their followers (clock_leaders.h) and the merge applies it to every time
// field of every record (merge/src/record_ops.h).
#pragma once

#include <cmath>
#include <cstdint>

namespace aon {

// t + offset, clamped to [0, UINT64_MAX] (a negative offset larger than t only
// happens with a bogus offset or timestamp; wrapping would put the record at the
// other end of time).
inline uint64_t ShiftClock(uint64_t t, int64_t offset) {
  if (offset < 0) {
    const uint64_t back = static_cast<uint64_t>(-(offset + 1)) + 1;
    return t < back ? 0 : t - back;
  }
  const uint64_t ahead = static_cast<uint64_t>(offset);
  return t > UINT64_MAX - ahead ? UINT64_MAX : t + ahead;
}

struct LinearClock {
  int64_t offset_ns = 0;
  double drift = 0.0;         // dimensionless (1e-6 = 1 ppm)
  uint64_t reference_ns = 0;  // the local time `offset_ns` refers to
  int64_t bound_ns = -1;      // |error of OffsetAt| <= bound_ns; -1: unknown

  // reference(t) - t.
  int64_t OffsetAt(uint64_t t) const {
    if (drift == 0.0) return offset_ns;
    const double dt = static_cast<double>(static_cast<int64_t>(t - reference_ns));
    return offset_ns + static_cast<int64_t>(std::llround(drift * dt));
  }
  // reference(t), clamped (ShiftClock).
  uint64_t Apply(uint64_t t) const { return ShiftClock(t, OffsetAt(t)); }
};

}  // namespace aon
