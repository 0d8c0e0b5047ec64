// Merge of a job directory by one or more processes (merge.h says what it
// produces; docs/trace-format.md has the sharded layout).
//
// Every process runs every phase; MergeComm makes them collective, and with one
// process (SoloComm) they reduce to the plain serial merge. Processes exchange
// only the typed messages of messages.h.
//  1. Scan (scan.h): each process lists the job directory as it sees it; the
//     lists are exchanged and every file goes to one process that sees it
//     (largest files first, to the least loaded), so a node-local directory is
//     read on its node and a shared one is spread evenly.
//  2. Open (open.h): each process opens and validates its files; what it found
//     (status, metadata, tables present, problems) is exchanged, so that every
//     process holds the same candidates.
//  3. Reconcile (reconcile.h): a pure function of the candidates decides which
//     file gives each rank (missing, duplicate, salvaged .partial, superseded,
//     truncated, corrupt ...); every process takes the same decisions. Then
//     followers get their node leader's clock (aon/format/clock_leaders.h).
//  4. Strings (unify_strings.h): each process unites its ranks' string tables; the
//     unions are exchanged and interned in process order: one table, the same
//     everywhere.
//  5. Records (records.h), kind by kind, a sample sort on start time in bounded
//     memory: a first pass reads each rank's table in blocks (strings remapped,
//     clock corrected), notes each block's time range and samples start times;
//     the samples cut the time axis into slabs, process p owning slabs
//     [p * R, (p + 1) * R); in round j every process sends each record of slab
//     p * R + j to p (kept from the first pass when everything fits the memory
//     budget, otherwise re-read from the blocks that overlap), and p appends it
//     to its output in (start, rank, order in the rank's file) order, a k-way
//     merge of the ranks' sorted runs (its own slab is merged where it lies,
//     never copied). R grows with the data so that a round fits the budget.
//  6. Outcomes (outcomes.h): per rank counts, first/last times, problems, NCCL
//     calibration and devices go to every process, which agree on the first
//     failure.
//  7. Timeline (write_timeline.h): process 0 writes it. With one process the
//     records were written into it directly; with several, each wrote one time
//     range of every kind into its own shard file and the timeline's tables are
//     HDF5 virtual datasets over the shards, in process order (one piece per
//     process and kind).
// The viewer exports (overview, Chrome JSON) are not part of the merge: the
// aon-merge program makes them from the timeline (merge_exports.h).
#include "aon/merge/merge.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <utility>

#include "aon/format/clock_leaders.h"
#include "open.h"
#include "outcomes.h"
#include "phase_clock.h"
#include "reconcile.h"
#include "records.h"
#include "scan.h"
#include "unify_strings.h"
#include "write_timeline.h"

namespace aon::merge {

const TableSchema& MergedDeviceSchema() { return MergedSchema(DeviceInfoSchema()); }

uint32_t MergeReport::ranks_ok() const {
  return static_cast<uint32_t>(std::count_if(ranks.begin(), ranks.end(), [](const RankOutcome& r) {
    return r.status == RankStatus::kOk;
  }));
}

std::string TimelinePath(const MergeOptions& options) {
  return options.timeline_path.empty()
             ? (std::filesystem::path(options.job_dir) / "timeline.h5").string()
             : options.timeline_path;
}

Status MergeJob(const MergeOptions& options, MergeReport* report) {
  SoloComm solo;
  MergeComm& comm = options.comm != nullptr ? *options.comm : solo;
  *report = MergeReport{};
  report->job_dir = options.job_dir;
  report->procs = comm.size();
  report->process = comm.rank();
  const TimelineTarget target = TimelineTargetOf(TimelinePath(options), comm.size());
  // A sharded merge that fails leaves no shard directory behind (issue #18): the
  // shards go to <stem>.shards.partial, which a successful commit renames, so
  // whatever is left of it when process 0 returns belongs to a failed merge. A
  // failure is agreed by every process, so none still writes there.
  struct RemoveShardsLeftBehind {
    const TimelineTarget& target;
    bool armed;
    ~RemoveShardsLeftBehind() {
      std::error_code ec;
      if (armed) std::filesystem::remove_all(target.shard_tmp, ec);
    }
  } remove_left_behind{target, target.sharded && comm.rank() == 0};

  // 1, 2. Scan, open.
  PhaseClock opening(&report->phases, MergePhase::kOpen);
  AON_ASSIGN_OR_RETURN(const JobListing listing, ScanJob(comm, options.job_dir));
  AON_ASSIGN_OR_RETURN(
      OpenedJob job,
      OpenJob(comm, listing,
              OpenSettings{options.open_in_child, std::chrono::seconds(options.open_timeout_s),
                           std::max(1u, options.write_options.compress_threads)}));

  // 3. Reconcile.
  Reconciliation decided = Reconcile(options.job_dir, job.candidates);
  report->world_size = decided.world_size;
  report->ranks = std::move(decided.ranks);
  report->problems = std::move(decided.problems);
  // Ranks whose collector died: which part came from where (join.h).
  for (const std::string& line : listing.join_problems) report->problems.push_back(line);
  for (const std::string& line : listing.joined) report->problems.push_back(line);
  for (uint32_t r = 0; r < report->world_size; ++r) {
    if (!decided.merged_from[r]) continue;
    const RankMetadata& m = job.candidates[*decided.merged_from[r]].found.meta;
    for (const std::string& n : m.notes) {
      if (n.rfind("flight recorder dump ", 0) == 0)
        report->capture_events.push_back("rank " + std::to_string(r) + ": " + n);
    }
    if (m.collector_lost_ns == 0) continue;
    RankOutcome& o = report->ranks[r];
    for (const std::string& n : m.notes) {
      if (n.find("aon-merge joined") != std::string::npos) o.message = n;
    }
    if (o.message.empty()) {
      o.message = "the node collector exited while this rank ran; merged from " + o.path +
                  ", the rank's own file: what the collector had flushed is not in it";
    }
  }
  if (decided.nothing_to_merge()) {
    std::string msg = "nothing to merge in '" + options.job_dir + "': no rank file could be read";
    for (const std::string& p : report->problems) msg += "\n  " + p;
    return DataLoss(msg);
  }
  MergedRanks merged;
  for (uint32_t r = 0; r < report->world_size; ++r) {
    if (decided.merged_from[r]) merged.emplace_back(r, &job.candidates[*decided.merged_from[r]]);
  }
  // Ranks that share their node leader's clock get its measurement (every
  // process has every rank's metadata, so all decide the same).
  {
    std::vector<RankMetadata*> metas;
    for (const auto& [rank, file] : merged) metas.push_back(&file->found.meta);
    for (std::string& line : ApplyClockLeaders(metas)) report->problems.push_back(std::move(line));
  }

  opening.Stop();

  // 4. Strings. This process merges the ranks whose files it opened.
  PhaseClock unifying(&report->phases, MergePhase::kStrings);
  std::vector<std::pair<uint32_t, size_t>> mine;  // rank, candidate
  for (uint32_t r = 0; r < report->world_size; ++r) {
    const std::optional<size_t> i = decided.merged_from[r];
    if (i && job.candidates[*i].opened_by == comm.rank()) mine.emplace_back(r, *i);
  }
  std::vector<const StringTable*> my_tables;
  for (const auto& [rank, i] : mine) my_tables.push_back(&job.strings[i]);
  AON_ASSIGN_OR_RETURN(StringTable strings, UnifyStrings(comm, my_tables));
  std::vector<RankInput> inputs;
  for (const auto& [rank, i] : mine) {
    RankInput& in = inputs.emplace_back();
    in.rank = rank;
    in.file = &job.candidates[i];
    in.outcome = &report->ranks[rank];
    in.clock = in.file->found.meta.clock();
    in.string_map = MapStrings(job.strings[i], strings);
    job.strings[i] = StringTable();  // the map is all that is needed now
  }

  unifying.Stop();

  // 5. Records, into this process's shard or the timeline itself.
  AON_ASSIGN_OR_RETURN(std::unique_ptr<TraceWriter> out,
                       CreateRecordOutput(comm, target, options.write_options));
  AON_ASSIGN_OR_RETURN(const RecordsMerged done,
                       MergeRecords(comm, inputs, *out,
                                    {.budget_bytes = options.memory_budget_bytes,
                                     .batch_records = options.output_batch_records,
                                     .progress = options.progress,
                                     .phases = &report->phases,
                                     .threads = options.write_options.compress_threads}));
  report->rounds = done.rounds;
  report->records_read = done.read;
  const PhaseClock finishing(&report->phases, MergePhase::kTimeline);
  Status local = done.local;
  if (local.ok() && target.sharded) local = FinishShard(*out, target, comm.rank());

  // 6. Outcomes.
  JobOutcome outcome;
  AON_RETURN_IF_ERROR(
      GatherOutcomes(comm, OutcomeOf(local, done, inputs), merged, report, &outcome));
  if (comm.rank() != 0) return Status::Ok();  // process 0 writes the timeline

  // 7. The timeline.
  return WriteTimeline(target, options.write_options, std::move(out), outcome, merged, strings,
                       report);
}

}  // namespace aon::merge
