#include "aon/base/gpu_uuid.h"

namespace aon {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

uint64_t Fnv1a(std::string_view text, uint64_t basis) {
  uint64_t h = basis;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

GpuUuid GpuUuidFromText(std::string_view text) {
  if (text.starts_with("GPU-")) {
    GpuUuid u;
    int digits = 0;
    bool ok = true;
    for (char c : text.substr(4)) {
      if (c == '-') continue;
      const int v = HexValue(c);
      if (v < 0 || digits >= 32) {
        ok = false;
        break;
      }
      uint64_t& half = digits < 16 ? u.hi : u.lo;
      half = (half << 4) | static_cast<uint64_t>(v);
      ++digits;
    }
    if (ok && digits == 32) return u;
  }
  // Two FNV-1a hashes with different offset bases.
  return GpuUuid{Fnv1a(text, 0xcbf29ce484222325ull), Fnv1a(text, 0x84222325cbf29ce4ull)};
}

std::string GpuUuidText(const unsigned char bytes[16]) {
  static const char* hex = "0123456789abcdef";
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    s += hex[bytes[i] >> 4];
    s += hex[bytes[i] & 15];
    if (i == 3 || i == 5 || i == 7 || i == 9) s += '-';
  }
  return s;
}

}  // namespace aon
