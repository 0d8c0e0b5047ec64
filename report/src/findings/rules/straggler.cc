// Straggler: the rank whose lateness costs the job most (its steady-state gain:
// union over its collectives of its arrival minus the second-last arrival;
// median per step x steps), when it arrives last at least half the time (or
// twice its fair share), or when it is late for most of the time the ranks
// spend waiting for a last one: a rank late by milliseconds at one collective
// of a step and tied within microseconds at the others (which of two tied ranks
// is "last" is noise) is the straggler though it is last at few of them. Most:
// half of all the lateness, three quarters with two ranks (where one of them
// always has half). Claims its own "host launched late" gaps and its gaps
// inside its slow range: that is its lateness.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "findings/rule.h"

namespace aon::report {

namespace {

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

bool IsStepName(const std::string& n) {
  return n == "step #" || n == "iteration #" || n == "iter #";
}

// The range (not NCCL's, not the step itself) that takes the most extra time per
// step on `rank` compared with the median of the other ranks.
std::string RangeEvidence(const Report& r, uint32_t rank, double* extra_per_step) {
  *extra_per_step = 0;
  std::string best;
  auto steps_of = [&](uint32_t q) {
    const size_t s = q < r.breakdown.size() ? r.breakdown[q].steps : 0;
    return s ? static_cast<double>(s)
             : static_cast<double>(std::max<size_t>(1, r.steps.typical_count));
  };
  for (const NvtxStat& s : r.nvtx) {
    if (s.name.rfind("NCCL:", 0) == 0 || IsStepName(s.name)) continue;
    auto it = s.per_rank_range_ns.find(rank);
    const double mine =
        it == s.per_rank_range_ns.end() ? 0 : static_cast<double>(it->second) / steps_of(rank);
    std::vector<double> others;
    for (uint32_t q = 0; q < r.world_size; ++q) {
      if (q == rank || !RankMerged(r.ranks[q].status)) continue;
      auto jt = s.per_rank_range_ns.find(q);
      others.push_back(
          jt == s.per_rank_range_ns.end() ? 0 : static_cast<double>(jt->second) / steps_of(q));
    }
    const double extra = mine - MedianOf(others);
    if (extra > *extra_per_step) *extra_per_step = extra, best = s.name;
  }
  return best;
}

std::optional<Detection> DetectStraggler(const RuleInput& in, Claims* claims) {
  const Report& r = in.report;
  const StragglerStats* best = nullptr;
  for (const StragglerStats& s : r.comm.stragglers) {
    if (s.collectives < 2 || s.steady_gain_ns == 0) continue;
    if (!best || s.steady_gain_ns > best->steady_gain_ns) best = &s;
  }
  uint32_t nranks = 0;
  double all_lateness = 0;
  for (const StragglerStats& s : r.comm.stragglers) {
    nranks += s.collectives > 0;
    all_lateness += static_cast<double>(s.gain_ns);
  }
  if (!best || nranks < 2 || static_cast<double>(best->steady_gain_ns) < in.min_gain_ns)
    return std::nullopt;
  const double lateness_share =
      all_lateness > 0 ? static_cast<double>(best->gain_ns) / all_lateness : 0;
  const bool often_last = best->last_fraction >= 0.5 || best->last_fraction >= 2.0 / nranks;
  const bool most_lateness = lateness_share >= (nranks == 2 ? 0.75 : 0.5);
  if (!often_last && !most_lateness) return std::nullopt;
  const double lost = static_cast<double>(best->steady_lost_ns);
  Detection d;
  d.rank = static_cast<int>(best->rank);
  d.gain_ns = static_cast<double>(best->steady_gain_ns);
  d.values["rank"] = std::to_string(best->rank);
  d.values["last_share"] = Percent(best->last_fraction);
  d.values["collectives"] = std::to_string(best->collectives);
  d.values["lost"] = in.PerStepText(lost);
  d.values["lateness_share"] = Percent(lateness_share);
  double extra = 0;
  std::string range = RangeEvidence(r, best->rank, &extra);
  if (!range.empty() && extra > 0) {
    d.values["range"] = range;
    d.values["range_extra"] = FormatDuration(extra);
  } else {
    range.clear();
    d.values["mean_lateness"] = FormatDuration(
        best->last_count ? static_cast<double>(best->gain_ns) / best->last_count : 0);
  }
  // Its own GPU idle time on the same cause: host late (launching, or running
  // other code), or anything inside that range.
  uint64_t waits = r.idle.Steady(best->rank, GapCause::kHostLate) +
                   r.idle.Steady(best->rank, GapCause::kHostWork);
  if (!range.empty()) {
    for (GapCause c : {GapCause::kHostSync, GapCause::kSyncCopy, GapCause::kOther}) {
      const uint64_t all = r.idle.Steady(best->rank, c),
                     outside = r.idle.Steady(best->rank, c, range);
      waits += all > outside ? all - outside : 0;
    }
  }
  if (waits > 0) d.values["host_waits"] = in.PerStepText(static_cast<double>(waits));
  if (!r.comm.skew_trustworthy) d.values["unsynchronized_clocks"] = "";
  d.numbers = {{"last_fraction", best->last_fraction},
               {"last_count", static_cast<double>(best->last_count)},
               {"collectives", static_cast<double>(best->collectives)},
               {"lateness_share", lateness_share},
               {"lost_ns", lost},
               {"lost_per_step_ns", in.PerStep(lost)},
               {"lost_whole_run_ns", static_cast<double>(best->caused_lost_ns)},
               {"gain_whole_run_ns", static_cast<double>(best->gain_ns)},
               {"range_extra_per_step_ns", extra}};
  claims->straggler_rank = d.rank;
  claims->straggler_range = range;
  return d;
}

}  // namespace

AON_FINDING_RULE(straggler) {
  static constexpr FindingRule kRule{
      .id = "straggler",
      .precedence = 10,
      .uses = Uses({RecordKind::kNccl, RecordKind::kKernel, RecordKind::kSteps}),
      .across_ranks = true,
      .detects = "one rank arrives last at >= 50 % of collectives (or twice its share), or is "
                 "late for most of the ranks' waiting at collectives",
      .action =
          "Make rank {rank} keep pace: it arrives last at {last_share} of {collectives} "
          "collectives, costing the other ranks {lost} of waiting",
      .evidence =
          "it causes {lateness_share} of the waiting for a last rank[; its \"{range}\" range "
          "takes {range_extra} more per step than on the other ranks][; mean lateness when "
          "last: {mean_lateness}][; its GPU waits {host_waits} for its host]"
          "[{unsynchronized_clocks} (clocks not synchronized across hosts: skews approximate)]",
      .detect = DetectStraggler,
  };
  return kRule;
}

}  // namespace aon::report
