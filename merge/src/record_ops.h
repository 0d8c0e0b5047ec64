// Per-record operations of the merge: a rank's clock correction applied to
// every time field of a record. Which fields are times and which are string ids
// is declared once in each kind's field table (common/include/aon/records.h);
// ShiftTimes and ForEachStringId (common/include/aon/schema.h) act on those roles.
#pragma once

#include <cmath>
#include <cstdint>

#include "aon/records.h"
#include "aon/trace_format.h"

namespace aon::merge {

// t + offset on the reference clock, clamped at 0 (a negative offset larger than
// t only happens with a bogus offset or timestamp; wrapping would put the record
// at the end of time).
inline uint64_t ShiftClock(uint64_t t, int64_t offset) {
  if (offset < 0) {
    const uint64_t back = static_cast<uint64_t>(-(offset + 1)) + 1;
    return t < back ? 0 : t - back;
  }
  return t + static_cast<uint64_t>(offset);
}

// A rank's clock onto the reference clock: t + offset + drift * (t - reference).
struct ClockCorrection {
  int64_t offset_ns = 0;
  double drift = 0.0;
  uint64_t reference_ns = 0;

  static ClockCorrection Of(const RankMetadata& m) {
    return {m.clock_offset_ns, m.clock_drift_ppm * 1e-6, m.clock_reference_ns};
  }
  uint64_t Apply(uint64_t t) const {
    if (drift == 0.0) return ShiftClock(t, offset_ns);
    const double dt = static_cast<double>(static_cast<int64_t>(t - reference_ns));
    return ShiftClock(t, offset_ns + static_cast<int64_t>(std::llround(drift * dt)));
  }
};

template <typename T>
void ShiftRecordClock(T& r, const ClockCorrection& c) {
  ShiftTimes(r, [&](uint64_t t) { return c.Apply(t); });
}

}  // namespace aon::merge
