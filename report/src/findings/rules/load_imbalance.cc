// Load imbalance: the rank with the most compute-kernel time, when it exceeds the
// mean rank by at least 2 %; the gain is its excess over the mean.
#include <string>

#include "findings/rule.h"

namespace aon::report {

namespace {

std::optional<Detection> DetectLoadImbalance(const RuleInput& in, Claims* /*claims*/) {
  double sum = 0, max = 0;
  int n = 0, worst = -1;
  for (const RankBreakdown& b : in.report.breakdown) {
    if (!b.has_gpu) continue;
    sum += static_cast<double>(b.compute_ns);
    ++n;
    if (static_cast<double>(b.compute_ns) > max)
      max = static_cast<double>(b.compute_ns), worst = static_cast<int>(b.rank);
  }
  const double mean = n ? sum / n : 0;
  if (n < 2 || mean <= 0 || max - mean < in.min_gain_ns || (max - mean) / mean < 0.02)
    return std::nullopt;
  Detection d;
  d.rank = worst;
  d.gain_ns = max - mean;
  d.values["rank"] = std::to_string(worst);
  d.values["excess"] = Percent((max - mean) / mean);
  d.values["max"] = in.PerStepText(max);
  d.values["mean"] = in.PerStepText(mean);
  d.numbers = {{"max_compute_ns", max}, {"mean_compute_ns", mean}};
  return d;
}

}  // namespace

AON_FINDING_RULE(load_imbalance) {
  static constexpr FindingRule kRule{
      .id = "load-imbalance",
      .precedence = 60,
      .uses = Uses({RecordKind::kKernel}),
      .across_ranks = true,
      .detects = "one rank's compute-kernel time exceeds the mean rank's by >= 2 %",
      .action = "Rebalance work: rank {rank} computes {excess} more than the mean rank",
      .evidence = "compute kernels {max} on rank {rank} vs {mean} mean",
      .detect = DetectLoadImbalance,
  };
  return kRule;
}

}  // namespace aon::report
