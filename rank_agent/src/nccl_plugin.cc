// NCCL profiler plugin: one record per collective / p2p operation per rank,
// per-channel GPU timing, and the tie to CUPTI's kernel record.
//
// Threads: NCCL calls startEvent/stopEvent for Coll/P2p and KernelLaunch on the
// user's thread (or CUDA's host-callback thread), and KernelCh events on its
// proxy progress thread, so an operation's own stop and its channels' starts
// and stops arrive in any order (a channel may start after the operation
// stopped: stop means "enqueued"). An operation therefore holds one reference
// for its stop, one per channel NCCL announced (n_channels, when channels are
// captured) and one until its launch is seen; whoever drops the last one emits
// the record. Finished operations are not freed at once but retired into a
// ring of the last kRetired, so a late or surplus channel event finds a valid
// object marked retired (and is ignored) instead of freed memory. At exit,
// operations still waiting (a channel that never reported) are emitted with
// what they have, and counted.
//
// Correlation: NCCL's KernelLaunch event brackets its cuLaunchKernelEx on the
// launching thread. We push a CUPTI external correlation id (kind CUSTOM2) there,
// so CUPTI's EXTERNAL_CORRELATION record names the driver call whose
// correlation id the kernel record carries. Which operations a launch runs:
// NCCL 2.28 (src/group.cc doLaunches, src/enqueue.cc) launches a plan's kernel
// and THEN reports its operations (hostStreamPlanTask, right after the launch,
// same thread), so an operation takes the launch of its communicator opened on
// its thread in the current group call. An operation reported before any such
// launch (the order older sequences and our ABI tests also use) waits for the
// next launch of its communicator on its thread. A group call (NCCL's GroupApi
// event, on the user's thread) closes both: operations still waiting then are
// left to the merge's nearest-launch fallback. Operations reported on a thread
// that makes no NCCL calls (CUDA's host-callback thread: NCCL reports there
// when its plan has proxy work and a host node was enqueued, always for
// graph-captured plans with --nccl channels) wait for nothing.
//
// CUDA graphs (issue #4). Under stream capture NCCL's launch creates a kernel
// node instead of running, and CUPTI's GRAPHNODE_CREATED resource callback
// reports that node on the launching thread, inside our launch bracket: we
// record (node id, launch) as an NcclGraphRecord; instantiation clones nodes under
// new ids (GRAPHNODE_CLONED: clone rows for clones of NCCL nodes). CUPTI kernel
// records of replays carry the executable graph's node id, so the merge maps a
// replayed kernel -> node -> launch -> the operations it ran, and makes one
// record per replay (nccl_resolve.h). NCCL reports a captured operation at
// capture time only when its plan has no proxy work (no host node in the
// graph); otherwise (--nccl channels, network proxies) it reports every replay
// from the host-callback thread and nothing at capture. So that the captured
// call is always known, NCCL API calls made during capture (CollApi/P2pApi
// events with graphCaptured) are recorded too (kCapturedColl/kCapturedP2p graph rows,
// tied to the launch that follows them).
//
// NCCL API calls (issue #4). NCCL 2.28 sends GroupApi (its outermost group
// call: from the first NCCL call in it to the end of ncclGroupEnd, or of the
// implicit group of a lone call), CollApi and P2pApi (one collective / p2p call)
// events whenever Coll/P2p are asked for. They start and stop on the calling
// thread, inside NCCL's own thread-local API state, so their handles are
// thread-local slots here: no allocation, and a repeated stop (NCCL 2.28.9 does
// not clear its CollApi handle after stopping it) or a stop without a start is
// ignored. Each becomes a kGroupApi / kCollApi / kP2pApi row: two clock reads and
// one ring push per call. NCCL hands these handles back as parents of later
// events (Coll's parent is the CollApi, KernelLaunch's the GroupApi): they are
// never dereferenced as such.
//
// Proxy events (--nccl proxy). ProxyOp / ProxyStep events come from NCCL's proxy
// progress thread, only for network (and other proxy-driven) transfers: none on
// a single node over NVLink. A ProxyOp names its operation as parent (in its own
// process only: the descriptor's pid says so); its fields are read at the
// ProxyOp's start, where a retired operation is still a valid object (the
// retire ring above), and copied into the row. A ProxyStep copies its ProxyOp's.
#include "nccl_plugin.h"

#include <cupti.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "aon/base/timebase.h"
#include "aon/nccl_profiler_abi.h"
#include "source_context.h"

namespace aon::agent {
namespace {

// Bound by the first communicator's init (NcclInit), before any event.
BoundContext g_agent;

constexpr aon_nccl_result_t kOk = 0;
constexpr aon_nccl_result_t kInternalError = 3;  // ncclInternalError

// Default: operations and the kernel launch that runs them; their GPU span is
// the CUPTI record of that kernel. Per-channel timing (KernelCh) is opt-in:
// measured on 2 x H200 it made NCCL drive a proxy operation for every
// collective and cost 1.6x at 2 MiB and 3.3x at 1 MiB all-reduce.
constexpr int kCollMask = kNcclProfileColl | kNcclProfileP2p;
constexpr int kDefaultMask = kCollMask | kNcclProfileKernelLaunch;
constexpr int kChannelsMask = kDefaultMask | kNcclProfileKernelCh;
// NCCL 2.28 sends the API events whenever Coll/P2p are asked for (its
// src/plugin/profiler.cc); naming them says we want them, should a later NCCL
// stop implying them. v5 only.
constexpr int kApiMask = kNcclProfileGroupApi | kNcclProfileCollApi | kNcclProfileP2pApi;
// Network proxy progress, per operation and per network step: opt-in (it fires
// per step of every network transfer).
constexpr int kProxyMask = kDefaultMask | kNcclProfileProxyOp | kNcclProfileProxyStep;

constexpr size_t kRetired = 4096;
constexpr size_t kMaxUnlaunched = 1024;
constexpr size_t kMaxCapturedCalls = 1024;

struct Comm {
  uint64_t hash;
  int rank, nranks, nnodes;
  uint32_t name_id;
  uint64_t init_ns;
  bool channels;  // KernelCh events requested
  bool launches;  // KernelLaunch events requested (v5)
  bool api;       // GroupApi/CollApi/P2pApi recorded (v5)
  bool proxy;     // ProxyOp/ProxyStep recorded
  std::mutex p2p_mu;
  std::map<std::pair<int, uint32_t>, uint64_t> p2p_seq;  // (peer, func) -> next number
};

// First member of every handle, so stopEvent/recordEventState know the type.
struct Handle {
  uint64_t type;
};

struct Operation : Handle {
  NcclRecord record;  // host start and descriptive fields filled at start
  std::atomic<int> refs{1};
  std::atomic<int> reserved_channels{0};  // announced channels not started yet
  std::atomic<bool> retired{false};
  std::atomic<uint64_t> gpu_first_start{UINT64_MAX};
  std::atomic<uint64_t> gpu_last_stop{0};
  std::atomic<uint64_t> external_id{0};
  std::atomic<uint64_t> host_stop_ns{0};
};

struct Channel : Handle {
  Operation* parent;
  int channel_id;
  uint64_t gpu_start;
  uint64_t gpu_stop = 0;
};

struct Launch : Handle {
  uint64_t external_id;
  bool pushed;
  uint64_t epoch;  // g_cupti_epoch at the push
};

// A GroupApi / CollApi / P2pApi call in progress on this thread (one slot per
// type: NCCL nests them group > call, never a type in itself).
struct ApiCall : Handle {
  NcclRecord record;
  bool open;
};

// A ProxyOp or ProxyStep: its row, filled at start, pushed at stop.
struct ProxyEvent : Handle {
  NcclRecord record;
};

std::atomic<uint64_t> g_next_external_id{1};
std::atomic<bool> g_cupti_correlation{false};
std::atomic<uint64_t> g_cupti_epoch{0};
// The process's first communicator: its collectives are the NCCL step source
// (every rank of a job calls them in the same order; docs/always-on.md).
std::atomic<const Comm*> g_first_comm{nullptr};

// Live operations (for the exit flush) and the retire ring; one lock, taken
// once at an operation's start and once at its end.
std::mutex g_ops_mu;
std::unordered_set<Operation*>& LiveOps() {
  static auto* live = new std::unordered_set<Operation*>();
  return *live;
}
std::deque<Operation*>& RetiredOps() {
  static auto* retired = new std::deque<Operation*>();
  return *retired;
}

// Per thread, for the current group call (see the file comment): operations
// reported before their launch, the launches opened (communicator -> external
// id), and API calls made under stream capture, waiting for their launch.
struct OpenLaunch {
  const Comm* comm;
  uint64_t external_id;
};
thread_local std::vector<Operation*> t_unlaunched;
thread_local std::vector<OpenLaunch> t_open;
thread_local std::vector<NcclGraphRecord> t_captured_calls;
thread_local bool t_api_thread = false;  // NCCL's GroupApi event came on this thread
thread_local bool t_capturing = false;   // ... for a call under stream capture
// The NCCL launch in progress on this thread (its bracket), for CUPTI's graph
// node callbacks; 0 when none.
thread_local uint64_t t_launch = 0;
thread_local const Comm* t_launch_comm = nullptr;
thread_local uint32_t t_nodes_in_launch = 0;
// NCCL API calls in progress on this thread (see the file comment).
thread_local ApiCall t_group_api{};
thread_local ApiCall t_coll_api{};
thread_local ApiCall t_p2p_api{};

// Diagnostics, one note at exit (how NCCL ordered its events, what graphs did).
struct Counters {
  std::atomic<uint64_t> after_launch{0};   // took the launch opened before it
  std::atomic<uint64_t> before_launch{0};  // claimed by a launch after it
  std::atomic<uint64_t> no_launch{0};      // no launch of its communicator on its thread
  std::atomic<uint64_t> captured_launches{0};
  std::atomic<uint64_t> captured_launches_without_node{0};
  std::atomic<uint64_t> graph_nodes{0};
  std::atomic<uint64_t> graph_clones{0};
  std::atomic<uint64_t> captured_calls{0};
  std::atomic<uint64_t> api_unstopped{0};    // an API call started again before its stop
  std::atomic<uint64_t> api_extra_stops{0};  // a stop of an API call already stopped
  std::atomic<uint64_t> proxy_ops{0};
  std::atomic<uint64_t> proxy_steps{0};
  std::atomic<uint64_t> proxy_orphans{0};  // ProxyOp with no operation of ours as parent
};
Counters g_count;

// Graph kernel nodes created by NCCL launches, and their clones: a clone is
// recorded only when its original is one of these.
std::mutex g_graph_mu;
std::unordered_set<uint64_t>& NcclGraphNodes() {
  static auto* nodes = new std::unordered_set<uint64_t>();
  return *nodes;
}
uint32_t InternCached(const char* s) {
  if (s == nullptr || *s == '\0') return 0;
  // NCCL passes pointers to its own constant strings: cache by pointer, per
  // thread, so the common path takes no lock.
  thread_local std::unordered_map<const char*, uint32_t> cache;
  auto it = cache.find(s);
  if (it != cache.end()) return it->second;
  uint32_t id = g_agent->sink().Intern(s, RecordKind::kNccl);
  cache.emplace(s, id);
  return id;
}

uint64_t DatatypeBytes(const char* dt) {
  if (dt == nullptr) return 0;
  static const std::pair<const char*, uint64_t> kSizes[] = {
      {"ncclInt8", 1},    {"ncclUint8", 1},    {"ncclInt32", 4},      {"ncclUint32", 4},
      {"ncclInt64", 8},   {"ncclUint64", 8},   {"ncclFloat16", 2},    {"ncclFloat32", 4},
      {"ncclFloat64", 8}, {"ncclBfloat16", 2}, {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1}};
  for (const auto& [name, size] : kSizes) {
    if (std::strcmp(dt, name) == 0) return size;
  }
  return 0;
}

NcclRecord Snapshot(const Operation* op) {
  NcclRecord r = op->record;
  uint64_t first = op->gpu_first_start.load(std::memory_order_acquire);
  uint64_t last = op->gpu_last_stop.load(std::memory_order_acquire);
  r.external_id = op->external_id.load(std::memory_order_acquire);
  if (first != UINT64_MAX && last != 0) {
    // Raw %globaltimer values: the merge converts them (nccl_resolve.h).
    r.gpu_start_ns = first;
    r.end_ns = last;
    r.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kRaw);
  } else {
    uint64_t stop = op->host_stop_ns.load(std::memory_order_acquire);
    r.end_ns = stop != 0 ? stop : r.start_ns;
    r.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kNone);
  }
  return r;
}

void Release(Operation* op) {
  if (op->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::lock_guard<std::mutex> lock(g_ops_mu);
  if (LiveOps().erase(op) == 0) return;  // already emitted by the exit flush
  g_agent->sink().Push(Snapshot(op));
  op->retired.store(true, std::memory_order_release);
  RetiredOps().push_back(op);
  if (RetiredOps().size() > kRetired) {
    delete RetiredOps().front();
    RetiredOps().pop_front();
  }
}

Operation* NewOperation(Comm* comm, uint64_t type, uint8_t n_channels) {
  auto* op = new Operation();
  op->type = type;
  NcclRecord& r = op->record;
  r.start_ns = TimebaseNowNs();
  r.comm_hash = comm->hash;
  r.channel_id = -1;
  r.root = -1;
  r.peer = -1;
  r.comm_rank = comm->rank;
  r.comm_nranks = comm->nranks;
  r.comm_nnodes = comm->nnodes;
  int refs = 1;  // the operation's own stop
  if (comm->channels) {
    op->reserved_channels.store(n_channels, std::memory_order_relaxed);
    refs += n_channels;
  }
  // Its launch: the one its communicator opened on this thread in this group
  // call (NCCL reports operations right after launching them), else the next
  // one (held by a reference until then), else none.
  bool wait = false;
  if (comm->launches) {
    for (auto it = t_open.rbegin(); it != t_open.rend(); ++it) {
      if (it->comm == comm) {
        op->external_id.store(it->external_id, std::memory_order_relaxed);
        break;
      }
    }
    if (op->external_id.load(std::memory_order_relaxed) != 0) {
      g_count.after_launch.fetch_add(1, std::memory_order_relaxed);
    } else if (t_api_thread) {
      wait = true;
      ++refs;
    } else {
      g_count.no_launch.fetch_add(1, std::memory_order_relaxed);
    }
  }
  op->refs.store(refs, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(g_ops_mu);
    LiveOps().insert(op);
  }
  if (wait) {
    if (t_unlaunched.size() >= kMaxUnlaunched) {
      // No launch event for a long time (not expected from NCCL): stop waiting.
      g_count.no_launch.fetch_add(1, std::memory_order_relaxed);
      Release(t_unlaunched.front());
      t_unlaunched.erase(t_unlaunched.begin());
    }
    t_unlaunched.push_back(op);
  }
  return op;
}

void StartColl(Comm* comm, void** handle, uint64_t seq, const char* func, size_t count, int root,
               const char* datatype, uint8_t n_channels, uint8_t n_warps, const char* algo,
               const char* proto) {
  if (comm == g_first_comm.load(std::memory_order_acquire)) {
    g_agent->capture().OnBoundary(StepSource::kNccl);
  }
  Operation* op = NewOperation(comm, kNcclProfileColl, n_channels);
  NcclRecord& r = op->record;
  r.event_type = static_cast<uint8_t>(NcclEventType::kColl);
  r.seq_number = seq;
  r.func_id = InternCached(func);
  r.count = count;
  r.bytes = count * DatatypeBytes(datatype);
  r.root = root;
  r.datatype_id = InternCached(datatype);
  r.n_channels = n_channels;
  r.n_warps = n_warps;
  r.algo_id = InternCached(algo);
  r.proto_id = InternCached(proto);
  *handle = op;
}

void StartP2p(Comm* comm, void** handle, const char* func, size_t count, int peer,
              const char* datatype, uint8_t n_channels) {
  Operation* op = NewOperation(comm, kNcclProfileP2p, n_channels);
  NcclRecord& r = op->record;
  r.event_type = static_cast<uint8_t>(NcclEventType::kP2p);
  r.func_id = InternCached(func);
  {
    // NCCL numbers collectives, not p2p: count per (peer, direction), so the
    // k-th Send to peer p on one rank pairs with the k-th Recv from it there.
    std::lock_guard<std::mutex> lock(comm->p2p_mu);
    r.seq_number = comm->p2p_seq[{peer, r.func_id}]++;
  }
  r.count = count;
  r.bytes = count * DatatypeBytes(datatype);
  r.peer = peer;
  r.datatype_id = InternCached(datatype);
  r.n_channels = n_channels;
  *handle = op;
}

void StartChannel(void** handle, void* parent, uint8_t channel_id, uint64_t gpu_start) {
  auto* p = static_cast<Handle*>(parent);
  if (p == nullptr || (p->type != kNcclProfileColl && p->type != kNcclProfileP2p)) {
    *handle = nullptr;
    return;
  }
  auto* op = static_cast<Operation*>(p);
  if (op->retired.load(std::memory_order_acquire)) {
    *handle = nullptr;  // a channel NCCL never announced, after the operation ended
    g_agent->sink().CountDropped(RecordKind::kNccl, 1);
    return;
  }
  // Announced channels already hold their reference; a surplus one takes one.
  if (op->reserved_channels.fetch_sub(1, std::memory_order_acq_rel) <= 0) {
    op->reserved_channels.fetch_add(1, std::memory_order_acq_rel);
    op->refs.fetch_add(1, std::memory_order_acq_rel);
  }
  auto* ch = new Channel();
  ch->type = kNcclProfileKernelCh;
  ch->parent = op;
  ch->channel_id = channel_id;
  ch->gpu_start = gpu_start;
  *handle = ch;
}

void StartLaunch(Comm* comm, void** handle) {
  auto* l = new Launch();
  l->type = kNcclProfileKernelLaunch;
  l->external_id = g_next_external_id.fetch_add(1, std::memory_order_relaxed);
  l->epoch = g_cupti_epoch.load(std::memory_order_acquire);
  l->pushed = g_cupti_correlation.load(std::memory_order_acquire) &&
              cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2,
                                                     l->external_id) == CUPTI_SUCCESS;
  // Operations of this communicator reported before it on this thread are its;
  // if there are none, it runs the ones reported next.
  size_t claimed = 0;
  auto keep = t_unlaunched.begin();
  for (Operation* op : t_unlaunched) {
    if (op->record.comm_hash != comm->hash) {
      *keep++ = op;
      continue;
    }
    op->external_id.store(l->external_id, std::memory_order_release);
    Release(op);
    ++claimed;
  }
  t_unlaunched.erase(keep, t_unlaunched.end());
  g_count.before_launch.fetch_add(claimed, std::memory_order_relaxed);
  if (claimed == 0) {
    std::erase_if(t_open, [comm](const OpenLaunch& o) { return o.comm == comm; });
    t_open.push_back({comm, l->external_id});
  }
  // Calls captured on this communicator are what this launch captures.
  auto call = t_captured_calls.begin();
  while (call != t_captured_calls.end()) {
    if (call->comm_hash != comm->hash) {
      ++call;
      continue;
    }
    call->external_id = l->external_id;
    g_agent->sink().Push(*call);
    call = t_captured_calls.erase(call);
  }
  if (t_capturing) g_count.captured_launches.fetch_add(1, std::memory_order_relaxed);
  t_launch = l->external_id;
  t_launch_comm = comm;
  t_nodes_in_launch = 0;
  *handle = l;
}

// NCCL's GroupApi event: a new group call on this thread. What the previous
// one left waiting gets no launch.
void StartGroupCall(bool graph_captured) {
  for (Operation* op : t_unlaunched) {
    g_count.no_launch.fetch_add(1, std::memory_order_relaxed);
    Release(op);
  }
  t_unlaunched.clear();
  for (const NcclGraphRecord& call : t_captured_calls) g_agent->sink().Push(call);
  t_captured_calls.clear();
  t_open.clear();
  t_api_thread = true;
  t_capturing = graph_captured;
}

// A CollApi / P2pApi event under stream capture: kept until its launch.
void RecordCapturedCall(Comm* comm, NcclGraphEvent event, const char* func, size_t count,
                        const char* datatype, int root) {
  NcclGraphRecord r{};
  r.time_ns = TimebaseNowNs();
  r.comm_hash = comm->hash;
  r.func_id = InternCached(func);
  r.count = count;
  r.bytes = count * DatatypeBytes(datatype);
  r.datatype_id = InternCached(datatype);
  r.root = root;
  r.comm_rank = comm->rank;
  r.comm_nranks = comm->nranks;
  r.comm_nnodes = comm->nnodes;
  r.event = static_cast<uint8_t>(event);
  if (t_captured_calls.size() >= kMaxCapturedCalls) {
    g_agent->sink().Push(t_captured_calls.front());
    t_captured_calls.erase(t_captured_calls.begin());
  }
  t_captured_calls.push_back(r);
  g_count.captured_calls.fetch_add(1, std::memory_order_relaxed);
}

// A row with a communicator's fields and nothing else (API and proxy rows).
NcclRecord CommRow(const Comm* comm, NcclEventType type) {
  NcclRecord r{};
  r.comm_hash = comm->hash;
  r.channel_id = r.root = r.peer = -1;
  r.comm_rank = comm->rank;
  r.comm_nranks = comm->nranks;
  r.comm_nnodes = comm->nnodes;
  r.event_type = static_cast<uint8_t>(type);
  r.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kNone);
  return r;
}

// NCCL's GroupApi / CollApi / P2pApi start: the call's row, in its thread slot.
NcclRecord& OpenApiCall(ApiCall& slot, uint64_t nccl_type, const Comm* comm, NcclEventType type,
                        bool graph_captured, void** handle) {
  if (slot.open) {
    // Started again without a stop (an NCCL error path): keep what was known.
    g_count.api_unstopped.fetch_add(1, std::memory_order_relaxed);
    slot.record.end_ns = slot.record.start_ns;
    g_agent->sink().Push(slot.record);
  }
  slot.type = nccl_type;
  slot.open = true;
  slot.record = CommRow(comm, type);
  slot.record.n_warps = graph_captured ? kNcclApiGraphCaptured : 0;
  slot.record.start_ns = TimebaseNowNs();
  *handle = &slot;
  return slot.record;
}

void CloseApiCall(ApiCall* slot) {
  if (!slot->open) {
    g_count.api_extra_stops.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  slot->open = false;
  slot->record.end_ns = TimebaseNowNs();
  g_agent->sink().Push(slot->record);
}

void StartGroupApi(Comm* comm, void** handle, bool graph_captured, int group_depth) {
  NcclRecord& r = OpenApiCall(t_group_api, kNcclProfileGroupApi, comm, NcclEventType::kGroupApi,
                              graph_captured, handle);
  r.count = group_depth > 0 ? static_cast<uint64_t>(group_depth) : 0;
}

void StartCallApi(Comm* comm, void** handle, NcclEventType type, const char* func, size_t count,
                  const char* datatype, int root, bool graph_captured) {
  const bool coll = type == NcclEventType::kCollApi;
  NcclRecord& r =
      OpenApiCall(coll ? t_coll_api : t_p2p_api, coll ? kNcclProfileCollApi : kNcclProfileP2pApi,
                  comm, type, graph_captured, handle);
  r.func_id = InternCached(func);
  r.count = count;
  r.bytes = count * DatatypeBytes(datatype);
  r.datatype_id = InternCached(datatype);
  r.root = root;
}

pid_t OwnPid() {
  static const pid_t pid = getpid();
  return pid;
}

// NCCL's ProxyOp start (proxy progress thread). Its parent is the operation's
// handle when the proxy runs in this process.
void StartProxyOp(Comm* comm, void** handle, const AonNcclEventV5* e) {
  auto* p = new ProxyEvent();
  p->type = kNcclProfileProxyOp;
  NcclRecord& r = p->record;
  r = CommRow(comm, NcclEventType::kProxyOp);
  auto* parent = static_cast<const Handle*>(e->parent);
  if (parent != nullptr && e->proxy_op.pid == OwnPid() &&
      (parent->type == kNcclProfileColl || parent->type == kNcclProfileP2p)) {
    // Immutable after the operation's start; a retired operation is still
    // valid memory (the retire ring).
    const auto* op = static_cast<const Operation*>(parent);
    r.comm_hash = op->record.comm_hash;
    r.seq_number = op->record.seq_number;
    r.func_id = op->record.func_id;
    r.external_id = op->external_id.load(std::memory_order_acquire);
  } else {
    g_count.proxy_orphans.fetch_add(1, std::memory_order_relaxed);
  }
  r.channel_id = e->proxy_op.channel_id;
  r.peer = e->proxy_op.peer;
  r.count = e->proxy_op.n_steps > 0 ? static_cast<uint64_t>(e->proxy_op.n_steps) : 0;
  r.bytes = e->proxy_op.chunk_size > 0 ? static_cast<uint64_t>(e->proxy_op.chunk_size) : 0;
  r.n_warps = e->proxy_op.is_send ? kNcclProxySend : 0;
  r.start_ns = TimebaseNowNs();
  *handle = p;
}

// NCCL's ProxyStep start: its parent is the ProxyOp (NCCL clears that handle
// when the ProxyOp stops, so a step never names a stopped one).
void StartProxyStep(void** handle, const AonNcclEventV5* e) {
  auto* parent = static_cast<const Handle*>(e->parent);
  if (parent == nullptr || parent->type != kNcclProfileProxyOp) return;  // no row without its op
  const NcclRecord& op = static_cast<const ProxyEvent*>(parent)->record;
  auto* p = new ProxyEvent();
  p->type = kNcclProfileProxyStep;
  NcclRecord& r = p->record;
  r = op;
  r.event_type = static_cast<uint8_t>(NcclEventType::kProxyStep);
  r.count = e->proxy_step.step > 0 ? static_cast<uint64_t>(e->proxy_step.step) : 0;
  r.bytes = 0;  // from its states (trans_size)
  r.start_ns = TimebaseNowNs();
  *handle = p;
}

// A graph node row (NcclGraphRecord, records.h).
NcclGraphRecord GraphNodeRow(NcclGraphEvent event, uint64_t node_id) {
  NcclGraphRecord r{};
  r.time_ns = TimebaseNowNs();
  r.node_id = node_id;
  r.root = -1;
  r.event = static_cast<uint8_t>(event);
  return r;
}

void UpdateMin(std::atomic<uint64_t>& a, uint64_t v) {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v, std::memory_order_acq_rel)) {
  }
}
void UpdateMax(std::atomic<uint64_t>& a, uint64_t v) {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_acq_rel)) {
  }
}

// ---- the plugin table (shared by v5 and v4) --------------------------------------

int MaskFor(NcclMode mode) {
  switch (mode) {
    case NcclMode::kOff:
      return 0;
    case NcclMode::kColl:
      return kCollMask;
    case NcclMode::kChannels:
      return kChannelsMask;
    case NcclMode::kProxy:
      return kProxyMask;
    case NcclMode::kDefault:
      break;
  }
  return kDefaultMask;
}

// API rows (ncclGroupStart..End, ncclAllReduce, ... calls): one record per
// call, in every mode but coll (operations only). Measured on 2 x H200 in one
// interleaved run, 1 MiB all-reduce: default without them 1.863 x, with them
// 1.807 x the uncaptured time (CUPTI alone 1.731 x): no cost beyond the noise.
bool RecordsApiCalls(NcclMode mode) { return mode != NcclMode::kColl; }

}  // namespace

aon_nccl_result_t NcclInit(const SourceContext& agent, void** context, int* mask, const char* name,
                           uint64_t hash, int nnodes, int nranks, int rank, bool v5) {
  if (context == nullptr) return kInternalError;
  *context = nullptr;
  if (!agent.enabled(RecordKind::kNccl) || agent.config().nccl == NcclMode::kOff) {
    if (mask) *mask = 0;
    return kOk;  // loaded but idle: NCCL runs as without a plugin
  }
  int m = MaskFor(agent.config().nccl);
  if (v5) {
    if (RecordsApiCalls(agent.config().nccl)) m |= kApiMask;
  } else {
    m &= ~static_cast<int>(kNcclProfileKernelLaunch);  // v4 has no launch or API events
  }
  if (mask) *mask = m;
  if (!g_agent.bound()) {
    g_agent.Bind(agent);
    agent.notes().AddFinishHook(FlushLiveNcclOperations);
  }
  auto* comm = new Comm();
  comm->channels = (m & kNcclProfileKernelCh) != 0;
  comm->launches = (m & kNcclProfileKernelLaunch) != 0;
  comm->api = v5 && RecordsApiCalls(agent.config().nccl);
  comm->proxy = (m & kNcclProfileProxyOp) != 0;
  comm->hash = hash;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->nnodes = nnodes;
  comm->name_id = InternCached(name);
  comm->init_ns = TimebaseNowNs();
  const Comm* none = nullptr;
  g_first_comm.compare_exchange_strong(none, comm, std::memory_order_acq_rel);
  *context = comm;
  if (!v5) agent.notes().Note("NCCL: profiler API v4 (NCCL 2.27): no kernel-launch correlation");
  agent.notes().Log("NCCL communicator %016llx: rank %d of %d on %d nodes (%s)",
                    static_cast<unsigned long long>(hash), rank, nranks, nnodes, name ? name : "");
  return kOk;
}

namespace {

// The events v4 and v5 share (their descriptors name the fields alike); true
// if `e` was one of them.
template <typename Event>
bool StartShared(Comm* comm, void** handle, const Event* e) {
  switch (e->type) {
    case kNcclProfileColl:
      StartColl(comm, handle, e->coll.seq_number, e->coll.func, e->coll.count, e->coll.root,
                e->coll.datatype, e->coll.n_channels, e->coll.n_warps, e->coll.algo, e->coll.proto);
      return true;
    case kNcclProfileP2p:
      StartP2p(comm, handle, e->p2p.func, e->p2p.count, e->p2p.peer, e->p2p.datatype,
               e->p2p.n_channels);
      return true;
    case kNcclProfileKernelCh:
      StartChannel(handle, e->parent, e->kernel_ch.channel_id, e->kernel_ch.gpu_timer);
      return true;
    default:
      return false;  // groups, API events, proxies: per version
  }
}

}  // namespace

aon_nccl_result_t NcclStartV5(void* context, void** handle, AonNcclEventV5* e) {
  if (handle == nullptr) return kOk;
  *handle = nullptr;
  auto* comm = static_cast<Comm*>(context);
  if (comm == nullptr || e == nullptr) return kOk;  // NCCL calls on after a failed init
  if (StartShared(comm, handle, e)) return kOk;
  // API events come with Coll/P2p whether asked for or not (NCCL's
  // src/plugin/profiler.cc).
  switch (e->type) {
    case kNcclProfileKernelLaunch:
      if (comm->launches) StartLaunch(comm, handle);
      break;
    case kNcclProfileGroupApi:
      if (comm->launches) StartGroupCall(e->group_api.graph_captured);
      if (comm->api) {
        StartGroupApi(comm, handle, e->group_api.graph_captured, e->group_api.group_depth);
      }
      break;
    case kNcclProfileCollApi:
      if (comm->launches && e->coll_api.graph_captured) {
        RecordCapturedCall(comm, NcclGraphEvent::kCapturedColl, e->coll_api.func, e->coll_api.count,
                           e->coll_api.datatype, e->coll_api.root);
      }
      if (comm->api) {
        StartCallApi(comm, handle, NcclEventType::kCollApi, e->coll_api.func, e->coll_api.count,
                     e->coll_api.datatype, e->coll_api.root, e->coll_api.graph_captured);
      }
      break;
    case kNcclProfileP2pApi:
      if (comm->launches && e->p2p_api.graph_captured) {
        RecordCapturedCall(comm, NcclGraphEvent::kCapturedP2p, e->p2p_api.func, e->p2p_api.count,
                           e->p2p_api.datatype, -1);
      }
      if (comm->api) {
        StartCallApi(comm, handle, NcclEventType::kP2pApi, e->p2p_api.func, e->p2p_api.count,
                     e->p2p_api.datatype, -1, e->p2p_api.graph_captured);
      }
      break;
    case kNcclProfileProxyOp:
      if (comm->proxy) StartProxyOp(comm, handle, e);
      break;
    case kNcclProfileProxyStep:
      if (comm->proxy) StartProxyStep(handle, e);
      break;
    default:
      break;
  }
  return kOk;
}

aon_nccl_result_t NcclStartV4(void* context, void** handle, AonNcclEventV4* e) {
  if (handle == nullptr) return kOk;
  *handle = nullptr;
  auto* comm = static_cast<Comm*>(context);
  if (comm == nullptr || e == nullptr) return kOk;
  StartShared(comm, handle, e);
  return kOk;
}

aon_nccl_result_t NcclStop(void* handle) {
  auto* h = static_cast<Handle*>(handle);
  if (h == nullptr) return kOk;
  switch (h->type) {
    case kNcclProfileColl:
    case kNcclProfileP2p: {
      auto* op = static_cast<Operation*>(h);
      op->host_stop_ns.store(TimebaseNowNs(), std::memory_order_release);
      Release(op);
      break;
    }
    case kNcclProfileKernelCh: {
      auto* ch = static_cast<Channel*>(h);
      Operation* op = ch->parent;
      if (ch->gpu_stop != 0 && ch->gpu_start != 0) {
        UpdateMin(op->gpu_first_start, ch->gpu_start);
        UpdateMax(op->gpu_last_stop, ch->gpu_stop);
        NcclRecord r{};
        r.start_ns = ch->gpu_start;  // raw until the merge converts it
        r.end_ns = ch->gpu_stop;
        r.comm_hash = op->record.comm_hash;
        r.seq_number = op->record.seq_number;
        r.func_id = op->record.func_id;
        r.channel_id = ch->channel_id;
        r.root = r.peer = -1;
        r.comm_rank = op->record.comm_rank;
        r.comm_nranks = op->record.comm_nranks;
        r.comm_nnodes = op->record.comm_nnodes;
        r.event_type = static_cast<uint8_t>(NcclEventType::kKernelCh);
        r.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kRaw);
        g_agent->sink().Push(r);
      }
      delete ch;
      Release(op);
      break;
    }
    case kNcclProfileGroupApi:
    case kNcclProfileCollApi:
    case kNcclProfileP2pApi:
      CloseApiCall(static_cast<ApiCall*>(h));
      break;
    case kNcclProfileProxyOp:
    case kNcclProfileProxyStep: {
      auto* p = static_cast<ProxyEvent*>(h);
      p->record.end_ns = TimebaseNowNs();
      g_agent->sink().Push(p->record);
      (h->type == kNcclProfileProxyOp ? g_count.proxy_ops : g_count.proxy_steps)
          .fetch_add(1, std::memory_order_relaxed);
      delete p;
      break;
    }
    case kNcclProfileKernelLaunch: {
      auto* l = static_cast<Launch*>(h);
      if (t_launch == l->external_id) {
        if (t_capturing && t_nodes_in_launch == 0) {
          g_count.captured_launches_without_node.fetch_add(1, std::memory_order_relaxed);
        }
        t_launch = 0;
        t_launch_comm = nullptr;
      }
      if (l->pushed && l->epoch == g_cupti_epoch.load(std::memory_order_acquire)) {
        uint64_t id = 0;
        cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, &id);
      }
      delete l;
      break;
    }
    default:
      break;
  }
  return kOk;
}

aon_nccl_result_t NcclRecordState(void* handle, int state, AonNcclStateArgs* args) {
  auto* h = static_cast<Handle*>(handle);
  if (h == nullptr || args == nullptr) return kOk;
  if (h->type == kNcclProfileKernelCh && state == kNcclStateKernelChStop) {
    static_cast<Channel*>(h)->gpu_stop = args->kernel_ch.gpu_timer;
  } else if (h->type == kNcclProfileProxyStep) {
    // Bytes this step moved, as NCCL reports it with each step state.
    NcclRecord& r = static_cast<ProxyEvent*>(h)->record;
    r.bytes = std::max<uint64_t>(r.bytes, args->proxy_step.trans_size);
  }
  return kOk;
}

aon_nccl_result_t NcclFinalize(void* context) {
  auto* comm = static_cast<Comm*>(context);
  if (comm == nullptr) return kOk;
  NcclRecord r{};
  r.start_ns = comm->init_ns;
  r.end_ns = TimebaseNowNs();
  r.comm_hash = comm->hash;
  r.func_id = comm->name_id;
  r.comm_rank = comm->rank;
  r.comm_nranks = comm->nranks;
  r.comm_nnodes = comm->nnodes;
  r.channel_id = r.root = r.peer = -1;
  r.event_type = static_cast<uint8_t>(NcclEventType::kComm);
  g_agent->sink().Push(r);
  // Operations may still hold the comm (a stop after finalize would be a NCCL
  // bug, but never a crash here): the Comm is leaked on purpose; it is small.
  return kOk;
}

void SetNcclCuptiCorrelation(bool on) {
  // Each switch is a new epoch: a launch pops only what it pushed in the epoch
  // it is still in (CUPTI may have been detached between its start and stop).
  g_cupti_epoch.fetch_add(1, std::memory_order_acq_rel);
  g_cupti_correlation.store(on, std::memory_order_release);
}

void OnGraphKernelNodeCreated(uint64_t node_id) {
  if (t_launch == 0 || t_launch_comm == nullptr) return;  // not inside an NCCL launch
  ++t_nodes_in_launch;
  {
    std::lock_guard<std::mutex> lock(g_graph_mu);
    NcclGraphNodes().insert(node_id);
  }
  NcclGraphRecord r = GraphNodeRow(NcclGraphEvent::kNodeCreated, node_id);
  r.external_id = t_launch;
  r.comm_hash = t_launch_comm->hash;
  r.comm_rank = t_launch_comm->rank;
  r.comm_nranks = t_launch_comm->nranks;
  r.comm_nnodes = t_launch_comm->nnodes;
  g_agent->sink().Push(r);
  g_count.graph_nodes.fetch_add(1, std::memory_order_relaxed);
}

void OnGraphKernelNodeCloned(uint64_t original_node_id, uint64_t clone_node_id) {
  if (original_node_id == 0 || clone_node_id == 0 || original_node_id == clone_node_id) return;
  {
    std::lock_guard<std::mutex> lock(g_graph_mu);
    auto& nodes = NcclGraphNodes();
    if (!nodes.count(original_node_id)) return;       // not an NCCL node
    if (!nodes.insert(clone_node_id).second) return;  // reported before
  }
  NcclGraphRecord r = GraphNodeRow(NcclGraphEvent::kNodeCloned, clone_node_id);
  r.original_node_id = original_node_id;
  g_agent->sink().Push(r);
  g_count.graph_clones.fetch_add(1, std::memory_order_relaxed);
}

void FlushLiveNcclOperations() {
  RecordSink& sink = g_agent->sink();
  // Operations still waiting at exit (a channel that never reported, or the
  // process ending mid-operation): keep what is known, and say how many. Tying
  // operations to kernels and calibrating channel times happens in the merge
  // (merge/include/aon/merge/nccl_resolve.h), over the whole rank file.
  for (const NcclGraphRecord& call : t_captured_calls) sink.Push(call);  // the exiting thread's
  t_captured_calls.clear();
  std::lock_guard<std::mutex> lock(g_ops_mu);
  size_t open = LiveOps().size();
  for (Operation* op : LiveOps()) sink.Push(Snapshot(op));
  LiveOps().clear();
  if (open > 0) {
    g_agent->notes().Note("NCCL: " + std::to_string(open) +
                          " operations had not completed at exit; recorded with what was known");
  }
  // What NCCL's event order and CUDA graphs looked like (for the GPU checks).
  auto n = [](const std::atomic<uint64_t>& c) {
    return std::to_string(c.load(std::memory_order_relaxed));
  };
  const Counters& c = g_count;
  if (c.before_launch.load() + c.no_launch.load() > 0 || c.captured_launches.load() > 0 ||
      c.graph_nodes.load() > 0 || c.captured_calls.load() > 0) {
    g_agent->notes().Note("NCCL launches: " + n(c.after_launch) +
                          " operations reported after their launch, " + n(c.before_launch) +
                          " before it, " + n(c.no_launch) +
                          " with no launch of their communicator on their thread");
  }
  if (c.captured_launches.load() > 0 || c.graph_nodes.load() > 0 || c.captured_calls.load() > 0) {
    g_agent->notes().Note(
        "NCCL CUDA graphs: " + n(c.captured_launches) + " NCCL launches under stream capture (" +
        n(c.captured_launches_without_node) + " with no graph kernel node reported by CUPTI), " +
        n(c.graph_nodes) + " kernel nodes created by NCCL launches, " + n(c.graph_clones) +
        " clones of them, " + n(c.captured_calls) + " NCCL calls captured");
  }
  if (c.api_unstopped.load() + c.api_extra_stops.load() > 0) {
    g_agent->notes().Note("NCCL API events: " + n(c.api_unstopped) +
                          " started again before their stop, " + n(c.api_extra_stops) +
                          " stops of a call already stopped (ignored)");
  }
  if (c.proxy_ops.load() + c.proxy_steps.load() + c.proxy_orphans.load() > 0) {
    g_agent->notes().Note("NCCL proxy: " + n(c.proxy_ops) + " proxy operations, " +
                          n(c.proxy_steps) + " proxy steps, " + n(c.proxy_orphans) +
                          " proxy operations without an operation of this process as parent");
  }
}

}  // namespace aon::agent
