#include "aon/config/option_docs.h"

#include <string_view>

#include "aon/config/agent_config.h"
#include "aon/config/options.h"

namespace aon::session {
namespace {

// Text for a Markdown table cell: '|' escaped, '<' and '>' as entities (else
// "<job>" reads as an HTML tag), line breaks as spaces.
std::string Cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '|':
        out += "\\|";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\n':
        out += ' ';
        break;
      default:
        out += c;
    }
  }
  return out;
}

// "-o,--output" -> "`-o`, `--output`"; "aon-kinds" (srun's, without "--") -> "`--aon-kinds`".
std::string Names(const char* names, const char* prefix) {
  if (names == nullptr) return "-";
  std::string out;
  std::string_view rest(names);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    if (!out.empty()) out += ", ";
    out += "`" + std::string(prefix) + std::string(rest.substr(0, comma)) + "`";
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return out;
}

std::string Code(const char* text) {
  if (text == nullptr || *text == '\0') return "-";
  return "`" + Cell(text) + "`";
}

}  // namespace

std::string OptionTablesMarkdown() {
  std::string md =
      "### Options of both front ends\n\n"
      "| `aon-run` | `srun` | value | what it does | where the two differ |\n"
      "|---|---|---|---|---|\n";
  for (const FrontEndOption& o : FrontEndOptions()) {
    md += "| " + Names(o.run, "") + " | " + Names(o.spank, "--") + " | " + Code(o.value) + " | " +
          Cell(o.help) + " | " + (o.differs != nullptr ? Cell(o.differs) : std::string()) + " |\n";
  }
  md +=
      "\n### Agent variables\n\n"
      "What each option above sets in every rank's environment (`aon-run` and `srun --aon` set "
      "them; set by hand, they take effect the same way).\n\n"
      "| variable | type | default | what it does |\n"
      "|---|---|---|---|\n";
  for (const ConfigVariable& v : AgentConfigVariables()) {
    md += "| `" + std::string(v.env) + "` | " + ConfigTypeName(v.type) + " | " +
          Code(v.default_value) + " | " + Cell(v.description) + " |\n";
  }
  return md;
}

}  // namespace aon::session
