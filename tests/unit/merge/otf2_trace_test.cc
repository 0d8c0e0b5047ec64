// The OTF2 export (aon/export/otf2_trace.h): every archive it writes is read by
// otf2-print (Debian's otf2-tools) through tests/data/otf2/otf2_counts.py, which
// fails on anything otf2-print does not accept, on unbalanced or unordered
// events and on event counts that differ from the definitions; the ENTER events,
// counted per rank and record kind, must be exactly the timeline's records.
#include "aon/export/otf2_trace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "aon/merge/inspect.h"
#include "aon/merge/merge.h"
#include "export_test_util.h"
#include "merge_test_util.h"
#include "skip_or_fail.h"

namespace aon::merge {
namespace {

using testing::RankTrace;
using testing::TempDir;
using testing_export::CountsOnly;
using testing_export::TimelineCounts;

const std::string kCounter = std::string(AON_SOURCE_DIR) + "/tests/data/otf2/otf2_counts.py";

std::map<std::string, std::string> ReadArchive(const TempDir& dir, const std::string& anchor) {
  return testing::RunPython(dir,
                            "import runpy, sys\nsys.argv = sys.argv[1:]\n"
                            "runpy.run_path(sys.argv[0], run_name='__main__')\n",
                            {kCounter, anchor, AON_OTF2_PRINT});
}

// "problem/<name>=<n>" of the ones found, for failure messages.
std::string Problems(const std::map<std::string, std::string>& m) {
  std::string text;
  for (const auto& [k, v] : m) {
    if (k.rfind("problem/", 0) == 0 && v != "0") text += k + "=" + v + " ";
  }
  return text;
}

uint64_t Sum(const std::map<std::string, std::string>& counts) {
  uint64_t n = 0;
  for (const auto& [k, v] : counts) n += std::stoull(v);
  return n;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

// An AllReduce record of communicator 0xabcdef on a rank's calibrated row.
NcclRecord AllReduce(uint32_t func, uint64_t start, uint64_t end, uint64_t seq, int32_t comm_rank) {
  NcclRecord coll{};
  coll.event_type = static_cast<uint8_t>(NcclEventType::kColl);
  coll.start_ns = start;
  coll.end_ns = end;
  coll.comm_hash = 0xabcdef;
  coll.seq_number = seq;
  coll.func_id = func;
  coll.root = -1;
  coll.bytes = 4096;
  coll.comm_rank = comm_rank;
  coll.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kCalibrated);
  return coll;
}

class Otf2Trace : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!AON_HAVE_OTF2 || std::string(AON_OTF2_PRINT).empty()) {
      AON_SKIP_OR_FAIL(<< "libotf2 or otf2-print is not installed (scripts/install-deps.sh --test "
                          "installs libotf2-trace-dev and otf2-tools)");
    }
  }
  std::string MergeRandomJob(int ranks, size_t max_records, uint64_t seed) {
    return testing_export::MergeRandomJobIn(dir_.path(), ranks, max_records, seed);
  }
  std::string Merge() { return testing_export::MergeJobIn(dir_.path()); }
  TempDir dir_;
};

TEST_F(Otf2Trace, OtfPrintReadsEveryRecordOfEveryRankAndKind) {
  const std::string timeline = MergeRandomJob(4, 300, 5);
  Otf2TraceStats stats;
  AON_ASSERT_OK(ExportOtf2Trace(timeline, dir_.File("otf2"), {}, &stats));
  EXPECT_EQ(stats.anchor, dir_.File("otf2") + "/traces.otf2");
  EXPECT_FALSE(Exists(dir_.File("otf2.partial")));

  auto archive = ReadArchive(dir_, stats.anchor);
  EXPECT_EQ(archive["problems"], "0") << Problems(archive);
  EXPECT_EQ(archive["ranks"], "0,1,2,3");
  EXPECT_EQ(archive["hosts"], "node0");
  const auto expected = TimelineCounts(timeline);
  EXPECT_GE(expected.size(), 4u * 9u);  // every exported kind on every rank
  EXPECT_EQ(CountsOnly(archive), expected);
  EXPECT_EQ(stats.records, Sum(expected));
  EXPECT_EQ(archive["events"], std::to_string(stats.events));
  EXPECT_EQ(archive["locations"], std::to_string(stats.locations));
  // Every counter sample is a metric event; every collective a begin and an end.
  EXPECT_GT(stats.metrics, 0u);
  // (otf2-print's counts name only what occurs: none is 0. Random records rarely
  // make a collective that overlaps nothing on its location; the test below of one
  // AllReduce on three ranks checks that such collectives are written.)
  auto count = [&](const std::string& key) {
    return archive.count(key) ? archive[key] : std::string("0");
  };
  EXPECT_EQ(count("collective/begin"), std::to_string(stats.collectives));
  EXPECT_EQ(count("collective/end"), std::to_string(stats.collectives));
  // Steps are regions by kind ("step", "step (captured)"), never one per step
  // number: every step of every rank enters one of at most two regions.
  uint64_t steps = 0;
  for (uint32_t rank = 0; rank < 4; ++rank)
    steps += std::stoull(count("count/" + std::to_string(rank) + "/steps"));
  EXPECT_GT(steps, 4u);
  EXPECT_GE(std::stoull(count("regiondefs/steps")), 1u);
  EXPECT_LE(std::stoull(count("regiondefs/steps")), 2u);
}

// Host samples with stacks are also calling-context samples: their calling
// contexts, read back from the definitions, are their stacks frame for frame
// (Python frames with their line as a source code location), and otf2-print
// accepts the unwind distances (it unwinds every sample). An empty stack has
// no calling context.
TEST_F(Otf2Trace, HostSamplesAreCallingContextSamplesOfTheirStacks) {
  const int rounds = 7;
  testing_export::WriteHostSampleJob(dir_.path(), rounds);
  const std::string timeline = Merge();
  Otf2TraceStats stats;
  AON_ASSERT_OK(ExportOtf2Trace(timeline, dir_.File("otf2"), {}, &stats));
  auto archive = ReadArchive(dir_, stats.anchor);
  EXPECT_EQ(archive["problems"], "0") << Problems(archive);
  const std::vector<std::string>& stacks = testing_export::PlantedHostStacks();
  EXPECT_EQ(archive["count/0/host_samples"], std::to_string(rounds * stacks.size()));
  size_t sampled = 0;
  for (const std::string& stack : stacks) {
    if (stack.empty()) continue;
    std::string hex;
    for (unsigned char c : stack) {
      char two[3];
      std::snprintf(two, sizeof(two), "%02x", c);
      hex += two;
    }
    EXPECT_EQ(archive["sample_stack/0/" + hex], std::to_string(rounds)) << stack;
    sampled += rounds;
  }
  size_t total = 0;
  for (const auto& [k, v] : archive) {
    if (k.rfind("sample_stack/", 0) == 0) total += std::stoull(v);
  }
  EXPECT_EQ(total, sampled) << "no sample for the empty stack, none other";
}

// One AllReduce on three ranks (communicator 0xabcdef, sequence 5): one OTF2
// communicator of three members, a collective begin and end on each rank.
TEST_F(Otf2Trace, NcclCollectiveIsACollectiveOnItsCommunicator) {
  constexpr uint64_t kBase = 1'000'000'000;
  std::vector<RankTrace> traces;
  for (int r = 0; r < 3; ++r) {
    RankTrace t;
    t.meta = testing::BasicMetadata(r, 3);
    const uint32_t func = t.strings.Intern("AllReduce");
    t.Get<KernelRecord>().push_back(testing::MakeKernel(kBase + 300, 7));
    t.Get<NcclRecord>().push_back(
        AllReduce(func, kBase + 400 + 10 * static_cast<uint64_t>(r), kBase + 900, 5, r));
    traces.push_back(std::move(t));
  }
  testing::WriteJob(dir_.path(), traces);
  const std::string timeline = Merge();
  Otf2TraceStats stats;
  AON_ASSERT_OK(ExportOtf2Trace(timeline, dir_.File("otf2"), {}, &stats));
  EXPECT_EQ(stats.collectives, 3u);
  auto archive = ReadArchive(dir_, stats.anchor);
  EXPECT_EQ(archive["problems"], "0") << Problems(archive);
  EXPECT_EQ(archive["comms"], "1");
  EXPECT_EQ(archive["comm/0/members"], "3");
  EXPECT_EQ(archive["collective/op/ALLREDUCE"], "3");
  EXPECT_EQ(archive["collective/end"], "3");
  EXPECT_EQ(CountsOnly(archive), TimelineCounts(timeline));
}

// Two AllReduces of one communicator that overlap on each rank's row (host
// times of asynchronous calls can): the second goes on an overlap row as a
// plain region, so every collective event is on a member of its communicator
// and none nests in another.
TEST_F(Otf2Trace, OverlappingCollectivesKeepCollectiveEventsOnMembers) {
  constexpr uint64_t kBase = 1'000'000'000;
  std::vector<RankTrace> traces;
  for (int r = 0; r < 2; ++r) {
    RankTrace t;
    t.meta = testing::BasicMetadata(r, 2);
    const uint32_t func = t.strings.Intern("AllReduce");
    for (int i = 0; i < 2; ++i) {
      // The communicator orders the ranks the other way round (comm_rank 1 - r).
      t.Get<NcclRecord>().push_back(AllReduce(func, kBase + 400 + 100 * static_cast<uint64_t>(i),
                                              kBase + 900 + 300 * static_cast<uint64_t>(i),
                                              static_cast<uint64_t>(i), 1 - r));
    }
    traces.push_back(std::move(t));
  }
  testing::WriteJob(dir_.path(), traces);
  const std::string timeline = Merge();
  Otf2TraceStats stats;
  AON_ASSERT_OK(ExportOtf2Trace(timeline, dir_.File("otf2"), {}, &stats));
  EXPECT_EQ(stats.collectives, 2u);
  EXPECT_EQ(stats.collectives_as_regions, 2u);
  auto archive = ReadArchive(dir_, stats.anchor);
  EXPECT_EQ(archive["problems"], "0") << Problems(archive);
  EXPECT_EQ(archive["comm/0/members"], "2");
  EXPECT_EQ(archive["collective/end"], "2");
  EXPECT_EQ(archive["count/0/nccl"], "2");
  EXPECT_EQ(archive["count/1/nccl"], "2");
}

// Two kernels on one stream that overlap without nesting (a corrupt or
// reordered record): the second goes on an "overlapping" row, times unchanged,
// counts exact.
TEST_F(Otf2Trace, SlicesThatDoNotNestGoOnAnOverlapRow) {
  RankTrace t;
  t.meta = testing::BasicMetadata(0, 1);
  KernelRecord a = testing::MakeKernel(1'000'000'000);
  a.end_ns = a.start_ns + 100;
  KernelRecord b = testing::MakeKernel(a.start_ns + 50);
  b.end_ns = a.start_ns + 150;
  KernelRecord c = testing::MakeKernel(a.start_ns + 60);  // nests in b
  c.end_ns = a.start_ns + 70;
  t.Get<KernelRecord>() = {a, b, c};
  testing::WriteJob(dir_.path(), {t});
  const std::string timeline = Merge();
  Otf2TraceStats stats;
  AON_ASSERT_OK(ExportOtf2Trace(timeline, dir_.File("otf2"), {}, &stats));
  EXPECT_EQ(stats.overlap_rows, 1u);
  auto archive = ReadArchive(dir_, stats.anchor);
  EXPECT_EQ(archive["problems"], "0") << Problems(archive);
  EXPECT_EQ(archive["count/0/kernels"], "3");
  EXPECT_EQ(archive["location_types"], "ACCELERATOR_STREAM=2");
}

TEST_F(Otf2Trace, CorruptRankIsLeftOutAndEveryOtherRankCounted) {
  std::mt19937_64 rng(8);
  testing::WriteJob(dir_.path(), testing::RandomJob(rng, 3, 200));
  {
    std::ofstream out(testing::RankPath(dir_.path(), 1), std::ios::binary | std::ios::trunc);
    out << "this is not an HDF5 file";
  }
  const std::string timeline = Merge();
  Otf2TraceStats stats;
  AON_ASSERT_OK(ExportOtf2Trace(timeline, dir_.File("otf2"), {}, &stats));
  auto archive = ReadArchive(dir_, stats.anchor);
  EXPECT_EQ(archive["problems"], "0") << Problems(archive);
  EXPECT_EQ(archive["ranks"], "0,2");
  const auto expected = TimelineCounts(timeline);
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(CountsOnly(archive), expected);
}

// Bounded memory: a pool of four chunks puts each rank in a pass of its own
// and makes OTF2 flush every location many times; nothing is lost, the pool's
// peak stays within the pool plus one chunk per location of a pass, and the
// archive holds what one pass with the default pool writes.
TEST_F(Otf2Trace, PassesAndATinyPoolLoseNothing) {
  constexpr uint64_t kBase = 1'000'000'000;
  constexpr int kRanks = 4, kPerRank = 20000;
  std::vector<RankTrace> traces;
  for (int r = 0; r < kRanks; ++r) {
    RankTrace t;
    t.meta = testing::BasicMetadata(r, kRanks);
    const uint32_t launch = t.strings.Intern("cudaLaunchKernel");
    const uint32_t kernel = t.strings.Intern("gemm");
    for (int i = 0; i < kPerRank; ++i) {
      const uint64_t at = kBase + 1000 * static_cast<uint64_t>(i);
      ApiRecord api{};
      api.start_ns = at;
      api.end_ns = at + 100;
      api.correlation_id = static_cast<uint32_t>(i + 1);
      api.name_id = launch;
      api.thread_id = 77;
      t.Get<ApiRecord>().push_back(api);
      KernelRecord k = testing::MakeKernel(at + 200, static_cast<uint32_t>(i + 1), kernel);
      k.stream_id = 7 + static_cast<uint32_t>(i % 2);
      k.end_ns = at + 900;
      t.Get<KernelRecord>().push_back(k);
    }
    traces.push_back(std::move(t));
  }
  testing::WriteJob(dir_.path(), traces);
  const std::string timeline = Merge();
  Otf2ExportOptions options;
  options.chunk_bytes = kOtf2MinChunkBytes;
  options.memory_bytes = 4 * kOtf2MinChunkBytes;  // a rank has 3 locations: one rank a pass
  Otf2TraceStats stats;
  AON_ASSERT_OK(ExportOtf2Trace(timeline, dir_.File("otf2"), options, &stats));
  EXPECT_EQ(stats.passes, 4u);
  EXPECT_EQ(stats.locations, 4u * 3u);
  EXPECT_LE(stats.peak_pool_bytes, options.memory_bytes + 3 * options.chunk_bytes);
  auto archive = ReadArchive(dir_, stats.anchor);
  EXPECT_EQ(archive["problems"], "0") << Problems(archive);
  EXPECT_EQ(CountsOnly(archive), TimelineCounts(timeline));
  EXPECT_EQ(archive["count/3/kernels"], std::to_string(kPerRank));
  EXPECT_EQ(archive["events"], std::to_string(4u * kRanks * kPerRank));
  // The pool held four chunks for three locations: a location's file of more
  // than two chunks was flushed while the pass ran.
  uint64_t flushed = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir_.File("otf2/traces"))) {
    if (f.path().extension() == ".evt" && f.file_size() > 2 * options.chunk_bytes) ++flushed;
  }
  EXPECT_GE(flushed, 4u) << "each rank's busiest location";

  Otf2TraceStats one;
  AON_ASSERT_OK(ExportOtf2Trace(timeline, dir_.File("otf2-one"), {}, &one));
  EXPECT_EQ(one.passes, 1u);
  EXPECT_EQ(one.events, stats.events);
  EXPECT_EQ(CountsOnly(ReadArchive(dir_, one.anchor)), CountsOnly(archive));
}

TEST_F(Otf2Trace, WindowRanksAndKindsAreKept) {
  const std::string timeline = MergeRandomJob(4, 300, 9);
  Otf2ExportOptions options;
  AON_ASSERT_OK(ParseRankList("1-2", &options.filter));
  AON_ASSERT_OK(ParseKindList("kernels,nccl", &options.filter));
  Otf2TraceStats stats;
  const std::string out = FilteredOtf2Path(dir_.path(), options.filter);
  EXPECT_EQ(out, dir_.File("otf2-ranks1-2_kernels,nccl"));
  AON_ASSERT_OK(ExportOtf2Trace(timeline, out, options, &stats));
  auto archive = ReadArchive(dir_, stats.anchor);
  EXPECT_EQ(archive["problems"], "0") << Problems(archive);
  EXPECT_EQ(archive["ranks"], "1,2");
  std::map<std::string, std::string> expected;
  for (const auto& [k, v] : TimelineCounts(timeline)) {
    if ((k.starts_with("count/1/") || k.starts_with("count/2/")) &&
        (k.ends_with("/kernels") || k.ends_with("/nccl"))) {
      expected[k] = v;
    }
  }
  EXPECT_EQ(expected.size(), 4u);
  EXPECT_EQ(CountsOnly(archive), expected);
}

// The archive directory: an older AON archive is replaced (and nothing beside
// it touched); a directory that is not one (another tool's OTF2 experiment, a
// plain directory), or a link, is refused and left as it was; nothing .partial
// remains; "dir/" is "dir".
TEST_F(Otf2Trace, ReplacesOnlyAnOlderArchive) {
  const std::string timeline = MergeRandomJob(2, 50, 3);
  const std::string out = dir_.File("otf2");
  Otf2ExportOptions rank0;
  AON_ASSERT_OK(ParseRankList("0", &rank0.filter));
  AON_ASSERT_OK(ExportOtf2Trace(timeline, out, rank0));
  EXPECT_EQ(ReadArchive(dir_, out + "/traces.otf2")["ranks"], "0");
  std::filesystem::create_directory(out + ".old");
  std::ofstream(out + ".old/keep.txt") << "mine";
  Otf2TraceStats stats;
  AON_ASSERT_OK(ExportOtf2Trace(timeline, out + "/", {}, &stats));  // replaced
  EXPECT_EQ(stats.anchor, out + "/traces.otf2");
  auto replaced = ReadArchive(dir_, stats.anchor);
  EXPECT_EQ(replaced["problems"], "0") << Problems(replaced);
  EXPECT_EQ(replaced["ranks"], "0,1");
  EXPECT_TRUE(Exists(out + ".old/keep.txt"));
  for (const auto& f : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_EQ(f.path().filename().string().find("otf2.old-"), std::string::npos) << f.path();
  }

  // Another tool's archive (an anchor not written by AON) with its other files.
  const std::string scorep = dir_.File("scorep");
  std::filesystem::create_directory(scorep);
  std::ofstream(scorep + "/traces.otf2") << "an anchor of another tool";
  std::ofstream(scorep + "/profile.cubex") << "keep";
  Status s = ExportOtf2Trace(timeline, scorep, {});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(scorep), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("not an OTF2 archive AON wrote"), std::string::npos) << s.message();
  EXPECT_TRUE(Exists(scorep + "/profile.cubex"));

  const std::string other = dir_.File("not-an-archive");
  std::filesystem::create_directory(other);
  std::ofstream(other + "/keep.txt") << "mine";
  s = ExportOtf2Trace(timeline, other, {});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not-an-archive' exists and is not an OTF2 archive"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(Exists(other + "/keep.txt"));
  EXPECT_FALSE(Exists(other + ".partial"));

  const std::string link = dir_.File("link");
  ASSERT_EQ(symlink(out.c_str(), link.c_str()), 0);
  s = ExportOtf2Trace(timeline, link, {});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not a directory of this user's (a link"), std::string::npos)
      << s.message();
  EXPECT_TRUE(Exists(out + "/traces.otf2"));
  // A planted link at the .partial path is refused too, not followed.
  const std::string target = dir_.File("target");
  std::filesystem::create_directory(target);
  ASSERT_EQ(symlink(target.c_str(), (dir_.File("fresh") + ".partial").c_str()), 0);
  s = ExportOtf2Trace(timeline, dir_.File("fresh"), {});
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(std::filesystem::is_empty(target));
}

// The archive is the user's alone, whatever the umask: libotf2 makes its files
// and traces/ with the umask's modes, and the export makes them 0600 and 0700,
// every level of the tree, like every other file AON writes.
TEST_F(Otf2Trace, ArchiveIsPrivateWhateverTheUmask) {
  const std::string timeline = MergeRandomJob(3, 80, 5);
  const std::string out = dir_.File("otf2");
  const mode_t before = umask(0);
  Otf2TraceStats stats;
  const Status s = ExportOtf2Trace(timeline, out, {}, &stats);
  umask(before);
  AON_ASSERT_OK(s);
  struct stat st {};
  ASSERT_EQ(lstat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u) << out;
  size_t files = 0, dirs = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(out)) {
    ASSERT_EQ(lstat(e.path().c_str(), &st), 0) << e.path();
    ASSERT_TRUE(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) << e.path();
    EXPECT_EQ(st.st_mode & 07777, S_ISDIR(st.st_mode) ? 0700u : 0600u) << e.path();
    ++(S_ISDIR(st.st_mode) ? dirs : files);
  }
  EXPECT_GE(dirs, 1u) << "traces/";
  EXPECT_GE(files, 2u + stats.locations) << "traces.otf2, traces.def and each location's files";
  EXPECT_EQ(ReadArchive(dir_, stats.anchor)["ranks"], "0,1,2");
}

// aon-export --format otf2 writes <timeline dir>/otf2 by default.
TEST_F(Otf2Trace, AonExportWritesTheArchiveNextToTheTimeline) {
  const std::string timeline = MergeRandomJob(2, 100, 4);
  const testing::CommandResult r = testing::RunCommand(
      dir_, std::string(AON_BUILD_BIN_DIR) + "/aon-export '" + timeline + "' --format otf2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("otf2 archive: " + dir_.File("otf2/traces.otf2")), std::string::npos)
      << r.out;
  auto archive = ReadArchive(dir_, dir_.File("otf2/traces.otf2"));
  EXPECT_EQ(archive["problems"], "0") << Problems(archive);
  EXPECT_EQ(CountsOnly(archive), TimelineCounts(timeline));
}

}  // namespace
}  // namespace aon::merge
