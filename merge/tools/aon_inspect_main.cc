// aon-inspect FILE [--json]: what a rank trace or a merged timeline holds.
// aon-inspect --schema: the field tables of the format (docs/trace-format.md).
// Exit status: 0 printed, 1 the file could not be read (the message names it),
// 2 bad command line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "aon/merge/inspect.h"
#include "aon/base/terminal_text.h"
#include "aon/format/trace_format.h"

int main(int argc, char** argv) {
  CLI::App app{"aon-inspect: show what an AON rank trace or merged timeline holds"};
  std::string path;
  bool json = false, schema = false;
  auto* file = app.add_option("file", path, "rank-NNNNN.h5 or timeline.h5");
  app.add_flag("--schema", schema,
               "print the format's field tables (Markdown, as in docs/trace-format.md)")
      ->excludes(file);
  app.add_flag("--json", json, "machine-readable output (fields: merge/README.md)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (schema) {
    std::fputs(aon::FieldTablesMarkdown().c_str(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  if (path.empty()) {
    std::fprintf(stderr, "aon-inspect: error: a FILE is required (or --schema)\n");
    return 2;
  }
  auto inspection = aon::merge::InspectFile(path);
  if (!inspection.ok()) {
    std::fprintf(stderr, "aon-inspect: error: %s\n",
                 aon::EscapeForTerminal(inspection.status().message()).c_str());
    return 1;
  }
  const std::string text =
      json ? aon::merge::InspectionToJson(*inspection) : aon::merge::InspectionToText(*inspection);
  // Names and hosts come from the file: shown, never interpreted by a terminal
  // (the JSON is escaped by the JSON writer).
  std::fputs(json ? text.c_str() : aon::EscapeForTerminal(text).c_str(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
