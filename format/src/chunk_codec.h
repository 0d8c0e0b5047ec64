// Record-table chunks without HDF5's filter pipeline and type conversion: the
// bytes of one chunk as they are stored, made from (or turned back into) rows
// in their struct layout. TraceWriter and TraceReader use them with
// H5Dwrite_chunk / H5Dread_chunk for the tables AON writes itself
// (direct_chunk_io.h says when); every other table goes through H5Dwrite / H5Dread.
//
// What a stored chunk is (HDF5's own filters, so that h5py, h5dump and any
// HDF5 reader open the file as before): `chunk_rows` rows, packed (each field
// at the next byte, little-endian; rows past the table's end are zeros),
//   - unfiltered: those bytes as they are;
//   - shuffle + deflate (filter ids 2 and 1, in that order): the bytes
//     shuffled (byte j of every row, row after row, then byte j + 1: HDF5's
//     H5Z_FILTER_SHUFFLE with the packed row size), then one zlib stream
//     (RFC 1950: what H5Z_FILTER_DEFLATE writes and reads);
//   - either one, checksummed (filter id 3 last): the bytes followed by their
//     Fletcher-32 checksum, 4 bytes little-endian, as H5Z_FILTER_FLETCHER32
//     writes and checks it (Fletcher32 below).
// Why: HDF5 converts a compound row member by member through buffers it zeroes
// for every call, and zlib inflates and deflates at a third of libdeflate's
// speed (bench/RESULTS.md, "Merge speed"). libdeflate is used when the build
// found it (AON_HAVE_LIBDEFLATE), zlib otherwise; both write and read the same
// format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "aon/format/schema.h"
#include "aon/format/zlib_stream.h"
#include "chunk_buffer.h"

namespace aon::chunk_codec {

// Where each stored field of a row lies, in the struct and on disk.
struct RowLayout {
  struct Column {
    uint32_t struct_offset;
    uint32_t packed_offset;
    uint32_t bytes;  // 1, 2, 4 or 8
  };
  std::vector<Column> columns;
  size_t struct_bytes = 0;  // schema.record_size
  size_t packed_bytes = 0;  // the stored row: the fields' sizes summed
};
RowLayout LayoutOf(const TableSchema& schema);

// Rows [0, n) of `rows` (struct layout) as the stored bytes of a chunk of
// `chunk_rows` rows (n <= chunk_rows; the rest zeros): chunk_rows x
// packed_bytes bytes at `chunk`, shuffled when `shuffle`.
void PackChunk(const RowLayout& layout, const void* rows, size_t n, size_t chunk_rows, bool shuffle,
               uint8_t* chunk);

// Rows [first, first + n) of a chunk (as PackChunk makes it) into `rows`,
// struct layout. Bytes of the struct that are no field are left as they are.
void UnpackChunk(const RowLayout& layout, const uint8_t* chunk, size_t chunk_rows, size_t first,
                 size_t n, bool shuffle, void* rows);

// zlib streams (RFC 1950), as HDF5's deflate filter writes them. Level 1 is
// AON's run-length encoder (run_deflate.h), the fastest; 2-9 (up to 12 with
// libdeflate) the library's levels.
// HDF5's Fletcher-32 of `n` bytes: 16-bit words taken big-endian (a last odd
// byte as a word's high byte), both sums folded to 16 bits every 360 words
// and at the end; the result is sum2 << 16 | sum1.
uint32_t Fletcher32(const uint8_t* data, size_t n);
// Appends the checksum of the buffer's bytes (the checksum filter's output).
void AppendChecksum(ChunkBuffer* chunk);
// A stored checksummed chunk of `*n` bytes: true when its last 4 bytes are the
// checksum of the others, and *n is then the size without them.
bool CheckAndStripChecksum(const uint8_t* chunk, size_t* n);

class Deflater {
 public:
  explicit Deflater(int level);
  ~Deflater();
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;
  int level() const { return level_; }
  // Compresses `n` bytes into *out (resized to the stream's size). False only
  // when the compressor could not be made (out of memory).
  bool Compress(const uint8_t* in, size_t n, ChunkBuffer* out);
  // The library's level 1 (an LZ77 match finder), whatever `level`: what a
  // writer at level 1 tries now and then against the run-length encoder, for
  // tables whose chunks repeat at longer distances than runs (trace_writer.cc).
  bool CompressMatching(const uint8_t* in, size_t n, ChunkBuffer* out);

 private:
  static bool LibraryCompress(ZlibCompressor& c, const uint8_t* in, size_t n, ChunkBuffer* out);

  int level_;
  std::vector<uint16_t> symbols_;  // the run-length encoder's scratch
  ZlibCompressor matching_{1};     // the library's level 1
  ZlibCompressor library_;         // the library at `level`
};

class Inflater {
 public:
  Inflater();
  ~Inflater();
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;
  // Inflates one zlib stream of `n` bytes into exactly `out_n` bytes at `out`.
  // False when the stream is damaged or inflates to more or fewer bytes: a
  // stored chunk holds exactly one chunk of rows (HDF5 filters whole chunks).
  bool InflateExact(const uint8_t* in, size_t n, uint8_t* out, size_t out_n);

 private:
  void* decompressor_ = nullptr;
};

}  // namespace aon::chunk_codec
