// aon-stats: summary tables of a merged timeline (aon/report/stats.h), as
// `nsys stats` gives them.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "aon/base/terminal_text.h"
#include "aon/cli/command_line.h"
#include "aon/format/trace_file.h"
#include "aon/report/stats.h"

namespace {

constexpr int kExitUnreadable = aon::cli::kExitFailed;
constexpr int kExitUsage = aon::cli::kExitUsage;

}  // namespace

int main(int argc, char** argv) {
  std::string input, report_name = "kernels", format = "table";
  bool per_rank = false;
  size_t top = 20;
  std::string names;
  for (std::string_view n : aon::report::StatsReportNames())
    names += (names.empty() ? "" : "|") + std::string(n);
  CLI::App app{
      "aon-stats prints summary tables of a merged AON timeline, as nsys stats does: per kernel,\n"
      "copy direction, CUDA call, NVTX range, NCCL function, operator or step, its share of the\n"
      "table's time, total, count, mean, median, min, max and standard deviation.",
      "aon-stats"};
  const std::string name = aon::cli::ToolName(argv[0], "aon-stats");
  aon::cli::ApplyConventions(app, name);
  app.add_option("JOB", input, "job directory (reads <dir>/timeline.h5) or a timeline file")
      ->required()
      ->type_name("JOB_DIR|TIMELINE");
  app.add_option("-r,--report", report_name, "which table [default: kernels]")->type_name(names);
  app.add_flag("--per-rank", per_rank, "one table per rank instead of the whole job");
  app.add_option("--format", format, "table, csv or json [default: table]")
      ->type_name("table|csv|json");
  app.add_option("--top", top, "rows shown per table in the text table, 0 for all [default: 20]")
      ->type_name("N");
  app.footer(
      "Budgeted runs: kernels, copies, sets, syncs, CUDA calls and operators exist only in the\n"
      "capture windows' steps; the table's first line says which steps it covers.\n"
      "Exit status: 0 printed, 1 the input cannot be read (the message names it), 2 bad command "
      "line.");
  if (auto done = aon::cli::Parse(app, argc, argv)) return *done;
  auto which = aon::report::ParseStatsReport(report_name);
  if (!which.ok()) {
    std::fprintf(stderr, "%s: error: --report: %s\n", name.c_str(),
                 which.status().message().c_str());
    return kExitUsage;
  }
  if (format != "table" && format != "csv" && format != "json") {
    std::fprintf(stderr, "%s: error: --format: '%s' is not table, csv or json\n", name.c_str(),
                 aon::EscapeForTerminal(format).c_str());
    return kExitUsage;
  }
  const std::string timeline = aon::TimelinePathOf(input);
  auto loaded = aon::report::LoadTimeline(timeline);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s: error: cannot read %s: %s\n", name.c_str(), timeline.c_str(),
                 aon::EscapeForTerminal(loaded.status().message()).c_str());
    return kExitUnreadable;
  }
  const aon::report::StatsTable table = aon::report::ComputeStats(*loaded, *which, per_rank);
  std::string out;
  if (format == "json") {
    out = aon::report::RenderStatsJson(table);  // escaped by the JSON writer
  } else {
    out = format == "csv" ? aon::report::RenderStatsCsv(table)
                          : aon::report::RenderStatsText(table, top);
    // Names come from the trace: shown, never interpreted by a terminal.
    if (format == "table" || isatty(STDOUT_FILENO)) out = aon::EscapeForTerminal(out);
  }
  std::fputs(out.c_str(), stdout);
  return std::ferror(stdout) ? kExitUnreadable : 0;
}
