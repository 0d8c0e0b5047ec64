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
// correlation id the kernel record carries. Operations started on that thread
// since the previous launch are the ones this launch runs, and get its id.
// CUDA graphs are not handled yet (TODO #4): on H200 with NCCL 2.28.3, a
// captured all-reduce was reported after the capture's launch event (so a
// neighbouring operation took that launch), and with channel capture NCCL
// reported every replay itself, without a launch. Replays therefore show up as
// NCCL kernels (graph_node_id set) but not as NCCL records; see the GPU check.
#include "nccl_plugin.h"

#include <cupti.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "agent.h"
#include "aon/nccl_profiler_abi.h"
#include "aon/timebase.h"

namespace aon::agent {
namespace {

constexpr aon_nccl_result_t kOk = 0;
constexpr aon_nccl_result_t kInternalError = 3;  // ncclInternalError

// Default: operations and the kernel launch that runs them; their GPU span is
// the CUPTI record of that kernel. Per-channel timing (KernelCh) is opt-in:
// measured on 2 x H200 it made NCCL drive a proxy operation for every
// collective and cost 1.6x at 2 MiB and 3.3x at 1 MiB all-reduce.
constexpr int kCollMask = kNcclProfileColl | kNcclProfileP2p;
constexpr int kDefaultMask = kCollMask | kNcclProfileKernelLaunch;
constexpr int kChannelsMask = kDefaultMask | kNcclProfileKernelCh;

constexpr size_t kRetired = 4096;
constexpr size_t kMaxUnlaunched = 1024;

struct Comm {
  uint64_t hash;
  int rank, nranks, nnodes;
  uint32_t name_id;
  uint64_t init_ns;
  bool channels;   // KernelCh events requested
  bool launches;   // KernelLaunch events requested (v5)
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
};

std::atomic<uint64_t> g_next_external_id{1};
std::atomic<bool> g_cupti_correlation{false};

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

// Operations started on this thread and not yet given a launch.
thread_local std::vector<Operation*> t_unlaunched;
uint32_t InternCached(const char* s) {
  if (s == nullptr || *s == '\0') return 0;
  // NCCL passes pointers to its own constant strings: cache by pointer, per
  // thread, so the common path takes no lock.
  thread_local std::unordered_map<const char*, uint32_t> cache;
  auto it = cache.find(s);
  if (it != cache.end()) return it->second;
  uint32_t id = Agent::Get().sink().Intern(s, RecordKind::kNccl);
  cache.emplace(s, id);
  return id;
}

uint64_t DatatypeBytes(const char* dt) {
  if (dt == nullptr) return 0;
  static const std::pair<const char*, uint64_t> kSizes[] = {
      {"ncclInt8", 1},     {"ncclUint8", 1},    {"ncclInt32", 4},    {"ncclUint32", 4},
      {"ncclInt64", 8},    {"ncclUint64", 8},   {"ncclFloat16", 2},  {"ncclFloat32", 4},
      {"ncclFloat64", 8},  {"ncclBfloat16", 2}, {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1}};
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
  Agent::Get().sink().Push(Snapshot(op));
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
  if (comm->launches) ++refs;  // until its kernel launch claims it
  op->refs.store(refs, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(g_ops_mu);
    LiveOps().insert(op);
  }
  if (comm->launches) {
    if (t_unlaunched.size() >= kMaxUnlaunched) {
      // No launch event for a long time (not expected from NCCL): stop waiting.
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
    Agent::Get().sink().CountDropped(RecordKind::kNccl, 1);
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

void StartLaunch(void** handle) {
  auto* l = new Launch();
  l->type = kNcclProfileKernelLaunch;
  l->external_id = g_next_external_id.fetch_add(1, std::memory_order_relaxed);
  l->pushed = g_cupti_correlation.load(std::memory_order_relaxed) &&
              cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2,
                                                     l->external_id) == CUPTI_SUCCESS;
  for (Operation* op : t_unlaunched) {
    op->external_id.store(l->external_id, std::memory_order_release);
    Release(op);
  }
  t_unlaunched.clear();
  *handle = l;
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

int MaskFor(const std::string& mode) {
  if (mode == "off") return 0;
  if (mode == "coll") return kCollMask;
  if (mode == "channels") return kChannelsMask;
  return kDefaultMask;
}

aon_nccl_result_t InitCommon(void** context, int* mask, const char* name, uint64_t hash, int nnodes,
                             int nranks, int rank, bool v5) {
  if (context == nullptr) return kInternalError;
  *context = nullptr;
  Agent& agent = Agent::Get();
  if (!agent.enabled(RecordKind::kNccl) || agent.config().nccl == "off") {
    if (mask) *mask = 0;
    return kOk;  // loaded but idle: NCCL runs as without a plugin
  }
  int m = MaskFor(agent.config().nccl);
  if (!v5) m &= ~static_cast<int>(kNcclProfileKernelLaunch);  // v4 has no launch event
  if (mask) *mask = m;
  auto* comm = new Comm();
  comm->channels = (m & kNcclProfileKernelCh) != 0;
  comm->launches = (m & kNcclProfileKernelLaunch) != 0;
  comm->hash = hash;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->nnodes = nnodes;
  comm->name_id = InternCached(name);
  comm->init_ns = TimebaseNowNs();
  *context = comm;
  if (!v5) agent.Note("NCCL: profiler API v4 (NCCL 2.27): no kernel-launch correlation");
  agent.Log("NCCL communicator %016llx: rank %d of %d on %d nodes (%s)",
            static_cast<unsigned long long>(hash), rank, nranks, nnodes, name ? name : "");
  return kOk;
}

aon_nccl_result_t InitV5(void** context, uint64_t comm_id, int* mask, const char* name, int nnodes,
                         int nranks, int rank, aon_nccl_logger_t) {
  return InitCommon(context, mask, name, comm_id, nnodes, nranks, rank, true);
}

aon_nccl_result_t InitV4(void** context, int* mask, const char* name, uint64_t hash, int nnodes,
                         int nranks, int rank, aon_nccl_logger_t) {
  return InitCommon(context, mask, name, hash, nnodes, nranks, rank, false);
}

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
      return false;  // groups, API events, proxies: not recorded (no handle)
  }
}

aon_nccl_result_t StartV5(void* context, void** handle, AonNcclEventV5* e) {
  if (handle == nullptr) return kOk;
  *handle = nullptr;
  auto* comm = static_cast<Comm*>(context);
  if (comm == nullptr || e == nullptr) return kOk;  // NCCL calls on after a failed init
  if (!StartShared(comm, handle, e) && e->type == kNcclProfileKernelLaunch) StartLaunch(handle);
  return kOk;
}

aon_nccl_result_t StartV4(void* context, void** handle, AonNcclEventV4* e) {
  if (handle == nullptr) return kOk;
  *handle = nullptr;
  auto* comm = static_cast<Comm*>(context);
  if (comm == nullptr || e == nullptr) return kOk;
  StartShared(comm, handle, e);
  return kOk;
}

aon_nccl_result_t Stop(void* handle) {
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
        Agent::Get().sink().Push(r);
      }
      delete ch;
      Release(op);
      break;
    }
    case kNcclProfileKernelLaunch: {
      auto* l = static_cast<Launch*>(h);
      if (l->pushed) {
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

aon_nccl_result_t RecordState(void* handle, int state, AonNcclStateArgs* args) {
  auto* h = static_cast<Handle*>(handle);
  if (h == nullptr || args == nullptr) return kOk;
  if (h->type == kNcclProfileKernelCh && state == kNcclStateKernelChStop) {
    static_cast<Channel*>(h)->gpu_stop = args->kernel_ch.gpu_timer;
  }
  return kOk;
}

aon_nccl_result_t Finalize(void* context) {
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
  Agent::Get().sink().Push(r);
  // Operations may still hold the comm (a stop after finalize would be a NCCL
  // bug, but never a crash here): the Comm is leaked on purpose; it is small.
  return kOk;
}

}  // namespace

void EnableNcclCuptiCorrelation() { g_cupti_correlation.store(true, std::memory_order_relaxed); }

void FlushLiveNcclOperations() {
  RecordSink& sink = Agent::Get().sink();
  // Operations still waiting at exit (a channel that never reported, or the
  // process ending mid-operation): keep what is known, and say how many. Tying
  // operations to kernels and calibrating channel times happens in the merge
  // (common/include/aon/nccl_resolve.h), over the whole rank file.
  std::lock_guard<std::mutex> lock(g_ops_mu);
  size_t open = LiveOps().size();
  for (Operation* op : LiveOps()) sink.Push(Snapshot(op));
  LiveOps().clear();
  if (open > 0) {
    Agent::Get().Note("NCCL: " + std::to_string(open) +
                      " operations had not completed at exit; recorded with what was known");
  }
}

}  // namespace aon::agent

extern "C" {
__attribute__((visibility("default"))) AonNcclProfilerV5 ncclProfiler_v5 = {
    "AON", aon::agent::InitV5, aon::agent::StartV5, aon::agent::Stop, aon::agent::RecordState,
    aon::agent::Finalize};
__attribute__((visibility("default"))) AonNcclProfilerV4 ncclProfiler_v4 = {
    "AON", aon::agent::InitV4, aon::agent::StartV4, aon::agent::Stop, aon::agent::RecordState,
    aon::agent::Finalize};
}
