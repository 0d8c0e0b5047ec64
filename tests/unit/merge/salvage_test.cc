// The merge on streamed rank files: salvage of a killed collector's .partial
// files, ranks whose process was killed (truncated metadata), metadata rewritten
// at every flush, and NCCL records resolved by the merge itself.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <type_traits>

#include "aon/merge/merge.h"
#include "aon/merge/nccl_resolve.h"
#include "merge_test_util.h"

namespace aon::merge {
namespace {

using testing::AnyProblemContains;
using testing::Contains;
using testing::Problems;
using testing::RankTrace;
using testing::TempDir;

MergeOptions Options(const TempDir& dir) {
  MergeOptions o;
  o.job_dir = dir.path();
  return o;
}

std::vector<RankSummary> RankRows(const std::string& timeline) {
  auto r = TraceReader::Open(timeline);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  auto rows = (*r)->ReadAllOf<RankSummary>(RankSummarySchema(), "meta");
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  return rows.ok() ? *rows : std::vector<RankSummary>{};
}

// Latest start/end of the trace's timed records.
uint64_t LastRecordNs(const RankTrace& t) {
  uint64_t last = 0;
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    if constexpr (!kJoinTable<T>) {
      for (const T& r : t.Get<T>()) {
        last = std::max(last, r.start_ns);
        if constexpr (requires { r.end_ns; }) last = std::max(last, r.end_ns);
      }
    }
  });
  return last;
}

// What a killed collector leaves: <final>.partial written and flushed, then the
// writing process dies by SIGKILL before Finish (or even closing the file).
void WriteKilledPartial(const std::string& final_path, const RankTrace& t) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto w = TraceWriter::Create(final_path, FileKind::kRank);
    if (!w.ok()) _exit(2);
    TraceWriter& writer = **w;
    RankMetadata early = t.meta;
    early.host = "a longer host name than the final one, written at the first flush";
    if (!writer.WriteRankMetadata(early).ok()) _exit(3);
    bool ok = true;
    ForEachRecordType([&](auto tag) {
      using T = decltype(tag);
      if (ok) ok = writer.Append<T>(std::span<const T>(t.Get<T>())).ok();
    });
    // Metadata again, as the collector does at every flush.
    if (!ok || !writer.WriteRankMetadata(t.meta).ok() || !writer.WriteStrings(t.strings).ok() ||
        !writer.Flush().ok()) {
      _exit(4);
    }
    raise(SIGKILL);
    _exit(5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "the writer failed before being killed: exit " << WEXITSTATUS(status);
  ASSERT_TRUE(std::filesystem::exists(final_path + ".partial"));
  ASSERT_FALSE(std::filesystem::exists(final_path));
}

TEST(MergeSalvage, PartialFileOfAKilledCollectorIsMergedAsTruncated) {
  TempDir dir;
  std::mt19937_64 rng(31);
  std::vector<RankTrace> traces = {testing::RandomRankTrace(rng, 0, 3, {}),
                                   testing::RandomRankTrace(rng, 1, 3, {})};
  testing::WriteJob(dir.path(), traces);
  testing::RandomTraceOptions fewer;
  fewer.max_records = 50;
  RankTrace r2 = testing::RandomRankTrace(rng, 2, 3, fewer);
  r2.Get<KernelRecord>().push_back(testing::MakeKernel(testing::kBaseNs + 777'777));
  const std::string partial = testing::RankPath(dir.path(), 2) + ".partial";
  WriteKilledPartial(testing::RankPath(dir.path(), 2), r2);

  MergeReport report;
  AON_ASSERT_OK(MergeJob(Options(dir), &report));
  EXPECT_EQ(report.world_size, 3u);
  EXPECT_EQ(report.ranks_ok(), 2u);
  const RankOutcome& o = report.ranks[2];
  EXPECT_EQ(o.status, RankStatus::kTruncated);
  EXPECT_EQ(o.path, partial);
  EXPECT_TRUE(Contains(o.message, partial)) << o.message;
  EXPECT_TRUE(Contains(o.message,
                       "collector stopped before finishing this rank; records up to "
                       "its last flush"))
      << o.message;
  const uint64_t last = LastRecordNs(r2);  // clock offset 0: the timeline clock
  EXPECT_TRUE(Contains(o.message, "last record at " + std::to_string(last) + " ns")) << o.message;
  EXPECT_TRUE(AnyProblemContains(report, partial, "last flush")) << Problems(report);

  uint64_t expected = 0;
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    expected += r2.Get<T>().size();
  });
  EXPECT_EQ(o.records, expected);
  EXPECT_EQ(o.host, r2.meta.host) << "the metadata of the last flush";

  const std::vector<RankSummary> rows = RankRows(report.timeline_path);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].status, static_cast<uint8_t>(RankStatus::kTruncated));
  EXPECT_EQ(rows[2].records, expected);
  EXPECT_EQ(rows[2].last_ns, last);
  auto timeline = TraceReader::Open(report.timeline_path);
  ASSERT_TRUE(timeline.ok());
  auto kernels = (*timeline)->ReadAllMerged<KernelRecord>();
  ASSERT_TRUE(kernels.ok());
  size_t from_partial = 0;
  for (const auto& k : *kernels) from_partial += k.rank == 2;
  EXPECT_EQ(from_partial, r2.Get<KernelRecord>().size());
}

TEST(MergeSalvage, APartialFileAloneIsMerged) {
  TempDir dir;
  std::mt19937_64 rng(32);
  RankTrace r0 = testing::RandomRankTrace(rng, 0, 1, {});
  WriteKilledPartial(testing::RankPath(dir.path(), 0), r0);
  MergeReport report;
  AON_ASSERT_OK(MergeJob(Options(dir), &report));
  ASSERT_EQ(report.world_size, 1u);
  EXPECT_EQ(report.ranks[0].status, RankStatus::kTruncated);
  EXPECT_EQ(report.ranks_ok(), 0u);
  EXPECT_TRUE(std::filesystem::exists(report.timeline_path));
}

TEST(MergeSalvage, FinalFileWinsOverPartial) {
  TempDir dir;
  std::mt19937_64 rng(33);
  std::vector<RankTrace> traces = {testing::RandomRankTrace(rng, 0, 2, {}),
                                   testing::RandomRankTrace(rng, 1, 2, {})};
  testing::WriteJob(dir.path(), traces);
  // A stale .partial of rank 1 next to its final file.
  TempDir other;
  RankTrace stale = testing::RandomRankTrace(rng, 1, 2, {});
  WriteKilledPartial(testing::RankPath(other.path(), 1), stale);
  const std::string partial = testing::RankPath(dir.path(), 1) + ".partial";
  std::filesystem::copy_file(testing::RankPath(other.path(), 1) + ".partial", partial);

  MergeReport report;
  AON_ASSERT_OK(MergeJob(Options(dir), &report));
  EXPECT_EQ(report.ranks_ok(), 2u);
  EXPECT_EQ(report.ranks[1].status, RankStatus::kOk);
  EXPECT_EQ(report.ranks[1].path, testing::RankPath(dir.path(), 1));
  uint64_t expected = 0;
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    expected += traces[1].Get<T>().size();
  });
  EXPECT_EQ(report.ranks[1].records, expected) << "records of the final file only";
  EXPECT_TRUE(AnyProblemContains(report, partial, "incomplete")) << Problems(report);
  EXPECT_TRUE(
      AnyProblemContains(report, partial, "merged from " + testing::RankPath(dir.path(), 1)))
      << Problems(report);
}

TEST(MergeSalvage, UnreadablePartialIsReportedAndTheRankMissing) {
  TempDir dir;
  std::mt19937_64 rng(34);
  std::vector<RankTrace> traces = {testing::RandomRankTrace(rng, 0, 3, {}),
                                   testing::RandomRankTrace(rng, 1, 3, {})};
  testing::WriteJob(dir.path(), traces);
  const std::string partial = testing::RankPath(dir.path(), 2) + ".partial";
  std::ofstream(partial) << "\x89HDF\r\n\x1a\n but nothing after the signature";
  MergeReport report;
  AON_ASSERT_OK(MergeJob(Options(dir), &report));
  EXPECT_EQ(report.world_size, 3u);
  EXPECT_EQ(report.ranks_ok(), 2u);
  EXPECT_EQ(report.ranks[2].status, RankStatus::kMissing);
  EXPECT_TRUE(Contains(report.ranks[2].message, "incomplete")) << report.ranks[2].message;
  EXPECT_TRUE(AnyProblemContains(report, partial, "incomplete")) << Problems(report);
  EXPECT_TRUE(AnyProblemContains(report, partial, "not salvageable")) << Problems(report);
}

TEST(MergeSalvage, TruncatedMetadataMarksTheRank) {
  TempDir dir;
  std::mt19937_64 rng(35);
  std::vector<RankTrace> traces = {testing::RandomRankTrace(rng, 0, 2, {}),
                                   testing::RandomRankTrace(rng, 1, 2, {})};
  traces[1].meta.truncated = 1;
  traces[1].meta.last_record_ns = 1'234'567'890'123;
  traces[1].meta.end_reason = "signal SIGKILL";
  testing::WriteJob(dir.path(), traces);
  MergeReport report;
  AON_ASSERT_OK(MergeJob(Options(dir), &report));
  EXPECT_EQ(report.ranks_ok(), 1u);
  const RankOutcome& o = report.ranks[1];
  EXPECT_EQ(o.status, RankStatus::kTruncated);
  EXPECT_EQ(o.path, testing::RankPath(dir.path(), 1));
  EXPECT_TRUE(Contains(o.message,
                       "process ended without finishing (killed?); trace ends at "
                       "1234567890123"))
      << o.message;
  uint64_t expected = 0;
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    expected += traces[1].Get<T>().size();
  });
  EXPECT_EQ(o.records, expected) << "merged normally";
  // The summary counts it as merged, and says it is truncated.
  const std::string summary = FormatMergeSummary(report);
  EXPECT_TRUE(Contains(summary, "merged 2 of 2 ranks (1 truncated)")) << summary;
  const std::vector<RankSummary> rows = RankRows(report.timeline_path);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].status, static_cast<uint8_t>(RankStatus::kTruncated));
  EXPECT_EQ(rows[0].status, static_cast<uint8_t>(RankStatus::kOk));
}

TEST(TraceWriterRewrite, MetadataWrittenTwiceKeepsTheSecondValues) {
  TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  RankMetadata first = testing::BasicMetadata(0, 1);
  first.host = "a-rather-long-host-name-first";
  first.devices = {DeviceInfo{0, 0, 0, 1, 1, 1, 1, 0, 0}, DeviceInfo{1, 0, 0, 1, 1, 1, 1, 0, 0}};
  RankMetadata second = testing::BasicMetadata(3, 8);
  second.host = "h2";
  second.truncated = 1;
  second.last_record_ns = 42;
  second.nccl_gpu_clock_pairs = 5;
  second.notes = {"one", "two"};
  second.devices = {DeviceInfo{7, 0, 0, 132, 2, 9, 0, 0, 0}};
  {
    auto w = TraceWriter::Create(path, FileKind::kRank);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    AON_ASSERT_OK((*w)->WriteRankMetadata(first));
    AON_ASSERT_OK((*w)->Flush());
    AON_ASSERT_OK((*w)->WriteRankMetadata(second));
    AON_ASSERT_OK((*w)->SetMetaAttribute("extra", int64_t{1}));
    AON_ASSERT_OK((*w)->SetMetaAttribute("extra", int64_t{2}));
    AON_ASSERT_OK((*w)->SetMetaAttribute("label", "first, long value"));
    AON_ASSERT_OK((*w)->SetMetaAttribute("label", "2nd"));
    AON_ASSERT_OK((*w)->SetMetaAttribute("kind_change", int64_t{7}));
    AON_ASSERT_OK((*w)->SetMetaAttribute("kind_change", "now a string"));
    AON_ASSERT_OK((*w)->WriteStrings(StringTable()));
    AON_ASSERT_OK((*w)->Finish());
    EXPECT_FALSE((*w)->Flush().ok()) << "nothing to flush after Finish";
  }
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto m = (*r)->ReadRankMetadata();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->rank, 3);
  EXPECT_EQ(m->world_size, 8);
  EXPECT_EQ(m->host, "h2");
  EXPECT_EQ(m->truncated, 1);
  EXPECT_EQ(m->last_record_ns, 42u);
  EXPECT_EQ(m->nccl_gpu_clock_pairs, 5);
  EXPECT_EQ(m->notes, second.notes);
  ASSERT_EQ(m->devices.size(), 1u) << "devices replaced, not appended";
  EXPECT_EQ(m->devices[0].device_id, 7u);
  EXPECT_EQ(*(*r)->GetMetaInt("extra"), 2);
  EXPECT_EQ(*(*r)->GetMetaString("label"), "2nd");
  EXPECT_EQ(*(*r)->GetMetaString("kind_change"), "now a string");
}

TEST(TraceWriterRewrite, OlderFilesReadWithoutTheNewFields) {
  TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  AON_ASSERT_OK(testing::WriteRankTrace(path, RankTrace{testing::BasicMetadata(0, 1), {}, {}}));
  // Remove the 1.2 attributes, as a 1.1 writer would have left the file.
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  ASSERT_GE(H5Adelete_by_name(f, "meta", "truncated", H5P_DEFAULT), 0);
  ASSERT_GE(H5Adelete_by_name(f, "meta", "last_record_ns", H5P_DEFAULT), 0);
  H5Fclose(f);
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok());
  auto m = (*r)->ReadRankMetadata();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->truncated, 0);
  EXPECT_EQ(m->last_record_ns, 0u);
}

// ---- NCCL resolution in the merge -----------------------------------------------------

TEST(MergeNccl, RawRecordsAreResolvedByTheMerge) {
  TempDir dir;
  RankTrace t{testing::BasicMetadata(0, 1), {}, {}};
  t.meta.clock_offset_ns = 1'000;  // the resolution happens before this correction
  t.meta.anchor_clock_ns = 5'000;
  t.meta.anchor_realtime_ns = 4'000;
  const uint32_t func = t.strings.Intern("AllReduce");
  const uint64_t base = testing::kBaseNs;
  KernelRecord k = testing::MakeKernel(base + 2'000, /*correlation=*/500);
  k.end_ns = base + 9'000;
  k.stream_id = 13;
  t.Get<KernelRecord>() = {testing::MakeKernel(base + 100, 499), k};
  ApiRecord launch{};
  launch.start_ns = base + 1'500;
  launch.end_ns = base + 1'600;
  launch.correlation_id = 500;
  t.Get<ApiRecord>() = {launch};
  t.Get<ExternalCorrelationRecord>() = {
      ExternalCorrelationRecord{77, 500, kNcclExternalCorrelationKind}};
  // As the collector streams it: no correlation, no GPU time yet.
  NcclRecord op{};
  op.start_ns = base + 1'000;
  op.end_ns = base + 1'200;
  op.external_id = 77;
  op.func_id = func;
  op.channel_id = op.root = op.peer = -1;
  op.event_type = static_cast<uint8_t>(NcclEventType::kColl);
  op.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kNone);
  // The same operation with channel timing (raw %globaltimer, 3'000'000 ahead).
  NcclRecord raw = op;
  raw.seq_number = 1;
  raw.gpu_start_ns = base + 3'002'000;
  raw.end_ns = base + 3'008'000;
  raw.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kRaw);
  t.Get<NcclRecord>() = {op, raw};
  AON_ASSERT_OK(testing::WriteRankTrace(testing::RankPath(dir.path(), 0), t));

  MergeReport report;
  AON_ASSERT_OK(MergeJob(Options(dir), &report));
  auto timeline = TraceReader::Open(report.timeline_path);
  ASSERT_TRUE(timeline.ok());
  auto nccl = (*timeline)->ReadAllMerged<NcclRecord>();
  ASSERT_TRUE(nccl.ok()) << nccl.status().ToString();
  ASSERT_EQ(nccl->size(), 2u);
  for (const Merged<NcclRecord>& m : *nccl) {
    SCOPED_TRACE(m.record.seq_number);
    EXPECT_EQ(m.record.correlation_id, 500u);
    EXPECT_EQ(m.record.stream_id, 13u);
    EXPECT_EQ(m.record.start_ns, base + 1'000 + 1'000);
    EXPECT_EQ(m.record.gpu_start_ns, base + 2'000 + 1'000) << "the kernel's start, clock-corrected";
  }
  const NcclRecord& kernel_timed =
      (*nccl)[0].record.seq_number == 0 ? (*nccl)[0].record : (*nccl)[1].record;
  const NcclRecord& channel_timed =
      (*nccl)[0].record.seq_number == 1 ? (*nccl)[0].record : (*nccl)[1].record;
  EXPECT_EQ(kernel_timed.gpu_timing, static_cast<uint8_t>(NcclGpuTiming::kKernel));
  EXPECT_EQ(kernel_timed.end_ns, base + 9'000 + 1'000);
  EXPECT_EQ(channel_timed.gpu_timing, static_cast<uint8_t>(NcclGpuTiming::kCalibrated));
  EXPECT_EQ(channel_timed.end_ns, base + 8'000 + 1'000);

  const std::vector<RankSummary> rows = RankRows(report.timeline_path);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].nccl_gpu_clock_offset_ns, -3'000'000);
  EXPECT_EQ(rows[0].nccl_gpu_clock_pairs, 1);
  EXPECT_EQ(rows[0].nccl_gpu_clock_spread_ns, 0);
  EXPECT_EQ(report.ranks[0].status, RankStatus::kOk);

  // The rank file itself is untouched: a second merge resolves it the same way.
  MergeReport again;
  MergeOptions o = Options(dir);
  o.timeline_path = dir.File("again.h5");
  AON_ASSERT_OK(MergeJob(o, &again));
  auto second = TraceReader::Open(again.timeline_path);
  ASSERT_TRUE(second.ok());
  auto nccl2 = (*second)->ReadAllMerged<NcclRecord>();
  ASSERT_TRUE(nccl2.ok());
  ASSERT_EQ(nccl2->size(), nccl->size());
  for (size_t i = 0; i < nccl->size(); ++i) {
    EXPECT_TRUE(testing::FieldsEqual(MergedSchemaOf<NcclRecord>(), &(*nccl)[i], &(*nccl2)[i]));
  }
}

TEST(MergeNccl, UncalibratedChannelTimesAreNoted) {
  TempDir dir;
  RankTrace t{testing::BasicMetadata(0, 1), {}, {}};
  t.meta.anchor_clock_ns = 2'000'000'000;
  t.meta.anchor_realtime_ns = 1'790'000'000'000'000'000;
  NcclRecord ch{};
  ch.start_ns = 1'790'000'000'000'001'000;
  ch.end_ns = 1'790'000'000'000'002'000;
  ch.event_type = static_cast<uint8_t>(NcclEventType::kKernelCh);
  ch.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kRaw);
  t.Get<NcclRecord>() = {ch};
  AON_ASSERT_OK(testing::WriteRankTrace(testing::RankPath(dir.path(), 0), t));
  MergeReport report;
  AON_ASSERT_OK(MergeJob(Options(dir), &report));
  EXPECT_TRUE(AnyProblemContains(report, "rank-00000.h5", "could not be calibrated"))
      << Problems(report);
  auto timeline = TraceReader::Open(report.timeline_path);
  ASSERT_TRUE(timeline.ok());
  auto nccl = (*timeline)->ReadAllMerged<NcclRecord>();
  ASSERT_TRUE(nccl.ok());
  ASSERT_EQ(nccl->size(), 1u);
  EXPECT_EQ((*nccl)[0].record.start_ns, 2'000'001'000u);
  EXPECT_EQ((*nccl)[0].record.gpu_timing, static_cast<uint8_t>(NcclGpuTiming::kAssumed));
}

}  // namespace
}  // namespace aon::merge
