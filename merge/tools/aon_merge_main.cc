// aon-merge <job_dir>: one timeline (and Chrome/Perfetto JSON: the trace and a
// downsampled overview) from a job's per-rank trace files. Exit status: 0 when
// the timeline was written (bad ranks are recorded in it and named on stderr; a
// trace over --max-trace-records is skipped with a note), 1 when nothing could
// be merged or an output could not be written, 2 for a bad command line
// (including bad --window / --ranks / --kinds values: then nothing is written).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <string>

#include "aon/merge/export_filter.h"
#include "aon/merge/merge.h"

int main(int argc, char** argv) {
  CLI::App app{
      "aon-merge: merge a job directory's per-rank AON traces (rank-NNNNN.h5) into one "
      "cluster timeline (HDF5), a Chrome/Perfetto trace (JSON) and a downsampled overview "
      "of the whole run (JSON)"};
  aon::merge::MergeOptions options;
  bool no_chrome = false;
  bool no_overview = false;
  bool quiet = false;
  std::string window, ranks, kinds;
  app.add_option("job_dir", options.job_dir, "directory holding the rank-*.h5 files")->required();
  app.add_option("-o,--output", options.timeline_path,
                 "timeline file to write (default: <job_dir>/timeline.h5)");
  auto* chrome =
      app.add_option("--chrome", options.chrome_path,
                     "Chrome trace-event JSON to write (default: <job_dir>/trace.json, or "
                     "<job_dir>/trace-<selection>.json with --window/--ranks/--kinds)");
  app.add_flag("--no-chrome", no_chrome, "do not write the Chrome trace-event JSON")
      ->excludes(chrome);
  app.add_option("--window", window,
                 "trace only records overlapping START:END, in seconds from the start of the "
                 "timeline (10:20, :5, 30:) or in ns on the timeline clock (1000ns:2000ns)");
  app.add_option("--ranks", ranks, "trace only these ranks, e.g. 0-3,8,12-15");
  app.add_option("--kinds", kinds,
                 "trace only these record kinds, e.g. kernels,nccl (kernels, memcpy, memset, "
                 "sync, api, nvtx, nccl)");
  app.add_option("--max-trace-records", options.max_trace_records,
                 "skip the trace (with a note) when it would hold more records than this; "
                 "0 = no limit")
      ->default_val(options.max_trace_records);
  auto* overview = app.add_option("--overview", options.overview_path,
                                  "overview JSON to write (default: <job_dir>/overview.json)");
  app.add_flag("--no-overview", no_overview, "do not write the overview JSON")->excludes(overview);
  app.add_flag("-q,--quiet", quiet, "print no summary (problems still go to stderr)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  options.write_chrome = !no_chrome;
  options.write_overview = !no_overview;
  // Checked before anything is merged: a bad value writes nothing.
  auto parse = [&](const char* option, const std::string& text, auto parser) {
    if (app.count(option) == 0) return true;
    aon::Status s = parser(text, &options.chrome_filter);
    if (!s.ok()) std::fprintf(stderr, "aon-merge: error: %s\n", s.message().c_str());
    return s.ok();
  };
  if (!parse("--window", window, aon::merge::ParseWindow) ||
      !parse("--ranks", ranks, aon::merge::ParseRankList) ||
      !parse("--kinds", kinds, aon::merge::ParseKindList)) {
    return 2;
  }

  aon::merge::MergeReport report;
  aon::Status status = aon::merge::MergeJob(options, &report);
  if (!status.ok()) {
    std::fprintf(stderr, "aon-merge: error: %s\n", status.message().c_str());
    if (!report.timeline_path.empty()) {
      std::fprintf(stderr, "aon-merge: the timeline %s was written\n",
                   report.timeline_path.c_str());
    }
    return 1;
  }
  for (const std::string& p : report.problems) {
    std::fprintf(stderr, "aon-merge: warning: %s\n", p.c_str());
  }
  if (!report.chrome_not_written.empty()) {
    std::fprintf(stderr, "aon-merge: note: %s\n", report.chrome_not_written.c_str());
  }
  if (!quiet) std::fputs(aon::merge::FormatMergeSummary(report).c_str(), stdout);
  return 0;
}
