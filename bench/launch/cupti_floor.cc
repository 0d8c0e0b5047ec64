// libaon_bench_cupti_floor.so: "the floor", a bare CUPTI injection client.
//
//   CUDA_INJECTION64_PATH=<build>/lib/libaon_bench_cupti_floor.so ./program
//
// It sets CUPTI up exactly as AON's agent does by default (see
// rank_agent/src/cupti_source.cc: keep the two in step) and then throws every
// record away: the activity kinds (kernels, memcpy incl. peer copies, memset,
// synchronization, runtime API, external correlation, device), the runtime API
// filter (noisy calls off), the driver API calls that are traced one by one
// (launch/copy/memset/sync), the CLOCK_MONOTONIC timestamp callback, system
// thread ids, 4 MiB buffers from a pool preallocated 4 deep, a 500 ms flush
// period, and a forced flush at exit. Completed buffers are only walked to
// count their records, then handed back. What a program loses under this
// library is the cost of CUPTI itself; what AON costs beyond it is AON's.
//
// Independent of the AON libraries on purpose. At exit it prints to stderr
//   AON_FLOOR pid=<pid> records=<n> buffers=<n> dropped=<n> kinds=<enabled>/<asked>
// (bench/run_overhead.sh checks that line to know the library was loaded).
// AON_FLOOR_QUIET=1 silences it.
#include <cupti.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

// The agent's own API filter lists: the floor enables exactly what AON enables.
#include "cupti_api_filter.h"

namespace {

using aon::agent::IsNoisyRuntimeApi;
using aon::agent::IsTracedDriverApi;

constexpr size_t kBufferBytes = 4u << 20;  // as the agent
constexpr size_t kPreallocatedBuffers = 4;
constexpr uint32_t kFlushPeriodMs = 500;

std::mutex g_pool_mu;
std::vector<uint8_t*>* g_pool = nullptr;  // never freed: CUPTI may call back during exit
std::atomic<uint64_t> g_records{0};
std::atomic<uint64_t> g_buffers{0};
std::atomic<uint64_t> g_dropped{0};
int g_kinds_enabled = 0;
int g_kinds_asked = 0;
CUpti_SubscriberHandle g_subscriber = nullptr;

uint8_t* Allocate() {
  return static_cast<uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBufferBytes));
}

void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;
  uint8_t* b = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_pool_mu);
    if (!g_pool->empty()) {
      b = g_pool->back();
      g_pool->pop_back();
    }
  }
  if (b == nullptr) b = Allocate();
  *buffer = b;
  *size = b ? kBufferBytes : 0;
}

void CUPTIAPI OnBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t,
                                size_t valid_size) {
  uint64_t n = 0;
  CUpti_Activity* rec = nullptr;
  while (valid_size > 0 && cuptiActivityGetNextRecord(buffer, valid_size, &rec) == CUPTI_SUCCESS)
    ++n;
  g_records.fetch_add(n, std::memory_order_relaxed);
  g_buffers.fetch_add(1, std::memory_order_relaxed);
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS &&
      dropped > 0)
    g_dropped.fetch_add(dropped, std::memory_order_relaxed);
  if (buffer != nullptr) {
    std::lock_guard<std::mutex> lock(g_pool_mu);
    g_pool->push_back(buffer);
  }
}

uint64_t CUPTIAPI Timestamp() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

void ConfigureApiFilters() {
  for (CUpti_CallbackId cbid = 1; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++cbid) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) != CUPTI_SUCCESS || !name)
      continue;
    if (IsNoisyRuntimeApi(name)) cuptiActivityEnableRuntimeApi(cbid, 0);
  }
  bool driver_kind = false;
  aon::agent::EnableTracedDriverApis(&driver_kind);
}

void AtExit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const char* quiet = std::getenv("AON_FLOOR_QUIET");
  if (quiet != nullptr && std::strcmp(quiet, "1") == 0) return;
  std::fprintf(stderr, "AON_FLOOR pid=%d records=%llu buffers=%llu dropped=%llu kinds=%d/%d\n",
               static_cast<int>(getpid()), static_cast<unsigned long long>(g_records.load()),
               static_cast<unsigned long long>(g_buffers.load()),
               static_cast<unsigned long long>(g_dropped.load()), g_kinds_enabled, g_kinds_asked);
  std::fflush(stderr);
}

void Warn(const char* what, CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::fprintf(stderr, "AON_FLOOR: %s: %s (%d)\n", what, s ? s : "?", static_cast<int>(r));
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::atomic<bool> started{false};
  if (started.exchange(true)) return 1;
  CUptiResult r =
      cuptiSubscribe(&g_subscriber, reinterpret_cast<CUpti_CallbackFunc>(OnCallback), nullptr);
  if (r != CUPTI_SUCCESS) {
    Warn("cuptiSubscribe failed, nothing captured", r);
    return 1;
  }
  if ((r = cuptiActivityRegisterTimestampCallback(Timestamp)) != CUPTI_SUCCESS)
    Warn("cuptiActivityRegisterTimestampCallback", r);
  if ((r = cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)) != CUPTI_SUCCESS)
    Warn("cuptiSetThreadIdType", r);
  g_pool = new std::vector<uint8_t*>();
  for (size_t i = 0; i < kPreallocatedBuffers; ++i) {
    if (uint8_t* b = Allocate()) g_pool->push_back(b);
  }
  if ((r = cuptiActivityRegisterCallbacks(OnBufferRequested, OnBufferCompleted)) != CUPTI_SUCCESS) {
    Warn("cuptiActivityRegisterCallbacks failed, nothing captured", r);
    cuptiUnsubscribe(g_subscriber);
    return 1;
  }
  const CUpti_ActivityKind kinds[] = {
      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
      CUPTI_ACTIVITY_KIND_MEMCPY,
      CUPTI_ACTIVITY_KIND_MEMCPY2,
      CUPTI_ACTIVITY_KIND_MEMSET,
      CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
      CUPTI_ACTIVITY_KIND_RUNTIME,
      CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
  };
  for (CUpti_ActivityKind k : kinds) {
    ++g_kinds_asked;
    if ((r = cuptiActivityEnable(k)) == CUPTI_SUCCESS) {
      ++g_kinds_enabled;
    } else {
      std::fprintf(stderr, "AON_FLOOR: cannot enable activity kind %d\n", static_cast<int>(k));
    }
  }
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE);
  ConfigureApiFilters();
  cuptiActivityFlushPeriod(kFlushPeriodMs);
  std::atexit(AtExit);
  return 1;
}
