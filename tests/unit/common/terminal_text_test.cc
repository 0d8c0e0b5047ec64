// EscapeForTerminal (aon/base/terminal_text.h): what a trace file says (a name, a
// host) reaches a terminal as text, never as a control sequence.
#include "aon/base/terminal_text.h"

#include <gtest/gtest.h>

#include <string>

namespace aon {
namespace {

TEST(EscapeForTerminal, PlainTextNewlinesTabsAndUtf8PassUnchanged) {
  for (const std::string s : {"", "rank 3 on gpu-node-07", "line one\nline two\tcolumn",
                              "\u00e9t\u00e9 \u65e5\u672c \U0001F600", "back\\slash"}) {
    EXPECT_EQ(EscapeForTerminal(s), s);
  }
}

TEST(EscapeForTerminal, ControlCharactersAreShownNotSent) {
  // A host name that clears the screen, retitles the window and rewrites its line.
  EXPECT_EQ(EscapeForTerminal("evil\x1b[2J\x1b]0;pwned\a\rok"),
            "evil\\x1b[2J\\x1b]0;pwned\\x07\\x0dok");
  EXPECT_EQ(EscapeForTerminal(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(EscapeForTerminal("del\x7f"), "del\\x7f");
  // C1 controls in UTF-8 (U+009B is CSI on terminals that take 8-bit controls).
  EXPECT_EQ(EscapeForTerminal("a\xc2\x9b"
                              "31mb\xc2\x85"),
            "a\\u009b31mb\\u0085");
  // U+00A0 is not a control.
  EXPECT_EQ(EscapeForTerminal("\xc2\xa0"), "\xc2\xa0");
}

TEST(EscapeForTerminal, InvalidUtf8BytesAreEscapedOneByOne) {
  EXPECT_EQ(EscapeForTerminal("\x9b"
                              "31m"),
            "\\x9b31m");                                                     // a lone 8-bit CSI
  EXPECT_EQ(EscapeForTerminal("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(EscapeForTerminal("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(EscapeForTerminal("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // > U+10FFFF
  EXPECT_EQ(EscapeForTerminal("cut\xe6\x97"), "cut\\xe6\\x97");              // truncated at the end
}

}  // namespace
}  // namespace aon
