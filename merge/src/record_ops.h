// Per-record-type operations the merge and the exporters share: which fields
// are string-table ids and which are timestamps.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "aon/records.h"
#include "aon/trace_format.h"

namespace aon::merge {

// Calls f(uint32_t& id) for every field of `r` that is a string-table id.
// A new string field in records.h must be listed here, or the merge would keep
// a rank-local id that means another string in the unified table.
template <typename T, typename F>
void ForEachStringId(T& r, F&& f) {
  using U = std::remove_const_t<T>;
  if constexpr (std::is_same_v<U, KernelRecord> || std::is_same_v<U, ApiRecord>) {
    f(r.name_id);
  } else if constexpr (std::is_same_v<U, NvtxRecord>) {
    f(r.domain_id);
    f(r.name_id);
  } else if constexpr (std::is_same_v<U, NcclRecord>) {
    f(r.func_id);
    f(r.algo_id);
    f(r.proto_id);
    f(r.datatype_id);
  } else if constexpr (std::is_same_v<U, DeviceInfo>) {
    f(r.uuid_id);
    f(r.name_id);
  }
}

template <typename T>
constexpr bool kHasTimestamps = !std::is_same_v<T, ExternalCorrelationRecord>;

template <typename T>
uint64_t EndOf(const T& r) {
  if constexpr (kHasTimestamps<T>) {
    return r.end_ns;
  } else {
    return 0;
  }
}

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
  if constexpr (kHasTimestamps<T>) {
    r.start_ns = c.Apply(r.start_ns);
    r.end_ns = c.Apply(r.end_ns);
  }
  if constexpr (std::is_same_v<T, NcclRecord>) {
    if (r.gpu_start_ns != 0) r.gpu_start_ns = c.Apply(r.gpu_start_ns);
  }
}

}  // namespace aon::merge
