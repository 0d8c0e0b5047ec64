// Exposed communication: NCCL kernel time not overlapped by compute kernels,
// minus the time a rank only waited for late ranks (that belongs to the
// straggler); the gain is the mean over ranks with communication.
#include <string>

#include "findings/rule.h"

namespace aon::report {

namespace {

std::optional<Detection> DetectExposedCommunication(const RuleInput& in, Claims* /*claims*/) {
  const Report& r = in.report;
  double total = 0, exposed = 0, comm = 0;
  int n = 0;
  for (const RankBreakdown& b : r.breakdown) {
    if (!b.has_gpu || b.comm_ns == 0) continue;
    const uint64_t waited =
        b.rank < r.comm.stragglers.size() ? r.comm.stragglers[b.rank].waited_ns : 0;
    total += static_cast<double>(b.exposed_comm_ns > waited ? b.exposed_comm_ns - waited : 0);
    exposed += static_cast<double>(b.exposed_comm_ns);
    comm += static_cast<double>(b.comm_ns);
    ++n;
  }
  if (n == 0 || total / n < in.min_gain_ns) return std::nullopt;
  Detection d;
  d.gain_ns = total / n;
  d.values["exposed_share"] = Percent(comm > 0 ? exposed / comm : 0);
  d.values["exposed"] = in.PerStepText(exposed / n);
  d.values["comm"] = in.PerStepText(comm / n);
  d.values["overlap"] = Percent(comm > 0 ? 1 - exposed / comm : 0);
  std::string groups;
  for (const CommGroup& g : r.comm.groups) {
    if (groups.size() > 80) break;
    groups += (groups.empty() ? "" : ", ") + g.type +
              (g.bytes ? " " + FormatBytes(static_cast<double>(g.bytes)) : "") + " x" +
              std::to_string(g.count);
  }
  if (!groups.empty()) d.values["groups"] = groups;
  d.numbers = {{"exposed_ns", exposed / n},
               {"comm_ns", comm / n},
               {"overlap_fraction", comm > 0 ? 1 - exposed / comm : 0}};
  return d;
}

}  // namespace

AON_FINDING_RULE(exposed_communication) {
  static constexpr FindingRule kRule{
      .id = "exposed-communication",
      .precedence = 20,
      .uses = Uses({RecordKind::kKernel, RecordKind::kNccl}),
      .across_ranks = true,
      .detects = "NCCL kernel time not overlapped by compute, beyond waiting for stragglers",
      .action =
          "Overlap communication with compute: {exposed_share} of communication time is "
          "exposed ({exposed} per rank); overlap gradients' all-reduce with backward "
          "(DDP buckets), prefetch, or shrink messages",
      .evidence = "communication kernels {comm} per rank, overlapped {overlap}[; {groups}]",
      .detect = DetectExposedCommunication,
  };
  return kRule;
}

}  // namespace aon::report
