// aon-inspect FILE [--json]: what a rank trace or a merged timeline holds.
// aon-inspect --schema: the field tables of the format (docs/trace-format.md).
// Exit status: 0 printed, 1 the file could not be read (the message names it),
// 2 bad command line.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "aon/base/terminal_text.h"
#include "aon/cli/command_line.h"
#include "aon/format/trace_file.h"
#include "aon/format/trace_format.h"
#include "aon/merge/inspect.h"

namespace {

std::string g_name = "aon-inspect";  // "aon inspect" through the front end
const char* Me() { return g_name.c_str(); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aon-inspect: show what an AON rank trace or merged timeline holds", "aon-inspect"};
  g_name = aon::cli::ToolName(argv[0], "aon-inspect");
  aon::cli::ApplyConventions(app, g_name);
  std::string path;
  bool json = false, schema = false;
  auto* file_opt = app.add_option("FILE", path,
                                  "a rank file (rank-NNNNN.h5), a timeline (timeline.h5) or a job "
                                  "directory (its timeline.h5)");
  app.add_flag("--schema", schema,
               "print the format's field tables (Markdown, as in docs/trace-format.md)")
      ->excludes(file_opt);
  app.add_flag("--json", json, "machine-readable output (fields: merge/README.md)");
  app.footer(
      "Exit status: 0 printed, 1 the file could not be read (the message names it), 2 bad "
      "command line.");
  if (auto done = aon::cli::Parse(app, argc, argv)) return *done;
  if (schema) {
    std::fputs(aon::FieldTablesMarkdown().c_str(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  if (path.empty()) {
    std::fprintf(stderr, "%s: error: a FILE is required (or --schema)\n", Me());
    return aon::cli::kExitUsage;
  }
  const std::string file = aon::TimelinePathOf(path);
  if (file != path && access(file.c_str(), F_OK) != 0) {
    std::fprintf(stderr,
                 "%s: error: %s: a job directory without timeline.h5 (not merged yet: run 'aon "
                 "merge' on it, or name one of its rank-NNNNN.h5 files)\n",
                 Me(), aon::EscapeForTerminal(path).c_str());
    return aon::cli::kExitFailed;
  }
  auto inspection = aon::merge::InspectFile(file);
  if (!inspection.ok()) {
    std::fprintf(stderr, "%s: error: %s\n", Me(),
                 aon::EscapeForTerminal(inspection.status().message()).c_str());
    return aon::cli::kExitFailed;
  }
  const std::string text =
      json ? aon::merge::InspectionToJson(*inspection) : aon::merge::InspectionToText(*inspection);
  // Names and hosts come from the file: shown, never interpreted by a terminal
  // (the JSON is escaped by the JSON writer).
  std::fputs(json ? text.c_str() : aon::EscapeForTerminal(text).c_str(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
