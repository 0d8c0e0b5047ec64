// Per-record operations of the merge: a rank's clock correction applied to
// every time field of a record. Which fields are times and which are string ids
// is declared once in each kind's field table (format/include/aon/format/records.h);
// ShiftTimes and ForEachStringId (format/include/aon/format/schema.h) act on those roles.
#pragma once

#include <cmath>
#include <cstdint>

#include "aon/base/linear_clock.h"
#include "aon/format/records.h"
#include "aon/format/trace_format.h"

namespace aon::merge {

// A rank's records onto the reference clock (aon/base/linear_clock.h).
template <typename T>
void ShiftRecordClock(T& r, const LinearClock& c) {
  ShiftTimes(r, [&](uint64_t t) { return c.Apply(t); });
}

}  // namespace aon::merge
