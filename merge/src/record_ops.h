// Per-record-type operations the merge and the exporters share: which fields
// are string-table ids and which are timestamps.
#pragma once

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

template <typename T>
void ShiftRecordClock(T& r, int64_t offset) {
  if constexpr (kHasTimestamps<T>) {
    r.start_ns = ShiftClock(r.start_ns, offset);
    r.end_ns = ShiftClock(r.end_ns, offset);
  }
  if constexpr (std::is_same_v<T, NcclRecord>) {
    if (r.gpu_start_ns != 0) r.gpu_start_ns = ShiftClock(r.gpu_start_ns, offset);
  }
}

}  // namespace aon::merge
