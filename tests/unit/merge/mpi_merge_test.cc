// aon-merge as several processes under real mpirun (-np 1..4): the sharded
// timeline must equal the straightforward reference merge record for record
// (random jobs: empty ranks, equal start times, clock offsets; tiny memory
// budgets force many sort rounds), bad input must be named exactly as one
// process names it, and re-running must replace everything cleanly.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "merge_test_util.h"

namespace aon::merge {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::RankTrace;
using testing::RunCommand;
using testing::TempDir;

const std::string kMerge = AON_BUILD_BIN_DIR "/aon-merge";

std::string Mpirun(int procs) {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
         "mpirun -np " + std::to_string(procs) + " ";
}

CommandResult MergeWith(const TempDir& dir, int procs, const std::string& args) {
  return RunCommand(dir, Mpirun(procs) + kMerge + " " + args);
}

struct Case {
  int ranks;
  size_t max_records;
  bool offsets;
  int empty_every;
  int procs;
  const char* memory_mb;
  uint64_t seed;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.ranks << " ranks, <= " << c.max_records << " records/kind, np " << c.procs
      << ", --memory-mb " << c.memory_mb << ", seed " << c.seed;
}

class MpiMerge : public ::testing::TestWithParam<Case> {};

TEST_P(MpiMerge, ShardedTimelineMatchesTheReference) {
  const Case& c = GetParam();
  TempDir dir;
  std::mt19937_64 rng(c.seed);
  std::vector<RankTrace> traces =
      testing::RandomJob(rng, c.ranks, c.max_records, c.offsets, c.empty_every);
  testing::WriteJob(dir.path(), traces);
  CommandResult r = MergeWith(dir, c.procs,
                              "--no-progress --memory-mb " + std::string(c.memory_mb) + " " +
                                  dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err, "") << "no problem expected";
  EXPECT_NE(r.out.find("merged " + std::to_string(c.ranks) + " of " + std::to_string(c.ranks)),
            std::string::npos)
      << r.out;
  // One summary, from process 0 only.
  EXPECT_EQ(r.out.find("aon-merge: job"), r.out.rfind("aon-merge: job")) << r.out;

  const std::string timeline = dir.File("timeline.h5");
  const std::string shards = dir.File("timeline.shards");
  EXPECT_EQ(fs::exists(shards), c.procs > 1);
  EXPECT_FALSE(fs::exists(shards + ".partial"));
  EXPECT_FALSE(fs::exists(timeline + ".partial"));
  auto reader = TraceReader::Open(timeline);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto strings = (*reader)->ReadStrings();
  ASSERT_TRUE(strings.ok()) << strings.status().ToString();
  EXPECT_EQ(*(*reader)->GetMetaInt("merge_processes"), c.procs);
  std::map<uint32_t, const RankTrace*> by_rank;
  for (const RankTrace& tr : traces) by_rank[static_cast<uint32_t>(tr.meta.rank)] = &tr;
  std::map<uint32_t, uint64_t> per_rank;
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    const auto ref = testing::ReferenceMerge<T>(by_rank);
    testing::ExpectMatchesReference<T>(**reader, *strings, ref);
    for (const auto& x : ref) ++per_rank[x.rank];
    auto attr = (*reader)->GetMetaInt(std::string("records_") +
                                      RecordKindName(RecordTraits<T>::kKind));
    ASSERT_TRUE(attr.ok());
    EXPECT_EQ(static_cast<uint64_t>(*attr), ref.size());
  });
  auto rows = (*reader)->ReadAllOf<RankSummary>(RankSummarySchema(), "meta");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), static_cast<size_t>(c.ranks));
  for (const RankSummary& row : *rows) {
    EXPECT_EQ(row.status, static_cast<uint8_t>(RankStatus::kOk)) << "rank " << row.rank;
    EXPECT_EQ(row.records, per_rank[row.rank]) << "rank " << row.rank;
    EXPECT_EQ(strings->Get(row.host_id), by_rank[row.rank]->meta.host);
  }
  auto devices = (*reader)->ReadAllOf<Merged<DeviceInfo>>(MergedDeviceSchema(), "meta");
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 2u * c.ranks);
  for (size_t i = 0; i < devices->size(); ++i) {
    const Merged<DeviceInfo>& d = (*devices)[i];
    EXPECT_EQ(d.rank, i / 2) << "devices in rank order";
    const RankTrace& tr = *by_rank[d.rank];
    EXPECT_EQ(strings->Get(d.record.uuid_id),
              tr.strings.Get(tr.meta.devices[d.record.device_id].uuid_id));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Procs, MpiMerge,
    ::testing::Values(Case{1, 300, true, 0, 1, "1024", 101}, Case{3, 300, true, 0, 2, "1024", 102},
                      Case{4, 1000, true, 2, 3, "0.05", 103},
                      Case{8, 2000, true, 3, 4, "0.05", 104},
                      Case{5, 0, false, 0, 4, "1024", 105},   // no records at all
                      Case{2, 50, false, 0, 4, "0.01", 106},  // more processes than ranks
                      Case{7, 3000, false, 0, 3, "0.1", 107}),
    [](const ::testing::TestParamInfo<Case>& param_info) {
      const Case& c = param_info.param;
      return std::to_string(c.ranks) + "ranks_np" + std::to_string(c.procs) + "_seed" +
             std::to_string(c.seed);
    });

std::set<std::string> Lines(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.insert(line);
  return out;
}

// Missing, corrupt, newer-format, truncated and a salvaged .partial rank: the
// same warnings, statuses and records with 3 processes as with 1.
TEST(MpiMergeBadInput, SameProblemsAndRecordsAsOneProcess) {
  TempDir dir;
  std::mt19937_64 rng(7);
  std::vector<RankTrace> traces;
  for (int r = 0; r < 7; ++r) {
    testing::RandomTraceOptions o;
    o.max_records = 500;
    if (r != 2) traces.push_back(testing::RandomRankTrace(rng, r, 7, o));  // rank 2 missing
  }
  testing::WriteJob(dir.path(), traces);
  {
    std::ofstream out(testing::RankPath(dir.path(), 1), std::ios::binary | std::ios::trunc);
    out << "not HDF5";
  }
  fs::resize_file(testing::RankPath(dir.path(), 4), fs::file_size(testing::RankPath(dir.path(), 4)) / 2);
  fs::rename(testing::RankPath(dir.path(), 5), testing::RankPath(dir.path(), 5) + ".partial");

  CommandResult one = RunCommand(dir, kMerge + " --no-progress -o " + dir.File("one.h5") +
                                          " --no-chrome --no-overview " + dir.path());
  ASSERT_EQ(one.exit_code, 0) << one.err;
  CommandResult three = MergeWith(dir, 3, "--no-progress -o " + dir.File("three.h5") +
                                              " --no-chrome --no-overview " + dir.path());
  ASSERT_EQ(three.exit_code, 0) << three.err;
  EXPECT_EQ(Lines(three.err), Lines(one.err));
  for (const char* needle : {"rank-00001.h5", "rank-00002.h5", "rank-00004.h5",
                             "rank-00005.h5.partial"}) {
    EXPECT_NE(three.err.find(needle), std::string::npos) << needle << "\n" << three.err;
  }
  auto a = TraceReader::Open(dir.File("one.h5"));
  auto b = TraceReader::Open(dir.File("three.h5"));
  ASSERT_TRUE(a.ok() && b.ok());
  auto ra = (*a)->ReadAllOf<RankSummary>(RankSummarySchema(), "meta");
  auto rb = (*b)->ReadAllOf<RankSummary>(RankSummarySchema(), "meta");
  ASSERT_TRUE(ra.ok() && rb.ok());
  ASSERT_EQ(ra->size(), 7u);
  ASSERT_EQ(rb->size(), 7u);
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ((*ra)[i].status, (*rb)[i].status) << "rank " << i;
    EXPECT_EQ((*ra)[i].records, (*rb)[i].records) << "rank " << i;
  }
  EXPECT_EQ((*rb)[5].status, static_cast<uint8_t>(RankStatus::kTruncated));
  EXPECT_GT((*rb)[5].records, 0u) << "the salvaged .partial rank is merged";
  EXPECT_EQ(*(*b)->GetMetaString("problems"), *(*a)->GetMetaString("problems"));
  std::map<uint32_t, const RankTrace*> good;
  for (const RankTrace& tr : traces) {
    if (tr.meta.rank == 0 || tr.meta.rank == 3 || tr.meta.rank >= 5) good[tr.meta.rank] = &tr;
  }
  auto strings = (*b)->ReadStrings();
  ASSERT_TRUE(strings.ok());
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    testing::ExpectMatchesReference<T>(**b, *strings, testing::ReferenceMerge<T>(good));
  });
}

// Re-running replaces the timeline and its shards; going back to one process
// removes the shards; nothing .partial is left behind.
TEST(MpiMergeRerun, RerunsReplaceShardsAndOneProcessRemovesThem) {
  TempDir dir;
  std::mt19937_64 rng(9);
  const std::vector<RankTrace> traces = testing::RandomJob(rng, 4, 400);
  testing::WriteJob(dir.path(), traces);
  auto kernels = [&]() -> uint64_t {
    auto r = TraceReader::Open(dir.File("timeline.h5"));
    if (!r.ok()) return UINT64_MAX;
    auto k = (*r)->ReadAllMerged<KernelRecord>();
    return k.ok() ? k->size() : UINT64_MAX;
  };
  uint64_t want = 0;
  for (const RankTrace& tr : traces) want += tr.Get<KernelRecord>().size();
  for (int procs : {3, 2, 3}) {
    CommandResult r = MergeWith(dir, procs, "--no-progress -q " + dir.path());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(kernels(), want) << "np " << procs;
    size_t shards = 0;
    for (const auto& e : fs::directory_iterator(dir.File("timeline.shards"))) {
      EXPECT_EQ(e.path().extension(), ".h5") << e.path();
      ++shards;
    }
    EXPECT_EQ(shards, static_cast<size_t>(procs)) << "only this merge's shards";
  }
  CommandResult r = RunCommand(dir, kMerge + " --no-progress -q " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(kernels(), want);
  EXPECT_FALSE(fs::exists(dir.File("timeline.shards")));
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().string().find(".partial"), std::string::npos) << e.path();
  }
}

// --procs N starts mpirun itself.
TEST(MpiMergeProcs, ProcsOptionStartsMpirun) {
  TempDir dir;
  std::mt19937_64 rng(11);
  std::vector<RankTrace> traces;
  for (int r = 0; r < 3; ++r) traces.push_back(testing::RandomRankTrace(rng, r, 3, {}));
  testing::WriteJob(dir.path(), traces);
  CommandResult r = RunCommand(dir, "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " +
                                        kMerge + " --procs 2 --no-progress " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto reader = TraceReader::Open(dir.File("timeline.h5"));
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(*(*reader)->GetMetaInt("merge_processes"), 2);
  EXPECT_TRUE(fs::exists(dir.File("timeline.shards/shard-00001.h5")));
}

// Issue #18 (5): a sharded merge that fails (here: -o names a directory, found
// only when the timeline is committed) leaves neither a shard directory nor any
// .partial behind, and the rank files are untouched.
TEST(MpiMergeProcs, AFailedShardedMergeLeavesNothingBehind) {
  TempDir dir;
  std::mt19937_64 rng(12);
  std::vector<RankTrace> traces;
  for (int r = 0; r < 3; ++r) traces.push_back(testing::RandomRankTrace(rng, r, 3, {}));
  testing::WriteJob(dir.path(), traces);
  const std::string out_dir = dir.File("out");
  fs::create_directories(out_dir + "/not-empty");
  CommandResult r = RunCommand(dir, "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " +
                                        kMerge + " --procs 2 --no-progress -q -o " + out_dir +
                                        " " + dir.path());
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find(out_dir), std::string::npos) << r.err;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    EXPECT_FALSE(name.ends_with(".partial")) << name;
    EXPECT_EQ(name.find(".shards"), std::string::npos) << name;
  }
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_TRUE(fs::exists(testing::RankPath(dir.path(), rank))) << rank;
}

// A merge killed (SIGKILL, every process) at any moment never leaves a
// complete-looking timeline that is not one: after each kill, timeline.h5 is
// either absent or opens and reads in full (its shards present).
TEST(MpiMergeInterrupted, KilledMergeNeverLeavesABrokenTimeline) {
  TempDir dir;
  std::mt19937_64 rng(13);
  const std::vector<RankTrace> traces = testing::RandomJob(rng, 6, 4000);
  testing::WriteJob(dir.path(), traces);
  uint64_t want = 0;
  for (const RankTrace& tr : traces) want += tr.Get<KernelRecord>().size();
  const std::string merge = Mpirun(3) + kMerge + " -q --no-progress --no-chrome --memory-mb 0.5 " +
                            dir.path();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(RunCommand(dir, merge).exit_code, 0);
  const double full_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int absent = 0, complete = 0;
  // Kills spread over the whole merge, the commit at its end included.
  for (double f : {0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0, 1.1}) {
    const double delay_s = f * full_s;
    const std::string pidfile = dir.File("merge.pid");
    // A new session per merge, so that one kill reaches mpirun and its ranks.
    RunCommand(dir, "setsid sh -c 'echo $$ > " + pidfile + "; exec env " + merge + "' & sleep " +
                        std::to_string(delay_s) + "; kill -9 -$(cat " + pidfile +
                        ") 2>/dev/null; wait");
    auto reader = TraceReader::Open(dir.File("timeline.h5"));
    if (!reader.ok()) {
      EXPECT_FALSE(fs::exists(dir.File("timeline.h5"))) << reader.status().ToString();
      ++absent;
      continue;
    }
    auto kernels = (*reader)->ReadAllMerged<KernelRecord>();
    ASSERT_TRUE(kernels.ok()) << "after " << delay_s << " s: " << kernels.status().ToString();
    EXPECT_EQ(kernels->size(), want) << "after " << delay_s << " s";
    ++complete;
  }
  std::printf("merge %.2f s; killed merges: %d left no timeline, %d left a complete one\n", full_s,
              absent, complete);
  // And the next merge repairs everything.
  CommandResult r = MergeWith(dir, 2, "-q --no-progress --no-chrome " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto reader = TraceReader::Open(dir.File("timeline.h5"));
  ASSERT_TRUE(reader.ok());
  auto kernels = (*reader)->ReadAllMerged<KernelRecord>();
  ASSERT_TRUE(kernels.ok());
  EXPECT_EQ(kernels->size(), want);
}

}  // namespace
}  // namespace aon::merge
