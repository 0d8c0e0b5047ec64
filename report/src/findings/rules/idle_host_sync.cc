// idle-host-sync: GPU gaps that end when a blocking synchronization call returns: the host waited
// for the GPU, then had nothing queued. Gain: those gaps on the worst rank, median per step x steps
// (idle_causes.cc).
#include "findings/idle_causes.h"
#include "findings/rule.h"

namespace aon::report {

AON_FINDING_RULE(idle_host_sync) {
  static constexpr FindingRule kRule{
      .id = "idle-host-sync",
      .precedence = 30,
      .uses = Uses({RecordKind::kKernel, RecordKind::kMemcpy, RecordKind::kMemset, RecordKind::kApi,
                    RecordKind::kSync, RecordKind::kSteps}),
      .detects = "GPU gaps ended by a blocking synchronization call",
      .action =
          "Remove host synchronization from the loop (e.g. .item(), .cpu(), "
          "cudaStreamSynchronize)",
      .evidence =
          "rank {rank}'s GPU idles {idle} in {gaps} gaps ({cause})[, mostly in "
          "\"{range}\"][; longest: {longest}][; while the GPU idled, {sampled}]",
      .detect = [](const RuleInput& in,
                   Claims*) { return DetectIdleCause(in, GapCause::kHostSync); },
  };
  return kRule;
}

}  // namespace aon::report
