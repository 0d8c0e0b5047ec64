#include "chunk_codec.h"

#include <algorithm>
#include <cstring>

#include "run_deflate.h"

#ifdef AON_HAVE_LIBDEFLATE
#include <libdeflate.h>
#else
#include <zlib.h>
#endif

namespace aon::chunk_codec {
namespace {

// Rows converted together: their struct bytes stay in L1 while every column
// passes over them.
constexpr size_t kRowBlock = 256;

template <size_t kBytes>
void PackColumn(const uint8_t* rows, size_t struct_bytes, uint32_t offset, size_t n, uint8_t* out,
                size_t stream_stride) {
  for (size_t i = 0; i < n; ++i) {
    uint64_t v = 0;
    std::memcpy(&v, rows + i * struct_bytes + offset, kBytes);
    for (size_t k = 0; k < kBytes; ++k)
      out[k * stream_stride + i] = static_cast<uint8_t>(v >> (8 * k));
  }
}

template <size_t kBytes>
void UnpackColumn(const uint8_t* in, size_t stream_stride, size_t n, uint8_t* rows,
                  size_t struct_bytes, uint32_t offset) {
  for (size_t i = 0; i < n; ++i) {
    uint64_t v = 0;
    for (size_t k = 0; k < kBytes; ++k) v |= uint64_t{in[k * stream_stride + i]} << (8 * k);
    std::memcpy(rows + i * struct_bytes + offset, &v, kBytes);
  }
}

}  // namespace

RowLayout LayoutOf(const TableSchema& schema) {
  RowLayout layout;
  layout.struct_bytes = schema.record_size;
  uint32_t packed = 0;
  for (const Field& f : schema.fields) {
    const auto bytes = static_cast<uint32_t>(FieldTypeSize(f.type));
    layout.columns.push_back({static_cast<uint32_t>(f.offset), packed, bytes});
    packed += bytes;
  }
  layout.packed_bytes = packed;
  return layout;
}

void PackChunk(const RowLayout& layout, const void* rows, size_t n, size_t chunk_rows, bool shuffle,
               uint8_t* chunk) {
  const auto* in = static_cast<const uint8_t*>(rows);
  const size_t sb = layout.struct_bytes, pb = layout.packed_bytes;
  if (!shuffle) {
    for (size_t i = 0; i < n; ++i) {
      for (const RowLayout::Column& c : layout.columns) {
        std::memcpy(chunk + i * pb + c.packed_offset, in + i * sb + c.struct_offset, c.bytes);
      }
    }
    std::memset(chunk + n * pb, 0, (chunk_rows - n) * pb);
    return;
  }
  for (size_t b = 0; b < n; b += kRowBlock) {
    const size_t m = std::min(kRowBlock, n - b);
    for (const RowLayout::Column& c : layout.columns) {
      uint8_t* out = chunk + c.packed_offset * chunk_rows + b;
      const uint8_t* src = in + b * sb;
      switch (c.bytes) {
        case 1:
          PackColumn<1>(src, sb, c.struct_offset, m, out, chunk_rows);
          break;
        case 2:
          PackColumn<2>(src, sb, c.struct_offset, m, out, chunk_rows);
          break;
        case 4:
          PackColumn<4>(src, sb, c.struct_offset, m, out, chunk_rows);
          break;
        default:
          PackColumn<8>(src, sb, c.struct_offset, m, out, chunk_rows);
          break;
      }
    }
  }
  if (n < chunk_rows) {
    for (size_t j = 0; j < pb; ++j) std::memset(chunk + j * chunk_rows + n, 0, chunk_rows - n);
  }
}

void UnpackChunk(const RowLayout& layout, const uint8_t* chunk, size_t chunk_rows, size_t first,
                 size_t n, bool shuffle, void* rows) {
  auto* out = static_cast<uint8_t*>(rows);
  const size_t sb = layout.struct_bytes, pb = layout.packed_bytes;
  if (!shuffle) {
    for (size_t i = 0; i < n; ++i) {
      for (const RowLayout::Column& c : layout.columns) {
        std::memcpy(out + i * sb + c.struct_offset, chunk + (first + i) * pb + c.packed_offset,
                    c.bytes);
      }
    }
    return;
  }
  for (size_t b = 0; b < n; b += kRowBlock) {
    const size_t m = std::min(kRowBlock, n - b);
    for (const RowLayout::Column& c : layout.columns) {
      const uint8_t* in = chunk + c.packed_offset * chunk_rows + first + b;
      uint8_t* dst = out + b * sb;
      switch (c.bytes) {
        case 1:
          UnpackColumn<1>(in, chunk_rows, m, dst, sb, c.struct_offset);
          break;
        case 2:
          UnpackColumn<2>(in, chunk_rows, m, dst, sb, c.struct_offset);
          break;
        case 4:
          UnpackColumn<4>(in, chunk_rows, m, dst, sb, c.struct_offset);
          break;
        default:
          UnpackColumn<8>(in, chunk_rows, m, dst, sb, c.struct_offset);
          break;
      }
    }
  }
}

uint32_t Fletcher32(const uint8_t* data, size_t n) {
  // 360 words keep both sums below 2^32 between folds (sum2 grows by at most
  // 360 x 360 / 2 x 0xffff plus the folded start).
  constexpr size_t kWordsPerFold = 360;
  uint32_t sum1 = 0, sum2 = 0;
  size_t words = n / 2;
  while (words > 0) {
    const size_t block = std::min(words, kWordsPerFold);
    words -= block;
    for (size_t w = 0; w < block; ++w, data += 2) {
      sum1 += static_cast<uint32_t>(data[0]) << 8 | data[1];
      sum2 += sum1;
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  if (n % 2 != 0) {
    sum1 += static_cast<uint32_t>(*data) << 8;
    sum2 += sum1;
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  sum1 = (sum1 & 0xffff) + (sum1 >> 16);
  sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  return sum2 << 16 | sum1;
}

void AppendChecksum(ChunkBuffer* chunk) {
  const uint32_t sum = Fletcher32(chunk->data(), chunk->size());
  for (int b = 0; b < 4; ++b) chunk->push_back(static_cast<uint8_t>(sum >> (8 * b)));
}

bool CheckAndStripChecksum(const uint8_t* chunk, size_t* n) {
  if (*n < 4) return false;
  const size_t body = *n - 4;
  uint32_t stored = 0;
  for (int b = 0; b < 4; ++b) stored |= static_cast<uint32_t>(chunk[body + b]) << (8 * b);
  if (stored != Fletcher32(chunk, body)) return false;
  *n = body;
  return true;
}

Deflater::Deflater(int level) : level_(level), library_(level) {}
Deflater::~Deflater() = default;
bool Deflater::LibraryCompress(ZlibCompressor& c, const uint8_t* in, size_t n, ChunkBuffer* out) {
  out->resize(ZlibCompressor::Bound(n));
  const size_t size = c.Compress(in, n, out->data());
  out->resize(size);
  return size > 0;
}
bool Deflater::CompressMatching(const uint8_t* in, size_t n, ChunkBuffer* out) {
  return LibraryCompress(matching_, in, n, out);
}
bool Deflater::Compress(const uint8_t* in, size_t n, ChunkBuffer* out) {
  if (level_ <= 1) {
    RunDeflate(in, n, out, &symbols_);
    return true;
  }
  return LibraryCompress(library_, in, n, out);
}

#ifdef AON_HAVE_LIBDEFLATE

Inflater::Inflater() = default;
Inflater::~Inflater() {
  if (decompressor_ != nullptr) {
    libdeflate_free_decompressor(static_cast<libdeflate_decompressor*>(decompressor_));
  }
}
bool Inflater::InflateExact(const uint8_t* in, size_t n, uint8_t* out, size_t out_n) {
  if (decompressor_ == nullptr) decompressor_ = libdeflate_alloc_decompressor();
  auto* d = static_cast<libdeflate_decompressor*>(decompressor_);
  // No actual-size argument: libdeflate then fails unless the stream holds
  // exactly out_n bytes.
  return d != nullptr &&
         libdeflate_zlib_decompress(d, in, n, out, out_n, nullptr) == LIBDEFLATE_SUCCESS;
}

#else  // zlib

Inflater::Inflater() = default;
Inflater::~Inflater() = default;
bool Inflater::InflateExact(const uint8_t* in, size_t n, uint8_t* out, size_t out_n) {
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return false;
  z.next_in = const_cast<Bytef*>(in);
  z.avail_in = static_cast<uInt>(n);
  z.next_out = out;
  z.avail_out = static_cast<uInt>(out_n);
  const int rc = inflate(&z, Z_FINISH);
  const bool ok = rc == Z_STREAM_END && z.total_out == out_n;
  inflateEnd(&z);
  return ok;
}

#endif

}  // namespace aon::chunk_codec
