// aon/base/json_writer.h: escaping (every control character, quotes, backslash, every
// kind of invalid UTF-8), structure (commas, keys, layouts, streaming through a
// cleared buffer), numbers, and a round trip through python3's strict json module
// against an independent oracle (Python's own UTF-8 decoder).
#include "aon/base/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "trace_test_util.h"

namespace aon {
namespace {

std::string Esc(std::string_view s) {
  std::string out;
  AppendJsonString(&out, s);
  return out;
}

const std::string kFffd = "\xEF\xBF\xBD";
std::string Fffd(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += kFffd;
  return s;
}
std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

// (Moved here with the escaper from merge/: the same assertions.)
TEST(JsonString, Escaping) {
  EXPECT_EQ(Esc(""), "\"\"");
  EXPECT_EQ(Esc("plain"), "\"plain\"");
  EXPECT_EQ(Esc("a\"b\\c/d"), "\"a\\\"b\\\\c/d\"");
  EXPECT_EQ(Esc("\n\r\t\b\f"), "\"\\n\\r\\t\\b\\f\"");
  EXPECT_EQ(Esc(std::string("\x00\x01\x1f", 3)), "\"\\u0000\\u0001\\u001f\"");
  EXPECT_EQ(Esc("\x7f"), "\"\x7f\"");
  EXPECT_EQ(Esc("é✓🚀"), "\"é✓🚀\"");
  EXPECT_EQ(Esc("\xff"), "\"" + kFffd + "\"");
  EXPECT_EQ(Esc("\xc0\xaf"), "\"" + kFffd + kFffd + "\"");                          // overlong '/'
  EXPECT_EQ(Esc("\xed\xa0\x80"), "\"" + kFffd + kFffd + kFffd + "\"");              // a surrogate
  EXPECT_EQ(Esc("\xf4\x90\x80\x80"), "\"" + kFffd + kFffd + kFffd + kFffd + "\"");  // > U+10FFFF
  EXPECT_EQ(Esc("a\xe2\x82"), "\"a" + kFffd + kFffd + "\"");  // cut at the end
  EXPECT_EQ(Esc("\xe2\x82\xac"), "\"\xe2\x82\xac\"");         // the euro sign
}

TEST(JsonString, EveryControlCharacter) {
  for (int c = 0; c < 0x20; ++c) {
    std::string expected;
    switch (c) {
      case '\b':
        expected = "\\b";
        break;
      case '\f':
        expected = "\\f";
        break;
      case '\n':
        expected = "\\n";
        break;
      case '\r':
        expected = "\\r";
        break;
      case '\t':
        expected = "\\t";
        break;
      default: {
        char u[8];
        std::snprintf(u, sizeof u, "\\u%04x", c);
        expected = u;
      }
    }
    EXPECT_EQ(Esc(std::string(1, static_cast<char>(c))), Quoted(expected)) << "byte " << c;
    // Inside text, too: nothing around it is disturbed.
    EXPECT_EQ(Esc("a" + std::string(1, static_cast<char>(c)) + "b"), Quoted("a" + expected + "b"));
  }
  // Printable ASCII passes, except the two that need a backslash.
  for (int c = 0x20; c < 0x80; ++c) {
    const std::string one(1, static_cast<char>(c));
    if (c == '"' || c == '\\') {
      EXPECT_EQ(Esc(one), Quoted("\\" + one));
    } else {
      EXPECT_EQ(Esc(one), Quoted(one)) << "byte " << c;
    }
  }
}

TEST(JsonString, WellFormedUtf8AtEveryBoundaryPasses) {
  for (const char* s : {
           "\xc2\x80",          // U+0080, the first two-byte
           "\xdf\xbf",          // U+07FF, the last two-byte
           "\xe0\xa0\x80",      // U+0800, the first three-byte
           "\xed\x9f\xbf",      // U+D7FF, just below the surrogates
           "\xee\x80\x80",      // U+E000, just above them
           "\xef\xbf\xbd",      // U+FFFD itself
           "\xef\xbf\xbf",      // U+FFFF
           "\xf0\x90\x80\x80",  // U+10000, the first four-byte
           "\xf4\x8f\xbf\xbf",  // U+10FFFF, the last code point
       }) {
    EXPECT_EQ(Esc(s), Quoted(s)) << s;
  }
}

TEST(JsonString, InvalidUtf8BecomesOneReplacementPerByte) {
  struct Case {
    const char* what;
    std::string in;
    std::string out;  // between the quotes
  };
  const std::vector<Case> cases = {
      // Lone continuation bytes.
      {"lone 80", "\x80", Fffd(1)},
      {"lone bf", "\xbf", Fffd(1)},
      {"continuations after ASCII", "a\x80\x81z", "a" + Fffd(2) + "z"},
      {"continuation after a complete sequence", "\xc3\xa9\x80", "\xc3\xa9" + Fffd(1)},
      // Bytes that never start a sequence.
      {"c0", "\xc0", Fffd(1)},
      {"c1", "\xc1", Fffd(1)},
      {"f5", "\xf5\x80\x80\x80", Fffd(4)},
      {"fe ff", "\xfe\xff", Fffd(2)},
      // Truncated: by the end, or by a byte that is no continuation.
      {"two-byte cut at the end", "\xc3", Fffd(1)},
      {"two-byte cut by ASCII", "\xc3z", Fffd(1) + "z"},
      {"three-byte cut after 1", "\xe2", Fffd(1)},
      {"three-byte cut after 2", "\xe2\x82", Fffd(2)},
      {"three-byte cut by a quote", "\xe2\x82\"", Fffd(2) + "\\\""},
      {"four-byte cut after 3", "\xf0\x9f\x9a", Fffd(3)},
      {"four-byte cut by a newline", "\xf0\x9f\n", Fffd(2) + "\\n"},
      {"a start byte cuts another", "\xe2\xf0\x9f\x9a\x80", Fffd(1) + "\xf0\x9f\x9a\x80"},
      // Overlong forms.
      {"overlong NUL (c0 80)", "\xc0\x80", Fffd(2)},
      {"overlong c1 bf", "\xc1\xbf", Fffd(2)},
      {"overlong three-byte (e0 80 80)", "\xe0\x80\x80", Fffd(3)},
      {"overlong three-byte (e0 9f bf)", "\xe0\x9f\xbf", Fffd(3)},
      {"overlong four-byte (f0 80 80 80)", "\xf0\x80\x80\x80", Fffd(4)},
      {"overlong four-byte (f0 8f bf bf)", "\xf0\x8f\xbf\xbf", Fffd(4)},
      // UTF-16 surrogates encoded in UTF-8 (CESU-8, WTF-8).
      {"high surrogate d800", "\xed\xa0\x80", Fffd(3)},
      {"low surrogate dfff", "\xed\xbf\xbf", Fffd(3)},
      {"surrogate pair", "\xed\xa0\xbd\xed\xb8\x80", Fffd(6)},
      // Above U+10FFFF.
      {"U+110000", "\xf4\x90\x80\x80", Fffd(4)},
      {"f7 bf bf bf", "\xf7\xbf\xbf\xbf", Fffd(4)},
  };
  for (const Case& c : cases) EXPECT_EQ(Esc(c.in), Quoted(c.out)) << c.what;
}

TEST(JsonWriter, StructureCommasAndKeys) {
  std::string s;
  JsonWriter w(&s);
  w.BeginObject();
  w.Key("a");
  w.Uint(1);
  w.Key("b\"key");
  w.BeginArray();
  w.Int(-2);
  w.String("x");
  w.Bool(true);
  w.Bool(false);
  w.Null();
  w.BeginObject();
  w.EndObject();
  w.BeginArray();
  w.EndArray();
  w.EndArray();
  w.Key("c");
  w.BeginObject();
  w.Key("d");
  w.Double(0.5);
  w.EndObject();
  w.EndObject();
  EXPECT_EQ(w.depth(), 0);
  EXPECT_EQ(s, R"({"a":1,"b\"key":[-2,"x",true,false,null,{},[]],"c":{"d":0.5}})");
}

TEST(JsonWriter, OnePerLineArrays) {
  std::string s;
  JsonWriter w(&s);
  w.BeginObject();
  w.Key("traceEvents");
  w.BeginArray(JsonWriter::Layout::kOnePerLine);
  for (int i = 0; i < 3; ++i) {
    w.BeginObject();
    w.Key("i");
    w.Int(i);
    w.EndObject();
  }
  w.EndArray();
  w.Key("empty");
  w.BeginArray(JsonWriter::Layout::kOnePerLine);
  w.EndArray();
  w.EndObject();
  w.Newline();
  EXPECT_EQ(s, "{\"traceEvents\":[\n{\"i\":0},\n{\"i\":1},\n{\"i\":2}\n],\"empty\":[\n\n]}\n");
}

TEST(JsonWriter, TheBufferCanBeWrittenOutAndClearedBetweenAnyTwoCalls) {
  std::string whole, streamed, chunk;
  JsonWriter a(&whole), b(&chunk);
  auto write = [](JsonWriter& w, const std::function<void()>& after_each) {
    w.BeginArray(JsonWriter::Layout::kOnePerLine);
    after_each();
    for (int i = 0; i < 5; ++i) {
      w.BeginObject();
      after_each();
      w.Key("n");
      after_each();
      w.Uint(static_cast<uint64_t>(i));
      after_each();
      w.Key("s");
      w.String("v\x01");
      after_each();
      w.EndObject();
      after_each();
    }
    w.EndArray();
    after_each();
  };
  write(a, [] {});
  write(b, [&] {
    streamed += chunk;
    chunk.clear();
  });
  EXPECT_EQ(streamed, whole);
  EXPECT_EQ(whole.substr(0, 24), "[\n{\"n\":0,\"s\":\"v\\u0001\"},");
}

TEST(JsonWriter, Numbers) {
  std::string s;
  JsonWriter w(&s);
  w.BeginArray();
  w.Uint(0);
  w.Uint(std::numeric_limits<uint64_t>::max());
  w.Int(std::numeric_limits<int64_t>::min());
  w.Int(std::numeric_limits<int64_t>::max());
  w.Double(0.1);
  w.Double(1.0 / 3, 4);
  w.Double(2.0, 4);
  w.Double(1e300, 6);
  w.Double(std::nan(""));
  w.Double(std::numeric_limits<double>::infinity());
  w.Double(-std::numeric_limits<double>::infinity());
  w.EndArray();
  EXPECT_EQ(s,
            "[0,18446744073709551615,-9223372036854775808,9223372036854775807,"
            "0.10000000000000001,0.3333,2,1e+300,null,null,null]");
}

TEST(JsonWriter, FixedPointIsExact) {
  auto fixed = [](uint64_t m, unsigned d, bool negative = false) {
    std::string s;
    JsonWriter w(&s);
    w.FixedPoint(m, d, negative);
    return s;
  };
  EXPECT_EQ(fixed(0, 3), "0.000");
  EXPECT_EQ(fixed(1, 3), "0.001");
  EXPECT_EQ(fixed(999, 3), "0.999");
  EXPECT_EQ(fixed(1000, 3), "1.000");
  EXPECT_EQ(fixed(1234567, 3), "1234.567");
  EXPECT_EQ(fixed(1500, 3, true), "-1.500");
  EXPECT_EQ(fixed(0, 3, true), "0.000");  // no "-0"
  EXPECT_EQ(fixed(42, 0), "42");
  EXPECT_EQ(fixed(std::numeric_limits<uint64_t>::max(), 3), "18446744073709551.615");
  EXPECT_EQ(fixed(5, 9), "0.000000005");
}

TEST(JsonWriterDeathTest, MisuseAbortsInsteadOfWritingBrokenJson) {
  auto writer = [](auto f) {
    return [f] {
      std::string s;
      JsonWriter w(&s);
      f(w);
    };
  };
  EXPECT_DEATH(writer([](JsonWriter& w) {
                 w.BeginObject();
                 w.Uint(1);
               })(),
               "without a key");
  EXPECT_DEATH(writer([](JsonWriter& w) {
                 w.BeginArray();
                 w.Key("k");
               })(),
               "outside an object");
  EXPECT_DEATH(writer([](JsonWriter& w) {
                 w.BeginArray();
                 w.EndObject();
               })(),
               "EndObject without");
  EXPECT_DEATH(writer([](JsonWriter& w) {
                 w.BeginObject();
                 w.Key("k");
                 w.EndObject();
               })(),
               "without its value");
  EXPECT_DEATH(writer([](JsonWriter& w) {
                 for (int i = 0; i <= JsonWriter::kMaxDepth; ++i) w.BeginArray();
               })(),
               "deeper");
}

// Every string the writer produces parses with python3's strict json module, and
// decodes to what Python's own UTF-8 decoder makes of the input bytes when each
// byte of an invalid stretch becomes one U+FFFD (the error handler below): an
// oracle that shares no code with the writer. Inputs: every byte alone, every
// pair of bytes, and many longer strings over the bytes where UTF-8's rules change.
constexpr const char* kRoundTrip = R"PY(
import codecs, json, sys
codecs.register_error("per_byte", lambda e: ("\ufffd" * (e.end - e.start), e.end))
with open(sys.argv[1], "rb") as f:
    doc = json.loads(f.read().decode("utf-8"))  # strict: no invalid UTF-8, no bare controls
bad = 0
first = ""
for hex_in, got in doc["cases"]:
    want = bytes.fromhex(hex_in).decode("utf-8", errors="per_byte")
    if got != want:
        bad += 1
        if not first:
            first = hex_in + " -> " + repr(got) + " want " + repr(want)
print("cases\t%d" % len(doc["cases"]))
print("bad\t%d" % bad)
print("first_bad\t%s" % first)
print("keys_ok\t%d" % (doc["keys"] == {'k"\\\n\x01\ufffd': 1}))
)PY";

TEST(JsonWriter, RoundTripThroughPythonJson) {
  testing::TempDir dir;
  std::vector<std::string> inputs;
  for (int a = 0; a < 256; ++a) {
    inputs.emplace_back(1, static_cast<char>(a));
    for (int b = 0; b < 256; ++b) {
      inputs.push_back({static_cast<char>(a), static_cast<char>(b)});
    }
  }
  const unsigned char edges[] = {0x00, 0x09, 0x1f, 0x22, 0x2f, 0x41, 0x5c, 0x7f, 0x80, 0x8f,
                                 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1,
                                 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff};
  std::mt19937_64 rng(20261201);
  for (int i = 0; i < 200000; ++i) {
    std::string s(3 + rng() % 6, '\0');
    for (char& c : s) c = static_cast<char>(edges[rng() % sizeof edges]);
    inputs.push_back(std::move(s));
  }
  std::string text;
  JsonWriter w(&text);
  w.BeginObject();
  w.Key("cases");
  w.BeginArray(JsonWriter::Layout::kOnePerLine);
  for (const std::string& in : inputs) {
    std::string hex;
    for (unsigned char c : in) {
      char h[3];
      std::snprintf(h, sizeof h, "%02x", c);
      hex += h;
    }
    w.BeginArray();
    w.String(hex);
    w.String(in);
    w.EndArray();
  }
  w.EndArray();
  // Keys are escaped like values.
  w.Key("keys");
  w.BeginObject();
  w.Key("k\"\\\n\x01\xff");
  w.Uint(1);
  w.EndObject();
  w.EndObject();
  const std::string json = dir.File("cases.json"), script = dir.File("check.py"),
                    out = dir.File("out.txt");
  std::ofstream(json, std::ios::binary) << text;
  std::ofstream(script) << kRoundTrip;
  const int rc = std::system(("python3 " + script + " " + json + " > " + out + " 2>&1").c_str());
  std::stringstream result;
  result << std::ifstream(out).rdbuf();
  ASSERT_EQ(rc, 0) << result.str();
  std::map<std::string, std::string> values;
  std::string line;
  while (std::getline(result, line)) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) values[line.substr(0, tab)] = line.substr(tab + 1);
  }
  EXPECT_EQ(values["cases"], std::to_string(inputs.size()));
  EXPECT_EQ(values["bad"], "0") << values["first_bad"];
  EXPECT_EQ(values["keys_ok"], "1");
}

}  // namespace
}  // namespace aon
