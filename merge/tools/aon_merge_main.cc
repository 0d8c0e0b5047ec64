// aon-merge <job_dir>: one timeline (and a Chrome/Perfetto JSON) from a job's
// per-rank trace files. Exit status: 0 when the timeline was written (bad ranks
// are recorded in it and named on stderr), 1 when nothing could be merged or an
// output could not be written, 2 for a bad command line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "aon/merge/merge.h"

int main(int argc, char** argv) {
  CLI::App app{
      "aon-merge: merge a job directory's per-rank AON traces (rank-NNNNN.h5) into one "
      "cluster timeline (HDF5) and a Chrome/Perfetto trace (JSON)"};
  aon::merge::MergeOptions options;
  bool no_chrome = false;
  bool quiet = false;
  app.add_option("job_dir", options.job_dir, "directory holding the rank-*.h5 files")->required();
  app.add_option("-o,--output", options.timeline_path,
                 "timeline file to write (default: <job_dir>/timeline.h5)");
  auto* chrome = app.add_option("--chrome", options.chrome_path,
                                "Chrome trace-event JSON to write (default: <job_dir>/trace.json)");
  app.add_flag("--no-chrome", no_chrome, "do not write the Chrome trace-event JSON")
      ->excludes(chrome);
  app.add_flag("-q,--quiet", quiet, "print no summary (problems still go to stderr)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  options.write_chrome = !no_chrome;

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
  if (!quiet) std::fputs(aon::merge::FormatMergeSummary(report).c_str(), stdout);
  return 0;
}
