// How a host sample's stack reads (HostSampleRecord, docs/host-sampling.md):
// the same for every tool that shows it (aon-report, the trace exports).
#pragma once

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

}  // namespace aon
