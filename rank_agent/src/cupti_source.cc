// CUPTI activity capture.
//
// Buffers: CUPTI asks for buffers on application threads (request callback), so
// they come from a pool allocated up front; a new one is allocated only while
// the pool plus the records stay under the memory cap, otherwise CUPTI gets no
// buffer and drops (and counts) the records itself, which we read back from
// cuptiActivityGetNumDroppedRecords. Completed buffers are parsed on CUPTI's
// worker thread into fixed-width records and returned to the pool.
#include "cupti_source.h"

#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "aon/base/gpu_uuid.h"
#include "aon/base/pcie_link.h"
#include "aon/base/timebase.h"
#include "correlation_ids.h"
#include "cupti_api_filter.h"
#include "cupti_pm_sampling.h"
#include "nccl_plugin.h"
#include "op_ranges.h"
#include "source_context.h"

namespace aon::agent {
namespace {

// Bound by StartCuptiSource, before CUPTI can call back.
BoundContext g_agent;

constexpr size_t kBufferBytes = 4u << 20;  // CUPTI recommends 1-10 MB
constexpr size_t kPreallocatedBuffers = 4;
constexpr uint32_t kFlushPeriodMs = 500;

class BufferPool {
 public:
  void Preallocate(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      uint8_t* b = Allocate();
      if (b == nullptr) return;
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(b);
    }
  }
  uint8_t* Take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        uint8_t* b = free_.back();
        free_.pop_back();
        return b;
      }
    }
    return Allocate();  // rare: the pool ran dry under a burst
  }
  void Give(uint8_t* b) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(b);
  }

 private:
  uint8_t* Allocate() {
    if (!g_agent->sink().ReserveExternal(kBufferBytes)) return nullptr;
    auto* b = static_cast<uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBufferBytes));
    if (b == nullptr) g_agent->sink().ReleaseExternal(kBufferBytes);
    return b;
  }
  std::mutex mu_;
  std::vector<uint8_t*> free_;
};

BufferPool* g_pool = nullptr;
CUpti_SubscriberHandle g_subscriber = nullptr;
uint64_t g_cupti_dropped = 0;  // only touched on CUPTI's buffer thread and at Finish

// Kernel names: CUPTI's name pointers are stable per function, so demangle once.
std::mutex g_names_mu;
std::unordered_map<const char*, uint32_t>& KernelNameCache() {
  static auto* cache = new std::unordered_map<const char*, uint32_t>();
  return *cache;
}

uint32_t KernelNameId(const char* mangled) {
  if (mangled == nullptr) return 0;
  std::lock_guard<std::mutex> lock(g_names_mu);
  auto& cache = KernelNameCache();
  if (auto it = cache.find(mangled); it != cache.end()) return it->second;
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  uint32_t id =
      g_agent->sink().Intern(status == 0 && demangled ? demangled : mangled, RecordKind::kKernel);
  std::free(demangled);
  cache.emplace(mangled, id);
  return id;
}

uint32_t ApiNameId(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  static std::mutex mu;
  static auto* cache = new std::unordered_map<uint64_t, uint32_t>();
  uint64_t key = (static_cast<uint64_t>(domain) << 32) | cbid;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  const char* name = nullptr;
  uint32_t id = 0;
  if (cuptiGetCallbackName(domain, cbid, &name) == CUPTI_SUCCESS && name != nullptr) {
    // "cudaMemcpyAsync_v3020" -> "cudaMemcpyAsync": the suffix is the API
    // version CUPTI keys on, not what users call (callback_id keeps it exact).
    std::string_view n(name);
    if (size_t v = n.rfind("_v");
        v != std::string_view::npos && v + 2 < n.size() &&
        n.find_first_not_of("0123456789", v + 2) == std::string_view::npos) {
      n = n.substr(0, v);
    }
    id = g_agent->sink().Intern(n, RecordKind::kApi);
  }
  cache->emplace(key, id);
  return id;
}

// Framework op ranges (op_ranges.h) tied to the launches made inside them: a
// CUPTI callback at the entry of every call that puts work on the GPU (launch,
// graph launch, copy, memset; runtime and driver) writes an
// ExternalCorrelationRecord {innermost open range of the thread, the call's
// correlation id, kind CUSTOM0}, the record CUPTI's own external correlation
// writes. Not CUPTI's external correlation stack: a push and a pop for every
// range, ~2,200 a step on a launch-bound transformer loop of ~300 launches,
// cost a quarter of an uncaptured step inside windows (H100,
// bench/always_on/window_parts.py); a callback per launch costs a fraction of
// it. NCCL's launches still use the stack (CUSTOM2, nccl_plugin.cc). On only
// while a window records with the `ops` kind.
std::atomic<bool> g_op_correlation{false};
std::atomic<uint64_t> g_launch_callbacks_attach{0};  // bumped each time they are switched on

// The callback ids of the runtime and driver calls that put work on the GPU
// (PutsWorkOnGpu, cupti_api_filter.h), looked up once.
const std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>>& LaunchCallbacks() {
  static const auto* ids = [] {
    auto* v = new std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>>();
    for (auto [domain, size] :
         {std::pair{CUPTI_CB_DOMAIN_RUNTIME_API, uint32_t{CUPTI_RUNTIME_TRACE_CBID_SIZE}},
          std::pair{CUPTI_CB_DOMAIN_DRIVER_API, uint32_t{CUPTI_DRIVER_TRACE_CBID_SIZE}}}) {
      for (CUpti_CallbackId cbid = 1; cbid < size; ++cbid) {
        const char* name = nullptr;
        if (cuptiGetCallbackName(domain, cbid, &name) == CUPTI_SUCCESS && name != nullptr &&
            PutsWorkOnGpu(name)) {
          v->emplace_back(domain, cbid);
        }
      }
    }
    return v;
  }();
  return *ids;
}

// Switches the launch callbacks on or off; the number switched.
size_t SwitchLaunchCallbacks(CUpti_SubscriberHandle subscriber, bool on) {
  size_t n = 0;
  for (auto [domain, cbid] : LaunchCallbacks()) {
    if (cuptiEnableCallback(on ? 1 : 0, subscriber, domain, cbid) == CUPTI_SUCCESS) ++n;
  }
  return n;
}

// CUPTI restarts its correlation ids after every detach (correlation_ids.h).
CorrelationIds g_correlation;
uint32_t Correlation(uint32_t cupti_id) { return g_correlation.Map(cupti_id); }

// The GPUs (ordinals below 64, one bit each) that records came from, and those
// a rank file row describes already.
std::atomic<uint64_t> g_devices_seen{0};
std::atomic<uint64_t> g_devices_described{0};
void NoteDevice(uint32_t ordinal) {
  if (ordinal < 64) g_devices_seen.fetch_or(1ull << ordinal, std::memory_order_relaxed);
}

// A GPU's /meta/devices row with its PCIe link: once per GPU, a few small files of
// /proc and /sys (CUPTI's own PCIe records come only to a subscriber enabled
// before cuInit).
void AddDevice(const SourceContext& agent, DeviceInfo info, const std::string& uuid) {
  if (info.device_id < 64)
    g_devices_described.fetch_or(1ull << info.device_id, std::memory_order_relaxed);
  info.uuid_id = agent.sink().Intern(uuid, RecordKind::kKernel);
  const PcieLink link = ReadPcieLink(uuid);
  info.pcie_gen = link.gen;
  info.pcie_width = link.width;
  agent.notes().AddDevice(info);
}

// CUPTI sends its device records for contexts created while it is subscribed:
// in budgeted mode the first window opens after the application made its
// context, so no record comes. The GPUs the window's records came from are
// described by the driver this process already loaded instead.
void DescribeSeenDevices(const SourceContext& agent) {
  const uint64_t todo = g_devices_seen.load(std::memory_order_relaxed) &
                        ~g_devices_described.load(std::memory_order_relaxed);
  if (todo == 0) return;
  void* cuda = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  if (cuda == nullptr) return;
  using GetFn = int (*)(int*, int);
  using NameFn = int (*)(char*, int, int);
  using AttrFn = int (*)(int*, int, int);
  using MemFn = int (*)(size_t*, int);
  using UuidFn = int (*)(CUuuid*, int);
  auto get = reinterpret_cast<GetFn>(dlsym(cuda, "cuDeviceGet"));
  auto name = reinterpret_cast<NameFn>(dlsym(cuda, "cuDeviceGetName"));
  auto attr = reinterpret_cast<AttrFn>(dlsym(cuda, "cuDeviceGetAttribute"));
  auto mem = reinterpret_cast<MemFn>(dlsym(cuda, "cuDeviceTotalMem_v2"));
  auto uuid = reinterpret_cast<UuidFn>(dlsym(cuda, "cuDeviceGetUuid_v2"));
  if (uuid == nullptr) uuid = reinterpret_cast<UuidFn>(dlsym(cuda, "cuDeviceGetUuid"));
  if (get != nullptr && name != nullptr && attr != nullptr && mem != nullptr && uuid != nullptr) {
    for (uint32_t ordinal = 0; ordinal < 64; ++ordinal) {
      if ((todo & (1ull << ordinal)) == 0) continue;
      int device = 0;
      CUuuid u{};
      if (get(&device, static_cast<int>(ordinal)) != 0 || uuid(&u, device) != 0) continue;
      char text[256] = {};
      int sms = 0, major = 0, minor = 0;
      size_t bytes = 0;
      name(text, sizeof(text) - 1, device);
      attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
      attr(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
      attr(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
      mem(&bytes, device);
      DeviceInfo info{};
      info.device_id = ordinal;
      info.name_id = agent.sink().Intern(text, RecordKind::kKernel);
      info.sm_count = static_cast<uint32_t>(sms);
      info.global_memory_bytes = bytes;
      info.compute_major = static_cast<uint32_t>(major);
      info.compute_minor = static_cast<uint32_t>(minor);
      AddDevice(agent, info, GpuUuidText(reinterpret_cast<const unsigned char*>(u.bytes)));
    }
  }
  dlclose(cuda);
}

// The fields CUPTI's two copy records (MEMCPY, MEMCPY2) share by name.
template <typename CuptiCopy>
MemcpyRecord CommonMemcpyFields(const CuptiCopy& m) {
  MemcpyRecord r{};
  r.start_ns = m.start;
  r.end_ns = m.end;
  r.bytes = m.bytes;
  r.correlation_id = Correlation(m.correlationId);
  r.device_id = m.deviceId;
  NoteDevice(m.deviceId);
  r.context_id = m.contextId;
  r.stream_id = m.streamId;
  r.copy_kind = m.copyKind;
  r.src_kind = m.srcKind;
  r.dst_kind = m.dstKind;
  r.flags = m.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC ? 1 : 0;
  return r;
}

// A CUDA graph was instantiated, or one ran, while CUPTI was attached
// (CaptureWindows::Close): a kernel record of a graph, or the graph-exec
// resource callback.
std::atomic<bool> g_graph_exec_attached{false};

void Convert(const CUpti_Activity* rec) {
  const SourceContext& agent = *g_agent;
  RecordSink& store = agent.sink();
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      if (k->start == 0 && k->end == 0) return;  // no timing: incomplete (docs/cupti.md)
      KernelRecord r{};
      r.start_ns = k->start;
      r.end_ns = k->end;
      r.graph_node_id = k->graphNodeId;
      r.correlation_id = Correlation(k->correlationId);
      r.device_id = k->deviceId;
      NoteKernelDevice(k->deviceId);
      NoteDevice(k->deviceId);
      r.context_id = k->contextId;
      r.stream_id = k->streamId;
      r.name_id = KernelNameId(k->name);
      r.graph_id = k->graphId;
      if (k->graphId != 0) g_graph_exec_attached.store(true, std::memory_order_relaxed);
      r.grid_x = k->gridX;
      r.grid_y = k->gridY;
      r.grid_z = k->gridZ;
      r.block_x = k->blockX;
      r.block_y = k->blockY;
      r.block_z = k->blockZ;
      r.registers_per_thread = k->registersPerThread;
      r.static_shared_bytes = static_cast<uint32_t>(k->staticSharedMemory);
      r.dynamic_shared_bytes = static_cast<uint32_t>(k->dynamicSharedMemory);
      store.Push(r);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      MemcpyRecord r = CommonMemcpyFields(*m);
      r.src_device_id = r.dst_device_id = m->deviceId;
      store.Push(r);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer-to-peer
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(rec);
      MemcpyRecord r = CommonMemcpyFields(*m);
      r.src_device_id = m->srcDeviceId;
      r.dst_device_id = m->dstDeviceId;
      store.Push(r);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      MemsetRecord r{};
      r.start_ns = m->start;
      r.end_ns = m->end;
      r.bytes = m->bytes;
      r.correlation_id = Correlation(m->correlationId);
      r.device_id = m->deviceId;
      NoteDevice(m->deviceId);
      r.context_id = m->contextId;
      r.stream_id = m->streamId;
      r.value = m->value;
      r.memory_kind = static_cast<uint8_t>(m->memoryKind);
      r.flags = m->flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC ? 1 : 0;
      store.Push(r);
      return;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(rec);
      SyncRecord r{};
      r.start_ns = s->start;
      r.end_ns = s->end;
      r.correlation_id = Correlation(s->correlationId);
      r.context_id = s->contextId;
      r.stream_id = s->streamId;
      r.event_id = s->cudaEventId;
      r.sync_type = static_cast<uint32_t>(s->type);
      store.Push(r);
      return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
      bool runtime = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
      ApiRecord r{};
      r.start_ns = a->start;
      r.end_ns = a->end;
      r.correlation_id = Correlation(a->correlationId);
      r.callback_id = a->cbid;
      r.thread_id = a->threadId;
      r.return_value = static_cast<int32_t>(a->returnValue);
      r.name_id =
          ApiNameId(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid);
      r.domain = static_cast<uint8_t>(runtime ? ApiDomain::kRuntime : ApiDomain::kDriver);
      store.Push(r);
      return;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
      ExternalCorrelationRecord r{};
      r.external_id = e->externalId;
      r.correlation_id = Correlation(e->correlationId);
      r.external_kind = static_cast<uint32_t>(e->externalKind);
      store.Push(r);
      return;
    }
    case CUPTI_ACTIVITY_KIND_DEVICE: {
      const auto* d = reinterpret_cast<const CUpti_ActivityDevice5*>(rec);
      DeviceInfo info{};
      info.device_id = d->id;
      info.name_id = store.Intern(d->name ? d->name : "", RecordKind::kKernel);
      info.sm_count = d->numMultiprocessors;
      info.global_memory_bytes = d->globalMemorySize;
      info.compute_major = d->computeCapabilityMajor;
      info.compute_minor = d->computeCapabilityMinor;
      AddDevice(agent, info, GpuUuidText(reinterpret_cast<const unsigned char*>(d->uuid.bytes)));
      return;
    }
    default:
      return;
  }
}

void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;  // as many as fit
  uint8_t* b = g_pool ? g_pool->Take() : nullptr;
  *buffer = b;
  *size = b ? kBufferBytes : 0;  // no buffer: CUPTI drops and counts
}

void CUPTIAPI OnBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t,
                                size_t valid_size) {
  CUpti_Activity* rec = nullptr;
  while (valid_size > 0 && cuptiActivityGetNextRecord(buffer, valid_size, &rec) == CUPTI_SUCCESS) {
    Convert(rec);
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS &&
      dropped > 0) {
    g_cupti_dropped += dropped;
  }
  if (buffer != nullptr && g_pool != nullptr) g_pool->Give(buffer);
}

uint64_t CUPTIAPI Timestamp() { return TimebaseNowNs(); }

// The subscriber holds CUPTI's single slot (and learns when another tool has
// it). Callbacks enabled: in windows that record ops, the entries of the calls
// that put work on the GPU (LaunchCallbacks: a launch tied to the thread's
// innermost op range); and resource callbacks for CUDA graphs: two
// tie NCCL operations (nccl_plugin.h) and framework ops (op_ranges.h) captured
// into a graph to the kernels that replay them: a kernel node created (during
// stream capture: inside the capturing launch, on its thread) and a node
// cloned (graph instantiation); a third notes that a graph was instantiated
// while attached (Close). Other graph nodes return at once.

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* data) {
  if (data == nullptr) return;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto* call = static_cast<const CUpti_CallbackData*>(data);
    // A runtime launch calls the driver's: its kernel carries the runtime
    // call's correlation id, so the nested driver call needs no row. Counted
    // per thread and per attach (an exit lost to a detach mid-call does not
    // outlive its window).
    thread_local struct {
      uint64_t attach = 0;
      int depth = 0;
    } runtime_calls;
    const uint64_t attach = g_launch_callbacks_attach.load(std::memory_order_relaxed);
    if (runtime_calls.attach != attach) runtime_calls = {attach, 0};
    const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
    if (call->callbackSite == CUPTI_API_EXIT) {
      if (runtime && runtime_calls.depth > 0) --runtime_calls.depth;
      return;
    }
    if (runtime) {
      ++runtime_calls.depth;
    } else if (runtime_calls.depth > 0) {
      return;
    }
    if (!g_op_correlation.load(std::memory_order_relaxed)) return;
    const uint64_t op = InnermostOpRange();
    if (op == 0) return;
    ExternalCorrelationRecord r{};
    r.external_id = op;
    r.correlation_id = Correlation(call->correlationId);
    r.external_kind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    g_agent->sink().Push(r);
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_RESOURCE) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED) {
    g_graph_exec_attached.store(true, std::memory_order_relaxed);
    return;
  }
  const auto* graph = static_cast<const CUpti_GraphData*>(
      static_cast<const CUpti_ResourceData*>(data)->resourceDescriptor);
  if (graph == nullptr || graph->node == nullptr || graph->nodeType != CU_GRAPH_NODE_TYPE_KERNEL) {
    return;
  }
  uint64_t id = 0;
  if (cuptiGetGraphNodeId(graph->node, &id) != CUPTI_SUCCESS) return;
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    OnGraphKernelNodeCreated(id);
    NoteGraphNodeCreated(id);
  } else if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED && graph->originalNode != nullptr) {
    uint64_t original = 0;
    if (cuptiGetGraphNodeId(graph->originalNode, &original) == CUPTI_SUCCESS) {
      OnGraphKernelNodeCloned(original, id);
      NoteGraphNodeCloned(original, id);
    }
  }
}

std::string ResultText(CUptiResult r) {
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  return std::string(s ? s : "unknown CUPTI error") + " (" + std::to_string(static_cast<int>(r)) +
         ")";
}

// The driver calls ConfigureApiFilters switched on (EnableTracedDriverApis),
// and whether the DRIVER kind is on: Quiesce switches both off.
std::vector<CUpti_CallbackId> g_traced_driver_calls;
bool g_driver_kind = false;

void ConfigureApiFilters(const SourceContext& agent) {
  for (CUpti_CallbackId cbid = 1; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++cbid) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) != CUPTI_SUCCESS || !name)
      continue;
    if (IsNoisyRuntimeApi(name)) cuptiActivityEnableRuntimeApi(cbid, 0);
  }
  g_traced_driver_calls = EnableTracedDriverApis(&g_driver_kind);
  static bool noted = false;  // once per process, not per window
  if (!g_driver_kind && !noted) {
    noted = true;
    agent.notes().Note(
        "CUPTI: cannot enable driver API activity: driver calls (cuBLAS, cuDNN, Triton, NCCL and "
        "XLA launches) have no API records, and their kernels no operator");
  }
  agent.notes().Log("CUPTI: %zu driver API calls traced (launch/copy/memset/sync)",
                    g_traced_driver_calls.size());
}

// CUPTI as the capture windows' GPU activity source (capture_control.h). Open
// attaches: subscribe (CUPTI's single slot), timestamps on our timebase, buffers,
// the activity kinds, the graph-node callbacks. Close detaches entirely
// (cuptiFinalize): measured on an H200, a process that stays subscribed with
// every kind disabled still pays ~25-35 % on launch-bound steps, one that
// detached pays nothing measurable (bench/RESULTS.md, "CUPTI switched on and
// off"). Except once a CUDA graph was instantiated while attached: then Close
// stays subscribed (see there) and the next Open only re-enables the kinds.
// All three run on the thread that marked the step boundary, under the
// capture control's lock.
class CuptiCapture final : public ActivityCapture {
 public:
  bool Open() override {
    const SourceContext& agent = *g_agent;
    // Subscribed already: it stayed attached (Close), or a graph capture holds it.
    if (g_subscriber == nullptr && !Subscribe(agent)) return false;
    return Reenable(agent);
  }

  // Outside windows, while the program captures a CUDA graph: the node
  // callbacks only, no activity kind (captured launches run nothing).
  bool OpenGraphNodes() override {
    const SourceContext& agent = *g_agent;
    const bool nccl_nodes =
        agent.enabled(RecordKind::kNccl) && agent.config().nccl != NcclMode::kOff;
    if (!nccl_nodes && !agent.enabled(RecordKind::kGraphOps)) return false;  // nothing to tie
    if (g_subscriber == nullptr && !Subscribe(agent)) return false;
    graph_nodes_ = EnableGraphNodeCallbacks(agent);
    if (!graph_nodes_ && !attached_.load(std::memory_order_acquire)) Detach();
    return graph_nodes_;
  }

  void CloseGraphNodes() override {
    // The graph's nodes were made while subscribed. Its instantiation may come
    // later (CUDAGraph(keep_graph=True) instantiates at its first replay, and
    // the instantiation callback may be unavailable): detaching now would miss
    // the clones and risk the failed launches Detach describes. Stay
    // subscribed, as after a graph instantiated while attached.
    if (graph_nodes_) g_graph_exec_attached.store(true, std::memory_order_relaxed);
    graph_nodes_ = false;
    // A window open now detaches at its own Close.
    if (g_subscriber != nullptr && !attached_.load(std::memory_order_acquire)) Detach();
  }

  // CUPTI's single slot, and what must precede enabling any kind.
  bool Subscribe(const SourceContext& agent) {
    CUptiResult r =
        cuptiSubscribe(&g_subscriber, reinterpret_cast<CUpti_CallbackFunc>(OnCallback), nullptr);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      agent.notes().Note(
          "CUPTI is already in use by another profiler (Nsight, compute-sanitizer, "
          "torch.profiler...): GPU activity is not captured; NVTX still is");
      return false;
    }
    if (r != CUPTI_SUCCESS) {
      agent.notes().Note("CUPTI unavailable: " + ResultText(r) + ": GPU activity is not captured");
      return false;
    }
    // Must precede enabling any kind (re-registering later corrupts timestamps);
    // after a detach CUPTI starts afresh and needs it again.
    r = cuptiActivityRegisterTimestampCallback(Timestamp);
    if (r != CUPTI_SUCCESS) {
      agent.notes().Note("CUPTI: cannot set the timestamp clock (" + ResultText(r) +
                         "): GPU timestamps stay on CUPTI's default clock (CLOCK_REALTIME)");
    }
    // OS thread ids (gettid), as NVTX records and the rest of the system use;
    // CUPTI's default is a pthread-derived id that matches nothing else.
    r = cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    if (r != CUPTI_SUCCESS && attaches_ == 0) {
      agent.notes().Note("CUPTI: API records keep CUPTI's own thread ids (" + ResultText(r) +
                         "), which do not match NVTX thread ids");
    }
    r = cuptiActivityRegisterCallbacks(OnBufferRequested, OnBufferCompleted);
    if (r != CUPTI_SUCCESS) {
      agent.notes().Note("CUPTI: cannot register activity buffers: " + ResultText(r));
      cuptiUnsubscribe(g_subscriber);
      g_subscriber = nullptr;  // the next window subscribes afresh
      return false;
    }
    r = cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                            CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED);
    if (r != CUPTI_SUCCESS && attaches_ == 0) {
      agent.notes().Note("CUPTI: no graph-instantiation callback (" + ResultText(r) +
                         "): CUDA graphs made while attached are not told apart");
    }
    return true;
  }

  // The kernel-node callbacks (created, cloned) where graph ops or NCCL need them.
  bool EnableGraphNodeCallbacks(const SourceContext& agent) {
    const bool nccl_nodes =
        agent.enabled(RecordKind::kNccl) && agent.config().nccl != NcclMode::kOff;
    if (!nccl_nodes && !agent.enabled(RecordKind::kGraphOps)) return false;
    for (CUpti_CallbackId cbid :
         {CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED}) {
      const CUptiResult r = cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RESOURCE, cbid);
      if (r != CUPTI_SUCCESS) {
        if (!graph_nodes_noted_) {
          graph_nodes_noted_ = true;
          agent.notes().Note("CUPTI: no CUDA-graph node callbacks (" + ResultText(r) +
                             "): replays of graph-captured NCCL operations and framework ops "
                             "are not attributed");
        }
        return false;
      }
    }
    return true;
  }

  // Enables the activity kinds (and what goes with them) of a window, on a
  // subscribed CUPTI.
  bool Reenable(const SourceContext& agent) {
    CUptiResult r = CUPTI_SUCCESS;
    enabled_.clear();
    for (const KindSwitch& k : kKindSwitches) {
      if (!agent.enabled(k.ours)) continue;
      r = cuptiActivityEnable(k.cupti);
      if (r == CUPTI_SUCCESS) {
        enabled_.push_back(k.cupti);
        if (k.cupti == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) SetNcclCuptiCorrelation(true);
      } else if (attaches_ == 0) {
        agent.notes().Note(std::string("CUPTI: cannot enable ") + RecordKindName(k.ours) +
                           " activity: " + ResultText(r));
      }
    }
    if (attaches_ == 0 && cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE) == CUPTI_SUCCESS) {
      enabled_.push_back(CUPTI_ACTIVITY_KIND_DEVICE);  // GPU names and UUIDs, once
    }
    EnableGraphNodeCallbacks(agent);
    if (agent.enabled(RecordKind::kApi)) ConfigureApiFilters(agent);
    cuptiActivityFlushPeriod(kFlushPeriodMs);
    attached_.store(true, std::memory_order_release);
    ++attaches_;
    agent.notes().Log("CUPTI attached (%zu activity kinds)", enabled_.size());
    if (enabled_.empty()) return false;  // nothing recorded: no window follows (no Quiesce)
    if (agent.enabled(RecordKind::kOps) && agent.enabled(RecordKind::kExternalCorrelation)) {
      g_launch_callbacks_attach.fetch_add(1, std::memory_order_relaxed);
      const size_t n = SwitchLaunchCallbacks(g_subscriber, true);
      if (n == 0 && attaches_ == 1) {
        agent.notes().Note(
            "CUPTI: no launch callbacks: kernels are not tied to framework operators");
      }
      g_op_correlation.store(n > 0, std::memory_order_release);
    }
    if (sampler_ != nullptr) sampler_->Begin();
    return true;
  }

  void Quiesce() override {
    // The window's steps are over: so is its sampling (on CUPTI's clock while attached).
    if (sampler_ != nullptr) sampler_->End();
    SetNcclCuptiCorrelation(false);
    if (g_op_correlation.exchange(false, std::memory_order_acq_rel)) {
      SwitchLaunchCallbacks(g_subscriber, false);
    }
    for (CUpti_ActivityKind k : enabled_) cuptiActivityDisable(k);
    for (CUpti_CallbackId cbid : g_traced_driver_calls) cuptiActivityEnableDriverApi(cbid, 0);
    if (g_driver_kind) cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
    g_driver_kind = false;
    g_traced_driver_calls.clear();
  }

  void Close() override {
    if (!attached_.exchange(false, std::memory_order_acq_rel)) return;
    if (sampler_ != nullptr) sampler_->Deliver();
    // What completed first, then the rest (incomplete records have no times and
    // are dropped by Convert; the window's last step ended a whole step ago).
    cuptiActivityFlushAll(0);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    DescribeSeenDevices(*g_agent);
    Detach();
  }

  // Unsubscribes, unless a graph capture needs the node callbacks or a graph
  // was instantiated or ran while subscribed.
  void Detach() {
    if (graph_nodes_) return;  // CloseGraphNodes detaches
    if (g_graph_exec_attached.load(std::memory_order_relaxed)) {
      // Measured on an H200 (CUDA 13, JAX 0.11 with XLA's command buffers):
      // after cuptiFinalize, launches of CUDA graphs that CUPTI saw (instantiated
      // or run while it was attached: XLA instantiates its graphs in the first
      // steps, before the first window) fail (CUDA_ERROR_LAUNCH_FAILED) and take
      // the job down. The records just flushed say whether a graph ran.
      // So once one was, CUPTI stays subscribed between windows with every
      // activity kind off (Quiesce): it costs some time per launch, the job
      // keeps running. CUPTI's correlation ids go on counting on the same
      // subscription: no NextAttach (that is for the restart after a detach).
      cuptiActivityFlushPeriod(0);  // nothing to flush until the next window
      if (!graph_noted_) {
        graph_noted_ = true;
        g_agent->notes().Note(
            "CUPTI stays attached between capture windows: the program instantiated CUDA "
            "graphs while it was attached, and detaching would make their later launches fail; "
            "every launch costs a little more outside windows");
      }
      return;
    }
    cuptiUnsubscribe(g_subscriber);
    g_subscriber = nullptr;
    const CUptiResult r = cuptiFinalize();
    g_correlation.NextAttach();  // every record of this attach was flushed above
    if (r != CUPTI_SUCCESS && !finalize_noted_) {
      finalize_noted_ = true;
      g_agent->notes().Note("CUPTI: cannot detach between capture windows (" + ResultText(r) +
                            "): CUPTI stays loaded, at some cost to every launch");
    }
    g_agent->notes().Log("CUPTI detached");
  }

  void Prepare() override {
    if (sampler_ != nullptr) sampler_->Prepare();
  }

  bool attached() const { return attached_.load(std::memory_order_acquire); }
  // Sampled counters in the windows (null: AON_COUNTERS is not auto).
  void SetSampler(CounterSampler* sampler) { sampler_ = sampler; }

  // At exit (full mode, or a window that is still open): hand back every buffer.
  void FlushAtExit() {
    if (!attached_.load(std::memory_order_acquire)) return;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    DescribeSeenDevices(*g_agent);
  }

 private:
  struct KindSwitch {
    CUpti_ActivityKind cupti;
    RecordKind ours;
  };
  static constexpr KindSwitch kKindSwitches[] = {
      {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, RecordKind::kKernel},
      {CUPTI_ACTIVITY_KIND_MEMCPY, RecordKind::kMemcpy},
      {CUPTI_ACTIVITY_KIND_MEMCPY2, RecordKind::kMemcpy},
      {CUPTI_ACTIVITY_KIND_MEMSET, RecordKind::kMemset},
      {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, RecordKind::kSync},
      {CUPTI_ACTIVITY_KIND_RUNTIME, RecordKind::kApi},
      {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, RecordKind::kExternalCorrelation},
  };
  std::vector<CUpti_ActivityKind> enabled_;
  CounterSampler* sampler_ = nullptr;
  std::atomic<bool> attached_{false};
  uint64_t attaches_ = 0;
  bool finalize_noted_ = false;
  bool graph_noted_ = false;
  bool graph_nodes_ = false;  // OpenGraphNodes: the node callbacks keep CUPTI subscribed
  bool graph_nodes_noted_ = false;
};

CuptiCapture* g_capture = nullptr;

void FlushAtFinish() {
  EndCuptiPmSampler();
  if (g_capture != nullptr) g_capture->FlushAtExit();
  if (g_cupti_dropped > 0) {
    g_agent->notes().Note("CUPTI dropped " + std::to_string(g_cupti_dropped) +
                          " activity records (no buffer under the memory cap)");
  }
}

}  // namespace

bool StartCuptiSource(const SourceContext& agent) {
  g_agent.Bind(agent);
  g_pool = new BufferPool();
  g_pool->Preallocate(kPreallocatedBuffers);
  g_capture = new CuptiCapture();  // lives as long as the process (callbacks at exit)
  g_capture->SetSampler(StartCuptiPmSampler(agent));
  agent.notes().SetFlushHook(FlushAtFinish);
  agent.notes().SetSource("cupti");
  SetOpCorrelation(nullptr);  // launch callbacks, not a correlation stack
  // Full mode attaches now; budgeted and flight modes at the first capture window.
  agent.capture().Start(g_capture);
  if (agent.capture().windowed()) {
    agent.notes().Log("CUPTI: %s mode, attached only in capture windows",
                      ChoiceName(agent.config().mode).data());
    return true;
  }
  if (!g_capture->attached()) agent.notes().SetSource("none");
  return g_capture->attached();
}

}  // namespace aon::agent
