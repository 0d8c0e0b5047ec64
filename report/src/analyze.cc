// Analyze(): copies what the timeline says about itself into the report, runs
// every analysis of analyses/ in table order, notes what the analyses could not
// do, and ranks the findings (findings/).
#include <string>

#include "analyses/analysis.h"
#include "aon/report/finding_rules.h"

namespace aon::report {

std::span<const Analysis* const> AnalysisTable() {
  static constexpr const Analysis* kTable[] = {
      &kStepsAnalysis,   &kCaptureAnalysis,       &kLossAnalysis,    &kBreakdownAnalysis,
      &kKernelsAnalysis, &kCommunicationAnalysis, &kCompileAnalysis, &kIdleAnalysis,
      &kMemoryAnalysis,  &kNvtxAnalysis,          &kHeatAnalysis,    &kTorchAnalysis,
      &kXlaAnalysis,     &kCountersAnalysis,
  };
  return kTable;
}

namespace {

// Degradations of the analyses, said once, in this order.
std::vector<std::string> Notes(const Timeline& t, const Report& r) {
  std::vector<std::string> notes;
  for (const RankInfo& info : t.ranks) {
    if (info.capture_disabled) {
      notes.push_back("rank " + std::to_string(info.rank) + " recorded nothing: " +
                      (info.message.empty() ? std::string("capture disabled") : info.message) +
                      " (the application ran on)");
    }
    if (info.status != RankStatus::kOk) {
      notes.push_back("rank " + std::to_string(info.rank) + " is " + RankStatusName(info.status) +
                      (info.message.empty() ? "" : " (" + info.message + ")") +
                      (info.status == RankStatus::kDamaged
                           ? ": its numbers come from what could be read"
                           : ": its numbers are absent"));
    }
  }
  if (t.kernels.empty() && t.memcpys.empty() && t.memsets.empty()) {
    notes.push_back(
        "no GPU activity in the timeline (no kernels, copies or memsets): nothing to attribute; "
        "was the "
        "job run on a GPU with --source cupti and the kernels kind enabled?");
  }
  if (r.comm.source == "none" && t.world_size > 1) {
    notes.push_back("no NCCL records or NCCL kernels: no collectives to compare across ranks");
  }
  if (!r.comm.caveat.empty()) notes.push_back(r.comm.caveat);
  if (r.steps.method == "none")
    notes.push_back("no steps found (no \"step N\" NVTX ranges, no repeating kernel)");
  return notes;
}

}  // namespace

Report Analyze(const Timeline& t) {
  Report r;
  r.path = t.path;
  r.job_id = t.job_id;
  r.source = t.source;
  r.clock_note = t.clock_note;
  r.synthetic = t.synthetic();
  r.clock_synchronized = t.clock_synchronized;
  r.world_size = t.world_size;
  r.ranks = t.ranks;
  r.problems = t.problems;
  r.records = t.kernels.size() + t.memcpys.size() + t.memsets.size() + t.syncs.size() +
              t.apis.size() + t.nvtx.size() + t.nccl.size();
  for (const Analysis* analysis : AnalysisTable()) analysis->run(t, &r);
  r.notes = Notes(t, r);
  r.findings = RankFindings(r);
  return r;
}

}  // namespace aon::report
