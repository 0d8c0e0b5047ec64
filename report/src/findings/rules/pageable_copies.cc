// pageable-copies: GPU gaps before synchronous or pageable copies, plus what pinning would save of
// the pageable copies' time (at the rate the run's own large pinned copies reached, else at the
// GPU's PCIe link rate, else half).
// Gain: those gaps on the worst rank, median per step x steps (idle_causes.cc).
#include "findings/idle_causes.h"
#include "findings/rule.h"

namespace aon::report {

AON_FINDING_RULE(pageable_copies) {
  static constexpr FindingRule kRule{
      .id = "pageable-copies",
      .precedence = 50,
      .detects = "GPU gaps before synchronous or pageable copies, and pageable copy time",
      .action =
          "Use pinned host memory and asynchronous copies (pin_memory=True, "
          "non_blocking=True)",
      .evidence =
          "rank {rank}'s GPU idles {idle} in {gaps} gaps ({cause})[, mostly in "
          "\"{range}\"][; longest: {longest}][; {pageable_copies} pageable copies, "
          "{pageable_bytes}][ at {pageable_rate}][ ({pinned_rate})]",
      .detect = [](const RuleInput& in,
                   Claims*) { return DetectIdleCause(in, GapCause::kSyncCopy); },
  };
  return kRule;
}

}  // namespace aon::report
