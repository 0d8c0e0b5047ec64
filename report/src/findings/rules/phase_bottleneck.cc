// Phase bottleneck: the longest NVTX phase whose GPU counters say it is not
// compute-bound (launch-, host-, memory- or latency-bound; report/src/analyses/counters.cc
// judges, host-bound from the trace's gaps inside a phase the counters call idle), narrowed to the phase inside it that the time is spent in. The
// counters say why a phase is slow, not how much faster it could be: the rule
// states no gain (0, rendered "gain not estimated"). It ranks as if a tenth of
// the phase were at stake (Detection::rank_ns): above gains smaller than that,
// so a bottleneck over most of the run is not buried under a 1 % gap finding,
// and below larger ones.
#include <cstdio>
#include <string>

#include "findings/rule.h"

namespace aon::report {

namespace {

constexpr double kStakeShare = 0.1;  // the ranking weight of a verdict, as a share of its phase

bool Bottleneck(const CounterPhase& p) {
  const Verdict v = p.verdict.verdict;
  return v == Verdict::kLaunchBound || v == Verdict::kHostBound || v == Verdict::kMemoryBound ||
         v == Verdict::kLatencyBound;
}

// Share of `inner`'s time, over its ranks, that lies inside `outer`'s ranges.
double Within(const CounterPhase& inner, const CounterPhase& outer) {
  uint64_t all = 0, inside = 0;
  for (const auto& [rank, spans] : inner.spans) {
    all += TotalLength(spans);
    auto it = outer.spans.find(rank);
    if (it == outer.spans.end()) continue;
    for (const Interval& s : spans) inside += LengthWithin(it->second, s);
  }
  return all ? static_cast<double>(inside) / static_cast<double>(all) : 0.0;
}

// The longest bottleneck phase, then the most specific one inside it: a phase
// nested in it (its ranges within the other's) that is itself a bottleneck and
// lasts at least half as long is what the time is spent in ("elementwise"
// inside "step"), and its counters are its own.
const CounterPhase* Worst(const std::vector<CounterPhase>& phases) {
  const CounterPhase* worst = nullptr;
  for (const CounterPhase& p : phases)
    if (Bottleneck(p) && (worst == nullptr || p.seconds > worst->seconds)) worst = &p;
  while (worst != nullptr) {
    const CounterPhase* inner = nullptr;
    for (const CounterPhase& q : phases) {
      if (&q == worst || !Bottleneck(q) || q.seconds >= worst->seconds ||
          q.seconds < 0.5 * worst->seconds || Within(q, *worst) < 0.95)
        continue;
      if (inner == nullptr || q.seconds > inner->seconds) inner = &q;
    }
    if (inner == nullptr) break;
    worst = inner;
  }
  return worst;
}

std::optional<Detection> DetectPhaseBottleneck(const RuleInput& in, Claims* /*claims*/) {
  const CounterAnalysis& c = in.report.counters;
  const CounterPhase* worst = Worst(c.phases);
  if (worst == nullptr) return std::nullopt;
  Detection d;
  d.rank_ns = kStakeShare * worst->seconds * 1e9;
  d.values["phase"] = worst->name;
  d.values["verdict"] = VerdictName(worst->verdict.verdict);
  d.values["time"] = FormatDuration(worst->seconds * 1e9);
  d.values["what"] = worst->verdict.action;
  char intervals[32];
  std::snprintf(intervals, sizeof intervals, "%.1f", worst->intervals);
  d.values["intervals"] = intervals;
  d.values["numbers"] = worst->verdict.why;
  if (c.synthetic) d.values["synthetic"] = "SYNTHETIC counters";
  const CounterVerdict& v = worst->verdict;
  d.numbers = {{"seconds", worst->seconds},        {"busy_pct", v.busy_pct},
               {"compute_pct", v.compute_pct},     {"memory_pct", v.memory_pct},
               {"sm_active_pct", v.sm_active_pct}, {"occupancy_pct", v.occupancy_pct},
               {"intervals", worst->intervals}};
  return d;
}

}  // namespace

AON_FINDING_RULE(phase_bottleneck) {
  static constexpr FindingRule kRule{
      .id = "phase-bottleneck",
      .precedence = 70,
      .uses = Uses({RecordKind::kNvtx, RecordKind::kCounters}),
      .detects =
          "the longest NVTX phase whose GPU counters say launch-, host-, memory- or "
          "latency-bound (host-bound: idle by the counters, and the trace's gaps in it are "
          "mostly host work, synchronization or synchronous copies; docs/counters.md)",
      .action = "Phase \"{phase}\" is {verdict} for {time} of the run: {what}",
      .evidence = "GPU counters over {intervals} sample intervals: {numbers}[ ({synthetic})]",
      .detect = DetectPhaseBottleneck,
  };
  return kRule;
}

}  // namespace aon::report
