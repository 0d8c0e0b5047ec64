// Direct chunk I/O of record tables (direct_chunk_io.h): which tables' chunks
// are read directly.
#include "direct_chunk_io.h"

#include <bit>

#include "hdf5_support.h"

namespace aon::hdf5 {

std::optional<DirectChunks> DirectlyReadable(hid_t ds, hid_t disk, const TableSchema& schema) {
  if constexpr (std::endian::native != std::endian::little) return std::nullopt;
  Hid dcpl = Plist(H5Dget_create_plist(ds));
  hsize_t chunk[1] = {0};
  if (!dcpl.valid() || H5Pget_layout(dcpl.get()) != H5D_CHUNKED ||
      H5Pget_chunk(dcpl.get(), 1, chunk) != 1 || chunk[0] == 0) {
    H5Eclear2(H5E_DEFAULT);
    return std::nullopt;
  }
  Hid expected = DiskType(schema);
  if (H5Tequal(disk, expected.get()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return std::nullopt;
  }
  DirectChunks out{.chunk_rows = chunk[0], .deflated = false, .checksummed = false};
  int filters = H5Pget_nfilters(dcpl.get());
  unsigned flags = 0, config = 0;
  size_t nvalues = 0;
  if (filters > 0 && H5Pget_filter2(dcpl.get(), static_cast<unsigned>(filters - 1), &flags,
                                    &nvalues, nullptr, 0, nullptr,
                                    &config) == H5Z_FILTER_FLETCHER32) {
    out.checksummed = true;
    --filters;
  }
  if (filters == 0) return out;
  if (filters != 2) return std::nullopt;
  unsigned shuffle_bytes[1] = {0};
  nvalues = 1;
  if (H5Pget_filter2(dcpl.get(), 0, &flags, &nvalues, shuffle_bytes, 0, nullptr, &config) !=
          H5Z_FILTER_SHUFFLE ||
      (nvalues >= 1 && shuffle_bytes[0] != H5Tget_size(disk))) {
    return std::nullopt;
  }
  nvalues = 0;
  if (H5Pget_filter2(dcpl.get(), 1, &flags, &nvalues, nullptr, 0, nullptr, &config) !=
      H5Z_FILTER_DEFLATE) {
    return std::nullopt;
  }
  out.deflated = true;
  return out;
}

}  // namespace aon::hdf5
