// Export of a merged timeline to Perfetto's protobuf trace format: the default
// viewer file of aon-merge (trace.pftrace) and `aon-export --format perfetto`.
// The same events as the Chrome JSON (chrome_trace.h; both come from one model,
// export/src/trace_events.h), plus chained flows between the ranks' instances of
// each NCCL collective, without a record limit: written streaming in bounded
// memory, compressed in chunks, split by time into files of at most max_file_bytes,
// listed by an index (export/README.md, "Perfetto trace"; docs/trace-format.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aon/base/status.h"
#include "aon/export/export_filter.h"
#include "aon/export/perfetto_files.h"

namespace aon::merge {

struct PerfettoExportOptions {
  ExportFilter filter;  // empty = everything
  uint64_t max_file_bytes = kDefaultPerfettoFileBytes;
  // Deflate level of the compressed chunks: 1 (fast) .. 9 (small; libdeflate
  // goes to 12); 1: 2.6x less CPU than 6 for 1.27x the bytes (export/README.md,
  // "Perfetto trace").
  int level = 1;
  // Compressing threads beside the encoding one; 0: one per CPU but one, at
  // least 1, at most 4.
  unsigned threads = 0;
};

struct PerfettoTraceStats {
  uint64_t records = 0;  // timeline records exported
  uint64_t events = 0;   // slices, instants and counter samples
  uint64_t flows = 0;    // API -> GPU flows begun
  std::vector<PerfettoFileInfo> files;
  std::string index_path;
};

// "<dir>/trace.pftrace", or "<dir>/trace-<filter label>.pftrace".
std::string FilteredPerfettoPath(const std::string& dir, const ExportFilter& filter);

// Reads the timeline and writes the files and the index. Errors name the path.
Status ExportPerfettoTrace(const std::string& timeline_path, const std::string& path,
                           const PerfettoExportOptions& options,
                           PerfettoTraceStats* stats = nullptr);

}  // namespace aon::merge
