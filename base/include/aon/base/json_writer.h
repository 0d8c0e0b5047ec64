// JsonWriter: the one writer of JSON text in AON. trace.json and overview.json
// (merge/), aon-inspect --json and aon-report --json all go through it, so they
// escape the same way and stay valid for strict parsers (Python's json, Perfetto).
//
// Shape: a forward-only writer that appends to a std::string the caller owns.
// The caller may write the string out and clear it between any two calls (the
// writer keeps its state, not the text), which is how the trace exporters stream
// millions of events through a bounded buffer. The writer puts in the commas and
// the ':' after keys; the caller says what comes next:
//
//     JsonWriter w(&text);
//     w.BeginObject();
//     w.Key("name"); w.String(kernel_name);
//     w.Key("dur");  w.FixedPoint(1500, 3);       // 1.500
//     w.EndObject();                              // {"name":"...","dur":1.500}
//
// Strings (keys and values) are escaped as RFC 8259 requires and no more:
//   * '"' and '\' get a backslash; \b \f \n \r \t their short forms; every other
//     byte below 0x20 becomes \u00XX (lower-case hex); DEL (0x7f) and '/' pass;
//   * well-formed UTF-8 passes through unchanged (RFC 3629: no overlong forms, no
//     surrogates U+D800..U+DFFF, nothing above U+10FFFF);
//   * every byte that does not start a well-formed sequence becomes U+FFFD
//     (EF BF BD), one per byte, and the next byte is looked at afresh: a lone
//     continuation byte, a sequence cut short (by the end or by a byte that is no
//     continuation), an overlong form, an encoded surrogate and a code point above
//     U+10FFFF each give one U+FFFD per byte. Kernel and NVTX names come from any
//     process, so nothing read from a trace can make the output invalid.
// Numbers: integers exactly; FixedPoint for exact decimal fractions of integers
// (ns as us with 3 decimals); Double with a chosen number of significant digits,
// and `null` for NaN and infinities, which JSON cannot hold.
//
// Whitespace: none, except one element per line in an array opened with
// BeginArray(Layout::kOnePerLine) ("[\n", ",\n" between elements, "\n]"), and
// Newline() wherever the caller wants one.
//
// Misuse (a value where a key is due, a key in an array, closing the wrong
// container, nesting deeper than kMaxDepth) is a bug in the caller, not bad
// input: the writer aborts with a message rather than write broken JSON.
// No allocation besides the growth of the caller's string.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace aon {

// Appends `s` to `out` as a JSON string literal, quotes included, escaped as above.
void AppendJsonString(std::string* out, std::string_view s);

class JsonWriter {
 public:
  static constexpr int kMaxDepth = 32;
  enum class Layout : uint8_t { kCompact, kOnePerLine };

  explicit JsonWriter(std::string* out) : out_(out) {}
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  void BeginObject();
  void EndObject();
  void BeginArray(Layout layout = Layout::kCompact);
  void EndArray();
  // The next member's key (objects only); its value follows.
  void Key(std::string_view key);

  void String(std::string_view value);
  void Uint(uint64_t value);
  void Int(int64_t value);
  void Bool(bool value);
  void Null();
  // printf's "%.<significant_digits>g" (1..17); NaN and infinities become null.
  void Double(double value, int significant_digits = 17);
  // magnitude / 10^decimals with exactly `decimals` digits after the point, a '-'
  // in front when `negative` (and magnitude > 0): FixedPoint(1234567, 3) = 1234.567.
  // decimals <= 9.
  void FixedPoint(uint64_t magnitude, unsigned decimals, bool negative = false);

  // A '\n' in the text (whitespace is allowed between any two tokens).
  void Newline() { out_->push_back('\n'); }

  // Containers open now (0 once the top-level value is complete).
  int depth() const { return depth_; }
  std::string* out() const { return out_; }

 private:
  struct Level {
    bool object = false;
    bool one_per_line = false;
    bool has_elements = false;
    bool key_written = false;  // objects: a key is waiting for its value
  };
  void BeforeValue();
  void Open(char bracket, bool object, Layout layout);
  void Close(char bracket, bool object);
  [[noreturn]] static void Misuse(const char* what);

  std::string* out_;
  std::array<Level, kMaxDepth> levels_{};
  int depth_ = 0;
};

}  // namespace aon
