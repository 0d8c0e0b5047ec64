// One zlib stream (RFC 1950) of a buffer, made by the library AON was built
// with: libdeflate when the build found it (about three times zlib's speed),
// zlib otherwise. The record tables' chunks (format/src/chunk_codec.h) and the
// Perfetto trace's compressed packets (export/src/packet_file.h) are deflated
// through it.
#pragma once

#include <cstddef>

namespace aon {

class ZlibCompressor {
 public:
  // The library's level (0 stored .. 12 for libdeflate, .. 9 for zlib; clamped
  // to its range). Nothing is allocated before the first Compress.
  explicit ZlibCompressor(int level);
  ~ZlibCompressor();
  ZlibCompressor(const ZlibCompressor&) = delete;
  ZlibCompressor& operator=(const ZlibCompressor&) = delete;

  // The worst-case size of the stream of `n` bytes, at any level.
  static size_t Bound(size_t n);
  // `n` bytes at `in` as one stream at `out` (room for Bound(n) bytes); the
  // stream's size, 0 when the compressor could not be made (out of memory).
  size_t Compress(const void* in, size_t n, void* out);

 private:
  int level_;
  void* compressor_ = nullptr;  // libdeflate's, when built with it
};

}  // namespace aon
