// The checks of trace files that may be hostile (hostile_file_checks.h).
#include "hostile_file_checks.h"

#include <algorithm>

namespace aon::hdf5 {
namespace {

// zlib's deflate cannot shrink data by more than about 1032:1 (one 258-byte
// match per ~2 bits); a chunked dataset that claims more rows than its stored
// bytes could inflate to was not written by deflate.
constexpr uint64_t kMaxDeflateRatio = 1100;
// AON writes chunks of at most a few MB; HDF5 inflates a whole chunk at once.
constexpr uint64_t kMaxChunkBytes = uint64_t{256} << 20;

// Whether `path`, a virtual dataset's source file, stays where the merge puts
// shards: relative to the timeline's directory, never above it.
bool IsShardPath(const std::string& path) {
  if (path.empty() || path[0] == '/') return false;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string::npos) slash = path.size();
    if (path.compare(pos, slash - pos, "..") == 0) return false;
    pos = slash + 1;
  }
  return true;
}

}  // namespace

Status CheckHardLinks(hid_t file, const std::string& name) {
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = name.find('/', pos + 1);
    const std::string prefix = name.substr(0, pos);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return NotFound("'" + prefix + "' is missing");
    }
    H5L_info_t info{};
    if (H5Lget_info(file, prefix.c_str(), &info, H5P_DEFAULT) < 0) {
      return DataLoss("'" + prefix + "': " + Hdf5Error());
    }
    if (info.type != H5L_TYPE_HARD) {
      return DataLoss("'" + prefix + "' is " +
                      (info.type == H5L_TYPE_EXTERNAL
                           ? std::string("an external link to another file")
                       : info.type == H5L_TYPE_SOFT ? std::string("a soft link")
                                                    : "a user-defined link") +
                      ", which AON never writes: refused, not followed");
    }
  }
  return Status::Ok();
}

StatusOr<CheckedDataset> OpenChecked(hid_t file, const std::string& name, uint64_t file_bytes,
                                     bool allow_virtual, bool check_storage) {
  AON_RETURN_IF_ERROR(CheckHardLinks(file, name));
  const std::string what = "dataset " + name;
  CheckedDataset out;
  out.ds = Dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!out.ds.valid()) return DataLoss(what + ": " + Hdf5Error());
  const hid_t ds = out.ds.get();
  Hid space = Space(H5Dget_space(ds));
  hsize_t dims[1] = {0};
  if (!space.valid() || H5Sget_simple_extent_ndims(space.get()) != 1 ||
      H5Sget_simple_extent_dims(space.get(), dims, nullptr) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return DataLoss(what + " is not a 1-D table");
  }
  const uint64_t rows = dims[0];
  Hid type = Type(H5Dget_type(ds));
  const uint64_t row_bytes = type.valid() ? H5Tget_size(type.get()) : 0;
  if (row_bytes == 0) return DataLoss(what + ": unreadable row type: " + Hdf5Error());
  Hid dcpl = Plist(H5Dget_create_plist(ds));
  if (!dcpl.valid()) return DataLoss(what + ": " + Hdf5Error());
  // External raw storage: the rows would be read from files the dataset names.
  const int external = H5Pget_external_count(dcpl.get());
  if (external != 0) {
    return DataLoss(what + " keeps its rows in " +
                    (external > 0 ? std::to_string(external) : std::string("some")) +
                    " external file(s), which AON never writes: refused, not followed");
  }
  // rows * row_bytes without overflow: the bound is checked by division.
  auto declares_more_than = [&](uint64_t limit) { return rows > limit / row_bytes; };
  const std::string declared =
      what + " declares " + std::to_string(rows) + " rows of " + Bytes(row_bytes);
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  switch (layout) {
    case H5D_COMPACT:
    case H5D_CONTIGUOUS: {
      // Unfiltered: every declared byte is stored in this file, or read as fill.
      const uint64_t stored = H5Dget_storage_size(ds);
      if (declares_more_than(file_bytes) || declares_more_than(stored)) {
        return DataLoss(declared + " but stores " + Bytes(stored) + " in a file of " +
                        Bytes(file_bytes) + ": refused (a crafted or damaged file)");
      }
      break;
    }
    case H5D_CHUNKED: {
      hsize_t chunk[1] = {0};
      if (H5Pget_chunk(dcpl.get(), 1, chunk) != 1 || chunk[0] == 0 ||
          chunk[0] > kMaxChunkBytes / row_bytes) {
        H5Eclear2(H5E_DEFAULT);
        return DataLoss(what + " has chunks of " + std::to_string(chunk[0]) + " rows of " +
                        Bytes(row_bytes) + " (at most " + Bytes(kMaxChunkBytes) +
                        " are read): refused");
      }
      // Only the filters AON writes: anything else could inflate without bound
      // (or make HDF5 look for a filter plugin to load).
      bool deflate = false;
      const int filters = H5Pget_nfilters(dcpl.get());
      for (int i = 0; i < filters; ++i) {
        unsigned flags = 0, config = 0;
        size_t nvalues = 0;
        const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags,
                                               &nvalues, nullptr, 0, nullptr, &config);
        if (id == H5Z_FILTER_DEFLATE) {
          deflate = true;
        } else if (id != H5Z_FILTER_SHUFFLE && id != H5Z_FILTER_FLETCHER32) {
          H5Eclear2(H5E_DEFAULT);
          return DataLoss(what + " uses HDF5 filter " + std::to_string(id) +
                          ", which AON never writes: refused");
        }
      }
      if (filters < 0) return DataLoss(what + ": " + Hdf5Error());
      if (!check_storage) break;
      const uint64_t stored = H5Dget_storage_size(ds);
      const uint64_t most =
          deflate ? std::min<uint64_t>(stored, UINT64_MAX / kMaxDeflateRatio) * kMaxDeflateRatio
                  : stored;
      if (declares_more_than(most)) {
        return DataLoss(declared + " but stores " + Bytes(stored) +
                        (deflate ? " (more than deflate can expand to)" : "") +
                        ": refused (a crafted or damaged file)");
      }
      // Rows past the stored chunks would read as fill values: made-up rows.
      hsize_t stored_chunks = 0;
      if (H5Dget_num_chunks(ds, space.get(), &stored_chunks) < 0) {
        return DataLoss(what + ": cannot count its chunks: " + Hdf5Error());
      }
      if (rows > 0 && (rows - 1) / chunk[0] >= stored_chunks) {
        return DataLoss(declared + " but stores only " + std::to_string(stored_chunks) +
                        " chunk(s) of " + std::to_string(chunk[0]) +
                        " rows: refused (a crafted or damaged file)");
      }
      break;
    }
    case H5D_VIRTUAL: {
      if (!allow_virtual) {
        return DataLoss(what +
                        " is a virtual dataset (its rows would come from other files), "
                        "which a rank file never is: refused, not followed");
      }
      size_t count = 0;
      if (H5Pget_virtual_count(dcpl.get(), &count) < 0) return DataLoss(what + ": " + Hdf5Error());
      for (size_t i = 0; i < count; ++i) {
        const ssize_t len = H5Pget_virtual_filename(dcpl.get(), i, nullptr, 0);
        if (len < 0 || len > 4096) return DataLoss(what + ": unreadable virtual source");
        std::string source(static_cast<size_t>(len) + 1, '\0');
        H5Pget_virtual_filename(dcpl.get(), i, source.data(), source.size());
        source.resize(static_cast<size_t>(len));
        if (!IsShardPath(source)) {
          return DataLoss(what + " maps rows from '" + source +
                          "', not from a shard next to the timeline: refused, not followed");
        }
      }
      break;
    }
    default:
      return DataLoss(what + " has an unknown storage layout");
  }
  out.rows = rows;
  return out;
}

namespace {

// Whether a number member uses its bytes as AON writes them: every bit, from bit
// 0, and for a float the IEEE fields inside them. A crafted file states other
// precisions, offsets or fields, and HDF5's conversions read the bits they
// state: past the element, past the conversion buffer (tests/fuzz found a SEGV
// in H5T__bit_find < H5T__conv_i_i).
bool FullWidth(hid_t member, H5T_class_t cls, size_t bytes) {
  const size_t bits = 8 * bytes;
  if (H5Tget_precision(member) != bits || H5Tget_offset(member) != 0) return false;
  if (cls != H5T_FLOAT) return true;
  size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (H5Tget_fields(member, &spos, &epos, &esize, &mpos, &msize) < 0) return false;
  return spos < bits && esize > 0 && msize > 0 && epos + esize <= bits && mpos + msize <= bits;
}

}  // namespace

Status CheckRowMembers(hid_t type, const std::string& what) {
  const size_t row_bytes = H5Tget_size(type);
  const int members = H5Tget_nmembers(type);
  if (members < 0) return DataLoss(what + ": unreadable row type: " + Hdf5Error());
  size_t member_bytes = 0;
  for (int i = 0; i < members; ++i) {
    const unsigned m = static_cast<unsigned>(i);
    Hid member = Type(H5Tget_member_type(type, m));
    const H5T_class_t cls = member.valid() ? H5Tget_class(member.get()) : H5T_NO_CLASS;
    const size_t bytes = member.valid() ? H5Tget_size(member.get()) : 0;
    const size_t offset = H5Tget_member_offset(type, m);
    const bool number = (cls == H5T_INTEGER || cls == H5T_FLOAT) && bytes > 0 && bytes <= 8;
    const bool inside = offset <= row_bytes && bytes <= row_bytes - offset;
    const bool full = number && FullWidth(member.get(), cls, bytes);
    member_bytes += bytes;
    if (number && inside && full) continue;
    H5Eclear2(H5E_DEFAULT);
    std::string name;
    if (char* n = H5Tget_member_name(type, m); n != nullptr) {
      name = n;
      H5free_memory(n);
    }
    const std::string which = what + ": row member " + std::to_string(i) + " '" + name + "'";
    if (!number) {
      return DataLoss(which +
                      " is not a number of at most 8 bytes, which AON never writes: refused");
    }
    if (!full) {
      return DataLoss(which + " is a " + Bytes(bytes) + " number whose bits (precision " +
                      std::to_string(H5Tget_precision(member.get())) + ", offset " +
                      std::to_string(H5Tget_offset(member.get())) +
                      ") AON never writes: refused before HDF5 converts it");
    }
    return DataLoss(which + " (" + Bytes(bytes) + " at offset " + std::to_string(offset) +
                    ") lies outside its " + std::to_string(row_bytes) +
                    "-byte rows: refused (a crafted or damaged file)");
  }
  if (member_bytes != row_bytes) {
    return DataLoss(what + ": rows of " + Bytes(row_bytes) + " hold members of " +
                    Bytes(member_bytes) + "; AON writes packed rows: refused");
  }
  return Status::Ok();
}

Status CheckChunksToRead(hid_t ds, uint64_t first, uint64_t count, uint64_t row_bytes,
                         uint64_t file_bytes, const std::string& what,
                         std::vector<uint64_t>* stored_sizes) {
  if (stored_sizes != nullptr) stored_sizes->clear();
  Hid dcpl = Plist(H5Dget_create_plist(ds));
  if (!dcpl.valid()) return DataLoss(what + ": " + Hdf5Error());
  hsize_t chunk[1] = {0};
  if (count == 0 || H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return Status::Ok();
  if (H5Pget_chunk(dcpl.get(), 1, chunk) != 1 || chunk[0] == 0) {
    return DataLoss(what + ": unreadable chunk size: " + Hdf5Error());
  }
  const bool filtered = H5Pget_nfilters(dcpl.get()) > 0;
  const uint64_t chunk_bytes = chunk[0] * row_bytes;  // bounded by OpenChecked
  for (uint64_t c = first / chunk[0]; c <= (first + count - 1) / chunk[0]; ++c) {
    hsize_t offset[1] = {c * chunk[0]};
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    const std::string at = what + ": the chunk of rows from " + std::to_string(offset[0]);
    if (H5Dget_chunk_info_by_coord(ds, offset, &mask, &addr, &size) < 0) {
      return DataLoss(at + ": " + Hdf5Error());
    }
    if (addr == HADDR_UNDEF) {
      return DataLoss(at + " is not stored (its rows would read as made-up values): refused");
    }
    if (mask != 0) {
      return DataLoss(at + " skips filters (mask " + std::to_string(mask) +
                      "), which AON never writes: refused");
    }
    if (addr > file_bytes || size > file_bytes - addr) {
      return DataLoss(at + " is stated to hold " + Bytes(size) + " at byte " +
                      std::to_string(addr) + " of a file of " + Bytes(file_bytes) +
                      ": refused (a crafted or damaged file)");
    }
    if (!filtered && size != chunk_bytes) {
      return DataLoss(at + " stores " + Bytes(size) + ", not a chunk's " + Bytes(chunk_bytes) +
                      ": refused (a crafted or damaged file)");
    }
    if (stored_sizes != nullptr) stored_sizes->push_back(size);
  }
  return Status::Ok();
}

}  // namespace aon::hdf5
