// Record types: the fixed-width events that AON captures, one struct per kind.
//
// These structs are the unit of everything downstream: the agent fills them from
// CUPTI/NVTX/NCCL callbacks, the per-rank HDF5 file stores one compound dataset per
// kind whose members are exactly the fields listed in each kind's schema below, and
// the merge adds a rank column in front (Merged<T>). Rules:
//   * fixed-width fields only, no pointers; strings are ids into the file's string
//     table (0 is the empty string);
//   * timestamps are nanoseconds on the rank's host timebase (see clock fields in
//     RankMetadata): CLOCK_MONOTONIC unless the file says otherwise;
//   * every struct is trivially copyable, its size pinned by static_assert; adding
//     a field means a new minor format version and a schema entry (readers match
//     compound members by name, so older files still read).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace aon {

enum class RecordKind : uint8_t {
  kKernel = 0,
  kMemcpy,
  kMemset,
  kSync,
  kApi,
  kNvtx,
  kNccl,
  kExternalCorrelation,
  kCount,
};
inline constexpr size_t kRecordKindCount = static_cast<size_t>(RecordKind::kCount);

// Dataset names under /records, also the names used by --kinds and in drop counters.
const char* RecordKindName(RecordKind kind);
// Inverse of RecordKindName; false if `name` is not a kind.
bool ParseRecordKind(std::string_view name, RecordKind* kind);

struct KernelRecord {
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t graph_node_id;  // 0 unless launched from a CUDA graph
  uint32_t correlation_id;
  uint32_t device_id;
  uint32_t context_id;
  uint32_t stream_id;
  uint32_t name_id;  // demangled kernel name in the string table
  uint32_t graph_id;
  int32_t grid_x, grid_y, grid_z;
  int32_t block_x, block_y, block_z;
  uint32_t registers_per_thread;
  uint32_t static_shared_bytes;
  uint32_t dynamic_shared_bytes;
  uint32_t padding_;  // not stored
};
static_assert(sizeof(KernelRecord) == 88);

// Values of MemcpyRecord::copy_kind follow CUpti_ActivityMemcpyKind (1 = HtoD,
// 2 = DtoH, 8 = DtoD, 10 = PtoP, ...); src/dst kinds follow CUpti_ActivityMemoryKind
// (1 = pageable, 2 = pinned, 3 = device, ...). Documented in docs/trace-format.md.
struct MemcpyRecord {
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t bytes;
  uint32_t correlation_id;
  uint32_t device_id;
  uint32_t context_id;
  uint32_t stream_id;
  uint32_t src_device_id;  // peer copies: source and destination devices
  uint32_t dst_device_id;
  uint8_t copy_kind;
  uint8_t src_kind;
  uint8_t dst_kind;
  uint8_t flags;  // bit 0: asynchronous
  uint32_t padding_;
};
static_assert(sizeof(MemcpyRecord) == 56);

struct MemsetRecord {
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t bytes;
  uint32_t correlation_id;
  uint32_t device_id;
  uint32_t context_id;
  uint32_t stream_id;
  uint32_t value;
  uint8_t memory_kind;
  uint8_t flags;
  uint16_t padding_;
};
static_assert(sizeof(MemsetRecord) == 48);

// sync_type follows CUpti_ActivitySynchronizationType (1 event sync, 2 stream wait
// event, 3 stream sync, 4 context sync).
struct SyncRecord {
  uint64_t start_ns;
  uint64_t end_ns;
  uint32_t correlation_id;
  uint32_t context_id;
  uint32_t stream_id;  // UINT32_MAX when not stream-related
  uint32_t event_id;
  uint32_t sync_type;
  uint32_t padding_;
};
static_assert(sizeof(SyncRecord) == 40);

enum class ApiDomain : uint8_t { kRuntime = 1, kDriver = 2 };

struct ApiRecord {
  uint64_t start_ns;
  uint64_t end_ns;
  uint32_t correlation_id;
  uint32_t callback_id;  // CUPTI runtime or driver cbid
  uint32_t thread_id;    // OS thread id (gettid)
  int32_t return_value;
  uint32_t name_id;  // function name ("cudaLaunchKernel")
  uint8_t domain;    // ApiDomain
  uint8_t padding_[3];
};
static_assert(sizeof(ApiRecord) == 40);

enum class NvtxType : uint8_t { kPushPop = 1, kStartEnd = 2, kMark = 3 };

struct NvtxRecord {
  uint64_t start_ns;
  uint64_t end_ns;  // == start_ns for marks
  uint32_t thread_id;  // thread that started the range (or marked)
  uint32_t domain_id;  // domain name, 0 for the default domain
  uint32_t name_id;
  uint32_t category;
  uint32_t color;  // ARGB, 0 if none
  uint16_t depth;  // push/pop nesting depth at push, 0 = outermost
  uint8_t type;    // NvtxType
  uint8_t padding_;
};
static_assert(sizeof(NvtxRecord) == 40);

// NCCL operations, from AON's NCCL profiler plugin (format 1.1).
//   kColl / kP2p: one per operation per rank. start_ns = when NCCL began it on the
//     host (enqueue); end_ns = when its GPU work finished (last channel stop) if
//     GPU-timed, else when NCCL finished enqueuing it; gpu_start_ns = first
//     channel start, or its kernel's start (0 = not GPU-timed). NCCL numbers
//     collectives per communicator and function, so (comm_hash, func, seq_number)
//     names the same collective on every rank; p2p seq_number counts p2p ops per
//     comm, peer and direction.
//   kKernelCh: one per channel of an operation: start/end = that channel's GPU
//     work; comm_hash/seq_number/func_id are its parent's.
//   kComm: one per communicator: start = init, end = finalize, func_id = name.
// GPU times come from %globaltimer and are put on the host timebase with an
// offset measured against CUPTI's records of the same kernels (gpu_timing).
//
// CUDA graphs (format 1.3). A collective captured into a graph keeps one kColl /
// kP2p record with graph_replay 0 (tied to its capture-time launch; no GPU
// time: nothing ran); each replay of its kernel is a record of its own with
// graph_replay = 1, 2, ... in time order, the captured call's attributes and
// seq_number, and the replayed kernel's correlation id and GPU span. Rank files
// also hold the agent's bookkeeping rows below, which the merge consumes
// (nccl_resolve.h) and never writes to a timeline:
//   kGraphNode: a CUDA-graph kernel node NCCL's launch created while its stream
//     was captured (external_id = that launch's id, comm fields = its
//     communicator, count = 0), or a clone of such a node made when a graph is
//     instantiated or cloned (external_id = 0, count = the original node's id).
//     seq_number = the node's CUPTI id (cuptiGetGraphNodeId, what
//     KernelRecord::graph_node_id holds); start_ns = end_ns = when it was seen.
//   kCapturedColl / kCapturedP2p: an NCCL API call made while its stream was
//     being captured (NCCL's CollApi / P2pApi event with graphCaptured set):
//     func_id, count, bytes, datatype_id, root / peer, comm fields, external_id =
//     the launch that captured it (0 if none was seen), start_ns = the call. The
//     merge turns it into the captured operation's record when NCCL reported no
//     operation at capture (NCCL does so when the graph replays host callbacks,
//     e.g. with --nccl channels, and then reports every replay itself).
//
// NCCL API calls (format 1.3 addition: new event_type values, same columns).
// What the user called, as NCCL 2.28's GroupApi / CollApi / P2pApi profiler
// events report it; they pass through the merge untouched and are not
// operations (an operation is kColl / kP2p only). Common fields: start_ns /
// end_ns = the call on the host, comm fields = its communicator, channel_id =
// -1, seq_number = 0, external_id = 0, gpu_timing = kNone, n_warps = flags
// (kNcclApiGraphCaptured: made while its stream was being captured).
//   kGroupApi: NCCL's outermost group call, from the first NCCL call in it to
//     the end of its ncclGroupEnd (a lone ncclAllReduce is its own group); comm
//     fields = the communicator of its first call; count = NCCL's group depth
//     at that call.
//   kCollApi: one collective call (ncclAllReduce, ...) up to its enqueue:
//     func_id, count, bytes (count x datatype size), datatype_id, root.
//   kP2pApi: one ncclSend / ncclRecv call: func_id, count, bytes, datatype_id;
//     peer = -1 (NCCL 2.28's event does not name it).
// The operation a call produced starts (on the host) inside its group's span:
// NCCL starts operations when it launches them, at the group's end.
//
// NCCL proxy progress (format 1.3 addition, --nccl proxy only). Host times on
// NCCL's proxy progress thread; only network (proxy-driven) transfers have
// them: none on a single node over NVLink.
//   kProxyOp: one per channel and peer of an operation's network transfer:
//     comm_hash, seq_number, func_id, external_id = its operation's (func_id 0,
//     seq_number 0 when NCCL named no operation of this process as its parent),
//     channel_id, peer, count = network steps, bytes = bytes per step (NCCL's
//     chunk size), n_warps = flags (kNcclProxySend; else it receives).
//   kProxyStep: one network step of a kProxyOp: its op's fields, count = step
//     number, bytes = bytes the step moved (NCCL's transSize, 0 if unreported).
enum class NcclEventType : uint8_t {
  kColl = 1,
  kP2p = 2,
  kKernelCh = 3,
  kComm = 5,
  kGraphNode = 6,     // rank files only
  kCapturedColl = 7,  // rank files only
  kCapturedP2p = 8,   // rank files only
  kGroupApi = 9,
  kCollApi = 10,
  kP2pApi = 11,
  kProxyOp = 12,
  kProxyStep = 13,
};
// NcclRecord::n_warps of API rows and proxy rows: flags.
inline constexpr uint32_t kNcclApiGraphCaptured = 1;
inline constexpr uint32_t kNcclProxySend = 2;
enum class NcclGpuTiming : uint8_t {
  kNone = 0,        // no GPU times (KernelCh not captured)
  kRaw = 1,         // %globaltimer ns, not yet converted: rank files streamed by the
                    // collector hold these; the merge converts them (nccl_resolve.h)
  kCalibrated = 2,  // offset measured against CUPTI kernel records
  kAssumed = 3,     // no CUPTI pairs: %globaltimer taken as CLOCK_REALTIME
  kKernel = 4,      // no channel timing: the span of the CUPTI kernel that ran it
};

struct NcclRecord {
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t gpu_start_ns;
  uint64_t comm_hash;
  uint64_t seq_number;
  uint64_t count;
  uint64_t bytes;
  uint64_t external_id;     // AON's CUPTI external correlation id of the launch (0 none)
  uint32_t correlation_id;  // CUPTI correlation id of the NCCL kernel (0 unresolved)
  uint32_t func_id;         // "AllReduce", "Send", ...; kComm: communicator name
  uint32_t algo_id;
  uint32_t proto_id;
  uint32_t datatype_id;
  int32_t root;
  int32_t peer;
  uint32_t n_channels;
  uint32_t n_warps;
  uint32_t stream_id;  // CUPTI stream id of the kernel (with correlation_id)
  int32_t channel_id;  // kKernelCh; -1 otherwise
  int32_t comm_rank;
  int32_t comm_nranks;
  int32_t comm_nnodes;
  // 0: an operation run by its own launch, or captured into a CUDA graph;
  // 1, 2, ...: the n-th replay of a captured operation (see above).
  uint32_t graph_replay;
  uint8_t event_type;  // NcclEventType
  uint8_t gpu_timing;  // NcclGpuTiming
  uint8_t padding_[2];
};
static_assert(sizeof(NcclRecord) == 128);  // 124 bytes of fields

struct ExternalCorrelationRecord {
  uint64_t external_id;
  uint32_t correlation_id;
  uint32_t external_kind;  // CUpti_ExternalCorrelationKind
};
static_assert(sizeof(ExternalCorrelationRecord) == 16);

// ---- Schemas: which fields are stored, with names and types -------------------

enum class FieldType : uint8_t { kU8, kU16, kU32, kI32, kU64, kI64, kF64 };

struct Field {
  const char* name;
  size_t offset;
  FieldType type;
};

// A table of fixed-width records: dataset name, in-memory record size and fields.
struct TableSchema {
  std::string name;
  size_t record_size = 0;
  std::vector<Field> fields;
  // The field named `name`, or nullptr.
  const Field* Find(std::string_view field_name) const;
};

template <typename T>
struct RecordTraits;  // kind and schema of each record type (records.cc)

#define AON_DECLARE_RECORD_TRAITS_(Type, Kind)        \
  template <>                                         \
  struct RecordTraits<Type> {                         \
    static constexpr RecordKind kKind = RecordKind::Kind; \
    static const TableSchema& Schema();               \
  }
AON_DECLARE_RECORD_TRAITS_(KernelRecord, kKernel);
AON_DECLARE_RECORD_TRAITS_(MemcpyRecord, kMemcpy);
AON_DECLARE_RECORD_TRAITS_(MemsetRecord, kMemset);
AON_DECLARE_RECORD_TRAITS_(SyncRecord, kSync);
AON_DECLARE_RECORD_TRAITS_(ApiRecord, kApi);
AON_DECLARE_RECORD_TRAITS_(NvtxRecord, kNvtx);
AON_DECLARE_RECORD_TRAITS_(NcclRecord, kNccl);
AON_DECLARE_RECORD_TRAITS_(ExternalCorrelationRecord, kExternalCorrelation);
#undef AON_DECLARE_RECORD_TRAITS_

// A record of the merged cluster timeline: the rank that produced it, then the
// record itself with timestamps on the timeline's clock and ids in the unified
// string table.
template <typename T>
struct Merged {
  uint32_t rank;
  uint32_t padding_;
  T record;
};

// Schema of Merged<T>: "rank" followed by T's fields.
const TableSchema& MergedSchema(const TableSchema& base);
template <typename T>
const TableSchema& MergedSchemaOf() {
  static const TableSchema& schema = MergedSchema(RecordTraits<T>::Schema());
  return schema;
}

// Calls f(KernelRecord{}), f(MemcpyRecord{}), ... : one call per record type, for
// code that handles every kind the same way.
template <typename F>
void ForEachRecordType(F&& f) {
  f(KernelRecord{});
  f(MemcpyRecord{});
  f(MemsetRecord{});
  f(SyncRecord{});
  f(ApiRecord{});
  f(NvtxRecord{});
  f(NcclRecord{});
  f(ExternalCorrelationRecord{});
}

// Start time of any record (ExternalCorrelationRecord has none: 0).
template <typename T>
uint64_t StartOf(const T& r) {
  if constexpr (std::is_same_v<T, ExternalCorrelationRecord>) {
    return 0;
  } else {
    return r.start_ns;
  }
}

}  // namespace aon
