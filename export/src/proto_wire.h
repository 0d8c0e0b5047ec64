// A protocol-buffers wire-format encoder: just what the Perfetto export needs
// (perfetto_writer.cc), so that AON does not depend on libprotobuf.
//
// Wire format (https://protobuf.dev/programming-guides/encoding/): a message is
// a sequence of fields, each a key varint (field_number << 3 | wire_type) and a
// value:
//   wire type 0  varint: 7 bits per byte, least significant group first, the high
//                bit set on every byte but the last (1-10 bytes). Negative int32 /
//                int64 values are their 64-bit two's complement (10 bytes).
//   wire type 1  fixed64: 8 bytes little-endian (fixed64, double).
//   wire type 2  length-delimited: a varint byte count, then the bytes (string,
//                bytes, an embedded message).
// A repeated field is the same field written again (proto2 does not pack unless
// asked). The writer appends to a caller-owned std::string; an embedded message is
// opened with BeginMessage, filled, and closed with EndMessage, which writes its
// length in front of it as the shortest varint, so the output is canonical:
// BeginMessage leaves one byte for it, enough for the small messages that most
// of a trace is (under 128 bytes); a longer one moves its contents by the
// bytes its length needs more.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace aon::merge::proto {

enum class WireType : uint8_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };

// v as a varint into buf (room for 10 bytes); returns the bytes written.
inline size_t EncodeVarint(uint64_t v, char* buf) {
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>(static_cast<uint8_t>(v) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  return n;
}

// Appends v as a varint (1-10 bytes). Inline: most of an export's fields are
// small varints.
inline void AppendVarint(std::string* out, uint64_t v) {
  if (v < 0x80) {
    out->push_back(static_cast<char>(v));
    return;
  }
  char buf[10];
  out->append(buf, EncodeVarint(v, buf));
}

class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void Varint(uint32_t field, uint64_t v) {  // uint32/uint64/bool/enum
    Key(field, WireType::kVarint);
    AppendVarint(out_, v);
  }
  void Int(uint32_t field, int64_t v) { Varint(field, static_cast<uint64_t>(v)); }  // int32/int64
  void Fixed64(uint32_t field, uint64_t v);
  void Double(uint32_t field, double v);
  void Bytes(uint32_t field, std::string_view v);  // string/bytes
  void BeginMessage(uint32_t field);
  void EndMessage();

  // Embedded messages open now.
  size_t depth() const { return depth_; }
  static constexpr size_t kMaxDepth = 16;
  std::string* out() const { return out_; }

 private:
  void Key(uint32_t field, WireType type) {
    AppendVarint(out_, (uint64_t{field} << 3) | static_cast<uint8_t>(type));
  }

  std::string* out_;
  // Offset of each open message's length byte (its contents follow; no
  // allocation: a writer is made per packet).
  std::array<size_t, kMaxDepth> open_{};
  size_t depth_ = 0;
};

}  // namespace aon::merge::proto
