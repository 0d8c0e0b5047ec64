// GPU counter verdicts (report/src/analyses/counters.cc, docs/counters.md): the
// rules at their boundaries, rows weighted by their overlap with a phase, the
// kernel dominance rule, ranks tied to GPUs by UUID, and the renderings.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "aon/report/finding_rules.h"
#include "aon/report/report.h"
#include "timeline_builder.h"

namespace aon::report {
namespace {

using testing::kMs;
using testing::kUs;
using testing::TempDir;
using testing::TimelineBuilder;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Means with one value per metric (weight 1); -1 leaves the metric out.
CounterMeans Means(double gpu_active, double tensor, double fp32, double dram, double sm = -1,
                   double occupancy = -1) {
  CounterMeans m;
  auto add = [&](CounterMetric metric, double v) {
    if (v >= 0) m.Add(static_cast<uint16_t>(metric), v, 1);
  };
  add(CounterMetric::kGpuActive, gpu_active);
  add(CounterMetric::kTensorActive, tensor);
  add(CounterMetric::kFp32Active, fp32);
  add(CounterMetric::kDramBandwidth, dram);
  add(CounterMetric::kSmActive, sm);
  add(CounterMetric::kSmOccupancy, occupancy);
  return m;
}

TEST(CounterVerdicts, EachVerdictAtItsBoundaries) {
  // busy < 50: launch-bound, whatever the pipes say.
  EXPECT_STREQ(VerdictName(JudgeCounters(Means(49.9, 90, 0, 90)).verdict), "launch-bound");
  EXPECT_STREQ(VerdictName(JudgeCounters(Means(50, 90, 0, 10)).verdict), "compute-bound");
  // compute >= 60 and >= memory.
  EXPECT_STREQ(VerdictName(JudgeCounters(Means(100, 60, 0, 20)).verdict), "compute-bound");
  EXPECT_STREQ(VerdictName(JudgeCounters(Means(100, 59.9, 0, 20)).verdict), "latency-bound");
  EXPECT_STREQ(VerdictName(JudgeCounters(Means(100, 80, 0, 80)).verdict),
               "compute-bound");  // a tie: compute
  EXPECT_STREQ(VerdictName(JudgeCounters(Means(100, 70, 0, 80)).verdict), "memory-bound");
  // memory >= 60.
  EXPECT_STREQ(VerdictName(JudgeCounters(Means(100, 10, 0, 60)).verdict), "memory-bound");
  EXPECT_STREQ(VerdictName(JudgeCounters(Means(100, 10, 0, 59.9)).verdict), "latency-bound");
  EXPECT_STREQ(VerdictName(JudgeCounters(Means(100, 59.9, 0, 59.9)).verdict), "latency-bound");
  // The pipes count while busy: idle time idles them too. Busy 62 % at 55 %
  // tensor ran the tensor cores 89 % of the time the GPU ran (cuBLAS GEMMs
  // between host gaps); busy 80 % at 40 % compute, 30 % DRAM is 50 % / 38 %.
  const CounterVerdict gemm = JudgeCounters(Means(62, 55, 0, 13));
  EXPECT_STREQ(VerdictName(gemm.verdict), "compute-bound");
  EXPECT_EQ(gemm.compute_pct, 55) << "the means are said as measured";
  EXPECT_NE(gemm.why.find("; while busy: compute 88.7 %, memory 21.0 %"), std::string::npos)
      << gemm.why;
  EXPECT_STREQ(VerdictName(JudgeCounters(Means(80, 40, 0, 30)).verdict), "latency-bound");
  EXPECT_STREQ(VerdictName(JudgeCounters(Means(75, 20, 0, 50)).verdict), "memory-bound");
  EXPECT_STREQ(VerdictName(JudgeCounters(Means(50, 10, 0, 29.9)).verdict), "latency-bound");
  // The busiest pipe is the compute side, and it is named.
  const CounterVerdict fp32 = JudgeCounters(Means(100, 20, 65, 30, 90, 40));
  EXPECT_STREQ(VerdictName(fp32.verdict), "compute-bound");
  EXPECT_EQ(fp32.compute_pipe, "fp32");
  EXPECT_EQ(fp32.compute_pct, 65);
  EXPECT_EQ(fp32.memory_pct, 30);
  EXPECT_EQ(fp32.busy_pct, 100);
  EXPECT_EQ(fp32.busy_metric, "gpu_active");
  EXPECT_EQ(fp32.sm_active_pct, 90);
  EXPECT_EQ(fp32.occupancy_pct, 40);
  EXPECT_EQ(fp32.why,
            "busy 100.0 % (gpu_active), compute 65.0 % (fp32), memory 30.0 %, "
            "sm_active 90.0 %, occupancy 40.0 %");
  EXPECT_FALSE(fp32.action.empty());
  // Without gpu_active, busy is sm_active.
  const CounterVerdict sm = JudgeCounters(Means(-1, 0, 0, 0, 45));
  EXPECT_STREQ(VerdictName(sm.verdict), "launch-bound");
  EXPECT_EQ(sm.busy_metric, "sm_active");
  EXPECT_EQ(sm.busy_pct, 45);
  // Busy, but nothing tells compute from memory: no verdict.
  EXPECT_STREQ(VerdictName(JudgeCounters(Means(90, -1, -1, -1)).verdict), "unknown");
  EXPECT_STREQ(VerdictName(JudgeCounters(Means(-1, 90, 0, 10)).verdict), "unknown");
}

constexpr const char* kGpuA = "GPU-aaaaaaaa-0000-0000-0000-000000000001";
constexpr const char* kGpuB = "GPU-bbbbbbbb-0000-0000-0000-000000000002";

// One sample interval of one GPU: busy, tensor, fp32, DRAM, in rank 0's file.
void Sample(TimelineBuilder* b, const std::string& uuid, uint32_t device, uint64_t start,
            uint64_t end, double busy, double tensor, double fp32, double dram,
            CounterSource source = CounterSource::kGpm) {
  b->Counter(0, uuid, device, CounterMetric::kGpuActive, start, end, busy, source);
  b->Counter(0, uuid, device, CounterMetric::kTensorActive, start, end, tensor, source);
  b->Counter(0, uuid, device, CounterMetric::kFp32Active, start, end, fp32, source);
  b->Counter(0, uuid, device, CounterMetric::kDramBandwidth, start, end, dram, source);
}

const CounterPhase* Phase(const CounterAnalysis& a, const std::string& name) {
  for (const CounterPhase& p : a.phases)
    if (p.name == name) return &p;
  return nullptr;
}

// Rows of 100 ms. A sample is an average over its whole interval, so an
// interval a phase fills only in part also speaks for what ran beside it: a
// phase is judged from the intervals it fills (>= 90 % of each). "optimizer",
// 150 to 475 ms, fills [200, 300) and [300, 400) and overlaps half of
// [100, 200) and three quarters of [400, 500), whose figures (a copy beside it,
// DRAM 95 %) do not reach its means. "zero_grad", 150 to 325 ms, fills one
// interval and overlaps 1.75: too short.
TEST(CounterPhases, APhaseIsJudgedFromTheIntervalsItFills) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Device(0, 0, kGpuA);
  Sample(&b, kGpuA, 0, 0, 100 * kMs, 100, 90, 0, 0);
  Sample(&b, kGpuA, 0, 100 * kMs, 200 * kMs, 95, 0, 5, 95);
  Sample(&b, kGpuA, 0, 200 * kMs, 300 * kMs, 40, 10, 20, 10);
  Sample(&b, kGpuA, 0, 300 * kMs, 400 * kMs, 30, 70, 5, 20);
  Sample(&b, kGpuA, 0, 400 * kMs, 500 * kMs, 95, 0, 5, 95);
  b.Nvtx(0, "optimizer", 150 * kMs, 475 * kMs, 1, 0);
  b.Nvtx(0, "zero_grad", 150 * kMs, 325 * kMs, 1, 1);
  // NCCL's own range of an API call (here a communicator's teardown): not a phase.
  b.Nvtx(0, "ncclCommDestroy", 0, 500 * kMs, 2, 0, "NCCL");
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const CounterAnalysis a = AnalyzeCounters(t, {});
  ASSERT_TRUE(a.present);
  EXPECT_EQ(Phase(a, "NCCL:ncclCommDestroy"), nullptr);
  EXPECT_EQ(a.phases.size(), 2u);
  const CounterPhase* p = Phase(a, "optimizer");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->intervals, 2);
  EXPECT_EQ(p->instances, 1u);
  EXPECT_DOUBLE_EQ(p->seconds, 0.325);
  EXPECT_DOUBLE_EQ(p->verdict.busy_pct, 35);
  EXPECT_DOUBLE_EQ(p->verdict.memory_pct, 15);
  EXPECT_DOUBLE_EQ(p->means.Mean(CounterMetric::kTensorActive), 40);
  EXPECT_STREQ(VerdictName(p->verdict.verdict), "launch-bound");  // 35 % busy
  EXPECT_EQ(p->verdict.why.find("blend"), std::string::npos) << p->verdict.why;
  const CounterPhase* short_phase = Phase(a, "zero_grad");
  ASSERT_NE(short_phase, nullptr);
  EXPECT_STREQ(VerdictName(short_phase->verdict.verdict), "too short");
  EXPECT_TRUE(Contains(short_phase->verdict.why, "too short for the counters' interval"))
      << short_phase->verdict.why;
  EXPECT_TRUE(Contains(short_phase->verdict.why, "1.75 sample intervals of 100 ms"))
      << short_phase->verdict.why;
  // The GPU over the run: each interval weighs its length.
  ASSERT_EQ(a.gpus.size(), 1u);
  EXPECT_DOUBLE_EQ(a.gpus[0].means.Mean(CounterMetric::kGpuActive),
                   (100.0 + 95 + 40 + 30 + 95) / 5);
  EXPECT_EQ(a.gpus[0].interval_ns, 100 * kMs);
  EXPECT_EQ(a.gpus[0].uuid_text, kGpuA);
  EXPECT_EQ(a.gpus[0].series.at(static_cast<uint16_t>(CounterMetric::kGpuActive)).size(), 5u);
}

// Phases that fill no interval, in steps of 100 ms aligned with the rows:
// "forward" covers the first 80 ms of each of four, "backward" the last 20 ms,
// "update" 40 ms in the middle of each of five others. "forward" covers most
// of every interval it overlaps: judged from them, each weighted by what it
// covers, and its verdict says that the figures blend it with its neighbours.
// "backward" overlaps 0.8 intervals in all: too short. "update" overlaps four
// in all but is 40 % of each: no verdict, and the reason says why.
TEST(CounterPhases, APhaseThatFillsNoIntervalIsJudgedOnlyWhenItIsMostOfThem) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Device(0, 0, kGpuA);
  const double dram[4] = {70, 80, 90, 60};
  for (uint64_t i = 0; i < 4; ++i) {
    const uint64_t at = i * 100 * kMs;
    Sample(&b, kGpuA, 0, at, at + 100 * kMs, 90, 5, 10, dram[i]);
    b.Nvtx(0, "forward", at, at + 80 * kMs, 1, 0);
    b.Nvtx(0, "backward", at + 80 * kMs, at + 100 * kMs, 1, 0);
  }
  for (uint64_t i = 4; i < 10; ++i) {
    const uint64_t at = i * 100 * kMs;
    Sample(&b, kGpuA, 0, at, at + 100 * kMs, 90, 5, 10, 20);
    if (i < 9) b.Nvtx(0, "update", at + 30 * kMs, at + 70 * kMs, 1, 0);
  }
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const CounterAnalysis a = AnalyzeCounters(t, {});
  const CounterPhase* fwd = Phase(a, "forward");
  ASSERT_NE(fwd, nullptr);
  EXPECT_DOUBLE_EQ(fwd->intervals, 3.2);
  EXPECT_DOUBLE_EQ(fwd->verdict.memory_pct, (70.0 + 80 + 90 + 60) / 4);
  EXPECT_STREQ(VerdictName(fwd->verdict.verdict), "memory-bound");
  EXPECT_TRUE(Contains(fwd->verdict.why, "blend it with what ran beside it, 80 % its own"))
      << fwd->verdict.why;
  const CounterPhase* bwd = Phase(a, "backward");
  ASSERT_NE(bwd, nullptr);
  EXPECT_STREQ(VerdictName(bwd->verdict.verdict), "too short");
  const CounterPhase* update = Phase(a, "update");
  ASSERT_NE(update, nullptr);
  EXPECT_STREQ(VerdictName(update->verdict.verdict), "too short");
  EXPECT_TRUE(Contains(update->verdict.why, "shares its counter intervals with other work"))
      << update->verdict.why;
  EXPECT_TRUE(Contains(update->verdict.why, "fills 0 of the 5 it overlaps, 40 %"))
      << update->verdict.why;
}

// Two ranks on one node, two GPUs whose rows all sit in rank 0's file; rank 0
// uses NVML GPU 1 and rank 1 GPU 0, so only the UUIDs tie them right.
TimelineBuilder TwoRanksTwoGpus(CounterSource source = CounterSource::kGpm) {
  TimelineBuilder b;
  b.Rank(0, "node1", RankStatus::kOk, "", 0);
  b.Rank(1, "node1", RankStatus::kOk, "", 1);
  b.Device(0, 0, kGpuB);
  b.Device(1, 0, kGpuA);
  for (uint64_t i = 0; i < 5; ++i) {
    Sample(&b, kGpuA, 0, i * 100 * kMs, (i + 1) * 100 * kMs, 20, 0, 5, 5, source);
    Sample(&b, kGpuB, 1, i * 100 * kMs, (i + 1) * 100 * kMs, 95, 85, 6, 20, source);
  }
  b.Nvtx(0, "forward", 0, 300 * kMs, 1, 0);
  b.Nvtx(1, "backward", 0, 400 * kMs, 1, 0);
  return b;
}

// A phase's time is wall time on its rank: worker threads run one range name at
// once, and four overlapping 300 ms ranges last 450 ms, not 1.2 s (a phase can
// never outlast the run).
TEST(CounterPhases, APhaseOnSeveralThreadsAtOnceLastsItsWallTime) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Device(0, 0, kGpuA);
  for (int i = 0; i < 5; ++i) {
    Sample(&b, kGpuA, 0, static_cast<uint64_t>(i) * 100 * kMs,
           static_cast<uint64_t>(i + 1) * 100 * kMs, 20, 10, 0, 5);
  }
  for (uint32_t tid = 1; tid <= 4; ++tid) {
    const uint64_t from = (tid - 1) * 50 * kMs;
    b.Nvtx(0, "decode_batch", from, from + 300 * kMs, tid, 0);
  }
  const CounterAnalysis a = AnalyzeCounters(b.WriteAndLoad(dir.File("t.h5")), {});
  const CounterPhase* p = Phase(a, "decode_batch");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->instances, 4u);
  EXPECT_DOUBLE_EQ(p->seconds, 0.45);
}

// Compilation is not a phase of the program: XLA's compile ranges are no
// phase, and a phase's time while its rank compiled (here 200 of its 500 ms,
// GPU idle then) is left out of its seconds and of the counters judging it.
TEST(CounterPhases, CompileTimeIsNoPhaseAndNotThePhases) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Device(0, 0, kGpuA);
  for (int i = 0; i < 5; ++i) {
    const bool compiling = i < 2;
    Sample(&b, kGpuA, 0, static_cast<uint64_t>(i) * 100 * kMs,
           static_cast<uint64_t>(i + 1) * 100 * kMs, compiling ? 0 : 95, compiling ? 0 : 85, 6, 20);
  }
  b.Nvtx(0, "train", 0, 500 * kMs, 1, 0);
  b.Nvtx(0, "XlaCompile:#module=jit_step#", 0, 200 * kMs, 2, 0);
  b.Nvtx(0, "XlaPass:#name=fusion,module=jit_step#", 10 * kMs, 150 * kMs, 3, 0);
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const CompileAnalysis c = AnalyzeCompilation(t);
  const CounterAnalysis a = AnalyzeCounters(t, {}, nullptr, nullptr, &c);
  EXPECT_EQ(Phase(a, "XlaCompile:#module=jit_step#"), nullptr);
  EXPECT_EQ(Phase(a, "XlaPass:#name=fusion,module=jit_step#"), nullptr);
  const CounterPhase* p = Phase(a, "train");
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(p->seconds, 0.3);
  EXPECT_NEAR(p->intervals, 3.0, 1e-9);
  EXPECT_EQ(p->verdict.verdict, Verdict::kComputeBound) << p->verdict.why;
}

// The phase-bottleneck finding names the phase the time is spent in: "step"
// (1 s) is memory-bound because "elementwise" inside it (0.8 s) is; the finding
// says "elementwise" for its 0.8 s, and ranks above a gap finding of 39 ms.
TEST(CounterPhases, TheBottleneckIsTheMostSpecificPhase) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Device(0, 0, kGpuA);
  for (int i = 0; i < 10; ++i) {
    const bool streaming = i < 8;
    Sample(&b, kGpuA, 0, static_cast<uint64_t>(i) * 100 * kMs,
           static_cast<uint64_t>(i + 1) * 100 * kMs, 95, streaming ? 2 : 85, 2,
           streaming ? 85 : 10);
  }
  b.Nvtx(0, "step", 0, 1000 * kMs, 1, 0);
  b.Nvtx(0, "elementwise", 0, 800 * kMs, 1, 1);
  b.Nvtx(0, "gemm", 800 * kMs, 1000 * kMs, 1, 1);
  // Busy GPU but for 1 ms before each of 40 late launches (39 gaps: 39 ms).
  for (uint64_t k = 0; k < 40; ++k) {
    const uint64_t at = k * 25 * kMs;
    b.Kernel(0, "triad_kernel", at + kMs, at + 25 * kMs, 1, static_cast<int64_t>(at + 990 * kUs));
  }
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  const CounterPhase* step = Phase(r.counters, "step");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->verdict.verdict, Verdict::kMemoryBound) << step->verdict.why;
  ASSERT_FALSE(r.findings.empty());
  const Finding& f = r.findings.front();
  EXPECT_EQ(f.kind, "phase-bottleneck");
  EXPECT_NE(f.action.find("Phase \"elementwise\" is memory-bound"), std::string::npos) << f.action;
  EXPECT_DOUBLE_EQ(f.numbers.at("seconds"), 0.8);
  EXPECT_EQ(f.gain_ns, 0u) << "a verdict states no gain";
  ASSERT_EQ(r.findings.size(), 2u);
  EXPECT_EQ(r.findings[1].kind, "host-work");  // the launching thread was silent 990 us
  EXPECT_EQ(r.findings[1].gain_ns, 39 * kMs);  // the 39 gaps after the first kernel
  // The same job, its node collector lost: the verdict, built on counters
  // only the collector reads, says they end there; the host-work finding,
  // built on the rank's own records (written by the rank itself), does not.
  b.ranks[0].flags = kRankCollectorLost;
  const Report lost = Analyze(b.WriteAndLoad(dir.File("lost.h5")));
  ASSERT_EQ(lost.findings.size(), 2u);
  EXPECT_NE(lost.findings[0].evidence.find(
                "built on incomplete records: rank 0's node collector exited while it ran: the "
                "node's GPU counters end there"),
            std::string::npos)
      << lost.findings[0].evidence;
  EXPECT_EQ(lost.findings[1].evidence.find("incomplete"), std::string::npos)
      << lost.findings[1].evidence;
}

// Counters that say "mostly idle" over a phase whose kernels (exact records)
// kept the GPU busy 95 % of it cannot be right: no verdict, and the report says
// why. The same counters over a phase the trace shows idle keep their verdict.
TEST(CounterPhases, CountersThatContradictTheTraceGiveNoVerdict) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Device(0, 0, kGpuA);
  for (int i = 0; i < 10; ++i) {
    Sample(&b, kGpuA, 0, static_cast<uint64_t>(i) * 100 * kMs,
           static_cast<uint64_t>(i + 1) * 100 * kMs, 30, 25, 2, 5);
  }
  b.Nvtx(0, "gemm", 0, 500 * kMs, 1, 0);
  b.Nvtx(0, "wait", 500 * kMs, 1000 * kMs, 1, 0);
  for (uint64_t k = 0; k < 50; ++k)
    b.Kernel(0, "sm90_gemm", k * 10 * kMs, k * 10 * kMs + 9500 * kUs);
  b.Kernel(0, "sm90_gemm", 990 * kMs, 995 * kMs);
  const CounterAnalysis a = AnalyzeCounters(b.WriteAndLoad(dir.File("t.h5")), {});
  const CounterPhase* gemm = Phase(a, "gemm");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->verdict.verdict, Verdict::kUnknown) << gemm->verdict.why;
  EXPECT_NE(gemm->verdict.why.find("trace has the GPU busy 95 %"), std::string::npos)
      << gemm->verdict.why;
  const CounterPhase* wait = Phase(a, "wait");
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->verdict.verdict, Verdict::kLaunchBound) << wait->verdict.why;
}

// The counters say a phase's GPU idles (busy < 50 %), not why; its traced gaps
// do. Three phases the counters see alike (busy 20 %): tiny kernels issued
// back to back every 25 us (launch overhead: launch-bound), one kernel per
// 1 ms of host work away from CUDA (host-bound, an input pipeline's action),
// and one per 1 ms after a synchronize that drained the queue (host-bound,
// synchronization's action). Without the trace's analysis all three stay
// launch-bound.
TEST(CounterPhases, AnIdlePhaseIsLaunchOrHostBoundAsItsTracedGapsSay) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Device(0, 0, kGpuA);
  for (uint64_t at = 0; at < 600 * kMs; at += 100 * kMs)
    Sample(&b, kGpuA, 0, at, at + 100 * kMs, 20, 1, 2, 3);
  constexpr uint32_t kTid = 9;
  // feed: a launch every 25 us, its kernel 4 us later for 5 us.
  for (uint64_t t = 1 * kMs; t + 25 * kUs < 199 * kMs; t += 25 * kUs)
    b.Kernel(0, "tiny", t + 4 * kUs, t + 9 * kUs, kTid, static_cast<int64_t>(t));
  b.Nvtx(0, "feed", 0, 200 * kMs, kTid, 0);
  // load: a launch, then 1 ms of host work with no CUDA call.
  for (uint64_t t = 201 * kMs; t + kMs < 399 * kMs; t += kMs)
    b.Kernel(0, "tiny", t + 4 * kUs, t + 9 * kUs, kTid, static_cast<int64_t>(t));
  b.Nvtx(0, "load", 200 * kMs, 400 * kMs, kTid, 0);
  // wait: a launch, a synchronize returning after the kernel, then host work.
  for (uint64_t t = 401 * kMs; t + kMs < 599 * kMs; t += kMs) {
    b.Kernel(0, "tiny", t + 4 * kUs, t + 9 * kUs, kTid, static_cast<int64_t>(t));
    b.Api(0, "cudaStreamSynchronize", t + 3 * kUs, t + 12 * kUs, kTid);
  }
  b.Nvtx(0, "wait", 400 * kMs, 600 * kMs, kTid, 0);
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const IdleAnalysis idle = AnalyzeIdle(t);
  const CounterAnalysis a = AnalyzeCounters(t, {}, nullptr, nullptr, nullptr, &idle);
  const CounterPhase* feed = Phase(a, "feed");
  const CounterPhase* load = Phase(a, "load");
  const CounterPhase* wait = Phase(a, "wait");
  ASSERT_TRUE(feed && load && wait);
  EXPECT_STREQ(VerdictName(feed->verdict.verdict), "launch-bound") << feed->verdict.why;
  // Each phase's gaps are its own cause's but for the one gap that crosses
  // into it from the phase before (2 ms of host time between the phases).
  auto share = [](const CounterPhase* p, GapCause c) {
    uint64_t all = 0;
    for (const auto& [cause, ns] : p->idle_ns) all += ns;
    return p->idle_ns.count(c) ? static_cast<double>(p->idle_ns.at(c)) / static_cast<double>(all)
                               : 0.0;
  };
  EXPECT_GT(share(feed, GapCause::kHostLate), 0.98);
  EXPECT_GT(share(load, GapCause::kHostWork), 0.98);
  EXPECT_GT(share(wait, GapCause::kHostSync), 0.98);
  EXPECT_TRUE(Contains(feed->verdict.why,
                       "the trace has its GPU idle 80 % of 200 ms traced: "
                       "host launched late 99 %"))
      << feed->verdict.why;
  EXPECT_TRUE(Contains(feed->verdict.action, "CUDA graphs")) << feed->verdict.action;
  EXPECT_STREQ(VerdictName(load->verdict.verdict), "host-bound") << load->verdict.why;
  EXPECT_TRUE(Contains(load->verdict.action, "DataLoader")) << load->verdict.action;
  EXPECT_STREQ(VerdictName(wait->verdict.verdict), "host-bound") << wait->verdict.why;
  EXPECT_TRUE(Contains(wait->verdict.action, ".item()")) << wait->verdict.action;
  // The gap time inside a phase is all of its traced time that no kernel
  // covers: load's 200 ms less its 197 kernels of 5 us.
  EXPECT_EQ(load->traced_ns, 200 * kMs);
  uint64_t load_idle = 0;
  for (const auto& [cause, ns] : load->idle_ns) load_idle += ns;
  EXPECT_EQ(load_idle, 200 * kMs - 197 * 5 * kUs);
  const CounterAnalysis counters_only = AnalyzeCounters(t, {});
  for (const char* name : {"feed", "load", "wait"})
    EXPECT_STREQ(VerdictName(Phase(counters_only, name)->verdict.verdict), "launch-bound") << name;
}

TEST(CounterPhases, RanksAreTiedToTheirGpusByUuid) {
  TempDir dir;
  TimelineBuilder b = TwoRanksTwoGpus();
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  ASSERT_EQ(t.devices.size(), 2u);
  const CounterAnalysis a = AnalyzeCounters(t, {});
  ASSERT_EQ(a.gpus.size(), 2u);
  EXPECT_EQ(a.gpus[0].device, 0u);
  EXPECT_EQ(a.gpus[0].uuid_text, kGpuA);
  EXPECT_EQ(a.gpus[0].ranks, std::vector<uint32_t>{1});
  EXPECT_EQ(a.gpus[1].device, 1u);
  EXPECT_EQ(a.gpus[1].ranks, std::vector<uint32_t>{0});
  EXPECT_FALSE(a.gpus[0].assumed);
  EXPECT_FALSE(a.gpus[1].assumed);
  EXPECT_TRUE(a.note.empty()) << a.note;
  const CounterPhase* fwd = Phase(a, "forward");
  ASSERT_NE(fwd, nullptr);
  EXPECT_STREQ(VerdictName(fwd->verdict.verdict), "compute-bound");
  EXPECT_DOUBLE_EQ(fwd->verdict.busy_pct, 95);
  EXPECT_DOUBLE_EQ(fwd->verdict.compute_pct, 85);
  EXPECT_EQ(fwd->verdict.compute_pipe, "tensor");
  EXPECT_DOUBLE_EQ(fwd->verdict.memory_pct, 20);
  EXPECT_EQ(fwd->intervals, 3);
  const CounterPhase* bwd = Phase(a, "backward");
  ASSERT_NE(bwd, nullptr);
  EXPECT_STREQ(VerdictName(bwd->verdict.verdict), "launch-bound");
  EXPECT_DOUBLE_EQ(bwd->verdict.busy_pct, 20);
  EXPECT_EQ(bwd->intervals, 4);
  // Longest first.
  EXPECT_EQ(a.phases[0].name, "backward");
}

TEST(CounterPhases, WithoutDevicesTheLocalRankIsTheGpuAndSaidAssumed) {
  TempDir dir;
  TimelineBuilder b = TwoRanksTwoGpus();
  b.devices.clear();
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const CounterAnalysis a = AnalyzeCounters(t, {});
  ASSERT_EQ(a.gpus.size(), 2u);
  EXPECT_EQ(a.gpus[0].ranks, std::vector<uint32_t>{0});  // NVML 0 = local rank 0
  EXPECT_EQ(a.gpus[1].ranks, std::vector<uint32_t>{1});
  EXPECT_TRUE(a.gpus[0].assumed);
  EXPECT_TRUE(Contains(a.note, "(assumed)")) << a.note;
  EXPECT_STREQ(VerdictName(Phase(a, "forward")->verdict.verdict), "launch-bound");
  EXPECT_STREQ(VerdictName(Phase(a, "backward")->verdict.verdict), "compute-bound");
}

// Four 10 ms intervals of rank 0's GPU. Kernel "gemm" is 90 %, 70 %, exactly 80 %
// and 0 % of the GPU-busy time in them: intervals 0 and 2 speak for it; "softmax"
// fills interval 3 alone: one interval, not enough.
TEST(CounterKernels, OnlyIntervalsAKernelDominatesJudgeIt) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Device(0, 0, kGpuA);
  const double busy[] = {90, 100, 70, 50}, dram[] = {65, 10, 75, 99};
  for (uint64_t i = 0; i < 4; ++i)
    Sample(&b, kGpuA, 0, i * 10 * kMs, (i + 1) * 10 * kMs, busy[i], 10, 20, dram[i]);
  b.Kernel(0, "gemm", 0, 9 * kMs);
  b.Kernel(0, "softmax", 9 * kMs, 10 * kMs);
  b.Kernel(0, "gemm", 10 * kMs, 17 * kMs);
  b.Kernel(0, "softmax", 17 * kMs, 20 * kMs);
  b.Kernel(0, "gemm", 20 * kMs, 28 * kMs);
  b.Kernel(0, "softmax", 28 * kMs, 30 * kMs);
  b.Kernel(0, "softmax", 30 * kMs, 35 * kMs);
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const CounterAnalysis a = AnalyzeCounters(t, TopKernels(t));
  ASSERT_EQ(a.kernels.size(), 2u);
  EXPECT_EQ(a.kernels[0].name, "gemm");
  EXPECT_EQ(a.kernels[0].intervals, 2u);
  EXPECT_STREQ(VerdictName(a.kernels[0].verdict.verdict), "memory-bound");
  EXPECT_DOUBLE_EQ(a.kernels[0].verdict.busy_pct, 80);
  EXPECT_DOUBLE_EQ(a.kernels[0].verdict.memory_pct, 70);
  EXPECT_EQ(a.kernels[1].name, "softmax");
  EXPECT_EQ(a.kernels[1].intervals, 1u);
  EXPECT_STREQ(VerdictName(a.kernels[1].verdict.verdict), "unknown");
  EXPECT_TRUE(Contains(a.kernels[1].verdict.why, "per-kernel figures come from PM samples"))
      << a.kernels[1].verdict.why;
}

TEST(CounterReport, NoCountersIsSaidAndNothingBreaks) {
  TempDir dir;
  TimelineBuilder b;
  testing::PlantStraggler(&b, 2, 4, false);
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  ASSERT_TRUE(t.counters.empty());
  const Report r = Analyze(t);
  EXPECT_FALSE(r.counters.present);
  EXPECT_TRUE(r.counters.phases.empty());
  EXPECT_TRUE(Contains(r.counters.note, "no GPU counters in this timeline")) << r.counters.note;
  EXPECT_TRUE(Contains(RenderTerminal(r), "GPU counters: no GPU counters in this timeline"));
  const std::string html = RenderHtml(r);
  EXPECT_TRUE(Contains(html, "<section id=counters>"));
  EXPECT_FALSE(Contains(html, "plot-counters-"));
  EXPECT_TRUE(Contains(RenderJson(r), "\"counters\":{\"present\":false,"));
  for (const Finding& f : r.findings) EXPECT_NE(f.kind, "phase-bottleneck");
}

TEST(CounterReport, VerdictsReachTheTerminalHtmlJsonAndFindings) {
  TempDir dir;
  TimelineBuilder b = TwoRanksTwoGpus(CounterSource::kSynthetic);
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  ASSERT_TRUE(r.counters.present);
  EXPECT_TRUE(r.counters.synthetic);
  const std::string text = RenderTerminal(r);
  EXPECT_TRUE(Contains(text, "GPU counters (synthetic, 2 GPUs) *** SYNTHETIC: FAKE counters ***"))
      << text;
  EXPECT_TRUE(Contains(text,
                       "compute-bound busy 95.0 % (gpu_active), compute 85.0 % (tensor), "
                       "memory 20.0 %"))
      << text;
  const std::string html = RenderHtml(r);
  EXPECT_TRUE(Contains(html, "<section id=counters>"));
  EXPECT_TRUE(Contains(html, "<svg class=plot id=plot-counters-0 "));
  EXPECT_TRUE(Contains(html, "<svg class=plot id=plot-counters-1 "));
  EXPECT_TRUE(Contains(html, "<td class=l>forward</td>"));
  EXPECT_TRUE(Contains(html, "<b>compute-bound</b>"));
  EXPECT_TRUE(Contains(html, "<b>launch-bound</b>"));
  const std::string json = RenderJson(r);
  EXPECT_TRUE(Contains(json, "{\"name\":\"forward\",\"verdict\":\"compute-bound\",")) << json;
  EXPECT_TRUE(Contains(json, "{\"name\":\"backward\",\"verdict\":\"launch-bound\","));
  EXPECT_TRUE(Contains(json, "\"busy_pct\":95,"));
  EXPECT_TRUE(Contains(json, "\"compute_pipe\":\"tensor\","));
  EXPECT_TRUE(Contains(json, "\"device\":1,\"uuid\":\"" + std::string(kGpuB) + "\""));
  // The longest phase that is not compute-bound, without a gain.
  const Finding* f = nullptr;
  for (const Finding& x : r.findings)
    if (x.kind == "phase-bottleneck") f = &x;
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->gain_ns, 0u);
  EXPECT_EQ(
      f->action.rfind("Phase \"backward\" is launch-bound for 400 ms of the run: GPU not fed", 0),
      0u)
      << f->action;
  EXPECT_TRUE(Contains(f->evidence, "over 4.0 sample intervals: busy 20.0 %")) << f->evidence;
  EXPECT_TRUE(Contains(f->evidence, "(SYNTHETIC counters)")) << f->evidence;
}

// A GPU read by both tiers (the node's GPM metrics and PM samples in capture
// windows) is one GPU with two plots, each named by its tier and interval.
TEST(CounterReport, AGpuWithBothTiersIsCountedOnceAndEachPlotSaysItsTier) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0, "node1", RankStatus::kOk, "", 0);
  b.Device(0, 0, kGpuA);
  for (uint64_t i = 0; i < 5; ++i)
    Sample(&b, kGpuA, 0, i * 100 * kMs, (i + 1) * 100 * kMs, 95, 85, 6, 20, CounterSource::kGpm);
  for (uint64_t i = 0; i < 50; ++i)
    Sample(&b, kGpuA, 0, i * 100'000, (i + 1) * 100'000, 95, 85, 6, 20, CounterSource::kPmSampling);
  b.Nvtx(0, "forward", 0, 300 * kMs, 1, 0);
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  ASSERT_EQ(r.counters.gpus.size(), 2u) << "one entry per tier";
  const std::string text = RenderTerminal(r);
  EXPECT_TRUE(Contains(text, "GPU counters (gpm, pm sampling, 1 GPU):")) << text;
  const std::string html = RenderHtml(r);
  // Each plot's title names its GPU, its host, the rank on it and its tier.
  EXPECT_TRUE(Contains(html, "<h3>GPU 0 on node1 (rank 0): gpm, every 100 ms</h3>")) << html;
  EXPECT_TRUE(Contains(
      html, "<h3>GPU 0 on node1 (rank 0): pm sampling (capture windows), every 100 us</h3>"))
      << html;
}

// A long run (here 3000 samples) is drawn with at most one point per pixel
// column of the 900-pixel plot, each line.
TEST(CounterReport, LongRunsArePlottedAtMostOnePointPerPixel) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Device(0, 0, kGpuA);
  for (uint64_t i = 0; i < 3000; ++i)
    Sample(&b, kGpuA, 0, i * kMs, (i + 1) * kMs, static_cast<double>(i % 100), 10, 10, 10);
  const std::string html = RenderHtml(Analyze(b.WriteAndLoad(dir.File("t.h5"))));
  const size_t plot = html.find("<svg class=plot id=plot-counters-0 ");
  ASSERT_NE(plot, std::string::npos);
  const size_t end = html.find("</svg>", plot);
  size_t lines = 0;
  for (size_t at = html.find("points='", plot); at < end; at = html.find("points='", at + 1)) {
    ++lines;
    const std::string pts = html.substr(at + 8, html.find('\'', at + 8) - at - 8);
    const size_t n = static_cast<size_t>(std::count(pts.begin(), pts.end(), ' '));
    EXPECT_GT(n, 0u);
    EXPECT_LE(n, 900u);
  }
  EXPECT_EQ(lines, 3u);  // gpu_active, tensor_active, dram_bandwidth (no sm_active rows)
}

}  // namespace
}  // namespace aon::report
