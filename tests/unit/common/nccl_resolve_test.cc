// ResolveNcclRecords: NCCL operations tied to their CUPTI kernels (by external
// correlation, by nearest launch), raw %globaltimer channel times calibrated
// (median, middle-80 % spread) or assumed (realtime anchor), fused launches, and
// idempotence on resolved records.
#include "aon/nccl_resolve.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace aon {
namespace {

constexpr uint8_t U8(NcclGpuTiming t) { return static_cast<uint8_t>(t); }

NcclRecord Op(uint64_t start, uint64_t external_id = 0, NcclEventType type = NcclEventType::kColl) {
  NcclRecord r{};
  r.start_ns = start;
  r.end_ns = start + 5;  // host stop: NCCL finished enqueuing
  r.external_id = external_id;
  r.channel_id = -1;
  r.root = r.peer = -1;
  r.event_type = static_cast<uint8_t>(type);
  r.gpu_timing = U8(NcclGpuTiming::kNone);
  return r;
}

// An operation whose channels reported: raw %globaltimer first start / last stop.
NcclRecord RawOp(uint64_t start, uint64_t external_id, uint64_t gpu_first, uint64_t gpu_last,
                 NcclEventType type = NcclEventType::kColl) {
  NcclRecord r = Op(start, external_id, type);
  r.gpu_start_ns = gpu_first;
  r.end_ns = gpu_last;
  r.gpu_timing = U8(NcclGpuTiming::kRaw);
  return r;
}

NcclRecord RawChannel(uint64_t gpu_start, uint64_t gpu_end) {
  NcclRecord r{};
  r.start_ns = gpu_start;
  r.end_ns = gpu_end;
  r.channel_id = 0;
  r.event_type = static_cast<uint8_t>(NcclEventType::kKernelCh);
  r.gpu_timing = U8(NcclGpuTiming::kRaw);
  return r;
}

ExternalCorrelationRecord Ext(uint64_t external_id, uint32_t corr,
                              uint32_t kind = kNcclExternalCorrelationKind) {
  return ExternalCorrelationRecord{external_id, corr, kind};
}

KernelRecord Kernel(uint32_t corr, uint64_t start, uint64_t end, uint32_t stream = 7) {
  KernelRecord k{};
  k.correlation_id = corr;
  k.start_ns = start;
  k.end_ns = end;
  k.stream_id = stream;
  return k;
}

ApiRecord Launch(uint32_t corr, uint64_t start) {
  ApiRecord a{};
  a.correlation_id = corr;
  a.start_ns = start;
  a.end_ns = start + 3;
  return a;
}

struct Tables {
  std::vector<NcclRecord> nccl;
  std::vector<ExternalCorrelationRecord> ext;
  std::vector<KernelRecord> kernels;
  std::vector<ApiRecord> apis;
  RealtimeAnchorNs anchor{};

  NcclResolveResult Resolve() { return ResolveNcclRecords(nccl, ext, kernels, apis, anchor); }
};

bool SameBytes(const std::vector<NcclRecord>& a, const std::vector<NcclRecord>& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(NcclRecord)) == 0;
}

TEST(NcclResolve, ConstantIsCuptiCustom2) {
  // CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 in cupti_activity.h.
  EXPECT_EQ(kNcclExternalCorrelationKind, 5u);
}

TEST(NcclResolve, ByExternalId) {
  Tables t;
  t.nccl = {Op(500, 100)};
  // Another kind with the same external id must not be taken.
  t.ext = {Ext(100, 99, /*CUSTOM0*/ 3), Ext(100, 42), Ext(101, 43)};
  t.kernels = {Kernel(99, 10, 20, 1), Kernel(43, 30, 40, 2), Kernel(42, 1000, 2000, 9)};
  t.apis = {Launch(43, 100), Launch(42, 450)};
  const NcclResolveResult r = t.Resolve();
  EXPECT_EQ(r.by_external_id, 1u);
  EXPECT_EQ(r.by_time, 0u);
  EXPECT_EQ(r.unresolved, 0u);
  EXPECT_EQ(r.without_kernel, 0u);
  EXPECT_EQ(r.raw_converted, 0u);
  EXPECT_TRUE(r.note.empty());
  const NcclRecord& op = t.nccl[0];
  EXPECT_EQ(op.correlation_id, 42u);
  EXPECT_EQ(op.stream_id, 9u);
  EXPECT_EQ(op.gpu_start_ns, 1000u);
  EXPECT_EQ(op.end_ns, 2000u);
  EXPECT_EQ(op.start_ns, 500u) << "the host start stays";
  EXPECT_EQ(op.gpu_timing, U8(NcclGpuTiming::kKernel));
}

TEST(NcclResolve, ByNearestLaunch) {
  Tables t;
  t.ext = {Ext(1, 10), Ext(2, 20)};
  t.kernels = {Kernel(10, 1100, 1200, 1), Kernel(20, 5100, 5200, 2), Kernel(30, 3100, 3200, 3)};
  // Correlation 30 is a launch of someone else (no NCCL external correlation).
  t.apis = {Launch(10, 1000), Launch(30, 3000), Launch(20, 5000)};
  t.nccl = {Op(2000),                             // 1000 before, 3000 after: launch 10
            Op(3900, 0, NcclEventType::kP2p),     // 2900 vs 1100: launch 20
            Op(3000),                             // a tie goes to the later launch: 20
            Op(6000),                             // after the last launch: 20
            Op(900, /*unknown external id*/ 77),  // before the first: 10
            Op(1000)};                            // exactly at a launch: 10
  const NcclResolveResult r = t.Resolve();
  EXPECT_EQ(r.by_external_id, 0u);
  EXPECT_EQ(r.by_time, 6u);
  EXPECT_EQ(r.unresolved, 0u);
  const uint32_t want[] = {10, 20, 20, 20, 10, 10};
  for (size_t i = 0; i < t.nccl.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(t.nccl[i].correlation_id, want[i]);
    EXPECT_EQ(t.nccl[i].stream_id, want[i] == 10 ? 1u : 2u);
    EXPECT_EQ(t.nccl[i].gpu_timing, U8(NcclGpuTiming::kKernel));
  }
  // An operation reported after its kernel ended: end is never before start.
  EXPECT_EQ(t.nccl[3].gpu_start_ns, 5100u);
  EXPECT_EQ(t.nccl[3].end_ns, 6000u);
}

TEST(NcclResolve, Unresolved) {
  Tables t;
  t.nccl = {Op(1000, 5), Op(2000)};
  t.kernels = {Kernel(1, 900, 1900)};
  t.apis = {Launch(1, 800)};  // a launch, but not an NCCL one
  const std::vector<NcclRecord> before = t.nccl;
  const NcclResolveResult r = t.Resolve();
  EXPECT_EQ(r.unresolved, 2u);
  EXPECT_EQ(r.by_external_id + r.by_time, 0u);
  EXPECT_TRUE(SameBytes(t.nccl, before)) << "nothing to tie them to: left as they were";

  // Tied to a launch whose kernel was not recorded (dropped): only the id.
  Tables u;
  u.nccl = {Op(1000, 5)};
  u.ext = {Ext(5, 50)};
  const NcclResolveResult r2 = u.Resolve();
  EXPECT_EQ(r2.by_external_id, 1u);
  EXPECT_EQ(r2.without_kernel, 1u);
  EXPECT_EQ(u.nccl[0].correlation_id, 50u);
  EXPECT_EQ(u.nccl[0].stream_id, 0u);
  EXPECT_EQ(u.nccl[0].gpu_timing, U8(NcclGpuTiming::kNone));
  EXPECT_EQ(u.nccl[0].gpu_start_ns, 0u);
}

TEST(NcclResolve, RawChannelCalibration) {
  // Ten kernels; %globaltimer runs `base` ahead of the host timebase, with a
  // per-kernel jitter of 0..8 ns and one outlier.
  constexpr uint64_t kGpu = 1'790'000'000'000'000'000;  // ~CLOCK_REALTIME
  constexpr int64_t kBase = 5'000'000'000 - static_cast<int64_t>(kGpu);
  const int64_t jitter[10] = {3, 0, 8, 1, 1000, 5, 2, 7, 4, 6};
  Tables t;
  for (uint32_t i = 0; i < 10; ++i) {
    const uint64_t host_kernel = 5'000'000'000 + i * 1'000'000;
    const uint64_t raw_first =
        static_cast<uint64_t>(static_cast<int64_t>(host_kernel) - kBase - jitter[i]);
    t.ext.push_back(Ext(100 + i, 10 + i));
    t.apis.push_back(Launch(10 + i, host_kernel - 500));
    t.kernels.push_back(Kernel(10 + i, host_kernel, host_kernel + 800));
    t.nccl.push_back(RawOp(host_kernel - 400, 100 + i, raw_first, raw_first + 700));
    t.nccl.push_back(RawChannel(raw_first, raw_first + 650));
  }
  NcclRecord comm{};
  comm.start_ns = 1;
  comm.end_ns = 2;
  comm.event_type = static_cast<uint8_t>(NcclEventType::kComm);
  t.nccl.push_back(comm);
  t.anchor = {123, 456};  // not used: pairs were found
  const std::vector<NcclRecord> before = t.nccl;

  const NcclResolveResult r = t.Resolve();
  // Offsets base + jitter, sorted: 0..8, 1000 -> median (index 5) = base + 5;
  // middle 80 % = indexes 1..8 -> 8 - 1 = 7.
  EXPECT_EQ(r.calibration.offset_ns, kBase + 5);
  EXPECT_EQ(r.calibration.pairs, 10);
  EXPECT_EQ(r.calibration.spread_ns, 7);
  EXPECT_EQ(r.channel_timing, NcclGpuTiming::kCalibrated);
  EXPECT_EQ(r.by_external_id, 10u);
  EXPECT_EQ(r.raw_converted, 20u);
  EXPECT_TRUE(r.note.empty());
  const int64_t off = kBase + 5;
  for (size_t i = 0; i < 20; ++i) {
    SCOPED_TRACE(i);
    const NcclRecord& a = before[i];
    const NcclRecord& b = t.nccl[i];
    EXPECT_EQ(b.gpu_timing, U8(NcclGpuTiming::kCalibrated));
    EXPECT_EQ(b.end_ns, static_cast<uint64_t>(static_cast<int64_t>(a.end_ns) + off));
    if (a.event_type == static_cast<uint8_t>(NcclEventType::kKernelCh)) {
      EXPECT_EQ(b.start_ns, static_cast<uint64_t>(static_cast<int64_t>(a.start_ns) + off));
      EXPECT_EQ(b.correlation_id, 0u) << "channels are not operations";
    } else {
      EXPECT_EQ(b.start_ns, a.start_ns) << "host time";
      EXPECT_EQ(b.gpu_start_ns, static_cast<uint64_t>(static_cast<int64_t>(a.gpu_start_ns) + off));
      EXPECT_EQ(b.stream_id, 7u);
    }
  }
  // Kernel 1 (jitter 0): its first channel lands 5 ns after the kernel start.
  EXPECT_EQ(t.nccl[2].gpu_start_ns, t.kernels[1].start_ns + 5);
  EXPECT_TRUE(SameBytes({t.nccl.back()}, {comm})) << "communicator records are left alone";
}

TEST(NcclResolve, AssumedFallbackThroughTheAnchor) {
  // Channel times but no CUPTI (no kernel records): %globaltimer is taken as
  // CLOCK_REALTIME and converted through the rank's realtime anchor.
  Tables t;
  t.anchor = {2'000'000'000, 1'790'000'000'500'000'000};
  const int64_t want = 2'000'000'000 - 1'790'000'000'500'000'000;
  t.ext = {Ext(1, 10)};
  t.apis = {Launch(10, 1000)};
  t.nccl = {RawOp(1100, 1, 1'790'000'000'600'000'000, 1'790'000'000'600'001'000),
            RawChannel(1'790'000'000'600'000'100, 1'790'000'000'600'000'900),
            RawOp(1200, 0, 0, 1'790'000'000'600'002'000)};  // no first start: stays 0
  const NcclResolveResult r = t.Resolve();
  EXPECT_EQ(r.channel_timing, NcclGpuTiming::kAssumed);
  EXPECT_EQ(r.calibration.offset_ns, want);
  EXPECT_EQ(r.calibration.pairs, 0);
  EXPECT_EQ(r.calibration.spread_ns, -1);
  EXPECT_EQ(r.raw_converted, 3u);
  EXPECT_NE(r.note.find("could not be calibrated"), std::string::npos) << r.note;
  EXPECT_NE(r.note.find("CLOCK_REALTIME"), std::string::npos) << r.note;
  EXPECT_EQ(t.nccl[0].gpu_start_ns, 2'100'000'000u);
  EXPECT_EQ(t.nccl[0].end_ns, 2'100'001'000u);
  EXPECT_EQ(t.nccl[1].start_ns, 2'100'000'100u);
  EXPECT_EQ(t.nccl[1].end_ns, 2'100'000'900u);
  EXPECT_EQ(t.nccl[2].gpu_start_ns, 0u);
  EXPECT_EQ(t.nccl[2].end_ns, 2'100'002'000u);
  for (const NcclRecord& x : t.nccl) EXPECT_EQ(x.gpu_timing, U8(NcclGpuTiming::kAssumed));
  EXPECT_EQ(t.nccl[0].correlation_id, 10u) << "tied even without its kernel";
  EXPECT_EQ(r.without_kernel, 2u);

  // Without raw records there is nothing to say.
  Tables u;
  u.nccl = {Op(5, 0)};
  EXPECT_TRUE(u.Resolve().note.empty());
}

TEST(NcclResolve, FusedLaunchSeveralOperationsOneKernel) {
  // A send/recv group: three operations claimed by one launch, one kernel.
  Tables t;
  t.ext = {Ext(9, 90)};
  t.apis = {Launch(90, 10'000)};
  t.kernels = {Kernel(90, 20'000, 30'000, 4)};
  // Raw channel times: the earliest first-channel start (the first of the group)
  // starts with the kernel; the others start when their peer is ready.
  constexpr uint64_t kRaw = 900'000;
  t.nccl = {RawOp(9'000, 9, kRaw + 300, kRaw + 5'000, NcclEventType::kP2p),
            RawOp(9'100, 9, kRaw, kRaw + 6'000, NcclEventType::kP2p),
            RawOp(9'200, 9, kRaw + 50, kRaw + 7'000, NcclEventType::kP2p)};
  NcclResolveResult r = t.Resolve();
  EXPECT_EQ(r.by_external_id, 3u);
  EXPECT_EQ(r.calibration.pairs, 1) << "one kernel, one pair";
  EXPECT_EQ(r.calibration.offset_ns, 20'000 - static_cast<int64_t>(kRaw));
  EXPECT_EQ(r.calibration.spread_ns, 0);
  EXPECT_EQ(t.nccl[1].gpu_start_ns, 20'000u);
  EXPECT_EQ(t.nccl[2].gpu_start_ns, 20'050u);
  EXPECT_EQ(t.nccl[0].gpu_start_ns, 20'300u);
  EXPECT_EQ(t.nccl[0].end_ns, 25'000u);
  for (const NcclRecord& x : t.nccl) {
    EXPECT_EQ(x.correlation_id, 90u);
    EXPECT_EQ(x.stream_id, 4u);
    EXPECT_EQ(x.gpu_timing, U8(NcclGpuTiming::kCalibrated));
  }

  // Without channel timing they share the kernel's span.
  Tables u;
  u.ext = t.ext;
  u.apis = t.apis;
  u.kernels = t.kernels;
  u.nccl = {Op(9'000, 9, NcclEventType::kP2p), Op(9'100, 9, NcclEventType::kP2p)};
  r = u.Resolve();
  for (const NcclRecord& x : u.nccl) {
    EXPECT_EQ(x.gpu_start_ns, 20'000u);
    EXPECT_EQ(x.end_ns, 30'000u);
    EXPECT_EQ(x.gpu_timing, U8(NcclGpuTiming::kKernel));
  }
}

TEST(NcclResolve, Idempotent) {
  Tables t;
  t.anchor = {1'000, 50};
  t.ext = {Ext(1, 10), Ext(2, 20), Ext(3, 30)};
  t.apis = {Launch(10, 1'000), Launch(20, 2'000), Launch(30, 3'000)};
  t.kernels = {Kernel(10, 1'100, 1'500, 1), Kernel(20, 2'100, 2'500, 2)};
  t.nccl = {Op(900, 1),   Op(1'900), RawOp(2'900, 2, 7'000, 7'300), RawChannel(7'010, 7'290),
            Op(2'950, 3), Op(5)};
  NcclResolveResult first = t.Resolve();
  ASSERT_GT(first.raw_converted, 0u);
  ASSERT_EQ(first.calibration.pairs, 1);
  ASSERT_TRUE(NcclRecordsNeedResolution(std::vector<NcclRecord>{RawChannel(1, 2)}));
  const std::vector<NcclRecord> resolved = t.nccl;

  // Again (a file whose agent already resolved it): nothing changes.
  const NcclResolveResult again = t.Resolve();
  EXPECT_TRUE(SameBytes(t.nccl, resolved));
  EXPECT_EQ(again.raw_converted, 0u);
  EXPECT_EQ(again.by_external_id, 0u);
  EXPECT_EQ(again.by_time, 0u);
  EXPECT_EQ(again.already_resolved, first.by_external_id + first.by_time);
  EXPECT_TRUE(again.note.empty());

  // An older agent's choice is kept, even where this resolution would differ.
  t.nccl[1].correlation_id = 30;
  const std::vector<NcclRecord> older = t.nccl;
  t.Resolve();
  EXPECT_TRUE(SameBytes(t.nccl, older));

  // Resolved records need nothing; the one without any launch still "needs" it.
  std::vector<NcclRecord> tied(resolved.begin(), resolved.begin() + 5);
  EXPECT_FALSE(NcclRecordsNeedResolution(tied));
  EXPECT_TRUE(NcclRecordsNeedResolution(std::vector<NcclRecord>{Op(5)}));
}

}  // namespace
}  // namespace aon
