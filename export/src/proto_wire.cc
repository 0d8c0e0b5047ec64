#include "proto_wire.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace aon::merge::proto {

namespace {

// v as a varint into buf (room for 10 bytes); returns the bytes written.
size_t EncodeVarint(uint64_t v, char* buf) {
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>(static_cast<uint8_t>(v) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  return n;
}

}  // namespace

void AppendVarint(std::string* out, uint64_t v) {
  if (v < 0x80) {
    out->push_back(static_cast<char>(v));
    return;
  }
  char buf[10];
  out->append(buf, EncodeVarint(v, buf));
}


void Writer::Key(uint32_t field, WireType type) {
  AppendVarint(out_, (uint64_t{field} << 3) | static_cast<uint8_t>(type));
}

void Writer::Varint(uint32_t field, uint64_t v) {
  Key(field, WireType::kVarint);
  AppendVarint(out_, v);
}

void Writer::Fixed64(uint32_t field, uint64_t v) {
  Key(field, WireType::kFixed64);
  char buf[8];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>(static_cast<uint8_t>(v >> (8 * i)));
  out_->append(buf, 8);
}

void Writer::Double(uint32_t field, double v) {
  uint64_t bits = 0;
  static_assert(sizeof bits == sizeof v);
  std::memcpy(&bits, &v, sizeof bits);
  Fixed64(field, bits);
}

void Writer::Bytes(uint32_t field, std::string_view v) {
  Key(field, WireType::kLengthDelimited);
  AppendVarint(out_, v.size());
  out_->append(v);
}

void Writer::BeginMessage(uint32_t field) {
  if (depth_ == kMaxDepth) {
    // A caller bug, not bad input: the export's messages nest a few deep.
    std::fprintf(stderr, "aon: proto::Writer: messages nested deeper than %zu\n", kMaxDepth);
    std::abort();
  }
  Key(field, WireType::kLengthDelimited);
  open_[depth_++] = out_->size();
}

void Writer::EndMessage() {
  if (depth_ == 0) {
    // A caller bug, not bad input: never write a message with a wrong length.
    std::fprintf(stderr, "aon: proto::Writer: EndMessage without BeginMessage\n");
    std::abort();
  }
  const size_t start = open_[--depth_];
  char length[10];
  out_->insert(start, length, EncodeVarint(out_->size() - start, length));
}

}  // namespace aon::merge::proto
