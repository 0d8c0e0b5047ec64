// aon-stats' tables (aon/report/stats.h) on small timelines whose figures are
// known exactly, and the aon-stats program itself (a real subprocess).
#include "aon/report/stats.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "timeline_builder.h"

namespace aon::report {
namespace {

using testing::kUs;
using testing::TempDir;
using testing::TimelineBuilder;

const std::string kStats = std::string(AON_BUILD_BIN_DIR) + "/aon-stats";

const StatsRow* RowOf(const StatsTable& t, const std::string& name, int64_t rank = -1) {
  for (const StatsRow& r : t.rows)
    if (r.name == name && r.rank == rank) return &r;
  return nullptr;
}

// Two ranks: "gemm" 10, 20, 30, 40 us on rank 0 and 100 us on rank 1; "relu"
// 5 us three times on rank 1; NVTX "forward" ranges and a mark; an NCCL
// all-reduce with its channel row; two steps, one captured.
TimelineBuilder TwoRanks() {
  TimelineBuilder b;
  b.Rank(0);
  b.Rank(1);
  uint64_t at = 0;
  for (uint64_t d : {10, 20, 30, 40}) {
    b.Kernel(0, "gemm", at, at + d * kUs);
    at += 100 * kUs;
  }
  b.Kernel(1, "gemm", 0, 100 * kUs);
  for (int i = 0; i < 3; ++i) b.Kernel(1, "relu", 200 * kUs + i * 10 * kUs, 205 * kUs + i * 10 * kUs);
  b.Nvtx(0, "forward", 0, 50 * kUs, 1, 0);
  b.Nvtx(0, "forward", 100 * kUs, 170 * kUs, 1, 0);
  b.Nvtx(0, "tick", 60 * kUs, 60 * kUs, 1, 0);
  b.nvtx.back().record.type = static_cast<uint8_t>(NvtxType::kMark);
  b.Coll(0, "AllReduce", 7, 1, 0, 80 * kUs, 1 << 20);
  b.Coll(0, "AllReduce", 7, 1, 10 * kUs, 70 * kUs, 1 << 20);
  b.nccl.back().record.event_type = static_cast<uint8_t>(NcclEventType::kKernelCh);
  b.Step(0, 0, 0, 200 * kUs);
  b.Step(0, 1, 200 * kUs, 500 * kUs, kStepCaptured);
  return b;
}

TEST(Stats, KernelFiguresAreExactOverTheJobAndPerRank) {
  TempDir dir;
  const Timeline t = TwoRanks().WriteAndLoad(dir.File("t.h5"));
  const StatsTable job = ComputeStats(t, StatsReport::kKernels, /*per_rank=*/false);
  ASSERT_EQ(job.rows.size(), 2u);
  EXPECT_EQ(job.rows[0].name, "gemm") << "longest total first";
  const StatsRow& gemm = job.rows[0];
  EXPECT_EQ(gemm.count, 5u);
  EXPECT_EQ(gemm.total_ns, 200 * kUs);
  EXPECT_EQ(gemm.min_ns, 10 * kUs);
  EXPECT_EQ(gemm.max_ns, 100 * kUs);
  EXPECT_DOUBLE_EQ(gemm.mean_ns, 40.0 * kUs);
  EXPECT_DOUBLE_EQ(gemm.median_ns, 30.0 * kUs);
  // Sample standard deviation of 10, 20, 30, 40, 100 us: sqrt(5000 / 4) us.
  EXPECT_NEAR(gemm.stddev_ns, std::sqrt(5000.0 / 4) * kUs, 1e-6);
  EXPECT_DOUBLE_EQ(gemm.share, 200.0 / 215.0);
  EXPECT_DOUBLE_EQ(job.rows[1].share, 15.0 / 215.0);
  EXPECT_EQ(job.coverage, "the whole run");

  const StatsTable per = ComputeStats(t, StatsReport::kKernels, /*per_rank=*/true);
  ASSERT_EQ(per.rows.size(), 3u);
  const StatsRow* g0 = RowOf(per, "gemm", 0);
  ASSERT_NE(g0, nullptr);
  EXPECT_EQ(g0->count, 4u);
  EXPECT_DOUBLE_EQ(g0->median_ns, 25.0 * kUs) << "even count: the mean of the middle two";
  EXPECT_DOUBLE_EQ(g0->share, 1.0) << "its rank's only kernel";
  const StatsRow* r1 = RowOf(per, "relu", 1);
  ASSERT_NE(r1, nullptr);
  EXPECT_EQ(r1->stddev_ns, 0.0);
  EXPECT_DOUBLE_EQ(r1->share, 15.0 / 115.0);
  EXPECT_EQ(per.rows[0].rank, 0) << "rank by rank";
}

// NVTX marks have no duration and NCCL channel rows are parts of an
// operation: neither is a row. Steps in a capture window are their own row.
TEST(Stats, MarksChannelsAndCapturedStepsAreToldApart) {
  TempDir dir;
  const Timeline t = TwoRanks().WriteAndLoad(dir.File("t.h5"));
  const StatsTable nvtx = ComputeStats(t, StatsReport::kNvtx, false);
  ASSERT_EQ(nvtx.rows.size(), 1u);
  EXPECT_EQ(nvtx.rows[0].name, "forward");
  EXPECT_EQ(nvtx.rows[0].count, 2u);
  EXPECT_EQ(nvtx.rows[0].total_ns, 120 * kUs);
  const StatsTable nccl = ComputeStats(t, StatsReport::kNccl, false);
  ASSERT_EQ(nccl.rows.size(), 1u);
  EXPECT_EQ(nccl.rows[0].count, 1u);
  EXPECT_EQ(nccl.rows[0].total_ns, 80 * kUs);
  const StatsTable steps = ComputeStats(t, StatsReport::kSteps, false);
  ASSERT_EQ(steps.rows.size(), 2u);
  EXPECT_EQ(steps.rows[0].name, "step (in a capture window)");
  EXPECT_EQ(steps.rows[0].total_ns, 300 * kUs);
  EXPECT_EQ(steps.rows[1].name, "step");
}

// In the budgeted mode CUPTI's kinds exist only in the windows' steps: the
// table says so with their number; NVTX covers the whole run either way.
TEST(Stats, ABudgetedRunSaysWhichStepsItsTablesCover) {
  TempDir dir;
  TimelineBuilder b = TwoRanks();
  for (RankSummary& r : b.ranks) {
    r.capture_mode = static_cast<uint8_t>(CaptureMode::kBudgeted);
    r.steps = 1000;
    r.captured_steps = 12;
  }
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  EXPECT_EQ(ComputeStats(t, StatsReport::kKernels, false).coverage,
            "capture windows only: CUPTI recorded these in up to 12 of 1000 steps per rank "
            "(budgeted mode); totals are of those steps, not of the run");
  EXPECT_EQ(ComputeStats(t, StatsReport::kNvtx, false).coverage, "the whole run");
}

TEST(Stats, CsvQuotesNamesAndJsonEscapesThem) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Kernel(0, "void f<a, \"b\">(int)", 0, 10 * kUs);
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const StatsTable k = ComputeStats(t, StatsReport::kKernels, false);
  EXPECT_EQ(RenderStatsCsv(k),
            "rank,time_pct,total_ns,count,mean_ns,median_ns,min_ns,max_ns,stddev_ns,bytes,name\n"
            "all,100.0000,10000,1,10000.0,10000.0,10000,10000,0.0,0,\"void f<a, \"\"b\"\">(int)\"\n");
  EXPECT_NE(RenderStatsJson(k).find("\"name\":\"void f<a, \\\"b\\\">(int)\""), std::string::npos)
      << RenderStatsJson(k);
  EXPECT_NE(RenderStatsText(k, 0).find("100.0%"), std::string::npos) << RenderStatsText(k, 0);
}

int RunStats(const std::string& command, std::string* out) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The program: a job directory or a timeline, the report and format chosen;
// a bad report name is a usage error (2) naming the choices, an unreadable
// input exit 1 naming it.
TEST(Stats, TheProgramTakesAJobDirectoryAndSaysWhatIsWrong) {
  TempDir dir;
  TwoRanks().WriteAndLoad(dir.File("timeline.h5"));
  std::string out;
  EXPECT_EQ(RunStats(kStats + " " + dir.path(), &out), 0) << out;
  EXPECT_NE(out.find("GPU kernels (the whole run)"), std::string::npos) << out;
  EXPECT_NE(out.find("gemm"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunStats(kStats + " " + dir.File("timeline.h5") + " -r nccl --per-rank --format csv", &out),
            0)
      << out;
  EXPECT_NE(out.find("\n0,100.0000,80000,1,"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunStats(kStats + " " + dir.path() + " -r kernel", &out), 2) << out;
  EXPECT_NE(out.find("no report 'kernel' (one of: kernels, memcpy"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(RunStats(kStats + " " + dir.path() + " --format xml", &out), 2) << out;
  out.clear();
  EXPECT_EQ(RunStats(kStats + " " + dir.File("none.h5"), &out), 1) << out;
  EXPECT_NE(out.find(dir.File("none.h5")), std::string::npos) << out;
}

}  // namespace
}  // namespace aon::report
