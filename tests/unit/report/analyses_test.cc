// The report's analyses on small merged timelines with known answers.
#include <gtest/gtest.h>

#include <cmath>

#include "aon/report/report.h"
#include "timeline_builder.h"

namespace aon::report {
namespace {

using testing::kMs;
using testing::kUs;
using testing::TempDir;
using testing::TimelineBuilder;

const Finding* FindKind(const Report& r, const std::string& kind) {
  for (const Finding& f : r.findings) {
    if (f.kind == kind) return &f;
  }
  return nullptr;
}

class StragglerTest : public ::testing::TestWithParam<bool> {};

TEST_P(StragglerTest, PlantedStragglerIsFindingOneWithItsLostTime) {
  const bool nccl_records = GetParam();
  TempDir dir;
  TimelineBuilder b;
  testing::PlantStraggler(&b, /*late=*/2, /*steps=*/10, nccl_records);
  const Timeline t = b.WriteAndLoad(dir.File("timeline.h5"));
  const Report r = Analyze(t);

  EXPECT_EQ(r.comm.source,
            nccl_records ? "NCCL records" : "NCCL kernels (matched across ranks by order)");
  ASSERT_EQ(r.comm.collectives.size(), 10u);
  for (const Collective& c : r.comm.collectives) {
    EXPECT_EQ(c.type, "AllReduce");
    EXPECT_EQ(c.last_rank, 2u);
    EXPECT_EQ(c.skew_ns, 5 * kMs);
    EXPECT_EQ(c.lost_ns, 15 * kMs);  // three ranks wait 5 ms each
    EXPECT_EQ(c.straggle_ns, 5 * kMs);
    EXPECT_EQ(c.transfer_ns, 2 * kMs);
  }
  EXPECT_EQ(r.comm.stragglers[2].last_count, 10u);
  EXPECT_DOUBLE_EQ(r.comm.stragglers[2].last_fraction, 1.0);
  EXPECT_EQ(r.comm.stragglers[2].caused_lost_ns, 150 * kMs);
  EXPECT_EQ(r.comm.stragglers[0].waited_ns, 50 * kMs);
  EXPECT_EQ(r.comm.stragglers[2].waited_ns, 0u);

  ASSERT_FALSE(r.findings.empty());
  const Finding& f = r.findings[0];
  EXPECT_EQ(f.kind, "straggler");
  EXPECT_EQ(f.rank, 2);
  EXPECT_EQ(f.gain_ns, 50 * kMs);
  EXPECT_DOUBLE_EQ(f.numbers.at("lost_ns"), 150.0 * kMs);
  EXPECT_DOUBLE_EQ(f.numbers.at("lost_per_step_ns"), 15.0 * kMs);
  EXPECT_NE(f.action.find("rank 2"), std::string::npos) << f.action;
  EXPECT_NE(f.action.find("100 %"), std::string::npos) << f.action;
  EXPECT_NE(f.evidence.find("data_loader"), std::string::npos) << f.evidence;
  EXPECT_NEAR(f.numbers.at("range_extra_per_step_ns"), 5.0 * kMs, 1.0);
  // Nothing else in this timeline is worth more than the straggler.
  for (size_t i = 1; i < r.findings.size(); ++i) EXPECT_LT(r.findings[i].gain_ns, f.gain_ns);

  // Steps come from the "step N" ranges.
  EXPECT_EQ(r.steps.typical_count, 10u);
  EXPECT_NE(r.steps.method.find("step #"), std::string::npos) << r.steps.method;
  EXPECT_NEAR(r.breakdown[0].step_mean_ns, 17200.0 * kUs, 1.0);

  // Exposed communication: ranks 0,1,3 spend 7 ms in the all-reduce (5 waiting), rank 2 2 ms.
  EXPECT_EQ(r.breakdown[0].comm_ns, 70 * kMs);
  EXPECT_EQ(r.breakdown[0].exposed_comm_ns, 70 * kMs);
  EXPECT_EQ(r.breakdown[2].comm_ns, 20 * kMs);
  const Finding* exposed = FindKind(r, "exposed-communication");
  ASSERT_NE(exposed, nullptr);
  EXPECT_EQ(exposed->gain_ns, 20 * kMs);  // waiting is the straggler's, not exposed comm's

  // Rank 2's idle time while its host is in data_loader is folded into the straggler.
  const Finding* launch = FindKind(r, "launch-bound");
  if (launch != nullptr) {
    EXPECT_NE(launch->rank, 2);
  }
  EXPECT_NE(f.evidence.find("waits"), std::string::npos) << f.evidence;
}

TEST_P(StragglerTest, BusBandwidthFromRecordsOrUnknownFromKernels) {
  const bool nccl_records = GetParam();
  TempDir dir;
  TimelineBuilder b;
  testing::PlantStraggler(&b, 1, 4, nccl_records);
  const Report r = Analyze(b.WriteAndLoad(dir.File("timeline.h5")));
  ASSERT_EQ(r.comm.groups.size(), 1u);
  const CommGroup& g = r.comm.groups[0];
  EXPECT_EQ(g.type, "AllReduce");
  EXPECT_EQ(g.count, 4u);
  EXPECT_EQ(g.nranks, 4u);
  EXPECT_DOUBLE_EQ(g.mean_transfer_ns, 2.0 * kMs);
  if (nccl_records) {
    EXPECT_EQ(g.bytes, 64ull << 20);
    EXPECT_EQ(g.algo, "RING");
    EXPECT_EQ(g.proto, "SIMPLE");
    const double algbw = (64.0 * 1024 * 1024) / (2.0 * kMs);  // bytes/ns = GB/s
    EXPECT_NEAR(g.algbw_gbps, algbw, 1e-9);
    EXPECT_NEAR(g.busbw_gbps, algbw * 2 * 3 / 4, 1e-9);
  } else {
    EXPECT_EQ(g.bytes, 0u);
    EXPECT_EQ(g.algbw_gbps, 0);
    EXPECT_EQ(g.algo, "RING");  // parsed from the kernel name
    EXPECT_EQ(g.proto, "LL");
  }
}

INSTANTIATE_TEST_SUITE_P(NcclPaths, StragglerTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Records" : "KernelOrder";
                         });

// Two ranks; each step one all-reduce that rank 1 reaches 8 ms late, then
// three small collectives that rank 0 reaches 20 us after rank 1 (a tie: who
// is "last" there is noise). Rank 1 is last at a quarter of the collectives,
// and causes nearly all the waiting: it is the straggler, by its lateness.
TEST(Communication, AStragglerIsTheRankLateForMostOfTheWaitingNotOnlyTheOftenLast) {
  TempDir dir;
  TimelineBuilder b;
  constexpr int kSteps = 12;
  const uint64_t period = 20 * kMs;
  for (uint32_t r = 0; r < 2; ++r) b.Rank(r);
  for (int s = 0; s < kSteps; ++s) {
    const uint64_t base = static_cast<uint64_t>(s) * period + kMs;
    for (uint32_t r = 0; r < 2; ++r) {
      b.Nvtx(r, "step " + std::to_string(s), base, base + period - 100 * kUs, 100 + r, 0);
      b.Kernel(r, "gemm", base, base + 2 * kMs, 100 + r, base);
      const uint64_t arrival = base + 2 * kMs + (r == 1 ? 8 * kMs : 0);
      b.Coll(r, "AllReduce", 0xa, static_cast<uint64_t>(s), arrival, base + 11 * kMs, 4 << 20);
      for (uint64_t k = 0; k < 3; ++k) {
        const uint64_t at = base + (12 + k) * kMs + (r == 0 ? 20 * kUs : 0);
        b.Coll(r, "Broadcast", 0xb, static_cast<uint64_t>(s) * 3 + k, at, at + 500 * kUs, 4096);
      }
    }
  }
  const Report r = Analyze(b.WriteAndLoad(dir.File("timeline.h5")));
  ASSERT_EQ(r.comm.collectives.size(), 4u * kSteps);
  EXPECT_DOUBLE_EQ(r.comm.stragglers[1].last_fraction, 0.25);
  EXPECT_DOUBLE_EQ(r.comm.stragglers[0].last_fraction, 0.75);
  const Finding* f = FindKind(r, "straggler");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->gain_ns, kSteps * 8 * kMs);
  EXPECT_NEAR(f->numbers.at("lateness_share"), 8000.0 / (8000 + 60), 1e-9);
  EXPECT_NE(f->evidence.find("causes 99"), std::string::npos) << f->evidence;
}

TEST(Communication, RecordsOnlyMatchCollectivesSeenOnAllRanks) {
  TempDir dir;
  TimelineBuilder b;
  for (uint32_t r = 0; r < 3; ++r) b.Rank(r);
  for (uint32_t r = 0; r < 3; ++r) {
    b.Kernel(r, "gemm", 0, 10 * kMs);
    b.Coll(r, "AllGather", 7, 0, (1 + r) * kMs, 20 * kMs, 3 << 20);
  }
  // seq 1 only on ranks 0 and 1: not comparable.
  b.Coll(0, "AllGather", 7, 1, 30 * kMs, 31 * kMs, 3 << 20);
  b.Coll(1, "AllGather", 7, 1, 30 * kMs, 31 * kMs, 3 << 20);
  const Communication c = AnalyzeCommunication(b.WriteAndLoad(dir.File("t.h5")));
  ASSERT_EQ(c.collectives.size(), 1u);
  EXPECT_EQ(c.collectives[0].last_rank, 2u);
  EXPECT_EQ(c.collectives[0].skew_ns, 2 * kMs);
  EXPECT_EQ(c.collectives[0].lost_ns, 3 * kMs);  // 2 + 1
  EXPECT_EQ(c.collectives[0].straggle_ns, 1 * kMs);
}

TEST(Communication, OverlappingBucketsAndAWarmupStepDoNotInflateTheStraggler) {
  // DDP-like: 4 bucket all-reduces per step, issued 0.1 ms apart; rank 1 calls them
  // 5 ms late (25 ms in the warm-up step 0). The others wait 5.3 ms per step, not 4 x 5.
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Rank(1);
  for (int s = 0; s < 10; ++s) {
    const uint64_t base = static_cast<uint64_t>(s) * 40 * kMs;
    const uint64_t delay = s == 0 ? 25 * kMs : 5 * kMs;
    for (uint32_t r = 0; r < 2; ++r) {
      b.Nvtx(r, "step " + std::to_string(s), base, base + 39 * kMs, 100 + r, 0);
      b.Kernel(r, "gemm", base + 100 * kUs, base + 39900 * kUs, 100 + r, base + 50 * kUs);
      for (uint64_t k = 0; k < 4; ++k) {
        const uint64_t arrival = base + 1 * kMs + k * 100 * kUs + (r == 1 ? delay : 0);
        b.Coll(r, "AllReduce", 1, static_cast<uint64_t>(s) * 4 + k, arrival, base + 38 * kMs,
               1 << 20);
      }
    }
  }
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  const StragglerStats& s1 = r.comm.stragglers[1];
  EXPECT_EQ(s1.last_count, 40u);
  EXPECT_EQ(s1.gain_ns, 9 * 5300 * kUs + 25300 * kUs);  // union per step, whole run
  EXPECT_EQ(s1.steady_gain_ns, 10 * 5300 * kUs);        // median step x 10
  EXPECT_EQ(s1.steady_lost_ns, 10 * 5300 * kUs);
  EXPECT_EQ(r.comm.stragglers[0].waited_ns, 9 * 5300 * kUs + 25300 * kUs);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].kind, "straggler");
  EXPECT_EQ(r.findings[0].rank, 1);
  EXPECT_DOUBLE_EQ(r.findings[0].numbers.at("lost_per_step_ns"), 5300.0 * kUs);
}

TEST(Communication, BusBandwidthFactorsFollowNccl) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor("AllReduce", 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor("AllReduce", 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor("AllGather", 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor("ReduceScatter", 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor("Broadcast", 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor("Reduce", 8), 1.0);
}

TEST(Communication, CrossHostSkewsCarryACaveatWhenClocksAreNotSynchronized) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0, "nodeA");
  b.Rank(1, "nodeB");
  for (uint32_t r = 0; r < 2; ++r) {
    for (int k = 0; k < 3; ++k)
      b.Kernel(r, "ncclKernel_AllReduce_RING_LL_Sum_float", k * kMs + r * 100 * kUs,
               k * kMs + 500 * kUs);
  }
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  EXPECT_FALSE(r.comm.skew_trustworthy);
  EXPECT_NE(r.comm.caveat.find("not trustworthy"), std::string::npos);
  EXPECT_NE(RenderTerminal(r).find("not trustworthy"), std::string::npos);
}

TEST(Idle, PlantedGapsGetTheirHostSideCause) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  const uint32_t tid = 42;
  b.Nvtx(0, "step 0", 0, 10 * kMs, tid, 0);
  b.Nvtx(0, "data", 2050 * kUs, 3600 * kUs, tid, 1);
  b.Kernel(0, "k1", 0, 1 * kMs, tid, 0);
  // cudaStreamSynchronize waits for k1 and returns at 1.05 ms; the host launches k2 only at 1.5 ms.
  b.Api(0, "cudaStreamSynchronize", 500 * kUs, 1050 * kUs, tid);
  b.Kernel(0, "k2", 1600 * kUs, 2 * kMs, tid, 1500 * kUs);
  // A synchronous pageable cudaMemcpy: the host stages the buffer, the DMA starts at 3 ms.
  const uint32_t corr =
      b.Memcpy(0, 3 * kMs, 3500 * kUs, 4 << 20, /*HtoD*/ 1, /*pageable*/ true, /*async*/ false);
  b.Api(0, "cudaMemcpy", 2100 * kUs, 3500 * kUs, tid, corr);
  b.Kernel(0, "k3", 3500 * kUs, 4 * kMs, tid, 3400 * kUs);
  // A gap below the threshold (5 us) is not listed.
  b.Kernel(0, "k4", 4005 * kUs, 5 * kMs, tid, 3900 * kUs);
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const IdleAnalysis a = AnalyzeIdle(t);
  ASSERT_EQ(a.top_gaps.size(), 2u);
  const Gap& copy = a.top_gaps[0];
  EXPECT_EQ(copy.cause, GapCause::kSyncCopy);
  EXPECT_EQ(copy.start_ns, 2 * kMs);
  EXPECT_EQ(copy.end_ns, 3 * kMs);
  EXPECT_NE(copy.detail.find("cudaMemcpy HtoD 4 MiB pageable"), std::string::npos) << copy.detail;
  EXPECT_EQ(copy.nvtx, "data");
  const Gap& sync = a.top_gaps[1];
  EXPECT_EQ(sync.cause, GapCause::kHostSync);
  EXPECT_EQ(sync.length(), 600 * kUs);
  EXPECT_EQ(sync.detail, "cudaStreamSynchronize");
  EXPECT_EQ(sync.nvtx, "step #");
  EXPECT_EQ(a.cause_ns[0].at(GapCause::kHostSync), 600 * kUs);
  EXPECT_EQ(a.cause_ns[0].at(GapCause::kSyncCopy), 1 * kMs);
  EXPECT_EQ(a.cause_ns[0].count(GapCause::kHostLate), 0u);

  const Report r = Analyze(t);
  const Finding* pageable = FindKind(r, "pageable-copies");
  ASSERT_NE(pageable, nullptr);
  EXPECT_EQ(pageable->gain_ns, 1 * kMs + 250 * kUs);  // the gap + half the pageable copy time
  EXPECT_NE(pageable->evidence.find("1 pageable copies, 4 MiB"), std::string::npos)
      << pageable->evidence;
  const Finding* sync_finding = FindKind(r, "idle-host-sync");
  ASSERT_NE(sync_finding, nullptr);
  EXPECT_EQ(sync_finding->gain_ns, 600 * kUs);
  EXPECT_EQ(r.findings[0].kind, "pageable-copies");
  EXPECT_EQ(r.memory[0].pageable_count, 1u);
  EXPECT_EQ(r.memory[0].pageable_bytes, 4u << 20);
  EXPECT_NE(pageable->evidence.find("no pinned copy to compare: pinning assumed to double"),
            std::string::npos)
      << pageable->evidence;
}

// Ten 50 ms steps of rank 0, each a 256 MiB pageable host-to-device copy of
// 40 ms (6.7 GB/s), then a 9 ms GEMM.
constexpr uint64_t kPageableBytes = 256ull << 20;
void PlantPageableSteps(TimelineBuilder* b) {
  for (uint64_t s = 0; s < 10; ++s) {
    const uint64_t at = kMs + s * 50 * kMs;
    b->Step(0, s, at, at + 50 * kMs, 0, StepSource::kPytorch);
    const uint32_t corr = b->Memcpy(0, at + kMs, at + 41 * kMs, kPageableBytes, 1, true, true);
    b->Api(0, "cudaMemcpyAsync", at + kMs - 5 * kUs, at + 41 * kMs, 1, corr);
    b->Kernel(0, "sm90_gemm", at + 41 * kMs, at + 50 * kMs, 1);
  }
}

// What pinning saves comes from the run's own pinned copies when it has any:
// 10 steps, each copying 256 MiB from pageable memory in 40 ms (6.7 GB/s),
// and one 256 MiB pinned copy of 5 ms (53.7 GB/s): 35 ms a step, not half of 40.
TEST(Idle, PinningSavesWhatTheRunsOwnPinnedCopiesShow) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  PlantPageableSteps(&b);
  b.Memcpy(0, 600 * kMs, 605 * kMs, kPageableBytes, 1, false, true);
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  const Finding* pageable = FindKind(r, "pageable-copies");
  ASSERT_NE(pageable, nullptr);
  EXPECT_NEAR(pageable->numbers.at("pinning_saves_ns"), 10 * 35.0 * kMs, 1e3);
  EXPECT_NEAR(pageable->gain_per_step_ns, 35.0 * kMs, 0.5 * kMs);
  EXPECT_NE(pageable->evidence.find("at 6.7 GB/s (pinned copies of this run reached 53.7 GB/s)"),
            std::string::npos)
      << pageable->evidence;
}

// Pageable copies in every fifth step only: the median step saves nothing, the
// mean says what they cost: two copies of 40 ms that pinned would take 5 ms
// (the run's own pinned rate), 70 ms over the ten steps.
TEST(Idle, PinningSavesOfCopiesInSomeStepsIsTheirMean) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  for (uint64_t s = 0; s < 10; ++s) {
    const uint64_t at = kMs + s * 50 * kMs;
    b.Step(0, s, at, at + 50 * kMs, 0, StepSource::kPytorch);
    if (s % 5 == 0) b.Memcpy(0, at + kMs, at + 41 * kMs, kPageableBytes, 1, true, true);
    b.Kernel(0, "sm90_gemm", at + 41 * kMs, at + 50 * kMs, 1);
  }
  b.Memcpy(0, 600 * kMs, 605 * kMs, kPageableBytes, 1, false, true);
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  ASSERT_EQ(r.memory.size(), 1u);
  EXPECT_NEAR(static_cast<double>(r.memory[0].pinning_saves_ns), 2 * 35.0 * kMs, 1e3);
}

// Without a pinned copy of its own, the run's reference is its GPU's PCIe link:
// what the copies' bytes take at the most the link carries (an upper bound on
// the saving, said so); without the link either, half the copies' time.
TEST(Idle, PinningSavesAtMostWhatTheLinkCarriesWithoutAPinnedCopy) {
  EXPECT_NEAR(PcieLinkRate(5, 16), 64.0 * 128 / 130 * 256 / 280, 1e-9);
  EXPECT_NEAR(PcieLinkRate(4, 8), 16.0 * 128 / 130 * 256 / 280, 1e-9);
  EXPECT_NEAR(PcieLinkRate(2, 16), 10.0 * 0.8 * 256 / 280, 1e-9);
  EXPECT_EQ(PcieLinkRate(0, 16), 0.0);
  EXPECT_EQ(PcieLinkRate(7, 16), 0.0);
  for (const uint32_t gen : {5u, 4u, 0u}) {
    TempDir dir;
    TimelineBuilder b;
    b.Rank(0);
    b.Device(0, 0, "GPU-0");
    b.devices.back().record.pcie_gen = gen;
    b.devices.back().record.pcie_width = 16;
    PlantPageableSteps(&b);
    const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
    const Finding* pageable = FindKind(r, "pageable-copies");
    ASSERT_NE(pageable, nullptr) << gen;
    const double link = PcieLinkRate(gen, 16);
    const double per_copy = link > 0 ? 40.0 * kMs - kPageableBytes / link : 20.0 * kMs;
    EXPECT_NEAR(pageable->numbers.at("pinning_saves_ns"), 10 * per_copy, 1e3) << gen;
    const std::string said =
        gen == 5   ? "no pinned copy to compare: at most the GPU's PCIe gen5 x16 link, 57.6 GB/s"
        : gen == 4 ? "at most the GPU's PCIe gen4 x16 link, 28.8 GB/s"
                   : "no pinned copy to compare: pinning assumed to double the rate";
    EXPECT_NE(pageable->evidence.find(said), std::string::npos) << pageable->evidence;
  }
}

TEST(Idle, SteadyStateIgnoresAWarmupStep) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Kernel(0, "init", 0, 500 * kUs, 5, 0);
  for (int s = 0; s < 5; ++s) {
    const uint64_t base = 1 * kMs + static_cast<uint64_t>(s) * 10 * kMs;
    b.Nvtx(0, "step " + std::to_string(s), base, base + 10 * kMs, 5, 0);
    // The GPU waits for the host 1 ms per step, 6 ms in step 0 (warm-up).
    const uint64_t late = s == 0 ? 6 * kMs : 1 * kMs;
    b.Kernel(0, "k", base + late, base + late + 2 * kMs, 5, base + late);
    // Queued before the GPU ran dry: the gap before it is a dependency, not the host.
    b.Kernel(0, "k", base + 9 * kMs, base + 10 * kMs, 5, base + late + 1 * kMs);
  }
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  // Host-late gaps: 1 ms in steps 1-4, 6.5 ms before step 0's first kernel (6 ms of it
  // inside step 0): whole run 10.5 ms, steady = median 1 ms x 5 steps.
  // The host ran 1 ms (6 in step 0) without a CUDA call before each late launch:
  // host work, not launch overhead.
  EXPECT_EQ(r.idle.cause_ns[0].at(GapCause::kHostWork), 10500 * kUs);
  EXPECT_EQ(r.idle.Steady(0, GapCause::kHostWork), 5 * kMs);
  EXPECT_EQ(r.idle.cause_ns[0].count(GapCause::kHostLate), 0u);
  const Finding* f = FindKind(r, "host-work");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->gain_ns, 5 * kMs);
  EXPECT_DOUBLE_EQ(f->gain_per_step_ns, 1.0 * kMs);
}

TEST(Idle, HostLaunchingLateIsLaunchBound) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  for (int i = 0; i < 100; ++i) {
    // 20 us kernels, each launched 30 us after the previous one finished.
    const uint64_t start = static_cast<uint64_t>(i) * 50 * kUs;
    b.Kernel(0, "tiny_elementwise_kernel", start, start + 20 * kUs, 7,
             start - std::min<uint64_t>(start, 2 * kUs));
  }
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  EXPECT_EQ(r.idle.cause_ns[0].at(GapCause::kHostLate), 99 * 30 * kUs);
  const Finding* f = FindKind(r, "launch-bound");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->gain_ns, 99 * 30 * kUs);
}

// Eager code launching tiny kernels: each runs 2 us and the next is issued about
// 8 us after the previous was, so the GPU waits a few microseconds on the host
// before each. Those short gaps are the launch overhead and count; short gaps
// before work that was already queued (the device's turnaround) do not. Spacings
// vary so that the count is no threshold's lucky match.
TEST(Idle, ShortHostLateGapsAddUpToTheLaunchOverhead) {
  for (const uint64_t spacing : {uint64_t{5 * kUs}, uint64_t{8 * kUs}, uint64_t{9500}}) {
    TempDir dir;
    TimelineBuilder b;
    b.Rank(0);
    constexpr int kKernels = 200;
    for (int i = 0; i < kKernels; ++i) {
      const uint64_t launch = 1 * kMs + static_cast<uint64_t>(i) * spacing;
      b.Kernel(0, "tiny_elementwise_kernel", launch + 1 * kUs, launch + 3 * kUs, 7, launch);
    }
    // Then kernels queued long before they run, 4 us apart: device turnaround.
    const uint64_t queued = 10 * kMs;
    for (int i = 0; i < kKernels; ++i) {
      const uint64_t start = queued + static_cast<uint64_t>(i) * 24 * kUs;
      b.Kernel(0, "queued_kernel", start, start + 20 * kUs, 7, queued - 1 * kMs);
    }
    const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
    // Each gap: from a kernel's end (launch + 3 us) to the next's start (next launch + 1 us).
    EXPECT_EQ(r.idle.cause_ns[0].at(GapCause::kHostLate), (kKernels - 1) * (spacing - 2 * kUs))
        << spacing;
    EXPECT_EQ(r.idle.cause_count[0].at(GapCause::kHostLate), static_cast<uint64_t>(kKernels - 1));
    EXPECT_EQ(r.idle.cause_count[0].count(GapCause::kOther), 0u) << "short queued gaps counted";
    const Finding* f = FindKind(r, "launch-bound");
    ASSERT_NE(f, nullptr) << spacing;
    EXPECT_EQ(f->gain_ns, (kKernels - 1) * (spacing - 2 * kUs));
  }
}

// An input pipeline: each step launches a burst of short kernels back to back,
// then the host computes the next batch without any CUDA call while the GPU idles.
// The gaps are host work (its own finding and action), never launch overhead;
// the burst's small gaps stay under the 10 us threshold. Sizes vary so that no
// threshold fits one program.
TEST(Idle, HostWorkBetweenBurstsIsNotLaunchBound) {
  struct Case {
    uint64_t work_ns;   // host work per step, no CUDA call
    int burst;          // kernels per step
    uint64_t issue_ns;  // spacing of the burst's launches
  };
  for (const Case c :
       {Case{12 * kMs, 20, 10 * kUs}, Case{400 * kUs, 60, 6 * kUs}, Case{3 * kMs, 5, 25 * kUs}}) {
    TempDir dir;
    TimelineBuilder b;
    b.Rank(0);
    constexpr int kSteps = 8;
    uint64_t t = 1 * kMs;
    for (int s = 0; s < kSteps; ++s) {
      const uint64_t step_start = t;
      for (int k = 0; k < c.burst; ++k) {
        const uint64_t launch = t + static_cast<uint64_t>(k) * c.issue_ns;
        b.Kernel(0, "elementwise", launch + 4 * kUs, launch + 4 * kUs + c.issue_ns - 2 * kUs, 9,
                 static_cast<int64_t>(launch));
      }
      t += static_cast<uint64_t>(c.burst) * c.issue_ns + c.work_ns;
      b.Nvtx(0, "step " + std::to_string(s), step_start, t, 9, 0);
    }
    const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
    EXPECT_EQ(r.idle.cause_count[0].count(GapCause::kHostLate), 0u) << c.work_ns;
    ASSERT_EQ(r.idle.cause_count[0].at(GapCause::kHostWork), static_cast<uint64_t>(kSteps - 1))
        << c.work_ns;
    // Each gap: from the burst's last kernel end (2 us after its launch spacing
    // ends) to the next burst's first kernel (4 us after its launch).
    const uint64_t gap = c.work_ns + 2 * kUs;
    EXPECT_EQ(r.idle.cause_ns[0].at(GapCause::kHostWork), (kSteps - 1) * gap) << c.work_ns;
    ASSERT_FALSE(r.findings.empty());
    EXPECT_EQ(r.findings[0].kind, "host-work") << c.work_ns;
    EXPECT_EQ(FindKind(r, "launch-bound"), nullptr) << c.work_ns;
    EXPECT_NE(r.findings[0].action.find("DataLoader workers"), std::string::npos);
  }
}

// .item() then host work, where the host issued the step slowly enough (as in a
// capture window, CUPTI's cost per call) that the GPU had run dry before the
// sync: the sync returns at once, and the gap is still the sync's (the program
// waits for the GPU, then works with nothing queued), as it is when the sync
// blocks. Host work before the sync is host work: the sync did not idle the GPU.
TEST(Idle, AGapAfterASyncIsTheSyncsWhetherOrNotItBlocked) {
  struct Case {
    uint64_t sync_after_ns;   // the sync's call after the last kernel's end (0: before it)
    uint64_t work_before_ns;  // host work between the last launch and the sync
    GapCause want;
  };
  for (const Case c :
       {Case{0, 0, GapCause::kHostSync}, Case{30 * kUs, 0, GapCause::kHostSync},
        Case{80 * kUs, 0, GapCause::kHostSync}, Case{2 * kMs, 2 * kMs, GapCause::kHostWork}}) {
    TempDir dir;
    TimelineBuilder b;
    b.Rank(0);
    constexpr int kSteps = 6;
    const uint64_t work = 3 * kMs;  // after the sync, nothing queued
    uint64_t t = 1 * kMs;
    for (int s = 0; s < kSteps; ++s) {
      const uint64_t step_start = t;
      uint64_t end = 0;
      for (int k = 0; k < 10; ++k, t += 10 * kUs) {
        end = t + 14 * kUs;
        b.Kernel(0, "k", t + 4 * kUs, end, 9, static_cast<int64_t>(t));
      }
      // The last kernel ends at `end`; calls issued back to back up to the sync
      // (an event record every 10 us), unless the host works first.
      uint64_t sync_start = c.sync_after_ns ? end + c.sync_after_ns : end - 5 * kUs;
      if (c.work_before_ns == 0) {
        for (uint64_t at = t; at + 10 * kUs < sync_start; at += 10 * kUs)
          b.Api(0, "cudaEventRecord", at, at + 3 * kUs, 9);
      }
      const uint64_t sync_end = std::max(sync_start, end) + 8 * kUs;
      b.Api(0, "cudaStreamSynchronize", sync_start, sync_end, 9);
      t = sync_end + work;
      b.Nvtx(0, "step " + std::to_string(s), step_start, t, 9, 0);
    }
    const IdleAnalysis a = AnalyzeIdle(b.WriteAndLoad(dir.File("t.h5")));
    ASSERT_EQ(a.cause_count[0].size(), 1u) << c.sync_after_ns;
    EXPECT_EQ(a.cause_count[0].begin()->first, c.want) << c.sync_after_ns;
    EXPECT_EQ(a.cause_count[0].begin()->second, static_cast<uint64_t>(kSteps - 1));
  }
}

// The line between the two causes is the thread's own issue time: a thread that
// issues a launch every 10 us needs a call-free stretch of 20 x 10 = 200 us
// before a late launch for host work; 150 us is still launch overhead.
TEST(Idle, HostWorkNeedsAStretchLongerThanIssuingTakes) {
  for (const uint64_t stretch : {150 * kUs, 250 * kUs}) {
    TempDir dir;
    TimelineBuilder b;
    b.Rank(0);
    uint64_t t = 0;
    for (int k = 0; k < 50; ++k, t += 10 * kUs)  // back to back: 10 us apart, GPU keeps up
      b.Kernel(0, "k", t + 4 * kUs, t + 12 * kUs, 3, static_cast<int64_t>(t));
    // The last kernel ends at t + 2 us; the host is silent for `stretch`, then launches.
    const uint64_t launch = t + 2 * kUs + stretch;
    b.Kernel(0, "k", launch + 4 * kUs, launch + 12 * kUs, 3, static_cast<int64_t>(launch));
    const IdleAnalysis a = AnalyzeIdle(b.WriteAndLoad(dir.File("t.h5")));
    ASSERT_EQ(a.top_gaps.size(), 1u) << stretch;
    EXPECT_EQ(a.top_gaps[0].cause, stretch >= 200 * kUs ? GapCause::kHostWork : GapCause::kHostLate)
        << stretch << ": " << a.top_gaps[0].detail;
  }
}

TEST(Breakdown, KnownOverlapFraction) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Kernel(0, "sgemm_kernel", 0, 10 * kMs);
  b.Kernel(0, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 6 * kMs, 14 * kMs, 0, -1,
           9);  // half overlapped
  b.Kernel(0, "sgemm_kernel", 20 * kMs, 21 * kMs);
  b.Memcpy(0, 15 * kMs, 16 * kMs, 1 << 20, 1, false, true);
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const std::vector<RankBreakdown> br = ComputeBreakdown(t, DetectSteps(t));
  ASSERT_EQ(br.size(), 1u);
  EXPECT_EQ(br[0].span_ns, 21 * kMs);
  EXPECT_EQ(br[0].compute_ns, 11 * kMs);
  EXPECT_EQ(br[0].comm_ns, 8 * kMs);
  EXPECT_EQ(br[0].copy_ns, 1 * kMs);
  EXPECT_EQ(br[0].exposed_comm_ns, 4 * kMs);
  EXPECT_DOUBLE_EQ(br[0].overlap_fraction, 0.5);
  EXPECT_EQ(br[0].busy_ns, 16 * kMs);
  EXPECT_EQ(br[0].idle_ns, 5 * kMs);
}

TEST(Kernels, TopKernelsAggregateAndClassify) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Rank(1);
  const std::string elem =
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, "
      "T1, T2)";
  b.Kernel(0, elem, 0, 1 * kUs);
  b.Kernel(0, elem, 10 * kUs, 13 * kUs);
  b.Kernel(1, elem, 0, 2 * kUs);
  b.Kernel(1, "ampere_sgemm_128x64_nn", 20 * kUs, 120 * kUs);
  const std::vector<KernelStats> k = TopKernels(b.WriteAndLoad(dir.File("t.h5")));
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k[0].name, "ampere_sgemm_128x64_nn");
  EXPECT_EQ(k[0].family, KernelFamily::kGemm);
  EXPECT_EQ(k[1].name, elem);
  EXPECT_EQ(k[1].family, KernelFamily::kElementwise);
  EXPECT_EQ(k[1].count, 3u);
  EXPECT_EQ(k[1].total_ns, 6 * kUs);
  EXPECT_DOUBLE_EQ(k[1].mean_ns, 2.0 * kUs);
  EXPECT_NEAR(k[1].stddev_ns, std::sqrt(2.0 / 3) * kUs, 1e-6);
  EXPECT_EQ(k[1].min_ns, 1 * kUs);
  EXPECT_EQ(k[1].max_ns, 3 * kUs);
  EXPECT_EQ(k[1].per_rank_ns.at(0), 4 * kUs);
  EXPECT_EQ(k[1].per_rank_ns.at(1), 2 * kUs);
  EXPECT_EQ(k[1].launch_config, "grid(108,1,1) block(256,1,1) regs 32");
}

TEST(Kernels, Families) {
  EXPECT_EQ(ClassifyKernel("ncclDevKernel_AllGather_RING_LL"), KernelFamily::kNccl);
  EXPECT_EQ(ClassifyKernel("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>"),
            KernelFamily::kAttention);
  EXPECT_EQ(ClassifyKernel("sm90_xmma_gemm_bf16bf16_bf16f32"), KernelFamily::kGemm);
  EXPECT_EQ(ClassifyKernel("void at::native::reduce_kernel<512, 1>"), KernelFamily::kReduction);
  EXPECT_EQ(ClassifyKernel("void at::native::(anonymous namespace)::softmax_warp_forward"),
            KernelFamily::kReduction);
  EXPECT_EQ(ClassifyKernel("void at::native::unrolled_elementwise_kernel<...>"),
            KernelFamily::kElementwise);
  EXPECT_EQ(ClassifyKernel("void at::native::copy_device_to_device"), KernelFamily::kCopy);
  EXPECT_EQ(ClassifyKernel("my_custom_thing"), KernelFamily::kOther);
}

TEST(Nvtx, GpuTimeGoesToTheRangesOpenOnTheLaunchingThread) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Nvtx(0, "step 0", 0, 10 * kMs, 10, 0);
  b.Nvtx(0, "forward", 0, 4 * kMs, 10, 1);
  b.Nvtx(0, "backward", 4 * kMs, 9 * kMs, 10, 1);
  b.Nvtx(0, "ncclAllReduce", 5 * kMs, 5100 * kUs, 10, 2, "NCCL");
  b.Kernel(0, "fwd_gemm", 2 * kMs, 5 * kMs, 10, 1 * kMs);  // launched in forward
  b.Kernel(0, "bwd_gemm", 6 * kMs, 8 * kMs, 10,
           5050 * kUs);  // launched in backward (and ncclAllReduce)
  b.Kernel(0, "side_stream", 8 * kMs, 9 * kMs, 11, 5 * kMs);  // another thread: no range
  const std::vector<NvtxStat> s = AttributeNvtx(b.WriteAndLoad(dir.File("t.h5")));
  std::map<std::string, const NvtxStat*> by;
  for (const NvtxStat& x : s) by[x.name] = &x;
  ASSERT_TRUE(by.count("step #") && by.count("forward") && by.count("backward") &&
              by.count("NCCL:ncclAllReduce"));
  EXPECT_EQ(by["step #"]->gpu_ns, 5 * kMs);
  EXPECT_EQ(by["forward"]->gpu_ns, 3 * kMs);
  EXPECT_EQ(by["backward"]->gpu_ns, 2 * kMs);
  EXPECT_EQ(by["NCCL:ncclAllReduce"]->gpu_ns, 2 * kMs);
  EXPECT_EQ(by["forward"]->range_ns, 4 * kMs);
  EXPECT_EQ(by["step #"]->per_rank_gpu_ns.at(0), 5 * kMs);
  EXPECT_EQ(s[0].name, "step #");
}

// A range's time is wall time per rank: the same name open on several threads
// at once (XLA's compile passes) counts once; ranks add up.
TEST(Nvtx, RangeTimeIsTheUnionOverThreadsOfARank) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Rank(1);
  b.Nvtx(0, "compile", 0, 6 * kMs, 1, 0);
  b.Nvtx(0, "compile", 2 * kMs, 8 * kMs, 2, 0);
  b.Nvtx(0, "compile", 1 * kMs, 3 * kMs, 3, 0);
  b.Nvtx(0, "compile", 10 * kMs, 12 * kMs, 1, 0);  // again, later
  b.Nvtx(1, "compile", 0, 5 * kMs, 1, 0);
  const std::vector<NvtxStat> s = AttributeNvtx(b.WriteAndLoad(dir.File("t.h5")));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].count, 5u);
  EXPECT_EQ(s[0].per_rank_range_ns.at(0), 10 * kMs);  // [0, 8) and [10, 12)
  EXPECT_EQ(s[0].per_rank_range_ns.at(1), 5 * kMs);
  EXPECT_EQ(s[0].range_ns, 15 * kMs);
}

TEST(Steps, FromTheRepeatingKernelWithoutNvtx) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Rank(1);
  for (uint32_t r = 0; r < 2; ++r) {
    for (int s = 0; s < 10; ++s) {
      const uint64_t base = static_cast<uint64_t>(s) * 3 * kMs + r * 100 * kUs;
      b.Kernel(r, "elementwise_a", base, base + 10 * kUs);  // three per step, unevenly spaced
      b.Kernel(r, "elementwise_a", base + 100 * kUs, base + 110 * kUs);
      b.Kernel(r, "elementwise_a", base + 1500 * kUs, base + 1510 * kUs);
      b.Kernel(r, "gemm_once_per_step", base + 200 * kUs, base + 1 * kMs);
    }
  }
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const Steps s = DetectSteps(t);
  EXPECT_NE(s.method.find("gemm_once_per_step"), std::string::npos) << s.method;
  EXPECT_EQ(s.typical_count, 9u);
  ASSERT_EQ(s.per_rank[1].size(), 9u);
  EXPECT_EQ(s.per_rank[1][0].end - s.per_rank[1][0].start, 3 * kMs);
}

TEST(Steps, NoneWhenNothingRepeats) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Kernel(0, "a", 0, 10);
  b.Kernel(0, "b", 100, 200);
  const Steps s = DetectSteps(b.WriteAndLoad(dir.File("t.h5")));
  EXPECT_EQ(s.method, "none");
  EXPECT_EQ(s.typical_count, 0u);
}

TEST(Imbalance, SlowestRankIsNamed) {
  TempDir dir;
  TimelineBuilder b;
  for (uint32_t r = 0; r < 4; ++r) {
    b.Rank(r);
    for (int s = 0; s < 10; ++s) {
      const uint64_t base = static_cast<uint64_t>(s) * 2 * kMs;
      b.Kernel(r, "gemm", base, base + (r == 3 ? 1500 : 1000) * kUs);
    }
  }
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  const Finding* f = FindKind(r, "load-imbalance");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->rank, 3);
  EXPECT_EQ(f->gain_ns, 3750 * kUs);  // 15 ms - mean 11.25 ms
}

TEST(Degenerate, EmptyTimelineGivesAMessageNotACrash) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Rank(1);
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  EXPECT_TRUE(r.findings.empty());
  bool said = false;
  for (const std::string& n : r.notes) said |= n.find("no GPU activity") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_NE(RenderTerminal(r).find("no GPU activity"), std::string::npos);
  EXPECT_NE(RenderHtml(r).find("id=summary"), std::string::npos);
  EXPECT_NE(RenderJson(r).find("\"findings\":[]"), std::string::npos);
}

TEST(Degenerate, NoRankTableAndNoRecordsAtAll) {
  TempDir dir;
  TimelineBuilder b;
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  EXPECT_EQ(r.world_size, 0u);
  EXPECT_TRUE(r.findings.empty());
  EXPECT_FALSE(RenderTerminal(r).empty());
  EXPECT_FALSE(RenderHtml(r).empty());
  EXPECT_FALSE(RenderJson(r).empty());
}

TEST(Degenerate, OneRankHasNoStragglerButStillABreakdown) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  for (int k = 0; k < 5; ++k)
    b.Kernel(0, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", k * kMs, k * kMs + 500 * kUs);
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  EXPECT_TRUE(r.comm.collectives.empty());
  EXPECT_EQ(FindKind(r, "straggler"), nullptr);
  EXPECT_EQ(r.breakdown[0].comm_ns, 2500 * kUs);
}

TEST(Degenerate, MissingRanksAreNamedAndRecordsBeyondTheTableStillCount) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Rank(1, "node1", RankStatus::kMissing, "no rank file");
  b.Kernel(0, "gemm", 0, kMs);
  b.Kernel(2, "gemm", 0, 2 * kMs);  // rank 2 is not in the table at all
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  ASSERT_EQ(r.world_size, 3u);
  bool named = false;
  for (const std::string& n : r.notes)
    named |= n.find("rank 1 is missing (no rank file)") != std::string::npos;
  EXPECT_TRUE(named);
  EXPECT_EQ(r.ranks[2].status, RankStatus::kOk);
  EXPECT_EQ(r.breakdown[2].compute_ns, 2 * kMs);
  const std::string text = RenderTerminal(r);
  EXPECT_NE(text.find("missing"), std::string::npos) << text;
}

TEST(Render, TerminalFitsAScreenAndSaysSynthetic) {
  TempDir dir;
  TimelineBuilder b;
  b.source = "synthetic";
  testing::PlantStraggler(&b, 3, 5, false);
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  const std::string text = RenderTerminal(r);
  EXPECT_NE(text.find("SYNTHETIC"), std::string::npos);
  EXPECT_LE(std::count(text.begin(), text.end(), '\n'), 42) << text;
  EXPECT_NE(text.find("1. [gain"), std::string::npos) << text;
  EXPECT_NE(text.find("Make rank 3 keep pace"), std::string::npos) << text;
}

TEST(Render, HtmlEscapesKernelNamesAndHasEverySection) {
  TempDir dir;
  TimelineBuilder b;
  testing::PlantStraggler(&b, 1, 3, true);
  b.Kernel(0, "void k<a&b, \"c\">(<script>alert(1)</script>)", 0, 900 * kMs);
  const std::string html = RenderHtml(Analyze(b.WriteAndLoad(dir.File("t.h5"))));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
  EXPECT_NE(html.find("k&lt;a&amp;b, &quot;c&quot;&gt;"), std::string::npos);
  for (const char* id : {"summary", "findings", "gpu-breakdown", "kernels", "communication",
                         "stragglers", "idle", "imbalance", "nvtx"}) {
    EXPECT_NE(html.find("<section id=" + std::string(id) + ">"), std::string::npos) << id;
  }
  for (const char* plot :
       {"plot-heat", "plot-steps", "plot-stragglers", "plot-kernels", "plot-bandwidth"}) {
    EXPECT_NE(html.find(plot), std::string::npos) << plot;
  }
  EXPECT_EQ(html.find("http://"),
            html.find("http://www.w3.org/2000/svg"));  // only the SVG namespace
  EXPECT_EQ(html.find("https://"), std::string::npos);
}

// The plots have real axes: ticks with labels at round values (durations,
// sizes, percents), and step times are one panel per rank on one shared scale.
TEST(Render, PlotsHaveTickedAxesAndStepTimesAPanelPerRank) {
  TempDir dir;
  TimelineBuilder b;
  testing::PlantStraggler(&b, 1, 3, true);  // 4 ranks, steps of 17.3 ms, 64 MiB all-reduces
  const std::string html = RenderHtml(Analyze(b.WriteAndLoad(dir.File("t.h5"))));
  auto plot = [&](const std::string& id) {
    const size_t at = html.find("<svg class=plot id=" + id + " ");
    EXPECT_NE(at, std::string::npos) << id;
    return at == std::string::npos ? std::string() : html.substr(at, html.find("</svg>", at) - at);
  };
  auto count = [](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  const std::string steps = plot("plot-steps");
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(count(steps, ">rank " + std::to_string(r) + "</text>"), 1u) << steps;
  }
  // A y axis per panel, ticked from 0 in round durations: 0, 5.0 ms, 10.0 ms, 15.0 ms.
  EXPECT_EQ(count(steps, "text-anchor=end>0</text>"), 4u) << steps;
  EXPECT_EQ(count(steps, "text-anchor=end>10.0 ms</text>"), 4u) << steps;
  EXPECT_EQ(count(steps, ">step index</text>"), 1u);
  const std::string bw = plot("plot-bandwidth");
  EXPECT_EQ(count(bw, "text-anchor=middle>64 MiB</text>"), 1u) << bw;
  EXPECT_GE(count(bw, " GB/s</text>"), 3u) << bw;
  const std::string heat = plot("plot-heat");
  EXPECT_EQ(count(heat, "text-anchor=middle>0</text>"), 1u) << heat;
  EXPECT_GE(count(heat, " ms</text>"), 3u) << heat;
}

TEST(Render, Formatting) {
  EXPECT_EQ(FormatDuration(412e6), "412 ms");
  EXPECT_EQ(FormatDuration(3200), "3.2 us");
  EXPECT_EQ(FormatDuration(1.234e9), "1.23 s");
  EXPECT_EQ(FormatBytes(4 << 20), "4 MiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(HtmlEscape("a<b>&'\""), "a&lt;b&gt;&amp;&#39;&quot;");
}

}  // namespace
}  // namespace aon::report
