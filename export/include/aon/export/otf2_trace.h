// Export of a merged timeline to an OTF2 archive (`aon-export --format otf2`,
// `aon-merge --otf2 DIR`), for the Score-P tool family (Vampir, Scalasca,
// otf2-print): the events of the trace-event model (export/src/trace_events.h)
// with OTF2's own structure: ranks as processes on their hosts, GPUs as
// accelerator location groups with a location per stream, NCCL collectives as
// collective events on their communicators, GPU counters as metrics, the
// timeline clock as the archive's clock (export/README.md, "OTF2 archive").
// Written in passes over groups of ranks in bounded memory, at any size.
#pragma once

#include <cstdint>
#include <string>

#include "aon/export/export_filter.h"
#include "aon/export/otf2_limits.h"
#include "aon/base/status.h"

namespace aon::merge {

// Memory: OTF2 buffers events per location in chunks. The export runs in
// passes over groups of ranks whose locations, one chunk each, fit
// memory_bytes, and OTF2 flushes a location to its file when it would take the
// pool past memory_bytes; a rank with more locations than fit has a pass alone
// (its locations x chunk_bytes). Definitions (names, locations) grow with
// distinct names, not with events.
struct Otf2ExportOptions {
  ExportFilter filter;  // empty = everything
  uint64_t chunk_bytes = kOtf2MinChunkBytes;
  uint64_t memory_bytes = 128 << 20;
};

struct Otf2TraceStats {
  uint64_t records = 0;      // timeline records exported
  uint64_t events = 0;       // OTF2 events
  uint64_t collectives = 0;  // NCCL collectives written as collective events
  uint64_t collectives_as_regions = 0;  // overlapping another collective of their row
  uint64_t metrics = 0;      // counter samples
  uint64_t overlap_rows = 0;  // locations added for slices that do not nest in their row
  uint64_t locations = 0;
  uint32_t passes = 0;          // over groups of ranks
  uint64_t peak_pool_bytes = 0;
  std::string anchor;  // <dir>/traces.otf2, what otf2-print and Vampir open
};

// "<dir>/otf2", or "<dir>/otf2-<filter label>".
std::string FilteredOtf2Path(const std::string& dir, const ExportFilter& filter);

// Reads the timeline and writes the archive into `dir` (through dir.partial,
// renamed when complete; an older archive at `dir` whose anchor names AON as
// its creator is replaced, anything else there is refused). Errors name the path.
Status ExportOtf2Trace(const std::string& timeline_path, const std::string& dir,
                       const Otf2ExportOptions& options, Otf2TraceStats* stats = nullptr);

}  // namespace aon::merge
