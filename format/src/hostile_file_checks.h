// The checks of trace files that may be hostile, made before HDF5 reads what
// a file declares (TraceReader, trace_reader.cc). Internal to aon::format.
//
// A trace file is input: a damaged or crafted one must cost a clear error, not
// the reader's memory or time, and must never make the reader open anything
// but itself. Whatever a dataset declares (its extent, its layout) is checked
// against what the file can really hold before anything is allocated for it.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "aon/base/status.h"
#include "hdf5_support.h"

namespace aon::hdf5 {

// Checks that every link on the absolute path `name` ("/a/b") exists and is a
// hard link, one component at a time, so nothing is followed before it is
// checked: an external link would open another file (its data would end up in
// the merge as this rank's), and soft links are never written by AON.
Status CheckHardLinks(hid_t file, const std::string& name);

// A 1-D dataset opened after the checks above, with its checked row count.
struct CheckedDataset {
  Hid ds;
  uint64_t rows = 0;
};

// Opens dataset `name` and checks what it declares against what the file
// (of `file_bytes` bytes) holds. `allow_virtual`: timelines of the sharded
// merge are virtual datasets over shard files next to them; rank files never
// are. `check_storage` also counts the stored chunks (a walk of the chunk
// index: done once per table, by TableSize and ReadArray, not per block read).
// Errors name the dataset, not the file (the caller adds it).
StatusOr<CheckedDataset> OpenChecked(hid_t file, const std::string& name, uint64_t file_bytes,
                                     bool allow_virtual, bool check_storage);

// A table's row type as the file declares it: numbers that lie inside the
// row and fill it, as AON writes them (packed). HDF5 converts rows member by
// member at the offsets the file states, without checking them against the
// row's size: a member placed past the end of its row would be read from past
// the end of HDF5's buffer. And it takes a chunk to hold rows of the stated
// size: a row stated larger than the one written made it read a whole chunk
// past the end of the smaller chunk it inflated.
Status CheckRowMembers(hid_t type, const std::string& what);

// The chunks a read of rows [first, first + count) touches, as the chunk index
// states them. HDF5 allocates a chunk's stored size from the index before it
// reads the chunk, and copies a whole chunk of rows out of an unfiltered
// chunk's buffer whatever its stored size. So each chunk read must be stored
// (a missing one reads as made-up rows), lie inside the file, have every
// filter applied (AON never skips one) and, unfiltered, hold exactly a chunk of
// rows. Not chunked: nothing to check here (OpenChecked saw the rest).
// `stored_sizes`, when given, gets each chunk's stored size, in chunk order.
Status CheckChunksToRead(hid_t ds, uint64_t first, uint64_t count, uint64_t row_bytes,
                         uint64_t file_bytes, const std::string& what,
                         std::vector<uint64_t>* stored_sizes = nullptr);

}  // namespace aon::hdf5
