#include "aon/format/records.h"

#include <cstddef>
#include <mutex>
#include <unordered_map>

namespace aon {
namespace {

struct KindInfo {
  const char* name;
  KindScope scope;
};

constexpr std::array<KindInfo, kRecordKindCount> kKinds = [] {
  std::array<KindInfo, kRecordKindCount> out{};
  [&]<typename... Ts>(TypeList<Ts...>) {
    ((out[static_cast<size_t>(TableTraits<Ts>::kKind)] =
          KindInfo{TableTraits<Ts>::kName, TableTraits<Ts>::kScope}),
     ...);
  }(RecordTypes{});
  return out;
}();

constexpr bool TimelineKindsFirst() {
  for (size_t i = 0; i < kRecordKindCount; ++i) {
    if ((kKinds[i].scope == KindScope::kTimeline) != (i < kTimelineKindCount)) return false;
  }
  return true;
}
static_assert(TimelineKindsFirst(), "kTimelineKindCount: timeline kinds first, then the others");

}  // namespace

const char* FieldRoleName(FieldRole role) {
  switch (role) {
    case FieldRole::kStart:
      return "start time";
    case FieldRole::kEnd:
      return "end time";
    case FieldRole::kTime:
      return "time";
    case FieldRole::kStringId:
      return "string id";
    case FieldRole::kEnum:
      return "enum";
    case FieldRole::kFlags:
      return "flags";
    case FieldRole::kId:
      return "id";
    case FieldRole::kQuantity:
      return "quantity";
    case FieldRole::kPadding:
      return "padding";
  }
  return "unknown";
}

const char* EnumValueName(std::span<const EnumValue> values, int64_t value) {
  for (const EnumValue& v : values) {
    if (v.value == value) return v.name;
  }
  return nullptr;
}

const char* EnumValueName(const Field& field, int64_t value) {
  return EnumValueName(field.values, value);
}

std::array<std::string, 256> EnumLabels(std::span<const EnumValue> values, std::string_view prefix,
                                        std::string_view fallback) {
  std::array<std::string, 256> out;
  for (size_t i = 0; i < out.size(); ++i) {
    const char* name = EnumValueName(values, static_cast<int64_t>(i));
    out[i] = name != nullptr ? std::string(prefix) + name : std::string(fallback);
  }
  return out;
}

const char* RecordKindName(RecordKind kind) {
  auto i = static_cast<size_t>(kind);
  return i < kRecordKindCount ? kKinds[i].name : "unknown";
}

KindScope RecordKindScope(RecordKind kind) {
  auto i = static_cast<size_t>(kind);
  return i < kRecordKindCount ? kKinds[i].scope : KindScope::kRankFile;
}

bool ParseRecordKind(std::string_view name, RecordKind* kind) {
  for (size_t i = 0; i < kRecordKindCount; ++i) {
    if (name == kKinds[i].name) {
      *kind = static_cast<RecordKind>(i);
      return true;
    }
  }
  return false;
}

TableSchema BuildTableSchema(const char* name, size_t record_size, std::span<const Field> fields) {
  TableSchema s{name, record_size, {}};
  for (const Field& f : fields) {
    if (f.role != FieldRole::kPadding) s.fields.push_back(f);
  }
  return s;
}

const TableSchema& MergedSchema(const TableSchema& base) {
  // One merged schema per base schema, built once; the map only grows, and is
  // never destroyed (as SchemaOf's schemas).
  static std::mutex mu;
  static auto& cache = *new std::unordered_map<const TableSchema*, TableSchema>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(&base);
  if (it != cache.end()) return it->second;
  // Merged<T> places T at offset 8 for every T here (all have 8-byte alignment).
  constexpr size_t kRecordOffset = 8;
  TableSchema merged{base.name, base.record_size + kRecordOffset, {}};
  merged.fields.push_back(Field{"rank", 0, FieldType::kU32, FieldRole::kId, "rank of the record"});
  for (const Field& f : base.fields) {
    Field shifted = f;
    shifted.offset += kRecordOffset;
    merged.fields.push_back(shifted);
  }
  return cache.emplace(&base, std::move(merged)).first->second;
}

static_assert(offsetof(Merged<KernelRecord>, record) == 8);
static_assert(offsetof(Merged<ExternalCorrelationRecord>, record) == 8);
static_assert(offsetof(Merged<NcclRecord>, record) == 8);
static_assert(offsetof(Merged<NcclGraphRecord>, record) == 8);

}  // namespace aon
