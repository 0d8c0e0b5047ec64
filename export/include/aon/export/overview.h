// A downsampled overview of a whole merged timeline (overview.json), in the
// Chrome trace-event format so that ui.perfetto.dev and chrome://tracing open
// it. Its size depends on the number of ranks and bins, not on the number of
// records, so it stays usable when the full trace.json is too big to load.
//
// The run [start_ns, end_ns] of the timeline is cut into fixed-width bins: the
// width is the smallest 1/2/5 x 10^k ns that needs at most `max_bins` bins
// (fewer bins per rank for very large jobs: at most max_total_bins over all
// ranks, at least min_bins per rank). Per rank (pid = rank):
//   "GPU busy"  counter {"fraction"}: share of the bin during which any kernel,
//               memcpy or memset of the rank ran (union of their intervals);
//   "NCCL busy" counter {"fraction"}: the same for NCCL collective and p2p
//               operations (start to end, as the NCCL slices of trace.json);
//   "kernels"   counter {"per bin"}: kernels that started in the bin;
//   NVTX top-level ranges (depth 0) longer than a bin: push/pop as "X" slices on
//   their thread, start/end as async "b"/"e" pairs; at most 2 x bins per rank,
//   the longest ones (metadata.nvtx_ranges_omitted counts the rest).
// A counter sample is written only when the value changes, and a 0 sample at the
// end of the run closes each track. docs/trace-format.md documents the file.
#pragma once

#include <cstdint>
#include <string>

#include "aon/base/status.h"

namespace aon::merge {

struct OverviewOptions {
  uint32_t max_bins = 2000;             // per rank and track
  uint32_t min_bins = 100;              // per rank, whatever the number of ranks
  uint64_t max_total_bins = 1'000'000;  // over all ranks, per track
};

struct OverviewStats {
  uint64_t bin_ns = 0;
  uint32_t bins = 0;
  uint32_t ranks = 0;
  uint64_t events = 0;               // every event written, metadata included
  uint64_t nvtx_ranges = 0;          // NVTX slices written
  uint64_t nvtx_ranges_omitted = 0;  // top-level ranges longer than a bin beyond the cap
};

// Reads the timeline at `timeline_path` and writes the overview to `json_path`
// (as <json_path>.partial, then renamed).
Status WriteOverview(const std::string& timeline_path, const std::string& json_path,
                     const OverviewOptions& options = {}, OverviewStats* stats = nullptr);

}  // namespace aon::merge
