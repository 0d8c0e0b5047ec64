// aon-diff: what changed between two runs, per step (aon/report/diff.h).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>

#include "aon/base/terminal_text.h"
#include "aon/cli/command_line.h"
#include "aon/format/trace_file.h"
#include "aon/report/diff.h"

namespace {

constexpr int kExitFailed = aon::cli::kExitFailed;

}  // namespace

int main(int argc, char** argv) {
  std::string base, next, json, html;
  size_t top = 20;
  CLI::App app{
      "aon-diff compares two runs of AON: per step, the median step time (and each rank's), and\n"
      "which kernels, framework operators, modules, NCCL functions and GPU-idle causes took\n"
      "more or less time, each change with its share of the step's change, largest first.",
      "aon-diff"};
  const std::string name = aon::cli::ToolName(argv[0], "aon-diff");
  aon::cli::ApplyConventions(app, name);
  app.add_option("BASE", base, "the run to compare against: job directory or timeline file")
      ->required()
      ->type_name("BASE");
  app.add_option("NEW", next, "the run to compare: job directory or timeline file")
      ->required()
      ->type_name("NEW");
  app.add_option("--json", json, "also write the comparison as JSON to this file")
      ->type_name("FILE");
  app.add_option("--html", html, "also write the comparison as a self-contained HTML page")
      ->type_name("FILE");
  app.add_option("--top", top, "changes shown, 0 for all [default: 20]")->type_name("N");
  app.footer(
      "Budgeted runs compare the steps their capture windows traced (windows against windows);\n"
      "step times compare every step. Runs with different numbers of ranks do not compare.\n"
      "Exit status: 0 compared, 1 an input cannot be read or the runs do not compare (the\n"
      "message says why), 2 bad command line.");
  if (auto done = aon::cli::Parse(app, argc, argv)) return *done;
  aon::report::Timeline runs[2];
  const std::string inputs[2] = {base, next};
  for (int i = 0; i < 2; ++i) {
    const std::string timeline = aon::TimelinePathOf(inputs[i]);
    auto loaded = aon::report::LoadTimeline(timeline);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s: error: cannot read %s: %s\n", name.c_str(),
                   aon::EscapeForTerminal(timeline).c_str(),
                   aon::EscapeForTerminal(loaded.status().message()).c_str());
      return kExitFailed;
    }
    runs[i] = std::move(*loaded);
  }
  const aon::report::RunDiff d = aon::report::DiffRuns(runs[0], runs[1]);
  // Names come from the traces: shown, never interpreted by a terminal.
  std::fputs(aon::EscapeForTerminal(aon::report::RenderDiffText(d, top)).c_str(), stdout);
  const std::pair<const std::string*, std::string (*)(const aon::report::RunDiff&)> outputs[] = {
      {&json, aon::report::RenderDiffJson}, {&html, aon::report::RenderDiffHtml}};
  for (const auto& [path, render] : outputs) {
    if (path->empty()) continue;
    FILE* f = std::fopen(path->c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "%s: error: cannot write %s\n", name.c_str(),
                   aon::EscapeForTerminal(*path).c_str());
      return kExitFailed;
    }
    const std::string text = render(d);
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    if (std::fclose(f) != 0 || !ok) {
      std::fprintf(stderr, "%s: error: cannot write %s\n", name.c_str(),
                   aon::EscapeForTerminal(*path).c_str());
      return kExitFailed;
    }
  }
  return d.not_comparable.empty() ? 0 : kExitFailed;
}
