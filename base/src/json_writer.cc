#include "aon/base/json_writer.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace aon {
namespace {

constexpr char kHex[] = "0123456789abcdef";
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool IsContinuation(const unsigned char* p, size_t i, size_t n) {
  return i < n && (p[i] & 0xC0) == 0x80;
}

// Length of the well-formed UTF-8 sequence that starts at p[i] (a byte >= 0x80),
// or 0. The second byte's range rules out overlong forms (E0, F0), surrogates
// (ED) and code points above U+10FFFF (F4); C0, C1 and F5..FF never start one.
size_t Utf8SequenceLength(const unsigned char* p, size_t i, size_t n) {
  const unsigned char c = p[i];
  if (c >= 0xC2 && c <= 0xDF) return IsContinuation(p, i + 1, n) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80;
    const unsigned char hi = c == 0xED ? 0x9F : 0xBF;
    return i + 1 < n && p[i + 1] >= lo && p[i + 1] <= hi && IsContinuation(p, i + 2, n) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned char lo = c == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = c == 0xF4 ? 0x8F : 0xBF;
    return i + 1 < n && p[i + 1] >= lo && p[i + 1] <= hi && IsContinuation(p, i + 2, n) &&
                   IsContinuation(p, i + 3, n)
               ? 4
               : 0;
  }
  return 0;
}

// Printable ASCII that needs no escape: the common case, copied in runs.
bool PassesAsIs(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

}  // namespace

void AppendJsonString(std::string* out, std::string_view s) {
  out->push_back('"');
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    size_t run = i;
    while (run < n && PassesAsIs(p[run])) ++run;
    if (run > i) {
      out->append(s.data() + i, run - i);
      i = run;
      if (i == n) break;
    }
    const unsigned char c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '"':
          out->append("\\\"");
          break;
        case '\\':
          out->append("\\\\");
          break;
        case '\b':
          out->append("\\b");
          break;
        case '\f':
          out->append("\\f");
          break;
        case '\n':
          out->append("\\n");
          break;
        case '\r':
          out->append("\\r");
          break;
        case '\t':
          out->append("\\t");
          break;
        default: {  // the other control characters
          const char u[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
          out->append(u, sizeof u);
        }
      }
      ++i;
      continue;
    }
    const size_t len = Utf8SequenceLength(p, i, n);
    if (len == 0) {
      out->append(kReplacement);  // this one byte; the next is looked at afresh
      ++i;
    } else {
      out->append(s.data() + i, len);
      i += len;
    }
  }
  out->push_back('"');
}

void JsonWriter::Misuse(const char* what) {
  std::fprintf(stderr, "aon: JsonWriter misuse: %s\n", what);
  std::abort();
}

void JsonWriter::BeforeValue() {
  if (depth_ == 0) return;
  Level& top = levels_[depth_ - 1];
  if (top.object) {
    if (!top.key_written) Misuse("a value in an object without a key");
    top.key_written = false;
    return;
  }
  if (top.has_elements) out_->append(top.one_per_line ? ",\n" : ",");
  top.has_elements = true;
}

void JsonWriter::Open(char bracket, bool object, Layout layout) {
  BeforeValue();
  if (depth_ == kMaxDepth) Misuse("nested deeper than kMaxDepth");
  levels_[depth_++] = Level{object, layout == Layout::kOnePerLine, false, false};
  out_->push_back(bracket);
  if (layout == Layout::kOnePerLine) out_->push_back('\n');
}

void JsonWriter::Close(char bracket, bool object) {
  if (depth_ == 0 || levels_[depth_ - 1].object != object) {
    Misuse(object ? "EndObject without its BeginObject" : "EndArray without its BeginArray");
  }
  const Level& top = levels_[depth_ - 1];
  if (top.key_written) Misuse("an object closed after a key without its value");
  if (top.one_per_line) out_->push_back('\n');
  out_->push_back(bracket);
  --depth_;
}

void JsonWriter::BeginObject() { Open('{', true, Layout::kCompact); }
void JsonWriter::EndObject() { Close('}', true); }
void JsonWriter::BeginArray(Layout layout) { Open('[', false, layout); }
void JsonWriter::EndArray() { Close(']', false); }

void JsonWriter::Key(std::string_view key) {
  if (depth_ == 0 || !levels_[depth_ - 1].object) Misuse("a key outside an object");
  Level& top = levels_[depth_ - 1];
  if (top.key_written) Misuse("two keys in a row");
  if (top.has_elements) out_->push_back(',');
  top.has_elements = true;
  top.key_written = true;
  AppendJsonString(out_, key);
  out_->push_back(':');
}

void JsonWriter::String(std::string_view value) {
  BeforeValue();
  AppendJsonString(out_, value);
}

void JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  char text[24];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  out_->append(text, static_cast<size_t>(end - text));
}

void JsonWriter::Int(int64_t value) {
  BeforeValue();
  char text[24];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  out_->append(text, static_cast<size_t>(end - text));
}

void JsonWriter::Bool(bool value) {
  BeforeValue();
  out_->append(value ? "true" : "false");
}

void JsonWriter::Null() {
  BeforeValue();
  out_->append("null");
}

void JsonWriter::Double(double value, int significant_digits) {
  if (!std::isfinite(value)) {
    Null();
    return;
  }
  BeforeValue();
  // 17 significant digits tell every double apart; more only adds noise.
  const int digits = significant_digits < 1 ? 1 : significant_digits > 17 ? 17 : significant_digits;
  char text[40];  // "-d.dddddddddddddddde-308" at most
  const int n = std::snprintf(text, sizeof text, "%.*g", digits, value);
  out_->append(text, n > 0 ? static_cast<size_t>(n) : 0);
}

void JsonWriter::FixedPoint(uint64_t magnitude, unsigned decimals, bool negative) {
  if (decimals > 9) Misuse("FixedPoint with more than 9 decimals");
  BeforeValue();
  uint64_t scale = 1;
  for (unsigned d = 0; d < decimals; ++d) scale *= 10;
  char text[48];
  char* p = text;
  if (negative && magnitude > 0) *p++ = '-';
  p = std::to_chars(p, text + sizeof text, magnitude / scale).ptr;
  if (decimals > 0) {
    *p++ = '.';
    uint64_t fraction = magnitude % scale;
    for (unsigned d = decimals; d-- > 0;) {
      p[d] = static_cast<char>('0' + fraction % 10);
      fraction /= 10;
    }
    p += decimals;
  }
  out_->append(text, static_cast<size_t>(p - text));
}

}  // namespace aon
