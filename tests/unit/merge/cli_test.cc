// aon-merge and aon-inspect as real subprocesses on generated job directories.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "merge_test_util.h"

namespace aon {
namespace {

using testing::RankTrace;
using testing::RunCommand;
using testing::TempDir;

const std::string kMerge = AON_BUILD_BIN_DIR "/aon-merge";
const std::string kInspect = AON_BUILD_BIN_DIR "/aon-inspect";

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string Get(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? "<absent>" : it->second;
}

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

// A 4-rank job with rank 2 missing; returns the traces written (by rank).
std::map<int, RankTrace> WriteJobWithMissingRank(const TempDir& dir) {
  std::mt19937_64 rng(51);
  std::map<int, RankTrace> traces;
  for (int r : {0, 1, 3}) {
    testing::RandomTraceOptions o;
    o.max_records = 300;
    traces[r] = testing::RandomRankTrace(rng, r, 4, o);
    EXPECT_TRUE(testing::WriteRankTrace(testing::RankPath(dir.path(), r), traces[r]).ok());
  }
  return traces;
}

TEST(MergeCli, MergesAJobAndInspectReportsExactCounts) {
  TempDir dir;
  auto traces = WriteJobWithMissingRank(dir);
  auto merged = RunCommand(dir, kMerge + " " + dir.path());
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_TRUE(Contains(merged.out, "merged 3 of 4 ranks")) << merged.out;
  EXPECT_TRUE(Contains(merged.err, "rank 2")) << merged.err;
  EXPECT_TRUE(Contains(merged.err, "rank-00002.h5")) << merged.err;
  EXPECT_TRUE(std::filesystem::exists(dir.File("timeline.h5")));
  EXPECT_TRUE(std::filesystem::exists(dir.File("trace.json")));

  auto inspected = RunCommand(dir, kInspect + " --json " + dir.File("timeline.h5"));
  ASSERT_EQ(inspected.exit_code, 0) << inspected.err;
  const std::string json = dir.File("inspect.json");
  std::ofstream(json) << inspected.out;
  auto j = testing::FlattenJsonFile(dir, json);
  EXPECT_EQ(Get(j, "file_kind"), Quoted("aon-timeline"));
  EXPECT_EQ(Get(j, "format"),
            Quoted(std::to_string(kFormatMajor) + "." + std::to_string(kFormatMinor)));
  EXPECT_EQ(Get(j, "metadata/world_size"), "4");
  EXPECT_EQ(Get(j, "metadata/ranks_ok"), "3");
  EXPECT_EQ(Get(j, "metadata/ranks_bad"), "1");
  EXPECT_EQ(Get(j, "metadata/job_id"), Quoted("job-42"));
  EXPECT_EQ(Get(j, "ranks/2/status"), Quoted("missing"));
  EXPECT_EQ(Get(j, "ranks/0/status"), Quoted("ok"));
  EXPECT_EQ(Get(j, "ranks/3/host"), Quoted("node0"));
  EXPECT_TRUE(Contains(Get(j, "ranks/2/message"), "rank-00002.h5")) << Get(j, "ranks/2/message");

  std::map<std::string, uint64_t> kernel_names_total;
  for (size_t k = 0; k < kTimelineKindCount; ++k) {
    const std::string kind = RecordKindName(static_cast<RecordKind>(k));
    uint64_t total = 0, dropped = 0;
    for (const auto& [rank, t] : traces) {
      uint64_t n = 0;
      ForEachRecordType([&](auto tag) {
        using T = decltype(tag);
        if (static_cast<size_t>(RecordTraits<T>::kKind) == k) n = t.template Get<T>().size();
      });
      EXPECT_EQ(Get(j, "per_rank/" + std::to_string(rank) + "/" + kind), std::to_string(n)) << kind;
      total += n;
      dropped += t.meta.dropped[k];
    }
    EXPECT_EQ(Get(j, "per_rank/2/" + kind), "0");
    EXPECT_EQ(Get(j, "counts/" + kind), std::to_string(total)) << kind;
    EXPECT_EQ(Get(j, "dropped/" + kind), std::to_string(dropped)) << kind;
  }
  for (const auto& [rank, t] : traces) {
    std::map<std::string, uint64_t> names;
    for (const KernelRecord& k : t.Get<KernelRecord>()) ++names[t.strings.Get(k.name_id)];
    for (const auto& [name, count] : names) {
      EXPECT_EQ(Get(j, "kernel_names_per_rank/" + std::to_string(rank) + "/" + name),
                std::to_string(count))
          << name;
      kernel_names_total[name] += count;
    }
  }
  for (const auto& [name, count] : kernel_names_total) {
    EXPECT_EQ(Get(j, "kernel_names/" + name), std::to_string(count)) << name;
  }
  EXPECT_EQ(Get(j, "metadata/devices/0/name"), Quoted("NVIDIA H200"));
  EXPECT_EQ(Get(j, "metadata/devices/0/rank"), "0");

  auto text = RunCommand(dir, kInspect + " " + dir.File("timeline.h5"));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(Contains(text.out, "aon-timeline")) << text.out;
  EXPECT_TRUE(Contains(text.out, "rank 2: missing")) << text.out;
}

TEST(MergeInspect, RankFileJson) {
  TempDir dir;
  std::mt19937_64 rng(52);
  testing::RandomTraceOptions o;
  o.max_records = 200;
  RankTrace t = testing::RandomRankTrace(rng, 3, 4, o);
  t.meta.notes = {"CUPTI unavailable: test", "second note"};
  t.meta.source = "synthetic";
  const std::string path = testing::RankPath(dir.path(), 3);
  AON_ASSERT_OK(testing::WriteRankTrace(path, t));

  auto r = RunCommand(dir, kInspect + " --json " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string json = dir.File("inspect.json");
  std::ofstream(json) << r.out;
  auto j = testing::FlattenJsonFile(dir, json);
  EXPECT_EQ(Get(j, "file_kind"), Quoted("aon-rank-trace"));
  EXPECT_EQ(Get(j, "format"),
            Quoted(std::to_string(kFormatMajor) + "." + std::to_string(kFormatMinor)));
  EXPECT_EQ(Get(j, "metadata/rank"), "3");
  EXPECT_EQ(Get(j, "metadata/world_size"), "4");
  EXPECT_EQ(Get(j, "metadata/host"), Quoted("node0"));
  EXPECT_EQ(Get(j, "metadata/pid"), "1003");
  EXPECT_EQ(Get(j, "metadata/source"), Quoted("synthetic"));
  EXPECT_EQ(Get(j, "metadata/clock_domain"), Quoted("CLOCK_MONOTONIC"));
  EXPECT_EQ(Get(j, "metadata/clock_synchronized"), "false");
  EXPECT_EQ(Get(j, "metadata/notes/1"), Quoted("second note"));
  EXPECT_EQ(Get(j, "metadata/devices/1/uuid"), Quoted("GPU-3-1"));
  EXPECT_EQ(Get(j, "metadata/devices/1/sm_count"), "132");
  EXPECT_EQ(Get(j, "counts/kernels"), std::to_string(t.Get<KernelRecord>().size()));
  EXPECT_EQ(Get(j, "counts/nvtx"), std::to_string(t.Get<NvtxRecord>().size()));
  EXPECT_EQ(Get(j, "counts/external_correlation"),
            std::to_string(t.Get<ExternalCorrelationRecord>().size()));
  EXPECT_EQ(Get(j, "per_rank/3/memcpy"), std::to_string(t.Get<MemcpyRecord>().size()));
  EXPECT_EQ(Get(j, "dropped/sync"), std::to_string(t.meta.dropped[3]));
  std::map<std::string, uint64_t> nvtx;
  for (const NvtxRecord& n : t.Get<NvtxRecord>()) ++nvtx[t.strings.Get(n.name_id)];
  for (const auto& [name, count] : nvtx) {
    EXPECT_EQ(Get(j, "nvtx_names/" + name), std::to_string(count)) << name;
    EXPECT_EQ(Get(j, "nvtx_names_per_rank/3/" + name), std::to_string(count)) << name;
  }
}

TEST(MergeInspect, UnreadableFilesExitOneNamingTheFile) {
  TempDir dir;
  const std::string garbage = dir.File("rank-00000.h5");
  std::ofstream(garbage) << "not hdf5";
  auto r = RunCommand(dir, kInspect + " --json " + garbage);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, garbage)) << r.err;
  EXPECT_EQ(r.out, "");
  const std::string missing = dir.File("nope.h5");
  r = RunCommand(dir, kInspect + " " + missing);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, missing)) << r.err;
  r = RunCommand(dir, kInspect);
  EXPECT_EQ(r.exit_code, 2) << "a missing FILE argument is a usage error";
}

TEST(MergeCli, ExitCodesAndOptions) {
  TempDir dir;
  // Nothing to merge.
  auto r = RunCommand(dir, kMerge + " " + dir.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, dir.path())) << r.err;
  r = RunCommand(dir, kMerge + " " + dir.File("missing-dir"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, dir.File("missing-dir"))) << r.err;
  r = RunCommand(dir, kMerge);
  EXPECT_EQ(r.exit_code, 2);
  r = RunCommand(dir, kMerge + " --bogus " + dir.path());
  EXPECT_EQ(r.exit_code, 2);

  WriteJobWithMissingRank(dir);
  // Unwritable output.
  const std::string bad_out = dir.File("no/such/timeline.h5");
  r = RunCommand(dir, kMerge + " -o " + bad_out + " " + dir.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, bad_out)) << r.err;
  // --no-chrome, -q, custom output path.
  r = RunCommand(dir, kMerge + " -q --no-chrome -o " + dir.File("t.h5") + " " + dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(Contains(r.err, "rank-00002.h5")) << "problems are reported even when quiet";
  EXPECT_TRUE(std::filesystem::exists(dir.File("t.h5")));
  EXPECT_FALSE(std::filesystem::exists(dir.File("trace.json")));
  // --chrome to a chosen file; re-running replaces outputs.
  for (int i = 0; i < 2; ++i) {
    r = RunCommand(dir, kMerge + " --chrome " + dir.File("c.json") + " " + dir.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(Contains(r.out, dir.File("c.json"))) << r.out;
  }
  auto j = testing::FlattenJsonFile(dir, dir.File("c.json"));
  EXPECT_EQ(Get(j, "displayTimeUnit"), Quoted("ns"));
  r = RunCommand(dir, kMerge + " --no-chrome --chrome x.json " + dir.path());
  EXPECT_EQ(r.exit_code, 2) << "--chrome and --no-chrome exclude each other";
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_FALSE(e.path().string().ends_with(".partial")) << e.path();
  }
}

// Issue #18 (5): numeric options take no negative values, -o '' is not the
// default, and a failed merge leaves no .partial behind (here: -o names a
// directory, found only when the finished timeline is renamed).
TEST(MergeCli, BadValuesAreRefusedAndAFailedMergeLeavesNothingBehind) {
  TempDir dir;
  WriteJobWithMissingRank(dir);
  const std::string export_bin = AON_BUILD_BIN_DIR "/aon-export";
  auto r = RunCommand(dir, kMerge + " --max-trace-records -1 " + dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(Contains(r.err, "--max-trace-records")) << r.err;
  for (const char* threads : {"0", "-2", "many"}) {
    r = RunCommand(dir, kMerge + " --threads " + threads + " " + dir.path());
    EXPECT_EQ(r.exit_code, 2) << threads << ": " << r.err;
    EXPECT_TRUE(Contains(r.err, "--threads")) << r.err;
  }
  r = RunCommand(dir, kMerge + " -o '' " + dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.File("timeline.h5")));
  const std::string out_dir = dir.File("out");
  std::filesystem::create_directories(out_dir + "/not-empty");
  r = RunCommand(dir, kMerge + " -q -o " + out_dir + " " + dir.path());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Contains(r.err, out_dir)) << r.err;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_FALSE(e.path().string().ends_with(".partial")) << e.path();
  }
  r = RunCommand(dir, kMerge + " -q " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCommand(dir, export_bin + " --max-trace-records -5 " + dir.File("timeline.h5"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

// Names come from the rank files (here the job id): the summary shows them escaped.
TEST(MergeCli, ControlCharactersFromRankFilesReachTheTerminalEscaped) {
  TempDir dir;
  std::mt19937_64 rng(52);
  testing::RandomTraceOptions o;
  o.max_records = 50;
  RankTrace t = testing::RandomRankTrace(rng, 0, 2, o);
  t.meta.job_id = "job\x1b]0;owned\x07";
  ASSERT_TRUE(testing::WriteRankTrace(testing::RankPath(dir.path(), 0), t).ok());
  auto r = RunCommand(dir, kMerge + " " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& text : {r.out, r.err}) {
    EXPECT_FALSE(Contains(text, "\x1b")) << "raw ESC reached the terminal";
    EXPECT_FALSE(Contains(text, "\x07")) << "raw BEL reached the terminal";
  }
  EXPECT_TRUE(Contains(r.out, "job job\\x1b]0;owned\\x07: merged 1 of 2 ranks")) << r.out;
}

}  // namespace
}  // namespace aon
