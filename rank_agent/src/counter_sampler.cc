#include "counter_sampler.h"

#include <cmath>

namespace aon::agent {

std::string SamplerRefusalNote(SamplerRefusal why, std::string_view detail) {
  const std::string d = detail.empty() ? "" : " (" + std::string(detail) + ")";
  switch (why) {
    case SamplerRefusal::kPrivileges:
      return "counters: no sampled GPU counters in capture windows: this site restricts GPU "
             "performance counters to administrators" +
             d +
             "; NVreg_RestrictProfilingToAdminUsers=0 (nvidia module parameter) or CAP_PERFMON "
             "allows them; node GPM metrics are not affected";
    case SamplerRefusal::kBusy:
      return "counters: no sampled GPU counters in capture windows: the GPU's performance "
             "monitor is held by another tool (Nsight Compute, DCGM profiling, another "
             "profiler, or another rank on this GPU)" +
             d + "; AON does not wait for it";
    case SamplerRefusal::kUnsupported:
      return "counters: no sampled GPU counters in capture windows: PM sampling is not "
             "supported on this GPU or driver" +
             d + "; node GPM metrics still are";
    case SamplerRefusal::kFellBehind:
      return "counters: sampled GPU counters fell behind" + d +
             ": the hardware buffer overflowed, samples of that window after it were lost; a "
             "larger --counters-sample-interval avoids it";
    case SamplerRefusal::kOther:
      break;
  }
  return "counters: no sampled GPU counters in capture windows: " + std::string(detail);
}

void SampleWriter::Write(uint64_t start_ns, uint64_t end_ns, std::span<const double> values) {
  ++samples_;
  CounterRecord r{};
  r.start_ns = start_ns;
  r.end_ns = end_ns;
  r.gpu_uuid_hi = uuid_.hi;
  r.gpu_uuid_lo = uuid_.lo;
  r.device = device_;
  r.source = static_cast<uint8_t>(source_);
  for (size_t i = 0; i < values.size() && i < kSampledMetricCount; ++i) {
    if (!std::isfinite(values[i])) {
      ++not_numbers_;
      continue;
    }
    r.metric = static_cast<uint16_t>(kSampledMetrics[i]);
    r.value = values[i];
    sink_.Push(r);
    ++rows_;
  }
}

}  // namespace aon::agent
