// RankFindings(): the findings of a report, ranked by estimated time to gain.
//
// Gains are wall-time estimates over the whole run, deliberately simple:
//   straggler        sum over the collectives where the rank arrived last of
//                    (its arrival - the second-last arrival): the step would end
//                    that much earlier if it kept pace;
//   exposed comm     communication not overlapped by compute, minus the time the
//                    rank only waited for late ranks (that belongs to the straggler);
//   idle causes      the GPU gaps of that cause on the worst rank (median per
//                    step x steps, so warm-up steps don't dominate);
//   pageable copies  the sync-copy gaps plus half the pageable copy time (pinned
//                    memory roughly doubles PCIe throughput);
//   imbalance        the slowest rank's compute minus the mean.
// When one rank is the straggler, its own "host launched late" gaps, and its gaps
// inside the range that makes it late, are the same time seen from the other side:
// they are folded into the straggler finding.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "aon/report/report.h"

namespace aon::report {

namespace {

std::string Percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f %%", f * 100);
  return buf;
}

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
      if (q == rank || r.ranks[q].status != RankStatus::kOk) continue;
      auto jt = s.per_rank_range_ns.find(q);
      others.push_back(
          jt == s.per_rank_range_ns.end() ? 0 : static_cast<double>(jt->second) / steps_of(q));
    }
    const double extra = mine - MedianOf(others);
    if (extra > *extra_per_step) *extra_per_step = extra, best = s.name;
  }
  return best;
}

std::string TopNvtx(const std::map<std::string, uint64_t>& m) {
  std::string best;
  uint64_t v = 0;
  for (const auto& [name, ns] : m) {
    if (!name.empty() && ns > v) best = name, v = ns;
  }
  return best;
}

}  // namespace

std::vector<Finding> RankFindings(const Report& r) {
  std::vector<Finding> out;
  const double steps = static_cast<double>(r.steps.typical_count);
  auto per_step = [&](double ns) { return steps > 0 ? ns / steps : 0.0; };
  auto per_step_text = [&](double ns) {
    return steps > 0 ? FormatDuration(ns / steps) + " per step" : FormatDuration(ns) + " in total";
  };
  double mean_span = 0;
  int gpu_ranks = 0;
  for (const RankBreakdown& b : r.breakdown) {
    if (b.has_gpu) mean_span += static_cast<double>(b.span_ns), ++gpu_ranks;
  }
  if (gpu_ranks) mean_span /= gpu_ranks;
  const double min_gain = mean_span * 0.002;

  // 1. Straggler (steady-state numbers: median per step x steps).
  int straggler = -1;
  std::string straggler_range;
  {
    const StragglerStats* best = nullptr;
    for (const StragglerStats& s : r.comm.stragglers) {
      if (s.collectives < 2 || s.steady_gain_ns == 0) continue;
      if (!best || s.steady_gain_ns > best->steady_gain_ns) best = &s;
    }
    uint32_t nranks = 0;
    for (const StragglerStats& s : r.comm.stragglers) nranks += s.collectives > 0;
    if (best && nranks >= 2 && static_cast<double>(best->steady_gain_ns) >= min_gain &&
        (best->last_fraction >= 0.5 || best->last_fraction >= 2.0 / nranks)) {
      straggler = static_cast<int>(best->rank);
      const double lost = static_cast<double>(best->steady_lost_ns);
      Finding f;
      f.kind = "straggler";
      f.rank = straggler;
      f.gain_ns = best->steady_gain_ns;
      f.gain_per_step_ns = per_step(static_cast<double>(best->steady_gain_ns));
      f.action = "Make rank " + std::to_string(best->rank) + " keep pace: it arrives last at " +
                 Percent(best->last_fraction) + " of " + std::to_string(best->collectives) +
                 " collectives, costing the other ranks " + per_step_text(lost) + " of waiting";
      double extra = 0;
      straggler_range = RangeEvidence(r, best->rank, &extra);
      if (!straggler_range.empty() && extra > 0) {
        f.evidence = "its \"" + straggler_range + "\" range takes " + FormatDuration(extra) +
                     " more per step than on the other ranks";
      } else {
        straggler_range.clear();
        f.evidence =
            "mean lateness when last: " +
            FormatDuration(best->last_count ? static_cast<double>(best->gain_ns) / best->last_count
                                            : 0);
      }
      // Its own GPU idle time on the same cause: host late, or anything inside that range.
      uint64_t waits = r.idle.Steady(best->rank, GapCause::kHostLate);
      if (!straggler_range.empty()) {
        for (GapCause c : {GapCause::kHostSync, GapCause::kSyncCopy, GapCause::kOther}) {
          const uint64_t all = r.idle.Steady(best->rank, c),
                         outside = r.idle.Steady(best->rank, c, straggler_range);
          waits += all > outside ? all - outside : 0;
        }
      }
      if (waits > 0)
        f.evidence +=
            "; its GPU waits " + per_step_text(static_cast<double>(waits)) + " for its host";
      if (!r.comm.skew_trustworthy)
        f.evidence += " (clocks not synchronized across hosts: skews approximate)";
      f.numbers = {{"last_fraction", best->last_fraction},
                   {"last_count", static_cast<double>(best->last_count)},
                   {"collectives", static_cast<double>(best->collectives)},
                   {"lost_ns", lost},
                   {"lost_per_step_ns", per_step(lost)},
                   {"lost_whole_run_ns", static_cast<double>(best->caused_lost_ns)},
                   {"gain_whole_run_ns", static_cast<double>(best->gain_ns)},
                   {"range_extra_per_step_ns", extra}};
      out.push_back(std::move(f));
    }
  }

  // 2. Exposed communication (not counting time spent waiting for late ranks).
  {
    double total = 0, exposed = 0, comm = 0;
    int n = 0;
    for (const RankBreakdown& b : r.breakdown) {
      if (!b.has_gpu || b.comm_ns == 0) continue;
      const uint64_t waited =
          b.rank < r.comm.stragglers.size() ? r.comm.stragglers[b.rank].waited_ns : 0;
      total += static_cast<double>(b.exposed_comm_ns > waited ? b.exposed_comm_ns - waited : 0);
      exposed += static_cast<double>(b.exposed_comm_ns);
      comm += static_cast<double>(b.comm_ns);
      ++n;
    }
    if (n > 0 && total / n >= min_gain) {
      Finding f;
      f.kind = "exposed-communication";
      f.gain_ns = static_cast<uint64_t>(total / n);
      f.gain_per_step_ns = per_step(total / n);
      f.action = "Overlap communication with compute: " + Percent(comm > 0 ? exposed / comm : 0) +
                 " of communication time is exposed (" + per_step_text(exposed / n) +
                 " per rank); overlap gradients' all-reduce with backward (DDP buckets), prefetch, "
                 "or shrink messages";
      std::string groups;
      for (const CommGroup& g : r.comm.groups) {
        if (groups.size() > 80) break;
        groups += (groups.empty() ? "" : ", ") + g.type +
                  (g.bytes ? " " + FormatBytes(static_cast<double>(g.bytes)) : "") + " x" +
                  std::to_string(g.count);
      }
      f.evidence = "communication kernels " + per_step_text(comm / n) + " per rank, overlapped " +
                   Percent(comm > 0 ? 1 - exposed / comm : 0) +
                   (groups.empty() ? "" : "; " + groups);
      f.numbers = {{"exposed_ns", exposed / n},
                   {"comm_ns", comm / n},
                   {"overlap_fraction", comm > 0 ? 1 - exposed / comm : 0}};
      out.push_back(std::move(f));
    }
  }

  // 3-5. Idle causes (worst rank each).
  struct CauseText {
    GapCause cause;
    const char* kind;
    const char* action;
  };
  const CauseText causes[] = {
      {GapCause::kHostSync, "idle-host-sync",
       "Remove host synchronization from the loop (e.g. .item(), .cpu(), cudaStreamSynchronize)"},
      {GapCause::kHostLate, "launch-bound",
       "Feed the GPU faster: the host launches work too late (use CUDA graphs, larger "
       "kernels/batches, move host work "
       "off the critical path)"},
      {GapCause::kSyncCopy, "pageable-copies",
       "Use pinned host memory and asynchronous copies (pin_memory=True, non_blocking=True)"},
  };
  for (const CauseText& c : causes) {
    uint32_t worst = 0;
    double worst_ns = 0, all = 0;
    uint64_t count = 0;
    for (uint32_t q = 0; q < r.idle.cause_ns.size(); ++q) {
      const bool is_straggler = static_cast<int>(q) == straggler;
      if (c.cause == GapCause::kHostLate && is_straggler) continue;  // folded into the straggler
      double ns =
          static_cast<double>(r.idle.Steady(q, c.cause, is_straggler ? straggler_range : ""));
      if (c.cause == GapCause::kSyncCopy && q < r.memory.size())
        ns += r.memory[q].pageable_ns / 2.0;
      all += ns;
      if (ns > worst_ns) {
        worst_ns = ns, worst = q;
        auto jt = r.idle.cause_count[q].find(c.cause);
        count = jt == r.idle.cause_count[q].end() ? 0 : jt->second;
      }
    }
    if (worst_ns < min_gain || worst_ns <= 0) continue;
    Finding f;
    f.kind = c.kind;
    f.rank = static_cast<int>(worst);
    f.gain_ns = static_cast<uint64_t>(worst_ns);
    f.gain_per_step_ns = per_step(worst_ns);
    f.action = c.action;
    std::string detail;
    for (const Gap& g : r.idle.top_gaps) {
      if (g.cause == c.cause && g.rank == worst) {
        detail = g.detail;
        break;
      }
    }
    const std::string range =
        TopNvtx(r.idle.cause_nvtx_ns[worst].count(c.cause) ? r.idle.cause_nvtx_ns[worst].at(c.cause)
                                                           : std::map<std::string, uint64_t>{});
    f.evidence = "rank " + std::to_string(worst) + "'s GPU idles " + per_step_text(worst_ns) +
                 " in " + std::to_string(count) + " gaps (" + GapCauseName(c.cause) + ")" +
                 (range.empty() ? "" : ", mostly in \"" + range + "\"") +
                 (detail.empty() ? "" : "; longest: " + detail);
    if (c.cause == GapCause::kSyncCopy && worst < r.memory.size() &&
        r.memory[worst].pageable_count) {
      f.evidence += "; " + std::to_string(r.memory[worst].pageable_count) + " pageable copies, " +
                    FormatBytes(static_cast<double>(r.memory[worst].pageable_bytes));
    }
    f.numbers = {
        {"idle_ns", worst_ns}, {"gaps", static_cast<double>(count)}, {"all_ranks_ns", all}};
    out.push_back(std::move(f));
  }

  // 6. Compute imbalance.
  {
    double sum = 0, max = 0;
    int n = 0, worst = -1;
    for (const RankBreakdown& b : r.breakdown) {
      if (!b.has_gpu) continue;
      sum += static_cast<double>(b.compute_ns);
      ++n;
      if (static_cast<double>(b.compute_ns) > max)
        max = static_cast<double>(b.compute_ns), worst = static_cast<int>(b.rank);
    }
    const double mean = n ? sum / n : 0;
    if (n >= 2 && mean > 0 && max - mean >= min_gain && (max - mean) / mean >= 0.02) {
      Finding f;
      f.kind = "load-imbalance";
      f.rank = worst;
      f.gain_ns = static_cast<uint64_t>(max - mean);
      f.gain_per_step_ns = per_step(max - mean);
      f.action = "Rebalance work: rank " + std::to_string(worst) + " computes " +
                 Percent((max - mean) / mean) + " more than the mean rank";
      f.evidence = "compute kernels " + per_step_text(max) + " on rank " + std::to_string(worst) +
                   " vs " + per_step_text(mean) + " mean";
      f.numbers = {{"max_compute_ns", max}, {"mean_compute_ns", mean}};
      out.push_back(std::move(f));
    }
  }

  std::stable_sort(out.begin(), out.end(),
                   [](const Finding& a, const Finding& b) { return a.gain_ns > b.gain_ns; });
  return out;
}

}  // namespace aon::report
