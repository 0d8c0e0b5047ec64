// Every field of a record kind reaches the viewer exports: the fields a kind's exporter
// takes care of itself are named in HandledFieldNames (export/src/trace_builder.cc), and
// the others become arguments by their role. A name there that is not a field of its kind
// (a field renamed or removed in records.h) would silently hide the field it meant.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>

#include "aon/format/records.h"
#include "trace_builder.h"

namespace aon::merge {
namespace {

TEST(TraceFields, EveryHandledNameIsAFieldOfItsKind) {
  size_t kinds_with_exporters = 0;
  ForEachRecordType([&](auto record) {
    using T = decltype(record);
    std::set<std::string_view> fields;
    for (const Field& f : TableTraits<T>::kFields) fields.insert(f.name);
    const auto handled = HandledFieldNames(TableTraits<T>::kKind);
    if (!handled.empty()) ++kinds_with_exporters;
    std::set<std::string_view> seen;
    for (std::string_view name : handled) {
      EXPECT_TRUE(fields.count(name))
          << TableTraits<T>::kName << ": '" << name << "' is not one of its fields";
      EXPECT_TRUE(seen.insert(name).second) << TableTraits<T>::kName << ": '" << name << "' twice";
    }
  });
  // The lookup finds the exporters' lists (kernels have one).
  EXPECT_GT(kinds_with_exporters, 0u);
  EXPECT_FALSE(HandledFieldNames(RecordKind::kKernel).empty());
}

}  // namespace
}  // namespace aon::merge
