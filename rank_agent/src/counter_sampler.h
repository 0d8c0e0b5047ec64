// Sampled GPU counters inside capture windows (docs/counters.md, "Sampled
// counters in capture windows"): while a window is open the GPU's performance
// monitor samples a fixed metric set every AON_COUNTERS_SAMPLE_INTERVAL
// microseconds of GPU time; every sample becomes one `counters` row per metric
// on the kernels' timebase, so a kernel's figures are the samples it overlaps.
//
// Two implementations of the same two transitions, like ActivityCapture:
// CUPTI PM sampling on real GPUs (cupti_pm_sampling.cc) and the labeled
// synthetic device's (synthetic_source.cc), which computes each sample from the
// planted profiles of the kernels that overlap it. Both say why they cannot
// sample with the same notes (SamplerRefusalNote), so the fake's refusals test
// the texts users read.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "aon/base/gpu_uuid.h"
#include "aon/format/records.h"
#include "record_sink.h"

namespace aon::agent {

class CounterSampler {
 public:
  virtual ~CounterSampler() = default;
  // The first step boundary (the thread that marks steps, with its CUDA
  // context current): a chance to set up before the first window opens.
  virtual void Prepare() {}
  // A window opens (the thread that marked the boundary, under the capture
  // control's lock). Never blocks on the GPU; the first window may start
  // sampling late while the sampler prepares (once per process).
  virtual void Begin() = 0;
  // The window's last step ended: sampling stops (it may finish on the
  // sampler's own thread, during the window's tail).
  virtual void End() = 0;
  // Every sample taken is delivered when this returns (CUPTI detaches next).
  virtual void Deliver() { End(); }
};

// The metric set: what each sampled metric is in our terms. The CUPTI names and
// their order live with the CUPTI sampler; this is the list both share.
inline constexpr CounterMetric kSampledMetrics[] = {
    CounterMetric::kGpuActive, CounterMetric::kSmActive, CounterMetric::kSmIssueActive,
    CounterMetric::kTensorActive, CounterMetric::kDramBandwidth};
inline constexpr size_t kSampledMetricCount = std::size(kSampledMetrics);

// Why a sampler stops or never starts. Each is said once per process.
enum class SamplerRefusal : uint8_t {
  kPrivileges,   // the site restricts counters to administrators
  kBusy,         // another tool (or another rank on this GPU) holds the monitor
  kUnsupported,  // this GPU or driver has no PM sampling (before Ampere GA10x/Hopper)
  kFellBehind,   // samples came faster than they could be read: the hardware buffer overflowed
  kOther,        // any other error, with CUPTI's text
};
std::string SamplerRefusalNote(SamplerRefusal why, std::string_view detail);

// Turns samples into `counters` rows of one GPU (thread-compatible: one writer).
class SampleWriter {
 public:
  SampleWriter(RecordSink& sink, GpuUuid uuid, uint32_t device, CounterSource source)
      : sink_(sink), uuid_(uuid), device_(device), source_(source) {}
  // `values` in the order of kSampledMetrics; a value that is not a finite
  // number is left out (and counted).
  void Write(uint64_t start_ns, uint64_t end_ns, std::span<const double> values);
  uint64_t samples() const { return samples_; }
  uint64_t rows() const { return rows_; }
  uint64_t not_numbers() const { return not_numbers_; }

 private:
  RecordSink& sink_;
  GpuUuid uuid_;
  uint32_t device_;
  CounterSource source_;
  uint64_t samples_ = 0, rows_ = 0, not_numbers_ = 0;
};

}  // namespace aon::agent
