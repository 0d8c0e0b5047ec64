// The finding rules aon-report applies, in precedence order (the contract is in
// aon/report/finding_rules.h). Gains are wall-time estimates over the whole run,
// deliberately simple; each detector's file says how it computes its gain:
//   straggler        sum over the collectives where the rank arrived last of
//                    (its arrival - the second-last arrival): the step would end
//                    that much earlier if it kept pace (straggler.cc);
//   exposed comm     communication not overlapped by compute, minus the time the
//                    rank only waited for late ranks (exposed_communication.cc);
//   idle causes      the GPU gaps of that cause on the worst rank, median per
//                    step x steps so warm-up steps don't dominate; pageable
//                    copies add half the pageable copy time (idle_causes.cc);
//   imbalance        the slowest rank's compute minus the mean (load_imbalance.cc);
//   phase bottleneck none stated (0): GPU counters say why a phase is slow, not
//                    how much faster it could run (phase_bottleneck.cc).
//
// Why this precedence: the straggler comes first because it explains time the
// other rules would otherwise count again (the others' waiting is exposed
// communication on their side; its own late launches are idle time on its side);
// then what every rank pays (exposed communication), then the idle causes from
// the most direct fix (remove a sync) to the broadest (feed the GPU faster,
// pinned memory), then imbalance, since the rules above often explain it; the
// phase bottleneck last: it says why, where the others say where time is lost.
#include "findings/detectors.h"

namespace aon::report {

std::span<const FindingRule> DefaultFindingRules() {
  static constexpr FindingRule kRules[] = {
      {
          .id = "straggler",
          .precedence = 10,
          .detects = "one rank arrives last at >= 50 % of collectives (or twice its share)",
          .action = "Make rank {rank} keep pace: it arrives last at {last_share} of {collectives} "
                    "collectives, costing the other ranks {lost} of waiting",
          .evidence = "[its \"{range}\" range takes {range_extra} more per step than on the other "
                      "ranks][mean lateness when last: {mean_lateness}][; its GPU waits "
                      "{host_waits} for its host][{unsynchronized_clocks} (clocks not "
                      "synchronized across hosts: skews approximate)]",
          .detect = DetectStraggler,
      },
      {
          .id = "exposed-communication",
          .precedence = 20,
          .detects = "NCCL kernel time not overlapped by compute, beyond waiting for stragglers",
          .action = "Overlap communication with compute: {exposed_share} of communication time is "
                    "exposed ({exposed} per rank); overlap gradients' all-reduce with backward "
                    "(DDP buckets), prefetch, or shrink messages",
          .evidence = "communication kernels {comm} per rank, overlapped {overlap}[; {groups}]",
          .detect = DetectExposedCommunication,
      },
      {
          .id = "idle-host-sync",
          .precedence = 30,
          .detects = "GPU gaps ended by a blocking synchronization call",
          .action = "Remove host synchronization from the loop (e.g. .item(), .cpu(), "
                    "cudaStreamSynchronize)",
          .evidence = "rank {rank}'s GPU idles {idle} in {gaps} gaps ({cause})[, mostly in "
                      "\"{range}\"][; longest: {longest}]",
          .detect = DetectHostSync,
      },
      {
          .id = "launch-bound",
          .precedence = 40,
          .detects = "GPU gaps before work the host launched after the GPU ran dry",
          .action = "Feed the GPU faster: the host launches work too late (use CUDA graphs, larger "
                    "kernels/batches, move host work off the critical path)",
          .evidence = "rank {rank}'s GPU idles {idle} in {gaps} gaps ({cause})[, mostly in "
                      "\"{range}\"][; longest: {longest}]",
          .detect = DetectLaunchBound,
      },
      {
          .id = "pageable-copies",
          .precedence = 50,
          .detects = "GPU gaps before synchronous or pageable copies, and pageable copy time",
          .action = "Use pinned host memory and asynchronous copies (pin_memory=True, "
                    "non_blocking=True)",
          .evidence = "rank {rank}'s GPU idles {idle} in {gaps} gaps ({cause})[, mostly in "
                      "\"{range}\"][; longest: {longest}][; {pageable_copies} pageable copies, "
                      "{pageable_bytes}]",
          .detect = DetectPageableCopies,
      },
      {
          .id = "load-imbalance",
          .precedence = 60,
          .detects = "one rank's compute-kernel time exceeds the mean rank's by >= 2 %",
          .action = "Rebalance work: rank {rank} computes {excess} more than the mean rank",
          .evidence = "compute kernels {max} on rank {rank} vs {mean} mean",
          .detect = DetectLoadImbalance,
      },
      {
          .id = "phase-bottleneck",
          .precedence = 70,
          .detects = "the longest NVTX phase whose GPU counters say launch-, memory- or "
                     "latency-bound (docs/counters.md)",
          .action = "Phase \"{phase}\" is {verdict} for {time} of the run: {what}",
          .evidence = "GPU counters over {intervals} sample intervals: {numbers}[ ({synthetic})]",
          .detect = DetectPhaseBottleneck,
      },
  };
  return kRules;
}

}  // namespace aon::report
