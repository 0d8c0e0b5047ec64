// The messages merge processes exchange (merge/src/messages.h): every field of
// every message survives Pack + Unpack; a short, long or garbled message fails
// to unpack, naming the message, without reading past its input or allocating
// what its counts claim; the typed collectives name a garbled sender.
#include "messages.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "aon/format/metadata_wire.h"
#include "exchange.h"
#include "merge_test_util.h"

namespace aon::merge {
namespace {

using testing::Contains;

// ---- Examples with every field set (distinct values) ----------------------------------

RankMetadata FullMetadata() {
  RankMetadata m = testing::BasicMetadata(3, 8);
  m.clock_offset_ns = -123456;
  m.clock_error_bound_ns = 789;
  m.clock_synchronized = true;
  m.clock_leader_rank = 2;
  m.clock_id = "boot-1/timens:42";
  m.dropped[0] = 5;
  m.dropped[kRecordKindCount - 1] = 6;
  m.notes = {"CUPTI unavailable: busy", "second note\nwith a newline"};
  m.nccl_gpu_clock_offset_ns = -17;
  m.nccl_gpu_clock_pairs = 12;
  m.nccl_gpu_clock_spread_ns = 300;
  m.truncated = true;
  m.last_record_ns = 1'500'000'000;
  m.devices = {DeviceInfo{0, 4, 5, 132, 150ull << 30, 9, 0, 5, 16},
               DeviceInfo{1, 6, 5, 132, 150ull << 30, 9, 0, 5, 16}};
  return m;
}

OpenResult FullOpenResult() {
  OpenResult f;
  f.status = RankStatus::kTruncated;
  f.reason = "/job/rank-00003.h5: truncated";
  f.meta_read = true;
  f.meta = FullMetadata();
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    f.has_table[k] = k % 2 == 0;
    f.table_rows[k] = 1000 * k + 7;
  }
  f.open_problems = {"/job/rank-00003.h5: has no /records/sync table; merged as empty", ""};
  f.damage = "/job/rank-00003.h5: the finished file has no /records table";
  return f;
}

StatusMessage FullStatusMessage() {
  return {StatusCode::kIoError, "disk full: /out/shard-00001.h5"};
}

ScanList FullScanList() {
  return {true,
          {{"/job/rank-00000.h5", 12345}, {"/job/rank-00001.h5", 0}},
          {{"/job/rank-00002.h5.partial", UINT64_MAX}},
          {"/job/rank-00003.h5: joined"},
          {"/job/rank-00004.pid9.h5: not joined", ""}};
}

CandidateSummaries FullCandidateSummaries() {
  CandidateSummaries m;
  m.opened.push_back({4, FullOpenResult()});
  CandidateSummary unreadable;
  unreadable.index = 9;
  unreadable.found.status = RankStatus::kCorrupt;
  unreadable.found.reason = "not an HDF5 file";
  m.opened.push_back(unreadable);
  return m;
}

StringUnion FullStringUnion() { return {{"", "void gemm<float>(float const*)", "\xff\xfe", "x"}}; }

StartSamples FullStartSamples() { return {{0, 1, 431337000000000, UINT64_MAX}}; }

ProcessOutcome FullProcessOutcome() {
  ProcessOutcome m;
  m.status = FullStatusMessage();
  for (size_t k = 0; k < kRecordKindCount; ++k) m.written[k] = 11 * k + 1;
  RankResult a;
  a.rank = 5;
  a.records = 99;
  a.first_ns = 1000;
  a.last_ns = 2000;
  a.bad_string_ids = 3;
  for (size_t k = 0; k < kRecordKindCount; ++k) a.damaged[k] = 5 * k + 2;
  a.status = RankStatus::kCorrupt;
  a.message = "read failed";
  a.nccl_gpu_clock_offset_ns = -40;
  a.nccl_gpu_clock_pairs = 8;
  a.nccl_gpu_clock_spread_ns = 25;
  a.notes = {"note"};
  a.problems = {"p1", "p2"};
  a.devices = {DeviceInfo{0, 10, 11, 132, 1ull << 40, 9, 0, 0, 0}};
  m.ranks.push_back(a);
  RankResult empty;  // defaults: no timed record, no devices
  empty.rank = 6;
  m.ranks.push_back(empty);
  return m;
}

// ---- Field-wise comparison --------------------------------------------------------------

void ExpectSame(const StatusMessage& a, const StatusMessage& b) {
  EXPECT_EQ(a.code, b.code);
  EXPECT_EQ(a.message, b.message);
}

void ExpectSame(const std::vector<ListedFile>& a, const std::vector<ListedFile>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].path, b[i].path);
    EXPECT_EQ(a[i].bytes, b[i].bytes);
  }
}

void ExpectSame(const ScanList& a, const ScanList& b) {
  EXPECT_EQ(a.listed, b.listed);
  ExpectSame(a.finals, b.finals);
  ExpectSame(a.partials, b.partials);
  EXPECT_EQ(a.joined, b.joined);
  EXPECT_EQ(a.join_problems, b.join_problems);
}

void ExpectSame(const OpenResult& a, const OpenResult& b) {
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.reason, b.reason);
  EXPECT_EQ(a.meta_read, b.meta_read);
  if (a.meta_read) {
    EXPECT_EQ(EncodeRankMetadata(a.meta), EncodeRankMetadata(b.meta));
  }
  EXPECT_EQ(a.has_table, b.has_table);
  EXPECT_EQ(a.table_rows, b.table_rows);
  EXPECT_EQ(a.open_problems, b.open_problems);
  EXPECT_EQ(a.damage, b.damage);
}

void ExpectSame(const CandidateSummaries& a, const CandidateSummaries& b) {
  ASSERT_EQ(a.opened.size(), b.opened.size());
  for (size_t i = 0; i < a.opened.size(); ++i) {
    EXPECT_EQ(a.opened[i].index, b.opened[i].index);
    ExpectSame(a.opened[i].found, b.opened[i].found);
  }
}

void ExpectSame(const StringUnion& a, const StringUnion& b) { EXPECT_EQ(a.strings, b.strings); }

void ExpectSame(const StartSamples& a, const StartSamples& b) { EXPECT_EQ(a.starts, b.starts); }

void ExpectSame(const RowCount& a, const RowCount& b) { EXPECT_EQ(a.rows, b.rows); }

void ExpectSame(const ProcessOutcome& a, const ProcessOutcome& b) {
  ExpectSame(a.status, b.status);
  EXPECT_EQ(a.written, b.written);
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    const RankResult& x = a.ranks[i];
    const RankResult& y = b.ranks[i];
    EXPECT_EQ(x.rank, y.rank);
    EXPECT_EQ(x.records, y.records);
    EXPECT_EQ(x.first_ns, y.first_ns);
    EXPECT_EQ(x.last_ns, y.last_ns);
    EXPECT_EQ(x.bad_string_ids, y.bad_string_ids);
    EXPECT_EQ(x.damaged, y.damaged);
    EXPECT_EQ(x.status, y.status);
    EXPECT_EQ(x.message, y.message);
    EXPECT_EQ(x.nccl_gpu_clock_offset_ns, y.nccl_gpu_clock_offset_ns);
    EXPECT_EQ(x.nccl_gpu_clock_pairs, y.nccl_gpu_clock_pairs);
    EXPECT_EQ(x.nccl_gpu_clock_spread_ns, y.nccl_gpu_clock_spread_ns);
    EXPECT_EQ(x.notes, y.notes);
    EXPECT_EQ(x.problems, y.problems);
    ASSERT_EQ(x.devices.size(), y.devices.size());
    for (size_t d = 0; d < x.devices.size(); ++d) {
      EXPECT_EQ(std::memcmp(&x.devices[d], &y.devices[d], sizeof(DeviceInfo)), 0);
    }
  }
}

// ---- The checks every byte message gets ------------------------------------------------

// Unpacks from an exactly sized heap copy, so that a read past the end is a
// read past an allocation (found by valgrind or a sanitizer, not only by luck).
template <typename M>
Status UnpackCopy(std::string_view bytes, M* m) {
  const std::string copy(bytes);
  return Unpack(copy, m);
}

template <typename M>
void CheckMessage(const M& original, const char* name) {
  SCOPED_TRACE(name);
  const std::string bytes = Pack(original);
  M back;
  AON_ASSERT_OK(UnpackCopy(bytes, &back));
  ExpectSame(original, back);
  EXPECT_EQ(Pack(back), bytes) << "packing is deterministic";

  // Every strict prefix is short: it fails, naming the message.
  for (size_t n = 0; n < bytes.size(); ++n) {
    M m;
    Status s = UnpackCopy(std::string_view(bytes).substr(0, n), &m);
    ASSERT_FALSE(s.ok()) << "a prefix of " << n << " of " << bytes.size() << " bytes unpacked";
    EXPECT_EQ(s.code(), StatusCode::kInternal);
    EXPECT_TRUE(Contains(s.message(), name)) << s.message();
  }
  // A byte too many.
  {
    M m;
    Status s = UnpackCopy(bytes + "x", &m);
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(Contains(s.message(), "left over")) << s.message();
  }
  // Every 8-byte word set to a huge count, or to all ones: fails or unpacks
  // something, never reads out of bounds or allocates what the count claims.
  for (size_t at = 0; at + 8 <= bytes.size(); at += 8) {
    for (uint64_t v : {~uint64_t{0}, uint64_t{1} << 60, uint64_t{0x7fffffff}}) {
      std::string garbled = bytes;
      std::memcpy(garbled.data() + at, &v, sizeof(v));
      M m;
      (void)UnpackCopy(garbled, &m);
    }
  }
  // Random byte damage and random lengths: never a crash.
  std::mt19937_64 rng(bytes.size());
  for (int i = 0; i < 500; ++i) {
    std::string garbled = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips && !garbled.empty(); ++f) {
      garbled[rng() % garbled.size()] = static_cast<char>(rng());
    }
    if (rng() % 4 == 0) garbled.resize(rng() % (garbled.size() + 1));
    M m;
    (void)UnpackCopy(garbled, &m);
  }
}

TEST(MergeMessages, StatusMessageRoundTripsAndRejectsGarbage) {
  CheckMessage(FullStatusMessage(), "status message");
  CheckMessage(StatusMessage{}, "status message");
  // A status code past the last one is malformed.
  std::string bytes = Pack(FullStatusMessage());
  const uint64_t bad = static_cast<uint64_t>(StatusCode::kInternal) + 1;
  std::memcpy(bytes.data(), &bad, sizeof(bad));
  StatusMessage m;
  EXPECT_FALSE(Unpack(bytes, &m).ok());
}

TEST(MergeMessages, ScanListRoundTripsAndRejectsGarbage) {
  CheckMessage(FullScanList(), "scan list");
  CheckMessage(ScanList{}, "scan list");
  // "listed" is 0 or 1, nothing else.
  std::string bytes = Pack(FullScanList());
  const uint64_t two = 2;
  std::memcpy(bytes.data(), &two, sizeof(two));
  ScanList m;
  EXPECT_FALSE(Unpack(bytes, &m).ok());
}

TEST(MergeMessages, CandidateSummariesRoundTripAndRejectGarbage) {
  CheckMessage(FullCandidateSummaries(), "candidate summaries");
  CheckMessage(CandidateSummaries{}, "candidate summaries");
  // A rank status past the last one is malformed.
  std::string bytes = Pack(FullCandidateSummaries());
  const uint64_t bad = static_cast<uint64_t>(RankStatus::kDamaged) + 1;
  std::memcpy(bytes.data() + 16, &bad, sizeof(bad));  // count, index, then the status
  CandidateSummaries m;
  EXPECT_FALSE(Unpack(bytes, &m).ok());
}

TEST(MergeMessages, CandidateMetadataThatDoesNotDecodeIsAnError) {
  // A well-formed message whose metadata text is not RankMetadata's wire format.
  CandidateSummaries one;
  one.opened.push_back({2, FullOpenResult()});
  const std::string good = Pack(one);
  const std::string encoded = EncodeRankMetadata(one.opened[0].found.meta);
  const size_t at = good.find(encoded);
  ASSERT_NE(at, std::string::npos);
  std::string bad = good;
  bad.replace(at, encoded.size(), std::string(encoded.size(), '\n').replace(0, 5, "rank="));
  CandidateSummaries m;
  Status s = Unpack(bad, &m);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), "candidate 2")) << s.message();
}

TEST(MergeMessages, StringUnionRoundTripsAndRejectsGarbage) {
  CheckMessage(FullStringUnion(), "string union");
  CheckMessage(StringUnion{}, "string union");
}

// An opener's string table goes over without a StringUnion copy: the same
// bytes from a span, interned into a table as read; a short message fails,
// naming it.
TEST(MergeMessages, StringsPackFromASpanAndUnpackIntoATable) {
  const StringUnion full = FullStringUnion();
  const std::string bytes = Pack(full);
  EXPECT_EQ(PackStrings(full.strings), bytes);
  StringTable table;
  AON_ASSERT_OK(UnpackInto(bytes, &table));
  std::vector<std::string> back(table.strings().begin(), table.strings().end());
  EXPECT_EQ(back, full.strings) << "\"\" first: id 0, then the others in order";
  StringTable tail;
  AON_ASSERT_OK(UnpackInto(PackStrings(std::span(full.strings).subspan(2)), &tail));
  ASSERT_EQ(tail.strings().size(), full.strings.size() - 1);
  EXPECT_EQ(tail.strings()[1], full.strings[2]);
  for (size_t n = 0; n < bytes.size(); ++n) {
    StringTable t;
    const Status s = UnpackInto(std::string_view(bytes).substr(0, n), &t);
    ASSERT_FALSE(s.ok()) << n;
    EXPECT_TRUE(Contains(s.message(), "string union")) << s.message();
  }
  StringTable t;
  EXPECT_FALSE(UnpackInto(bytes + "x", &t).ok());
}

TEST(MergeMessages, RowCountRoundTripsAndRejectsGarbage) {
  CheckMessage(RowCount{1234567890123}, "row count");
}

TEST(MergeMessages, StartSamplesRoundTripAndRejectGarbage) {
  CheckMessage(FullStartSamples(), "start samples");
  CheckMessage(StartSamples{}, "start samples");
  // A count the rest of the message cannot hold is refused before allocating.
  std::string bytes = Pack(FullStartSamples());
  const uint64_t huge = uint64_t{1} << 61;
  std::memcpy(bytes.data(), &huge, sizeof(huge));
  StartSamples m;
  EXPECT_FALSE(Unpack(bytes, &m).ok());
  EXPECT_TRUE(m.starts.empty());
}

TEST(MergeMessages, ProcessOutcomeRoundTripsAndRejectsGarbage) {
  CheckMessage(FullProcessOutcome(), "process outcome");
  CheckMessage(ProcessOutcome{}, "process outcome");
}

template <typename T>
void CheckSlab(uint64_t seed) {
  SCOPED_TRACE(RecordKindName(RecordTraits<T>::kKind));
  std::mt19937_64 rng(seed);
  RecordSlab<T> slab;
  for (uint32_t i = 0; i < 50; ++i) {
    slab.records.push_back(Merged<T>{i % 7, 0, testing::RandomRecord<T>(rng)});
  }
  std::vector<uint64_t> words = {42};  // Pack appends
  Pack(slab, &words);
  ASSERT_EQ(words.size(), 1 + 50 * RecordSlab<T>::kWords);
  EXPECT_EQ(words[0], 42u);
  RecordSlab<T> back;
  AON_ASSERT_OK(Unpack<T>(std::span<const uint64_t>(words).subspan(1), &back));
  ASSERT_EQ(back.records.size(), slab.records.size());
  EXPECT_EQ(std::memcmp(back.records.data(), slab.records.data(),
                        slab.records.size() * sizeof(Merged<T>)),
            0);
  // Two slabs received back to back are one slab.
  Pack(slab, &words);
  AON_ASSERT_OK(Unpack<T>(std::span<const uint64_t>(words).subspan(1), &back));
  EXPECT_EQ(back.records.size(), 100u);
  // Empty.
  AON_ASSERT_OK(Unpack<T>({}, &back));
  EXPECT_TRUE(back.records.empty());
  // Every length that is not a whole number of records fails, naming the kind.
  const std::vector<uint64_t> one_and_a_bit(RecordSlab<T>::kWords + 1, 0);
  for (size_t n = 1; n < one_and_a_bit.size(); ++n) {
    if (n % RecordSlab<T>::kWords == 0) continue;
    Status s = Unpack<T>(std::span<const uint64_t>(one_and_a_bit).first(n), &back);
    ASSERT_FALSE(s.ok()) << n << " words";
    EXPECT_TRUE(Contains(s.message(), RecordKindName(RecordTraits<T>::kKind))) << s.message();
  }
}

TEST(MergeMessages, RecordSlabsRoundTripForEveryKind) {
  uint64_t seed = 1;
  ForEachRecordType([&](auto tag) { CheckSlab<decltype(tag)>(seed++); });
}

// ---- The typed collectives ---------------------------------------------------------------

// Two processes seen from process 0: process 1's bytes are whatever the test says.
class FakeComm final : public MergeComm {
 public:
  explicit FakeComm(std::string other) : other_(std::move(other)) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::vector<std::string> Allgather(std::string_view mine) override {
    return {std::string(mine), other_};
  }
  std::vector<uint64_t> Alltoall(std::span<const uint64_t>, std::span<const uint64_t>,
                                 std::vector<uint64_t>*) override {
    ADD_FAILURE() << "not used";
    return {};
  }

 private:
  std::string other_;
};

TEST(MergeExchange, AllgatherUnpacksEveryProcessAndNamesAGarbledSender) {
  FakeComm fine(Pack(RowCount{5}));
  auto all = AllgatherMessage(fine, RowCount{3});
  AON_ASSERT_OK(all.status());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].rows, 3u);
  EXPECT_EQ((*all)[1].rows, 5u);

  FakeComm garbled(Pack(RowCount{5}).substr(0, 5));
  auto bad = AllgatherMessage(garbled, RowCount{3});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
  EXPECT_TRUE(Contains(bad.status().message(), "merge process 1")) << bad.status().message();
  EXPECT_TRUE(Contains(bad.status().message(), "row count")) << bad.status().message();
}

TEST(MergeExchange, TheFirstFailureWinsNamedByItsProcess) {
  const StatusMessage ok;
  const StatusMessage disk{StatusCode::kIoError, "disk full"};
  const StatusMessage gone{StatusCode::kUnavailable, "no shard directory"};
  EXPECT_TRUE(FirstFailure({ok, ok, ok}, 1).ok());
  Status s = FirstFailure({ok, disk, gone}, 0);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.message(), "merge process 1: disk full");
  s = FirstFailure({ok, disk, gone}, 1);  // its own failure is not prefixed
  EXPECT_EQ(s.message(), "disk full");

  FakeComm other_failed(Pack(gone));
  s = Agree(other_failed, Status::Ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "merge process 1: no shard directory");
  s = Agree(other_failed, IoError("mine first"));
  EXPECT_EQ(s.message(), "mine first");
}

}  // namespace
}  // namespace aon::merge
