// HDF5 implementation of TraceWriter / TraceReader (serial HDF5 C API).
#include "aon/format/trace_file.h"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <variant>

#include "aon/base/secure_fs.h"
#include "aon/base/thread_cpu.h"
#include "chunk_codec.h"

namespace aon {
namespace {

// ---- HDF5 plumbing --------------------------------------------------------------

void SilenceHdf5() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

herr_t CollectError(unsigned n, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<std::string*>(data);
  // Walking downward goes from the API call to the innermost, most specific
  // error: keep the last entry.
  (void)n;
  if (err->desc != nullptr) *out = err->desc;
  return 0;
}

// Text of the innermost error on HDF5's stack, then clears the stack.
std::string Hdf5Error() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, CollectError, &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? "HDF5 error" : text;
}

// Owns one HDF5 identifier.
class Hid {
 public:
  Hid() = default;
  Hid(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Hid(Hid&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Hid& operator=(Hid&& o) noexcept {
    if (this != &o) {
      Reset();
      id_ = o.id_;
      close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  ~Hid() { Reset(); }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void Reset() {
    if (id_ >= 0 && close_ != nullptr) close_(id_);
    id_ = -1;
  }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

Hid Group(hid_t id) { return Hid(id, H5Gclose); }
Hid Dataset(hid_t id) { return Hid(id, H5Dclose); }
Hid Space(hid_t id) { return Hid(id, H5Sclose); }
Hid Type(hid_t id) { return Hid(id, H5Tclose); }
Hid Plist(hid_t id) { return Hid(id, H5Pclose); }
Hid Attr(hid_t id) { return Hid(id, H5Aclose); }

// Transfer properties for reading or writing `bytes` of records. A record
// table's rows are converted between the struct's layout and the packed one
// on disk, through a conversion and a background buffer that HDF5 allocates
// and zeroes for every H5Dread / H5Dwrite: 1 MiB each by default, whatever the
// transfer's size. Sized to the transfer, a small read or append (the
// collector's per-second appends, small rank files) no longer pays for 2 MiB:
// reading a table of 1 to 16 rows took 150 us, now 105 (Release, HDF5 1.10.8).
Hid TransferProperties(uint64_t bytes) {
  constexpr uint64_t kMinBuffer = 4096, kMaxBuffer = uint64_t{1} << 20;  // HDF5's default
  Hid dxpl = Plist(H5Pcreate(H5P_DATASET_XFER));
  H5Pset_buffer(dxpl.get(), std::clamp(bytes, kMinBuffer, kMaxBuffer), nullptr, nullptr);
  return dxpl;
}

hid_t NativeType(FieldType t) {
  switch (t) {
    case FieldType::kU8: return H5T_NATIVE_UINT8;
    case FieldType::kU16: return H5T_NATIVE_UINT16;
    case FieldType::kU32: return H5T_NATIVE_UINT32;
    case FieldType::kI32: return H5T_NATIVE_INT32;
    case FieldType::kU64: return H5T_NATIVE_UINT64;
    case FieldType::kI64: return H5T_NATIVE_INT64;
    case FieldType::kF64: return H5T_NATIVE_DOUBLE;
    case FieldType::kPadding: break;  // never stored (BuildTableSchema leaves it out)
  }
  return H5T_NATIVE_UINT8;
}

hid_t FileType(FieldType t) {
  switch (t) {
    case FieldType::kU8: return H5T_STD_U8LE;
    case FieldType::kU16: return H5T_STD_U16LE;
    case FieldType::kU32: return H5T_STD_U32LE;
    case FieldType::kI32: return H5T_STD_I32LE;
    case FieldType::kU64: return H5T_STD_U64LE;
    case FieldType::kI64: return H5T_STD_I64LE;
    case FieldType::kF64: return H5T_IEEE_F64LE;
    case FieldType::kPadding: break;
  }
  return H5T_STD_U8LE;
}

// In-memory compound type: the struct's own layout.
Hid MemoryType(const TableSchema& schema) {
  Hid type = Type(H5Tcreate(H5T_COMPOUND, schema.record_size));
  for (const Field& f : schema.fields) H5Tinsert(type.get(), f.name, f.offset, NativeType(f.type));
  return type;
}

// On-disk compound type: the same members, packed, little-endian.
Hid DiskType(const TableSchema& schema) {
  size_t size = 0;
  for (const Field& f : schema.fields) size += FieldTypeSize(f.type);
  Hid type = Type(H5Tcreate(H5T_COMPOUND, size));
  size_t offset = 0;
  for (const Field& f : schema.fields) {
    H5Tinsert(type.get(), f.name, offset, FileType(f.type));
    offset += FieldTypeSize(f.type);
  }
  return type;
}

std::string Join(std::string_view a, std::string_view b) {
  std::string s(a);
  s += '/';
  s += b;
  return s;
}

// An attribute lives in its object's header, whose messages hold at most
// 64 KiB in the file format AON writes (no dense attribute storage). A longer
// value (a timeline's problems when thousands of ranks have no file, a clock
// note naming thousands of ranks) is cut to fit, at a line end where there is
// one, and says how much is missing: the file is written, not refused.
constexpr size_t kMaxAttributeText = 60000;

std::string FitAttributeText(std::string_view value) {
  if (value.size() <= kMaxAttributeText) return std::string(value);
  size_t keep = kMaxAttributeText - 128;  // room for the note below
  if (const size_t line_end = value.rfind('\n', keep);
      line_end != std::string_view::npos && line_end > keep / 2) {
    keep = line_end;
  }
  while (keep > 0 && (static_cast<unsigned char>(value[keep]) & 0xC0) == 0x80) --keep;  // UTF-8
  return std::string(value.substr(0, keep)) + "\n... (" + std::to_string(value.size() - keep) +
         " more bytes not stored: an attribute holds at most " + std::to_string(kMaxAttributeText) +
         ")";
}

Status WriteStringAttribute(hid_t obj, std::string_view name, std::string_view value) {
  std::string n(name);
  if (H5Aexists(obj, n.c_str()) > 0 && H5Adelete(obj, n.c_str()) < 0) {
    return IoError("replacing attribute '" + n + "': " + Hdf5Error());
  }
  const std::string buf = FitAttributeText(value);
  Hid type = Type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), buf.size() + 1);
  H5Tset_strpad(type.get(), H5T_STR_NULLTERM);
  Hid space = Space(H5Screate(H5S_SCALAR));
  Hid attr = Attr(H5Acreate2(obj, n.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!attr.valid() || H5Awrite(attr.get(), type.get(), buf.c_str()) < 0) {
    return IoError("writing attribute '" + n + "': " + Hdf5Error());
  }
  return Status::Ok();
}

Status WriteScalarAttribute(hid_t obj, std::string_view name, hid_t mem_type, hid_t file_type,
                            const void* value) {
  std::string n(name);
  if (H5Aexists(obj, n.c_str()) > 0) {
    // Metadata rewritten at every flush (the collector): same type, written in
    // place; otherwise replaced.
    Hid old = Attr(H5Aopen(obj, n.c_str(), H5P_DEFAULT));
    if (old.valid()) {
      Hid old_type = Type(H5Aget_type(old.get()));
      Hid old_space = Space(H5Aget_space(old.get()));
      if (old_type.valid() && H5Tequal(old_type.get(), file_type) > 0 && old_space.valid() &&
          H5Sget_simple_extent_type(old_space.get()) == H5S_SCALAR) {
        if (H5Awrite(old.get(), mem_type, value) < 0) {
          return IoError("writing attribute '" + n + "': " + Hdf5Error());
        }
        return Status::Ok();
      }
    }
    old.Reset();
    if (H5Adelete(obj, n.c_str()) < 0) {
      return IoError("replacing attribute '" + n + "': " + Hdf5Error());
    }
  }
  Hid space = Space(H5Screate(H5S_SCALAR));
  Hid attr = Attr(H5Acreate2(obj, n.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!attr.valid() || H5Awrite(attr.get(), mem_type, value) < 0) {
    return IoError("writing attribute '" + n + "': " + Hdf5Error());
  }
  return Status::Ok();
}

// ---- Reading files that may be hostile ------------------------------------------
//
// A trace file is input: a damaged or crafted one must cost a clear error, not
// the reader's memory or time, and must never make the reader open anything
// but itself. Whatever a dataset declares (its extent, its layout) is checked
// against what the file can really hold before anything is allocated for it.

// zlib's deflate cannot shrink data by more than about 1032:1 (one 258-byte
// match per ~2 bits); a chunked dataset that claims more rows than its stored
// bytes could inflate to was not written by deflate.
constexpr uint64_t kMaxDeflateRatio = 1100;
// AON writes chunks of at most a few MB; HDF5 inflates a whole chunk at once.
constexpr uint64_t kMaxChunkBytes = uint64_t{256} << 20;
// Tables under /meta (devices, rank summaries) have a row per device or rank.
constexpr uint64_t kMaxMetaRows = uint64_t{1} << 24;
// String ids are 32-bit; the table's bytes are read whole into memory.
constexpr uint64_t kMaxStrings = uint64_t{1} << 32;
constexpr uint64_t kMaxStringBytes = uint64_t{4} << 30;

// Checks that every link on the absolute path `name` ("/a/b") exists and is a
// hard link, one component at a time, so nothing is followed before it is
// checked: an external link would open another file (its data would end up in
// the merge as this rank's), and soft links are never written by AON.
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
      return DataLoss(
          "'" + prefix + "' is " +
          (info.type == H5L_TYPE_EXTERNAL ? std::string("an external link to another file")
           : info.type == H5L_TYPE_SOFT   ? std::string("a soft link")
                                          : "a user-defined link") +
          ", which AON never writes: refused, not followed");
    }
  }
  return Status::Ok();
}

std::string Bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

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
  const std::string declared = what + " declares " + std::to_string(rows) + " rows of " +
                               Bytes(row_bytes);
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
        const H5Z_filter_t id =
            H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nvalues, nullptr, 0,
                           nullptr, &config);
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
      const uint64_t most = deflate ? std::min<uint64_t>(stored, UINT64_MAX / kMaxDeflateRatio) *
                                          kMaxDeflateRatio
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
        return DataLoss(what + " is a virtual dataset (its rows would come from other files), "
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

// A table's row type as the file declares it: numbers that lie inside the
// row and fill it, as AON writes them (packed). HDF5 converts rows member by
// member at the offsets the file states, without checking them against the
// row's size: a member placed past the end of its row would be read from past
// the end of HDF5's buffer. And it takes a chunk to hold rows of the stated
// size: a row stated larger than the one written made it read a whole chunk
// past the end of the smaller chunk it inflated.
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
    member_bytes += bytes;
    if (number && inside) continue;
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
                         std::vector<uint64_t>* stored_sizes = nullptr) {
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

// ---- Direct chunk I/O (chunk_codec.h) ---------------------------------------------
//
// A record table stored the way AON stores it (chunked rows of the packed type
// DiskType(schema), either unfiltered or shuffle + deflate) is written and read
// a chunk at a time with H5Dwrite_chunk / H5Dread_chunk: the rows are packed,
// shuffled and compressed here (libdeflate where built with it), not by HDF5's
// pipeline and conversion. The chunks are HDF5's own filters' format, so every
// HDF5 reader opens the file as before. Any other table (another row type, such
// as an older minor version's, other filters or parameters, a big-endian host)
// goes through H5Dread / H5Dwrite.
struct DirectChunks {
  uint64_t chunk_rows = 0;
  bool deflated = false;  // shuffle + deflate; else unfiltered
};

// How `ds` (row type `disk`) stores its chunks, when they can be read directly
// into rows of `schema`; nullopt otherwise.
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
  DirectChunks out{.chunk_rows = chunk[0], .deflated = false};
  const int filters = H5Pget_nfilters(dcpl.get());
  if (filters == 0) return out;
  if (filters != 2) return std::nullopt;
  unsigned flags = 0, config = 0, shuffle_bytes[1] = {0};
  size_t nvalues = 1;
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

// The one element of an attribute: one whose dataspace holds more (or none)
// would be read past the single value the caller has room for.
Status CheckOneValue(hid_t attr, const std::string& n) {
  Hid space = Space(H5Aget_space(attr));
  if (!space.valid() || H5Sget_simple_extent_npoints(space.get()) != 1) {
    H5Eclear2(H5E_DEFAULT);
    return DataLoss("attribute '" + n + "' is not a single value");
  }
  return Status::Ok();
}

StatusOr<std::string> ReadStringAttribute(hid_t obj, std::string_view name, uint64_t max_bytes) {
  std::string n(name);
  if (H5Aexists(obj, n.c_str()) <= 0) return NotFound("attribute '" + n + "' is missing");
  Hid attr = Attr(H5Aopen(obj, n.c_str(), H5P_DEFAULT));
  if (!attr.valid()) return DataLoss("opening attribute '" + n + "': " + Hdf5Error());
  AON_RETURN_IF_ERROR(CheckOneValue(attr.get(), n));
  Hid type = Type(H5Aget_type(attr.get()));
  if (H5Tget_class(type.get()) != H5T_STRING) return DataLoss("attribute '" + n + "' is not a string");
  if (H5Tis_variable_str(type.get()) > 0) {
    char* value = nullptr;
    Hid mem = Type(H5Tcopy(H5T_C_S1));
    H5Tset_size(mem.get(), H5T_VARIABLE);
    if (H5Aread(attr.get(), mem.get(), &value) < 0) return DataLoss("reading '" + n + "': " + Hdf5Error());
    std::string s = value ? value : "";
    H5free_memory(value);
    return s;
  }
  // An attribute's value is stored in the file, uncompressed: a declared size
  // beyond the file's is made up, and is not allocated.
  const size_t size = H5Tget_size(type.get());
  if (size == 0 || size > max_bytes) {
    return DataLoss("attribute '" + n + "' declares a string of " + Bytes(size) +
                    ", more than the file holds: refused");
  }
  std::string buf(size + 1, '\0');
  Hid mem = Type(H5Tcopy(H5T_C_S1));
  H5Tset_size(mem.get(), size + 1);
  H5Tset_strpad(mem.get(), H5T_STR_NULLTERM);
  if (H5Aread(attr.get(), mem.get(), buf.data()) < 0) return DataLoss("reading '" + n + "': " + Hdf5Error());
  buf.resize(std::strlen(buf.c_str()));
  return buf;
}

template <typename V>
StatusOr<V> ReadNumberAttribute(hid_t obj, std::string_view name, hid_t mem_type) {
  std::string n(name);
  if (H5Aexists(obj, n.c_str()) <= 0) return NotFound("attribute '" + n + "' is missing");
  Hid attr = Attr(H5Aopen(obj, n.c_str(), H5P_DEFAULT));
  if (!attr.valid()) return DataLoss("opening attribute '" + n + "': " + Hdf5Error());
  AON_RETURN_IF_ERROR(CheckOneValue(attr.get(), n));
  Hid type = Type(H5Aget_type(attr.get()));
  H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) return DataLoss("attribute '" + n + "' is not a number");
  V v{};
  if (H5Aread(attr.get(), mem_type, &v) < 0) return DataLoss("reading '" + n + "': " + Hdf5Error());
  return v;
}

// A whole 1-D integer array (the string table), checked like any table first.
template <typename V>
StatusOr<std::vector<V>> ReadArray(hid_t file, const std::string& name, hid_t mem_type,
                                   uint64_t file_bytes, uint64_t max_rows) {
  AON_ASSIGN_OR_RETURN(CheckedDataset c, OpenChecked(file, name, file_bytes, false, true));
  Hid type = Type(H5Dget_type(c.ds.get()));
  if (H5Tget_class(type.get()) != H5T_INTEGER) return DataLoss("dataset " + name + " is not integers");
  if (c.rows > max_rows) {
    return DataLoss("dataset " + name + " declares " + std::to_string(c.rows) +
                    " entries, more than the " + std::to_string(max_rows) + " AON reads: refused");
  }
  AON_RETURN_IF_ERROR(CheckChunksToRead(c.ds.get(), 0, c.rows, H5Tget_size(type.get()), file_bytes,
                                        "dataset " + name));
  std::vector<V> out(c.rows);
  if (c.rows > 0 && H5Dread(c.ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    return DataLoss("reading dataset " + name + ": " + Hdf5Error());
  return out;
}

std::string FormatContext(const std::string& path) { return "trace file '" + path + "'"; }

}  // namespace

const char* FileKindName(FileKind kind) {
  return kind == FileKind::kRank ? "aon-rank-trace" : "aon-timeline";
}

const char* RankStatusName(RankStatus status) {
  switch (status) {
    case RankStatus::kOk: return "ok";
    case RankStatus::kMissing: return "missing";
    case RankStatus::kCorrupt: return "corrupt";
    case RankStatus::kTruncated: return "truncated";
    case RankStatus::kUnsupported: return "unsupported";
  }
  return "unknown";
}


// ---- TraceWriter ----------------------------------------------------------------

TraceWriter::TraceWriter(std::string path, FileKind kind, WriteOptions options, int64_t file)
    : path_(std::move(path)), kind_(kind), options_(options), file_(file),
      merged_records_(kind == FileKind::kTimeline) {}

TraceWriter::~TraceWriter() {
  if (file_ >= 0) H5Fclose(static_cast<hid_t>(file_));
}

StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Create(const std::string& path, FileKind kind,
                                                           const WriteOptions& options) {
  SilenceHdf5();
  const std::string partial = path + ".partial";
  // Create the file ourselves (aon/base/secure_fs.h): owner-only mode, never through
  // a link. HDF5 then opens it again by name: it must be the same file.
  auto created = CreatePrivateFile(partial, /*replace_stale=*/true);
  if (!created.ok()) return created.status();
  struct stat mine {};
  const int fstat_rc = fstat(*created, &mine);
  const int fstat_errno = errno;
  close(*created);
  if (fstat_rc != 0) {
    unlink(partial.c_str());
    return ErrnoStatus("cannot create " + FormatContext(partial), fstat_errno);
  }
  hid_t file = H5Fcreate(partial.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) {
    unlink(partial.c_str());
    return IoError("cannot create " + FormatContext(partial) + ": " + Hdf5Error());
  }
  void* handle = nullptr;
  struct stat opened {};
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || handle == nullptr ||
      fstat(*static_cast<int*>(handle), &opened) != 0 || opened.st_dev != mine.st_dev ||
      opened.st_ino != mine.st_ino) {
    H5Fclose(file);
    return Status(
        StatusCode::kPermissionDenied,
        FormatContext(partial) + " was replaced between its creation and its opening: not written");
  }
  std::unique_ptr<TraceWriter> w(new TraceWriter(path, kind, options, file));
  int64_t major = kFormatMajor, minor = kFormatMinor;
  AON_RETURN_IF_ERROR(WriteScalarAttribute(file, "aon_format_major", H5T_NATIVE_INT64, H5T_STD_I64LE, &major));
  AON_RETURN_IF_ERROR(WriteScalarAttribute(file, "aon_format_minor", H5T_NATIVE_INT64, H5T_STD_I64LE, &minor));
  AON_RETURN_IF_ERROR(WriteStringAttribute(file, "aon_file_kind", FileKindName(kind)));
  return w;
}

Status TraceWriter::EnsureGroup(std::string_view group, int64_t* id) {
  std::string name = "/" + std::string(group);
  hid_t f = static_cast<hid_t>(file_);
  hid_t g = H5Lexists(f, name.c_str(), H5P_DEFAULT) > 0
                ? H5Gopen2(f, name.c_str(), H5P_DEFAULT)
                : H5Gcreate2(f, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0) return IoError("creating group " + name + " in " + FormatContext(path_) + ": " + Hdf5Error());
  *id = g;
  return Status::Ok();
}

Status TraceWriter::SetMetaAttribute(std::string_view name, std::string_view value) {
  int64_t g = -1;
  AON_RETURN_IF_ERROR(EnsureGroup("meta", &g));
  Hid group = Group(static_cast<hid_t>(g));
  return WriteStringAttribute(group.get(), name, value).WithContext(FormatContext(path_));
}
Status TraceWriter::SetMetaAttribute(std::string_view name, int64_t value) {
  int64_t g = -1;
  AON_RETURN_IF_ERROR(EnsureGroup("meta", &g));
  Hid group = Group(static_cast<hid_t>(g));
  return WriteScalarAttribute(group.get(), name, H5T_NATIVE_INT64, H5T_STD_I64LE, &value)
      .WithContext(FormatContext(path_));
}
Status TraceWriter::SetMetaAttribute(std::string_view name, uint64_t value) {
  int64_t g = -1;
  AON_RETURN_IF_ERROR(EnsureGroup("meta", &g));
  Hid group = Group(static_cast<hid_t>(g));
  return WriteScalarAttribute(group.get(), name, H5T_NATIVE_UINT64, H5T_STD_U64LE, &value)
      .WithContext(FormatContext(path_));
}
Status TraceWriter::SetMetaAttribute(std::string_view name, double value) {
  int64_t g = -1;
  AON_RETURN_IF_ERROR(EnsureGroup("meta", &g));
  Hid group = Group(static_cast<hid_t>(g));
  return WriteScalarAttribute(group.get(), name, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, &value)
      .WithContext(FormatContext(path_));
}

Status TraceWriter::WriteRankMetadata(const RankMetadata& m) {
  for (const MetaField& f : RankMetadataFields()) {
    AON_RETURN_IF_ERROR(std::visit(
        [&](auto member) -> Status {
          const auto& v = m.*member;
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::string> || std::is_same_v<V, uint64_t> ||
                        std::is_same_v<V, double>) {
            return SetMetaAttribute(f.name, v);
          } else {
            return SetMetaAttribute(f.name, static_cast<int64_t>(v));
          }
        },
        f.member));
  }
  for (size_t i = 0; i < kRecordKindCount; ++i) {
    AON_RETURN_IF_ERROR(SetMetaAttribute(
        std::string("dropped_") + RecordKindName(static_cast<RecordKind>(i)), m.dropped[i]));
  }
  std::string notes;
  for (const std::string& n : m.notes) {
    if (!notes.empty()) notes += '\n';
    notes += n;
  }
  AON_RETURN_IF_ERROR(SetMetaAttribute("notes", notes));
  {
    // Written again (the collector rewrites metadata at every flush): the
    // devices table is replaced, not appended to.
    const std::string name = "/meta/" + DeviceInfoSchema().name;
    hid_t f = static_cast<hid_t>(file_);
    if (H5Lexists(f, name.c_str(), H5P_DEFAULT) > 0) {
      Hid ds = Dataset(H5Dopen2(f, name.c_str(), H5P_DEFAULT));
      hsize_t zero[1] = {0};
      if (!ds.valid() || H5Dset_extent(ds.get(), zero) < 0) {
        return IoError(FormatContext(path_) + ", dataset " + name + ": " + Hdf5Error());
      }
    }
  }
  return AppendTable(DeviceInfoSchema(), m.devices.data(), m.devices.size(), "meta");
}

Status TraceWriter::AppendTable(const TableSchema& schema, const void* records, uint64_t count,
                                std::string_view group) {
  int64_t g = -1;
  AON_RETURN_IF_ERROR(EnsureGroup(group, &g));
  Hid grp = Group(static_cast<hid_t>(g));
  const std::string ctx = FormatContext(path_) + ", dataset /" + Join(group, schema.name);
  Hid ds;
  if (H5Lexists(grp.get(), schema.name.c_str(), H5P_DEFAULT) > 0) {
    ds = Dataset(H5Dopen2(grp.get(), schema.name.c_str(), H5P_DEFAULT));
  } else {
    hsize_t dims[1] = {0}, maxdims[1] = {H5S_UNLIMITED};
    Hid space = Space(H5Screate_simple(1, dims, maxdims));
    Hid dcpl = Plist(H5Pcreate(H5P_DATASET_CREATE));
    hsize_t chunk[1] = {std::max<hsize_t>(1, options_.chunk_records)};
    H5Pset_chunk(dcpl.get(), 1, chunk);
    if (options_.deflate_level > 0) {
      H5Pset_shuffle(dcpl.get());
      H5Pset_deflate(dcpl.get(), static_cast<unsigned>(options_.deflate_level));
    }
    Hid disk = DiskType(schema);
    ds = Dataset(H5Dcreate2(grp.get(), schema.name.c_str(), disk.get(), space.get(), H5P_DEFAULT,
                            dcpl.get(), H5P_DEFAULT));
  }
  if (!ds.valid()) return IoError(ctx + ": " + Hdf5Error());
  if (count == 0) return Status::Ok();

  Hid space = Space(H5Dget_space(ds.get()));
  hsize_t old_size = 0;
  H5Sget_simple_extent_dims(space.get(), &old_size, nullptr);
  hsize_t new_size[1] = {old_size + count};
  if (H5Dset_extent(ds.get(), new_size) < 0) return IoError(ctx + ": " + Hdf5Error());
  // Rows up to the next chunk boundary go through HDF5, which merges them into
  // the partly filled chunk; whole chunks from there on are written directly.
  const uint64_t chunk_rows = std::max<uint64_t>(1, options_.chunk_records);
  const uint64_t head =
      std::endian::native != std::endian::little
          ? count
          : std::min<uint64_t>(count, (chunk_rows - old_size % chunk_rows) % chunk_rows);
  if (head > 0) {
    Hid file_space = Space(H5Dget_space(ds.get()));
    hsize_t start[1] = {old_size}, n[1] = {head};
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, n, nullptr);
    Hid mem_space = Space(H5Screate_simple(1, n, nullptr));
    Hid mem = MemoryType(schema);
    Hid dxpl = TransferProperties(head * schema.record_size);
    if (H5Dwrite(ds.get(), mem.get(), mem_space.get(), file_space.get(), dxpl.get(), records) < 0) {
      return IoError(ctx + ": " + Hdf5Error());
    }
  }
  if (head == count) return Status::Ok();
  return WriteChunks(static_cast<int64_t>(ds.get()), schema,
                     static_cast<const uint8_t*>(records) + head * schema.record_size,
                     old_size + head, count - head, ctx);
}

// What a writer keeps between appends of whole chunks: per compressing thread,
// a deflater and the buffers of the chunks it has in hand.
struct TraceWriter::ChunkScratch {
  struct Worker {
    explicit Worker(int level) : deflater(level) {}
    chunk_codec::ChunkBuffer packed;
    chunk_codec::ChunkBuffer trial;  // a trial chunk's other stream
    chunk_codec::Deflater deflater;
  };
  // At level 1, per table: the run-length encoder, or the library's match
  // finder where that was found clearly smaller (counter tables, whose rows
  // cycle through a few counters: runs miss those repeats). The first chunk of
  // a table and every kTrialEvery-th after it go through both, and the smaller
  // stream is written.
  static constexpr uint64_t kTrialEvery = 64;
  struct Trial {
    bool decided = false;  // a trial has been made
    bool matching = false;
    uint64_t until_trial = 0;  // chunks before the next trial
  };
  std::unordered_map<std::string, Trial> trials;  // by table (its context string)
  ChunkScratch(int level, unsigned threads) {
    for (unsigned i = 0; i < std::max(1u, threads); ++i) workers.emplace_back(level);
    if (threads > 1) helpers = std::make_unique<HelperThreads>(threads - 1);
  }
  std::deque<Worker> workers;
  std::unique_ptr<HelperThreads> helpers;  // kept for every append (threads > 1)
  // Output of one round: chunk i of the round in compressed[i].
  std::vector<chunk_codec::ChunkBuffer> compressed;
};

void TraceWriter::ChunkScratchDeleter::operator()(ChunkScratch* s) const { delete s; }

namespace {
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
}  // namespace

// Whole chunks go in rounds of (threads x kChunksPerThread) chunks: the threads
// pack and compress the round's chunks, each taking the next one left, then
// this thread hands the round's chunks to HDF5 in order. Memory: a round's
// compressed chunks (at most its packed size) and one packed chunk per thread.
Status TraceWriter::WriteChunks(int64_t dataset, const TableSchema& schema, const uint8_t* rows,
                                uint64_t first, uint64_t count, const std::string& ctx) {
  constexpr uint64_t kChunksPerThread = 2;
  const hid_t ds = static_cast<hid_t>(dataset);
  const unsigned threads = std::max(1u, options_.compress_threads);
  if (scratch_ == nullptr) scratch_.reset(new ChunkScratch(options_.deflate_level, threads));
  ChunkScratch& s = *scratch_;
  const chunk_codec::RowLayout layout = chunk_codec::LayoutOf(schema);
  const uint64_t chunk_rows = std::max<uint64_t>(1, options_.chunk_records);
  const bool deflate = options_.deflate_level > 0;  // then shuffle + deflate (AppendTable)
  const uint64_t chunks = (count + chunk_rows - 1) / chunk_rows;
  const uint64_t per_round = deflate ? threads * kChunksPerThread : 1;
  s.compressed.resize(per_round);
  // How each chunk of a round is compressed: by the level's deflater, the
  // match finder, or both (a trial: the smaller one is kept).
  enum class How : uint8_t { kLevel, kMatching, kTrial };
  std::vector<How> how(per_round, How::kLevel);
  std::vector<char> matching_won(per_round, 0);
  ChunkScratch::Trial* trial =
      options_.deflate_level == 1 ? &s.trials[ctx] : nullptr;  // the run-length level only
  for (uint64_t round = 0, in_round = 0; round < chunks; round += in_round) {
    // A table's first trial goes alone, so that the chunks after it follow it.
    in_round = std::min(trial != nullptr && !trial->decided ? 1 : per_round, chunks - round);
    for (uint64_t c = 0; c < in_round && trial != nullptr; ++c) {
      how[c] = trial->until_trial == 0 ? How::kTrial
               : trial->matching       ? How::kMatching
                                       : How::kLevel;
      trial->until_trial =
          trial->until_trial == 0 ? ChunkScratch::kTrialEvery - 1 : trial->until_trial - 1;
    }
    // Chunk `c` of the round by worker `w`: packed (and compressed) into
    // compressed[c]; false when a compressor could not be made.
    auto make = [&](unsigned w, uint64_t c) {
      ChunkScratch::Worker& worker = s.workers[w];
      const uint64_t done = (round + c) * chunk_rows;
      const uint64_t n = std::min(chunk_rows, count - done);
      chunk_codec::ChunkBuffer& packed = deflate ? worker.packed : s.compressed[c];
      packed.resize(chunk_rows * layout.packed_bytes);
      chunk_codec::PackChunk(layout, rows + done * schema.record_size, n, chunk_rows, deflate,
                             packed.data());
      if (!deflate) return true;
      chunk_codec::Deflater& d = worker.deflater;
      switch (how[c]) {
        case How::kLevel:
          return d.Compress(packed.data(), packed.size(), &s.compressed[c]);
        case How::kMatching:
          return d.CompressMatching(packed.data(), packed.size(), &s.compressed[c]);
        case How::kTrial:
          if (!d.Compress(packed.data(), packed.size(), &s.compressed[c]) ||
              !d.CompressMatching(packed.data(), packed.size(), &worker.trial)) {
            return false;
          }
          // The match finder only when clearly smaller (it costs ~3x the time).
          matching_won[c] = worker.trial.size() < s.compressed[c].size() * 15 / 16;
          if (matching_won[c]) std::swap(s.compressed[c], worker.trial);
          return true;
      }
      return false;
    };
    const unsigned used = static_cast<unsigned>(std::min<uint64_t>(threads, in_round));
    std::vector<char> ok(used, 1);
    // Each thread takes the next chunk when done with its last: a thread that
    // starts late (two CPUs, three busy threads) leaves its chunks to the others.
    std::atomic<uint64_t> next{0};
    auto share = [&](unsigned w) {
      for (uint64_t c = next.fetch_add(1, std::memory_order_relaxed); c < in_round;
           c = next.fetch_add(1, std::memory_order_relaxed)) {
        ok[w] = ok[w] && make(w, c);
      }
    };
    if (!RunShares(used, share, s.helpers.get()) ||
        std::find(ok.begin(), ok.end(), 0) != ok.end()) {
      return IoError(ctx + ": cannot compress a chunk (out of memory)");
    }
    for (uint64_t c = 0; c < in_round && trial != nullptr; ++c) {
      if (how[c] != How::kTrial) continue;
      trial->matching = matching_won[c] != 0;
      trial->decided = true;
    }
    for (uint64_t c = 0; c < in_round; ++c) {
      hsize_t offset[1] = {first + (round + c) * chunk_rows};
      const chunk_codec::ChunkBuffer& chunk = s.compressed[c];
      if (H5Dwrite_chunk(ds, H5P_DEFAULT, 0, offset, chunk.size(), chunk.data()) < 0) {
        return IoError(ctx + ": " + Hdf5Error());
      }
    }
  }
  return Status::Ok();
}

Status TraceWriter::CreateVirtualTable(const TableSchema& schema, uint64_t rows,
                                      std::span<const VirtualPiece> pieces,
                                      std::string_view group) {
  int64_t g = -1;
  AON_RETURN_IF_ERROR(EnsureGroup(group, &g));
  Hid grp = Group(static_cast<hid_t>(g));
  const std::string ctx = FormatContext(path_) + ", virtual dataset /" + Join(group, schema.name);
  if (H5Lexists(grp.get(), schema.name.c_str(), H5P_DEFAULT) > 0) {
    return InvalidArgument(ctx + " already exists");
  }
  hsize_t dims[1] = {rows};
  Hid space = Space(H5Screate_simple(1, dims, nullptr));
  Hid dcpl = Plist(H5Pcreate(H5P_DATASET_CREATE));
  for (const VirtualPiece& p : pieces) {
    if (p.count == 0) continue;
    if (p.first + p.count > rows) return InvalidArgument(ctx + ": a piece ends past its rows");
    hsize_t start[1] = {p.first}, count[1] = {p.count};
    Hid vspace = Space(H5Screate_simple(1, dims, nullptr));
    H5Sselect_hyperslab(vspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
    // The source dataset's extent is not known here; select the piece's rows of
    // an unlimited 1-D space, which HDF5 resolves against the real dataset.
    hsize_t src_dims[1] = {p.source_first + p.count}, src_max[1] = {H5S_UNLIMITED};
    Hid sspace = Space(H5Screate_simple(1, src_dims, src_max));
    hsize_t src_start[1] = {p.source_first};
    H5Sselect_hyperslab(sspace.get(), H5S_SELECT_SET, src_start, nullptr, count, nullptr);
    if (H5Pset_virtual(dcpl.get(), vspace.get(), p.file.c_str(), p.dataset.c_str(), sspace.get()) <
        0) {
      return IoError(ctx + ": mapping " + p.file + ":" + p.dataset + ": " + Hdf5Error());
    }
  }
  Hid disk = DiskType(schema);
  Hid ds = Dataset(H5Dcreate2(grp.get(), schema.name.c_str(), disk.get(), space.get(), H5P_DEFAULT,
                              dcpl.get(), H5P_DEFAULT));
  if (!ds.valid()) return IoError(ctx + ": " + Hdf5Error());
  return Status::Ok();
}

Status TraceWriter::WriteStrings(const StringTable& strings) {
  return AppendStrings(strings.strings());
}

// Appends to a 1-D extendable array dataset, creating it on first use.
static Status AppendArray(hid_t group, const char* name, hid_t mem_type, hid_t file_type, const void* data,
                   uint64_t n, uint64_t chunk, int deflate) {
  Hid ds;
  if (H5Lexists(group, name, H5P_DEFAULT) > 0) {
    ds = Dataset(H5Dopen2(group, name, H5P_DEFAULT));
  } else {
    hsize_t dims[1] = {0}, maxdims[1] = {H5S_UNLIMITED};
    Hid space = Space(H5Screate_simple(1, dims, maxdims));
    Hid dcpl = Plist(H5Pcreate(H5P_DATASET_CREATE));
    hsize_t chunk_dims[1] = {chunk};
    H5Pset_chunk(dcpl.get(), 1, chunk_dims);
    if (deflate > 0) {
      H5Pset_shuffle(dcpl.get());
      H5Pset_deflate(dcpl.get(), static_cast<unsigned>(deflate));
    }
    ds = Dataset(H5Dcreate2(group, name, file_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  }
  if (!ds.valid()) return IoError(std::string("dataset '") + name + "': " + Hdf5Error());
  if (n == 0) return Status::Ok();
  Hid space = Space(H5Dget_space(ds.get()));
  hsize_t old_size = 0;
  H5Sget_simple_extent_dims(space.get(), &old_size, nullptr);
  hsize_t new_size[1] = {old_size + n};
  if (H5Dset_extent(ds.get(), new_size) < 0) {
    return IoError(std::string("extending '") + name + "': " + Hdf5Error());
  }
  Hid file_space = Space(H5Dget_space(ds.get()));
  hsize_t start[1] = {old_size}, count[1] = {n};
  H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
  Hid mem_space = Space(H5Screate_simple(1, count, nullptr));
  if (H5Dwrite(ds.get(), mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, data) < 0) {
    return IoError(std::string("appending to '") + name + "': " + Hdf5Error());
  }
  return Status::Ok();
}

Status TraceWriter::AppendStrings(std::span<const std::string> strings) {
  std::vector<uint8_t> data;
  std::vector<uint64_t> offsets;
  offsets.reserve(strings.size());
  for (const std::string& s : strings) {
    offsets.push_back(strings_bytes_ + data.size());
    data.insert(data.end(), s.begin(), s.end());
    data.push_back(0);
  }
  int64_t g = -1;
  AON_RETURN_IF_ERROR(EnsureGroup("strings", &g));
  Hid grp = Group(static_cast<hid_t>(g));
  const std::string ctx = FormatContext(path_);
  AON_RETURN_IF_ERROR(AppendArray(grp.get(), "data", H5T_NATIVE_UINT8, H5T_STD_U8LE, data.data(),
                                  data.size(), 1 << 16, options_.deflate_level)
                          .WithContext(ctx));
  AON_RETURN_IF_ERROR(AppendArray(grp.get(), "offsets", H5T_NATIVE_UINT64, H5T_STD_U64LE,
                                  offsets.data(), offsets.size(), 4096, options_.deflate_level)
                          .WithContext(ctx));
  strings_bytes_ += data.size();
  return Status::Ok();
}

Status TraceWriter::Flush() {
  if (file_ < 0) return InvalidArgument(FormatContext(path_) + " is already finished");
  if (H5Fflush(static_cast<hid_t>(file_), H5F_SCOPE_GLOBAL) < 0) {
    return IoError("flushing " + FormatContext(path_ + ".partial") + ": " + Hdf5Error());
  }
  return Status::Ok();
}

Status TraceWriter::Finish() {
  if (finished_) return Status::Ok();
  Status st;
  ForEachRankFileRecordType([&](auto tag) {
    using T = decltype(tag);
    if (!st.ok()) return;
    if (merged_records_ && RecordTraits<T>::kScope != KindScope::kTimeline) return;
    const TableSchema& schema = merged_records_ ? MergedSchemaOf<T>() : RecordTraits<T>::Schema();
    st = AppendTable(schema, nullptr, 0);
  });
  AON_RETURN_IF_ERROR(st);
  hid_t f = static_cast<hid_t>(file_);
  file_ = -1;
  if (H5Fclose(f) < 0) return IoError("closing " + FormatContext(path_ + ".partial") + ": " + Hdf5Error());
  if (std::rename((path_ + ".partial").c_str(), path_.c_str()) != 0) {
    return ErrnoStatus("renaming " + path_ + ".partial to its final name", errno);
  }
  finished_ = true;
  return Status::Ok();
}

// ---- TraceReader ----------------------------------------------------------------

TraceReader::~TraceReader() {
  if (file_ >= 0) H5Fclose(static_cast<hid_t>(file_));
}

namespace {

// A rank file is written by the job's user (its agent or collector). One owned
// by anybody else was put there by someone else: it is not this job's, and is
// not read as if it were. "The job's user" is the reader (aon-merge runs as the
// job's user), or, for root, the owner of the directory the file is in.
Status CheckRankFileOwner(const std::string& path, const struct stat& st) {
  uid_t expected = geteuid();
  std::string who = "you";
  if (expected == 0) {
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? std::string(".")
                            : slash == 0               ? "/"
                                                       : path.substr(0, slash);
    struct stat dst {};
    if (stat(dir.c_str(), &dst) != 0) return ErrnoStatus("cannot check the owner of " + dir, errno);
    expected = dst.st_uid;
    who = "the owner of " + dir;
  }
  if (st.st_uid == expected) return Status::Ok();
  return Status(StatusCode::kPermissionDenied,
                FormatContext(path) + " belongs to uid " + std::to_string(st.st_uid) + ", not to " +
                    who + " (uid " + std::to_string(expected) +
                    "): another user's file is not taken as a rank of this job");
}

}  // namespace

StatusOr<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path) {
  SilenceHdf5();
  const std::string ctx = FormatContext(path);
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return ErrnoStatus("cannot open " + ctx, errno);
  if (!S_ISREG(st.st_mode)) return InvalidArgument(ctx + " is not a regular file");
  htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return DataLoss(ctx + " is not an HDF5 file (corrupt, truncated or another format)");
  }
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) {
    const std::string why = Hdf5Error();
    // A file a live writer holds (a running collector's .partial): not damage.
    // (EAGAIN only: a file system without locks fails with another errno.)
    if (why.find("unable to lock file, errno = " + std::to_string(EAGAIN)) != std::string::npos) {
      return Unavailable("cannot open " + ctx +
                         ": another process has it open for writing (HDF5's file lock; with "
                         "HDF5_USE_FILE_LOCKING=FALSE it is read as last flushed): " + why);
    }
    return DataLoss("cannot open " + ctx + " (corrupt or truncated): " + why);
  }
  std::unique_ptr<TraceReader> r(new TraceReader(path, file));
  r->file_bytes_ = static_cast<uint64_t>(st.st_size);

  auto major = ReadNumberAttribute<int64_t>(file, "aon_format_major", H5T_NATIVE_INT64);
  if (!major.ok()) return DataLoss(ctx + " is not an AON trace: " + major.status().message());
  auto minor = ReadNumberAttribute<int64_t>(file, "aon_format_minor", H5T_NATIVE_INT64);
  if (!minor.ok()) return DataLoss(ctx + ": " + minor.status().message());
  // Compared as read: a narrowing cast first would take major 2^32+1 for 1.
  if (*major != kFormatMajor) {
    std::ostringstream msg;
    msg << ctx << " has trace format " << *major << "." << *minor
        << "; this AON reads format " << kFormatMajor << ".x";
    if (*major > kFormatMajor) msg << " (the file is newer: upgrade AON to read it)";
    return Unimplemented(msg.str());
  }
  if (*minor < 0 || *minor > INT_MAX) {
    return DataLoss(ctx + " has trace format minor version " + std::to_string(*minor) +
                    ", out of range");
  }
  r->major_ = kFormatMajor;
  r->minor_ = static_cast<int>(*minor);
  auto kind = ReadStringAttribute(file, "aon_file_kind", r->file_bytes_);
  if (!kind.ok()) return DataLoss(ctx + ": " + kind.status().message());
  if (*kind == FileKindName(FileKind::kRank)) {
    r->kind_ = FileKind::kRank;
    AON_RETURN_IF_ERROR(CheckRankFileOwner(path, st));
  } else if (*kind == FileKindName(FileKind::kTimeline)) {
    r->kind_ = FileKind::kTimeline;
  } else {
    return DataLoss(ctx + " has unknown aon_file_kind '" + *kind + "'");
  }
  return r;
}

namespace {

// /meta, opened only through a hard link (CheckHardLinks).
StatusOr<Hid> OpenMetaGroup(hid_t f, const std::string& path) {
  Status links = CheckHardLinks(f, "/meta");
  if (!links.ok()) return DataLoss(FormatContext(path) + " has no usable /meta group: " + links.message());
  Hid g = Group(H5Gopen2(f, "/meta", H5P_DEFAULT));
  if (!g.valid()) return DataLoss(FormatContext(path) + ", /meta: " + Hdf5Error());
  return g;
}

}  // namespace

StatusOr<std::string> TraceReader::GetMetaString(std::string_view name) const {
  AON_ASSIGN_OR_RETURN(Hid g, OpenMetaGroup(static_cast<hid_t>(file_), path_));
  auto v = ReadStringAttribute(g.get(), name, file_bytes_);
  if (!v.ok()) return v.status().WithContext(FormatContext(path_) + " /meta");
  return v;
}

StatusOr<int64_t> TraceReader::GetMetaInt(std::string_view name) const {
  AON_ASSIGN_OR_RETURN(Hid g, OpenMetaGroup(static_cast<hid_t>(file_), path_));
  auto v = ReadNumberAttribute<int64_t>(g.get(), name, H5T_NATIVE_INT64);
  if (!v.ok()) return v.status().WithContext(FormatContext(path_) + " /meta");
  return v;
}

StatusOr<double> TraceReader::GetMetaDouble(std::string_view name) const {
  AON_ASSIGN_OR_RETURN(Hid g, OpenMetaGroup(static_cast<hid_t>(file_), path_));
  auto v = ReadNumberAttribute<double>(g.get(), name, H5T_NATIVE_DOUBLE);
  if (!v.ok()) return v.status().WithContext(FormatContext(path_) + " /meta");
  return v;
}

StatusOr<RankMetadata> TraceReader::ReadRankMetadata() const {
  RankMetadata m;
  for (const MetaField& f : RankMetadataFields()) {
    AON_RETURN_IF_ERROR(std::visit(
        [&](auto member) -> Status {
          auto& out = m.*member;
          using V = std::decay_t<decltype(out)>;
          auto missing_ok = [&](const Status& st) {
            // Fields added in a later minor version: an older file lacks them.
            return st.code() == StatusCode::kNotFound && f.since_minor > 0;
          };
          if constexpr (std::is_same_v<V, std::string>) {
            auto v = GetMetaString(f.name);
            if (!v.ok()) return missing_ok(v.status()) ? Status::Ok() : v.status();
            out = std::move(v).value();
          } else if constexpr (std::is_same_v<V, double>) {
            auto v = GetMetaDouble(f.name);
            if (!v.ok()) return missing_ok(v.status()) ? Status::Ok() : v.status();
            out = *v;
          } else {
            auto v = GetMetaInt(f.name);
            if (!v.ok()) return missing_ok(v.status()) ? Status::Ok() : v.status();
            if constexpr (std::is_same_v<V, int32_t>) {
              if (*v < INT32_MIN || *v > INT32_MAX) {
                return DataLoss(FormatContext(path_) + " /meta: attribute '" + f.name + "' = " +
                                std::to_string(*v) + " is out of range");
              }
              out = static_cast<int32_t>(*v);
            } else if constexpr (std::is_same_v<V, bool>) {
              out = *v != 0;
            } else {
              out = static_cast<V>(*v);
            }
          }
          return Status::Ok();
        },
        f.member));
  }
  for (size_t i = 0; i < kRecordKindCount; ++i) {
    auto d = GetMetaInt(std::string("dropped_") + RecordKindName(static_cast<RecordKind>(i)));
    m.dropped[i] = d.ok() ? static_cast<uint64_t>(*d) : 0;  // kinds added in later minors
  }
  AON_ASSIGN_OR_RETURN(std::string notes, GetMetaString("notes"));
  size_t pos = 0;
  while (pos < notes.size()) {
    size_t nl = notes.find('\n', pos);
    if (nl == std::string::npos) nl = notes.size();
    m.notes.push_back(notes.substr(pos, nl - pos));
    pos = nl + 1;
  }
  AON_ASSIGN_OR_RETURN(m.devices, ReadAllOf<DeviceInfo>(DeviceInfoSchema(), "meta"));
  return m;
}

StatusOr<StringTable> TraceReader::ReadStrings() const {
  hid_t f = static_cast<hid_t>(file_);
  const std::string ctx = FormatContext(path_);
  auto data = ReadArray<uint8_t>(f, "/strings/data", H5T_NATIVE_UINT8, file_bytes_, kMaxStringBytes);
  if (!data.ok()) return data.status().WithContext(ctx);
  auto offsets =
      ReadArray<uint64_t>(f, "/strings/offsets", H5T_NATIVE_UINT64, file_bytes_, kMaxStrings);
  if (!offsets.ok()) return offsets.status().WithContext(ctx);
  StringTable table;
  const std::vector<uint8_t>& d = *data;
  const std::vector<uint64_t>& off = *offsets;
  // Never trust offsets: each must start inside the data, after the previous
  // string's terminator, and end with a NUL.
  uint64_t next_min = 0;
  for (size_t i = 0; i < off.size(); ++i) {
    if (off[i] < next_min || off[i] >= d.size()) {
      return DataLoss(ctx + ": string table offset " + std::to_string(i) + " is out of bounds");
    }
    const auto* begin = reinterpret_cast<const char*>(d.data() + off[i]);
    size_t max_len = d.size() - off[i];
    size_t len = strnlen(begin, max_len);
    if (len == max_len) return DataLoss(ctx + ": string " + std::to_string(i) + " is not terminated");
    uint32_t id = table.Intern(std::string_view(begin, len));
    // Ids must be dense and in order; a duplicate string would break that.
    if (id != i && !(i == 0 && len == 0)) {
      return DataLoss(ctx + ": string table has a duplicate or misplaced entry at " + std::to_string(i));
    }
    next_min = off[i] + len + 1;
  }
  return table;
}

StatusOr<uint64_t> TraceReader::TableSize(const TableSchema& schema, std::string_view group) const {
  const std::string name = "/" + Join(group, schema.name);
  auto c = OpenChecked(static_cast<hid_t>(file_), name, file_bytes_, kind_ == FileKind::kTimeline,
                       true);
  if (!c.ok()) {
    if (c.status().code() == StatusCode::kNotFound) {
      return NotFound(FormatContext(path_) + " has no dataset " + name);
    }
    return c.status().WithContext(FormatContext(path_));
  }
  if (group == "meta" && c->rows > kMaxMetaRows) {
    return DataLoss(FormatContext(path_) + ": dataset " + name + " declares " +
                    std::to_string(c->rows) + " rows, more than the " +
                    std::to_string(kMaxMetaRows) + " AON reads from /meta: refused");
  }
  return c->rows;
}

// What a reader keeps between reads of directly readable chunks.
// Per decoding thread: an inflater and its buffer; per chunk of a round, the
// chunk as stored.
struct TraceReader::ChunkScratch {
  struct Worker {
    chunk_codec::ChunkBuffer inflated;
    chunk_codec::Inflater inflater;
  };
  std::deque<Worker> workers;
  std::vector<chunk_codec::ChunkBuffer> stored;
};

void TraceReader::ChunkScratchDeleter::operator()(ChunkScratch* s) const { delete s; }

// This thread reads the stored chunks through HDF5, one after another, while
// the other threads inflate and unpack the chunks already read into `out`
// (disjoint rows), taking the next one as they finish the last; once every
// chunk is read, this thread decodes too. One thread: read all, then decode.
Status TraceReader::ReadChunks(int64_t dataset, const TableSchema& schema, uint64_t chunk_rows,
                               bool deflated, const std::vector<uint64_t>& stored, uint64_t first,
                               uint64_t count, void* out, const std::string& ctx,
                               const RowsVisitor* visit) const {
  const hid_t ds = static_cast<hid_t>(dataset);
  const uint64_t first_chunk = first / chunk_rows, last_chunk = (first + count - 1) / chunk_rows;
  const uint64_t chunks = last_chunk + 1 - first_chunk;
  // At most kWindow chunks in hand: a long read goes in windows of them.
  constexpr uint64_t kWindow = 64;
  if (chunks > kWindow) {
    for (uint64_t c = 0; c < chunks; c += kWindow) {
      const uint64_t lo = std::max(first, (first_chunk + c) * chunk_rows);
      const uint64_t hi = std::min(first + count, (first_chunk + c + kWindow) * chunk_rows);
      const std::vector<uint64_t> sizes(
          stored.begin() + static_cast<ptrdiff_t>(c),
          stored.begin() + static_cast<ptrdiff_t>(std::min(chunks, c + kWindow)));
      AON_RETURN_IF_ERROR(ReadChunks(dataset, schema, chunk_rows, deflated, sizes, lo, hi - lo,
                                     static_cast<uint8_t*>(out) + (lo - first) * schema.record_size,
                                     ctx, visit));
    }
    return Status::Ok();
  }
  const unsigned threads =
      deflated ? static_cast<unsigned>(std::clamp<uint64_t>(chunks, 1, decode_threads_)) : 1;
  if (scratch_ == nullptr) scratch_.reset(new ChunkScratch());
  ChunkScratch& s = *scratch_;
  while (s.workers.size() < threads) s.workers.emplace_back();
  if (s.stored.size() < chunks) s.stored.resize(chunks);
  const chunk_codec::RowLayout layout = chunk_codec::LayoutOf(schema);
  const uint64_t chunk_bytes = chunk_rows * layout.packed_bytes;
  auto* dst = static_cast<uint8_t*>(out);

  // `state`: how many chunks of this read are in s.stored (the first ones),
  // plus kDone once reading has ended: every chunk read, or one that cannot be
  // (`unreadable` then says why). Only this thread changes it.
  constexpr uint64_t kDone = uint64_t{1} << 63;
  std::atomic<uint64_t> state{0};
  std::atomic<uint64_t> next{0};  // the next chunk a decoding thread takes
  Status unreadable;
  auto read_all = [&] {
    uint64_t have = 0;
    struct End {  // also when a resize throws: the decoding threads must not wait on
      std::atomic<uint64_t>& state;
      const uint64_t& have;
      bool notify;
      ~End() {
        state.store(have | kDone, std::memory_order_release);
        if (notify) state.notify_all();
      }
    } end{state, have, threads > 1};
    for (; have < chunks; ++have) {
      hsize_t offset[1] = {(first_chunk + have) * chunk_rows};
      // Checked by CheckChunksToRead: stored, inside the file, no filter skipped.
      s.stored[have].resize(stored.at(have));
      uint32_t mask = 0;
      if (H5Dread_chunk(ds, H5P_DEFAULT, offset, &mask, s.stored[have].data()) < 0 || mask != 0) {
        unreadable = DataLoss(ctx + " (corrupt or truncated): the chunk of rows from " +
                              std::to_string(offset[0]) + ": " + Hdf5Error());
        return;
      }
      state.store(have + 1, std::memory_order_release);
      if (threads > 1) state.notify_all();
    }
  };
  // Chunk i by worker w; false when it does not inflate.
  auto decode = [&](unsigned w, uint64_t i) {
    const uint64_t c = first_chunk + i;
    const uint8_t* chunk = s.stored[i].data();
    if (deflated) {
      ChunkScratch::Worker& worker = s.workers[w];
      worker.inflated.resize(chunk_bytes);
      if (!worker.inflater.InflateExact(s.stored[i].data(), s.stored[i].size(),
                                        worker.inflated.data(), chunk_bytes)) {
        return false;
      }
      chunk = worker.inflated.data();
    }
    const uint64_t lo = std::max(first, c * chunk_rows);
    const uint64_t hi = std::min(first + count, (c + 1) * chunk_rows);
    uint8_t* rows = dst + (lo - first) * schema.record_size;
    chunk_codec::UnpackChunk(layout, chunk, chunk_rows, lo - c * chunk_rows, hi - lo, deflated,
                             rows);
    if (visit != nullptr) (*visit)(rows, hi - lo);
    return true;
  };
  std::vector<uint64_t> bad(threads, UINT64_MAX);  // per worker: its first chunk that failed
  auto share = [&](unsigned w) {
    if (w == 0) read_all();
    for (;;) {
      const uint64_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= chunks) return;
      // Wait until chunk i is read, or reading has ended before it.
      for (uint64_t st = state.load(std::memory_order_acquire); (st & ~kDone) <= i;
           st = state.load(std::memory_order_acquire)) {
        if ((st & kDone) != 0) return;
        state.wait(st, std::memory_order_acquire);
      }
      if (!decode(w, i) && bad[w] == UINT64_MAX) bad[w] = i;
    }
  };
  if (!RunShares(threads, share, helpers_)) {
    return Unavailable(ctx + ": out of memory decoding chunks");
  }
  // The first chunk that went wrong names the error, as when each chunk is
  // read and decoded in turn.
  const uint64_t worst = *std::min_element(bad.begin(), bad.end());
  if (worst != UINT64_MAX && worst < (state.load() & ~kDone)) {
    return DataLoss(ctx + " (corrupt or truncated): the chunk of rows from " +
                    std::to_string((first_chunk + worst) * chunk_rows) + " does not inflate to " +
                    Bytes(chunk_bytes));
  }
  return unreadable;
}

Status TraceReader::ReadTable(const TableSchema& schema, uint64_t first, uint64_t count, void* out,
                              std::string_view group, const RowsVisitor* visit) const {
  if (count == 0) return Status::Ok();
  std::string name = "/" + Join(group, schema.name);
  const std::string ctx = FormatContext(path_) + ", dataset " + name;
  // The structural checks again (this may be another dataset than TableSize
  // saw); its extent was checked against its storage by TableSize.
  auto c = OpenChecked(static_cast<hid_t>(file_), name, file_bytes_, kind_ == FileKind::kTimeline,
                       false);
  if (!c.ok()) return c.status().WithContext(FormatContext(path_));
  const Hid& ds = c->ds;
  Hid disk = Type(H5Dget_type(ds.get()));
  if (H5Tget_class(disk.get()) != H5T_COMPOUND) return DataLoss(ctx + " is not a compound table");
  AON_RETURN_IF_ERROR(CheckRowMembers(disk.get(), ctx));
  Hid file_space = Space(H5Dget_space(ds.get()));
  const uint64_t n = c->rows;
  if (first > n || count > n - first) return InvalidArgument(ctx + ": reading past the end");
  std::vector<uint64_t> stored;
  AON_RETURN_IF_ERROR(CheckChunksToRead(ds.get(), first, count, H5Tget_size(disk.get()),
                                        file_bytes_, ctx, &stored));
  if (const std::optional<DirectChunks> direct = DirectlyReadable(ds.get(), disk.get(), schema)) {
    return ReadChunks(ds.get(), schema, direct->chunk_rows, direct->deflated, stored, first, count,
                      out, ctx, visit);
  }
  hsize_t start[1] = {first}, cnt[1] = {count};
  H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, cnt, nullptr);
  Hid mem_space = Space(H5Screate_simple(1, cnt, nullptr));
  Hid mem = MemoryType(schema);
  std::memset(out, 0, count * schema.record_size);
  Hid dxpl = TransferProperties(count * schema.record_size);
  if (H5Dread(ds.get(), mem.get(), mem_space.get(), file_space.get(), dxpl.get(), out) < 0) {
    return DataLoss(ctx + " (corrupt or truncated): " + Hdf5Error());
  }
  if (visit != nullptr) (*visit)(out, count);
  return Status::Ok();
}

}  // namespace aon
