// Timeline -> trace-event model (trace_events.h): reads the timeline's record
// tables and hands their events to a TraceSink in start order (a k-way merge of
// the tables, each sorted by start), a chunk of each table at a time.
//
// What each record becomes (merge/README.md has the table):
//   rank              a process "rank R @ host" (+ " [SYNTHETIC]"), sort index R;
//   kernel/memcpy/memset  slices on "GPU d stream s" tracks;
//   sync              on its stream's track, or the rank's "sync" track;
//   CUDA API, NVTX    on the OS thread's track (NVTX start/end ranges: async
//                     slices; marks: instants);
//   ops               framework operators on the OS thread's track too, named
//                     by the operator (they enclose their CUDA calls);
//   NCCL              per communicator / channel / "NCCL API" / proxy channel tracks;
//   steps             the rank's "Steps" track; counters: a counter track per GPU
//                     and metric; kinds without their own mapping: one slice per
//                     record on a track named after the kind, every field an arg.
//   flows             API call -> GPU work with the same correlation id; with
//                     collective_flows, the ranks' instances of one NCCL collective
//                     (communicator, sequence number) chained in time order.
// Named tracks are numbered per rank and class (GPU streams first, then sync,
// NCCL, NCCL API, proxy, steps, others), so their order does not depend on
// which record came first.
//
// Memory: a chunk per table, the tracks, and with FlowLinks::kBothEndsKept a key
// per API/GPU record with a correlation id (the JSON export, which is for small
// traces); kEveryCorrelation needs none (the Perfetto export).
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aon/base/status.h"
#include "aon/export/export_filter.h"
#include "aon/format/string_table.h"
#include "aon/format/trace_file.h"
#include "aon/format/trace_format.h"
#include "trace_events.h"

namespace aon::merge {

enum class FlowLinks : uint8_t {
  kBothEndsKept,      // an arrow only when the API call and its GPU work are both kept
  kEveryCorrelation,  // every record with a correlation id gets its end; viewers
                      // ignore an end whose partner is absent
};

struct TraceBuildOptions {
  ExportFilter filter;       // empty = everything
  uint64_t max_records = 0;  // 0 = no limit; else stop (Unavailable) past it
  FlowLinks flows = FlowLinks::kBothEndsKept;
  bool collective_flows = false;
};

struct TraceBuildStats {
  uint64_t records = 0;  // timeline records exported
  uint64_t flows = 0;    // API -> GPU flows begun
  bool over_limit = false;
};

// The timeline's facts every export needs, read once.
struct TimelineView {
  StringTable strings;
  uint64_t t0 = 0;                 // /meta start_ns
  std::vector<RankSummary> ranks;  // /meta/ranks rows, in file order
  std::set<uint32_t> synthetic;    // ranks with synthetic activity

  static StatusOr<TimelineView> Read(const TraceReader& reader, const std::string& path);
  // "rank R @ host" (+ " [SYNTHETIC]").
  std::string ProcessName(const RankSummary& row) const;
};

// Sends the processes of the kept ranks, then every kept record's events, to
// *sink. Past options.max_records: stats->over_limit, Unavailable.
// The fields of `kind` that its own exporter shows (under its own names, or as the slice's
// name, track, times or flows) or leaves out on purpose; every other field becomes an
// argument by its role, in every format.
std::span<const std::string_view> HandledFieldNames(RecordKind kind);

Status BuildTraceEvents(const TraceReader& reader, const TimelineView& timeline,
                        const TraceBuildOptions& options, trace::TraceSink* sink,
                        TraceBuildStats* stats);

}  // namespace aon::merge
