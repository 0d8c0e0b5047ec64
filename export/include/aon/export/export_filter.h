// What a viewer export keeps: a time window, a set of ranks, a set of record
// kinds (the --window, --ranks and --kinds options of aon-merge and aon-export).
//
//   --window START:END  seconds after the timeline's start_ns ("10:20", ":5",
//                       "30:", "1.5:2.25", an "s" suffix is allowed), or absolute
//                       nanoseconds on the timeline clock with an "ns" suffix
//                       ("1000ns:2000ns"); an empty side is open; both sides use
//                       the same unit. A record is kept when it overlaps the
//                       window: start < END and end >= START (records are kept
//                       whole, not clipped).
//   --ranks LIST        "0-3,8,12-15": ranks and inclusive ranges.
//   --kinds LIST        "kernels,nccl": RecordKindName names of the exported
//                       kinds (kernels, memcpy, memset, sync, api, nvtx, nccl,
//                       steps, counters, ops).
//
// The parsers only check the text (nothing needs the timeline), so a bad value
// is refused before anything is merged or written. Their messages name the
// option and the value: "--window '10:abc': ...".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aon/format/records.h"
#include "aon/base/status.h"

namespace aon::merge {

// Default of --max-trace-records: a full trace.json beyond this is not written;
// the overview and the Perfetto trace always are. Chrome's trace viewer fails
// near 256 MB of JSON, and trace.json takes ~375 B per record (bench/RESULTS.md,
// "Viewer files"): 500 k records, ~190 MB. Writing a bigger one by default cost
// more CPU than the whole timeline for a file nothing opens.
inline constexpr uint64_t kDefaultMaxTraceRecords = 500'000;

// One side of --window.
struct WindowEdge {
  bool set = false;       // false: open on this side
  bool absolute = false;  // "<N>ns": on the timeline clock; else relative to start_ns
  uint64_t ns = 0;

  // The edge on the timeline clock, given the timeline's start_ns; `open` when unset.
  uint64_t Resolve(uint64_t start_ns, uint64_t open) const;
};

struct ExportFilter {
  WindowEdge start, end;                             // kept: start <= t, t < end (overlap)
  std::vector<std::pair<uint32_t, uint32_t>> ranks;  // inclusive, sorted, merged; empty = all
  std::vector<RecordKind> kinds;                     // sorted, unique; empty = all exported

  bool HasWindow() const { return start.set || end.set; }
  bool empty() const { return !HasWindow() && ranks.empty() && kinds.empty(); }
  bool KeepsRank(uint32_t rank) const;
  bool KeepsKind(RecordKind kind) const;

  // Canonical texts of the three parts ("" when not filtered): "10s:20s" /
  // "1000ns:", "0-3,8", "kernels,nccl".
  std::string WindowText() const;
  std::string RanksText() const;
  std::string KindsText() const;
  // For file names: "10s-20s", "start-5s", "30s-end", joined with "_" to
  // "ranks0-3,8" and "kernels,nccl"; "" for an empty filter.
  std::string Label() const;
  // For messages: "window 10s:20s, ranks 0-3,8, kinds kernels,nccl" ("everything").
  std::string Describe() const;
};

// Each parser sets its part of *filter, or returns InvalidArgument naming the
// option and the value and leaves *filter unchanged.
Status ParseWindow(std::string_view text, ExportFilter* filter);
Status ParseRankList(std::string_view text, ExportFilter* filter);
Status ParseKindList(std::string_view text, ExportFilter* filter);

// The kinds a viewer export holds: every RecordKind but external_correlation.
bool IsExportedKind(RecordKind kind);

// "<dir>/trace.json" for an empty filter, else "<dir>/trace-<Label()>.json".
std::string FilteredTracePath(const std::string& dir, const ExportFilter& filter);

}  // namespace aon::merge
