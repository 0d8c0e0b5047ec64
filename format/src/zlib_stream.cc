#include "aon/format/zlib_stream.h"

#include <algorithm>

#ifdef AON_HAVE_LIBDEFLATE
#include <libdeflate.h>
#else
#include <zlib.h>
#endif

namespace aon {

#ifdef AON_HAVE_LIBDEFLATE

ZlibCompressor::ZlibCompressor(int level) : level_(std::clamp(level, 0, 12)) {}
ZlibCompressor::~ZlibCompressor() {
  if (compressor_ != nullptr)
    libdeflate_free_compressor(static_cast<libdeflate_compressor*>(compressor_));
}
size_t ZlibCompressor::Bound(size_t n) { return libdeflate_zlib_compress_bound(nullptr, n); }
size_t ZlibCompressor::Compress(const void* in, size_t n, void* out) {
  if (compressor_ == nullptr) compressor_ = libdeflate_alloc_compressor(level_);
  auto* c = static_cast<libdeflate_compressor*>(compressor_);
  // The bound always fits: 0 only without a compressor.
  return c == nullptr ? 0 : libdeflate_zlib_compress(c, in, n, out, Bound(n));
}

#else  // zlib

ZlibCompressor::ZlibCompressor(int level) : level_(std::clamp(level, 0, 9)) {}
ZlibCompressor::~ZlibCompressor() = default;
size_t ZlibCompressor::Bound(size_t n) { return compressBound(static_cast<uLong>(n)); }
size_t ZlibCompressor::Compress(const void* in, size_t n, void* out) {
  uLongf size = compressBound(static_cast<uLong>(n));
  if (compress2(static_cast<Bytef*>(out), &size, static_cast<const Bytef*>(in),
                static_cast<uLong>(n), level_) != Z_OK) {
    return 0;
  }
  return size;
}

#endif

}  // namespace aon
