// Phase 6, the timeline: where the records go (phase 4 writes them) and what
// process 0 writes around them.
//
// With one process the records are written into the timeline itself. With
// several, each writes one time range of every kind into its own shard file
// (<stem>.shards.partial/shard-NNNNN.h5 while merging), and the timeline's
// record tables are HDF5 virtual datasets over the shards, in process order
// (one piece per process and kind; docs/trace-format.md, "Sharded timelines").
// Commit: the old timeline goes first, so that no complete-looking timeline
// ever points at shards of another merge; then the shard directory is swapped
// in and the timeline renamed. One process: a stale shard directory (of an
// earlier sharded merge of this job) is removed afterwards.
#pragma once

#include <memory>
#include <string>

#include "aon/merge/merge_types.h"
#include "aon/merge/merge_comm.h"
#include "aon/base/status.h"
#include "aon/format/string_table.h"
#include "aon/format/trace_file.h"
#include "candidate.h"
#include "outcomes.h"

namespace aon::merge {

struct TimelineTarget {
  std::string timeline_path;
  bool sharded = false;   // several processes
  std::string shard_dir;  // "<dir>/<stem>.shards" next to the timeline
  std::string shard_tmp;  // shard_dir + ".partial", while merging
};
TimelineTarget TimelineTargetOf(const std::string& timeline_path, int procs);

// Collective: where this process appends its records. Sharded: process 0
// (re)creates the shard directory, every process creates its shard in it (a
// process that cannot see it fails all of them). One process: the timeline.
StatusOr<std::unique_ptr<TraceWriter>> CreateRecordOutput(MergeComm& comm,
                                                          const TimelineTarget& target,
                                                          const WriteOptions& options);

// A shard's own attributes, then closes it.
Status FinishShard(TraceWriter& shard, const TimelineTarget& target, int process);

// Process 0: the record tables (virtual datasets over the shards, or `out`
// itself), /meta/devices, /meta/ranks, /strings and the /meta attributes; then
// the commit. Fills report->records, start_ns, end_ns, dropped, job_id,
// shard_dir, timeline_path, and adds the last problems (bad string ids, job id
// disagreements) before they are stored.
Status WriteTimeline(const TimelineTarget& target, const WriteOptions& options,
                     std::unique_ptr<TraceWriter> out, const JobOutcome& outcome,
                     const MergedRanks& merged, StringTable& strings, MergeReport* report);

}  // namespace aon::merge
