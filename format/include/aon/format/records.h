// Record types: the fixed-width events that AON captures, one struct per kind.
//
// These structs are the unit of everything downstream: the agent fills them from
// CUPTI/NVTX/NCCL callbacks, the per-rank HDF5 file stores one compound dataset per
// kind whose members are exactly the fields of that kind's table below, and the
// merge adds a rank column in front (Merged<T>). Each field is declared once, in
// its kind's TableTraits, with its role (schema.h): the merge's string remapping
// and clock shifting, the collector's batches, the exports' enum names and the
// field tables of docs/trace-format.md all derive from those tables. Rules:
//   * fixed-width fields only, no pointers; strings are ids into the file's string
//     table (0 is the empty string);
//   * timestamps are nanoseconds on the rank's host timebase (see clock fields in
//     RankMetadata): CLOCK_MONOTONIC unless the file says otherwise;
//   * every struct is trivially copyable, its size pinned by static_assert; adding
//     a field means a new minor format version and an entry in its table (readers
//     match compound members by name, so older files still read).
// Adding a kind or a field, step by step: docs/adding-a-record-kind.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "aon/format/schema.h"

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
  kSteps,
  kCounters,
  kOps,
  kGraphOps,
  kHostSamples,
  kNcclGraph,
  kCount,
};
inline constexpr size_t kRecordKindCount = static_cast<size_t>(RecordKind::kCount);

// Dataset names under /records, also the names used by --kinds and in drop counters.
const char* RecordKindName(RecordKind kind);
// Inverse of RecordKindName; false if `name` is not a kind.
bool ParseRecordKind(std::string_view name, RecordKind* kind);

// Where a kind's records live.
enum class KindScope : uint8_t {
  kTimeline,  // rank files, merged timelines and exports
  kRankFile,  // rank files only: bookkeeping the merge consumes; not a --kinds choice
};
KindScope RecordKindScope(RecordKind kind);
// The kinds of timelines come first: RecordKind values below this are
// KindScope::kTimeline, the others kRankFile (checked in records.cc).
inline constexpr size_t kTimelineKindCount = 13;

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
  uint64_t end_ns;     // == start_ns for marks
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
// The NVTX domain of ranges AON's own hooks record (aon_host_range: PyTorch's
// torch.compile compilations, "torch.compile ..."), told apart from the program's.
inline constexpr const char* kAonNvtxDomain = "AON";

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
// seq_number, and the replayed kernel's correlation id and GPU span. The agent's
// bookkeeping for this (which graph nodes NCCL's launches created, their clones,
// the API calls made under capture) is a kind of its own, NcclGraphRecord below,
// which the merge consumes (nccl_resolve.h). Format 1.3 rank files held those rows
// in this table as event types 6-8; the merge still reads them (1.4 does not).
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
  // 6-8: CUDA-graph bookkeeping rows of format 1.3 rank files (now NcclGraphRecord).
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

// CUPTI's external correlation: a CUDA call made while AON had an external id
// pushed on its thread. external_kind 3 (CUSTOM0): external_id = OpRecord::op_id
// (framework ops); 5 (CUSTOM2): external_id = NcclRecord::external_id (NCCL's
// kernel launches). One call inside both gets one row of each kind.
struct ExternalCorrelationRecord {
  uint64_t external_id;
  uint32_t correlation_id;
  uint32_t external_kind;  // CUpti_ExternalCorrelationKind
};
static_assert(sizeof(ExternalCorrelationRecord) == 16);

// Steps of the application (format 1.5): one record per step of each rank, in
// every capture mode (the continuous tier: one ring push per step). A step ends
// where the next begins; `source` says what marked the boundaries, in order of
// preference (rank_agent/src/window_policy.h, StepTracker::Preference; not the
// order of the values): the application's own step calls (api), a framework's
// step hook (pytorch: AON's optimizer hook, format 1.8), an NVTX range, the
// NCCL collectives of the first communicator, time slots on the synchronized
// clock. `step` counts the source's boundaries from 0, so the
// same step has the same number on every rank. Capture windows are runs of
// steps with kStepCaptured set: CUPTI traced them (budgeted mode); the steps
// right after a window, while CUPTI detaches, have kStepWindowTail.
enum class StepSource : uint8_t {
  kNone = 0,
  kTime = 1,
  kNccl = 2,
  kNvtx = 3,
  kApi = 4,
  kPytorch = 5,  // format 1.8: preferred below kApi, above kNvtx
  kJax = 6,      // format 1.14: preferred below kPytorch, above kNvtx
  kXla = 7,      // format 1.14: preferred below kNvtx, above kNccl
};
inline constexpr uint8_t kStepCaptured = 1;    // inside a capture window
inline constexpr uint8_t kStepWindowTail = 2;  // CUPTI being switched off after a window
inline constexpr uint8_t kStepOnDemand = 4;    // the window was asked for (aon-ctl capture)
// Budgeted mode opens its first window, one step long, at this step of every
// rank: it measures what a window costs before the period is chosen.
inline constexpr uint64_t kFirstWindowStep = 10;

struct StepRecord {
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t step;
  uint64_t window_first_step;  // first step of the window it belongs to; UINT64_MAX: none
  uint32_t window;             // n-th window of this rank (1, 2, ...); 0: none
  uint32_t period;             // the capture period P in force (steps); 0: no budgeted windows
  uint8_t source;              // StepSource
  uint8_t flags;               // kStepCaptured | kStepWindowTail | kStepOnDemand
  uint8_t padding_[6];
  // CPU time of the thread that marked both of the step's boundaries, spent
  // between them (format 1.9); 0: not measured (the boundaries came from
  // different threads, or an older file).
  uint64_t thread_cpu_ns;
};
static_assert(sizeof(StepRecord) == 56);

// GPU performance counters (format 1.6): one row per metric per sampling
// interval of one GPU. `value` is the metric's average over [start_ns, end_ns]
// on the host timebase, in the unit kCounterMetricValues names. Sources:
//   kGpm: NVML GPU Performance Monitoring, read by the node collector outside
//     the application, for every GPU of the node (the rows of a node's GPUs are
//     kept in one rank file of that node: its lowest live rank). The GPU is
//     named by its UUID; /meta/devices ties ranks to GPUs by the same UUID.
//   kPmSampling: CUPTI PM sampling inside capture windows (the agent).
//   kSynthetic: the labeled synthetic GPU's node metrics (CI, no GPU: the fake NVML).
//   kSyntheticPmSampling: the labeled synthetic GPU's samples in capture windows
//     (format 1.7).
enum class CounterSource : uint8_t {
  kGpm = 1,
  kPmSampling = 2,
  kSynthetic = 3,
  kSyntheticPmSampling = 4
};
enum class CounterMetric : uint16_t {
  kGpuActive = 1,       // % of the interval with any work on the GPU (graphics/compute engine)
  kSmActive = 2,        // % of SM time with at least one warp resident
  kSmOccupancy = 3,     // % of the SMs' maximum resident warps
  kTensorActive = 4,    // % of peak: any tensor-core pipe
  kFp64Active = 5,      // % of peak: FP64 pipe (not tensor)
  kFp32Active = 6,      // % of peak: FP32 pipe
  kFp16Active = 7,      // % of peak: FP16 pipe
  kIntActive = 8,       // % of peak: integer pipe
  kDramBandwidth = 9,   // % of peak DRAM bandwidth
  kPcieTx = 10,         // MiB/s sent over PCIe
  kPcieRx = 11,         // MiB/s received over PCIe
  kNvlinkTx = 12,       // MiB/s sent over all NVLinks
  kNvlinkRx = 13,       // MiB/s received over all NVLinks
  kSmIssueActive = 14,  // % of peak: instructions issued by the SMs (PM sampling; format 1.7)
};

struct CounterRecord {
  uint64_t start_ns;
  uint64_t end_ns;
  double value;
  uint64_t gpu_uuid_hi;  // the GPU's UUID (GPU-xxxxxxxx-xxxx-...), first 8 bytes, big-endian
  uint64_t gpu_uuid_lo;  // ... last 8 bytes
  uint32_t device;       // the GPU's index on its node (NVML), or the CUDA ordinal
  uint16_t metric;       // CounterMetric
  uint8_t source;        // CounterSource
  uint8_t padding_[1];
};
static_assert(sizeof(CounterRecord) == 48);

// Framework operators (format 1.8): one record per range a framework hook
// opened and closed with aon_op_begin / aon_op_end (rank_agent/include/aon/
// capture_api.h): PyTorch's aten operators, autograd's backward operators,
// nn.Module forwards, user ranges. Recorded while CUPTI records, so only inside
// capture windows in budgeted mode; a range whose begin was recorded is
// recorded whole even when the window closes before it ends. One record per
// range, pushed at its end. Ranges nest per thread: parent_id is the innermost
// range open on the same thread at its begin (0: none recorded).
//
// Ties to GPU work: while a range is open, CUDA launches on its thread carry
// CUPTI external correlation CUSTOM0 with external id = op_id, so an
// external_correlation row {external_kind 3, external_id = op_id,
// correlation_id} names the api call and the kernel / copy / memset it issued.
// The innermost open range owns a launch.
enum class OpKind : uint8_t {
  kOperator = 0,  // AON_OP_OPERATOR: a forward (or non-autograd) operator
  kBackward = 1,  // AON_OP_BACKWARD: an operator of autograd's backward pass
  kModule = 2,    // AON_OP_MODULE: a module's forward, named by its path
  kUser = 3,      // AON_OP_USER: a user range
};
// ExternalCorrelationRecord::external_kind of AON's framework ops:
// CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 (CUpti_ExternalCorrelationKind).
inline constexpr uint32_t kOpExternalCorrelationKind = 3;

struct OpRecord {
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t op_id;             // unique in the process, > 0; the external correlation id
  uint64_t parent_id;         // innermost range open on this thread at begin; 0: top level
  int64_t sequence_nr;        // the framework's forward/backward link; -1: none
  uint32_t name_id;           // operator name, module path or range name
  uint32_t thread_id;         // OS thread id (gettid), as ApiRecord::thread_id
  uint32_t framework_thread;  // the framework's own id of the thread
  uint32_t forward_thread;    // backward ops: framework id of the forward's thread; 0 unknown
  uint8_t kind;               // OpKind
  uint8_t padding_[7];
};
static_assert(sizeof(OpRecord) == 64);

// CUDA graphs (format 1.13): a kernel node captured into a graph while a
// framework op range was open on the capturing thread, or a clone of such a
// node (graph instantiation clones every node; replays run the clones). A
// replayed kernel carries its node's id (kernels.graph_node_id) and the
// correlation id of the graph launch, shared by every kernel of the replay, so
// the op that launched it at capture is found by node: kernels.graph_node_id =
// node_id -> op_id. Clones carry the op of their original (the agent follows
// the chain), so one lookup suffices.
// A join table, like ExternalCorrelationRecord: no time of its own.
struct GraphOpRecord {
  uint64_t node_id;           // CUPTI graph node id, as KernelRecord::graph_node_id
  uint64_t op_id;             // OpRecord::op_id of the op open at capture
  uint64_t original_node_id;  // clones: the node it is a clone of; 0: created in the op
};
static_assert(sizeof(GraphOpRecord) == 24);

// Host stack samples (format 1.15): inside capture windows (all the time in
// --mode full), the application's threads are sampled on their own CPU time
// (a perf_event task clock, or a CPU-time timer where perf events are not
// allowed), so a thread that waits is never sampled and one that computes is
// sampled at the rate asked (docs/host-sampling.md). One row per sample: when,
// which thread, and its stack, interned as one string of frames, outermost
// first, separated by "\n": a Python frame is "function (file:line)", the
// native frame the thread was interrupted in is "[native] symbol (module)".
struct HostSampleRecord {
  uint64_t start_ns;        // when the thread was interrupted
  uint32_t tid;             // kernel thread id
  uint32_t stack_id;        // the stack in the string table
  uint32_t thread_name_id;  // the thread's name (/proc/self/task/TID/comm)
  uint16_t frames;          // frames in the stack
  uint8_t flags;            // kHostSample*
  uint8_t padding_[1];
};
static_assert(sizeof(HostSampleRecord) == 24);
inline constexpr uint8_t kHostSamplePython = 1;  // the thread's Python frames are in the stack
inline constexpr uint8_t kHostSampleTruncated =
    2;  // deeper than the frames kept (the outermost lost)
inline constexpr uint8_t kHostSamplePartial = 4;  // the walk stopped at a frame it could not read

// CUDA-graph bookkeeping of NCCL launches (rank files only, format 1.4):
//   kNodeCreated: a kernel node an NCCL launch created while its stream was
//     captured: node_id = the node's CUPTI id (cuptiGetGraphNodeId, what
//     KernelRecord::graph_node_id holds), external_id = that launch, comm fields
//     = its communicator; time_ns = when it was seen.
//   kNodeCloned: a clone of such a node, made when a graph is instantiated or
//     cloned: node_id = the clone, original_node_id = the node it copies.
//   kCapturedColl / kCapturedP2p: an NCCL API call made while its stream was
//     being captured (NCCL's CollApi / P2pApi event with graphCaptured set):
//     func_id, count, bytes, datatype_id, root (-1 for p2p), comm fields,
//     external_id = the launch that captured it (0 if none was seen), time_ns =
//     the call. The merge turns it into the captured operation's record when
//     NCCL reported no operation at capture (NCCL does so when the graph replays
//     host callbacks, e.g. with --nccl channels, and then reports every replay).
enum class NcclGraphEvent : uint8_t {
  kNodeCreated = 1,
  kNodeCloned = 2,
  kCapturedColl = 3,
  kCapturedP2p = 4,
};

struct NcclGraphRecord {
  uint64_t time_ns;
  uint64_t node_id;
  uint64_t original_node_id;
  uint64_t external_id;
  uint64_t comm_hash;
  uint64_t count;
  uint64_t bytes;
  uint32_t func_id;
  uint32_t datatype_id;
  int32_t root;
  int32_t comm_rank;
  int32_t comm_nranks;
  int32_t comm_nnodes;
  uint8_t event;  // NcclGraphEvent
  uint8_t padding_[7];
};
static_assert(sizeof(NcclGraphRecord) == 88);

// ---- Field tables: each kind's fields, declared once with their role ----------
// (schema.h says what roles are for and who reads them.)

inline constexpr EnumValue kCopyKindValues[] = {{1, "HtoD"}, {2, "DtoH"}, {3, "HtoA"}, {4, "AtoH"},
                                                {5, "AtoA"}, {6, "AtoD"}, {7, "DtoA"}, {8, "DtoD"},
                                                {9, "HtoH"}, {10, "PtoP"}};
inline constexpr EnumValue kMemoryKindValues[] = {
    {0, "unknown"}, {1, "pageable"}, {2, "pinned"},        {3, "device"},
    {4, "array"},   {5, "managed"},  {6, "device static"}, {7, "managed static"}};
inline constexpr EnumValue kAsyncFlagValues[] = {{1, "async"}};
inline constexpr EnumValue kSyncTypeValues[] = {
    {1, "event"}, {2, "stream wait event"}, {3, "stream"}, {4, "context"}};
inline constexpr EnumValue kApiDomainValues[] = {{1, "runtime"}, {2, "driver"}};
inline constexpr EnumValue kNvtxTypeValues[] = {{1, "push/pop"}, {2, "start/end"}, {3, "mark"}};
inline constexpr EnumValue kNcclEventTypeValues[] = {
    {1, "coll"},      {2, "p2p"},      {3, "kernel channel"}, {5, "comm"},       {9, "group api"},
    {10, "coll api"}, {11, "p2p api"}, {12, "proxy op"},      {13, "proxy step"}};
inline constexpr EnumValue kNcclGpuTimingValues[] = {
    {0, "none"}, {1, "raw"}, {2, "calibrated"}, {3, "assumed"}, {4, "kernel"}};
inline constexpr EnumValue kStepSourceValues[] = {{0, "none"}, {1, "time slot"}, {2, "nccl"},
                                                  {3, "nvtx"}, {4, "api"},       {5, "pytorch"},
                                                  {6, "jax"},  {7, "xla"}};
inline constexpr EnumValue kHostSampleFlagValues[] = {{kHostSamplePython, "python"},
                                                      {kHostSampleTruncated, "truncated"},
                                                      {kHostSamplePartial, "partial"}};
inline constexpr EnumValue kStepFlagValues[] = {
    {kStepCaptured, "captured"}, {kStepWindowTail, "window tail"}, {kStepOnDemand, "on demand"}};
inline constexpr EnumValue kCounterSourceValues[] = {
    {1, "gpm"}, {2, "pm sampling"}, {3, "synthetic"}, {4, "synthetic pm sampling"}};
// Metric names with their unit: the name is what reports, exports and h5py
// readers show (aon-inspect --schema prints this table).
inline constexpr EnumValue kCounterMetricValues[] = {
    {1, "gpu_active_pct"},       {2, "sm_active_pct"},       {3, "sm_occupancy_pct"},
    {4, "tensor_active_pct"},    {5, "fp64_active_pct"},     {6, "fp32_active_pct"},
    {7, "fp16_active_pct"},      {8, "int_active_pct"},      {9, "dram_bandwidth_pct"},
    {10, "pcie_tx_mib_per_s"},   {11, "pcie_rx_mib_per_s"},  {12, "nvlink_tx_mib_per_s"},
    {13, "nvlink_rx_mib_per_s"}, {14, "sm_issue_active_pct"}};
// The CUpti_ExternalCorrelationKind values AON pushes (others are another tool's).
inline constexpr EnumValue kExternalKindValues[] = {{3, "framework op (CUSTOM0)"},
                                                    {5, "NCCL launch (CUSTOM2)"}};
inline constexpr EnumValue kOpKindValues[] = {
    {0, "operator"}, {1, "backward"}, {2, "module"}, {3, "user"}};
inline constexpr EnumValue kNcclGraphEventValues[] = {
    {1, "node created"}, {2, "node cloned"}, {3, "captured coll"}, {4, "captured p2p"}};

template <>
struct TableTraits<KernelRecord> {
  using T = KernelRecord;
  static constexpr RecordKind kKind = RecordKind::kKernel;
  static constexpr const char* kName = "kernels";
  static constexpr KindScope kScope = KindScope::kTimeline;
  static constexpr const char* kDoc = "One per kernel execution (CUPTI CONCURRENT_KERNEL)";
  static constexpr Field kFields[] = {
      AON_FIELD(T, start_ns, kStart, "GPU start"),
      AON_FIELD(T, end_ns, kEnd, "GPU end"),
      AON_FIELD(T, graph_node_id, kId, "CUPTI graph node id, 0 unless launched from a CUDA graph")
          .None(0),
      AON_FIELD(T, correlation_id, kId,
                "CUPTI correlation id, shared with its launch's api record"),
      AON_FIELD(T, device_id, kId, "CUDA device ordinal"),
      AON_FIELD(T, context_id, kId, "CUDA context id"),
      AON_FIELD(T, stream_id, kId, "CUPTI stream id"),
      AON_FIELD(T, name_id, kStringId, "demangled kernel name"),
      AON_FIELD(T, graph_id, kId, "CUDA graph id, 0 unless launched from a CUDA graph").None(0),
      AON_FIELD(T, grid_x, kQuantity, "grid size x"),
      AON_FIELD(T, grid_y, kQuantity, "grid size y"),
      AON_FIELD(T, grid_z, kQuantity, "grid size z"),
      AON_FIELD(T, block_x, kQuantity, "block size x"),
      AON_FIELD(T, block_y, kQuantity, "block size y"),
      AON_FIELD(T, block_z, kQuantity, "block size z"),
      AON_FIELD(T, registers_per_thread, kQuantity, "registers per thread"),
      AON_FIELD(T, static_shared_bytes, kQuantity, "static shared memory per block"),
      AON_FIELD(T, dynamic_shared_bytes, kQuantity, "dynamic shared memory per block"),
      AON_PADDING(T, padding_)};
};

template <>
struct TableTraits<MemcpyRecord> {
  using T = MemcpyRecord;
  static constexpr RecordKind kKind = RecordKind::kMemcpy;
  static constexpr const char* kName = "memcpy";
  static constexpr KindScope kScope = KindScope::kTimeline;
  static constexpr const char* kDoc = "One per memory copy";
  static constexpr Field kFields[] = {
      AON_FIELD(T, start_ns, kStart, "copy start"),
      AON_FIELD(T, end_ns, kEnd, "copy end"),
      AON_FIELD(T, bytes, kQuantity, "bytes copied"),
      AON_FIELD(T, correlation_id, kId, "CUPTI correlation id"),
      AON_FIELD(T, device_id, kId, "CUDA device ordinal"),
      AON_FIELD(T, context_id, kId, "CUDA context id"),
      AON_FIELD(T, stream_id, kId, "CUPTI stream id"),
      AON_FIELD(T, src_device_id, kId, "source device (peer copies)"),
      AON_FIELD(T, dst_device_id, kId, "destination device (peer copies)"),
      AON_FIELD(T, copy_kind, kEnum, "direction (CUpti_ActivityMemcpyKind)", kCopyKindValues),
      AON_FIELD(T, src_kind, kEnum, "source memory (CUpti_ActivityMemoryKind)", kMemoryKindValues),
      AON_FIELD(T, dst_kind, kEnum, "destination memory (CUpti_ActivityMemoryKind)",
                kMemoryKindValues),
      AON_FIELD(T, flags, kFlags, "bit 0: asynchronous", kAsyncFlagValues),
      AON_PADDING(T, padding_)};
};

template <>
struct TableTraits<MemsetRecord> {
  using T = MemsetRecord;
  static constexpr RecordKind kKind = RecordKind::kMemset;
  static constexpr const char* kName = "memset";
  static constexpr KindScope kScope = KindScope::kTimeline;
  static constexpr const char* kDoc = "One per memset";
  static constexpr Field kFields[] = {
      AON_FIELD(T, start_ns, kStart, "memset start"),
      AON_FIELD(T, end_ns, kEnd, "memset end"),
      AON_FIELD(T, bytes, kQuantity, "bytes set"),
      AON_FIELD(T, correlation_id, kId, "CUPTI correlation id"),
      AON_FIELD(T, device_id, kId, "CUDA device ordinal"),
      AON_FIELD(T, context_id, kId, "CUDA context id"),
      AON_FIELD(T, stream_id, kId, "CUPTI stream id"),
      AON_FIELD(T, value, kQuantity, "value written"),
      AON_FIELD(T, memory_kind, kEnum, "memory set (CUpti_ActivityMemoryKind)", kMemoryKindValues),
      AON_FIELD(T, flags, kFlags, "bit 0: asynchronous", kAsyncFlagValues),
      AON_PADDING(T, padding_)};
};

template <>
struct TableTraits<SyncRecord> {
  using T = SyncRecord;
  static constexpr RecordKind kKind = RecordKind::kSync;
  static constexpr const char* kName = "sync";
  static constexpr KindScope kScope = KindScope::kTimeline;
  static constexpr const char* kDoc = "One per synchronization the host waited in";
  static constexpr Field kFields[] = {
      AON_FIELD(T, start_ns, kStart, "wait start"),
      AON_FIELD(T, end_ns, kEnd, "wait end"),
      AON_FIELD(T, correlation_id, kId, "CUPTI correlation id"),
      AON_FIELD(T, context_id, kId, "CUDA context id"),
      AON_FIELD(T, stream_id, kId, "CUPTI stream id, UINT32_MAX when not stream-related")
          .NoneBits(UINT32_MAX),
      AON_FIELD(T, event_id, kId, "CUDA event id"),
      AON_FIELD(T, sync_type, kEnum, "what was waited for (CUpti_ActivitySynchronizationType)",
                kSyncTypeValues),
      AON_PADDING(T, padding_)};
};

template <>
struct TableTraits<ApiRecord> {
  using T = ApiRecord;
  static constexpr RecordKind kKind = RecordKind::kApi;
  static constexpr const char* kName = "api";
  static constexpr KindScope kScope = KindScope::kTimeline;
  static constexpr const char* kDoc = "One per recorded CUDA runtime or driver call";
  static constexpr Field kFields[] = {
      AON_FIELD(T, start_ns, kStart, "call entry"),
      AON_FIELD(T, end_ns, kEnd, "call exit"),
      AON_FIELD(T, correlation_id, kId, "CUPTI correlation id, shared with the GPU work it issued"),
      AON_FIELD(T, callback_id, kId, "CUPTI runtime or driver callback id"),
      AON_FIELD(T, thread_id, kId, "OS thread id (gettid)"),
      AON_FIELD(T, return_value, kQuantity, "the call's return code"),
      AON_FIELD(T, name_id, kStringId, "function name (cudaLaunchKernel)"),
      AON_FIELD(T, domain, kEnum, "runtime or driver API", kApiDomainValues),
      AON_PADDING(T, padding_)};
};

template <>
struct TableTraits<NvtxRecord> {
  using T = NvtxRecord;
  static constexpr RecordKind kKind = RecordKind::kNvtx;
  static constexpr const char* kName = "nvtx";
  static constexpr KindScope kScope = KindScope::kTimeline;
  static constexpr const char* kDoc = "One per NVTX range or mark";
  static constexpr Field kFields[] = {
      AON_FIELD(T, start_ns, kStart, "range start, or the mark"),
      AON_FIELD(T, end_ns, kEnd, "range end (== start_ns for marks)"),
      AON_FIELD(T, thread_id, kId, "thread that started the range (or marked)"),
      AON_FIELD(T, domain_id, kStringId, "NVTX domain name, 0 for the default domain"),
      AON_FIELD(T, name_id, kStringId, "range or mark name"),
      AON_FIELD(T, category, kId, "NVTX category"),
      AON_FIELD(T, color, kQuantity, "ARGB, 0 if none").None(0),
      AON_FIELD(T, depth, kQuantity, "push/pop nesting depth at push, 0 = outermost"),
      AON_FIELD(T, type, kEnum, "kind of range", kNvtxTypeValues),
      AON_PADDING(T, padding_)};
};

template <>
struct TableTraits<NcclRecord> {
  using T = NcclRecord;
  static constexpr RecordKind kKind = RecordKind::kNccl;
  static constexpr const char* kName = "nccl";
  static constexpr KindScope kScope = KindScope::kTimeline;
  static constexpr const char* kDoc =
      "NCCL operations, channels, communicators, API calls and proxy progress (event_type)";
  static constexpr Field kFields[] = {
      AON_FIELD(T, start_ns, kStart, "host start (event_type says of what)"),
      AON_FIELD(T, end_ns, kEnd, "end: GPU end for GPU-timed operations, else host end"),
      AON_FIELD(T, gpu_start_ns, kTime, "GPU start of an operation, 0 = not GPU-timed").None(0),
      AON_FIELD(T, comm_hash, kId, "communicator"),
      AON_FIELD(T, seq_number, kId, "NCCL's sequence number per communicator and function"),
      AON_FIELD(T, count, kQuantity, "elements (proxy rows: steps or step number; group: depth)"),
      AON_FIELD(T, bytes, kQuantity, "bytes (proxy rows: per step)"),
      AON_FIELD(T, external_id, kId, "AON's external correlation id of the launch, 0 = none")
          .None(0),
      AON_FIELD(T, correlation_id, kId, "CUPTI correlation id of the kernel that ran it"),
      AON_FIELD(T, func_id, kStringId, "function (AllReduce, Send, ...); comm rows: its name"),
      AON_FIELD(T, algo_id, kStringId, "algorithm"),
      AON_FIELD(T, proto_id, kStringId, "protocol"),
      AON_FIELD(T, datatype_id, kStringId, "data type"),
      AON_FIELD(T, root, kId, "root rank, -1 = none").None(-1),
      AON_FIELD(T, peer, kId, "peer rank of point-to-point, -1 = none").None(-1),
      AON_FIELD(T, n_channels, kQuantity, "channels used"),
      AON_FIELD(T, n_warps, kQuantity, "warps per channel (API and proxy rows: flags)"),
      AON_FIELD(T, stream_id, kId, "CUPTI stream id of its kernel"),
      AON_FIELD(T, channel_id, kId, "channel of a kernel-channel row, -1 otherwise").None(-1),
      AON_FIELD(T, comm_rank, kId, "rank in the communicator"),
      AON_FIELD(T, comm_nranks, kQuantity, "ranks in the communicator"),
      AON_FIELD(T, comm_nnodes, kQuantity, "nodes in the communicator"),
      AON_FIELD(T, graph_replay, kQuantity, "0, or the n-th replay of a CUDA-graph capture"),
      AON_FIELD(T, event_type, kEnum, "what the row is", kNcclEventTypeValues),
      AON_FIELD(T, gpu_timing, kEnum, "where its GPU times come from", kNcclGpuTimingValues),
      AON_PADDING(T, padding_)};
};

template <>
struct TableTraits<ExternalCorrelationRecord> {
  using T = ExternalCorrelationRecord;
  static constexpr RecordKind kKind = RecordKind::kExternalCorrelation;
  static constexpr const char* kName = "external_correlation";
  static constexpr KindScope kScope = KindScope::kTimeline;
  static constexpr const char* kDoc =
      "Ties an external id (AON's framework ops, its NCCL launches) to a CUPTI correlation";
  static constexpr Field kFields[] = {
      AON_FIELD(T, external_id, kId, "external id: ops.op_id (kind 3), nccl.external_id (kind 5)"),
      AON_FIELD(T, correlation_id, kId, "CUPTI correlation id"),
      AON_FIELD(T, external_kind, kEnum, "CUpti_ExternalCorrelationKind", kExternalKindValues)};
};

template <>
struct TableTraits<StepRecord> {
  using T = StepRecord;
  static constexpr RecordKind kKind = RecordKind::kSteps;
  static constexpr const char* kName = "steps";
  static constexpr KindScope kScope = KindScope::kTimeline;
  static constexpr const char* kDoc =
      "One per step of the application, in every mode; capture windows are runs of captured steps";
  static constexpr int kSinceMinor = 5;
  static constexpr Field kFields[] = {
      AON_FIELD(T, start_ns, kStart, "step boundary: the step began"),
      AON_FIELD(T, end_ns, kEnd, "the next boundary: the step ended"),
      AON_FIELD(T, step, kId, "step number, counted from 0 by its source: equal on every rank"),
      AON_FIELD(T, window_first_step, kId,
                "first step of the capture window it belongs to (UINT64_MAX: none)")
          .NoneBits(UINT64_MAX),
      AON_FIELD(T, window, kId, "n-th capture window of this rank, 0: none").None(0),
      AON_FIELD(T, period, kQuantity, "capture period in force (steps), 0: no budgeted windows")
          .None(0),
      AON_FIELD(T, source, kEnum, "what marked the step boundaries", kStepSourceValues),
      AON_FIELD(T, flags, kFlags, "capture state of the step", kStepFlagValues),
      AON_PADDING(T, padding_),
      AON_FIELD(T, thread_cpu_ns, kQuantity,
                "CPU time of the thread that marked both boundaries, between them (1.9; 0: not "
                "measured)")
          .None(0)};
};

template <>
struct TableTraits<CounterRecord> {
  using T = CounterRecord;
  static constexpr RecordKind kKind = RecordKind::kCounters;
  static constexpr const char* kName = "counters";
  static constexpr KindScope kScope = KindScope::kTimeline;
  static constexpr const char* kDoc =
      "GPU performance counters: a metric's average over one sampling interval of one GPU";
  static constexpr int kSinceMinor = 6;
  static constexpr Field kFields[] = {
      AON_FIELD(T, start_ns, kStart, "the interval the value is averaged over: its start"),
      AON_FIELD(T, end_ns, kEnd, "... and its end"),
      AON_FIELD(T, value, kQuantity, "the metric's value, in the unit its name ends with"),
      AON_FIELD(T, gpu_uuid_hi, kId, "GPU UUID, bytes 0-7 (big-endian)"),
      AON_FIELD(T, gpu_uuid_lo, kId, "GPU UUID, bytes 8-15"),
      AON_FIELD(T, device, kId, "GPU index on the node (gpm), or CUDA device ordinal"),
      AON_FIELD(T, metric, kEnum, "what was measured (name_unit)", kCounterMetricValues),
      AON_FIELD(T, source, kEnum, "who measured it", kCounterSourceValues),
      AON_PADDING(T, padding_)};
};

template <>
struct TableTraits<OpRecord> {
  using T = OpRecord;
  static constexpr RecordKind kKind = RecordKind::kOps;
  static constexpr const char* kName = "ops";
  static constexpr KindScope kScope = KindScope::kTimeline;
  static constexpr const char* kDoc =
      "One per framework operator, module or user range (aon_op_begin / aon_op_end)";
  static constexpr int kSinceMinor = 8;
  static constexpr Field kFields[] = {
      AON_FIELD(T, start_ns, kStart, "aon_op_begin"),
      AON_FIELD(T, end_ns, kEnd, "aon_op_end"),
      AON_FIELD(T, op_id, kId,
                "unique in the process; external_correlation.external_id (external_kind 3)"),
      AON_FIELD(T, parent_id, kId, "op_id of the innermost range open on its thread, 0 = none")
          .None(0),
      AON_FIELD(T, sequence_nr, kId,
                "framework sequence number linking backward to forward, -1 = none")
          .None(-1),
      AON_FIELD(T, name_id, kStringId, "operator name, module path or range name"),
      AON_FIELD(T, thread_id, kId, "OS thread id (gettid), as api.thread_id"),
      AON_FIELD(T, framework_thread, kId, "the framework's id of its thread"),
      AON_FIELD(T, forward_thread, kId,
                "backward ops: framework id of the thread that ran the forward, 0 = unknown")
          .None(0),
      AON_FIELD(T, kind, kEnum, "what the range is", kOpKindValues),
      AON_PADDING(T, padding_)};
};

template <>
struct TableTraits<GraphOpRecord> {
  using T = GraphOpRecord;
  static constexpr RecordKind kKind = RecordKind::kGraphOps;
  static constexpr const char* kName = "graph_ops";
  static constexpr KindScope kScope = KindScope::kTimeline;
  static constexpr const char* kDoc =
      "CUDA-graph kernel nodes captured inside a framework op, and their clones (recorded with "
      "ops)";
  static constexpr int kSinceMinor = 13;
  static constexpr Field kFields[] = {
      AON_FIELD(T, node_id, kId, "CUPTI graph node id, as kernels.graph_node_id"),
      AON_FIELD(T, op_id, kId, "ops.op_id of the op open on the capturing thread"),
      AON_FIELD(T, original_node_id, kId,
                "clones: the node it is a clone of; 0 = none (a node created, not cloned)")
          .None(0)};
};

template <>
struct TableTraits<HostSampleRecord> {
  using T = HostSampleRecord;
  static constexpr RecordKind kKind = RecordKind::kHostSamples;
  static constexpr const char* kName = "host_samples";
  static constexpr KindScope kScope = KindScope::kTimeline;
  static constexpr const char* kDoc =
      "Stacks of the application's threads sampled on their CPU time in capture windows";
  static constexpr int kSinceMinor = 15;
  static constexpr Field kFields[] = {
      AON_FIELD(T, start_ns, kStart, "when the thread was interrupted"),
      AON_FIELD(T, tid, kId, "kernel thread id"),
      AON_FIELD(T, stack_id, kStringId,
                "frames, outermost first, one per line: function (file:line), [native] symbol "
                "(module)"),
      AON_FIELD(T, thread_name_id, kStringId, "the thread's name"),
      AON_FIELD(T, frames, kQuantity, "frames in the stack"),
      AON_FIELD(T, flags, kFlags, "what the stack holds", kHostSampleFlagValues),
      AON_PADDING(T, padding_)};
};

template <>
struct TableTraits<NcclGraphRecord> {
  using T = NcclGraphRecord;
  static constexpr RecordKind kKind = RecordKind::kNcclGraph;
  static constexpr const char* kName = "nccl_graph";
  static constexpr KindScope kScope = KindScope::kRankFile;
  static constexpr const char* kDoc =
      "Rank files only: CUDA-graph bookkeeping of NCCL launches, consumed by the merge";
  static constexpr int kSinceMinor = 4;
  static constexpr Field kFields[] = {
      AON_FIELD(T, time_ns, kStart, "when the agent saw the node, or the captured call"),
      AON_FIELD(T, node_id, kId, "node events: CUPTI graph node id (as kernels.graph_node_id)"),
      AON_FIELD(T, original_node_id, kId, "node cloned: the node it is a clone of"),
      AON_FIELD(T, external_id, kId, "the NCCL launch that created the node or captured the call"),
      AON_FIELD(T, comm_hash, kId, "communicator (node created, captured calls)"),
      AON_FIELD(T, count, kQuantity, "captured calls: elements"),
      AON_FIELD(T, bytes, kQuantity, "captured calls: bytes"),
      AON_FIELD(T, func_id, kStringId, "captured calls: function"),
      AON_FIELD(T, datatype_id, kStringId, "captured calls: data type"),
      AON_FIELD(T, root, kId, "captured collectives: root rank, -1 = none").None(-1),
      AON_FIELD(T, comm_rank, kId, "rank in the communicator"),
      AON_FIELD(T, comm_nranks, kQuantity, "ranks in the communicator"),
      AON_FIELD(T, comm_nnodes, kQuantity, "nodes in the communicator"),
      AON_FIELD(T, event, kEnum, "what the row is", kNcclGraphEventValues),
      AON_PADDING(T, padding_)};
};

// Every record type, in RecordKind order. Adding a kind: docs/adding-a-record-kind.md.
template <typename... Ts>
struct TypeList {};
using RecordTypes =
    TypeList<KernelRecord, MemcpyRecord, MemsetRecord, SyncRecord, ApiRecord, NvtxRecord,
             NcclRecord, ExternalCorrelationRecord, StepRecord, CounterRecord, OpRecord,
             GraphOpRecord, HostSampleRecord, NcclGraphRecord>;

// Join tables: timeline kinds whose rows tie records of other kinds together
// and have no span of their own (external_correlation, graph_ops). Exports show
// what they join, not the rows.
template <typename T>
inline constexpr bool kJoinTable =
    std::is_same_v<T, ExternalCorrelationRecord> || std::is_same_v<T, GraphOpRecord>;

template <typename T>
concept RecordType = StoredTable<T> && requires {
  TableTraits<T>::kKind;
};

// std::tuple<std::vector<KernelRecord>, ...>: one vector per record type.
template <typename L>
struct RecordVectorsOf;
template <typename... Ts>
struct RecordVectorsOf<TypeList<Ts...>> {
  using type = std::tuple<std::vector<Ts>...>;
};
using RecordVectors = RecordVectorsOf<RecordTypes>::type;

// A record kind's traits: its table's (kKind, kName, kScope, kFields), plus its
// run-time schema.
template <RecordType T>
struct RecordTraits : TableTraits<T> {
  static const TableSchema& Schema() { return SchemaOf<T>(); }
};

namespace records_internal {
template <typename... Ts>
constexpr bool KindsInOrder(TypeList<Ts...>) {
  size_t i = 0;
  return ((static_cast<size_t>(TableTraits<Ts>::kKind) == i++) && ...) && i == kRecordKindCount;
}
static_assert(KindsInOrder(RecordTypes{}), "RecordTypes must list every RecordKind in order");
}  // namespace records_internal

// The format minor version that introduced a kind (0: there from 1.0); older
// files lack its table.
template <RecordType T>
constexpr int KindSinceMinor() {
  if constexpr (requires { TableTraits<T>::kSinceMinor; }) {
    return TableTraits<T>::kSinceMinor;
  } else {
    return 0;
  }
}

// Calls f(KernelRecord{}), f(MemcpyRecord{}), ... : one call per record kind that
// timelines, exports and readers know (KindScope::kTimeline), for code that
// handles every such kind the same way.
template <typename F>
void ForEachRecordType(F&& f) {
  [&]<typename... Ts>(TypeList<Ts...>) {
    (
        [&] {
          if constexpr (TableTraits<Ts>::kScope == KindScope::kTimeline) f(Ts{});
        }(),
        ...);
  }(RecordTypes{});
}
// Every kind a rank file can hold, bookkeeping kinds included: for the agent,
// the ring, the collector and the merge's reading of rank files.
template <typename F>
void ForEachRankFileRecordType(F&& f) {
  [&]<typename... Ts>(TypeList<Ts...>) { (f(Ts{}), ...); }(RecordTypes{});
}

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
  static const TableSchema& schema = MergedSchema(SchemaOf<T>());
  return schema;
}

}  // namespace aon
