// Clock offset and drift between two hosts from ping-pong exchanges, with an
// error bound that holds whenever the one-way delays are non-negative.
//
// One exchange (NTP/Cristian style): the client reads its clock (t0), sends;
// the server stamps its clock on arrival/reply (t1); the client reads t2 when
// the reply lands. With unknown one-way delays d_out, d_back >= 0 and
// rtt = t2 - t0 = d_out + d_back (+ server turnaround, included in the bound):
//     server_at(midpoint) - client midpoint = t1 - (t0 + t2) / 2  +  (d_out - d_back) / 2
// so the estimate's error is at most rtt / 2. That asymmetry is invisible from
// the endpoints (docs/clock-sync.md), which is why the bound, not a
// statistical spread, is what we report. Many exchanges, keep the smallest
// rtt: queueing only ever adds delay, so the fastest exchange is the tightest.
//
// Drift: offsets measured at several times (start, periodically, end) are fit
// with a line offset(t) = a + b (t - t_ref); the bound of a prediction is the
// worst measurement bound plus the worst fit residual.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "aon/base/linear_clock.h"
#include "aon/base/status.h"

namespace aon::clocksync {

struct PingSample {
  uint64_t client_send_ns;  // t0, client clock
  uint64_t server_ns;       // t1, server clock
  uint64_t client_recv_ns;  // t2, client clock
};

struct OffsetMeasurement {
  int64_t offset_ns = 0;       // server clock - client clock at client_time_ns
  uint64_t client_time_ns = 0; // midpoint of the exchange on the client clock
  uint64_t rtt_ns = 0;         // of the exchange used
  uint64_t bound_ns = 0;       // |true offset - offset_ns| <= bound_ns
  size_t samples = 0;          // exchanges considered
};

// Best (minimum round trip) exchange of `samples`. Samples with t2 < t0 are
// invalid input (a clock that is not monotonic) and are an error.
StatusOr<OffsetMeasurement> EstimateOffset(std::span<const PingSample> samples);

// A server-minus-client clock model (aon/base/linear_clock.h: offset(t) = offset_ns +
// drift * (t - reference_ns), bound_ns holds within the measured span), with
// that span.
struct ClockModel : LinearClock {
  uint64_t span_begin_ns = 0;  // first and last measurement (client clock)
  uint64_t span_end_ns = 0;
};

// Least-squares line through the measurements, each weighted by 1/bound^2 (a
// tight exchange counts more). One measurement: drift 0.
StatusOr<ClockModel> FitClockModel(std::span<const OffsetMeasurement> measurements);

}  // namespace aon::clocksync
