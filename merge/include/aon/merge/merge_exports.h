// The viewer outputs aon-merge writes after the merge, from the timeline
// MergeJob wrote: a downsampled overview of the whole run (overview.h), the
// Perfetto protobuf trace (perfetto_trace.h: any size, split into files) and the
// Chrome trace-event JSON while it is small (chrome_trace.h), of all of the run
// or of the part a filter selects. MergeJob produces only the timeline; the aon-merge program
// (merge/tools/aon_merge_main.cc) checks these outputs' paths before merging and
// writes them on process 0 once MergeJob returned.
#pragma once

#include <cstdint>
#include <string>

#include "aon/export/export_filter.h"
#include "aon/merge/merge.h"
#include "aon/export/overview.h"
#include "aon/export/perfetto_trace.h"
#include "aon/base/status.h"

namespace aon::merge {

struct MergeExportOptions {
  // "" = <job_dir>/trace.json, or <job_dir>/trace-<filter label>.json when
  // chrome_filter selects a part (FilteredTracePath).
  std::string chrome_path;
  bool write_chrome = true;
  ExportFilter chrome_filter;  // --window / --ranks / --kinds (both traces); empty = everything
  // More records than this in the Chrome export: it is not written (not an
  // error; MergeReport::chrome_not_written says why). 0 = no limit.
  uint64_t max_trace_records = kDefaultMaxTraceRecords;
  // "" = <job_dir>/trace.pftrace, or trace-<filter label>.pftrace.
  std::string perfetto_path;
  bool write_perfetto = true;
  uint64_t perfetto_max_file_bytes = kDefaultPerfettoFileBytes;
  std::string overview_path;  // "" = <job_dir>/overview.json
  bool write_overview = true;
  OverviewOptions overview_options;
};

// Fills in the default paths and refuses two outputs that name one file
// (InvalidArgument naming it). Call it before MergeJob: a clash writes nothing.
Status ResolveMergeExports(const MergeOptions& merge, MergeExportOptions* exports);

// After MergeJob wrote report->timeline_path (process 0 only): the overview
// first (small and always useful, also when the full Chrome JSON is over the
// limit or cannot be written), then the Perfetto trace, then the Chrome JSON.
// Sets report->overview_path, perfetto_path / perfetto_index / perfetto_files,
// chrome_path and chrome_records, or chrome_not_written when the JSON would hold
// more than max_trace_records records (not an error). Returns the first
// error of the Perfetto trace and the Chrome JSON, else the overview's; the
// message names the path. `exports` must have
// been resolved (ResolveMergeExports).
Status WriteMergeExports(const MergeExportOptions& exports, MergeReport* report);

}  // namespace aon::merge
