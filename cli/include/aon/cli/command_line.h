// The command-line conventions every AON tool follows (docs/command-line.md):
// one help style without the parser's type tags, `--version` everywhere, the
// same error line and the same exit codes, and the name the user typed (`aon
// report` through the front end, `aon-report` when run directly).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace aon::cli {

// Exit codes shared by every tool. aon-run returns the application's status
// and keeps 125-127 for itself (aon/launcher/launch_plan.h).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // the work could not be done; the message says why
inline constexpr int kExitUsage = 2;   // bad command line; nothing was done

// The front end runs `aon-<sub>` with argv[0] = "aon <sub>". A tool calls
// itself by that name then, else by its own.
std::string ToolName(const char* argv0, std::string_view own_name);

// Help without CLI11's type tags (`DIR:DIR`, `INT in [1 - 4096]`, `REQUIRED`,
// `Excludes: ...`): an option shows its value's name (type_name or option_text)
// and its default joins the description.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override;
  std::string make_option_desc(const CLI::Option* opt) const override;
  std::string make_description(const CLI::App* app) const override;
  std::string make_footer(const CLI::App* app) const override;
};

// `text` broken at spaces into lines of at most `width` columns (a longer word
// stays whole), the lines after a break indented by `indent`; its own newlines
// are kept, so lines already short enough stay as they are.
std::string Wrap(std::string_view text, size_t width, size_t indent = 0);

// Names the app `name`, installs HelpFormatter and a `--version` flag that
// prints "<name> <AON version>".
void ApplyConventions(CLI::App& app, const std::string& name);

// Parses; returns the exit code when the program should stop now: 0 after
// --help or --version, `usage_exit` (default kExitUsage) after a bad command
// line, with "<name>: error: ..." and "run '<name> --help' for usage" on stderr.
std::optional<int> Parse(CLI::App& app, int argc, char** argv, int usage_exit = kExitUsage);

// The AON version this build carries (the project's version).
std::string_view Version();

}  // namespace aon::cli
