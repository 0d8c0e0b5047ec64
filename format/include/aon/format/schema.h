// Table schemas: every fixed-width table AON stores (record kinds, /meta/devices,
// /meta/ranks) is described once, next to its struct, by a field table:
//
//   template <> struct TableTraits<KernelRecord> {
//     static constexpr const char* kName = "kernels";      // HDF5 dataset name
//     static constexpr Field kFields[] = {
//         AON_FIELD(KernelRecord, start_ns, kStart, "GPU start (host timebase ns)"),
//         ...
//         AON_PADDING(KernelRecord, padding_)};
//   };
//
// Each field carries its role. Code that moves records around acts on roles, never
// on field names: the merge remaps every kStringId field into the unified string
// table and shifts every kStart / kEnd / kTime field onto the job's clock; the
// exports name kEnum values; docs/trace-format.md's field tables are generated
// from the same entries (tests/unit/common/schema_test.cc checks that they match,
// and that every byte of every struct belongs to exactly one field, so a member
// added to a struct without its entry here fails the build's tests).
//
// Field types are deduced from the member's C++ type, so a table cannot disagree
// with its struct about widths or signedness.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace aon {

enum class FieldType : uint8_t { kU8, kU16, kU32, kI32, kU64, kI64, kF64, kPadding };

constexpr size_t FieldTypeSize(FieldType t) {
  switch (t) {
    case FieldType::kU8:
      return 1;
    case FieldType::kU16:
      return 2;
    case FieldType::kU32:
    case FieldType::kI32:
      return 4;
    case FieldType::kU64:
    case FieldType::kI64:
    case FieldType::kF64:
      return 8;
    case FieldType::kPadding:
      return 0;  // its size is Field::size
  }
  return 0;
}

// What a field means to the code that moves records between files, processes and
// formats.
enum class FieldRole : uint8_t {
  kStart,     // ns on the host timebase when it began: sorted on, clock-shifted
  kEnd,       // ns on the host timebase when it ended: clock-shifted
  kTime,      // another host-timebase time, 0 = none: clock-shifted unless 0
  kStringId,  // id into the file's string table (0 = ""): remapped by the merge
  kEnum,      // a code whose values are named (Field::values)
  kFlags,     // a bit set whose bits are named (Field::values: value = the bit)
  kId,        // an identifier, compared and never computed on (ids, hashes, ranks)
  kQuantity,  // a count, size, dimension or measured value
  kPadding,   // alignment only: never stored
};
const char* FieldRoleName(FieldRole role);

struct EnumValue {
  int64_t value;
  const char* name;
};

struct Field {
  const char* name;
  size_t offset;
  FieldType type;
  FieldRole role;
  const char* doc;                    // one line for docs/trace-format.md
  std::span<const EnumValue> values;  // kEnum / kFlags
  size_t size;                        // bytes in the struct
  // The stored value that means "none" or "unknown" (-1, 0, UINT32_MAX, ...),
  // as the field's bits in 64 (signed values sign-extended): the Python reader
  // makes it NA. has_none false: every value is a value.
  bool has_none = false;
  uint64_t none_bits = 0;

  constexpr Field(const char* name_, size_t offset_, FieldType type_, FieldRole role_,
                  const char* doc_, std::span<const EnumValue> values_ = {}, size_t size_ = 0)
      : name(name_),
        offset(offset_),
        type(type_),
        role(role_),
        doc(doc_),
        values(values_),
        size(size_ != 0 ? size_ : FieldTypeSize(type_)) {}
  // This field with `v` as its "none" value (see has_none).
  constexpr Field None(int64_t v) const {
    Field f = *this;
    f.has_none = true;
    f.none_bits = static_cast<uint64_t>(v);
    return f;
  }
  constexpr Field NoneBits(uint64_t bits) const {
    Field f = *this;
    f.has_none = true;
    f.none_bits = bits;
    return f;
  }
  // A column read by name into a struct of the reader's own (a projection of a
  // stored table: the stored table's entry is where its role is declared).
  constexpr Field(const char* name_, size_t offset_, FieldType type_)
      : Field(name_, offset_, type_, FieldRole::kQuantity, "") {}
};

namespace schema_internal {
template <typename M>
constexpr FieldType TypeOf() {
  if constexpr (std::is_same_v<M, uint8_t>)
    return FieldType::kU8;
  else if constexpr (std::is_same_v<M, uint16_t>)
    return FieldType::kU16;
  else if constexpr (std::is_same_v<M, uint32_t>)
    return FieldType::kU32;
  else if constexpr (std::is_same_v<M, int32_t>)
    return FieldType::kI32;
  else if constexpr (std::is_same_v<M, uint64_t>)
    return FieldType::kU64;
  else if constexpr (std::is_same_v<M, int64_t>)
    return FieldType::kI64;
  else if constexpr (std::is_same_v<M, double>)
    return FieldType::kF64;
  else
    static_assert(sizeof(M) == 0, "a stored field must be u8/u16/u32/i32/u64/i64/f64");
}
}  // namespace schema_internal

// Helpers for the tables (macros only because offsetof and the member's name need
// the member as a token).
#define AON_FIELD(Type, member, role, doc, ...)                                            \
  ::aon::Field {                                                                           \
#member, offsetof(Type, member),                                                       \
        ::aon::schema_internal::TypeOf < std::remove_cvref_t < decltype(Type::member)>>(), \
        ::aon::FieldRole::role, doc __VA_OPT__(, __VA_ARGS__)                              \
  }
#define AON_PADDING(Type, member)                                                                \
  ::aon::Field {                                                                                 \
#member, offsetof(Type, member), ::aon::FieldType::kPadding, ::aon::FieldRole::kPadding, "", \
        {}, sizeof(Type::member)                                                                 \
  }

// Specialized next to each stored struct: kName and kFields as above.
template <typename T>
struct TableTraits;

template <typename T>
concept StoredTable = requires {
  TableTraits<T>::kName;
  TableTraits<T>::kFields;
};

// ---- Compile-time views of a field table --------------------------------------

template <StoredTable T>
constexpr size_t CountFields(FieldRole role) {
  size_t n = 0;
  for (const Field& f : TableTraits<T>::kFields) n += f.role == role ? 1 : 0;
  return n;
}

// Offsets of the fields of `role`, in table order.
template <StoredTable T, FieldRole role>
constexpr auto FieldOffsets() {
  std::array<size_t, CountFields<T>(role)> out{};
  size_t i = 0;
  for (const Field& f : TableTraits<T>::kFields) {
    if (f.role == role) out[i++] = f.offset;
  }
  return out;
}

template <StoredTable T>
constexpr bool kHasStart = CountFields<T>(FieldRole::kStart) == 1;

// Calls f(uint32_t& id) for every kStringId field of `r`.
template <StoredTable T, typename F>
void ForEachStringId(T& r, F&& f) {
  static constexpr auto kOffsets = FieldOffsets<T, FieldRole::kStringId>();
  for (size_t off : kOffsets) f(*reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(&r) + off));
}
template <StoredTable T, typename F>
void ForEachStringId(const T& r, F&& f) {
  static constexpr auto kOffsets = FieldOffsets<T, FieldRole::kStringId>();
  for (size_t off : kOffsets) {
    f(*reinterpret_cast<const uint32_t*>(reinterpret_cast<const char*>(&r) + off));
  }
}

// Applies `shift` (uint64_t -> uint64_t) to every time field of `r`: kStart and
// kEnd always, kTime unless 0 (none).
template <StoredTable T, typename F>
void ShiftTimes(T& r, F&& shift) {
  static constexpr auto kStarts = FieldOffsets<T, FieldRole::kStart>();
  static constexpr auto kEnds = FieldOffsets<T, FieldRole::kEnd>();
  static constexpr auto kTimes = FieldOffsets<T, FieldRole::kTime>();
  auto at = [&](size_t off) -> uint64_t& {
    return *reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(&r) + off);
  };
  for (size_t off : kStarts) at(off) = shift(at(off));
  for (size_t off : kEnds) at(off) = shift(at(off));
  for (size_t off : kTimes) {
    if (at(off) != 0) at(off) = shift(at(off));
  }
}

// Start / end time of a record (0 for a table without one).
template <StoredTable T>
uint64_t StartOf(const T& r) {
  static constexpr auto kStarts = FieldOffsets<T, FieldRole::kStart>();
  if constexpr (kStarts.empty()) {
    return 0;
  } else {
    return *reinterpret_cast<const uint64_t*>(reinterpret_cast<const char*>(&r) + kStarts[0]);
  }
}
template <StoredTable T>
uint64_t EndOf(const T& r) {
  static constexpr auto kEnds = FieldOffsets<T, FieldRole::kEnd>();
  if constexpr (kEnds.empty()) {
    return 0;
  } else {
    return *reinterpret_cast<const uint64_t*>(reinterpret_cast<const char*>(&r) + kEnds[0]);
  }
}

// The name of `value` in an enum field's table, or nullptr.
const char* EnumValueName(const Field& field, int64_t value);
// The same, from a value table (records.h: kCopyKindValues, ...).
const char* EnumValueName(std::span<const EnumValue> values, int64_t value);
// "<prefix><name>" for every value of `values` below 256 that has a name, and
// `fallback` for the others: labels an exporter looks up per record.
std::array<std::string, 256> EnumLabels(std::span<const EnumValue> values, std::string_view prefix,
                                        std::string_view fallback);

// ---- Run-time schema: what the HDF5 reader and writer use ----------------------

// A table of fixed-width records: dataset name, in-memory record size and the
// stored fields (padding left out).
struct TableSchema {
  std::string name;
  size_t record_size = 0;
  std::vector<Field> fields;
};

// The stored fields of kFields (padding left out), built once per table and
// never destroyed: a rank agent writes its own file from an exit handler, and
// a schema first built after that handler was registered would otherwise be
// destroyed before it runs.
TableSchema BuildTableSchema(const char* name, size_t record_size, std::span<const Field> fields);
template <StoredTable T>
const TableSchema& SchemaOf() {
  static const TableSchema& schema =
      *new TableSchema(BuildTableSchema(TableTraits<T>::kName, sizeof(T), TableTraits<T>::kFields));
  return schema;
}

}  // namespace aon
