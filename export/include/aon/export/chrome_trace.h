// Export of a merged timeline to the Chrome trace-event JSON format, which
// ui.perfetto.dev and chrome://tracing both load.
//
// Mapping (merge/README.md has the details):
//   pid = rank ("rank R @ host", " [SYNTHETIC]" for synthetic sources);
//   GPU work on one track per (device, stream), "GPU <d> stream <s>";
//   CPU work (API calls, NVTX) on the OS thread's track (tid = OS thread id);
//   NCCL on a per-rank "NCCL" track; flows from an API call to the GPU work
//   with the same correlation id.
// ts/dur are microseconds with 3 decimals (exact ns) relative to the timeline's
// earliest start. The file is streamed, never held in memory, and written as
// <json_path>.partial then renamed, so a reader never sees half a file. Strings
// are escaped by aon/base/json_writer.h: invalid UTF-8 becomes U+FFFD, so strict
// parsers (Python's json, Perfetto) accept names captured from any process.
//
// A filtered export (ChromeExportOptions::filter, export_filter.h) keeps the
// records of the chosen ranks and kinds that overlap the window, whole (not
// clipped), with the same ts origin as the full export; flows only between
// records that are both kept; process/thread names only of what is kept.
#pragma once

#include <cstdint>
#include <string>

#include "aon/export/export_filter.h"
#include "aon/base/status.h"

namespace aon::merge {

struct ChromeTraceStats {
  uint64_t events = 0;   // every event written, metadata events included
  uint64_t flows = 0;    // API -> GPU flow arrows
  uint64_t records = 0;  // timeline records exported (the number max_records limits)
  // Set when the export was refused for holding more than max_records records;
  // `records` is then the count (exact without window/ranks, else max_records + 1).
  bool over_limit = false;
};

struct ChromeExportOptions {
  ExportFilter filter;       // empty = everything
  uint64_t max_records = 0;  // 0 = no limit; else more records -> nothing written
};

// Reads the timeline at `timeline_path` and writes `json_path`: everything.
Status ExportChromeTrace(const std::string& timeline_path, const std::string& json_path,
                         ChromeTraceStats* stats = nullptr);

// The same, for what options.filter selects. When the export would hold more
// than options.max_records records, writes nothing, sets stats->over_limit and
// returns Unavailable (the message names json_path, the count and the limit).
Status ExportChromeTrace(const std::string& timeline_path, const std::string& json_path,
                         const ChromeExportOptions& options, ChromeTraceStats* stats = nullptr);

}  // namespace aon::merge
