// launch-bound: GPU gaps before work the host launched only after the GPU ran dry. Gain: those gaps
// on the worst rank, median per step x steps (idle_causes.cc).
#include "findings/idle_causes.h"
#include "findings/rule.h"

namespace aon::report {

AON_FINDING_RULE(launch_bound) {
  static constexpr FindingRule kRule{
      .id = "launch-bound",
      .precedence = 40,
      .detects = "GPU gaps before work the host launched after the GPU ran dry",
      .action =
          "Feed the GPU faster: the host launches work too late (use CUDA graphs, larger "
          "kernels/batches, move host work off the critical path)",
      .evidence =
          "rank {rank}'s GPU idles {idle} in {gaps} gaps ({cause})[, mostly in "
          "\"{range}\"][; longest: {longest}]",
      .detect = [](const RuleInput& in,
                   Claims*) { return DetectIdleCause(in, GapCause::kHostLate); },
  };
  return kRule;
}

}  // namespace aon::report
