// aon::merge: turns a job directory of per-rank trace files into one cluster
// timeline (HDF5, FileKind::kTimeline) and, optionally, a Chrome/Perfetto JSON.
//
// What the timeline holds (docs/trace-format.md has the layout):
//   /records/<kind>  Merged<T> for every RecordKind: rank column + record, sorted
//                    by start time on the reference clock (ties: rank, then the
//                    record's order in its rank file); string ids point into ONE
//                    unified string table.
//   /meta/ranks      RankSummary, one row per expected rank, bad ones included.
//   /meta/devices    Merged<DeviceInfo>: every rank's GPUs (MergedDeviceSchema()).
//   /meta attrs      job_id, world_size, ranks_ok, ranks_bad, clock_note, ... (see
//                    merge/README.md for the full list).
//
// Bad input never stops the merge: every unreadable, corrupt, truncated, newer,
// duplicate or incomplete file is named in MergeReport::problems (and in the
// timeline's "problems" attribute) and everything valid is still merged.
//
// Memory: one record kind of all ranks is in memory at a time (each rank's
// records sorted, then k-way merged into bounded output batches). The streaming
// MPI merge replaces this when it lands.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "aon/records.h"
#include "aon/status.h"
#include "aon/trace_file.h"
#include "aon/trace_format.h"

namespace aon::merge {

// Schema of the timeline's /meta/devices table (rank + DeviceInfo fields).
const TableSchema& MergedDeviceSchema();

struct MergeOptions {
  std::string job_dir;
  std::string timeline_path;  // "" = <job_dir>/timeline.h5
  std::string chrome_path;    // "" = <job_dir>/trace.json
  bool write_chrome = true;
  WriteOptions write_options;
  size_t output_batch_records = 1 << 16;  // merged records buffered per HDF5 append
};

// The outcome for one expected rank (0..world_size-1).
struct RankOutcome {
  uint32_t rank = 0;
  RankStatus status = RankStatus::kMissing;
  std::string path;     // the file merged or rejected; "" when there was none
  std::string message;  // why the rank is not ok ("" when ok)
  std::string host;
  std::string source;  // "cupti", "synthetic", ... ("" when unreadable)
  uint64_t records = 0;
  uint64_t dropped = 0;
};

struct MergeReport {
  std::string job_dir;
  std::string timeline_path;  // set once written
  std::string chrome_path;    // set once written
  std::string job_id;
  uint32_t world_size = 0;
  std::vector<RankOutcome> ranks;                    // one per expected rank, in rank order
  std::vector<std::string> problems;                 // "<path>: <reason>", each file named once
  std::array<uint64_t, kRecordKindCount> records{};  // merged, per RecordKind
  std::array<uint64_t, kRecordKindCount> dropped{};  // sum over merged ranks
  uint64_t start_ns = 0;                             // earliest record start on the reference clock
  uint64_t end_ns = 0;                               // latest record end

  uint32_t ranks_ok() const;
};

// Merges options.job_dir. Fills *report as far as it got, also on error. Returns
// an error only when nothing could be merged (no readable rank file) or an
// output cannot be written; the message names the directory or the path.
Status MergeJob(const MergeOptions& options, MergeReport* report);

// The human summary printed by aon-merge: ranks merged / expected, bad ranks
// with reasons, records and drops per kind, output paths.
std::string FormatMergeSummary(const MergeReport& report);

}  // namespace aon::merge
