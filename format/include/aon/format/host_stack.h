// How a host sample's stack reads (HostSampleRecord, docs/host-sampling.md):
// the same for every tool that shows it (aon-report, the trace exports).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace aon {

// The frame a host sample is named by: its innermost Python frame where the
// stack has one ("function (file:line)"), else its native frame ("[native]
// symbol (module)"). The stack holds one frame per line, outermost first.
inline std::string InnermostHostFrame(std::string_view stack) {
  std::string_view native;
  while (!stack.empty()) {
    const size_t end = stack.rfind('\n');
    const std::string_view frame = end == std::string_view::npos ? stack : stack.substr(end + 1);
    if (frame.rfind("[native] ", 0) != 0) return std::string(frame);
    if (native.empty()) native = frame;
    if (end == std::string_view::npos) break;
    stack = stack.substr(0, end);
  }
  return std::string(native);
}

// The parts of a Python frame, "function (file:line)": the file as recorded
// (a path) and its line ("" where the frame has none). Nullopt for a native
// frame ("[native] ...") or text of another form.
struct PythonFrame {
  std::string_view function, file, line;
  // "function (FILE": the function and its file's name without directories,
  // the key a frame's lines are grouped under.
  std::string FunctionAndFileName() const {
    const size_t slash = file.rfind('/');
    return std::string(function) + " (" +
           std::string(slash == std::string_view::npos ? file : file.substr(slash + 1));
  }
};
inline std::optional<PythonFrame> ParsePythonFrame(std::string_view frame) {
  if (frame.rfind("[native] ", 0) == 0 || frame.empty() || frame.back() != ')') return std::nullopt;
  const size_t open = frame.rfind(" (");
  if (open == std::string_view::npos) return std::nullopt;
  const std::string_view where = frame.substr(open + 2, frame.size() - open - 3);
  const size_t colon = where.rfind(':');
  if (colon == std::string_view::npos) return PythonFrame{frame.substr(0, open), where, {}};
  return PythonFrame{frame.substr(0, open), where.substr(0, colon), where.substr(colon + 1)};
}

}  // namespace aon
