// FormatMergeSummary (merge.h): what aon-merge prints.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "aon/merge/merge.h"

namespace aon::merge {

const char* MergePhaseName(MergePhase phase) {
  switch (phase) {
    case MergePhase::kOpen:
      return "open";
    case MergePhase::kStrings:
      return "strings";
    case MergePhase::kRead:
      return "read";
    case MergePhase::kExchange:
      return "exchange";
    case MergePhase::kSort:
      return "sort";
    case MergePhase::kWrite:
      return "write";
    case MergePhase::kTimeline:
      return "timeline";
    case MergePhase::kCount:
      break;
  }
  return "?";
}

std::string FormatMergePhases(const MergeReport& report) {
  std::string out = "process " + std::to_string(report.process) + ", " +
                    std::to_string(report.records_read) + " records read:";
  double wall = 0, cpu = 0;
  char buf[160];
  auto add = [&](const char* name, double w, double c) {
    const double per_s = c > 0 ? static_cast<double>(report.records_read) / c / 1e6 : 0;
    std::snprintf(buf, sizeof(buf), "\n  %-9s %8.3f s wall %8.3f s CPU %9.2f M records/CPU s", name,
                  w, c, per_s);
    out += buf;
  };
  for (size_t p = 0; p < kMergePhaseCount; ++p) {
    add(MergePhaseName(static_cast<MergePhase>(p)), report.phases.wall_s[p],
        report.phases.cpu_s[p]);
    wall += report.phases.wall_s[p];
    cpu += report.phases.cpu_s[p];
  }
  add("total", wall, cpu);
  return out + "\n";
}

std::string FormatMergeSummary(const MergeReport& report) {
  std::ostringstream out;
  // A truncated rank (killed process, collector stopped) is merged up to where
  // its trace ends: say so instead of counting it as missing.
  const auto partial = static_cast<uint32_t>(std::count_if(
      report.ranks.begin(), report.ranks.end(),
      [](const RankOutcome& r) { return r.status == RankStatus::kTruncated && r.records > 0; }));
  // A damaged rank is merged but for the part its message names.
  const auto damaged = static_cast<uint32_t>(
      std::count_if(report.ranks.begin(), report.ranks.end(),
                    [](const RankOutcome& r) { return r.status == RankStatus::kDamaged; }));
  out << "aon-merge: job " << (report.job_id.empty() ? "(no id)" : report.job_id) << ": merged "
      << report.ranks_ok() + partial + damaged << " of " << report.world_size << " ranks";
  if (partial > 0 || damaged > 0) {
    out << " (";
    if (partial > 0) out << partial << " truncated" << (damaged > 0 ? ", " : "");
    if (damaged > 0) out << damaged << " damaged";
    out << ")";
  }
  out << " from " << report.job_dir << "\n";
  for (const RankOutcome& o : report.ranks) {
    if (o.status == RankStatus::kOk) continue;
    out << "  rank " << o.rank << ": " << RankStatusName(o.status) << ": " << o.message << "\n";
  }
  out << "records:";
  for (size_t k = 0; k < kTimelineKindCount; ++k) {
    out << (k == 0 ? " " : ", ") << RecordKindName(static_cast<RecordKind>(k)) << " "
        << report.records[k];
  }
  out << "\ndropped:";
  bool any_dropped = false;
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    if (report.dropped[k] == 0) continue;
    out << (any_dropped ? ", " : " ") << RecordKindName(static_cast<RecordKind>(k)) << " "
        << report.dropped[k];
    any_dropped = true;
  }
  if (!any_dropped) out << " none";
  out << "\n";
  if (!report.timeline_path.empty()) out << "timeline: " << report.timeline_path << "\n";
  if (!report.overview_path.empty()) out << "overview: " << report.overview_path << "\n";
  if (!report.perfetto_path.empty()) {
    out << "perfetto trace: " << report.perfetto_path;
    if (report.perfetto_files > 1) out << " and " << report.perfetto_files - 1 << " more files";
    out << " (index " << report.perfetto_index << ")\n";
  }
  if (!report.chrome_path.empty()) out << "chrome trace: " << report.chrome_path << "\n";
  if (!report.chrome_not_written.empty()) {
    out << "chrome trace: not written (over --max-trace-records; see the note)\n";
  }
  return out.str();
}

}  // namespace aon::merge
