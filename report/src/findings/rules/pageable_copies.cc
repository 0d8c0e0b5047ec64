// pageable-copies: GPU gaps before synchronous or pageable copies, plus what pinning would save of
// the pageable copies' time (at the rate the run's own large pinned copies reached, else at the
// GPU's PCIe link rate, else half).
// Gain: those gaps on the worst rank, median per step x steps, plus what pinning saves of the
// copies' own time (MemoryRank::pinning_saves_ns; idle_causes.cc). The evidence says each.
#include "findings/idle_causes.h"
#include "findings/rule.h"

namespace aon::report {

AON_FINDING_RULE(pageable_copies) {
  static constexpr FindingRule kRule{
      .id = "pageable-copies",
      .precedence = 50,
      .uses = Uses({RecordKind::kKernel, RecordKind::kMemcpy, RecordKind::kMemset, RecordKind::kApi,
                    RecordKind::kSteps}),
      .detects = "GPU gaps before synchronous or pageable copies, and pageable copy time",
      .action =
          "Use pinned host memory and asynchronous copies (pin_memory=True, "
          "non_blocking=True)",
      .evidence =
          "rank {rank}[: its GPU idles {idle} in {gaps} gaps ({cause})][, mostly in "
          "\"{range}\"][; longest: {longest}][; {pageable_copies} pageable copies, "
          "{pageable_bytes}][ at {pageable_rate}][ ({pinned_rate})][: pinning saves {saves} of "
          "their time][; while the GPU idled, {sampled}]",
      .detect = [](const RuleInput& in,
                   Claims*) { return DetectIdleCause(in, GapCause::kSyncCopy); },
  };
  return kRule;
}

}  // namespace aon::report
