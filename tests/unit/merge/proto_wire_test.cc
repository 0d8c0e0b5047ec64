// The protobuf wire-format encoder of the Perfetto export (export/src/proto_wire.h):
// bytes checked against the encoding spec's own examples, and every value read
// back by an independent decoder written here from the spec.
#include "proto_wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace aon::merge::proto {
namespace {

// Bytes AppendVarint writes for v.
size_t VarintSize(uint64_t v) {
  std::string s;
  AppendVarint(&s, v);
  return s.size();
}

std::string Hex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) {
    if (!s.empty()) s += ' ';
    s += kDigits[c >> 4];
    s += kDigits[c & 15];
  }
  return s;
}

// A decoder of one message level: fields in order, as (number, wire type, value).
struct DecodedField {
  uint32_t number = 0;
  int wire_type = -1;
  uint64_t value = 0;  // varint or fixed64
  std::string bytes;   // length-delimited
};

bool ReadVarint(const std::string& in, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*pos >= in.size()) return false;
    const auto b = static_cast<uint8_t>(in[(*pos)++]);
    *v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

::testing::AssertionResult Decode(const std::string& in, std::vector<DecodedField>* out) {
  size_t pos = 0;
  while (pos < in.size()) {
    uint64_t key = 0;
    if (!ReadVarint(in, &pos, &key)) return ::testing::AssertionFailure() << "bad key at " << pos;
    DecodedField f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire_type = static_cast<int>(key & 7);
    if (f.wire_type == 0) {
      if (!ReadVarint(in, &pos, &f.value)) return ::testing::AssertionFailure() << "bad varint";
    } else if (f.wire_type == 1) {
      if (pos + 8 > in.size()) return ::testing::AssertionFailure() << "short fixed64";
      for (int i = 0; i < 8; ++i) {
        f.value |= uint64_t{static_cast<uint8_t>(in[pos + i])} << (8 * i);
      }
      pos += 8;
    } else if (f.wire_type == 2) {
      uint64_t n = 0;
      if (!ReadVarint(in, &pos, &n) || n > in.size() - pos) {
        return ::testing::AssertionFailure() << "bad length at " << pos;
      }
      f.bytes = in.substr(pos, n);
      pos += n;
    } else {
      return ::testing::AssertionFailure() << "unexpected wire type " << f.wire_type;
    }
    out->push_back(std::move(f));
  }
  return ::testing::AssertionSuccess();
}

TEST(ProtoWire, VarintsAsTheSpecEncodesThem) {
  const std::vector<std::pair<uint64_t, std::string>> cases = {
      {0, "00"},           {1, "01"},
      {127, "7f"},         {128, "80 01"},
      {150, "96 01"},  // the spec's example
      {300, "ac 02"},      {16383, "ff 7f"},
      {16384, "80 80 01"}, {UINT64_MAX, "ff ff ff ff ff ff ff ff ff 01"},
  };
  for (const auto& [v, hex] : cases) {
    std::string out;
    AppendVarint(&out, v);
    EXPECT_EQ(Hex(out), hex) << v;
  }
}

TEST(ProtoWire, ScalarFieldsHaveTheirKeysAndByteOrder) {
  std::string out;
  Writer w(&out);
  w.Varint(1, 150);                     // 08 96 01: the spec's "Test1 { a: 150 }"
  w.Int(2, -1);                         // int64 -1: ten bytes
  w.Fixed64(3, 0x0102030405060708ull);  // little-endian
  w.Double(4, 1.0);                     // 0x3ff0000000000000
  w.Bytes(5, "testing");                // 2a 07 74 65 73 74 69 6e 67
  EXPECT_EQ(Hex(out),
            "08 96 01 "
            "10 ff ff ff ff ff ff ff ff ff 01 "
            "19 08 07 06 05 04 03 02 01 "
            "21 00 00 00 00 00 00 f0 3f "
            "2a 07 74 65 73 74 69 6e 67");
}

TEST(ProtoWire, EmbeddedMessagesGetTheirLengthsAtEveryDepthAndSize) {
  // Contents of 0, 1, 127, 128 and 20000 bytes: length varints of 1, 1, 1, 2, 3 bytes.
  for (size_t size : {size_t{0}, size_t{1}, size_t{127}, size_t{128}, size_t{20000}}) {
    std::string out;
    Writer w(&out);
    w.Varint(1, 7);
    w.BeginMessage(2);
    w.BeginMessage(3);
    w.Bytes(4, std::string(size, 'x'));
    w.EndMessage();
    w.Varint(5, size);
    w.EndMessage();
    w.Varint(6, 9);
    EXPECT_EQ(w.depth(), 0u);

    std::vector<DecodedField> top;
    ASSERT_TRUE(Decode(out, &top)) << size;
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(top[0].number, 1u);
    EXPECT_EQ(top[0].value, 7u);
    EXPECT_EQ(top[2].number, 6u);
    EXPECT_EQ(top[2].value, 9u);
    ASSERT_EQ(top[1].wire_type, 2);
    std::vector<DecodedField> mid;
    ASSERT_TRUE(Decode(top[1].bytes, &mid));
    ASSERT_EQ(mid.size(), 2u);
    EXPECT_EQ(mid[1].value, size);
    std::vector<DecodedField> inner;
    ASSERT_TRUE(Decode(mid[0].bytes, &inner));
    ASSERT_EQ(inner.size(), 1u);
    EXPECT_EQ(inner[0].bytes, std::string(size, 'x'));
    // Lengths are the shortest varints: the message is as small as it can be.
    const size_t inner_len = 1 + VarintSize(size) + size;
    const size_t mid_len = 1 + VarintSize(inner_len) + inner_len + 1 + VarintSize(size);
    EXPECT_EQ(out.size(), 2 + 1 + VarintSize(mid_len) + mid_len + 2) << size;
  }
}

TEST(ProtoWire, RandomFieldsReadBackExactly) {
  std::mt19937_64 rng(19);
  std::string out;
  Writer w(&out);
  std::vector<DecodedField> expected;
  for (int i = 0; i < 2000; ++i) {
    DecodedField f;
    f.number = 1 + static_cast<uint32_t>(rng() % 536870911);  // 1 .. 2^29 - 1
    const uint64_t v = rng() >> (rng() % 64);
    switch (rng() % 4) {
      case 0:
        w.Varint(f.number, v);
        f.wire_type = 0;
        f.value = v;
        break;
      case 1:
        w.Int(f.number, -static_cast<int64_t>(v >> 1));
        f.wire_type = 0;
        f.value = static_cast<uint64_t>(-static_cast<int64_t>(v >> 1));
        break;
      case 2:
        w.Fixed64(f.number, v);
        f.wire_type = 1;
        f.value = v;
        break;
      default:
        f.bytes = std::string(v % 300, static_cast<char>(v));
        w.Bytes(f.number, f.bytes);
        f.wire_type = 2;
        break;
    }
    expected.push_back(std::move(f));
  }
  std::vector<DecodedField> got;
  ASSERT_TRUE(Decode(out, &got));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].number, expected[i].number) << i;
    EXPECT_EQ(got[i].wire_type, expected[i].wire_type) << i;
    EXPECT_EQ(got[i].value, expected[i].value) << i;
    EXPECT_EQ(got[i].bytes, expected[i].bytes) << i;
  }
}

TEST(ProtoWire, DoublesKeepEveryBit) {
  for (double d : {0.0, -0.0, 1.5, -2.25e-300, std::numeric_limits<double>::infinity(),
                   std::numeric_limits<double>::denorm_min()}) {
    std::string out;
    Writer w(&out);
    w.Double(1, d);
    std::vector<DecodedField> got;
    ASSERT_TRUE(Decode(out, &got));
    ASSERT_EQ(got.size(), 1u);
    double back = 0;
    std::memcpy(&back, &got[0].value, sizeof back);
    EXPECT_EQ(std::signbit(back), std::signbit(d));
    EXPECT_EQ(back, d);
  }
}

}  // namespace
}  // namespace aon::merge::proto
