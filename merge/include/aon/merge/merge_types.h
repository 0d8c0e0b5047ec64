// The merge's options, phases and per-rank outcomes: the types its phases (merge/src/) share
// with the entry point (merge.h), below both so that no phase includes the entry point.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "aon/merge/merge_comm.h"
#include "aon/format/records.h"
#include "aon/base/status.h"
#include "aon/format/trace_file.h"
#include "aon/format/trace_format.h"

namespace aon::merge {

// Schema of the timeline's /meta/devices table (rank + DeviceInfo fields).
const TableSchema& MergedDeviceSchema();

struct MergeOptions {
  std::string job_dir;
  std::string timeline_path;  // "" = <job_dir>/timeline.h5
  // Deflate level 1: on 64 ranks x 50 k records (2-core VM) the merge took
  // 3.69 s instead of 4.10 s at level 4, for 8.70 instead of 8.31 B per record.
  WriteOptions write_options = {.deflate_level = 1};
  size_t output_batch_records = 1 << 16;  // merged records buffered per HDF5 append
  // The merge processes (aon-merge under mpirun/srun passes MPI's); nullptr = this
  // process alone. Every process calls MergeJob with the same options.
  MergeComm* comm = nullptr;
  // Records held in memory at once by one process, about: more data is merged
  // in more rounds (each re-reads the blocks it needs), never all at once.
  uint64_t memory_budget_bytes = uint64_t{1} << 30;
  bool progress = false;  // a progress bar on stderr (process 0, when it is a terminal)
  // Rank files are opened by a child process, so that a libhdf5 crash on a
  // crafted file costs its rank only (merge/src/open.cc). The fuzz target opens
  // in its own process, where libFuzzer sees the coverage and the crashes.
  bool open_in_child = true;
  // A rank file whose opening takes longer (libhdf5 stuck in a crafted
  // structure) is left out as corrupt; its opener is killed.
  uint32_t open_timeout_s = 300;
};

// What one merge process spent its time on (merge/src/merge.cc lists the
// phases; kRead .. kWrite are parts of the record phase).
enum class MergePhase {
  kOpen,      // scan the job directory, open and validate the files, reconcile
  kStrings,   // unify the string tables
  kRead,      // read the rank tables, remap string ids, correct clocks, resolve NCCL
  kExchange,  // route records to their slabs, exchange them between processes
  kSort,      // order each slab's records by (start, rank, order in the rank file)
  kWrite,     // append them to the timeline or the shard (HDF5, compression)
  kTimeline,  // outcomes, the timeline's metadata, close and commit
  kCount
};
constexpr size_t kMergePhaseCount = static_cast<size_t>(MergePhase::kCount);
const char* MergePhaseName(MergePhase phase);

struct MergePhaseTimes {
  std::array<double, kMergePhaseCount> wall_s{};
  std::array<double, kMergePhaseCount> cpu_s{};  // this process's merging thread
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
  // The viewer outputs, set by WriteMergeExports (merge_exports.h) once written.
  std::string chrome_path;
  std::string overview_path;
  std::string perfetto_path;   // the Perfetto trace's first file
  std::string perfetto_index;  // its index (perfetto_trace.h)
  size_t perfetto_files = 0;
  // Set when the Chrome JSON was not written because it would hold more than
  // max_trace_records records: the reason and how to export a part instead.
  std::string chrome_not_written;
  uint64_t chrome_records = 0;  // records in the Chrome JSON written
  std::string job_id;
  uint32_t world_size = 0;
  std::vector<RankOutcome> ranks;                    // one per expected rank, in rank order
  std::vector<std::string> problems;                 // "<path>: <reason>", each file named once
  // What the capture did on request or trigger, from the rank files' notes:
  // "rank R: flight recorder dump N: <reason>: ..." (timeline attribute
  // capture_events, docs/trace-format.md).
  std::vector<std::string> capture_events;
  std::array<uint64_t, kRecordKindCount> records{};  // merged, per RecordKind
  std::array<uint64_t, kRecordKindCount> dropped{};  // sum over merged ranks
  uint64_t start_ns = 0;                             // earliest record start on the reference clock
  uint64_t end_ns = 0;                               // latest record end
  int procs = 1;                                     // merge processes
  int process = 0;                                   // this one (only process 0 has the totals)
  std::string shard_dir;                             // set when the records are in shards
  std::array<uint64_t, kRecordKindCount> rounds{};   // sort rounds per kind (memory budget)
  MergePhaseTimes phases;                            // this process's own
  uint64_t records_read = 0;                         // rows this process read (first pass)

  uint32_t ranks_ok() const;
};

}  // namespace aon::merge
