// aon::report: post-mortem analyses of a merged cluster timeline (timeline.h5) and
// their renderings (terminal summary, self-contained HTML, JSON).
//
// Shape: LoadTimeline() reads the timeline into a Timeline (records of every kind,
// strings, per-rank table); Analyze() runs every analysis (one per file in
// report/src/analyses/) over it, then the finding rules (aon/report/finding_rules.h),
// which rank the findings by estimated time to gain; the Render* functions only
// format a Report. Each analysis is also callable on its own (tests do).
//
// Conventions:
//   * times are ns on the timeline clock (each host's CLOCK_MONOTONIC unless the
//     timeline says it is synchronized); per-rank values are indexed by rank;
//   * "GPU busy" = union of kernels, copies and memsets over all streams of a rank;
//     a rank's span runs from its first to its last GPU operation;
//   * collectives come from NCCL coll records (event_type 1, matched across ranks by
//     comm_hash + seq_number) when present, otherwise from NCCL kernels matched by
//     order (the k-th NCCL kernel of one name on each rank is one collective).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "aon/base/gpu_uuid.h"
#include "aon/base/status.h"
#include "aon/format/framework_ranges.h"
#include "aon/format/records.h"
#include "aon/format/string_table.h"
#include "aon/format/trace_format.h"

namespace aon::report {

struct RankInfo {
  uint32_t rank = 0;
  std::string host;
  RankStatus status = RankStatus::kOk;
  std::string message;  // why not ok
  bool listed = false;  // present in /meta/ranks
  // How the rank captured and what it cost (RankSummary's capture fields; format
  // 1.5, unknown in older timelines). docs/always-on.md.
  CaptureMode capture_mode = CaptureMode::kUnknown;
  uint64_t steps = 0, captured_steps = 0;
  uint32_t windows = 0, capture_period = 0;
  double overhead_budget = 0;    // fraction
  double window_step_ratio = 0;  // 0: not measured
  double amortized_cost = -1;    // fraction of step time; -1: not measured
  uint32_t local_rank = 0;       // rank on its node (/meta/ranks)
  // What the rank lost: all records (RankSummary::dropped), and per RecordKind
  // from /meta/drops (1.11; `drops_by_kind` false in older timelines): dropped,
  // and of those unwritten (received by the collector, not written: disk).
  uint64_t dropped_total = 0;
  bool drops_by_kind = false;
  // The node collector exited while the rank ran (kRankCollectorLost): `message`
  // says what the merge joined and what lies between unrecorded.
  bool collector_lost = false;
  // Capture was disabled (kRankCaptureDisabled): `message` says why.
  bool capture_disabled = false;
  std::array<uint64_t, kRecordKindCount> dropped{}, unwritten{};
  // Per kind: records in its file the merge could not read (1.12).
  std::array<uint64_t, kRecordKindCount> damaged{};
};

struct Timeline {
  std::string path;
  std::string job_id;
  std::string source;  // "cupti", "synthetic", ...
  std::string clock_note;
  bool clock_synchronized = false;
  uint32_t world_size = 0;      // max(world_size attribute, highest rank + 1)
  std::vector<RankInfo> ranks;  // one per rank 0..world_size-1
  std::vector<std::string> problems;
  // Flight-recorder dumps (timeline attribute capture_events, 1.16): "rank R:
  // flight recorder dump N: <reason>: M records (the last S s)".
  std::vector<std::string> capture_events;
  StringTable strings;
  std::vector<Merged<KernelRecord>> kernels;
  std::vector<Merged<MemcpyRecord>> memcpys;
  std::vector<Merged<MemsetRecord>> memsets;
  std::vector<Merged<SyncRecord>> syncs;
  std::vector<Merged<ApiRecord>> apis;
  std::vector<Merged<NvtxRecord>> nvtx;
  std::vector<Merged<NcclRecord>> nccl;
  std::vector<Merged<StepRecord>> steps;  // AON's step markers (1.5), by rank and step
  // GPU counters (1.6; docs/counters.md): a node's rows sit in one rank's file (the
  // Merged rank), the GPU is named by its UUID. `devices`: each rank's GPUs
  // (/meta/devices, Merged rank = the rank that saw it), which tie ranks to rows.
  std::vector<Merged<CounterRecord>> counters;
  std::vector<Merged<DeviceInfo>> devices;
  // Framework ranges (1.8; docs/pytorch.md): operators, autograd nodes, modules,
  // user ranges, and the external correlations that tie launches to them.
  std::vector<Merged<OpRecord>> ops;
  std::vector<Merged<ExternalCorrelationRecord>> external;
  // CUDA-graph kernel nodes captured inside an op, and their clones (1.13): a
  // replayed kernel's op is its node's (kernels.graph_node_id).
  std::vector<Merged<GraphOpRecord>> graph_ops;
  // Host stack samples of the application's threads in capture windows (1.15;
  // docs/host-sampling.md).
  std::vector<Merged<HostSampleRecord>> host_samples;

  bool synthetic() const { return source.find("synthetic") != std::string::npos; }
  size_t HostCount() const;

  // The records of timeline kind T: the vector above that holds them. Loading
  // walks every timeline kind (ForEachRecordType) through this, so a new kind
  // does not compile here until Timeline has its vector.
  template <typename T>
  std::vector<Merged<T>>& Records();
};

template <typename T>
std::vector<Merged<T>>& Timeline::Records() {
  if constexpr (std::is_same_v<T, KernelRecord>) {
    return kernels;
  } else if constexpr (std::is_same_v<T, MemcpyRecord>) {
    return memcpys;
  } else if constexpr (std::is_same_v<T, MemsetRecord>) {
    return memsets;
  } else if constexpr (std::is_same_v<T, SyncRecord>) {
    return syncs;
  } else if constexpr (std::is_same_v<T, ApiRecord>) {
    return apis;
  } else if constexpr (std::is_same_v<T, NvtxRecord>) {
    return nvtx;
  } else if constexpr (std::is_same_v<T, NcclRecord>) {
    return nccl;
  } else if constexpr (std::is_same_v<T, StepRecord>) {
    return steps;
  } else if constexpr (std::is_same_v<T, CounterRecord>) {
    return counters;
  } else if constexpr (std::is_same_v<T, OpRecord>) {
    return ops;
  } else if constexpr (std::is_same_v<T, ExternalCorrelationRecord>) {
    return external;
  } else if constexpr (std::is_same_v<T, GraphOpRecord>) {
    return graph_ops;
  } else if constexpr (std::is_same_v<T, HostSampleRecord>) {
    return host_samples;
  } else {
    static_assert(sizeof(T) == 0, "a timeline record kind without its vector in Timeline");
  }
}

// Reads a merged timeline (FileKind::kTimeline). Errors name the file.
StatusOr<Timeline> LoadTimeline(const std::string& path);

// ---- Analyses ---------------------------------------------------------------------

struct Interval {
  uint64_t start = 0, end = 0;
};
// Sorted, disjoint union of `v` (modified in place).
std::vector<Interval> Union(std::vector<Interval> v);
uint64_t TotalLength(const std::vector<Interval>& u);
// Length of the intersection of two unions.
uint64_t IntersectionLength(const std::vector<Interval>& a, const std::vector<Interval>& b);
// Length of union `u` inside [w.start, w.end).
uint64_t LengthWithin(const std::vector<Interval>& u, Interval w);

// Per rank: union of all GPU operations.
std::vector<std::vector<Interval>> GpuBusyUnions(const Timeline& t);

enum class KernelFamily { kGemm, kAttention, kElementwise, kReduction, kNccl, kCopy, kOther };
const char* KernelFamilyName(KernelFamily f);
KernelFamily ClassifyKernel(const std::string& name);

// Steps: AON's own step records when the timeline has them (every step of every
// rank, whatever was captured), else NVTX ranges named "step N" / "iteration N" /
// "iter N", else the kernel that repeats most regularly (one occurrence per step).
struct Steps {
  std::string method;  // "AON step markers (nvtx)", "NVTX ranges \"step #\"", ..., "none"
  std::vector<std::vector<Interval>> per_rank;
  size_t typical_count = 0;  // median steps over ranks that have any
  // Capture windows (budgeted mode): GPU activity exists only for the captured
  // steps, so the per-step GPU analyses use `captured` (per rank; a rank with no
  // window has none) while step times use `per_rank`. Without windows (full
  // capture, or steps not from AON) `windowed` is false and captured == per_rank.
  bool windowed = false;
  std::vector<std::vector<Interval>> captured;
  // Per rank and captured step: an edge of its window, set only where the rank
  // has captured steps that are none. The first step of a window (its lead-in)
  // misses the gap that began before it and the work still running into it
  // (the step before was not traced); the last misses the gap that runs on into
  // the next step, whose first launch is not traced (a host that waits on the
  // GPU and then works before the step ends: .item(), then logging), and the
  // rank's last step ran until the process ended. Per-step idle and busy
  // figures leave edges out; where most windows of several steps would have
  // none left (windows of two steps), only lead-ins; windows of one step all count.
  std::vector<std::vector<bool>> edge;
  // The steps whose GPU activity the timeline holds for `rank`.
  const std::vector<Interval>& GpuSteps(uint32_t rank) const;
  // Whether captured step `i` of `rank` counts in per-step figures (!edge).
  bool Whole(uint32_t rank, size_t i) const;
};
Steps DetectSteps(const Timeline& t);

struct RankBreakdown {
  uint32_t rank = 0;
  bool has_gpu = false;
  uint64_t span_ns = 0, busy_ns = 0, idle_ns = 0;
  uint64_t compute_ns = 0, comm_ns = 0, copy_ns = 0, memset_ns = 0;  // unions per category
  uint64_t exposed_comm_ns = 0;  // communication not overlapped by compute
  double overlap_fraction = 0;   // 1 - exposed/comm (0 when no communication)
  // With capture windows the totals above (span ... exposed) are measured over the
  // captured steps and multiplied by run_scale (steps run / steps captured): they
  // estimate the whole run, so findings compare with the run's length. 1 otherwise.
  double run_scale = 1.0;
  // Steps.
  size_t steps = 0;
  std::vector<uint64_t> step_ns;
  double step_mean_ns = 0, step_median_ns = 0, step_max_ns = 0;
  double step_busy_ns = 0, step_compute_ns = 0, step_comm_ns = 0, step_idle_ns = 0;  // means
};
std::vector<RankBreakdown> ComputeBreakdown(const Timeline& t, const Steps& steps);

struct KernelStats {
  std::string name;
  KernelFamily family = KernelFamily::kOther;
  std::string launch_config;  // most common "grid(x,y,z) block(x,y,z) regs N smem B"
  uint64_t count = 0, total_ns = 0, min_ns = 0, max_ns = 0;
  double mean_ns = 0, stddev_ns = 0;
  std::map<uint32_t, uint64_t> per_rank_ns;
};
// Sorted by total time, descending.
std::vector<KernelStats> TopKernels(const Timeline& t);

struct Collective {
  std::string type;    // "AllReduce"
  uint64_t bytes = 0;  // 0 = unknown (kernel-order fallback)
  std::string algo, proto;
  std::vector<uint32_t> ranks;
  std::vector<uint64_t> arrival_ns;  // per entry of ranks
  std::vector<uint64_t> end_ns;
  uint64_t first_arrival_ns = 0, last_arrival_ns = 0, skew_ns = 0;
  uint32_t last_rank = 0;
  uint64_t lost_ns = 0;      // sum over ranks of (last arrival - arrival)
  uint64_t straggle_ns = 0;  // last arrival - second-last arrival
  uint64_t transfer_ns = 0;  // median end - last arrival
};

struct CommGroup {
  std::string type;
  uint64_t bytes = 0;
  uint32_t nranks = 0;
  uint64_t count = 0;
  double mean_transfer_ns = 0;
  double algbw_gbps = 0, busbw_gbps = 0;  // GB/s (1e9), 0 when bytes unknown
  std::string algo, proto;
};

// Waiting is measured as a union of intervals, not a sum over collectives: a rank
// that issues 4 bucket all-reduces and waits 20 ms for all of them loses 20 ms.
// "steady" values are the median per step times the number of steps (the rank's
// steps; the whole-run value when there are none), so warm-up steps don't dominate.
struct StragglerStats {
  uint32_t rank = 0;
  uint64_t collectives = 0;  // collectives this rank took part in
  uint64_t last_count = 0;
  double last_fraction = 0;
  uint64_t caused_lost_ns =
      0;                   // union of the others' waiting when this rank was last, summed over them
  uint64_t gain_ns = 0;    // union of [second-last, last arrival] when last
  uint64_t waited_ns = 0;  // this rank's own waiting for others (union)
  uint64_t steady_lost_ns = 0, steady_gain_ns = 0;
};

struct Communication {
  std::string source;  // "nccl records", "nccl kernels (matched by order)", "none"
  std::vector<Collective> collectives;
  std::vector<CommGroup> groups;
  std::vector<StragglerStats> stragglers;  // indexed by rank
  bool skew_trustworthy = true;
  std::string caveat;
};
double BusBandwidthFactor(const std::string& type, uint32_t nranks);
// `steps` (optional) gives the steady-state values; collectives are placed in the
// step of their last rank that holds the last arrival.
Communication AnalyzeCommunication(const Timeline& t, const Steps* steps = nullptr);

// Median of the per-step values times their number (0 for none).
uint64_t SteadyTotal(std::vector<uint64_t> per_step);

// Compilation (compile.cc): the time each rank's host spent compiling, from the
// ranges that mark it: XLA's compiler passes (NVTX ranges "XlaCompile...",
// "XlaPass...", "XlaEmit...", ... that JAX's GPU runtime emits), torch.compile's
// compilations (AON's hook: "AON"-domain ranges "torch.compile ..."; Dynamo's
// "... (dynamo_timed)" user ranges where ops were recorded). A compilation is
// a recompilation when the same thing was compiled before on the rank: the same
// XLA module, the same Dynamo frame (compile id "<frame>/<attempt>", attempt > 0).
struct CompileRank {
  std::vector<Interval> spans;  // the union of the rank's compile ranges, sorted
  uint64_t ns = 0;              // its length: wall time compiling (threads overlap)
  uint64_t compilations = 0, recompilations = 0;
  uint64_t recompile_ns = 0;                     // union of the recompilations' ranges
  std::map<std::string, uint64_t> framework_ns;  // "XLA", "torch.compile"
  std::map<std::string, uint64_t> compiled;      // what was compiled -> times
  // Whether [from, to) lies mostly (over half) inside spans.
  bool Covers(uint64_t from, uint64_t to) const;
};
struct CompileAnalysis {
  std::vector<CompileRank> ranks;  // per rank (empty spans: none)
  const CompileRank* Of(uint32_t rank) const {
    return rank < ranks.size() && !ranks[rank].spans.empty() ? &ranks[rank] : nullptr;
  }
};
// CompileFramework (what a range marks the compilation of): aon/format/framework_ranges.h.
CompileAnalysis AnalyzeCompilation(const Timeline& t);

// Why the GPU idled (AnalyzeIdle, idle.cc): a blocking call drained it; a
// synchronous or pageable copy; the host launched late while issuing CUDA calls
// (launch overhead: the thread's call-free stretches are no longer than its
// issue time); the host launched late after running code outside any CUDA call
// (an input pipeline, Python work, logging); the host was compiling (most of the
// gap inside a CompileRank span); or something else (a dependency).
enum class GapCause { kHostSync, kSyncCopy, kHostLate, kHostWork, kCompile, kOther };
inline constexpr GapCause kGapCauses[] = {GapCause::kHostSync, GapCause::kSyncCopy,
                                          GapCause::kHostLate, GapCause::kHostWork,
                                          GapCause::kCompile,  GapCause::kOther};
const char* GapCauseName(GapCause c);

struct Gap {
  uint32_t rank = 0;
  uint64_t start_ns = 0, end_ns = 0;
  GapCause cause = GapCause::kOther;
  std::string detail;  // "cudaStreamSynchronize", "cudaMemcpy HtoD 4 MiB pageable", ...
  std::string nvtx;    // innermost host range at the gap, "" if none
  uint64_t length() const { return end_ns - start_ns; }
};

struct IdleAnalysis {
  // Every gap, clipped to the step that holds its midpoint (step -1: outside steps,
  // counted whole only for ranks without steps).
  struct Slice {
    uint32_t rank;
    GapCause cause;
    int32_t step;
    uint32_t range;  // index into range_names (innermost host range, 0 = none)
    uint64_t ns;
    bool carried = false;   // the gap began at or before its step began
    uint64_t start_ns = 0;  // where the slice begins (the gap clipped to its step)
  };
  std::vector<Slice> slices;
  std::vector<std::string> range_names{std::string()};
  std::vector<size_t> steps;  // per rank
  // per rank: steps run / steps seen (RunScale: > 1 with capture windows)
  std::vector<double> run_scale;
  // Capture windows cost AON time inside their own steps (CUPTI's work on the
  // host; docs/always-on.md), and that time is GPU idle there at most: per rank
  // and captured step, the share of its gap time that is left once the step's
  // time beyond the median step outside windows is taken off, and capped at that
  // median (a step outside windows cannot idle longer than it lasts). 1 without
  // windows. Steady() scales each step's gaps by it before extrapolating.
  std::vector<std::vector<double>> window_factor;
  // per rank: median step outside capture windows (0: no such step)
  std::vector<uint64_t> outside_step_ns;
  // per rank and captured step: Steps::edge (left out of the median per step)
  std::vector<std::vector<bool>> edge;
  // Steady-state gap time of one cause on one rank (median per step over the
  // captured steps that are not window edges x steps, the steps of the whole run; the
  // whole-run sum without steps), leaving out gaps in range `exclude_range`; with
  // capture windows, corrected for their cost (above), and extrapolated only
  // when at least two observed steps show the cause (else what was seen).
  uint64_t Steady(uint32_t rank, GapCause cause, const std::string& exclude_range = "") const;

  // gaps shorter than this are left out, but for host-launched-late ones of 1 us or more
  uint64_t min_gap_ns = 10000;
  std::vector<Gap> top_gaps;  // longest first
  // per rank, per cause: total gap time and count
  std::vector<std::map<GapCause, uint64_t>> cause_ns;
  std::vector<std::map<GapCause, uint64_t>> cause_count;
  // per rank, per cause, per innermost NVTX range: total (for evidence)
  std::vector<std::map<GapCause, std::map<std::string, uint64_t>>> cause_nvtx_ns;
  // Host stack samples (1.15; docs/host-sampling.md) taken inside the gaps:
  // per rank and cause, how many, and how many had each innermost frame
  // (InnermostHostFrame), by thread.
  struct SampledFrames {
    uint64_t samples = 0;
    std::map<std::string, uint64_t> frames;
    std::map<std::string, std::map<std::string, uint64_t>> threads;  // frame -> thread -> samples
  };
  std::vector<std::map<GapCause, SampledFrames>> cause_samples;
  // The same samples by whole stack, every rank: those inside GPU gaps (of
  // at least min_gap_ns, or host launched late) and all of them (the report's
  // flame graphs).
  std::map<std::string, uint64_t> gap_stacks, all_stacks;
};

IdleAnalysis AnalyzeIdle(const Timeline& t, const Steps* steps = nullptr,
                         uint64_t min_gap_ns = 10000, const CompileAnalysis* compile = nullptr);

struct MemoryRank {
  uint64_t pageable_count = 0, pageable_bytes = 0, pageable_ns = 0;
  // Host<->device copies of pinned memory of at least 1 MiB: the rate pinning
  // reaches on this rank's link (the pageable-copies finding's reference).
  uint64_t pinned_bytes = 0, pinned_ns = 0;
  // ... and the pageable copies of at least 1 MiB (rate-bound; smaller ones are latency-bound)
  uint64_t pageable_large_bytes = 0, pageable_large_ns = 0;
  // The PCIe link of the GPU its pageable copies went to (/meta/devices; 0: not
  // known) and the most that link carries, in bytes per ns (= GB/s; PcieLinkRate).
  uint32_t pcie_gen = 0, pcie_width = 0;
  double link_bytes_per_ns = 0;
  uint64_t small_count = 0, small_ns = 0;  // copies < 64 KiB
  uint64_t copies = 0, copy_bytes = 0, copy_ns = 0;
  // What pinning would save of the pageable copies' time over the run: per copy
  // of 1 MiB or more its time less its bytes at the rate of the large pinned
  // copies above (else at the link's rate: then an upper bound), half the time
  // of smaller ones (and of all, with neither reference: the driver stages
  // pageable memory through pinned buffers, so pinning at least doubles the
  // rate). With steps, steady like the idle gaps: the median per step of whole
  // captured steps x the steps run; without, the sum.
  uint64_t pinning_saves_ns = 0;
};
// `steps` (DetectSteps of `t`, or null: no steps) places the copies for
// pinning_saves_ns.
std::vector<MemoryRank> AnalyzeMemory(const Timeline& t, const Steps* steps = nullptr);
// The payload a PCIe link of generation `gen` (1..6) and `width` lanes carries
// at most, in bytes per ns: lanes x transfer rate x line-code efficiency x the
// share of a 256-byte packet that is payload. 0 for an unknown generation.
double PcieLinkRate(uint32_t gen, uint32_t width);

struct NvtxStat {
  std::string name;  // "domain:name" for non-default domains; digits runs -> "#"
  // range_ns: wall time under ranges of this name, per rank the union over its
  // threads (per_rank_range_ns), summed over ranks
  uint64_t count = 0, range_ns = 0, gpu_ns = 0;
  std::map<uint32_t, uint64_t> per_rank_range_ns, per_rank_gpu_ns, per_rank_count;
};
// Normalized range name ("step 12" -> "step #").
std::string NormalizeRangeName(const std::string& name);
// GPU time under each range: a GPU operation belongs to every push/pop range open on
// the thread that launched it (CUDA API record with the same correlation id) at the
// launch; without an API record, to the ranges open on any thread of the rank at its
// start. Sorted by GPU time, descending.
std::vector<NvtxStat> AttributeNvtx(const Timeline& t);

// ---- GPU counters (docs/counters.md) --------------------------------------------

// Time-weighted means of the counter metrics over some time of some GPUs: each
// row adds value x weight (ns of its interval that count) to its metric.
struct CounterMeans {
  static constexpr int kMetrics = 15;  // indexed by CounterMetric (1..14)
  double sum[kMetrics] = {}, weight[kMetrics] = {};
  void Add(uint16_t metric, double value, double weight_ns);
  bool Has(CounterMetric m) const;
  double Mean(CounterMetric m) const;  // -1 when absent
};

// "Why is it slow" from counter means; the rules, in one place (counters.cc and
// docs/counters.md): busy = gpu_active (else sm_active); busy < 50: launch-bound;
// else compute = the busiest of tensor/fp16/fp32/fp64/sm issue, memory = dram_bandwidth:
// compute >= 60 and >= memory: compute-bound; else memory >= 60: memory-bound;
// else latency-bound.
enum class Verdict : uint8_t {
  kUnknown,   // no counters over it, or too few
  kTooShort,  // shorter than a sample interval
  kLaunchBound,
  kComputeBound,
  kMemoryBound,
  kLatencyBound,
  // Phases only: the counters say the GPU is not fed (launch-bound's test) and
  // the trace says why, a cause other than launch overhead: its GPU idles while
  // the host runs code outside CUDA calls, waits on a synchronization, or makes
  // synchronous copies (docs/counters.md, "Verdicts").
  kHostBound,
};
// "unknown", "too short", "launch-bound", "compute-bound", "memory-bound", "latency-bound",
// "host-bound".
const char* VerdictName(Verdict v);
struct CounterVerdict {
  Verdict verdict = Verdict::kUnknown;
  std::string why;     // the numbers behind it, or why there is none
  std::string action;  // what to try ("" without a verdict)
  double busy_pct = -1, compute_pct = -1, memory_pct = -1, sm_active_pct = -1,
         occupancy_pct = -1;  // -1: not measured
  std::string busy_metric;    // "gpu_active" or "sm_active"
  std::string compute_pipe;   // "tensor", "fp16", "fp32", "fp64", "issue"
};
// The thresholds (percent).
inline constexpr double kLaunchBoundBusyPct = 50, kBoundPct = 60;
CounterVerdict JudgeCounters(const CounterMeans& m);

struct CounterPoint {
  uint64_t start_ns = 0, end_ns = 0;
  double value = 0;
};
struct CounterGpu {
  uint32_t device = 0;  // NVML index
  GpuUuid uuid;
  std::string uuid_text;  // from /meta/devices; hex of the halves when no rank lists it
  std::string host;       // of the rank file that holds its rows
  std::string source;     // "gpm", "synthetic", "pm sampling", ...
  // Its tier: PM samples in capture windows (true), or the node's GPM metrics.
  // A GPU with both tiers is two entries; phases and kernels take the sampled
  // one where it covers them.
  bool sampled = false;
  std::vector<uint32_t> ranks;  // ranks tied to it
  bool assumed = false;         // some rank tied by local rank == NVML index, not by UUID
  uint64_t interval_ns = 0;     // median sample interval
  CounterMeans means;           // over the run, weighted by interval length
  CounterVerdict run;           // JudgeCounters(means): the numbers (busy, busiest pipe, ...);
                                // its verdict mixes every phase, so it is not shown
  std::map<uint16_t, std::vector<CounterPoint>> series;  // per metric, by start (plots)
};
struct CounterPhase {
  std::string name;  // as in NvtxStat::name
  uint64_t instances = 0;
  double seconds = 0;  // the phase's wall time on its busiest rank (union over threads)
  std::map<uint32_t, std::vector<Interval>> spans;  // per rank: that union (sorted)
  // The sample intervals it is judged from: those it fills (>= 90 % each), or,
  // when it fills none, the fractions of those it overlaps (docs/counters.md).
  double intervals = 0;
  CounterMeans means;  // those rows' means (partial rows weighted by what it covers)
  CounterVerdict verdict;
  bool sampled = false;  // judged from PM samples (else from the node's GPM metrics)
  // The trace's view of it (with an IdleAnalysis): its time inside traced steps
  // (the whole phase without capture windows) and the GPU gaps there, by cause.
  uint64_t traced_ns = 0;
  std::map<GapCause, uint64_t> idle_ns;
};
struct CounterKernel {
  std::string name;
  uint64_t intervals = 0;  // intervals where it is >= 80 % of its rank's GPU-busy time
  CounterVerdict verdict;  // "unknown" with the reason when intervals < 2
  bool sampled = false;    // judged from PM samples (else from the node's GPM metrics)
};
struct CounterAnalysis {
  bool present = false;                // the timeline has counter rows
  bool synthetic = false;              // some rows are synthetic
  std::vector<CounterGpu> gpus;        // by host, device
  std::vector<CounterPhase> phases;    // by seconds, descending
  std::vector<CounterKernel> kernels;  // the top kernels (by total time), that order
  std::string note;                    // e.g. why there is nothing, or which ties were assumed
};
// `kernels` (TopKernels) gives the kernels to judge and their order (the first
// 10); `steps` (optional) the capture windows: with them, only sample intervals
// inside a rank's captured steps can judge its kernels.
struct TorchModule;
// With `modules`: also each module's verdict (TorchModule::verdict). With
// `idle`: a launch-bound phase whose traced GPU gaps have another cause for the
// most part is host-bound, with that cause's action (Verdict::kHostBound).
CounterAnalysis AnalyzeCounters(const Timeline& t, const std::vector<KernelStats>& kernels,
                                const Steps* steps = nullptr,
                                std::vector<TorchModule>* modules = nullptr,
                                const CompileAnalysis* compile = nullptr,
                                const IdleAnalysis* idle = nullptr,
                                std::vector<TorchModule>* xla_modules = nullptr);
// Minimum overlap, in sample intervals, for a phase or kernel verdict.
inline constexpr double kMinCounterIntervals = 2;
inline constexpr double kKernelDominance = 0.8;

struct Finding {
  std::string kind;      // "straggler", "exposed-communication", "idle-host-sync", ...
  int rank = -1;         // the rank to act on, -1 = all
  uint64_t gain_ns = 0;  // estimated wall time to gain over the run
  double gain_per_step_ns = 0;
  std::string action;
  std::string evidence;
  std::map<std::string, double> numbers;  // key numbers for --json
  // The record kinds the rule reads (RecordKindName): a loss in any of them,
  // on the finding's rank (any rank, for a comparison), is said in evidence.
  std::vector<std::string> built_on;
};

// What the job lost (RankInfo's drops) against what the timeline kept, per rank
// and record kind: said in every report, and by every finding built on a kind
// its rank lost records of.
struct KindLoss {
  RecordKind kind = RecordKind::kKernel;
  // dropped: all lost; of them unwritten (collector, disk) and damaged (in the
  // rank file, unreadable there); the rest: the agent's memory cap.
  uint64_t kept = 0, dropped = 0, unwritten = 0, damaged = 0;
  double share() const {  // of the records the rank made of this kind
    return kept + dropped > 0 ? static_cast<double>(dropped) / static_cast<double>(kept + dropped)
                              : 0.0;
  }
  // "memory cap", "not written: disk", "damaged in the rank file", or several.
  std::string why() const;
};
struct RankLoss {
  uint32_t rank = 0;
  uint64_t dropped = 0;         // all kinds
  std::vector<KindLoss> kinds;  // those with drops; empty when the timeline does not say
  // The node collector exited while the rank ran: what was joined and lost ("": it did not).
  std::string collector_lost;
};
struct LossSummary {
  std::vector<RankLoss> ranks;  // those that lost records
  uint64_t dropped = 0;
  std::string statement;  // "" when nothing was lost
  // The largest share of kind `kind` lost by `rank` (-1: every rank), and the
  // text that says it ("" when none was lost): "rank 0 lost 42 % of its kernels
  // (memory cap)"; for a timeline that names no kinds, the rank's total.
  std::pair<double, std::string> Of(int rank, RecordKind kind) const;
  // "rank R's node collector exited while it ran: the node's GPU counters end
  // there" for `rank` (-1: any), "" if none: what a finding built on counters
  // adds (the rank's own records are counted dropped where it lost any).
  std::string CollectorLost(int rank) const;
};
LossSummary SummarizeLoss(const Timeline& t);

// What capturing cost the job and what it covered (docs/always-on.md), from the
// ranks' own measurements: said first in every report.
struct CaptureSummary {
  bool known = false;       // some rank recorded its capture (format 1.5)
  std::string mode;         // "budgeted", "full", "flight", or "mixed"
  double budget = 0;        // fraction (largest over ranks)
  double cost = -1;         // largest amortized cost over the ranks that measured it
  double cost_median = -1;  // median of the same
  double window_ratio = 0;  // median in-window / outside step time over ranks
  uint64_t steps = 0;       // median over ranks
  uint64_t captured_steps = 0, windows = 0;  // median over ranks
  uint32_t period = 0;                       // largest period in force at the end
  std::vector<uint32_t> ranks_without_window;
  uint64_t on_demand_steps = 0;  // rank-steps traced because aon ctl capture asked
  // Flight-recorder dumps: each dump (its number and reason) once, with the
  // ranks it wrote.
  std::vector<std::string> dumps;
  std::string statement;  // one or two sentences, the report's first line
};
CaptureSummary SummarizeCapture(const Timeline& t, const Steps& steps);

// PyTorch attribution (format 1.8, docs/pytorch.md): each kernel belongs to the
// innermost op range open on its launching thread (external correlation kind 3);
// an op's module is the nearest module range above it, and for an op run by
// autograd's backward pass, the module of the forward op with the backward
// node's sequence number (same rank, the node's forward thread). Phase:
// backward (under an autograd node), optimizer (under PyTorch's
// "Optimizer.step#..." / "Optimizer.zero_grad#..." range), forward (in a
// module), else other.
struct TorchModule {
  std::string path;                                      // "TransformerEncoder.layers.0.self_attn"
  uint64_t gpu_ns = 0, forward_ns = 0, backward_ns = 0;  // its kernels' GPU time
  uint64_t kernels = 0;
  std::vector<std::pair<std::string, uint64_t>> top_kernels;  // up to 3, by GPU time
  CounterVerdict verdict;  // from the counters over its kernels' executions
  bool sampled = false;    // ... from PM samples (else the node's GPM metrics)
  // Per rank, its kernels' executions (sorted, disjoint): what the verdict judges.
  std::vector<std::pair<uint32_t, std::vector<Interval>>> spans;
};
struct TorchOperator {
  std::string name;  // "aten::mm"
  uint64_t gpu_ns = 0, kernels = 0;
  std::string top_kernel;
};
struct TorchAnalysis {
  bool present = false;     // the timeline has op ranges
  uint64_t ops = 0;         // op ranges
  uint64_t kernels = 0;     // kernels of the ranks with op ranges
  uint64_t attributed = 0;  // ... launched inside one
  uint64_t kernel_ns = 0, attributed_ns = 0;
  uint64_t steps = 0;  // (rank, step) pairs holding attributed kernels; 0: no steps
  uint64_t forward_ns = 0, backward_ns = 0, optimizer_ns = 0, other_ns = 0;
  std::vector<TorchModule> modules;      // by GPU time, at most kTorchRows
  std::vector<TorchOperator> operators;  // by GPU time, at most kTorchRows
  std::string note;
  static constexpr size_t kTorchRows = 20;
};
TorchAnalysis AnalyzeTorch(const Timeline& t, const Steps* steps);

// JAX / XLA (docs/jax.md): a kernel belongs to the innermost thunk and module
// execution (XlaRange, aon/format/framework_ranges.h) open on its launch call's
// thread when the call was made. Kernels of the autotuner's modules (no
// program_id) are compile time, not the program's.
struct XlaInstruction {
  std::string module, hlo_op, jax_op;
  uint64_t gpu_ns = 0, kernels = 0;
  std::string top_kernel;
};
struct XlaAnalysis {
  bool present = false;                 // the timeline has XLA's execution or thunk ranges
  uint64_t executions = 0;              // execution ranges of the program's modules
  uint64_t kernels = 0, kernel_ns = 0;  // every kernel of the timeline
  // ... launched while XLA compiled (its autotuner's candidate modules, or any
  // launch inside a compile range outside an execution): compile time
  uint64_t compile_kernels = 0, compile_kernel_ns = 0;
  uint64_t program_kernels = 0, program_kernel_ns = 0;  // the others: the program's
  uint64_t attributed = 0, attributed_ns = 0;           // ... launched inside an execution or thunk
  uint64_t autotuner_executions = 0;                    // executions of autotuner modules
  // Program kernels replayed from a CUDA graph (XLA's command buffers), and of
  // those, the ones left with the buffer's thunk as their instruction.
  // Replayed from a command buffer, XLA names a kernel it emits after its
  // fusion: such a kernel gets the thunk of that name nested in the buffer's
  // (recorded every execution); the others (library calls) the buffer's.
  uint64_t graph_kernels = 0, graph_unresolved = 0;
  uint64_t steps = 0;  // (rank, step) pairs holding attributed kernels; 0: no steps
  // Per HLO module, by GPU time, at most kRows: a TorchModule row (path = the
  // module's name, forward_ns = gpu_ns, backward_ns = 0) so that the counters
  // judge it as they judge an nn.Module; with its execution ranges beside it.
  std::vector<TorchModule> modules;
  std::vector<uint64_t> module_executions;
  std::vector<XlaInstruction> instructions;  // by GPU time, at most kRows
  std::string note;
  static constexpr size_t kRows = 20;
};
XlaAnalysis AnalyzeXla(const Timeline& t, const Steps* steps,
                       const CompileAnalysis* compile = nullptr);

struct Report {
  std::string path, job_id, source, clock_note;
  bool synthetic = false, clock_synchronized = false;
  uint32_t world_size = 0;
  std::vector<RankInfo> ranks;
  std::vector<std::string> problems;
  std::vector<std::string> notes;     // degradations of the analyses, said once
  uint64_t start_ns = 0, end_ns = 0;  // GPU activity window over all ranks
  uint64_t records = 0;
  CaptureSummary capture;
  LossSummary loss;
  Steps steps;
  std::vector<RankBreakdown> breakdown;
  std::vector<KernelStats> kernels;
  Communication comm;
  CompileAnalysis compile;
  IdleAnalysis idle;
  std::vector<MemoryRank> memory;
  std::vector<NvtxStat> nvtx;
  CounterAnalysis counters;
  TorchAnalysis torch;
  XlaAnalysis xla;
  std::vector<Finding> findings;  // ranked, largest gain first (finding_rules.h)
  // Utilization heat strip: per rank, kHeatBins fractions of [start_ns, end_ns).
  static constexpr int kHeatBins = 160;
  std::vector<std::vector<float>> heat;
};

Report Analyze(const Timeline& t);
// The findings alone: ApplyFindingRules(r, DefaultFindingRules()) (Analyze calls it).
std::vector<Finding> RankFindings(const Report& r);

// ---- Rendering --------------------------------------------------------------------

std::string FormatDuration(double ns);  // "412 ms", "3.2 us", "1.23 s"
std::string FormatBytes(double bytes);  // "4 MiB"
// The header's GPU figure: busy time (the union of kernels, copies and memsets
// of a rank, averaged over the ranks with GPU work), its share of the span of
// the timeline's GPU records, and whether it is estimated from capture windows:
// "busy 12.1 ms per rank (38 % of 31.6 ms; estimated from the captured steps)".
std::string GpuActivitySummary(const Report& r);
std::string HtmlEscape(const std::string& s);
// At most ~40 lines: header, top-5 findings, per-rank table.
std::string RenderTerminal(const Report& r);
// One self-contained HTML page (no network), sections: summary, findings,
// gpu-breakdown, kernels, communication, stragglers, idle, imbalance, nvtx, counters.
std::string RenderHtml(const Report& r);
// {"job", "findings": [...], "ranks": [...], ...}
std::string RenderJson(const Report& r);

}  // namespace aon::report
