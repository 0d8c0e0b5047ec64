// Text for a terminal: names, hosts and paths come from trace files, which a
// program (or another user) wrote, and must not be able to move the cursor,
// retitle the window or hide a line. Every tool's terminal output of such text
// goes through EscapeForTerminal.
#pragma once

#include <string>
#include <string_view>

namespace aon {

// `text` with newlines and tabs kept, and shown visibly instead of raw:
//   C0 controls (ESC, CR, BEL, ...) and DEL      -> \xNN
//   C1 controls, U+0080..U+009F (CSI = U+009B)  -> \u00NN
//   bytes that are not valid UTF-8               -> \xNN
// Valid UTF-8 text without controls comes out unchanged.
std::string EscapeForTerminal(std::string_view text);

}  // namespace aon
