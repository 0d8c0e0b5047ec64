// Phase bottleneck: the longest NVTX phase whose GPU counters say it is not
// compute-bound (launch-, memory- or latency-bound; report/src/analyses/counters.cc
// judges). The counters say why a phase is slow, not how much faster it could
// be: the rule states no gain (0, rendered "gain not estimated"), so it ranks
// after every finding that has one.
#include <cstdio>
#include <string>

#include "findings/rule.h"

namespace aon::report {

namespace {

std::optional<Detection> DetectPhaseBottleneck(const RuleInput& in, Claims* /*claims*/) {
  const CounterAnalysis& c = in.report.counters;
  const CounterPhase* worst = nullptr;
  for (const CounterPhase& p : c.phases) {
    const Verdict v = p.verdict.verdict;
    if (v != Verdict::kLaunchBound && v != Verdict::kMemoryBound && v != Verdict::kLatencyBound)
      continue;
    if (worst == nullptr || p.seconds > worst->seconds) worst = &p;
  }
  if (worst == nullptr) return std::nullopt;
  Detection d;
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
      .detects =
          "the longest NVTX phase whose GPU counters say launch-, memory- or "
          "latency-bound (docs/counters.md)",
      .action = "Phase \"{phase}\" is {verdict} for {time} of the run: {what}",
      .evidence = "GPU counters over {intervals} sample intervals: {numbers}[ ({synthetic})]",
      .detect = DetectPhaseBottleneck,
  };
  return kRule;
}

}  // namespace aon::report
