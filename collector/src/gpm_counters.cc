#include "gpm_counters.h"

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <utility>

#include "aon/base/timebase.h"
#include "nvml_abi.h"

namespace aon::collector {
namespace {

constexpr uint64_t kInUseRetryNs = 10'000'000'000ull;

struct MetricMap {
  unsigned gpm_id;
  CounterMetric metric;
};
constexpr MetricMap kMetrics[] = {
    {kGpmGraphicsUtil, CounterMetric::kGpuActive},
    {kGpmSmUtil, CounterMetric::kSmActive},
    {kGpmSmOccupancy, CounterMetric::kSmOccupancy},
    {kGpmAnyTensorUtil, CounterMetric::kTensorActive},
    {kGpmFp64Util, CounterMetric::kFp64Active},
    {kGpmFp32Util, CounterMetric::kFp32Active},
    {kGpmFp16Util, CounterMetric::kFp16Active},
    {kGpmIntegerUtil, CounterMetric::kIntActive},
    {kGpmDramBwUtil, CounterMetric::kDramBandwidth},
    {kGpmPcieTxPerSec, CounterMetric::kPcieTx},
    {kGpmPcieRxPerSec, CounterMetric::kPcieRx},
    {kGpmNvlinkTotalTxPerSec, CounterMetric::kNvlinkTx},
    {kGpmNvlinkTotalRxPerSec, CounterMetric::kNvlinkRx},
};
static_assert(std::size(kMetrics) <= kAonGpmMaxMetrics);

std::string MetricName(CounterMetric m) {
  const char* name = EnumValueName(kCounterMetricValues, static_cast<int64_t>(m));
  return name != nullptr ? name : "?";
}

}  // namespace

struct GpmCounters::Api {
  AonNvmlInitFn init = nullptr;
  AonNvmlShutdownFn shutdown = nullptr;
  AonNvmlErrorStringFn error_string = nullptr;
  AonNvmlDeviceGetCountFn device_count = nullptr;
  AonNvmlDeviceGetHandleByIndexFn device_handle = nullptr;
  AonNvmlDeviceGetUuidFn device_uuid = nullptr;
  AonNvmlGpmQueryDeviceSupportFn gpm_support = nullptr;
  AonNvmlGpmSampleAllocFn sample_alloc = nullptr;
  AonNvmlGpmSampleFreeFn sample_free = nullptr;
  AonNvmlGpmSampleGetFn sample_get = nullptr;
  AonNvmlGpmMetricsGetFn metrics_get = nullptr;
  bool initialized = false;
};

struct GpmCounters::Gpu {
  unsigned index = 0;
  AonNvmlDevice device = nullptr;
  std::string uuid;
  GpuUuid bits;
  AonNvmlGpmSample samples[2] = {nullptr, nullptr};
  int current = 0;  // the buffer the next sample goes to
  bool have_previous = false;
  uint64_t previous_ns = 0;
  bool stopped = false;
  uint64_t retry_at_ns = 0;  // another tool held the monitor: not before this
  bool said_in_use = false;
  bool said_metrics = false;
  bool said_not_number = false;
  std::vector<MetricMap> metrics{std::begin(kMetrics), std::end(kMetrics)};

  std::string Name() const { return "GPU " + std::to_string(index) + " (" + uuid + ")"; }
};

GpmCounters::~GpmCounters() {
  if (api_ != nullptr) {
    for (auto& g : gpus_) {
      for (AonNvmlGpmSample s : g->samples)
        if (s != nullptr && api_->sample_free != nullptr) api_->sample_free(s);
    }
    if (api_->initialized && api_->shutdown != nullptr) api_->shutdown();
  }
  if (handle_ != nullptr) dlclose(handle_);
}

std::string GpmCounters::Error(int code) const {
  const char* text =
      api_ != nullptr && api_->error_string != nullptr ? api_->error_string(code) : nullptr;
  return (text != nullptr ? std::string(text) : std::string("NVML error")) + ", code " +
         std::to_string(code);
}

std::unique_ptr<GpmCounters> GpmCounters::Open(std::vector<std::string>* notes) {
  std::unique_ptr<GpmCounters> c(new GpmCounters());
  const char* override_path = std::getenv("AON_NVML_LIBRARY");
  c->library_ =
      override_path != nullptr && *override_path != '\0' ? override_path : "libnvidia-ml.so.1";
  c->handle_ = dlopen(c->library_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (c->handle_ == nullptr) {
    const char* why = dlerror();
    notes->push_back("counters: no GPU metrics on this node: cannot load " + c->library_ + " (" +
                     (why != nullptr ? why : "?") +
                     "); it comes with the NVIDIA driver (no driver, no GPU counters)");
    return nullptr;
  }
  // The labeled fake of the tests says what it is; its rows say "synthetic".
  if (const char* label = static_cast<const char*>(dlsym(c->handle_, "aonFakeNvml"))) {
    c->fake_ = true;
    notes->push_back(std::string("counters: FAKE NVML: ") + label);
  }
  c->api_ = std::make_unique<Api>();
  Api& a = *c->api_;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(c->handle_, name));
    return fn != nullptr;
  };
  sym(a.error_string, "nvmlErrorString");
  sym(a.shutdown, "nvmlShutdown");
  if (!sym(a.init, "nvmlInit_v2") || !sym(a.device_count, "nvmlDeviceGetCount_v2") ||
      !sym(a.device_handle, "nvmlDeviceGetHandleByIndex_v2") ||
      !sym(a.device_uuid, "nvmlDeviceGetUUID")) {
    notes->push_back("counters: " + c->library_ +
                     " is not a usable NVML (basic functions missing)");
    return nullptr;
  }
  if (!sym(a.gpm_support, "nvmlGpmQueryDeviceSupport") ||
      !sym(a.sample_alloc, "nvmlGpmSampleAlloc") || !sym(a.sample_free, "nvmlGpmSampleFree") ||
      !sym(a.sample_get, "nvmlGpmSampleGet") || !sym(a.metrics_get, "nvmlGpmMetricsGet")) {
    notes->push_back(
        "counters: this driver's NVML has no GPU Performance Monitoring (driver 520 "
        "or newer has it): no GPU metrics");
    return nullptr;
  }
  if (const int rc = a.init(); rc != kNvmlSuccess) {
    notes->push_back("counters: NVML did not start (" + c->Error(rc) + "): no GPU metrics");
    return nullptr;
  }
  a.initialized = true;
  unsigned count = 0;
  if (const int rc = a.device_count(&count); rc != kNvmlSuccess) {
    notes->push_back("counters: NVML cannot count the GPUs (" + c->Error(rc) + ")");
    return nullptr;
  }
  std::string unsupported;
  for (unsigned i = 0; i < count; ++i) {
    auto g = std::make_unique<Gpu>();
    g->index = i;
    if (const int rc = a.device_handle(i, &g->device); rc != kNvmlSuccess) {
      notes->push_back("counters: GPU " + std::to_string(i) + ": no NVML handle (" + c->Error(rc) +
                       ")");
      continue;
    }
    char uuid[kNvmlDeviceUuidBufferSize] = {};
    if (a.device_uuid(g->device, uuid, sizeof(uuid)) == kNvmlSuccess) {
      uuid[sizeof(uuid) - 1] = '\0';
      g->uuid = uuid;
    }
    g->bits = GpuUuidFromText(g->uuid);
    AonNvmlGpmSupport support{kNvmlGpmSupportVersion, 0};
    const int rc = a.gpm_support(g->device, &support);
    if (rc != kNvmlSuccess || support.is_supported_device == 0) {
      unsupported += (unsupported.empty() ? "" : ", ") + g->Name();
      continue;
    }
    if (a.sample_alloc(&g->samples[0]) != kNvmlSuccess ||
        a.sample_alloc(&g->samples[1]) != kNvmlSuccess) {
      notes->push_back("counters: " + g->Name() + ": NVML could not allocate GPM samples");
      for (AonNvmlGpmSample& s : g->samples)
        if (s != nullptr) a.sample_free(s), s = nullptr;
      continue;
    }
    c->gpus_.push_back(std::move(g));
  }
  if (!unsupported.empty()) {
    notes->push_back("counters: no GPU Performance Monitoring on " + unsupported +
                     " (Hopper or newer has it): no GPU metrics from " +
                     (c->gpus_.empty() ? "this node" : "those"));
  }
  if (c->gpus_.empty()) return nullptr;
  return c;
}

size_t GpmCounters::active_gpus() const {
  size_t n = 0;
  for (const auto& g : gpus_) n += g->stopped ? 0 : 1;
  return n;
}

void GpmCounters::Sample(uint64_t now_ns, std::vector<CounterRecord>* out,
                         std::vector<std::string>* notes) {
  Api& a = *api_;
  for (auto& gp : gpus_) {
    Gpu& g = *gp;
    if (g.stopped || now_ns < g.retry_at_ns) continue;
    AonNvmlGpmSample cur = g.samples[g.current];
    const uint64_t before = TimebaseNowNs();
    const int rc = a.sample_get(g.device, cur);
    const uint64_t t = before + (TimebaseNowNs() - before) / 2;
    if (rc == kNvmlErrorInUse) {
      // The performance monitor is exclusive: DCGM profiling, Nsight Compute,
      // another profiler. Wait for it, and start a fresh interval after.
      if (!g.said_in_use) {
        notes->push_back("counters: " + g.Name() +
                         ": another tool holds the GPU's performance monitor (DCGM profiling, "
                         "Nsight Compute or another profiler; " +
                         Error(rc) + "): no metrics while it does, retried every 10 s");
        g.said_in_use = true;
      }
      g.have_previous = false;
      g.retry_at_ns = now_ns + kInUseRetryNs;
      continue;
    }
    if (rc != kNvmlSuccess) {
      g.stopped = true;
      if (rc == kNvmlErrorNoPermission) {
        notes->push_back(
            "counters: " + g.Name() + ": NVML refused GPM samples to this user (" + Error(rc) +
            "): the node restricts GPU performance counters to administrators (nvidia module "
            "parameter NVreg_RestrictProfilingToAdminUsers=1; /proc/driver/nvidia/params shows "
            "RmProfilingAdminOnly: 1). A site allows them with "
            "NVreg_RestrictProfilingToAdminUsers=0; the job goes on without GPU metrics");
      } else {
        notes->push_back("counters: " + g.Name() + ": GPM sample failed (" + Error(rc) +
                         "): no more metrics from this GPU");
      }
      continue;
    }
    if (g.have_previous) {
      AonNvmlGpmMetricsGet get{};
      get.version = kNvmlGpmMetricsGetVersion;
      get.num_metrics = static_cast<unsigned>(g.metrics.size());
      get.sample1 = g.samples[1 - g.current];
      get.sample2 = cur;
      for (size_t i = 0; i < g.metrics.size(); ++i) get.metrics[i].metric_id = g.metrics[i].gpm_id;
      const int mrc = a.metrics_get(&get);
      if (mrc != kNvmlSuccess) {
        g.stopped = true;
        notes->push_back("counters: " + g.Name() + ": NVML cannot compute GPM metrics (" +
                         Error(mrc) + "): no more metrics from this GPU");
        continue;
      }
      std::vector<MetricMap> kept;
      std::string missing;
      for (size_t i = 0; i < g.metrics.size(); ++i) {
        const AonNvmlGpmMetric& m = get.metrics[i];
        if (m.nvml_return != kNvmlSuccess) {
          missing += (missing.empty() ? "" : ", ") + MetricName(g.metrics[i].metric) + " (" +
                     Error(m.nvml_return) + ")";
          continue;
        }
        kept.push_back(g.metrics[i]);
        if (!std::isfinite(m.value)) {
          // Seen on an H200: DRAM bandwidth NaN for some intervals. No row
          // rather than a row no mean can take.
          if (!g.said_not_number)
            notes->push_back("counters: " + g.Name() + " gave " + MetricName(g.metrics[i].metric) +
                             " as not a number for some intervals: those rows are left out");
          g.said_not_number = true;
          continue;
        }
        CounterRecord r{};
        r.start_ns = g.previous_ns;
        r.end_ns = t;
        r.value = m.value;
        r.gpu_uuid_hi = g.bits.hi;
        r.gpu_uuid_lo = g.bits.lo;
        r.device = g.index;
        r.metric = static_cast<uint16_t>(g.metrics[i].metric);
        r.source = static_cast<uint8_t>(fake_ ? CounterSource::kSynthetic : CounterSource::kGpm);
        out->push_back(r);
      }
      if (!missing.empty() && !g.said_metrics) {
        notes->push_back("counters: " + g.Name() + " lacks " + missing);
        g.said_metrics = true;
      }
      g.metrics = std::move(kept);
      if (g.metrics.empty()) g.stopped = true;
    }
    g.have_previous = true;
    g.previous_ns = t;
    g.current = 1 - g.current;
  }
}

}  // namespace aon::collector
