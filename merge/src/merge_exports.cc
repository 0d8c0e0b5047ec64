#include "aon/merge/merge_exports.h"

#include <filesystem>

#include "aon/export/chrome_trace.h"

namespace aon::merge {

Status ResolveMergeExports(const MergeOptions& merge, MergeExportOptions* exports) {
  namespace fs = std::filesystem;
  const std::string timeline_path = TimelinePath(merge);
  if (exports->chrome_path.empty()) {
    exports->chrome_path = FilteredTracePath(merge.job_dir, exports->chrome_filter);
  }
  if (exports->perfetto_path.empty()) {
    exports->perfetto_path = FilteredPerfettoPath(merge.job_dir, exports->chrome_filter);
  }
  if (exports->overview_path.empty()) {
    exports->overview_path = (fs::path(merge.job_dir) / "overview.json").string();
  }
  const std::string& chrome = exports->chrome_path;
  const std::string& overview = exports->overview_path;
  if (exports->write_chrome && chrome == timeline_path) {
    return InvalidArgument("--chrome and --output both name '" + chrome + "'");
  }
  if (exports->write_overview &&
      (overview == timeline_path || (exports->write_chrome && overview == chrome))) {
    return InvalidArgument("--overview names the same file as another output: '" + overview + "'");
  }
  const std::string& perfetto = exports->perfetto_path;
  if (exports->write_perfetto &&
      (perfetto == timeline_path || (exports->write_chrome && perfetto == chrome) ||
       (exports->write_overview && perfetto == overview))) {
    return InvalidArgument("--perfetto names the same file as another output: '" + perfetto + "'");
  }
  return Status::Ok();
}

Status WriteMergeExports(const MergeExportOptions& exports, MergeReport* report) {
  const std::string& timeline_path = report->timeline_path;
  Status overview_status;
  if (exports.write_overview) {
    overview_status = WriteOverview(timeline_path, exports.overview_path, exports.overview_options);
    if (overview_status.ok()) report->overview_path = exports.overview_path;
  }
  Status perfetto_status;
  if (exports.write_perfetto) {
    PerfettoExportOptions options;
    options.filter = exports.chrome_filter;
    options.max_file_bytes = exports.perfetto_max_file_bytes;
    PerfettoTraceStats stats;
    perfetto_status = ExportPerfettoTrace(timeline_path, exports.perfetto_path, options, &stats);
    if (perfetto_status.ok()) {
      report->perfetto_path = exports.perfetto_path;
      report->perfetto_index = stats.index_path;
      report->perfetto_files = stats.files.size();
    }
  }
  if (exports.write_chrome) {
    ChromeExportOptions export_options;
    export_options.filter = exports.chrome_filter;
    export_options.max_records = exports.max_trace_records;
    ChromeTraceStats stats;
    Status s = ExportChromeTrace(timeline_path, exports.chrome_path, export_options, &stats);
    if (stats.over_limit) {
      report->chrome_not_written =
          s.message() +
          " (--max-trace-records); export a part of the run instead with: aon-export " +
          timeline_path +
          " --window START:END (seconds from the start, e.g. --window 10:20), --ranks LIST "
          "(e.g. 0-3,8) and/or --kinds LIST (e.g. kernels,nccl); or raise --max-trace-records "
          "(0 = no limit)" +
          (report->overview_path.empty() ? std::string()
                                         : "; " + report->overview_path + " shows the whole run");
    } else {
      AON_RETURN_IF_ERROR(perfetto_status);
      AON_RETURN_IF_ERROR(s);
      report->chrome_path = exports.chrome_path;
      report->chrome_records = stats.records;
    }
  }
  AON_RETURN_IF_ERROR(perfetto_status);
  return overview_status;
}

}  // namespace aon::merge
