// aon-bench-cupti-toggle: what it costs to switch CUPTI activity tracing on and
// off inside one process, the question behind capture windows (issue #15): can a
// process be traced for a few steps and then run as if no profiler were there?
//
//   aon-bench-cupti-toggle [--launches 256] [--steps 200] [--rounds 7]
//
// A "step" is --launches back-to-back launches of an empty kernel, one small
// memset and one small host-to-device copy on one stream, then a stream
// synchronize: a launch-bound training step in miniature. Each phase runs
// --steps steps and records every step's wall time. Rounds interleave the
// phases, so slow drift of the machine hits every phase alike:
//
//   plain      before CUPTI is touched (round 0 only) and after a detach
//              (cuptiFinalize): the process as if no profiler were there
//   full       subscribed, kinds enabled as AON's full capture: CONCURRENT_KERNEL,
//              MEMCPY, MEMSET, SYNCHRONIZATION, RUNTIME, DRIVER, EXTERNAL_CORRELATION
//   kernels    subscribed, CONCURRENT_KERNEL only
//   disabled   subscribed, every kind disabled again (cuptiActivityDisable)
//   detached   after cuptiActivityFlushAll + cuptiFinalize: CUPTI detached
//   kernels-unsubscribed, full-unsubscribed
//              as kernels and full, but CUPTI attached by the activity API alone
//              (no cuptiSubscribe: no callback subscriber at all)
//
// It also times the switches themselves (enable, disable, flush, finalize,
// re-subscribe), the first step after each enable (what a window's first
// launches pay), and the first launch of a kernel never launched before
// inside a window (module loading and CUPTI's instrumentation of it).
//
// Output: one TOGGLE line per measurement and a Markdown table at the end:
// median step time, its interquartile range, and the cost per launch against
// the plain (detached) phase of the same round.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

__global__ void EmptyKernel() {}
__global__ void FirstSeenInWindow(int* p) {
  if (p != nullptr) *p = 1;
}

double NowUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

void CheckCuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "FAIL %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

void CheckCupti(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::fprintf(stderr, "FAIL %s: %s\n", what, s ? s : "?");
  std::exit(1);
}

constexpr size_t kBufferBytes = 8u << 20;
uint64_t g_records = 0;

void CUPTIAPI OnRequest(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI OnComplete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) ++g_records;
  std::free(buffer);
}

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

const CUpti_ActivityKind kFullKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET,
                                         CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                         CUPTI_ACTIVITY_KIND_RUNTIME,
                                         CUPTI_ACTIVITY_KIND_DRIVER,
                                         CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

struct Cupti {
  CUpti_SubscriberHandle sub = nullptr;
  bool attached = false;

  // subscribe = false: the activity API alone, no callback subscriber.
  double Attach(bool subscribe = true) {
    const double t0 = NowUs();
    if (subscribe) {
      CheckCupti(cuptiSubscribe(&sub, reinterpret_cast<CUpti_CallbackFunc>(OnCallback), nullptr),
                 "cuptiSubscribe");
    }
    CheckCupti(cuptiActivityRegisterCallbacks(OnRequest, OnComplete), "register callbacks");
    attached = true;
    return NowUs() - t0;
  }
  double Enable(bool full) {
    const double t0 = NowUs();
    if (full) {
      for (CUpti_ActivityKind k : kFullKinds) CheckCupti(cuptiActivityEnable(k), "enable");
    } else {
      CheckCupti(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernels");
    }
    return NowUs() - t0;
  }
  double Disable() {
    const double t0 = NowUs();
    for (CUpti_ActivityKind k : kFullKinds) cuptiActivityDisable(k);  // some were never enabled
    return NowUs() - t0;
  }
  double Flush() {
    const double t0 = NowUs();
    CheckCupti(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush");
    return NowUs() - t0;
  }
  double Detach() {
    const double t0 = NowUs();
    if (sub != nullptr) CheckCupti(cuptiUnsubscribe(sub), "cuptiUnsubscribe");
    sub = nullptr;
    CheckCupti(cuptiFinalize(), "cuptiFinalize");
    attached = false;
    return NowUs() - t0;
  }
};

struct Loop {
  int launches = 256;
  cudaStream_t stream{};
  void* dev = nullptr;
  void* host = nullptr;

  void Init() {
    CheckCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    CheckCuda(cudaMalloc(&dev, 4096), "malloc");
    CheckCuda(cudaMallocHost(&host, 4096), "malloc host");
  }
  double Step() {
    const double t0 = NowUs();
    for (int i = 0; i < launches; ++i) EmptyKernel<<<1, 1, 0, stream>>>();
    CheckCuda(cudaMemsetAsync(dev, 0, 4096, stream), "memset");
    CheckCuda(cudaMemcpyAsync(dev, host, 4096, cudaMemcpyHostToDevice, stream), "memcpy");
    CheckCuda(cudaStreamSynchronize(stream), "sync");
    return NowUs() - t0;
  }
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 200, rounds = 7;
  Loop loop;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--launches"))
      loop.launches = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--steps"))
      steps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rounds"))
      rounds = std::atoi(argv[i + 1]);
  }
  CheckCuda(cudaSetDevice(0), "device");
  loop.Init();
  for (int i = 0; i < 50; ++i) loop.Step();  // warm up (module load, clocks)

  // Per phase, the per-round medians (for ratios within a round) and all steps.
  std::map<std::string, std::vector<double>> round_medians;
  std::map<std::string, std::vector<double>> all_steps;
  auto phase = [&](const std::string& name, int round) {
    std::vector<double> t;
    t.reserve(static_cast<size_t>(steps));
    for (int s = 0; s < steps; ++s) t.push_back(loop.Step());
    const double med = Median(t);
    round_medians[name].push_back(med);
    all_steps[name].insert(all_steps[name].end(), t.begin(), t.end());
    std::printf("TOGGLE round=%d phase=%s median_step_us=%.1f p10=%.1f p90=%.1f\n", round,
                name.c_str(), med, Quantile(t, 0.1), Quantile(t, 0.9));
  };
  auto event = [](const char* what, double us) { std::printf("TOGGLE %s_us=%.1f\n", what, us); };

  phase("plain-before-cupti", 0);
  Cupti cupti;
  std::vector<double> first_full, first_kernels, first_after_attach;
  for (int r = 0; r < rounds; ++r) {
    if (!cupti.attached) event("attach", cupti.Attach());
    // full: time the enable, the first step, then the phase.
    event("enable_full", cupti.Enable(true));
    first_full.push_back(loop.Step());
    if (r == 0) {
      // A kernel never launched before, first launched inside a window.
      const double t0 = NowUs();
      FirstSeenInWindow<<<1, 1, 0, loop.stream>>>(nullptr);
      CheckCuda(cudaStreamSynchronize(loop.stream), "first-seen");
      event("first_launch_of_new_kernel_in_window", NowUs() - t0);
    }
    phase("full", r);
    event("disable", cupti.Disable());
    event("flush_after_disable", cupti.Flush());
    phase("disabled", r);
    event("enable_kernels", cupti.Enable(false));
    first_kernels.push_back(loop.Step());
    phase("kernels", r);
    event("disable", cupti.Disable());
    event("flush", cupti.Flush());
    event("detach", cupti.Detach());
    phase("detached", r);
    event("attach", cupti.Attach());
    event("enable_full_after_attach", cupti.Enable(true));
    first_after_attach.push_back(loop.Step());
    event("disable", cupti.Disable());
    event("flush", cupti.Flush());
    phase("attached-disabled", r);
    event("detach", cupti.Detach());
    event("attach_unsubscribed", cupti.Attach(false));
    event("enable_kernels_unsubscribed", cupti.Enable(false));
    loop.Step();
    phase("kernels-unsubscribed", r);
    event("enable_full_unsubscribed", cupti.Enable(true));
    loop.Step();
    phase("full-unsubscribed", r);
    event("disable", cupti.Disable());
    event("flush", cupti.Flush());
    event("detach", cupti.Detach());
  }
  std::printf("TOGGLE records=%llu\n", static_cast<unsigned long long>(g_records));

  // Ratios within each round against that round's detached phase.
  const std::vector<double>& base = round_medians["detached"];
  const int per_step_launches = loop.launches + 2;
  std::printf("\n%d launches + memset + copy per step, %d steps per phase, %d rounds\n\n",
              loop.launches, steps, rounds);
  std::printf(
      "| phase | median step us | IQR us | vs detached (median of per-round ratios) | "
      "min..max ratio | extra ns per launch |\n|---|---:|---:|---:|---:|---:|\n");
  for (const char* name : {"plain-before-cupti", "detached", "attached-disabled", "disabled",
                           "kernels", "full", "kernels-unsubscribed", "full-unsubscribed"}) {
    const auto& meds = round_medians[name];
    const auto& all = all_steps[name];
    std::vector<double> ratios;
    for (size_t i = 0; i < meds.size() && i < base.size(); ++i) ratios.push_back(meds[i] / base[i]);
    if (std::string(name) == "plain-before-cupti" && !meds.empty() && !base.empty()) {
      ratios = {meds[0] / Median(base)};
    }
    const double ratio = Median(ratios);
    const double extra_ns = (Median(meds) - Median(base)) * 1e3 / per_step_launches;
    std::printf("| %s | %.1f | %.1f | %.4f | %.4f..%.4f | %.1f |\n", name, Median(all),
                Quantile(all, 0.75) - Quantile(all, 0.25), ratio,
                ratios.empty() ? 0 : *std::min_element(ratios.begin(), ratios.end()),
                ratios.empty() ? 0 : *std::max_element(ratios.begin(), ratios.end()), extra_ns);
  }
  std::printf("\n| first step after | median us | max us |\n|---|---:|---:|\n");
  std::printf("| enabling full capture (subscribed) | %.1f | %.1f |\n", Median(first_full),
              *std::max_element(first_full.begin(), first_full.end()));
  std::printf("| enabling kernels only | %.1f | %.1f |\n", Median(first_kernels),
              *std::max_element(first_kernels.begin(), first_kernels.end()));
  std::printf("| re-attach + enabling full capture | %.1f | %.1f |\n", Median(first_after_attach),
              *std::max_element(first_after_attach.begin(), first_after_attach.end()));
  return 0;
}
