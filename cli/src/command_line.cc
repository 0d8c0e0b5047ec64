#include "aon/cli/command_line.h"

#include <cstdio>
#include <cstring>

#include "aon/base/terminal_text.h"

namespace aon::cli {
namespace {

// CLI11's names for a value's C++ type: they say nothing to a user.
bool IsParserTypeTag(std::string_view t) {
  for (std::string_view tag :
       {"TEXT", "INT", "UINT", "FLOAT", "BOOLEAN", "NUMBER", "ENUM", "CHAR", "DURATION", "VALUE"})
    if (t == tag) return true;
  return false;
}

}  // namespace

std::string Wrap(std::string_view text, size_t width, size_t indent) {
  std::string out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.size() <= width) {
      out += line;
    } else {
      // Its own leading spaces stay; the words after them fill lines of `width`.
      size_t lead = line.find_first_not_of(' ');
      if (lead == std::string_view::npos) lead = line.size();
      out.append(line.substr(0, lead));
      size_t column = lead;
      bool first = true;
      for (std::string_view rest = line.substr(lead); !rest.empty();) {
        const size_t space = rest.find(' ');
        const std::string_view word = rest.substr(0, space);
        rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
        if (word.empty()) {  // a run of spaces (alignment) stays as it is
          if (!first) {
            out += ' ';
            ++column;
          }
          continue;
        }
        if (!first && column + 1 + word.size() > width) {
          out += '\n';
          out.append(indent, ' ');
          column = indent;
        } else if (!first) {
          out += ' ';
          ++column;
        }
        out += word;
        column += word.size();
        first = false;
      }
    }
    if (nl != std::string_view::npos) out += '\n';
  }
  return out;
}

std::string ToolName(const char* argv0, std::string_view own_name) {
  // The front end's spelling, exactly: "aon" and one word, nothing else.
  if (argv0 != nullptr && std::strncmp(argv0, "aon ", 4) == 0 &&
      std::strchr(argv0 + 4, ' ') == nullptr && std::strchr(argv0 + 4, '/') == nullptr &&
      argv0[4] != '\0')
    return argv0;
  return std::string(own_name);
}

std::string HelpFormatter::make_option_opts(const CLI::Option* opt) const {
  if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
  if (opt->get_positional() || opt->get_type_size() == 0) return "";
  // get_type_name() is the type's name, then ":" and each check's description.
  std::string name = opt->get_type_name();
  if (name.empty()) return "";  // a flag
  name = name.substr(0, name.find(':'));
  while (!name.empty() && name.back() == ' ') name.pop_back();
  if (IsParserTypeTag(name)) name = "VALUE";
  std::string out = " " + name;
  if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
  return out;
}

std::string HelpFormatter::make_option_desc(const CLI::Option* opt) const {
  std::string desc = opt->get_description();
  const std::string& def = opt->get_default_str();
  if (opt->get_type_size() != 0 && !def.empty() && desc.find("default") == std::string::npos)
    desc += " [default: " + def + "]";
  return Wrap(desc, 56);
}

std::string HelpFormatter::make_description(const CLI::App* app) const {
  return Wrap(CLI::Formatter::make_description(app), 86);
}

std::string HelpFormatter::make_footer(const CLI::App* app) const {
  return Wrap(CLI::Formatter::make_footer(app), 90);
}

void ApplyConventions(CLI::App& app, const std::string& name) {
  app.name(name);
  app.formatter(std::make_shared<HelpFormatter>());
  app.get_formatter()->column_width(30);
  app.set_version_flag("--version", name + " " + std::string(Version()),
                       "print the AON version and exit");
}

std::optional<int> Parse(CLI::App& app, int argc, char** argv, int usage_exit) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::Success& e) {  // --help, --version and the tools' own early exits
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const std::string name = EscapeForTerminal(app.get_name());
    // The words come from the command line: shown, never interpreted by a terminal.
    std::fprintf(stderr, "%s: error: %s\nrun '%s --help' for usage\n", name.c_str(),
                 EscapeForTerminal(e.what()).c_str(), name.c_str());
    return usage_exit;
  }
}

std::string_view Version() { return AON_VERSION; }

}  // namespace aon::cli
