// aon-report: post-mortem report of a merged timeline (terminal + HTML + JSON).
#include <sys/stat.h>

#include <cstdio>
#include <string>

#include "aon/base/secure_fs.h"
#include "aon/base/terminal_text.h"
#include "aon/cli/command_line.h"
#include "aon/format/trace_file.h"
#include "aon/report/report.h"

namespace {

constexpr int kExitUnreadable = aon::cli::kExitFailed;
constexpr int kExitUsage = aon::cli::kExitUsage;

std::string DirName(const std::string& p) {
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

// Through the one O_EXCL | O_NOFOLLOW writer (aon/base/secure_fs.h): "<path>.partial",
// mode 0600, renamed when complete; a link or another user's file in the way
// is refused, never written through.
bool WriteFile(const std::string& path, const std::string& text, std::string* error) {
  const aon::Status written = aon::WriteFileAtomically(path, text);
  if (!written.ok()) *error = written.message();
  return written.ok();
}

}  // namespace

int main(int argc, char** argv) {
  std::string input, html_path, json_path;
  bool no_html = false, quiet = false;
  CLI::App app{
      "aon-report turns a merged AON timeline into findings: stragglers, exposed communication,\n"
      "idle and launch-bound GPUs, load imbalance, pageable copies, with the evidence behind "
      "each.\n"
      "It prints a one-screen summary and writes a self-contained HTML report.",
      "aon-report"};
  const std::string name = aon::cli::ToolName(argv[0], "aon-report");
  aon::cli::ApplyConventions(app, name);
  app.add_option("JOB", input, "job directory (reads <dir>/timeline.h5) or a timeline file")
      ->required()
      ->type_name("JOB_DIR|TIMELINE");
  // "" would silently mean the default (or no) file.
  const auto not_empty = [](const std::string& v) {
    return v.empty() ? std::string("needs a file name") : std::string();
  };
  app.add_option("-o,--output", html_path,
                 "HTML report [default: report.html next to the timeline]")
      ->type_name("FILE")
      ->check(not_empty, "FILE");
  app.add_option("--json", json_path, "also write the findings and key numbers as JSON")
      ->type_name("FILE")
      ->check(not_empty, "FILE");
  app.add_flag("--no-html", no_html, "don't write the HTML report");
  app.add_flag("-q,--quiet", quiet, "don't print the terminal summary");
  app.footer(
      "Exit status: 0 report written, 1 the input cannot be read (the message names it), 2 bad "
      "command line.");
  if (auto done = aon::cli::Parse(app, argc, argv)) return *done;
  const std::string timeline = aon::TimelinePathOf(input);
  auto loaded = aon::report::LoadTimeline(timeline);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s: error: cannot read %s: %s\n", name.c_str(), timeline.c_str(),
                 aon::EscapeForTerminal(loaded.status().message()).c_str());
    return kExitUnreadable;
  }
  const aon::report::Report report = aon::report::Analyze(*loaded);
  // Names and hosts come from the trace: shown, never interpreted by the terminal.
  if (!quiet)
    std::fputs(aon::EscapeForTerminal(aon::report::RenderTerminal(report)).c_str(), stdout);
  int status = 0;
  std::string error;
  if (!no_html) {
    if (html_path.empty()) html_path = DirName(timeline) + "/report.html";
    if (WriteFile(html_path, aon::report::RenderHtml(report), &error)) {
      if (!quiet) std::printf("\nHTML report: %s\n", html_path.c_str());
    } else {
      std::fprintf(stderr, "%s: error: %s\n", name.c_str(), aon::EscapeForTerminal(error).c_str());
      status = kExitUnreadable;
    }
  }
  if (!json_path.empty()) {
    if (!WriteFile(json_path, aon::report::RenderJson(report), &error)) {
      std::fprintf(stderr, "%s: error: %s\n", name.c_str(), aon::EscapeForTerminal(error).c_str());
      status = kExitUnreadable;
    }
  }
  return status;
}
