// How a host sample's stack reads (HostSampleRecord, docs/host-sampling.md):
// the same for every tool that shows it (aon-report, the trace exports).
#pragma once

#include <cstdint>
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

// A frame split for formats that model frames (Perfetto's Frame, OTF2's
// calling contexts): a Python frame "function (file:line)" (kind kPython), a
// native one "[native] symbol (module)" or "[native] text" (kind kNative, module
// "" when the frame names none); any other text is the function, kind kOther.
// Lossless: a form is taken only where HostFrameText gives back the very text.
struct HostFrame {
  enum Kind : uint8_t { kOther, kPython, kNative };
  Kind kind = kOther;
  std::string_view function, file, module;
  uint32_t line = 0;  // 0: none
};

inline std::string HostFrameText(const HostFrame& f) {
  switch (f.kind) {
    case HostFrame::kPython:
      return std::string(f.function) + " (" + std::string(f.file) +
             (f.line != 0 ? ":" + std::to_string(f.line) : std::string()) + ")";
    case HostFrame::kNative:
      return "[native] " + std::string(f.function) +
             (f.module.empty() ? std::string() : " (" + std::string(f.module) + ")");
    case HostFrame::kOther:
      break;
  }
  return std::string(f.function);
}

inline HostFrame SplitHostFrame(std::string_view frame) {
  HostFrame f;
  if (frame.rfind("[native] ", 0) == 0) {
    f.kind = HostFrame::kNative;
    f.function = frame.substr(9);
    const size_t open = f.function.rfind(" (");
    if (!f.function.empty() && f.function.back() == ')' && open != std::string_view::npos) {
      f.module = f.function.substr(open + 2, f.function.size() - open - 3);
      f.function = f.function.substr(0, open);
    }
  } else if (auto py = ParsePythonFrame(frame)) {
    f.kind = HostFrame::kPython;
    f.function = py->function;
    f.file = py->file;
    bool digits = !py->line.empty() && py->line.size() <= 9;
    for (char c : py->line) digits = digits && c >= '0' && c <= '9';
    uint32_t line = 0;
    for (char c : digits ? py->line : std::string_view()) line = line * 10 + (c - '0');
    f.line = line;
  }
  if (f.kind != HostFrame::kOther && HostFrameText(f) != frame) f = HostFrame{};
  if (f.kind == HostFrame::kOther) f.function = frame;
  return f;
}

// Calls `fn(frame)` for each frame of `stack`, outermost first.
template <typename F>
void ForEachHostFrame(std::string_view stack, F&& fn) {
  for (size_t at = 0; at <= stack.size();) {
    size_t end = stack.find('\n', at);
    if (end == std::string_view::npos) end = stack.size();
    fn(stack.substr(at, end - at));
    at = end + 1;
  }
}

}  // namespace aon
