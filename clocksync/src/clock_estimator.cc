#include "aon/clocksync/clock_estimator.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace aon::clocksync {

StatusOr<OffsetMeasurement> EstimateOffset(std::span<const PingSample> samples) {
  if (samples.empty()) return InvalidArgument("clock offset: no ping-pong samples");
  const PingSample* best = nullptr;
  for (const PingSample& s : samples) {
    if (s.client_recv_ns < s.client_send_ns) {
      return InvalidArgument("clock offset: a reply arrived before its request was sent (" +
                             std::to_string(s.client_recv_ns) + " < " +
                             std::to_string(s.client_send_ns) + "): the client clock is not monotonic");
    }
    if (best == nullptr || s.client_recv_ns - s.client_send_ns < best->client_recv_ns - best->client_send_ns) {
      best = &s;
    }
  }
  OffsetMeasurement m;
  m.rtt_ns = best->client_recv_ns - best->client_send_ns;
  m.client_time_ns = best->client_send_ns + m.rtt_ns / 2;
  m.offset_ns = static_cast<int64_t>(best->server_ns) - static_cast<int64_t>(m.client_time_ns);
  // rtt/2, rounded up, plus the midpoint's rounding.
  m.bound_ns = (m.rtt_ns + 1) / 2 + 1;
  m.samples = samples.size();
  return m;
}

StatusOr<ClockModel> FitClockModel(std::span<const OffsetMeasurement> ms) {
  if (ms.empty()) return InvalidArgument("clock model: no offset measurements");
  ClockModel model;
  auto [lo, hi] = std::minmax_element(ms.begin(), ms.end(), [](const auto& a, const auto& b) {
    return a.client_time_ns < b.client_time_ns;
  });
  model.span_begin_ns = lo->client_time_ns;
  model.span_end_ns = hi->client_time_ns;
  // Work relative to the weighted mean time: well conditioned in doubles even
  // with absolute nanosecond timestamps.
  double sw = 0, st = 0;
  for (const auto& m : ms) {
    const double w = 1.0 / std::max(1.0, static_cast<double>(m.bound_ns) * static_cast<double>(m.bound_ns));
    sw += w;
    st += w * static_cast<double>(m.client_time_ns - model.span_begin_ns);
  }
  model.reference_ns = model.span_begin_ns + static_cast<uint64_t>(std::llround(st / sw));
  double so = 0, stt = 0, sto = 0;
  const double o0 = static_cast<double>(ms[0].offset_ns);
  for (const auto& m : ms) {
    const double w = 1.0 / std::max(1.0, static_cast<double>(m.bound_ns) * static_cast<double>(m.bound_ns));
    const double t = static_cast<double>(static_cast<int64_t>(m.client_time_ns - model.reference_ns));
    const double o = static_cast<double>(m.offset_ns) - o0;
    so += w * o;
    stt += w * t * t;
    sto += w * t * o;
  }
  model.drift = stt > 0 ? sto / stt : 0.0;
  model.offset_ns = static_cast<int64_t>(std::llround(so / sw + o0));
  uint64_t worst_bound = 0, worst_residual = 0;
  for (const auto& m : ms) {
    worst_bound = std::max(worst_bound, m.bound_ns);
    const int64_t residual = m.offset_ns - model.OffsetAt(m.client_time_ns);
    worst_residual = std::max<uint64_t>(worst_residual, static_cast<uint64_t>(std::llabs(residual)));
  }
  model.bound_ns = static_cast<int64_t>(worst_bound + worst_residual);
  return model;
}

}  // namespace aon::clocksync
