// Direct chunk I/O of record tables (chunk_codec.h): which tables are read a
// chunk at a time (DirectlyReadable), and the threads that pack, compress and
// decode chunks (RunShares). Internal to aon::format.
//
// A record table stored the way AON stores it (chunked rows of the packed type
// DiskType(schema), either unfiltered or shuffle + deflate, either one with or
// without a Fletcher-32 checksum last) is written and read
// a chunk at a time with H5Dwrite_chunk / H5Dread_chunk: the rows are packed,
// shuffled and compressed here (libdeflate where built with it), not by HDF5's
// pipeline and conversion. The chunks are HDF5's own filters' format, so every
// HDF5 reader opens the file as before. Any other table (another row type, such
// as an older minor version's, other filters or parameters, a big-endian host)
// goes through H5Dread / H5Dwrite.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <optional>

#include "aon/base/helper_threads.h"
#include "aon/format/schema.h"

namespace aon::hdf5 {

// How a table read directly stores its chunks.
struct DirectChunks {
  uint64_t chunk_rows = 0;
  bool deflated = false;     // shuffle + deflate; else unfiltered
  bool checksummed = false;  // then Fletcher-32 (the last filter)
};

// How `ds` (row type `disk`) stores its chunks, when they can be read directly
// into rows of `schema`; nullopt otherwise.
std::optional<DirectChunks> DirectlyReadable(hid_t ds, hid_t disk, const TableSchema& schema);

// Runs share(0) here and share(1 .. n-1) on `helpers` when given, else on
// threads started for this call (aon/base/helper_threads.h: here too, when a thread
// cannot be started), and returns when all are done. False when a share threw
// (out of memory): the caller's result is then incomplete.
template <typename F>
bool RunShares(unsigned n, F& share, HelperThreads* helpers) {
  const std::function<void(unsigned)> run = std::ref(share);
  if (helpers != nullptr) return helpers->Run(n, run);
  HelperThreads started(n > 1 ? n - 1 : 0);
  return started.Run(n, run);
}

}  // namespace aon::hdf5
