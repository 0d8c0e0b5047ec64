// launch-bound: GPU gaps before work the host launched only after the GPU ran dry,
// while its launching thread was busy issuing CUDA calls (launch overhead: no
// call-free stretch longer than issuing takes; a longer one is host-work). Gain:
// those gaps on the worst rank, median per step x steps (idle_causes.cc).
#include "findings/idle_causes.h"
#include "findings/rule.h"

namespace aon::report {

AON_FINDING_RULE(launch_bound) {
  static constexpr FindingRule kRule{
      .id = "launch-bound",
      .precedence = 40,
      .uses = Uses({RecordKind::kKernel, RecordKind::kMemcpy, RecordKind::kMemset, RecordKind::kApi,
                    RecordKind::kSteps}),
      .detects =
          "GPU gaps before work the host launched after the GPU ran dry, while it was issuing "
          "CUDA calls back to back (launch overhead)",
      .action =
          "Feed the GPU faster: the host issues launches more slowly than the GPU runs them "
          "(use CUDA graphs, fewer and larger kernels: fusion, torch.compile, larger batches)",
      .evidence =
          "rank {rank}'s GPU idles {idle} in {gaps} gaps ({cause})[, mostly in "
          "\"{range}\"][; longest: {longest}][; while the GPU idled, {sampled}]",
      .detect = [](const RuleInput& in,
                   Claims*) { return DetectIdleCause(in, GapCause::kHostLate); },
  };
  return kRule;
}

}  // namespace aon::report
