#include "proto_wire.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace aon::merge::proto {

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
  out_->push_back(0);  // the length's first byte
}

void Writer::EndMessage() {
  if (depth_ == 0) {
    // A caller bug, not bad input: never write a message with a wrong length.
    std::fprintf(stderr, "aon: proto::Writer: EndMessage without BeginMessage\n");
    std::abort();
  }
  const size_t at = open_[--depth_];
  const size_t size = out_->size() - at - 1;
  if (size < 0x80) {
    (*out_)[at] = static_cast<char>(size);
    return;
  }
  char length[10];
  const size_t n = EncodeVarint(size, length);
  out_->insert(at + 1, length + 1, n - 1);  // the contents move by the bytes beyond the first
  (*out_)[at] = length[0];
}

}  // namespace aon::merge::proto
