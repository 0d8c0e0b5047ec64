// ResolveNcclRecords: NCCL operations tied to their CUPTI kernels (by external
// correlation, by nearest launch), raw %globaltimer channel times calibrated
// (median, middle-80 % spread) or assumed (realtime anchor), fused launches,
// idempotence on resolved records, and CUDA-graph capture and replay.
#include "aon/merge/nccl_resolve.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "nccl_legacy_rows.h"

namespace aon {
namespace {

constexpr uint8_t U8(NcclGpuTiming t) { return static_cast<uint8_t>(t); }

bool IsOp(const NcclRecord& r) {
  return r.event_type == static_cast<uint8_t>(NcclEventType::kColl) ||
         r.event_type == static_cast<uint8_t>(NcclEventType::kP2p);
}

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
  std::vector<NcclGraphRecord> graph;  // CUDA-graph bookkeeping (nccl_graph)
  std::vector<ExternalCorrelationRecord> ext;
  std::vector<KernelRecord> kernels;
  std::vector<ApiRecord> apis;
  RealtimeAnchorNs anchor{};

  NcclResolveResult Resolve() {
    return ResolveNcclRecords(nccl, graph, ext, kernels, apis, anchor);
  }
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

// ---- CUDA graphs ---------------------------------------------------------------

// A collective with its descriptive fields, as NCCL reports it.
NcclRecord Coll(uint64_t start, uint64_t external_id, uint64_t comm, uint64_t seq,
                uint32_t func = 11, uint64_t count = 256) {
  NcclRecord r = Op(start, external_id);
  r.comm_hash = comm;
  r.seq_number = seq;
  r.func_id = func;
  r.count = count;
  r.bytes = count * 4;
  r.datatype_id = 21;
  r.algo_id = 31;
  r.proto_id = 32;
  r.n_channels = 2;
  r.n_warps = 16;
  r.comm_nranks = 2;
  return r;
}

NcclRecord P2p(uint64_t start, uint64_t external_id, uint64_t comm, uint32_t func, int peer) {
  NcclRecord r = Op(start, external_id, NcclEventType::kP2p);
  r.comm_hash = comm;
  r.func_id = func;
  r.count = 64;
  r.peer = peer;
  return r;
}

// A kernel node NCCL's launch `external_id` created under capture.
NcclGraphRecord NodeCreated(uint64_t node, uint64_t external_id, uint64_t comm) {
  NcclGraphRecord r{};
  r.event = static_cast<uint8_t>(NcclGraphEvent::kNodeCreated);
  r.node_id = node;
  r.external_id = external_id;
  r.comm_hash = comm;
  r.root = -1;
  return r;
}

NcclGraphRecord NodeCloned(uint64_t clone, uint64_t original) {
  NcclGraphRecord r = NodeCreated(clone, 0, 0);
  r.event = static_cast<uint8_t>(NcclGraphEvent::kNodeCloned);
  r.original_node_id = original;
  return r;
}

// An NCCL API call made under capture (CollApi event with graphCaptured).
NcclGraphRecord CapturedCall(uint64_t start, uint64_t external_id, uint64_t comm,
                             uint32_t func = 11, uint64_t count = 256) {
  const NcclRecord c = Coll(start, external_id, comm, 0, func, count);
  NcclGraphRecord r{};
  r.event = static_cast<uint8_t>(NcclGraphEvent::kCapturedColl);
  r.time_ns = c.start_ns;
  r.external_id = c.external_id;
  r.comm_hash = c.comm_hash;
  r.func_id = c.func_id;
  r.count = c.count;
  r.bytes = c.bytes;
  r.datatype_id = c.datatype_id;
  r.root = c.root;
  r.comm_rank = c.comm_rank;
  r.comm_nranks = c.comm_nranks;
  r.comm_nnodes = c.comm_nnodes;
  return r;
}

// The same row as a format 1.3 agent wrote it.
NcclRecord Legacy(const NcclGraphRecord& g) { return testing::LegacyGraphRow(g); }

KernelRecord GraphKernel(uint32_t corr, uint64_t start, uint64_t end, uint64_t node,
                         uint32_t stream = 9) {
  KernelRecord k = Kernel(corr, start, end, stream);
  k.graph_node_id = node;
  k.graph_id = 3;
  return k;
}

std::vector<NcclRecord> Replays(const std::vector<NcclRecord>& all, uint64_t comm = 0) {
  std::vector<NcclRecord> out;
  for (const NcclRecord& r : all) {
    if (r.graph_replay != 0 && (comm == 0 || r.comm_hash == comm)) out.push_back(r);
  }
  std::sort(out.begin(), out.end(), [](const NcclRecord& a, const NcclRecord& b) {
    return std::make_pair(a.graph_replay, a.func_id) < std::make_pair(b.graph_replay, b.func_id);
  });
  return out;
}

bool AnyBookkeeping(const std::vector<NcclRecord>& all) {
  return std::any_of(all.begin(), all.end(),
                     [](const NcclRecord& r) { return r.event_type >= 6 && r.event_type <= 8; });
}

// Default capture (no host node in the graph): NCCL reports the operation once,
// right after the capture's launch; each replayed kernel (of the instantiated
// graph's clone of the node) becomes a record of its own.
TEST(NcclResolveGraphs, EachReplayOfACapturedCollectiveIsARecord) {
  Tables t;
  t.nccl = {Coll(1'000, 1, 0xA, 4),   // an eager all-reduce before
            Coll(2'000, 2, 0xA, 5)};  // the captured one
  t.graph = {NodeCreated(500, 2, 0xA), NodeCloned(900, 500),
             CapturedCall(1'990, 2, 0xA)};  // its API call: NCCL reported it, so unused
  t.ext = {Ext(1, 10), Ext(2, 20)};
  t.apis = {Launch(10, 990), Launch(20, 1'995), Launch(31, 5'000), Launch(32, 6'000),
            Launch(33, 7'000)};
  // Replays (out of time order in the table, as CUPTI buffers may deliver them).
  t.kernels = {Kernel(10, 1'100, 1'400, 7), GraphKernel(33, 7'100, 7'300, 900),
               GraphKernel(31, 5'100, 5'300, 900), GraphKernel(32, 6'100, 6'350, 900),
               GraphKernel(77, 6'200, 6'210, 4242)};  // a kernel of another graph
  const NcclResolveResult r = t.Resolve();
  EXPECT_EQ(r.graph_nodes, 1u);
  EXPECT_EQ(r.graph_node_clones, 1u);
  EXPECT_EQ(r.captured_operations, 1u);
  EXPECT_EQ(r.captured_from_calls, 0u);
  EXPECT_EQ(r.graph_replays, 3u);
  EXPECT_EQ(r.graph_replays_reported, 0u);
  EXPECT_EQ(r.captured_without_replay, 0u);
  EXPECT_EQ(r.without_kernel, 0u);  // the captured launch ran nothing: not a miss
  EXPECT_TRUE(r.note.empty()) << r.note;
  EXPECT_FALSE(AnyBookkeeping(t.nccl));
  ASSERT_EQ(t.nccl.size(), 5u);

  const NcclRecord& eager = t.nccl[0];
  EXPECT_EQ(eager.correlation_id, 10u);
  EXPECT_EQ(eager.gpu_timing, U8(NcclGpuTiming::kKernel));
  const NcclRecord& captured = t.nccl[1];
  EXPECT_EQ(captured.graph_replay, 0u);
  EXPECT_EQ(captured.correlation_id, 20u);  // tied to its capture-time launch
  EXPECT_EQ(captured.gpu_timing, U8(NcclGpuTiming::kNone));
  EXPECT_EQ(captured.gpu_start_ns, 0u);
  EXPECT_EQ(captured.stream_id, 9u);

  const std::vector<NcclRecord> replays = Replays(t.nccl);
  ASSERT_EQ(replays.size(), 3u);
  const uint32_t corr[] = {31, 32, 33};
  const uint64_t call[] = {5'000, 6'000, 7'000}, start[] = {5'100, 6'100, 7'100},
                 end[] = {5'300, 6'350, 7'300};
  for (size_t i = 0; i < 3; ++i) {
    const NcclRecord& x = replays[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(x.graph_replay, i + 1);
    EXPECT_EQ(x.correlation_id, corr[i]);
    EXPECT_EQ(x.start_ns, call[i]);  // the graph launch call
    EXPECT_EQ(x.gpu_start_ns, start[i]);
    EXPECT_EQ(x.end_ns, end[i]);
    EXPECT_EQ(x.gpu_timing, U8(NcclGpuTiming::kKernel));
    EXPECT_EQ(x.stream_id, 9u);
    // Everything that describes the operation is the captured one's.
    EXPECT_EQ(x.event_type, captured.event_type);
    EXPECT_EQ(x.comm_hash, 0xAu);
    EXPECT_EQ(x.seq_number, 5u);
    EXPECT_EQ(x.func_id, captured.func_id);
    EXPECT_EQ(x.count, captured.count);
    EXPECT_EQ(x.bytes, captured.bytes);
    EXPECT_EQ(x.algo_id, captured.algo_id);
    EXPECT_EQ(x.proto_id, captured.proto_id);
    EXPECT_EQ(x.datatype_id, captured.datatype_id);
    EXPECT_EQ(x.n_channels, captured.n_channels);
    EXPECT_EQ(x.comm_nranks, captured.comm_nranks);
    EXPECT_EQ(x.external_id, captured.external_id);  // names the captured operation
  }

  // Idempotent: a second resolution changes nothing and adds no replay.
  const std::vector<NcclRecord> once = t.nccl;
  const NcclResolveResult again = t.Resolve();
  EXPECT_TRUE(SameBytes(t.nccl, once));
  EXPECT_EQ(again.graph_replays, 0u);
  EXPECT_FALSE(NcclRecordsNeedResolution(t.nccl));
}

// Two graphs on two communicators, instantiated twice and cloned again (a
// clone of a clone), with a captured send/recv group (one kernel runs both):
// replays are numbered per captured operation in time order, across
// instantiations; a kernel reported with the created node's own id counts too.
TEST(NcclResolveGraphs, TwoGraphsTwoCommunicatorsSeveralInstantiations) {
  Tables t;
  t.nccl = {Coll(1'000, 2, 0xA, 8), P2p(2'000, 3, 0xB, 41, 1), P2p(2'001, 3, 0xB, 42, 1)};
  t.graph = {NodeCreated(500, 2, 0xA), NodeCreated(600, 3, 0xB),  NodeCloned(900, 500),
             NodeCloned(901, 500),                            // graph A instantiated twice
             NodeCloned(950, 600),     NodeCloned(951, 950),  // graph B cloned, then instantiated
             NodeCloned(951, 950)};                           // a callback seen twice
  t.ext = {Ext(2, 20), Ext(3, 30)};
  t.kernels = {GraphKernel(101, 10'000, 10'100, 900, 5), GraphKernel(102, 10'050, 10'200, 951, 6),
               GraphKernel(103, 11'000, 11'100, 901, 5), GraphKernel(104, 11'050, 11'300, 951, 6),
               GraphKernel(105, 12'000, 12'100, 500, 5)};
  const NcclResolveResult r = t.Resolve();
  EXPECT_EQ(r.graph_nodes, 2u);
  EXPECT_EQ(r.graph_node_clones, 4u);
  EXPECT_EQ(r.captured_operations, 3u);
  EXPECT_EQ(r.graph_replays, 3u + 2u * 2u);
  EXPECT_TRUE(r.note.empty()) << r.note;

  const std::vector<NcclRecord> a = Replays(t.nccl, 0xA);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].correlation_id, 101u);
  EXPECT_EQ(a[1].correlation_id, 103u);
  EXPECT_EQ(a[2].correlation_id, 105u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].graph_replay, i + 1);
    EXPECT_EQ(a[i].seq_number, 8u);
  }
  const std::vector<NcclRecord> b = Replays(t.nccl, 0xB);
  ASSERT_EQ(b.size(), 4u);  // 2 replays x (Send, Recv)
  std::map<uint32_t, std::vector<uint32_t>> replay_of_func;
  for (const NcclRecord& x : b) {
    EXPECT_EQ(x.event_type, static_cast<uint8_t>(NcclEventType::kP2p));
    EXPECT_EQ(x.peer, 1);
    EXPECT_EQ(x.correlation_id, x.graph_replay == 1 ? 102u : 104u);
    EXPECT_EQ(x.end_ns, x.graph_replay == 1 ? 10'200u : 11'300u);
    replay_of_func[x.func_id].push_back(x.graph_replay);
  }
  EXPECT_EQ(replay_of_func[41], (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(replay_of_func[42], (std::vector<uint32_t>{1, 2}));
}

// With host callbacks in the graph (--nccl channels), NCCL reports nothing at
// capture and reports each replay itself, from CUDA's callback thread, with a
// new sequence number and channel times but no launch. The captured call
// becomes the captured operation; NCCL's replay records are numbered and tied
// to the replayed kernels, not counted as new operations.
TEST(NcclResolveGraphs, ChannelModeReplaysReportedByNcclAreNumberedNotCounted) {
  Tables t;
  const uint64_t g = 1'790'000'000'000'000'000ull;              // %globaltimer
  const int64_t offset = -static_cast<int64_t>(g) + 1'000'000;  // host = gpu + offset
  auto host = [&](uint64_t gpu) {
    return static_cast<uint64_t>(static_cast<int64_t>(gpu) + offset);
  };
  t.nccl = {RawOp(100, 1, g - 999'000 + 50, g - 999'000 + 500)};  // eager: calibrates the clock
  t.graph = {CapturedCall(2'000, 2, 0xA), NodeCreated(500, 2, 0xA), NodeCloned(900, 500)};
  t.nccl[0].comm_hash = 0xA;
  // NCCL's replay records: each starts on the host just before its kernel.
  for (uint64_t i = 0; i < 3; ++i) {
    NcclRecord x = Coll(4'990 + i * 1'000, 0, 0xA, 12 + i);
    x.gpu_start_ns = g - 1'000'000 + 5'000 + i * 1'000 + 7;
    x.end_ns = g - 1'000'000 + 5'000 + i * 1'000 + 180;
    x.gpu_timing = U8(NcclGpuTiming::kRaw);
    t.nccl.push_back(x);
  }
  t.nccl.push_back(Coll(5'500, 0, 0xA, 40, 11, 999));  // another size: not a replay
  t.nccl.push_back(RawChannel(g - 1'000'000 + 5'010, g - 1'000'000 + 5'170));
  t.ext = {Ext(1, 10), Ext(2, 20)};
  t.apis = {Launch(10, 90), Launch(20, 2'005)};
  t.kernels = {Kernel(10, host(g - 999'000 + 50), host(g - 999'000 + 600), 7)};
  for (uint32_t i = 0; i < 3; ++i) {
    t.kernels.push_back(GraphKernel(31 + i, 5'000 + i * 1'000 + 7, 5'000 + i * 1'000 + 200, 900));
  }
  const NcclResolveResult r = t.Resolve();
  EXPECT_EQ(r.captured_operations, 1u);
  EXPECT_EQ(r.captured_from_calls, 1u);
  EXPECT_EQ(r.graph_replays, 3u);
  EXPECT_EQ(r.graph_replays_reported, 3u);
  EXPECT_EQ(r.calibration.offset_ns, offset);
  EXPECT_EQ(r.calibration.pairs, 4);  // the eager kernel and the three replays
  EXPECT_TRUE(r.note.empty()) << r.note;
  EXPECT_FALSE(AnyBookkeeping(t.nccl));

  // Calls the program made (graph_replay 0): the eager one, the captured one
  // and the other size; the three replays are not among them.
  size_t calls = 0;
  const NcclRecord* captured = nullptr;
  for (const NcclRecord& x : t.nccl) {
    if (IsOp(x) && x.graph_replay == 0) ++calls;
    if (IsOp(x) && x.graph_replay == 0 && x.external_id == 2) captured = &x;
  }
  EXPECT_EQ(calls, 3u);
  ASSERT_NE(captured, nullptr);
  EXPECT_EQ(captured->event_type, static_cast<uint8_t>(NcclEventType::kColl));
  EXPECT_EQ(captured->correlation_id, 20u);
  EXPECT_EQ(captured->seq_number, 12u);  // its first replay's
  EXPECT_EQ(captured->gpu_timing, U8(NcclGpuTiming::kNone));
  EXPECT_EQ(captured->count, 256u);

  const std::vector<NcclRecord> replays = Replays(t.nccl);
  ASSERT_EQ(replays.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(replays[i].graph_replay, i + 1);
    EXPECT_EQ(replays[i].seq_number, 12u + i);  // NCCL's own numbers are kept
    EXPECT_EQ(replays[i].external_id, 2u);
    EXPECT_EQ(replays[i].correlation_id, 31u + i);
    EXPECT_EQ(replays[i].gpu_timing, U8(NcclGpuTiming::kCalibrated));
    EXPECT_EQ(replays[i].gpu_start_ns, 5'000u + i * 1'000 + 7);
    EXPECT_EQ(replays[i].end_ns, 5'000u + i * 1'000 + 180);
  }
}

// A replayed kernel whose graph node is not linked to any NCCL launch (here the
// clone row is missing) is reported, never attributed by guess; so is a launch
// whose nodes were recorded but whose operation was not.
TEST(NcclResolveGraphs, MissingNodeMappingIsReportedNotInvented) {
  Tables t;
  t.nccl = {Coll(2'000, 2, 0xA, 5)};
  t.graph = {NodeCreated(500, 2, 0xA),   // clone 900 of 500 not recorded
             NodeCreated(600, 3, 0xB)};  // launch 3: no operation, no call
  t.ext = {Ext(2, 20), Ext(3, 30)};
  t.kernels = {GraphKernel(31, 5'100, 5'300, 900), GraphKernel(32, 6'100, 6'300, 900),
               GraphKernel(33, 6'500, 6'600, 600)};
  const NcclResolveResult r = t.Resolve();
  EXPECT_EQ(r.captured_operations, 1u);
  EXPECT_EQ(r.captured_without_replay, 1u);
  EXPECT_EQ(r.graph_launches_unmatched, 1u);
  EXPECT_EQ(r.graph_replays, 0u);
  EXPECT_TRUE(Replays(t.nccl).empty());
  EXPECT_FALSE(AnyBookkeeping(t.nccl));
  ASSERT_EQ(t.nccl.size(), 1u);
  EXPECT_EQ(t.nccl[0].correlation_id, 20u);
  EXPECT_NE(r.note.find("1 of 1 captured operations have no replayed kernel"), std::string::npos)
      << r.note;
  EXPECT_NE(r.note.find("1 captured NCCL launches have graph nodes but no NCCL operation"),
            std::string::npos)
      << r.note;
}

TEST(NcclResolveGraphs, BookkeepingRowsNeedResolution) {
  EXPECT_TRUE(NcclRecordsNeedResolution({}, std::vector<NcclGraphRecord>{NodeCloned(2, 1)}));
  EXPECT_TRUE(NcclRecordsNeedResolution({}, std::vector<NcclGraphRecord>{CapturedCall(1, 0, 2)}));
  // Format 1.3 files kept them in the nccl table.
  EXPECT_TRUE(NcclRecordsNeedResolution(std::vector<NcclRecord>{Legacy(NodeCloned(2, 1))}));
  EXPECT_TRUE(NcclRecordsNeedResolution(std::vector<NcclRecord>{Legacy(CapturedCall(1, 0, 2))}));
}

// A format 1.3 rank file kept the bookkeeping rows in its nccl table (event
// types 6-8). They are taken out as the rows they stand for, and the two
// encodings of one job resolve to the same records.
TEST(NcclResolveGraphs, FormatOneThreeRowsResolveLikeTheirOwnKind) {
  auto job = [] {
    Tables t;
    t.nccl = {Coll(1'000, 2, 0xA, 8), P2p(2'000, 3, 0xB, 41, 1)};
    t.graph = {NodeCreated(500, 2, 0xA), NodeCreated(600, 3, 0xB), NodeCloned(900, 500),
               NodeCloned(950, 600), CapturedCall(1'990, 4, 0xC)};
    t.ext = {Ext(2, 20), Ext(3, 30)};
    t.kernels = {GraphKernel(101, 10'000, 10'100, 900, 5), GraphKernel(102, 10'050, 10'200, 950, 6)};
    return t;
  };
  Tables now = job();
  Tables old = job();
  std::vector<NcclRecord> legacy_rows;
  for (const NcclGraphRecord& g : old.graph) legacy_rows.push_back(Legacy(g));
  old.nccl.insert(old.nccl.begin() + 1, legacy_rows.begin(), legacy_rows.end());  // interleaved
  old.graph.clear();

  std::vector<NcclRecord> copy = old.nccl;
  const std::vector<NcclGraphRecord> taken = TakeLegacyGraphRows(copy);
  ASSERT_EQ(taken.size(), now.graph.size());
  for (size_t i = 0; i < taken.size(); ++i) {
    EXPECT_EQ(std::memcmp(&taken[i], &now.graph[i], sizeof(NcclGraphRecord)), 0) << i;
  }
  EXPECT_FALSE(AnyBookkeeping(copy));

  const NcclResolveResult a = now.Resolve();
  const NcclResolveResult b = old.Resolve();
  EXPECT_EQ(a.graph_nodes, 2u);
  EXPECT_EQ(a.graph_node_clones, 2u);
  EXPECT_EQ(a.graph_replays, 2u);
  EXPECT_EQ(b.graph_nodes, a.graph_nodes);
  EXPECT_EQ(b.graph_node_clones, a.graph_node_clones);
  EXPECT_EQ(b.captured_operations, a.captured_operations);
  EXPECT_EQ(b.captured_from_calls, a.captured_from_calls);
  EXPECT_EQ(b.graph_replays, a.graph_replays);
  EXPECT_EQ(b.graph_launches_unmatched, a.graph_launches_unmatched);
  EXPECT_EQ(b.note, a.note);
  EXPECT_TRUE(SameBytes(now.nccl, old.nccl));
}

// The merge resolves with only the kernel and API records NcclReferencedRecords
// names (gathered while it reads those kinds). Random jobs without CUDA graphs:
// operations found by external id, by nearest launch or already resolved,
// external correlations of other kinds and repeated external ids, kernels
// repeating a correlation id (the first wins), raw and kernel-timed operations,
// raw channels. Resolving with the named records only gives the same records
// and the same result as with all of them.
TEST(NcclResolve, TheReferencedRecordsResolveLikeAllOfThem) {
  NcclResolveResult seen;  // totals over the seeds
  size_t all_rows = 0, named_rows = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed);
    auto pick = [&](uint64_t n) { return rng() % n; };
    Tables all;
    all.anchor = {1'000'000, 400};
    const uint32_t corr_ids = 40 + static_cast<uint32_t>(pick(40));
    const bool no_nccl_launches = seed % 10 == 0;  // nothing to resolve by
    for (uint64_t e = 1; e <= 20; ++e) {
      if (pick(4) == 0) continue;
      const uint32_t kind = no_nccl_launches || pick(5) == 0 ? 3u : kNcclExternalCorrelationKind;
      all.ext.push_back(
          Ext(pick(3) == 0 ? e / 2 + 1 : e, 1 + static_cast<uint32_t>(pick(corr_ids)), kind));
    }
    for (int a = 0; a < 60; ++a) {
      all.apis.push_back(Launch(1 + static_cast<uint32_t>(pick(corr_ids)), 1'000 * pick(100)));
    }
    for (int k = 0; k < 80; ++k) {
      const uint64_t start = 100'000 + 1'000 * pick(100);
      all.kernels.push_back(Kernel(1 + static_cast<uint32_t>(pick(corr_ids)), start,
                                   start + 1 + pick(900), static_cast<uint32_t>(pick(4))));
    }
    for (int o = 0; o < 30; ++o) {
      const uint64_t start = 1'000 * pick(100);
      const uint64_t external = pick(3) == 0 ? 0 : 1 + pick(25);
      const NcclEventType type = pick(2) == 0 ? NcclEventType::kColl : NcclEventType::kP2p;
      switch (pick(4)) {
        case 0:
          all.nccl.push_back(Op(start, external, type));
          break;
        case 1: {
          const uint64_t gpu = 5'000'000 + 1'000 * pick(100);
          all.nccl.push_back(RawOp(start, external, gpu, gpu + 1 + pick(900), type));
          break;
        }
        case 2: {
          NcclRecord r = Op(start, external, type);
          r.correlation_id = 1 + static_cast<uint32_t>(pick(corr_ids));  // already resolved
          all.nccl.push_back(r);
          break;
        }
        default: {
          const uint64_t gpu = 5'000'000 + 1'000 * pick(100);
          all.nccl.push_back(RawChannel(gpu, gpu + 1 + pick(900)));
          break;
        }
      }
    }
    const std::optional<NcclReferencedIds> ids =
        NcclReferencedRecords(all.nccl, all.graph, all.ext);
    ASSERT_TRUE(ids.has_value());
    Tables named = all;
    std::erase_if(named.kernels,
                  [&](const KernelRecord& k) { return !ids->kernels.count(k.correlation_id); });
    std::erase_if(named.apis,
                  [&](const ApiRecord& a) { return !ids->apis.count(a.correlation_id); });
    const NcclResolveResult a = all.Resolve();
    const NcclResolveResult b = named.Resolve();
    EXPECT_TRUE(SameBytes(all.nccl, named.nccl)) << "seed " << seed;
    EXPECT_EQ(a.by_external_id, b.by_external_id) << "seed " << seed;
    EXPECT_EQ(a.by_time, b.by_time) << "seed " << seed;
    EXPECT_EQ(a.already_resolved, b.already_resolved) << "seed " << seed;
    EXPECT_EQ(a.unresolved, b.unresolved) << "seed " << seed;
    EXPECT_EQ(a.without_kernel, b.without_kernel) << "seed " << seed;
    EXPECT_EQ(a.raw_converted, b.raw_converted) << "seed " << seed;
    EXPECT_EQ(a.calibration.offset_ns, b.calibration.offset_ns) << "seed " << seed;
    EXPECT_EQ(a.calibration.pairs, b.calibration.pairs) << "seed " << seed;
    EXPECT_EQ(a.calibration.spread_ns, b.calibration.spread_ns) << "seed " << seed;
    EXPECT_EQ(a.note, b.note) << "seed " << seed;
    seen.by_external_id += a.by_external_id;
    seen.by_time += a.by_time;
    seen.already_resolved += a.already_resolved;
    seen.unresolved += a.unresolved;
    seen.without_kernel += a.without_kernel;
    seen.raw_converted += a.raw_converted;
    seen.calibration.pairs += a.calibration.pairs;
    all_rows += all.kernels.size() + all.apis.size();
    named_rows += named.kernels.size() + named.apis.size();
  }
  // The seeds took every path, and the named records are fewer.
  EXPECT_GT(seen.by_external_id, 0u);
  EXPECT_GT(seen.by_time, 0u);
  EXPECT_GT(seen.already_resolved, 0u);
  EXPECT_GT(seen.unresolved, 0u);
  EXPECT_GT(seen.without_kernel, 0u);
  EXPECT_GT(seen.raw_converted, 0u);
  EXPECT_GT(seen.calibration.pairs, 0);
  EXPECT_LT(named_rows, all_rows);
}

// With CUDA-graph bookkeeping every kernel may be a replay: no subset is named.
TEST(NcclResolveGraphs, GraphRowsNeedEveryKernel) {
  EXPECT_FALSE(NcclReferencedRecords({}, std::vector<NcclGraphRecord>{NodeCloned(2, 1)}, {}));
  EXPECT_FALSE(
      NcclReferencedRecords(std::vector<NcclRecord>{Legacy(CapturedCall(1, 0, 2))}, {}, {}));
  EXPECT_TRUE(NcclReferencedRecords(std::vector<NcclRecord>{Op(5)}, {}, {}));
}

}  // namespace
}  // namespace aon
