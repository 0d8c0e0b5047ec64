// Phase 5, outcomes: what each process did (ProcessOutcome, messages.h: its
// status, rows written per kind, and per rank merged: records, first/last
// times, bad string ids, a mid-merge failure, the NCCL calibration, problems,
// devices) goes to every process. All agree on the first failure; the results
// are applied to the report in rank order, and process 0 writes the timeline
// from them (write_timeline.h).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "aon/merge/merge_types.h"
#include "aon/merge/merge_comm.h"
#include "aon/format/records.h"
#include "aon/base/status.h"
#include "candidate.h"
#include "messages.h"
#include "records.h"

namespace aon::merge {

struct JobOutcome {
  std::array<std::vector<uint64_t>, kRecordKindCount> written_by;  // [kind][process]
  // Per expected rank, on the timeline clock; first_ns UINT64_MAX: no timed record.
  std::vector<uint64_t> first_ns, last_ns, bad_string_ids;
  // Per rank and kind: records in its file the merge could not read.
  std::vector<std::array<uint64_t, kRecordKindCount>> damaged;
  std::vector<Merged<DeviceInfo>> devices;  // every merged rank's GPUs, by rank
};

// This process's outcome: `local` is its status after writing its records.
ProcessOutcome OutcomeOf(const Status& local, const RecordsMerged& merged,
                         const std::vector<RankInput>& inputs);

// Collective. Returns the first failure of any process (named by process), or
// fills *outcome and applies the rank results to report->ranks, the merged
// candidates' metadata (NCCL calibration, notes) and report->problems: the
// ranks' own problems, then how far each salvaged .partial file goes.
Status GatherOutcomes(MergeComm& comm, const ProcessOutcome& mine, const MergedRanks& merged,
                      MergeReport* report, JobOutcome* outcome);

}  // namespace aon::merge
