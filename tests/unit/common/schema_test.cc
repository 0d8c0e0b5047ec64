// The field tables are the one description of every stored table
// (format/include/aon/format/schema.h): these tests make them complete and consistent,
// so that a field added to a struct without its entry, or with an entry whose
// role its type cannot have, fails here instead of being merged wrong.
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "aon/format/metadata_wire.h"
#include "aon/format/records.h"
#include "aon/format/trace_file.h"
#include "aon/format/trace_format.h"
#include "generated_doc.h"
#include "trace_test_util.h"

namespace aon {
namespace {

// Every byte of T belongs to exactly one field (padding included), so a member
// without an entry leaves bytes uncovered.
template <typename T>
void ExpectEveryByteCovered() {
  const char* name = TableTraits<T>::kName;
  std::vector<int> owners(sizeof(T), 0);
  for (const Field& f : TableTraits<T>::kFields) {
    ASSERT_LE(f.offset + f.size, sizeof(T)) << name << "." << f.name;
    for (size_t b = f.offset; b < f.offset + f.size; ++b) ++owners[b];
  }
  for (size_t b = 0; b < sizeof(T); ++b) {
    EXPECT_EQ(owners[b], 1) << name << ": byte " << b
                            << (owners[b] == 0 ? " belongs to no field: a member without an "
                                                 "entry in its table (records.h)?"
                                               : " belongs to two fields");
  }
}

// What each role allows.
template <typename T>
void ExpectRolesFitTypes() {
  const char* name = TableTraits<T>::kName;
  std::set<std::string> names;
  int starts = 0, ends = 0;
  for (const Field& f : TableTraits<T>::kFields) {
    EXPECT_TRUE(names.insert(f.name).second) << name << ": two fields named " << f.name;
    switch (f.role) {
      case FieldRole::kStart:
      case FieldRole::kEnd:
      case FieldRole::kTime:
        EXPECT_EQ(f.type, FieldType::kU64) << name << "." << f.name << ": times are u64 ns";
        break;
      case FieldRole::kStringId:
        EXPECT_EQ(f.type, FieldType::kU32) << name << "." << f.name << ": string ids are u32";
        break;
      case FieldRole::kPadding:
        EXPECT_EQ(f.type, FieldType::kPadding) << name << "." << f.name;
        break;
      default:
        EXPECT_NE(f.type, FieldType::kPadding) << name << "." << f.name << " has no role";
        break;
    }
    const bool named = f.role == FieldRole::kEnum || f.role == FieldRole::kFlags;
    if (f.role == FieldRole::kFlags) {
      EXPECT_FALSE(f.values.empty()) << name << "." << f.name;
    }
    if (!named) {
      EXPECT_TRUE(f.values.empty()) << name << "." << f.name << ": values of a non-enum";
    }
    if (f.role != FieldRole::kPadding) {
      EXPECT_NE(std::string(f.doc), "") << name << "." << f.name << " has no doc line";
    }
    starts += f.role == FieldRole::kStart;
    ends += f.role == FieldRole::kEnd;
  }
  EXPECT_LE(starts, 1) << name;
  EXPECT_LE(ends, starts) << name << ": an end time needs a start time";
}

void ForEachStoredTable(auto&& f) {
  ForEachRankFileRecordType(f);
  f(DeviceInfo{});
  f(RankSummary{});
}

TEST(Schema, EveryByteOfEveryStoredStructBelongsToOneField) {
  ForEachStoredTable([](auto tag) { ExpectEveryByteCovered<decltype(tag)>(); });
}

TEST(Schema, RolesFitTheirTypes) {
  ForEachStoredTable([](auto tag) { ExpectRolesFitTypes<decltype(tag)>(); });
}

// A field whose doc line names a value that means none or unknown carries it
// as its `none` (the reader's NA), and a `none` is said in its doc line: the
// two cannot drift apart as fields are added.
template <typename T>
void ExpectNoneValuesDeclared() {
  // The value, then within a few characters a word that says it stands for
  // nothing ("0 = outermost" is a value; "0: not known" is none).
  static const std::regex kSaysNone(
      R"((-1|\b0|UINT32_MAX|UINT64_MAX)\b[^,;)]{0,12}?\b(none|unknown|not|no|otherwise|unless)\b)");
  for (const Field& f : TableTraits<T>::kFields) {
    if (f.role == FieldRole::kPadding || f.role == FieldRole::kEnum || f.role == FieldRole::kFlags)
      continue;
    const std::string doc = f.doc;
    EXPECT_EQ(std::regex_search(doc, kSaysNone), f.has_none)
        << TableTraits<T>::kName << "." << f.name << ": \"" << doc << "\" "
        << (f.has_none ? "has a none value its doc line does not name"
                       : "names a none value: declare it (.None(v) in its table)");
  }
}

TEST(Schema, EveryNoneValueTheDocsNameIsDeclared) {
  ForEachStoredTable([](auto tag) { ExpectNoneValuesDeclared<decltype(tag)>(); });
}

TEST(Schema, KindNamesAndScopesComeFromTheTables) {
  ForEachRankFileRecordType([](auto tag) {
    using T = decltype(tag);
    const RecordKind kind = TableTraits<T>::kKind;
    EXPECT_STREQ(RecordKindName(kind), TableTraits<T>::kName);
    EXPECT_EQ(RecordKindScope(kind), TableTraits<T>::kScope);
    RecordKind parsed;
    ASSERT_TRUE(ParseRecordKind(TableTraits<T>::kName, &parsed));
    EXPECT_EQ(parsed, kind);
  });
  int timeline = 0;
  ForEachRecordType([&](auto) { ++timeline; });
  EXPECT_EQ(static_cast<size_t>(timeline), kTimelineKindCount);
  EXPECT_EQ(RecordKindScope(RecordKind::kNcclGraph), KindScope::kRankFile);
}

// The merge's remapping and clock shifting act on exactly the fields whose role
// says so: every byte of a random record outside them is left as it was.
template <typename T>
void ExpectOperationsFollowRoles(std::mt19937_64& rng) {
  const char* name = TableTraits<T>::kName;
  T r = testing::RandomRecord<T>(rng);
  const T before = r;
  std::set<size_t> visited;
  ForEachStringId(r, [&](uint32_t& id) {
    visited.insert(static_cast<size_t>(reinterpret_cast<char*>(&id) - reinterpret_cast<char*>(&r)));
    id = 0xfeedbeef;
  });
  ShiftTimes(r, [](uint64_t t) { return t ^ 0x5555; });
  for (const Field& f : TableTraits<T>::kFields) {
    if (f.role == FieldRole::kPadding) continue;
    const uint64_t was = testing::GetField(&before, f), now = testing::GetField(&r, f);
    switch (f.role) {
      case FieldRole::kStringId:
        EXPECT_EQ(visited.count(f.offset), 1u) << name << "." << f.name;
        EXPECT_EQ(now, 0xfeedbeefu) << name << "." << f.name;
        break;
      case FieldRole::kStart:
      case FieldRole::kEnd:
        EXPECT_EQ(now, was ^ 0x5555) << name << "." << f.name;
        break;
      case FieldRole::kTime:
        EXPECT_EQ(now, was == 0 ? 0 : was ^ 0x5555) << name << "." << f.name;
        break;
      default:
        EXPECT_EQ(now, was) << name << "." << f.name << " changed";
    }
  }
  EXPECT_EQ(visited.size(), CountFields<T>(FieldRole::kStringId)) << name;
  T zero_time = before;
  for (const Field& f : TableTraits<T>::kFields) {
    if (f.role == FieldRole::kTime) testing::SetField(&zero_time, f, 0);
  }
  ShiftTimes(zero_time, [](uint64_t t) { return t + 1; });
  for (const Field& f : TableTraits<T>::kFields) {
    if (f.role == FieldRole::kTime) {
      EXPECT_EQ(testing::GetField(&zero_time, f), 0u) << name << "." << f.name << ": 0 is none";
    }
  }
}

TEST(Schema, RemappingAndClockShiftTouchExactlyTheirRoles) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20; ++i) {
    ForEachStoredTable([&](auto tag) { ExpectOperationsFollowRoles<decltype(tag)>(rng); });
  }
}

TEST(Schema, DocumentedFieldTablesMatchTheCode) {
  const auto section = testing::GeneratedDocSection("trace-format.md", "aon-inspect --schema");
  ASSERT_TRUE(section.has_value());
  EXPECT_EQ(*section, FieldTablesMarkdown())
      << "docs/trace-format.md is out of date: run `bash scripts/regen-docs.sh`";
}

// ---- RankMetadata -------------------------------------------------------------

// A metadata whose every table field holds a value unlike its default.
RankMetadata Distinct() {
  RankMetadata m;
  int64_t n = 11;
  for (const MetaField& f : RankMetadataFields()) {
    std::visit(
        [&](auto member) {
          auto& v = m.*member;
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::string>) {
            v = std::string(f.name) + " value\twith \\ and\nnewline";
          } else if constexpr (std::is_same_v<V, bool>) {
            v = !v;
          } else if constexpr (std::is_same_v<V, double>) {
            v = 0.125 + static_cast<double>(n);
          } else {
            v = static_cast<V>(n);
          }
          ++n;
        },
        f.member);
  }
  m.notes = {"first note", "second"};
  m.dropped[0] = 3;
  m.dropped[static_cast<size_t>(RecordKind::kNcclGraph)] = 4;
  m.unwritten[0] = 2;  // of the 3 dropped (the collector's own: files only, not the wire)
  return m;
}

::testing::AssertionResult SameFields(const RankMetadata& a, const RankMetadata& b,
                                      bool unwritten = false) {
  for (const MetaField& f : RankMetadataFields()) {
    const bool same = std::visit([&](auto member) { return a.*member == b.*member; }, f.member);
    if (!same) return ::testing::AssertionFailure() << "field " << f.name << " differs";
  }
  if (a.notes != b.notes) return ::testing::AssertionFailure() << "notes differ";
  if (a.dropped != b.dropped) return ::testing::AssertionFailure() << "dropped differs";
  if (unwritten && a.unwritten != b.unwritten)
    return ::testing::AssertionFailure() << "unwritten differs";
  return ::testing::AssertionSuccess();
}

TEST(RankMetadataFields, NamesAreUniqueAndEveryFieldIsDocumented) {
  std::set<std::string> names;
  for (const MetaField& f : RankMetadataFields()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_NE(std::string(f.doc), "") << f.name;
    EXPECT_LE(f.since_minor, kFormatMinor) << f.name;
  }
  // The table lists RankMetadata's scalars; a member added to the struct changes
  // its size, and this line asks for its table entry (rank_metadata_fields.cc).
  // (696: the drop counters grew by one kind, counters, in 1.6; 704: ops, in 1.8;
  // 840: the unwritten counters, collector_lost_ns and capture_disabled, in 1.11;
  // 872: unwritten_why, in 1.12; 888: the drop and unwritten counters grew by one
  // kind, graph_ops, in 1.13; 904: and host_samples, in 1.15.)
  EXPECT_EQ(sizeof(RankMetadata), 904u) << "RankMetadata changed: is every scalar in its table?";
}

TEST(RankMetadataFields, EveryFieldSurvivesTheFileAndTheWire) {
  const RankMetadata m = Distinct();
  auto wire = DecodeRankMetadata(EncodeRankMetadata(m));
  ASSERT_TRUE(wire.ok()) << wire.status().ToString();
  EXPECT_TRUE(SameFields(m, *wire));

  testing::TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  {
    auto w = TraceWriter::Create(path, FileKind::kRank);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    AON_ASSERT_OK((*w)->WriteRankMetadata(m));
    AON_ASSERT_OK((*w)->Finish());
  }
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto back = (*r)->ReadRankMetadata();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(SameFields(m, *back, /*unwritten=*/true));
}

TEST(RankMetadataFields, AnIntegerOutOfItsRangeIsRefusedAndNamed) {
  testing::TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  {
    auto w = TraceWriter::Create(path, FileKind::kRank);
    ASSERT_TRUE(w.ok());
    AON_ASSERT_OK((*w)->WriteRankMetadata(testing::BasicMetadata(0, 1)));
    AON_ASSERT_OK((*w)->SetMetaAttribute("world_size", int64_t{(int64_t{1} << 32) + 2}));
    AON_ASSERT_OK((*w)->Finish());
  }
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok());
  auto back = (*r)->ReadRankMetadata();
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("'world_size'"), std::string::npos)
      << back.status().message();
  EXPECT_NE(back.status().message().find("rank-00000.h5"), std::string::npos)
      << back.status().message();
}

}  // namespace
}  // namespace aon
