// CUPTI PM sampling in capture windows (counter_sampler.h, docs/counters.md).
//
// What the H200 showed (bench/RESULTS.md, "PM sampling"), and the design it
// gives:
//   - Setting up costs ~0.4 s (profiler initialization ~250 ms, the sampling
//     configuration ~110 ms, the counter-data image ~25 ms), enabling is free,
//     Start 0.5 ms, Stop 1.8 ms. So the sampler is set up once, on its own
//     thread, the first time a window opens, and stays enabled: each window only
//     starts and stops it. It survives CUPTI's detach between windows.
//   - Enabled but stopped it costs nothing measurable (a launch-bound loop:
//     same launch time as before enabling).
//   - Reading a sample (decode + evaluate) costs the host ~20-50 us for this
//     metric set, so the interval is 100 us by default and the reading runs on
//     a background thread at the lowest priority, every 10 ms while sampling.
//   - A hardware buffer that overflows leaves the sampler unusable until it is
//     set up again: said (kFellBehind), torn down, set up at the next window.
//   - Sample timestamps are on CUPTI's clock, which the activity source sets to
//     ours (cuptiActivityRegisterTimestampCallback) while it is attached, i.e.
//     for the whole window: Stop happens before CUPTI detaches.
#include "cupti_pm_sampling.h"

#include <cupti.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "aon/base/gpu_uuid.h"
#include "aon/base/thread_cpu.h"
#include "aon/base/timebase.h"
#include "source_context.h"

namespace aon::agent {
namespace {

// Bound by StartCuptiPmSampler, before the sampler exists.
BoundContext g_agent;

// The CUPTI names of kSampledMetrics, in its order; one pass on Hopper
// (checked with cuptiProfilerHostGetNumOfPasses, docs/counters.md).
constexpr std::array<const char*, kSampledMetricCount> kCuptiMetricNames = {
    "gr__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed"};

constexpr size_t kHardwareBufferBytes = 64u << 20;
constexpr uint32_t kSamplesPerImage = 1024;
constexpr auto kReadPeriod = std::chrono::milliseconds(10);
constexpr int kMaxSetups = 3;  // after that many overflows, sampling stops for the run
// QuiesceAtExit registrations at most (each set-up makes up to four).
constexpr int kMaxExitHooks = 4 * (kMaxSetups + 1);

std::atomic<int64_t> g_kernel_device{-1};

// A CUPTI parameter struct: zeroed, its size set (the API's versioning).
template <typename P>
P Params(size_t struct_size) {
  P p{};
  p.structSize = struct_size;
  return p;
}

std::string Text(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return std::string(s ? s : "unknown CUPTI error") + " (" + std::to_string(static_cast<int>(r)) +
         ")";
}

SamplerRefusal RefusalOf(CUptiResult r) {
  switch (r) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      return SamplerRefusal::kPrivileges;
    case CUPTI_ERROR_INVALID_OPERATION:  // enabled already: another client on this device
      return SamplerRefusal::kBusy;
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
      return SamplerRefusal::kUnsupported;
    default:
      return SamplerRefusal::kOther;
  }
}

// The first device with an active primary context (-1: none), through the
// driver this process already loaded.
int64_t ActiveDevice() {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  if (cuda == nullptr) return -1;
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using StateFn = int (*)(int, unsigned*, int*);
  auto count = reinterpret_cast<CountFn>(dlsym(cuda, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(dlsym(cuda, "cuDeviceGet"));
  auto state = reinterpret_cast<StateFn>(dlsym(cuda, "cuDevicePrimaryCtxGetState"));
  int64_t found = -1;
  int n = 0;
  if (count != nullptr && get != nullptr && state != nullptr && count(&n) == 0) {
    for (int i = 0; i < n && found < 0; ++i) {
      int device = 0, active = 0;
      unsigned flags = 0;
      if (get(&device, i) == 0 && state(device, &flags, &active) == 0 && active) found = i;
    }
  }
  dlclose(cuda);
  return found;
}

// The GPU's UUID text ("GPU-..."), through the driver this process already loaded.
std::string DeviceUuidText(uint32_t ordinal) {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  if (cuda == nullptr) return "";
  using GetFn = int (*)(int*, int);
  using UuidFn = int (*)(CUuuid*, int);
  auto get = reinterpret_cast<GetFn>(dlsym(cuda, "cuDeviceGet"));
  auto uuid = reinterpret_cast<UuidFn>(dlsym(cuda, "cuDeviceGetUuid_v2"));
  if (uuid == nullptr) uuid = reinterpret_cast<UuidFn>(dlsym(cuda, "cuDeviceGetUuid"));
  int device = 0;
  CUuuid u{};
  std::string text;
  if (get != nullptr && uuid != nullptr && get(&device, static_cast<int>(ordinal)) == 0 &&
      uuid(&u, device) == 0) {
    text = GpuUuidText(reinterpret_cast<const unsigned char*>(u.bytes));
  }
  dlclose(cuda);
  return text;
}

void QuiesceAtExit();

class CuptiPmSampler final : public CounterSampler {
 public:
  // `set_up_in_windows`: false in budgeted mode, where the set-up (which also
  // holds the application's CUDA calls for ~0.4 s) is done only by Prepare,
  // outside windows, so that no window's measured cost includes it; a window
  // that opens before then is not sampled.
  CuptiPmSampler(int64_t interval_us, bool set_up_in_windows)
      : interval_ns_(static_cast<uint64_t>(interval_us) * 1000),
        set_up_in_windows_(set_up_in_windows) {}

  // At a step boundary outside windows, on that thread: set up now, so that no
  // window pays for it (the ~0.4 s, during which the driver also holds the
  // application's CUDA calls, land in this one uncaptured step; the window
  // policy leaves such an outlier out of its baseline, docs/always-on.md).
  void Prepare() override {
    if (settled_.load(std::memory_order_acquire)) return;
    NoteCurrentDevice();
    if (DeviceGuess() < 0) return;  // no CUDA device yet: at a later boundary
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failed_) return;
    }
    SetUp();
    settled_.store(true, std::memory_order_release);  // set up, or failed and said why
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_ && !worker_.joinable()) worker_ = std::thread([this] { Work(); });
  }

  void Begin() override {
    NoteCurrentDevice();
    if (!set_up_in_windows_ && !settled_.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_) return;
    ++begun_;
    ++requested_;  // served by the worker even if End comes first (no lost wake-up)
    want_ = busy_ = true;
    if (!worker_.joinable()) worker_ = std::thread([this] { Work(); });
    cv_.notify_all();
  }

  // The window's steps are over: the worker stops and reads the rest on its
  // own thread, during the window's tail steps; Deliver (at the detach) waits.
  void End() override {
    std::lock_guard<std::mutex> lock(mu_);
    want_ = false;
    cv_.notify_all();
  }

  void Deliver() override {
    std::unique_lock<std::mutex> lock(mu_);
    want_ = false;
    cv_.notify_all();
    // Bounded: a reading in progress takes milliseconds, a set-up ~0.4 s.
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !busy_; })) {
      failed_ = true;
      lock.unlock();
      g_agent->notes().Note(SamplerRefusalNote(
          SamplerRefusal::kOther, "the sampler did not stop within 10 s; sampling stops"));
    }
  }

  // At exit, before the destructors of what CUPTI's profiler loaded and
  // registered (QuiesceAtExit is registered after each set-up, so it runs
  // first): no window from now on, and the worker out of CUPTI. A worker still
  // decoding while libnvperf_host's statics were destroyed crashed the
  // application at exit (SIGSEGV in libnvperf_host, seen on H100 in 2 of 10
  // runs of a one-second program whose last window was open at its end).
  // A set-up in progress (Prepare runs it on whichever thread marks a step
  // boundary, a timer's for time-slot steps) is waited for too: one that was
  // still running when a short program exited crashed it the same way.
  void Quiesce() {
    exiting_.store(true, std::memory_order_release);
    {
      std::unique_lock<std::mutex> lock(mu_);
      failed_ = true;
      want_ = false;
      cv_.notify_all();
      // Bounded as Deliver: a reading takes milliseconds, a set-up ~0.4 s.
      cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !busy_; });
    }
    if (setup_mu_.try_lock_for(std::chrono::seconds(10))) setup_mu_.unlock();
  }

  // Registers QuiesceAtExit now: exit runs it before the destructors of every
  // library loaded and every handler registered until now (CUPTI's profiler
  // loads and registers its own while it initializes).
  void QuiesceBeforeWhatIsLoadedNow() {
    if (exit_hooks_.fetch_add(1) < kMaxExitHooks) atexit(QuiesceAtExit);
  }

  // At exit: the summary, said once.
  void Summarize() {
    std::lock_guard<std::mutex> lock(mu_);
    if (writer_ == nullptr) {
      if (begun_ > 0 && !failed_)
        g_agent->notes().Note("counters: no PM samples: " + std::to_string(begun_) +
                              " capture window(s) opened but no CUDA device was seen to sample");
      return;
    }
    std::string s = "counters: " + std::to_string(writer_->samples()) + " PM samples (" +
                    std::to_string(writer_->rows()) + " rows) in " + std::to_string(windows_) +
                    " capture window(s) on " + chip_ + " GPU " + std::to_string(device_) +
                    ", every " + std::to_string(interval_ns_ / 1000) + " us of GPU time; " +
                    std::to_string(read_cpu_ns_ / 1000000) + " ms of CPU on the sampler's thread";
    if (writer_->not_numbers() > 0)
      s += "; " + std::to_string(writer_->not_numbers()) + " values were not numbers (left out)";
    g_agent->notes().Note(s);
  }

 private:
  // The current CUDA context's device (the thread that marks steps has it).
  void NoteCurrentDevice() {
    uint32_t device = 0;
    if (device_hint_.load() < 0 && cuptiGetDeviceId(nullptr, &device) == CUPTI_SUCCESS)
      device_hint_ = device;
  }

  void Work() {
    pthread_setname_np(pthread_self(), "aon/pmsampling");  // AON's own: never host-sampled
    // The reading runs only on CPU the application leaves idle.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      // Every Begin is served, also one whose End came before this thread
      // woke: then there is nothing to sample, but busy_ must still clear.
      cv_.wait(lock, [&] { return served_ != requested_; });
      served_ = requested_;
      const bool window = want_;
      lock.unlock();
      if (window && SetUp()) Sample();
      lock.lock();
      if (served_ == requested_) busy_ = false;  // else a new window came: serve it
      cv_.notify_all();
    }
  }

  bool Wanted() {
    std::lock_guard<std::mutex> lock(mu_);
    return want_;
  }

  // Says why, once, and stops sampling for the rest of the run. Returns false.
  bool Fail(SamplerRefusal why, const std::string& detail) {
    g_agent->notes().Note(SamplerRefusalNote(why, detail));
    TearDown();
    std::lock_guard<std::mutex> lock(mu_);
    failed_ = true;
    return false;
  }

  // The device to sample: the current context's where steps are marked; else
  // the last kernel's; else the first device with an active primary context
  // (full mode opens before any kernel). -1: none yet.
  int64_t DeviceGuess() const {
    int64_t d = device_hint_.load();
    if (d < 0) d = g_kernel_device.load(std::memory_order_relaxed);
    if (d < 0) d = ActiveDevice();
    return d;
  }

  // Waits for a device while the window is open.
  bool PickDevice() {
    for (;;) {
      const int64_t d = DeviceGuess();
      if (d >= 0) {
        device_ = d;
        return true;
      }
      if (!Wanted()) return false;  // the window closed: the next one tries again
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  bool SetUp() {
    std::lock_guard<std::timed_mutex> setting_up(setup_mu_);  // Prepare's thread or the worker
    if (ready_) return true;
    if (exiting_.load(std::memory_order_acquire)) return false;
    QuiesceBeforeWhatIsLoadedNow();
    if (setups_ >= kMaxSetups) {
      return Fail(SamplerRefusal::kOther, "set up " + std::to_string(kMaxSetups) +
                                              " times and fell behind each time: sampling stops");
    }
    if (!PickDevice()) return false;  // no device yet: the next window tries again
    ++setups_;
    const uint64_t setup_start = TimebaseNowNs();
    auto init =
        Params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    CUptiResult r = cuptiProfilerInitialize(&init);
    QuiesceBeforeWhatIsLoadedNow();
    if (r != CUPTI_SUCCESS) return Fail(RefusalOf(r), "cuptiProfilerInitialize: " + Text(r));
    profiler_initialized_ = true;
    auto chip =
        Params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
    chip.deviceIndex = static_cast<size_t>(device_);
    r = cuptiDeviceGetChipName(&chip);
    if (r != CUPTI_SUCCESS) return Fail(RefusalOf(r), "cuptiDeviceGetChipName: " + Text(r));
    chip_ = chip.pChipName;
    auto avail = Params<CUpti_PmSampling_GetCounterAvailability_Params>(
        CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE);
    avail.deviceIndex = static_cast<size_t>(device_);
    r = cuptiPmSamplingGetCounterAvailability(&avail);
    if (r == CUPTI_SUCCESS) {
      availability_.resize(avail.counterAvailabilityImageSize);
      avail.pCounterAvailabilityImage = availability_.data();
      r = cuptiPmSamplingGetCounterAvailability(&avail);
    }
    if (r != CUPTI_SUCCESS) return Fail(RefusalOf(r), "counter availability: " + Text(r));
    auto host = Params<CUpti_Profiler_Host_Initialize_Params>(
        CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
    host.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING;
    host.pChipName = chip_.c_str();
    host.pCounterAvailabilityImage = availability_.data();
    r = cuptiProfilerHostInitialize(&host);
    QuiesceBeforeWhatIsLoadedNow();
    if (r != CUPTI_SUCCESS) return Fail(RefusalOf(r), chip_ + ": " + Text(r));
    host_ = host.pHostObject;
    if (!Configure()) return false;
    auto enable =
        Params<CUpti_PmSampling_Enable_Params>(CUpti_PmSampling_Enable_Params_STRUCT_SIZE);
    enable.deviceIndex = static_cast<size_t>(device_);
    r = cuptiPmSamplingEnable(&enable);
    if (r != CUPTI_SUCCESS) return Fail(RefusalOf(r), "cuptiPmSamplingEnable: " + Text(r));
    sampler_ = enable.pPmSamplingObject;
    auto set =
        Params<CUpti_PmSampling_SetConfig_Params>(CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE);
    set.pPmSamplingObject = sampler_;
    set.configSize = config_.size();
    set.pConfig = config_.data();
    set.hardwareBufferSize = kHardwareBufferBytes;
    set.samplingInterval = interval_ns_;
    set.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
    set.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
    r = cuptiPmSamplingSetConfig(&set);
    if (r != CUPTI_SUCCESS) return Fail(RefusalOf(r), "cuptiPmSamplingSetConfig: " + Text(r));
    auto size = Params<CUpti_PmSampling_GetCounterDataSize_Params>(
        CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE);
    size.pPmSamplingObject = sampler_;
    size.pMetricNames = const_cast<const char**>(kCuptiMetricNames.data());
    size.numMetrics = kCuptiMetricNames.size();
    size.maxSamples = kSamplesPerImage;
    r = cuptiPmSamplingGetCounterDataSize(&size);
    if (r != CUPTI_SUCCESS) return Fail(RefusalOf(r), "counter data size: " + Text(r));
    counter_data_.resize(size.counterDataSize);
    if (!ResetImage()) return false;
    if (writer_ == nullptr) {
      const std::string uuid = DeviceUuidText(static_cast<uint32_t>(device_));
      writer_ = std::make_unique<SampleWriter>(g_agent->sink(), GpuUuidFromText(uuid),
                                               static_cast<uint32_t>(device_),
                                               CounterSource::kPmSampling);
      if (uuid.empty())
        g_agent->notes().Note("counters: the UUID of GPU " + std::to_string(device_) +
                              " is unknown (no libcuda.so.1 in the process?): its sampled counters "
                              "cannot be tied to the node's GPU metrics");
    }
    ready_ = true;
    QuiesceBeforeWhatIsLoadedNow();
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.0f", static_cast<double>(TimebaseNowNs() - setup_start) / 1e6);
    g_agent->notes().Note("counters: PM sampling set up on " + chip_ + " GPU " +
                          std::to_string(device_) + " in " + ms +
                          " ms (once per process, outside capture windows when steps are "
                          "marked before the first window)");
    return true;
  }

  bool Configure() {
    auto add = Params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
    add.pHostObject = host_;
    add.ppMetricNames = const_cast<const char**>(kCuptiMetricNames.data());
    add.numMetrics = kCuptiMetricNames.size();
    CUptiResult r = cuptiProfilerHostConfigAddMetrics(&add);
    if (r != CUPTI_SUCCESS)
      return Fail(SamplerRefusal::kUnsupported, "the metric set on " + chip_ + ": " + Text(r));
    auto size = Params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
    size.pHostObject = host_;
    r = cuptiProfilerHostGetConfigImageSize(&size);
    if (r == CUPTI_SUCCESS) {
      config_.resize(size.configImageSize);
      auto image = Params<CUpti_Profiler_Host_GetConfigImage_Params>(
          CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
      image.pHostObject = host_;
      image.configImageSize = config_.size();
      image.pConfigImage = config_.data();
      r = cuptiProfilerHostGetConfigImage(&image);
    }
    if (r != CUPTI_SUCCESS) return Fail(SamplerRefusal::kOther, "config image: " + Text(r));
    auto passes = Params<CUpti_Profiler_Host_GetNumOfPasses_Params>(
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
    passes.configImageSize = config_.size();
    passes.pConfigImage = config_.data();
    r = cuptiProfilerHostGetNumOfPasses(&passes);
    if (r != CUPTI_SUCCESS || passes.numOfPasses != 1) {
      return Fail(SamplerRefusal::kUnsupported, "the metric set needs " +
                                                    std::to_string(passes.numOfPasses) +
                                                    " passes on " + chip_ + ", sampling takes one");
    }
    return true;
  }

  bool ResetImage() {
    auto init = Params<CUpti_PmSampling_CounterDataImage_Initialize_Params>(
        CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE);
    init.pPmSamplingObject = sampler_;
    init.counterDataSize = counter_data_.size();
    init.pCounterData = counter_data_.data();
    const CUptiResult r = cuptiPmSamplingCounterDataImageInitialize(&init);
    if (r != CUPTI_SUCCESS) return Fail(SamplerRefusal::kOther, "counter data image: " + Text(r));
    read_ = 0;
    return true;
  }

  void TearDown() {
    if (sampler_ != nullptr) {
      auto disable =
          Params<CUpti_PmSampling_Disable_Params>(CUpti_PmSampling_Disable_Params_STRUCT_SIZE);
      disable.pPmSamplingObject = sampler_;
      cuptiPmSamplingDisable(&disable);
      sampler_ = nullptr;
    }
    if (host_ != nullptr) {
      auto deinit = Params<CUpti_Profiler_Host_Deinitialize_Params>(
          CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE);
      deinit.pHostObject = host_;
      cuptiProfilerHostDeinitialize(&deinit);
      host_ = nullptr;
    }
    if (profiler_initialized_) {
      auto deinit = Params<CUpti_Profiler_DeInitialize_Params>(
          CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE);
      cuptiProfilerDeInitialize(&deinit);
      profiler_initialized_ = false;
    }
    ready_ = false;
    settled_.store(false, std::memory_order_release);  // Prepare sets up again
  }

  // One window: start, read every kReadPeriod until it closes, stop, read the rest.
  void Sample() {
    auto start = Params<CUpti_PmSampling_Start_Params>(CUpti_PmSampling_Start_Params_STRUCT_SIZE);
    start.pPmSamplingObject = sampler_;
    CUptiResult r = cuptiPmSamplingStart(&start);
    if (r != CUPTI_SUCCESS) {
      Fail(RefusalOf(r), "cuptiPmSamplingStart: " + Text(r));
      return;
    }
    const uint64_t started_ns = TimebaseNowNs();
    const uint64_t written_before = writer_->samples();
    const uint64_t skipped_before = skipped_;
    ++windows_;
    g_agent->notes().Log("PM sampling: window %llu started",
                         static_cast<unsigned long long>(windows_));
    bool ok = true;
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (want_ && ok) {
        cv_.wait_for(lock, kReadPeriod, [&] { return !want_; });
        lock.unlock();
        ok = Read();
        lock.lock();
      }
    }
    if (!ready_) return;  // a reset of the image failed: Fail said why and tore down
    auto stop = Params<CUpti_PmSampling_Stop_Params>(CUpti_PmSampling_Stop_Params_STRUCT_SIZE);
    stop.pPmSamplingObject = sampler_;
    r = cuptiPmSamplingStop(&stop);
    if (ok && r == CUPTI_SUCCESS) ok = Read();
    if (!ready_) return;  // as above
    g_agent->notes().Log(
        "PM sampling: window %llu: %llu samples written, %llu skipped (first or seen), "
        "%.1f ms after start",
        static_cast<unsigned long long>(windows_),
        static_cast<unsigned long long>(writer_->samples() - written_before),
        static_cast<unsigned long long>(skipped_ - skipped_before),
        static_cast<double>(TimebaseNowNs() - started_ns) / 1e6);
    if (!ok || r != CUPTI_SUCCESS) {
      // The hardware buffer overflowed (or stopping failed): set up afresh next window.
      if (!fell_behind_said_) {
        fell_behind_said_ = true;
        g_agent->notes().Note(SamplerRefusalNote(
            SamplerRefusal::kFellBehind, "every " + std::to_string(interval_ns_ / 1000) + " us" +
                                             (r != CUPTI_SUCCESS ? ", stop: " + Text(r) : "")));
      }
      TearDown();
    }
  }

  // Decodes what the hardware buffer holds and writes every new sample. False
  // when the buffer overflowed.
  bool Read() {
    const uint64_t cpu0 = ThisThreadCpuNs();
    bool ok = true;
    for (;;) {
      auto decode = Params<CUpti_PmSampling_DecodeData_Params>(
          CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE);
      decode.pPmSamplingObject = sampler_;
      decode.pCounterDataImage = counter_data_.data();
      decode.counterDataImageSize = counter_data_.size();
      const CUptiResult r = cuptiPmSamplingDecodeData(&decode);
      if (r != CUPTI_SUCCESS || decode.overflow) ok = false;
      WriteNewSamples();
      if (!ok || decode.decodeStopReason != CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL)
        break;
      if (!ResetImage()) return false;
    }
    read_cpu_ns_ += ThisThreadCpuNs() - cpu0;
    return ok;
  }

  void WriteNewSamples() {
    auto info = Params<CUpti_PmSampling_GetCounterDataInfo_Params>(
        CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE);
    info.pCounterDataImage = counter_data_.data();
    info.counterDataImageSize = counter_data_.size();
    if (cuptiPmSamplingGetCounterDataInfo(&info) != CUPTI_SUCCESS) return;
    std::array<double, kSampledMetricCount> values{};
    for (; read_ < info.numCompletedSamples; ++read_) {
      auto sample = Params<CUpti_PmSampling_CounterData_GetSampleInfo_Params>(
          CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE);
      sample.pPmSamplingObject = sampler_;
      sample.pCounterDataImage = counter_data_.data();
      sample.counterDataImageSize = counter_data_.size();
      sample.sampleIndex = read_;
      if (cuptiPmSamplingCounterDataGetSampleInfo(&sample) != CUPTI_SUCCESS) continue;
      // The first sample after a start spans the time since the sampler was
      // last stopped; a sample seen twice is not written twice.
      if (sample.endTimestamp <= sample.startTimestamp ||
          sample.endTimestamp - sample.startTimestamp > 4 * interval_ns_ ||
          sample.startTimestamp < last_end_ns_) {
        ++skipped_;
        continue;
      }
      auto eval = Params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
          CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
      eval.pHostObject = host_;
      eval.pCounterDataImage = counter_data_.data();
      eval.counterDataImageSize = counter_data_.size();
      eval.rangeIndex = read_;
      eval.ppMetricNames = const_cast<const char**>(kCuptiMetricNames.data());
      eval.numMetrics = kCuptiMetricNames.size();
      eval.pMetricValues = values.data();
      if (cuptiProfilerHostEvaluateToGpuValues(&eval) != CUPTI_SUCCESS) continue;
      last_end_ns_ = sample.endTimestamp;
      writer_->Write(sample.startTimestamp, sample.endTimestamp, values);
    }
  }

  const uint64_t interval_ns_;
  const bool set_up_in_windows_;
  std::timed_mutex setup_mu_;         // one SetUp at a time (Prepare's thread, the worker)
  std::atomic<bool> exiting_{false};  // Quiesce ran: no set-up from now on
  std::atomic<int> exit_hooks_{0};
  std::mutex mu_;  // guards want_, busy_, failed_ (the rest is the worker's)
  std::condition_variable cv_;
  bool want_ = false;                    // a window is open
  uint64_t begun_ = 0;                   // windows that asked for samples
  uint64_t requested_ = 0, served_ = 0;  // Begin's requests, and those the worker took
  bool busy_ = false;                    // the worker has not finished the window's reading
  bool failed_ = false;
  std::thread worker_;
  std::atomic<int64_t> device_hint_{-1};
  std::atomic<bool> settled_{false};  // Prepare has nothing left to do

  // The worker's (and Summarize's, after the last End).
  bool ready_ = false;
  bool profiler_initialized_ = false;
  bool fell_behind_said_ = false;
  int setups_ = 0;
  int64_t device_ = -1;
  std::string chip_;
  std::vector<uint8_t> availability_, config_, counter_data_;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  CUpti_PmSampling_Object* sampler_ = nullptr;
  size_t read_ = 0;  // samples of counter_data_ already written
  uint64_t last_end_ns_ = 0;
  uint64_t skipped_ = 0;  // samples not written: a start's first, or seen before
  uint64_t windows_ = 0;
  uint64_t read_cpu_ns_ = 0;
  std::unique_ptr<SampleWriter> writer_;
};

CuptiPmSampler* g_sampler = nullptr;

void QuiesceAtExit() {
  if (g_sampler != nullptr) g_sampler->Quiesce();
}

}  // namespace

CounterSampler* StartCuptiPmSampler(const SourceContext& context) {
  const AgentConfig& config = context.config();
  if (config.counters != CounterMode::kAuto || !context.enabled(RecordKind::kCounters))
    return nullptr;
  g_agent.Bind(context);
  // Lives as long as the process: its worker may still be reading at exit.
  if (g_sampler == nullptr)
    g_sampler = new CuptiPmSampler(config.counters_sample_us, config.mode == CaptureMode::kFull);
  return g_sampler;
}

void EndCuptiPmSampler() {
  if (g_sampler == nullptr) return;
  g_sampler->Deliver();
  g_sampler->Summarize();
}

void NoteKernelDevice(uint32_t device) { g_kernel_device.store(device, std::memory_order_relaxed); }

}  // namespace aon::agent
