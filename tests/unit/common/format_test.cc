// Round trips of every record kind through a real HDF5 rank file (and, as
// Merged<T>, through a timeline), at several sizes, with random field values.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <span>
#include <string_view>
#include <vector>

#include "aon/format/records.h"
#include "aon/format/trace_file.h"
#include "trace_test_util.h"

namespace aon {
namespace {

using testing::FieldsEqual;
using testing::RandomRecord;
using testing::TempDir;

template <typename T>
class FormatRoundTrip : public ::testing::Test {};

using RecordTypes =
    ::testing::Types<KernelRecord, MemcpyRecord, MemsetRecord, SyncRecord, ApiRecord, NvtxRecord,
                     NcclRecord, ExternalCorrelationRecord, StepRecord, CounterRecord, OpRecord,
                     GraphOpRecord, HostSampleRecord, NcclGraphRecord>;
TYPED_TEST_SUITE(FormatRoundTrip, RecordTypes);

// Writes `records` in two appends (so the dataset is extended, not just created),
// reads them back and compares every stored field.
template <typename T>
void RoundTrip(const std::vector<T>& records, const WriteOptions& options) {
  TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  {
    auto writer = TraceWriter::Create(path, FileKind::kRank, options);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    const size_t half = records.size() / 2;
    std::span<const T> all(records);
    AON_ASSERT_OK((*writer)->Append<T>(all.subspan(0, half)));
    AON_ASSERT_OK((*writer)->Append<T>(all.subspan(half)));
    AON_ASSERT_OK((*writer)->Finish());
  }
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->kind(), FileKind::kRank);
  EXPECT_EQ((*reader)->format_major(), kFormatMajor);
  EXPECT_EQ((*reader)->format_minor(), kFormatMinor);
  auto size = (*reader)->TableSize(RecordTraits<T>::Schema());
  ASSERT_TRUE(size.ok()) << size.status().ToString();
  ASSERT_EQ(*size, records.size());
  auto back = (*reader)->template ReadAll<T>();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), records.size());
  const TableSchema& schema = RecordTraits<T>::Schema();
  for (size_t i = 0; i < records.size(); ++i) {
    ASSERT_TRUE(FieldsEqual(schema, &records[i], &(*back)[i])) << "record " << i;
  }
  // A range from the middle reads the same records.
  if (records.size() >= 10) {
    const uint64_t first = records.size() / 3, count = records.size() / 4;
    std::vector<T> part(count);
    AON_ASSERT_OK((*reader)->ReadTable(schema, first, count, part.data()));
    for (uint64_t i = 0; i < count; ++i) {
      ASSERT_TRUE(FieldsEqual(schema, &records[first + i], &part[i])) << "record " << first + i;
    }
    EXPECT_FALSE((*reader)->ReadTable(schema, records.size() - 1, 2, part.data()).ok())
        << "reading past the end must fail";
  }
  // Every other kind exists and is empty.
  ForEachRankFileRecordType([&](auto tag) {
    using U = decltype(tag);
    if constexpr (!std::is_same_v<U, T>) {
      auto n = (*reader)->TableSize(RecordTraits<U>::Schema());
      ASSERT_TRUE(n.ok()) << n.status().ToString();
      EXPECT_EQ(*n, 0u) << RecordKindName(RecordTraits<U>::kKind);
    }
  });
}

TYPED_TEST(FormatRoundTrip, EveryFieldSurvivesAtSeveralSizes) {
  using T = TypeParam;
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{100000}}) {
    SCOPED_TRACE("records: " + std::to_string(n));
    std::mt19937_64 rng(n * 131 + static_cast<size_t>(RecordTraits<T>::kKind));
    std::vector<T> records(n);
    for (T& r : records) r = RandomRecord<T>(rng);
    RoundTrip(records, WriteOptions{});
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TYPED_TEST(FormatRoundTrip, UncompressedAndSmallChunks) {
  using T = TypeParam;
  std::mt19937_64 rng(7);
  std::vector<T> records(1000);
  for (T& r : records) r = RandomRecord<T>(rng);
  WriteOptions options;
  options.deflate_level = 0;
  options.chunk_records = 7;  // not a divisor of anything above
  RoundTrip(records, options);
}

// Whole chunks are packed and compressed by AON (format/src/direct_chunk_io.h, "Direct chunk
// I/O"), rows that end a partly filled chunk by HDF5: appends of odd sizes mix
// both in one table. Every row must read back the same through AON's direct
// chunk reads and through HDF5's own pipeline and conversion (a schema whose
// fields are listed in another order is not read directly), compressed or not.
TYPED_TEST(FormatRoundTrip, DirectChunksAndHdf5sPipelineReadEachOther) {
  using T = TypeParam;
  const TableSchema& schema = RecordTraits<T>::Schema();
  TableSchema reordered = schema;
  std::reverse(reordered.fields.begin(), reordered.fields.end());
  std::mt19937_64 rng(13);
  std::vector<T> records(16 * 40 + 5);
  for (T& r : records) r = RandomRecord<T>(rng);
  // Levels, and threads that compress and inflate whole chunks (the last
  // append is 30 chunks: rounds of threads x 2 chunks, the last one short).
  for (auto [level, threads] : {std::pair{0, 1u}, {1, 1u}, {4, 1u}, {9, 1u}, {1, 3u}, {4, 4u}}) {
    SCOPED_TRACE("deflate level " + std::to_string(level) + ", " + std::to_string(threads) +
                 " threads");
    TempDir dir;
    const std::string path = dir.File("rank-00000.h5");
    {
      const WriteOptions options = {
          .deflate_level = level, .chunk_records = 16, .compress_threads = threads};
      StatusOr<std::unique_ptr<TraceWriter>> writer =
          TraceWriter::Create(path, FileKind::kRank, options);
      ASSERT_TRUE(writer.ok()) << writer.status().ToString();
      std::span<const T> all(records);
      size_t at = 0;
      for (size_t n : {size_t{5}, size_t{11}, size_t{16}, size_t{3}, size_t{40}, size_t{1},
                       size_t{35}, size_t{32}}) {
        AON_ASSERT_OK((*writer)->Append<T>(all.subspan(at, n)));
        at += n;
      }
      AON_ASSERT_OK((*writer)->Append<T>(all.subspan(at)));
      AON_ASSERT_OK((*writer)->Finish());
    }
    auto reader = TraceReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    (*reader)->SetDecodeThreads(threads);
    for (const TableSchema* s : {&schema, static_cast<const TableSchema*>(&reordered)}) {
      SCOPED_TRACE(s == &schema ? "direct chunk reads" : "HDF5's pipeline");
      for (auto [first, count] :
           {std::pair<size_t, size_t>{0, records.size()}, {7, 50}, {32, 16}, {100, 400}}) {
        std::vector<T> back(count);
        AON_ASSERT_OK((*reader)->ReadTable(*s, first, count, back.data()));
        for (size_t i = 0; i < count; ++i) {
          ASSERT_TRUE(FieldsEqual(schema, &records[first + i], &back[i])) << "record " << first + i;
        }
      }
    }
  }
}

TYPED_TEST(FormatRoundTrip, MergedRecordsInATimeline) {
  using T = TypeParam;
  std::mt19937_64 rng(11);
  std::vector<Merged<T>> records(1000);
  for (Merged<T>& m : records) {
    m = Merged<T>{};
    m.rank = static_cast<uint32_t>(rng() % 1024);
    m.record = RandomRecord<T>(rng);
  }
  TempDir dir;
  const std::string path = dir.File("timeline.h5");
  {
    auto writer = TraceWriter::Create(path, FileKind::kTimeline);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    AON_ASSERT_OK((*writer)->template AppendMerged<T>(std::span<const Merged<T>>(records)));
    AON_ASSERT_OK((*writer)->Finish());
  }
  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->kind(), FileKind::kTimeline);
  auto back = (*reader)->template ReadAllMerged<T>();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    ASSERT_TRUE(FieldsEqual(MergedSchemaOf<T>(), &records[i], &(*back)[i])) << "record " << i;
  }
}

TEST(FormatSchema, MergedSchemaPrefixesRankAndKeepsEveryField) {
  ForEachRecordType([](auto tag) {
    using T = decltype(tag);
    const TableSchema& base = RecordTraits<T>::Schema();
    const TableSchema& merged = MergedSchemaOf<T>();
    EXPECT_EQ(merged.name, base.name);
    EXPECT_EQ(merged.record_size, sizeof(Merged<T>));
    ASSERT_EQ(merged.fields.size(), base.fields.size() + 1);
    EXPECT_STREQ(merged.fields[0].name, "rank");
    EXPECT_EQ(merged.fields[0].offset, offsetof(Merged<T>, rank));
    for (size_t i = 0; i < base.fields.size(); ++i) {
      EXPECT_STREQ(merged.fields[i + 1].name, base.fields[i].name);
      EXPECT_EQ(merged.fields[i + 1].offset, base.fields[i].offset + offsetof(Merged<T>, record));
    }
    EXPECT_EQ(&MergedSchema(base), &merged) << "one merged schema per base schema";
  });
}

TEST(FormatSchema, FieldsLieInsideTheirRecord) {
  ForEachRecordType([](auto tag) {
    using T = decltype(tag);
    const TableSchema& s = RecordTraits<T>::Schema();
    EXPECT_EQ(s.record_size, sizeof(T));
    EXPECT_EQ(s.name, RecordKindName(RecordTraits<T>::kKind));
    std::set<std::string_view> names;
    for (const Field& f : s.fields) {
      EXPECT_LE(f.offset + testing::FieldSize(f.type), sizeof(T)) << s.name << "." << f.name;
      EXPECT_TRUE(names.insert(f.name).second) << s.name << "." << f.name << " is named twice";
    }
  });
}

TEST(FormatSchema, RecordKindNamesRoundTrip) {
  for (size_t i = 0; i < kRecordKindCount; ++i) {
    const auto kind = static_cast<RecordKind>(i);
    RecordKind parsed = RecordKind::kCount;
    ASSERT_TRUE(ParseRecordKind(RecordKindName(kind), &parsed)) << RecordKindName(kind);
    EXPECT_EQ(parsed, kind);
  }
  RecordKind parsed = RecordKind::kKernel;
  EXPECT_FALSE(ParseRecordKind("kernel", &parsed));  // the alias lives in ParseKinds only
  EXPECT_FALSE(ParseRecordKind("", &parsed));
  EXPECT_STREQ(RecordKindName(RecordKind::kCount), "unknown");
}

}  // namespace
}  // namespace aon
