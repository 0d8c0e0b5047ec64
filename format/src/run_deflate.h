// A deflate encoder for shuffled record chunks (chunk_codec.h), several times
// faster than libdeflate's fastest level on them for nearly the same size.
//
// A shuffled chunk is a series of byte planes (byte j of every row): a plane is
// either constant for long stretches (flags, device, the high bytes of times
// and ids) or close to noise (the low bytes). On such data a general LZ77
// match finder spends its time looking for matches that are not there: what
// pays is runs of one byte (matches at distance 1) and a Huffman code fitted
// to each part of the chunk. zlib's Z_RLE strategy is exactly that and comes
// within 1-6 % of zlib level 1's size on the merge's timelines
// (bench/RESULTS.md, "Timeline deflate"); this is a lean implementation of
// the same idea: one pass that finds the runs and counts symbols, one pass
// that writes them.
//
// The output is an ordinary zlib stream (RFC 1950 around RFC 1951 dynamic
// Huffman blocks, or stored blocks where those are smaller): HDF5's deflate
// filter, h5py, zlib and libdeflate read it like any other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "chunk_buffer.h"

namespace aon::chunk_codec {

// Compresses `n` bytes at `in` into one zlib stream in *out (resized to its
// size). `scratch` is reused between calls (the symbols of one block).
void RunDeflate(const uint8_t* in, size_t n, ChunkBuffer* out, std::vector<uint16_t>* scratch);

}  // namespace aon::chunk_codec
