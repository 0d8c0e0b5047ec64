#include "aon/base/terminal_text.h"

#include <cstdint>

namespace aon {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendByteEscape(std::string& out, unsigned char c) {
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 15];
}

// Length of the valid UTF-8 sequence at text[i], or 0 (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF).
size_t Utf8Length(std::string_view text, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const size_t left = text.size() - i;
  const unsigned char c = b(0);
  auto cont = [&](size_t k) { return k < left && (b(k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return left > 1 && b(1) >= 0xA0 && cont(1) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED) return left > 1 && b(1) < 0xA0 && cont(1) && cont(2) ? 3 : 0;
  if (c == 0xF0) return left > 1 && b(1) >= 0x90 && cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return left > 1 && b(1) < 0x90 && cont(1) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

}  // namespace

std::string EscapeForTerminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7F)) {
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x80) {  // C0 controls and DEL
      AppendByteEscape(out, c);
      ++i;
    } else if (const size_t n = Utf8Length(text, i); n == 0) {
      AppendByteEscape(out, c);
      ++i;
    } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      // U+0080..U+009F: the C1 controls (0xC2 0x80..0x9F).
      const auto low = static_cast<unsigned char>(text[i + 1]);
      out += "\\u00";
      out += kHex[low >> 4];
      out += kHex[low & 15];
      i += 2;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace aon
