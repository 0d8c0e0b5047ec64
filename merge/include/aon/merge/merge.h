// aon::merge: turns a job directory of per-rank trace files into one cluster
// timeline (HDF5, FileKind::kTimeline). The viewer outputs (Chrome/Perfetto
// JSON, overview) are made from that timeline afterwards (merge_exports.h).
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
// Processes and memory: MergeOptions::comm runs it as several processes, each
// reading the rank files it is given (its node's, when the job directory is
// node-local) and writing one time range of the timeline into a shard
// (<timeline stem>.shards/shard-NNNNN.h5) that the timeline's virtual datasets
// join; a process holds about memory_budget_bytes of records at a time (a
// sample sort in rounds), never a whole kind. Only process 0 fills *report with
// the totals and writes the timeline. merge/src/merge.cc lists the phases.
#pragma once

#include <string>

#include "aon/base/status.h"
#include "aon/merge/merge_types.h"

namespace aon::merge {

// options.timeline_path, or its default <job_dir>/timeline.h5.
std::string TimelinePath(const MergeOptions& options);

// Merges options.job_dir into the timeline. Fills *report as far as it got, also
// on error. Returns an error only when nothing could be merged (no readable rank
// file) or the timeline cannot be written; the message names the directory or
// the path.
Status MergeJob(const MergeOptions& options, MergeReport* report);

// "open 0.12 s (CPU 0.10), strings ..., total ...": the phase times of one
// process, with records/s against the records it read.
std::string FormatMergePhases(const MergeReport& report);

// The human summary printed by aon-merge: ranks merged / expected, bad ranks
// with reasons, records and drops per kind, output paths.
std::string FormatMergeSummary(const MergeReport& report);

}  // namespace aon::merge
