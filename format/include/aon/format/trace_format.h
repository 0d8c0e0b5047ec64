// AON trace format v1: what a per-rank trace file and a merged timeline hold.
//
// Both are HDF5 files (docs/trace-format.md is the full description):
//
//   /                     attrs aon_format_major, aon_format_minor, aon_file_kind
//   /meta                 attrs: the RankMetadata fields (rank files), or the
//                         timeline's own (merged files); notes as one string
//   /meta/devices         DeviceInfo table (rank files)
//   /meta/ranks           RankSummary table (timelines)
//   /strings/data         uint8: every string, each NUL-terminated, in id order
//   /strings/offsets      uint64: byte offset of string i in data
//   /records/<kind>       one chunked, shuffle+deflate compressed compound dataset
//                         per RecordKind (records.h), always present, maybe empty
//
// Versioning: a reader accepts any minor version of its major version and refuses
// a different major version with an error naming the file and both versions.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "aon/base/linear_clock.h"
#include "aon/format/records.h"

namespace aon {

inline constexpr int kFormatMajor = 1;
// 1.1: NCCL records filled, NCCL GPU clock metadata. 1.2: truncated and
// last_record_ns metadata, raw NCCL records resolved by the merge, NCCL GPU clock
// columns in RankSummary. 1.3: clock_leader_rank and clock_id metadata (node
// leaders: one rank per node and clock measures, the others name it).
// 1.3 also: NCCL graph_replay filled, CUDA-graph bookkeeping NCCL rows (event
// types 6-8) in rank files (records.h).
// 1.4: the CUDA-graph bookkeeping rows have a kind of their own, nccl_graph (rank
// files only); the merge still reads 1.3's rows.
// 1.5: the steps kind (the application's steps and the capture windows on them)
// and the capture metadata (capture_mode ... amortized_cost).
// 1.6: the counters kind (GPU performance counters: NVML GPM from the node
// collector, CUPTI PM sampling in capture windows).
// 1.7: counters rows of CUPTI PM sampling in capture windows: the metric
// sm_issue_active_pct and the source "synthetic pm sampling".
// 1.8: the ops kind (framework operators, modules and user ranges from
// aon_op_begin / aon_op_end), tied to GPU work by external_correlation rows of
// external_kind 3; the step source "pytorch" (aon_framework_step).
// 1.9: steps.thread_cpu_ns (the CPU time of the thread that marks the steps,
// per step: a host busy between launches tells apart from one that waits).
// 1.10: devices.pcie_gen and pcie_width (the GPU's PCIe link, from /proc and /sys).
// 1.11: collector_lost_ns, capture_disabled and unwritten_<kind> of a rank file (of the dropped
// records, those the collector received but could not write: disk full, I/O error) and /meta/drops
// of a timeline (records dropped per rank and kind, and of them unwritten).
// 1.12: every chunk of every table carries a Fletcher-32 checksum (HDF5's
// filter 3, last in the pipeline), checked on every read; /meta/drops.damaged
// (records of a rank file that could not be read back: a damaged table) and the
// rank status "damaged"; a rank file's unwritten_why (why the collector could
// not write some records: a full disk, a quota, an I/O error).
// 1.13: the graph_ops kind (CUDA-graph kernel nodes captured inside a framework
// op, and their clones: replayed kernels are tied to the op of their capture).
// 1.14: the step sources "jax" (aon_jax_step: AON's JAX hook, at every
// jax.profiler.StepTraceAnnotation) and "xla" (executions of the XLA module a
// program runs once per step, when nothing else marks steps).
// 1.15: the host_samples kind (stacks of the application's threads, sampled on
// their CPU time in capture windows).
// 1.16: the timeline attribute capture_events (each rank's flight-recorder
// dumps with their reasons).
inline constexpr int kFormatMinor = 16;

enum class FileKind : uint8_t { kRank, kTimeline };
const char* FileKindName(FileKind kind);  // "aon-rank-trace", "aon-timeline"

// One GPU seen by a rank.
struct DeviceInfo {
  uint32_t device_id;
  uint32_t uuid_id;  // "GPU-xxxxxxxx-..." in the string table
  uint32_t name_id;  // "NVIDIA H200"
  uint32_t sm_count;
  uint64_t global_memory_bytes;
  uint32_t compute_major;
  uint32_t compute_minor;
  // The GPU's PCIe link as CUPTI reports it (1.10; 0: not known): generation
  // (1..6) and lanes. The pageable-copies finding's reference rate when the run
  // has no pinned copy of its own.
  uint32_t pcie_gen;
  uint32_t pcie_width;
};
static_assert(sizeof(DeviceInfo) == 40);
template <>
struct TableTraits<DeviceInfo> {
  using T = DeviceInfo;
  static constexpr const char* kName = "devices";
  static constexpr const char* kDoc = "/meta/devices of a rank file: one row per GPU the rank saw";
  static constexpr Field kFields[] = {
      AON_FIELD(T, device_id, kId, "CUDA device ordinal"),
      AON_FIELD(T, uuid_id, kStringId, "GPU UUID (GPU-xxxxxxxx-...)"),
      AON_FIELD(T, name_id, kStringId, "product name (NVIDIA H200)"),
      AON_FIELD(T, sm_count, kQuantity, "streaming multiprocessors"),
      AON_FIELD(T, global_memory_bytes, kQuantity, "device memory"),
      AON_FIELD(T, compute_major, kQuantity, "compute capability, major"),
      AON_FIELD(T, compute_minor, kQuantity, "compute capability, minor"),
      AON_FIELD(T, pcie_gen, kQuantity, "PCIe link generation (1.10; 0: not known)").None(0),
      AON_FIELD(T, pcie_width, kQuantity, "PCIe link lanes (1.10; 0: not known)").None(0)};
};
inline const TableSchema& DeviceInfoSchema() { return SchemaOf<DeviceInfo>(); }

// Everything a rank file says about its rank, besides records.
struct RankMetadata {
  // Identity.
  std::string job_id;
  int32_t rank = -1;
  int32_t local_rank = -1;
  int32_t world_size = -1;
  int32_t local_size = -1;
  std::string host;
  int64_t pid = 0;
  std::string
      launcher;  // where the identity came from: "openmpi", "slurm", "torchrun", "pmix", "none"

  // Clock: timestamps are ns of `clock_domain`; anchor pairs the two clocks
  // read back to back, so wall time = t - anchor_clock_ns + anchor_realtime_ns.
  std::string clock_domain = "CLOCK_MONOTONIC";
  uint64_t anchor_clock_ns = 0;
  uint64_t anchor_realtime_ns = 0;
  // Correction onto the job's reference clock (filled by clock sync; 0 = none).
  // reference = t + clock_offset_ns + clock_drift_ppm * 1e-6 * (t - clock_reference_ns)
  int64_t clock_offset_ns = 0;
  double clock_drift_ppm = 0.0;
  uint64_t clock_reference_ns = 0;
  int64_t clock_error_bound_ns = -1;  // -1: unknown (not synchronized)
  bool clock_synchronized = false;
  // Node leaders (1.3; -1 and "" in older files). Only one rank per node and
  // clock measures; the others read the same CLOCK_MONOTONIC and name the rank
  // whose measurement applies to them (clock_leader_rank; -1 = its own, or
  // none). clock_id says which clock that is: the kernel's boot id and the time
  // namespace ("<boot id>/timens:<inode>"); equal ids = the same clock, which
  // is what lets the merge give a follower its leader's correction
  // (clock_leaders.h).
  int32_t clock_leader_rank = -1;
  std::string clock_id;
  // The clock_offset/drift/reference/error_bound fields as the one clock model
  // type (linear_clock.h), and back.
  LinearClock clock() const {
    return {clock_offset_ns, clock_drift_ppm * 1e-6, clock_reference_ns, clock_error_bound_ns};
  }
  void set_clock(const LinearClock& c) {
    clock_offset_ns = c.offset_ns;
    clock_drift_ppm = c.drift * 1e6;
    clock_reference_ns = c.reference_ns;
    clock_error_bound_ns = c.bound_ns;
  }

  // Capture.
  std::string source;  // "cupti", "synthetic", "none"
  std::string kinds;   // comma-separated record kinds enabled
  uint64_t memory_cap_bytes = 0;
  std::string agent_version;
  uint64_t start_ns = 0;  // capture window on the host timebase
  uint64_t end_ns = 0;
  std::string end_reason;                            // "exit", "signal SIGTERM", ...
  std::array<uint64_t, kRecordKindCount> dropped{};  // per RecordKind
  // Of `dropped`, the records the collector received but could not write (disk
  // full, I/O error; 1.11, 0 in older files). The rest were dropped before they
  // reached it: the agent's memory cap (its ring was full).
  std::array<uint64_t, kRecordKindCount> unwritten{};
  std::vector<std::string> notes;  // degradations, each said once ("CUPTI unavailable: ...")
  // Capture windows and what they cost (1.5; docs/always-on.md). capture_mode:
  // "budgeted" (CUPTI in windows on aligned steps, inside overhead_budget), "full"
  // (CUPTI all the time), "flight" ("" in older files). The costs are measured by
  // the agent in its own process: window_step_ratio = median step time inside
  // windows / outside them (0: not measured), duty_cycle = captured_steps /
  // steps, amortized_cost = the extra step time the windows cost, as a fraction
  // of the job's step time (-1: not measured).
  std::string capture_mode;
  std::string step_source;  // "api", "pytorch", "nvtx", "nccl", "time slot", "none"
  int64_t steps = 0;
  int64_t captured_steps = 0;
  int64_t windows = 0;
  int64_t capture_period = 0;
  double overhead_budget = 0.0;  // fraction (0.01 = 1 %); 0: none (period fixed, or not budgeted)
  double window_step_ratio = 0.0;
  double duty_cycle = 0.0;
  double amortized_cost = -1.0;
  // NCCL GPU timer (%globaltimer) -> host timebase: host = gpu + offset, measured
  // on `pairs` NCCL kernels seen by both NCCL and CUPTI; spread = max - min of
  // the per-pair offsets kept (an error bound). pairs = 0: not calibrated.
  int64_t nccl_gpu_clock_offset_ns = 0;
  int64_t nccl_gpu_clock_pairs = 0;
  int64_t nccl_gpu_clock_spread_ns = -1;
  // Completeness (1.2; 0 in older files). truncated = 1: the process ended
  // without finishing its capture (killed, e.g. SIGKILL), so the trace stops
  // early; last_record_ns = the latest record time written (host timebase).
  bool truncated = false;
  uint64_t last_record_ns = 0;
  // When this rank's node collector exited while the rank ran (host timebase;
  // 1.11, 0: it did not). The collector's .partial file holds what it flushed
  // before; the rank wrote what its ring still held, and everything after, into
  // a file of its own, which aon-merge joins with that .partial.
  uint64_t collector_lost_ns = 0;
  // Why this rank captured nothing (1.11; "": it captured): a setting it was
  // given was refused, so capture was disabled and the application ran on.
  std::string capture_disabled;
  // Why the file's writer (the collector, or the rank itself without one)
  // could not write some of the records it had (1.12; "": it wrote them all):
  // its first error, naming ENOSPC, EDQUOT or EIO. unwritten[] counts them.
  std::string unwritten_why;

  std::vector<DeviceInfo> devices;
};

// The scalar fields of RankMetadata, one entry each: the attribute name in a rank
// file's /meta, the key of the collector wire format (metadata_wire.h) and the
// label of aon-inspect are all `name`; the HDF5 writer and reader, the wire
// encoder and decoder, aon-inspect and docs/trace-format.md iterate this table.
// Storage: strings as strings, uint64 as u64, double as f64, the other integers
// and bools as i64 (bools 0/1). Four fields are not scalars and are handled
// next to the table by each of those users: dropped (one value per record kind:
// "dropped_<kind>" attributes, "dropped.<kind>" wire keys), unwritten (likewise
// "unwritten_<kind>" attributes; the collector's own, never on the wire), notes (one string,
// newline-separated, in files; one "note" key per note on the wire) and
// devices (the /meta/devices table; "device" wire keys).
struct MetaField {
  using Member =
      std::variant<std::string RankMetadata::*, int32_t RankMetadata::*, int64_t RankMetadata::*,
                   uint64_t RankMetadata::*, double RankMetadata::*, bool RankMetadata::*>;
  const char* name;
  Member member;
  // The minor version that added the field: older files lack it and it keeps
  // its default; a file of this minor or later must have it.
  int since_minor;
  const char* doc;
};
std::span<const MetaField> RankMetadataFields();

// The field tables of every stored table and of RankMetadata, as the Markdown
// that docs/trace-format.md holds between its "generated" markers
// (`aon-inspect --schema` prints it).
std::string FieldTablesMarkdown();

// One row per rank in a merged timeline.
enum class RankStatus : uint8_t {
  kOk = 0,
  kMissing = 1,
  kCorrupt = 2,
  kTruncated = 3,
  kUnsupported = 4,
  // Merged, but not whole: a table that failed its checksum or could not be
  // read (the rest of that kind is not in the timeline), a table missing
  // from a finished file, string ids beyond its string table (1.12). The
  // message says what.
  kDamaged = 5
};
const char* RankStatusName(RankStatus status);
// Whether a rank's records are in the timeline: whole (ok) or with a damaged
// part its message names. Truncated ranks are merged too, up to where they end.
inline bool RankMerged(RankStatus s) { return s == RankStatus::kOk || s == RankStatus::kDamaged; }
// RankMetadata::capture_mode as a number (RankSummary).
enum class CaptureMode : uint8_t { kUnknown = 0, kBudgeted = 1, kFull = 2, kFlight = 3 };
inline constexpr EnumValue kCaptureModeValues[] = {
    {0, "unknown"}, {1, "budgeted"}, {2, "full"}, {3, "flight"}};

inline constexpr EnumValue kRankStatusValues[] = {{0, "ok"},          {1, "missing"},
                                                  {2, "corrupt"},     {3, "truncated"},
                                                  {4, "unsupported"}, {5, "damaged"}};

struct RankSummary {
  uint32_t rank;
  uint32_t host_id;     // string table
  uint32_t message_id;  // why a rank is not ok, string table
  uint32_t local_rank;
  int64_t pid;
  uint64_t records;
  uint64_t dropped;
  uint64_t first_ns;  // on the timeline clock
  uint64_t last_ns;
  int64_t clock_offset_ns;
  int64_t clock_error_bound_ns;
  // The rank's NCCL %globaltimer calibration (RankMetadata's nccl_gpu_clock_*,
  // measured by the merge for raw records). 1.2; 0 in older timelines.
  int64_t nccl_gpu_clock_offset_ns;
  int64_t nccl_gpu_clock_pairs;
  int64_t nccl_gpu_clock_spread_ns;
  // The rank's capture windows and what they cost (RankMetadata's capture
  // fields; 1.5, 0 in older timelines).
  uint64_t steps;
  uint64_t captured_steps;
  uint32_t windows;
  uint32_t capture_period;
  double overhead_budget;
  double window_step_ratio;
  double amortized_cost;  // -1: not measured
  uint8_t status;         // RankStatus
  uint8_t capture_mode;   // CaptureMode
  uint8_t flags;          // kRankCollectorLost (1.11; 0 in older timelines)
  uint8_t padding_[5];
};
static_assert(sizeof(RankSummary) == 152);
// RankSummary::flags: the rank's node collector exited while it ran
// (RankMetadata::collector_lost_ns): message_id says what was joined and lost.
inline constexpr uint8_t kRankCollectorLost = 1;
// ... the rank captured nothing: a setting was refused (RankMetadata::capture_disabled).
inline constexpr uint8_t kRankCaptureDisabled = 2;
template <>
struct TableTraits<RankSummary> {
  using T = RankSummary;
  static constexpr const char* kName = "ranks";
  static constexpr const char* kDoc = "/meta/ranks of a timeline: one row per rank of the job";
  static constexpr Field kFields[] = {
      AON_FIELD(T, rank, kId, "rank"),
      AON_FIELD(T, host_id, kStringId, "host the rank ran on"),
      AON_FIELD(T, message_id, kStringId, "why the rank is not ok"),
      AON_FIELD(T, local_rank, kId, "rank on its node"),
      AON_FIELD(T, pid, kId, "process id"),
      AON_FIELD(T, records, kQuantity, "records merged"),
      AON_FIELD(T, dropped, kQuantity, "records dropped by the agent (all kinds)"),
      AON_FIELD(T, first_ns, kQuantity, "first record time, on the timeline clock"),
      AON_FIELD(T, last_ns, kQuantity, "last record time, on the timeline clock"),
      AON_FIELD(T, clock_offset_ns, kQuantity, "clock correction applied"),
      AON_FIELD(T, clock_error_bound_ns, kQuantity, "its error bound, -1 = unknown").None(-1),
      AON_FIELD(T, nccl_gpu_clock_offset_ns, kQuantity, "NCCL %globaltimer -> host offset"),
      AON_FIELD(T, nccl_gpu_clock_pairs, kQuantity, "kernels the offset was measured on"),
      AON_FIELD(T, nccl_gpu_clock_spread_ns, kQuantity, "spread of the per-kernel offsets"),
      AON_FIELD(T, steps, kQuantity, "steps the rank ran (1.5)"),
      AON_FIELD(T, captured_steps, kQuantity, "steps inside capture windows (1.5)"),
      AON_FIELD(T, windows, kQuantity, "capture windows opened (1.5)"),
      AON_FIELD(T, capture_period, kQuantity, "last capture period, steps (1.5)"),
      AON_FIELD(T, overhead_budget, kQuantity, "share of step time AON could cost (1.5)"),
      AON_FIELD(T, window_step_ratio, kQuantity,
                "median step time in windows / outside them, measured by the rank (1.5)"),
      AON_FIELD(T, amortized_cost, kQuantity,
                "step time the windows added, as a share of all step time; -1 unknown (1.5)")
          .None(-1),
      AON_FIELD(T, status, kEnum,
                "ok, missing, corrupt, truncated, unsupported, damaged (1.12: merged but for the "
                "part its message names)",
                kRankStatusValues),
      AON_FIELD(T, capture_mode, kEnum, "how the rank captured (1.5)", kCaptureModeValues),
      AON_FIELD(T, flags, kQuantity,
                "bits (1.11): 1 the node collector exited while the rank ran (the message says "
                "what aon-merge joined); 2 capture was disabled (the message "
                "says why)"),
      AON_PADDING(T, padding_)};
};
inline const TableSchema& RankSummarySchema() { return SchemaOf<RankSummary>(); }

// What a rank lost, per record kind (1.11; timelines): one row per rank and kind
// with a record dropped (RankMetadata::dropped and ::unwritten). The report says
// it beside what was kept, and why.
struct RankDrops {
  uint32_t rank;
  uint32_t kind;       // RecordKind
  uint64_t dropped;    // all records of that kind the rank lost
  uint64_t unwritten;  // of them, received by the collector but not written (disk)
  uint64_t damaged;    // in its file, but unreadable there (1.12): not in the timeline
};
static_assert(sizeof(RankDrops) == 32);
template <>
struct TableTraits<RankDrops> {
  using T = RankDrops;
  static constexpr const char* kName = "drops";
  static constexpr const char* kDoc =
      "/meta/drops of a timeline: records a rank dropped or its file lost, per kind (1.11; only "
      "kinds with any)";
  static constexpr Field kFields[] = {
      AON_FIELD(T, rank, kId, "rank"),
      AON_FIELD(T, kind, kId, "record kind (RecordKind: 0 kernels, 1 memcpy, ... as /records)"),
      AON_FIELD(T, dropped, kQuantity, "records of that kind the rank dropped"),
      AON_FIELD(T, unwritten, kQuantity,
                "of them, records the collector received but could not write (disk full, I/O "
                "error); the rest: the agent's memory cap"),
      AON_FIELD(T, damaged, kQuantity,
                "records of that kind in the rank's file that could not be read back (a chunk that "
                "fails its checksum or does not decode) and are not in the timeline (1.12)")};
};
inline const TableSchema& RankDropsSchema() { return SchemaOf<RankDrops>(); }
// Copies a rank file's capture fields into its timeline row.
void SetCaptureSummary(const RankMetadata& m, RankSummary* row);

}  // namespace aon
