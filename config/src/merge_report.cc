#include "aon/config/merge_report.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace aon {

std::vector<std::string> ListRankFiles(const std::string& dir, bool partial) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank-", 0) != 0) continue;
    if (name.ends_with(".h5") || (partial && name.ends_with(".h5.partial"))) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

MergeOutcome MergeThenReport(const MergePlan& plan, const RunProgramFn& run,
                             const MergeEventFn& on_event) {
  auto tell = [&](const MergeEvent& e) {
    if (on_event) on_event(e);
  };
  MergeOutcome out;
  out.rank_files = ListRankFiles(plan.job_dir, /*partial=*/true).size();
  const bool everywhere = std::any_of(plan.attempts.begin(), plan.attempts.end(),
                                      [](const MergeAttempt& a) { return a.on_every_node; });
  if (out.rank_files == 0 && !everywhere) {
    out.merge = MergeResult::kNoRankFiles;
    return out;
  }
  if (::access(plan.merge_program.c_str(), X_OK) != 0) {
    out.merge = MergeResult::kNoMergeProgram;
    return out;
  }
  out.merge = MergeResult::kMergeFailed;
  for (size_t i = 0; i < plan.attempts.size(); ++i) {
    const std::vector<std::string>& argv = plan.attempts[i].argv;
    tell({MergeEvent::Kind::kMergeStarting, i, &argv, out.rank_files, Status::Ok(), 0});
    StatusOr<int> status = run(argv);
    out.merge_error = status.ok() ? Status::Ok() : status.status();
    out.merge_exit_status = status.ok() ? *status : 0;
    if (status.ok() && *status == 0) {
      out.merge = MergeResult::kMerged;
      break;
    }
    tell({MergeEvent::Kind::kMergeFailed, i, &argv, out.rank_files, out.merge_error,
          out.merge_exit_status});
  }
  if (plan.report_program.empty() || plan.attempts.empty()) return out;
  // aon-merge may write the timeline and still fail later (an export): report on it.
  if (::access((plan.job_dir + "/timeline.h5").c_str(), R_OK) != 0) {
    out.report = ReportResult::kNoTimeline;
    return out;
  }
  if (::access(plan.report_program.c_str(), X_OK) != 0) {
    out.report = ReportResult::kNotInstalled;
    return out;
  }
  const std::vector<std::string> report_argv = {plan.report_program, plan.job_dir};
  tell({MergeEvent::Kind::kReportStarting, 0, &report_argv, out.rank_files, Status::Ok(), 0});
  StatusOr<int> status = run(report_argv);
  out.report_error = status.ok() ? Status::Ok() : status.status();
  out.report_exit_status = status.ok() ? *status : 0;
  out.report = status.ok() && *status == 0 ? ReportResult::kWritten : ReportResult::kFailed;
  return out;
}

}  // namespace aon
