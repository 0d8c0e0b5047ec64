// Byte packing for what merge processes tell each other (messages.h):
// fixed-width little-endian numbers and length-prefixed strings. An Unpacker
// never reads past its input and never allocates more than its input could
// hold; a short or malformed message sets ok() false and reads zeros from then
// on (the processes run the same binary, so this only guards against bugs).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace aon::merge {

class Packer {
 public:
  void U64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void Bool(bool v) { U64(v ? 1 : 0); }
  void Str(std::string_view s) {
    U64(s.size());
    out_.append(s);
  }
  void Strs(std::span<const std::string> v) {
    U64(v.size());
    for (const std::string& s : v) Str(s);
  }
  void U64s(std::span<const uint64_t> v) {
    U64(v.size());
    Raw(v.data(), v.size_bytes());
  }
  void Raw(const void* data, size_t n) {
    if (n != 0) out_.append(static_cast<const char*>(data), n);
  }
  const std::string& bytes() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Unpacker {
 public:
  explicit Unpacker(std::string_view in) : in_(in) {}
  uint64_t U64() {
    uint64_t v = 0;
    Raw(&v, sizeof(v));
    return v;
  }
  int64_t I64() { return static_cast<int64_t>(U64()); }
  // 0 or 1; anything else is a malformed message.
  bool Bool() {
    const uint64_t v = U64();
    if (v > 1) ok_ = false;
    return ok_ && v == 1;
  }
  // A count of items of at least `min_item_bytes` each: more than the rest of
  // the input could hold is malformed (and never allocated).
  uint64_t Count(size_t min_item_bytes) {
    const uint64_t n = U64();
    if (ok_ && min_item_bytes > 0 && n > remaining() / min_item_bytes) ok_ = false;
    return ok_ ? n : 0;
  }
  std::string Str() { return std::string(StrView()); }
  // The next string where it lies in the input (no copy).
  std::string_view StrView() {
    const uint64_t n = U64();
    if (!ok_ || n > remaining()) {
      ok_ = false;
      return {};
    }
    const std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::vector<std::string> Strs() {
    std::vector<std::string> v;
    EachStr([&v](uint64_t n) { v.reserve(n); }, [&v](std::string_view s) { v.emplace_back(s); });
    return v;
  }
  // Strs without the vector: `count` gets the number of strings, then `each`
  // each string where it lies in the input.
  template <class Count, class Each>
  void EachStr(Count&& count, Each&& each) {
    const uint64_t n = this->Count(sizeof(uint64_t));
    count(n);
    for (uint64_t i = 0; i < n && ok_; ++i) {
      const std::string_view s = StrView();
      if (ok_) each(s);
    }
  }
  std::vector<uint64_t> U64s() {
    const uint64_t n = Count(sizeof(uint64_t));
    std::vector<uint64_t> v(n);
    Raw(v.data(), n * sizeof(uint64_t));
    return v;
  }
  void Raw(void* out, size_t n) {
    if (!ok_ || n > remaining()) {
      ok_ = false;
      if (n > 0) std::memset(out, 0, n);
      return;
    }
    if (n > 0) std::memcpy(out, in_.data() + pos_, n);
    pos_ += n;
  }
  // For a value the caller finds out of range: the message is malformed.
  void Fail() { ok_ = false; }
  bool ok() const { return ok_; }
  bool done() const { return pos_ == in_.size(); }
  size_t remaining() const { return in_.size() - pos_; }
  size_t position() const { return pos_; }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace aon::merge
