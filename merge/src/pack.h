// Byte packing for what merge processes tell each other (MergeComm::Allgather):
// fixed-width little-endian numbers and length-prefixed strings. An Unpacker
// never reads past its input; a short or malformed message sets ok() false and
// reads zeros from then on (the processes run the same binary, so this only
// guards against bugs).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace aon::merge {

class Packer {
 public:
  void U64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void Str(std::string_view s) {
    U64(s.size());
    out_.append(s);
  }
  void Strs(const std::vector<std::string>& v) {
    U64(v.size());
    for (const std::string& s : v) Str(s);
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
  std::string Str() {
    const uint64_t n = U64();
    if (!ok_ || n > in_.size() - pos_) {
      ok_ = false;
      return {};
    }
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  std::vector<std::string> Strs() {
    const uint64_t n = U64();
    std::vector<std::string> v;
    for (uint64_t i = 0; i < n && ok_; ++i) v.push_back(Str());
    return v;
  }
  void Raw(void* out, size_t n) {
    if (n == 0) return;  // memset/memcpy take no null pointer, even for 0 bytes
    if (!ok_ || n > in_.size() - pos_) {
      ok_ = false;
      std::memset(out, 0, n);
      return;
    }
    std::memcpy(out, in_.data() + pos_, n);
    pos_ += n;
  }
  bool ok() const { return ok_; }
  bool done() const { return pos_ == in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace aon::merge
