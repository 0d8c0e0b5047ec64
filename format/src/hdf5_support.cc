// HDF5 plumbing of the trace files (hdf5_support.h): errors, record-table types,
// attributes.
#include "hdf5_support.h"

#include <algorithm>
#include <cstring>
#include <mutex>

namespace aon::hdf5 {
namespace {

herr_t CollectError(unsigned n, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<std::string*>(data);
  // Walking downward goes from the API call to the innermost, most specific
  // error: keep the last entry.
  (void)n;
  if (err->desc != nullptr) *out = err->desc;
  return 0;
}

hid_t NativeType(FieldType t) {
  switch (t) {
    case FieldType::kU8:
      return H5T_NATIVE_UINT8;
    case FieldType::kU16:
      return H5T_NATIVE_UINT16;
    case FieldType::kU32:
      return H5T_NATIVE_UINT32;
    case FieldType::kI32:
      return H5T_NATIVE_INT32;
    case FieldType::kU64:
      return H5T_NATIVE_UINT64;
    case FieldType::kI64:
      return H5T_NATIVE_INT64;
    case FieldType::kF64:
      return H5T_NATIVE_DOUBLE;
    case FieldType::kPadding:
      break;  // never stored (BuildTableSchema leaves it out)
  }
  return H5T_NATIVE_UINT8;
}

hid_t FileType(FieldType t) {
  switch (t) {
    case FieldType::kU8:
      return H5T_STD_U8LE;
    case FieldType::kU16:
      return H5T_STD_U16LE;
    case FieldType::kU32:
      return H5T_STD_U32LE;
    case FieldType::kI32:
      return H5T_STD_I32LE;
    case FieldType::kU64:
      return H5T_STD_U64LE;
    case FieldType::kI64:
      return H5T_STD_I64LE;
    case FieldType::kF64:
      return H5T_IEEE_F64LE;
    case FieldType::kPadding:
      break;
  }
  return H5T_STD_U8LE;
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

}  // namespace

void SilenceHdf5() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

std::string Hdf5Error() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, CollectError, &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? "HDF5 error" : text;
}

Hid TransferProperties(uint64_t bytes) {
  constexpr uint64_t kMinBuffer = 4096, kMaxBuffer = uint64_t{1} << 20;  // HDF5's default
  Hid dxpl = Plist(H5Pcreate(H5P_DATASET_XFER));
  H5Pset_buffer(dxpl.get(), std::clamp(bytes, kMinBuffer, kMaxBuffer), nullptr, nullptr);
  return dxpl;
}

Hid MemoryType(const TableSchema& schema) {
  Hid type = Type(H5Tcreate(H5T_COMPOUND, schema.record_size));
  for (const Field& f : schema.fields) H5Tinsert(type.get(), f.name, f.offset, NativeType(f.type));
  return type;
}

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

std::string Bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

std::string FormatContext(const std::string& path) { return "trace file '" + path + "'"; }

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

Status CheckOneValue(hid_t attr, const std::string& n) {
  Hid space = Space(H5Aget_space(attr));
  if (!space.valid() || H5Sget_simple_extent_npoints(space.get()) != 1) {
    H5Eclear2(H5E_DEFAULT);
    return DataLoss("attribute '" + n + "' is not a single value");
  }
  return Status::Ok();
}

StatusOr<Hid> OpenSingleValueAttribute(hid_t obj, const std::string& n) {
  if (H5Aexists(obj, n.c_str()) <= 0) return NotFound("attribute '" + n + "' is missing");
  Hid attr = Attr(H5Aopen(obj, n.c_str(), H5P_DEFAULT));
  if (!attr.valid()) return DataLoss("opening attribute '" + n + "': " + Hdf5Error());
  AON_RETURN_IF_ERROR(CheckOneValue(attr.get(), n));
  return attr;
}

StatusOr<std::string> ReadStringAttribute(hid_t obj, std::string_view name, uint64_t max_bytes) {
  const std::string n(name);
  AON_ASSIGN_OR_RETURN(Hid attr, OpenSingleValueAttribute(obj, n));
  Hid type = Type(H5Aget_type(attr.get()));
  if (H5Tget_class(type.get()) != H5T_STRING)
    return DataLoss("attribute '" + n + "' is not a string");
  if (H5Tis_variable_str(type.get()) > 0) {
    char* value = nullptr;
    Hid mem = Type(H5Tcopy(H5T_C_S1));
    H5Tset_size(mem.get(), H5T_VARIABLE);
    if (H5Aread(attr.get(), mem.get(), &value) < 0)
      return DataLoss("reading '" + n + "': " + Hdf5Error());
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
  if (H5Aread(attr.get(), mem.get(), buf.data()) < 0)
    return DataLoss("reading '" + n + "': " + Hdf5Error());
  buf.resize(std::strlen(buf.c_str()));
  return buf;
}

}  // namespace aon::hdf5
