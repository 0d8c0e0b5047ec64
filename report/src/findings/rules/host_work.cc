// host-work: GPU gaps before a launch that its thread issued only after running
// code outside any CUDA call for longer than launching takes (an input
// pipeline, Python preprocessing, logging; idle.cc says how the gaps are told
// from launch overhead). CUDA graphs or bigger kernels do nothing for it; the
// host work must leave the GPU's critical path. Gain: those gaps on the worst
// rank, median per step x steps (idle_causes.cc).
#include "findings/idle_causes.h"
#include "findings/rule.h"

namespace aon::report {

AON_FINDING_RULE(host_work) {
  static constexpr FindingRule kRule{
      .id = "host-work",
      .precedence = 35,
      .uses = Uses({RecordKind::kKernel, RecordKind::kMemcpy, RecordKind::kMemset, RecordKind::kApi,
                    RecordKind::kSteps}),
      .detects =
          "GPU gaps while the launching thread ran code outside any CUDA call before its next "
          "launch (input pipeline, Python work, logging)",
      .action =
          "Take the host work off the GPU's critical path: the GPU waits while the host runs code "
          "that is not a CUDA call (load and transform data in DataLoader workers: num_workers "
          "> 0, pin_memory, prefetching the next batch; move logging and Python bookkeeping out "
          "of the step); CUDA graphs or larger kernels do not help here",
      .evidence =
          "rank {rank}'s GPU idles {idle} in {gaps} gaps ({cause})[, mostly in "
          "\"{range}\"][; longest: {longest}][; while the GPU idled, {sampled}]",
      .detect = [](const RuleInput& in,
                   Claims*) { return DetectIdleCause(in, GapCause::kHostWork); },
  };
  return kRule;
}

}  // namespace aon::report
