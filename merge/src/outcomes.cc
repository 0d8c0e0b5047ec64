#include "outcomes.h"

#include <algorithm>
#include <string>
#include <utility>

#include "exchange.h"

namespace aon::merge {
namespace {

constexpr const char* kSalvagedNote =
    "collector stopped before finishing this rank; records up to its last flush";

}  // namespace

ProcessOutcome OutcomeOf(const Status& local, const RecordsMerged& merged,
                         const std::vector<RankInput>& inputs) {
  ProcessOutcome out;
  out.status = StatusMessage::Of(local);
  out.written = merged.written;
  for (const RankInput& in : inputs) {
    const RankMetadata& m = in.file->found.meta;
    RankResult& r = out.ranks.emplace_back();
    r.rank = in.rank;
    r.records = in.outcome->records;
    r.first_ns = in.first_ns;
    r.last_ns = in.last_ns;
    r.bad_string_ids = in.bad_string_ids;
    r.damaged = in.damaged;
    r.status = in.outcome->status;
    r.message = in.outcome->message;
    r.nccl_gpu_clock_offset_ns = m.nccl_gpu_clock_offset_ns;
    r.nccl_gpu_clock_pairs = m.nccl_gpu_clock_pairs;
    r.nccl_gpu_clock_spread_ns = m.nccl_gpu_clock_spread_ns;
    r.notes = m.notes;
    r.problems = in.problems;
    for (DeviceInfo d : m.devices) {
      ForEachStringId(
          d, [&](uint32_t& id) { id = id < in.string_map.size() ? in.string_map[id] : 0; });
      r.devices.push_back(d);
    }
  }
  return out;
}

Status GatherOutcomes(MergeComm& comm, const ProcessOutcome& mine, const MergedRanks& merged,
                      MergeReport* report, JobOutcome* outcome) {
  AON_ASSIGN_OR_RETURN(std::vector<ProcessOutcome> all, AllgatherMessage(comm, mine));
  {
    std::vector<StatusMessage> statuses;
    for (const ProcessOutcome& o : all) statuses.push_back(o.status);
    AON_RETURN_IF_ERROR(FirstFailure(statuses, comm.rank()));
  }
  const uint32_t world = report->world_size;
  std::vector<Candidate*> file_of(world, nullptr);
  for (const auto& [rank, file] : merged) file_of[rank] = file;

  *outcome = JobOutcome{};
  outcome->first_ns.assign(world, UINT64_MAX);
  outcome->last_ns.assign(world, 0);
  outcome->bad_string_ids.assign(world, 0);
  outcome->damaged.assign(world, {});
  std::vector<std::vector<std::string>> rank_problems(world);
  for (size_t q = 0; q < all.size(); ++q) {
    ProcessOutcome& o = all[q];
    for (size_t k = 0; k < kRecordKindCount; ++k) outcome->written_by[k].push_back(o.written[k]);
    for (RankResult& r : o.ranks) {
      if (r.rank >= world || file_of[r.rank] == nullptr) {
        return Internal("merge process " + std::to_string(q) + " reports rank " +
                        std::to_string(r.rank) + ", which is not merged");
      }
      RankOutcome& ro = report->ranks[r.rank];
      RankMetadata& m = file_of[r.rank]->found.meta;
      ro.records = r.records;
      outcome->first_ns[r.rank] = r.first_ns;
      outcome->last_ns[r.rank] = r.last_ns;
      outcome->bad_string_ids[r.rank] = r.bad_string_ids;
      ro.status = r.status;
      ro.message = std::move(r.message);
      outcome->damaged[r.rank] = r.damaged;
      if (r.bad_string_ids > 0) {  // names shown as "": the rank is not whole
        if (ro.status == RankStatus::kOk) ro.status = RankStatus::kDamaged;
        ro.message += (ro.message.empty() ? "" : "; ") + std::to_string(r.bad_string_ids) +
                      " string ids beyond its string table (those names merged as \"\")";
      }
      if (!m.unwritten_why.empty()) {  // records its writer had and could not write
        uint64_t n = 0;
        for (uint64_t u : m.unwritten) n += u;
        if (ro.status == RankStatus::kOk) ro.status = RankStatus::kDamaged;
        ro.message += (ro.message.empty() ? "" : "; ") + std::to_string(n) +
                      " of its records could not be written: " + m.unwritten_why;
      }
      m.nccl_gpu_clock_offset_ns = r.nccl_gpu_clock_offset_ns;
      m.nccl_gpu_clock_pairs = r.nccl_gpu_clock_pairs;
      m.nccl_gpu_clock_spread_ns = r.nccl_gpu_clock_spread_ns;
      m.notes = std::move(r.notes);
      rank_problems[r.rank] = std::move(r.problems);
      for (const DeviceInfo& d : r.devices) outcome->devices.push_back({r.rank, 0, d});
    }
  }
  std::stable_sort(outcome->devices.begin(), outcome->devices.end(),
                   [](const auto& a, const auto& b) { return a.rank < b.rank; });
  for (auto& lines : rank_problems) {
    for (std::string& line : lines) report->problems.push_back(std::move(line));
  }
  for (const auto& [rank, file] : merged) {
    // Salvaged .partial files: say how far they go.
    RankOutcome& o = report->ranks[rank];
    if (!file->partial || o.status != RankStatus::kTruncated) continue;
    std::string& msg = o.message;
    const std::string damage = msg;  // a table it could not read, said already
    msg = file->path + ": " + kSalvagedNote + "; ";
    msg += outcome->first_ns[rank] != UINT64_MAX
               ? "last record at " + std::to_string(outcome->last_ns[rank]) + " ns (timeline clock)"
               : std::string("no records were flushed");
    if (file->found.meta.truncated) msg += "; the process ended without finishing (killed?)";
    if (!file->found.damage.empty()) msg += "; " + file->found.damage;
    if (!damage.empty()) msg += "; " + damage;
    report->problems.push_back(msg);
  }
  return Status::Ok();
}

}  // namespace aon::merge
