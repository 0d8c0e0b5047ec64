// PM sampling facts on a real GPU, behind the design of
// rank_agent/src/cupti_pm_sampling.cc and the figures in bench/RESULTS.md ("PM sampling").
//   nvcc -O2 -arch=sm_90 -o pm_probe bench/pm_sampling_probe.cu -lcupti -lcuda
//   ./pm_probe INTERVAL_NS METRIC,METRIC,... HW_BUFFER_MB SAMPLES_PER_IMAGE FINALIZE(0|1)
// Sets PM sampling up once (timing each step), then runs three windows; each
// attaches CUPTI activity (kernels, timestamps on CLOCK_MONOTONIC), starts PM
// sampling, runs FMA-bound, DRAM-bound and tiny kernels plus a timed loop of
// tiny launches, stops, reads every sample (decode + evaluate, timed), and
// (FINALIZE=1) detaches CUPTI as the agent does between windows. Prints per
// window the sample count, the read cost, the per-kernel means of the samples
// that overlap each kernel group, and the launch cost before, during and after.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <time.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define CK(x) do { CUptiResult r_ = (x); if (r_ != CUPTI_SUCCESS) { const char* s; cuptiGetResultString(r_, &s); printf("FAIL %s: %s (%d)\n", #x, s, r_); } } while (0)
static uint64_t Now(clockid_t c) { timespec t; clock_gettime(c, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
static double Ms(uint64_t a, uint64_t b) { return (b - a) / 1e6; }

const char* kMetricsDefault[] = {
  "TriageCompute.sm__throughput.avg.pct_of_peak_sustained_elapsed",
  "dram__throughput.avg.pct_of_peak_sustained_elapsed",
  "dram__read_throughput.avg.pct_of_peak_sustained_elapsed",
  "dram__write_throughput.avg.pct_of_peak_sustained_elapsed",
  "gr__cycles_active.avg.pct_of_peak_sustained_elapsed",
  "TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
  "TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
  "TPC.TriageCompute.tpc__warps_active_realtime.avg.pct_of_peak_sustained_elapsed",
  "TPC.TriageCompute.sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
};
constexpr int kMaxN = 16;
const char* kMetrics[kMaxN]; int kN = 0;

__global__ void Compute(float* out, int iters) {
  float a = threadIdx.x, b = 1.0001f, c = 0.9999f;
  for (int i = 0; i < iters; ++i) { a = a * b + c; b = b * c + a * 1e-9f; }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a + b;
}
__global__ void Stream(const float4* in, float4* out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float4 v = in[i]; v.x += 1; out[i] = v;
  }
}
__global__ void Tiny(float* p) { if (threadIdx.x == 0) p[blockIdx.x] += 1; }
__global__ void GlobalTimer(uint64_t* t) { uint64_t v; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v)); *t = v; }

struct Kern { uint64_t s, e; std::string name; };
std::mutex g_mu; std::vector<Kern> g_kernels;
static uint64_t CUPTIAPI Ts() { return Now(CLOCK_MONOTONIC); }
static void CUPTIAPI Req(uint8_t** b, size_t* sz, size_t* max) { *sz = 8 << 20; *b = (uint8_t*)aligned_alloc(8, *sz); *max = 0; }
static void CUPTIAPI Done(CUcontext, uint32_t, uint8_t* b, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(b, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      auto* k = (CUpti_ActivityKernel10*)rec;
      std::lock_guard<std::mutex> l(g_mu); g_kernels.push_back({k->start, k->end, k->name});
    }
  }
  free(b);
}

struct Sample { uint64_t s, e; double v[kMaxN]; };


static double Loop(float* small, int n) {
  cudaDeviceSynchronize();
  uint64_t a = Now(CLOCK_MONOTONIC);
  for (int i = 0; i < n; ++i) Tiny<<<1, 32>>>(small);
  cudaDeviceSynchronize();
  return Ms(a, Now(CLOCK_MONOTONIC)) * 1000.0 / n;  // us per launch
}
int main(int argc, char** argv) {
  int interval_ns = argc > 1 ? atoi(argv[1]) : 50000;
  static std::string list = argc > 2 ? argv[2] : "";
  size_t hwbuf = (argc > 3 ? atoi(argv[3]) : 64) << 20;
  const uint32_t kMax = argc > 4 ? atoi(argv[4]) : 2048;
  const bool finalize = argc > 5 ? atoi(argv[5]) : 1;
  { size_t p = 0; while (p <= list.size()) { size_t c = list.find(',', p); if (c == std::string::npos) c = list.size(); kMetrics[kN++] = strdup(list.substr(p, c - p).c_str()); p = c + 1; } }
  cudaSetDevice(0); cudaFree(0);
  float *buf, *small; float4 *a, *b;
  size_t n4 = (512ull << 20) / 16;
  cudaMalloc(&buf, 132 * 1024 * 4 * 4); cudaMalloc(&small, 4096 * 4); cudaMalloc(&a, n4 * 16); cudaMalloc(&b, n4 * 16);
  double l0 = 0, l1 = 0, l3 = 0; const int kL = 20000;
  for (int r = 0; r < 3; ++r) l0 += Loop(small, kL) / 3;
  uint64_t t0 = Now(CLOCK_MONOTONIC);
  CUpti_Profiler_Initialize_Params pi{CUpti_Profiler_Initialize_Params_STRUCT_SIZE}; CK(cuptiProfilerInitialize(&pi));
  CUpti_Device_GetChipName_Params cn{CUpti_Device_GetChipName_Params_STRUCT_SIZE}; cn.deviceIndex = 0; CK(cuptiDeviceGetChipName(&cn));
  CUpti_PmSampling_GetCounterAvailability_Params ca{CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE}; ca.deviceIndex = 0;
  CK(cuptiPmSamplingGetCounterAvailability(&ca)); std::vector<uint8_t> avail(ca.counterAvailabilityImageSize); ca.pCounterAvailabilityImage = avail.data(); CK(cuptiPmSamplingGetCounterAvailability(&ca));
  uint64_t t1 = Now(CLOCK_MONOTONIC);
  CUpti_Profiler_Host_Initialize_Params hi{CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE}; hi.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING; hi.pChipName = cn.pChipName; hi.pCounterAvailabilityImage = avail.data();
  CK(cuptiProfilerHostInitialize(&hi));
  CUpti_Profiler_Host_ConfigAddMetrics_Params am{CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE}; am.pHostObject = hi.pHostObject; am.ppMetricNames = kMetrics; am.numMetrics = kN; CK(cuptiProfilerHostConfigAddMetrics(&am));
  CUpti_Profiler_Host_GetConfigImageSize_Params is{CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE}; is.pHostObject = hi.pHostObject; CK(cuptiProfilerHostGetConfigImageSize(&is));
  std::vector<uint8_t> img(is.configImageSize);
  CUpti_Profiler_Host_GetConfigImage_Params gi{CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE}; gi.pHostObject = hi.pHostObject; gi.configImageSize = img.size(); gi.pConfigImage = img.data(); CK(cuptiProfilerHostGetConfigImage(&gi));
  uint64_t t2 = Now(CLOCK_MONOTONIC);
  CUpti_PmSampling_Enable_Params en{CUpti_PmSampling_Enable_Params_STRUCT_SIZE}; en.deviceIndex = 0; CK(cuptiPmSamplingEnable(&en));
  uint64_t t3 = Now(CLOCK_MONOTONIC);
  CUpti_PmSampling_SetConfig_Params sc{CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE}; sc.pPmSamplingObject = en.pPmSamplingObject; sc.configSize = img.size(); sc.pConfig = img.data();
  sc.hardwareBufferSize = hwbuf; sc.samplingInterval = interval_ns; sc.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL; sc.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
  CK(cuptiPmSamplingSetConfig(&sc));
  uint64_t t4 = Now(CLOCK_MONOTONIC);
  CUpti_PmSampling_GetCounterDataSize_Params ds{CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE}; ds.pPmSamplingObject = en.pPmSamplingObject; ds.pMetricNames = kMetrics; ds.numMetrics = kN; ds.maxSamples = kMax; CK(cuptiPmSamplingGetCounterDataSize(&ds));
  std::vector<uint8_t> cd(ds.counterDataSize);
  size_t read = 0;  // samples of the image already taken
  auto InitCd = [&] { read = 0; CUpti_PmSampling_CounterDataImage_Initialize_Params ci{CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE}; ci.pPmSamplingObject = en.pPmSamplingObject; ci.counterDataSize = cd.size(); ci.pCounterData = cd.data(); CK(cuptiPmSamplingCounterDataImageInitialize(&ci)); };
  InitCd();
  uint64_t t5 = Now(CLOCK_MONOTONIC);
  printf("metrics %d interval %d hwbuf %zu MB maxSamples %u cd %zu B; ms: profInit+avail %.1f hostcfg %.1f enable %.1f setconfig %.1f cdinit %.1f\n", kN, interval_ns, hwbuf >> 20, kMax, cd.size(), Ms(t0,t1), Ms(t1,t2), Ms(t2,t3), Ms(t3,t4), Ms(t4,t5));
  for (int r = 0; r < 3; ++r) l1 += Loop(small, kL) / 3;
  double l2sum = 0;
  for (int w = 0; w < 3; ++w) {
    uint64_t a0 = Now(CLOCK_MONOTONIC);
    static CUpti_SubscriberHandle sub = nullptr;
    if (finalize || w == 0) { CK(cuptiSubscribe(&sub, nullptr, nullptr)); CK(cuptiActivityRegisterTimestampCallback(Ts)); CK(cuptiActivityRegisterCallbacks(Req, Done)); }
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    uint64_t a1 = Now(CLOCK_MONOTONIC);
    CUpti_PmSampling_Start_Params st{CUpti_PmSampling_Start_Params_STRUCT_SIZE}; st.pPmSamplingObject = en.pPmSamplingObject; CK(cuptiPmSamplingStart(&st));
    uint64_t a2 = Now(CLOCK_MONOTONIC);
    CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    double lpm = Loop(small, kL);
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    std::vector<Sample> samples; std::atomic<bool> stop{false}; double eval_ms = 0, dec_ms = 0; size_t decodes = 0; int overflow = 0; size_t dropped_long = 0;
    auto Drain = [&] {
      uint64_t d0 = Now(CLOCK_MONOTONIC);
      CUpti_PmSampling_DecodeData_Params dd{CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE}; dd.pPmSamplingObject = en.pPmSamplingObject; dd.pCounterDataImage = cd.data(); dd.counterDataImageSize = cd.size();
      CK(cuptiPmSamplingDecodeData(&dd)); ++decodes; overflow |= dd.overflow;
      CUpti_PmSampling_GetCounterDataInfo_Params info{CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE}; info.pCounterDataImage = cd.data(); info.counterDataImageSize = cd.size(); CK(cuptiPmSamplingGetCounterDataInfo(&info));
      uint64_t e0 = Now(CLOCK_MONOTONIC); dec_ms += Ms(d0, e0);
      for (size_t i = read; i < info.numCompletedSamples; ++i, ++read) {
        CUpti_PmSampling_CounterData_GetSampleInfo_Params si{CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE}; si.pPmSamplingObject = en.pPmSamplingObject; si.pCounterDataImage = cd.data(); si.counterDataImageSize = cd.size(); si.sampleIndex = i; CK(cuptiPmSamplingCounterDataGetSampleInfo(&si));
        Sample s{si.startTimestamp, si.endTimestamp, {}};
        if (s.e - s.s > 4ull * interval_ns) { ++dropped_long; continue; }
        CUpti_Profiler_Host_EvaluateToGpuValues_Params ev{CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE}; ev.pHostObject = hi.pHostObject; ev.pCounterDataImage = cd.data(); ev.counterDataImageSize = cd.size(); ev.rangeIndex = i; ev.ppMetricNames = kMetrics; ev.numMetrics = kN; ev.pMetricValues = s.v; CK(cuptiProfilerHostEvaluateToGpuValues(&ev));
        samples.push_back(s);
      }
      eval_ms += Ms(e0, Now(CLOCK_MONOTONIC));
      if (dd.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) InitCd();
      return dd.decodeStopReason;
    };
    std::thread dec([&] { while (!stop) { std::this_thread::sleep_for(std::chrono::milliseconds(10)); while (Drain() == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) {} } });
    uint64_t w0 = Now(CLOCK_MONOTONIC);
    for (int i = 0; i < 20; ++i) Compute<<<132 * 8, 512>>>(buf, 20000);
    cudaDeviceSynchronize();
    for (int i = 0; i < 20; ++i) Stream<<<132 * 16, 512>>>(a, b, n4);
    cudaDeviceSynchronize();
    double l2 = Loop(small, kL); l2sum += l2 / 3;
    uint64_t w1 = Now(CLOCK_MONOTONIC);
    stop = true; dec.join();
    uint64_t b0 = Now(CLOCK_MONOTONIC);
    CUpti_PmSampling_Stop_Params sp{CUpti_PmSampling_Stop_Params_STRUCT_SIZE}; sp.pPmSamplingObject = en.pPmSamplingObject; CK(cuptiPmSamplingStop(&sp));
    uint64_t b1 = Now(CLOCK_MONOTONIC);
    while (Drain() == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) {}
    uint64_t b2 = Now(CLOCK_MONOTONIC);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); CK(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)); if (finalize) { cuptiUnsubscribe(sub); CK(cuptiFinalize()); }
    uint64_t b3 = Now(CLOCK_MONOTONIC);
    printf("window %d: work %.1f ms, samples %zu (long dropped %zu) decodes %zu overflow %d decode %.1f ms eval %.1f ms (%.1f us/sample); ms: attach %.1f start %.2f stop %.2f final drain %.1f finalize %.1f; tiny launch %.2f us (pm only %.2f)\n",
           w, Ms(w0, w1), samples.size(), dropped_long, decodes, overflow, dec_ms, eval_ms, samples.empty() ? 0 : eval_ms * 1000 / samples.size(), Ms(a0, a1), Ms(a1, a2), Ms(b0, b1), Ms(b1, b2), Ms(b2, b3), l2, lpm);
    std::lock_guard<std::mutex> l(g_mu);
    const char* groups[] = {"Compute", "Stream", "Tiny"};
    printf("   kernels %zu:", g_kernels.size());
    for (auto g : groups) {
      double sum[kMaxN] = {}; double wsum = 0;
      for (auto& k : g_kernels) { if (k.name.find(g) == std::string::npos) continue;
        for (auto& s : samples) { long long o = std::min<long long>(s.e, k.e) - std::max<long long>(s.s, k.s); if (o <= 0) continue;
          for (int m = 0; m < kN; ++m) sum[m] += s.v[m] * o; wsum += o; } }
      printf(" %s[w=%.0fus", g, wsum / 1000); for (int m = 0; m < kN; ++m) printf(" %.1f", wsum ? sum[m] / wsum : -1); printf("]");
    }
    printf("\n");
    g_kernels.clear();
  }
  for (int r = 0; r < 3; ++r) l3 += Loop(small, kL) / 3;
  uint64_t c0 = Now(CLOCK_MONOTONIC);
  CUpti_PmSampling_Disable_Params di{CUpti_PmSampling_Disable_Params_STRUCT_SIZE}; di.pPmSamplingObject = en.pPmSamplingObject; CK(cuptiPmSamplingDisable(&di));
  uint64_t c1 = Now(CLOCK_MONOTONIC);
  double l4 = 0; for (int r = 0; r < 3; ++r) l4 += Loop(small, kL) / 3;
  printf("tiny launch us: before %.3f enabled-stopped %.3f in-window(started+activity) %.3f after-windows-enabled %.3f after-disable %.3f; disable %.1f ms\n", l0, l1, l2sum, l3, l4, Ms(c0, c1));
  return 0;
}
