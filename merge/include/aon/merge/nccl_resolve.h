// Post-processing of a rank's NCCL records: ties each NCCL operation to the
// CUPTI kernel that ran it and puts raw %globaltimer channel times onto the
// rank's host timebase.
//
// The agent streams NcclRecords as NCCL reports them, before CUPTI has
// delivered the kernels: a rank file may hold operations with correlation_id 0
// and channel times still in %globaltimer ns (gpu_timing kRaw). The merge runs
// ResolveNcclRecords on each rank's records before correcting clocks. Files
// written by agents that resolved at exit are already resolved, and running it
// on them changes nothing (it is idempotent).
//
// CUDA graphs. NCCL reports a captured operation once, at capture, where its
// launch creates a kernel node instead of running; the agent records which
// graph nodes each NCCL launch created and their clones (NcclGraphRecord, see
// records.h). Every kernel record whose graph_node_id is one of those nodes, or
// a clone of one, is a replay of that launch's operations: each becomes a record
// with graph_replay = 1, 2, ... (kernel start order), the captured operation's
// attributes and the kernel's correlation id, stream and GPU span. When NCCL
// reported no operation at capture but reports each replay itself (host
// callbacks in the graph: --nccl channels, or proxy work across nodes), the
// captured call (a kCapturedColl/kCapturedP2p NcclGraphRecord) becomes the
// captured operation and NCCL's replay records are numbered and tied to the
// replayed kernels instead of being counted as new operations. Format 1.3 rank
// files kept the bookkeeping in the nccl table (event types 6-8): those rows are
// taken out of `nccl` and used the same way.
//
// Part of aon::merge, its only user (the agent only writes what this reads); it
// stays in namespace aon, the name profiles of the merge look for
// (bench/run_merge_scaling.sh).
//
// Pure: no I/O, no CUPTI, no clock reads. Memory: maps of NCCL-related ids only
// (the NCCL external correlations, their launches, kernels and graph nodes),
// never one entry per kernel or API record of the rank.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "aon/format/records.h"

namespace aon {

// CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 (CUpti_ExternalCorrelationKind in
// cupti_activity.h): the kind of the external correlation id AON's NCCL plugin
// pushes around NCCL's kernel launches (ExternalCorrelationRecord::external_kind).
inline constexpr uint32_t kNcclExternalCorrelationKind = 5;

// A rank's realtime anchor (RankMetadata::anchor_clock_ns / anchor_realtime_ns):
// the host timebase and CLOCK_REALTIME read back to back.
struct RealtimeAnchorNs {
  uint64_t clock_ns = 0;
  uint64_t realtime_ns = 0;
};

// %globaltimer -> host timebase: host = gpu + offset_ns (RankMetadata's
// nccl_gpu_clock_offset_ns / _pairs / _spread_ns).
struct NcclGpuClockCalibration {
  int64_t offset_ns = 0;
  int64_t pairs = 0;       // kernels seen by both NCCL and CUPTI; 0 = not measured
  int64_t spread_ns = -1;  // 10th..90th percentile range of the per-kernel offsets
};

struct NcclResolveResult {
  // How the raw channel times were converted (valid when raw_converted > 0; with
  // none converted it is what would have been used, and a caller keeps the
  // calibration it already has, e.g. the one in a resolved file's metadata).
  NcclGpuClockCalibration calibration;
  NcclGpuTiming channel_timing = NcclGpuTiming::kAssumed;  // kCalibrated or kAssumed
  // Collective / p2p operations, by how they got their kernel's correlation id.
  uint64_t by_external_id = 0;    // their launch's CUSTOM2 external correlation
  uint64_t by_time = 0;           // the NCCL launch API call nearest in time
  uint64_t already_resolved = 0;  // had a correlation id (resolved file): kept
  uint64_t unresolved = 0;        // none found (no NCCL launch recorded at all)
  uint64_t without_kernel = 0;    // a correlation id, but no kernel record with it
  uint64_t raw_converted = 0;     // records whose kRaw times were converted
  // CUDA graphs (see above).
  uint64_t graph_nodes = 0;               // kernel nodes created by captured NCCL launches
  uint64_t graph_node_clones = 0;         // their clones (instantiation)
  uint64_t captured_operations = 0;       // operations captured into a graph (graph_replay 0)
  uint64_t captured_from_calls = 0;       // of which made from a captured API call
  uint64_t graph_replays = 0;             // replay records (graph_replay >= 1) made or numbered
  uint64_t graph_replays_reported = 0;    // of which NCCL reported itself (host-callback replays)
  uint64_t captured_without_replay = 0;   // captured operations with no replayed kernel found
  uint64_t graph_launches_unmatched = 0;  // launches with graph nodes but no operation or call
  // Set when raw channel times had to be converted without CUPTI pairs
  // (%globaltimer taken as CLOCK_REALTIME), or when graph replays could not all be
  // attributed; "" otherwise. Several findings are joined by "; ".
  std::string note;
};

// Same semantics as the agent's former FinalizeNcclRecords, on one rank's tables:
//  * every kColl / kP2p record with correlation_id 0 gets the CUPTI correlation
//    id of its launch: through `ext` (kind kNcclExternalCorrelationKind, keyed by
//    external_id), else the NCCL launch API record (an API record whose
//    correlation id is one of those external correlations) nearest in time to
//    its start_ns; a record that already has one keeps it;
//  * with its kernel found in `kernels`: stream_id = the kernel's; a record
//    without GPU times (kNone) takes the kernel's span (gpu_start_ns = kernel
//    start, end_ns = max(kernel end, start_ns), kKernel);
//  * calibration: per kernel, offset = kernel start - earliest raw first-channel
//    start of its operations; the median over kernels, spread of the middle 80 %.
//    With no pair, %globaltimer is taken as CLOCK_REALTIME: offset =
//    anchor.clock_ns - anchor.realtime_ns (channel_timing kAssumed, `note` set);
//  * every kRaw record (kColl/kP2p: gpu_start_ns, end_ns; kKernelCh: start_ns,
//    end_ns) is converted with that offset and marked kCalibrated / kAssumed.
//  * CUDA graphs (see above), before all of this, from `graph`: replay records
//    appended (1.3 bookkeeping rows in `nccl` are removed); replay records keep the
//    correlation id and span of their own kernel (a graph launch's kernels share
//    one correlation id, so they are never looked up by it);
// Other record types (kComm) are left alone.
NcclResolveResult ResolveNcclRecords(std::vector<NcclRecord>& nccl,
                                     std::span<const NcclGraphRecord> graph,
                                     std::span<const ExternalCorrelationRecord> ext,
                                     std::span<const KernelRecord> kernels,
                                     std::span<const ApiRecord> apis, RealtimeAnchorNs anchor);

// True when ResolveNcclRecords could change something: a kRaw record, a
// collective / p2p record without a correlation id, or CUDA-graph bookkeeping
// (`graph` rows, or 1.3 rows in `nccl`). A caller may skip reading the other
// tables when false (files of agents that resolved at exit).
bool NcclRecordsNeedResolution(std::span<const NcclRecord> nccl,
                               std::span<const NcclGraphRecord> graph = {});

// The kernel and API records ResolveNcclRecords(nccl, graph, ext, ...) can use,
// by correlation id: passing only the kernels whose id is in `kernels` and the
// API calls whose id is in `apis`, each in their file order, gives the same
// result as passing all of the rank's. The merge gathers them while it reads
// those kinds instead of reading a rank's largest tables twice. nullopt with
// CUDA-graph bookkeeping (`graph` rows, or 1.3 rows in `nccl`): replays are
// found among all kernels by graph node.
struct NcclReferencedIds {
  std::unordered_set<uint32_t> kernels;
  std::unordered_set<uint32_t> apis;
};
std::optional<NcclReferencedIds> NcclReferencedRecords(
    std::span<const NcclRecord> nccl, std::span<const NcclGraphRecord> graph,
    std::span<const ExternalCorrelationRecord> ext);

// Takes format 1.3's CUDA-graph bookkeeping rows (nccl event types 6-8) out of
// `nccl` and returns them as NcclGraphRecords (ResolveNcclRecords does this
// itself; exposed for tests and readers of old files).
std::vector<NcclGraphRecord> TakeLegacyGraphRows(std::vector<NcclRecord>& nccl);

}  // namespace aon
