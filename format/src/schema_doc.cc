// docs/trace-format.md's field tables, generated from the tables in records.h
// and trace_format.h (aon-inspect --schema prints them; tests/unit/common/
// schema_test.cc fails when the document and the code disagree).
#include <string>
#include <variant>

#include "aon/format/records.h"
#include "aon/format/trace_format.h"

namespace aon {
namespace {

const char* TypeName(FieldType t) {
  switch (t) {
    case FieldType::kU8:
      return "u8";
    case FieldType::kU16:
      return "u16";
    case FieldType::kU32:
      return "u32";
    case FieldType::kI32:
      return "i32";
    case FieldType::kU64:
      return "u64";
    case FieldType::kI64:
      return "i64";
    case FieldType::kF64:
      return "f64";
    case FieldType::kPadding:
      return "-";
  }
  return "?";
}

// The field's "none" value as a number ("" when it has none): unsigned types
// as unsigned, the others as signed.
std::string NoneText(const Field& f) {
  if (!f.has_none) return "";
  switch (f.type) {
    case FieldType::kU8:
    case FieldType::kU16:
    case FieldType::kU32:
    case FieldType::kU64:
      return std::to_string(f.none_bits);
    default:
      return std::to_string(static_cast<int64_t>(f.none_bits));
  }
}

// '|' would end a Markdown table cell.
std::string Cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

void Table(std::string& out, const char* name, const char* doc, std::span<const Field> fields) {
  out += "#### `";
  out += name;
  out += "`\n\n";
  out += Cell(doc);
  out += ".\n\n| field | type | role | none | meaning |\n|---|---|---|---|---|\n";
  for (const Field& f : fields) {
    if (f.role == FieldRole::kPadding) continue;
    out += "| ";
    out += f.name;
    out += " | ";
    out += TypeName(f.type);
    out += " | ";
    out += FieldRoleName(f.role);
    out += " | ";
    out += NoneText(f);
    out += " | ";
    out += Cell(f.doc);
    if (!f.values.empty()) {
      out += ": ";
      bool first = true;
      for (const EnumValue& v : f.values) {
        if (!first) out += ", ";
        first = false;
        out += std::to_string(v.value) + " " + Cell(v.name);
      }
    }
    out += " |\n";
  }
  out += "\n";
}

template <typename T>
void TableOf(std::string& out) {
  Table(out, TableTraits<T>::kName, TableTraits<T>::kDoc, TableTraits<T>::kFields);
}

}  // namespace

std::string FieldTablesMarkdown() {
  std::string out;
  out += "### Record tables (`/records/<kind>`)\n\n";
  ForEachRankFileRecordType([&](auto tag) { TableOf<decltype(tag)>(out); });
  out += "### `/meta/devices`, `/meta/ranks` and `/meta/drops`\n\n";
  TableOf<DeviceInfo>(out);
  TableOf<RankSummary>(out);
  TableOf<RankDrops>(out);
  out += "### Rank metadata (`/meta` attributes of a rank file)\n\n";
  out += "| attribute | type | since | meaning |\n|---|---|---|---|\n";
  for (const MetaField& f : RankMetadataFields()) {
    const char* type = std::visit(
        [](auto member) {
          using V = std::decay_t<decltype(RankMetadata{}.*member)>;
          if constexpr (std::is_same_v<V, std::string>)
            return "string";
          else if constexpr (std::is_same_v<V, double>)
            return "f64";
          else if constexpr (std::is_same_v<V, uint64_t>)
            return "u64";
          else if constexpr (std::is_same_v<V, bool>)
            return "i64 (0/1)";
          else
            return "i64";
        },
        f.member);
    out += "| " + std::string(f.name) + " | " + type + " | 1." + std::to_string(f.since_minor) +
           " | " + Cell(f.doc) + " |\n";
  }
  out +=
      "| dropped_<kind> | u64 | 1.0 | records of that kind dropped (memory cap, file already "
      "written) |\n";
  out +=
      "| unwritten_<kind> | u64 | 1.11 | of dropped_<kind>, the records the collector received "
      "but could not write (disk full, I/O error) |\n";
  out += "| notes | string | 1.0 | newline-separated degradations, each once |\n";
  return out;
}

}  // namespace aon
