// HDF5 plumbing of the trace files (trace_writer.cc, trace_reader.cc): owned
// identifiers (Hid), the record tables' HDF5 types, attribute helpers and the
// text of errors. Internal to aon::format.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "aon/base/status.h"
#include "aon/format/schema.h"

namespace aon::hdf5 {

// Silences HDF5's own error printing (once per process): its messages are
// folded into the returned Status instead (Hdf5Error).
void SilenceHdf5();

// Text of the innermost error on HDF5's stack, then clears the stack.
std::string Hdf5Error();

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

inline Hid Group(hid_t id) { return Hid(id, H5Gclose); }
inline Hid Dataset(hid_t id) { return Hid(id, H5Dclose); }
inline Hid Space(hid_t id) { return Hid(id, H5Sclose); }
inline Hid Type(hid_t id) { return Hid(id, H5Tclose); }
inline Hid Plist(hid_t id) { return Hid(id, H5Pclose); }
inline Hid Attr(hid_t id) { return Hid(id, H5Aclose); }

// Transfer properties for reading or writing `bytes` of records. A record
// table's rows are converted between the struct's layout and the packed one
// on disk, through a conversion and a background buffer that HDF5 allocates
// and zeroes for every H5Dread / H5Dwrite: 1 MiB each by default, whatever the
// transfer's size. Sized to the transfer, a small read or append (the
// collector's per-second appends, small rank files) no longer pays for 2 MiB:
// reading a table of 1 to 16 rows took 150 us, now 105 (Release, HDF5 1.10.8).
Hid TransferProperties(uint64_t bytes);

// In-memory compound type: the struct's own layout.
Hid MemoryType(const TableSchema& schema);

// On-disk compound type: the same members, packed, little-endian.
Hid DiskType(const TableSchema& schema);

// "a/b": b inside group a.
std::string Join(std::string_view a, std::string_view b);

// "<n> bytes", for errors.
std::string Bytes(uint64_t n);

// "trace file '<path>'": how errors name a file.
std::string FormatContext(const std::string& path);

// Writes (or replaces) the scalar string attribute `name` of `obj`, cut to what an
// attribute holds.
Status WriteStringAttribute(hid_t obj, std::string_view name, std::string_view value);

// Writes (or replaces) the scalar attribute `name` of `obj`: `value` in `mem_type`,
// stored as `file_type`.
Status WriteScalarAttribute(hid_t obj, std::string_view name, hid_t mem_type, hid_t file_type,
                            const void* value);

// The one element of an attribute: one whose dataspace holds more (or none)
// would be read past the single value the caller has room for.
Status CheckOneValue(hid_t attr, const std::string& n);

// The string attribute `name` of `obj`; a fixed-size one that declares more than
// `max_bytes` (the file's size) is refused.
StatusOr<std::string> ReadStringAttribute(hid_t obj, std::string_view name, uint64_t max_bytes);

// The attribute `n` of `obj`, opened, when it exists and holds a single value.
StatusOr<Hid> OpenSingleValueAttribute(hid_t obj, const std::string& n);

// The number attribute `name` of `obj`, read as `mem_type` (V's).
template <typename V>
StatusOr<V> ReadNumberAttribute(hid_t obj, std::string_view name, hid_t mem_type) {
  const std::string n(name);
  AON_ASSIGN_OR_RETURN(Hid attr, OpenSingleValueAttribute(obj, n));
  Hid type = Type(H5Aget_type(attr.get()));
  H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_INTEGER && cls != H5T_FLOAT)
    return DataLoss("attribute '" + n + "' is not a number");
  V v{};
  if (H5Aread(attr.get(), mem_type, &v) < 0) return DataLoss("reading '" + n + "': " + Hdf5Error());
  return v;
}

}  // namespace aon::hdf5
