// AON as NCCL's profiler plugin, driven through its exported v5/v4 tables by a
// real child process (nccl_abi_child) with hand-made event sequences; the rank
// file it leaves is read back.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent_child_fixture.h"
#include "aon/merge/nccl_resolve.h"
#include "aon/nccl_profiler_abi.h"

namespace aon {

const std::string kChildProgram = std::string(AON_BUILD_BIN_DIR) + "/../tests-bin/nccl_abi_child";

namespace {

class NcclPluginTest : public AgentTest {
 protected:
  std::vector<NcclRecord> Records(std::unique_ptr<TraceReader>& r) {
    auto n = r->ReadAll<NcclRecord>();
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? *n : std::vector<NcclRecord>{};
  }
  std::map<std::string, std::string> Env(std::map<std::string, std::string> extra = {}) {
    extra["NCCL_PROFILER_PLUGIN"] = kAgent;
    // The sequences below include per-channel events: capture them.
    if (!extra.count("AON_NCCL")) extra["AON_NCCL"] = "channels";
    return extra;
  }
  // The CUDA-graph bookkeeping kind (records.h: NcclGraphRecord).
  std::vector<NcclGraphRecord> GraphRows(std::unique_ptr<TraceReader>& r) {
    auto n = r->ReadAll<NcclGraphRecord>();
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? *n : std::vector<NcclGraphRecord>{};
  }
  static std::vector<NcclGraphRecord> CapturedColls(const std::vector<NcclGraphRecord>& all) {
    std::vector<NcclGraphRecord> out;
    for (const NcclGraphRecord& r : all) {
      if (r.event == static_cast<uint8_t>(NcclGraphEvent::kCapturedColl)) out.push_back(r);
    }
    return out;
  }
  static std::vector<NcclRecord> OfType(const std::vector<NcclRecord>& all, NcclEventType t) {
    std::vector<NcclRecord> out;
    for (const NcclRecord& r : all) {
      if (r.event_type == static_cast<uint8_t>(t)) out.push_back(r);
    }
    return out;
  }
};

constexpr uint64_t kGpu0 = 1'790'000'000'000'000'000ull;

TEST_F(NcclPluginTest, CollectiveWithChannelsStoppedOutOfOrder) {
  int st = RunChild("basic", Env());
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto strings = r->ReadStrings();
  ASSERT_TRUE(strings.ok());
  auto all = Records(r);
  // The rank file holds what NCCL reported: channel times still raw
  // %globaltimer values, tied to kernels and converted by the merge.
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  for (const NcclRecord& x : all) {
    if (x.event_type == static_cast<uint8_t>(NcclEventType::kKernelCh) ||
        x.event_type == static_cast<uint8_t>(NcclEventType::kColl)) {
      EXPECT_EQ(x.gpu_timing, static_cast<uint8_t>(NcclGpuTiming::kRaw));
    }
  }
  NcclResolveResult resolved = ResolveNcclRecords(
      all, {}, {}, {}, {}, RealtimeAnchorNs{meta->anchor_clock_ns, meta->anchor_realtime_ns});
  auto colls = OfType(all, NcclEventType::kColl);
  auto chans = OfType(all, NcclEventType::kKernelCh);
  auto comms = OfType(all, NcclEventType::kComm);
  ASSERT_EQ(colls.size(), 1u);
  ASSERT_EQ(chans.size(), 2u);
  ASSERT_EQ(comms.size(), 1u);
  const NcclRecord& c = colls[0];
  EXPECT_EQ(c.comm_hash, 0xabcu);
  EXPECT_EQ(c.seq_number, 7u);
  EXPECT_EQ(strings->Get(c.func_id), "AllReduce");
  EXPECT_EQ(strings->Get(c.algo_id), "RING");
  EXPECT_EQ(strings->Get(c.proto_id), "LL");
  EXPECT_EQ(strings->Get(c.datatype_id), "ncclFloat32");
  EXPECT_EQ(c.count, 1024u);
  EXPECT_EQ(c.bytes, 4096u);
  EXPECT_EQ(c.n_channels, 2u);
  EXPECT_EQ(c.n_warps, 16u);
  EXPECT_EQ(c.comm_nranks, 2);
  EXPECT_NE(c.external_id, 0u);  // the launch claimed it
  // No CUPTI here: GPU times converted assuming %globaltimer = CLOCK_REALTIME,
  // so the GPU span keeps its exact length: first channel start .. last stop.
  EXPECT_EQ(c.gpu_timing, static_cast<uint8_t>(NcclGpuTiming::kAssumed));
  EXPECT_EQ(c.end_ns - c.gpu_start_ns, 8000u);
  for (const NcclRecord& ch : chans) {
    EXPECT_EQ(ch.seq_number, 7u);
    EXPECT_EQ(ch.comm_hash, 0xabcu);
    EXPECT_EQ(ch.end_ns - ch.start_ns, ch.channel_id == 0 ? 7000u : 7800u);
  }
  EXPECT_EQ(strings->Get(comms[0].func_id), "test-comm");
  EXPECT_EQ(resolved.calibration.pairs, 0);
  EXPECT_NE(resolved.note.find("could not be calibrated"), std::string::npos) << resolved.note;
}

TEST_F(NcclPluginTest, NullContextAndUnrecordedEventsAreHarmless) {
  int st = RunChild("null-context", Env());
  ASSERT_TRUE(WIFEXITED(st)) << "died with status " << st;
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

TEST_F(NcclPluginTest, ManyCommunicatorsAndThreadsLoseNothing) {
  int st = RunChild("many", Env());
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto all = Records(r);
  auto colls = OfType(all, NcclEventType::kColl);
  EXPECT_EQ(colls.size(), 8u * 200u);
  EXPECT_EQ(OfType(all, NcclEventType::kKernelCh).size(), 8u * 200u * 3u);
  EXPECT_EQ(OfType(all, NcclEventType::kComm).size(), 8u);
  // Every (communicator, sequence number) exactly once, with its own GPU span.
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (const NcclRecord& c : colls) {
    EXPECT_TRUE(seen.emplace(c.comm_hash, c.seq_number).second);
    EXPECT_EQ(c.end_ns - c.gpu_start_ns, 5002u);  // channel 0 start .. channel 2 stop
    EXPECT_NE(c.external_id, 0u);
  }
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->dropped[static_cast<size_t>(RecordKind::kNccl)], 0u);
}

// The NCCL step source (docs/always-on.md): each collective of the job's first
// communicator begins a step, numbered from 0 alike on every rank; another
// communicator's collectives mark nothing.
TEST_F(NcclPluginTest, TheFirstCommunicatorsCollectivesMarkTheSteps) {
  int st = RunChild("steps", Env({{"AON_MODE", "budgeted"}, {"AON_STEP_SOURCE", "nccl"},
                                  {"AON_CAPTURE_PERIOD", "16"}}));
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto steps = r->ReadAll<StepRecord>();
  ASSERT_TRUE(steps.ok()) << steps.status().ToString();
  ASSERT_EQ(steps->size(), 40u);  // the last one ends when the process does
  for (size_t i = 0; i < steps->size(); ++i) {
    EXPECT_EQ((*steps)[i].step, i);
    EXPECT_EQ((*steps)[i].source, static_cast<uint8_t>(StepSource::kNccl));
    EXPECT_EQ((*steps)[i].period, 16u) << i;
  }
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->step_source, "nccl");
  EXPECT_EQ(meta->steps, 40);
  EXPECT_EQ(meta->capture_mode, "budgeted");
}

TEST_F(NcclPluginTest, PointToPointOperationsAreNumberedPerPeerAndDirection) {
  int st = RunChild("p2p", Env());
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto strings = r->ReadStrings();
  ASSERT_TRUE(strings.ok());
  auto p2p = OfType(Records(r), NcclEventType::kP2p);
  ASSERT_EQ(p2p.size(), 6u);
  std::map<std::string, std::set<uint64_t>> seqs;
  for (const NcclRecord& p : p2p) {
    EXPECT_EQ(p.peer, 1);
    EXPECT_EQ(p.bytes, 512u);  // 256 bf16
    EXPECT_EQ(p.gpu_timing, static_cast<uint8_t>(NcclGpuTiming::kNone));
    EXPECT_GE(p.end_ns, p.start_ns);
    seqs[strings->Get(p.func_id)].insert(p.seq_number);
  }
  EXPECT_EQ(seqs["Send"], (std::set<uint64_t>{0, 1, 2}));
  EXPECT_EQ(seqs["Recv"], (std::set<uint64_t>{0, 1, 2}));
}

TEST_F(NcclPluginTest, SurplusChannelIsIgnoredAndIncompleteOperationIsKeptAtExit) {
  int st = RunChild("late-and-missing-channels", Env());
  ASSERT_TRUE(WIFEXITED(st)) << "died with status " << st;
  ASSERT_EQ(WEXITSTATUS(st), 0);
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto colls = OfType(Records(r), NcclEventType::kColl);
  ASSERT_EQ(colls.size(), 2u);
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->dropped[static_cast<size_t>(RecordKind::kNccl)], 1u);  // the surplus channel
  bool noted = false;
  for (const std::string& n : meta->notes) noted |= n.find("1 operations had not completed") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST_F(NcclPluginTest, VersionFourTableWorksWithoutLaunchEvents) {
  int st = RunChild("v4", Env());
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto strings = r->ReadStrings();
  ASSERT_TRUE(strings.ok());
  auto all = Records(r);
  auto colls = OfType(all, NcclEventType::kColl);
  ASSERT_EQ(colls.size(), 1u);
  EXPECT_EQ(strings->Get(colls[0].func_id), "AllGather");
  EXPECT_EQ(colls[0].comm_hash, 0x44u);
  EXPECT_EQ(colls[0].comm_rank, 1);
  EXPECT_EQ(colls[0].external_id, 0u);
  EXPECT_EQ(colls[0].end_ns - colls[0].gpu_start_ns, 45u);
  EXPECT_EQ(OfType(all, NcclEventType::kKernelCh).size(), 1u);
}

// NCCL 2.28 reports a group call's operations after launching its kernel, on
// the same thread. Each operation takes its own launch, including a captured
// all-reduce reported after the capture's launch (the bug that made a
// neighbour take that launch), and a group over two communicators ties each
// operation to its communicator's launch. The captured call is kept as a
// bookkeeping row tied to the capture's launch.
TEST_F(NcclPluginTest, OperationsReportedAfterTheirLaunchTakeThatLaunch) {
  int st = RunChild("launch-then-operation", Env({{"AON_NCCL", "default"}}));
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto strings = r->ReadStrings();
  ASSERT_TRUE(strings.ok());
  auto all = Records(r);
  auto colls = OfType(all, NcclEventType::kColl);
  ASSERT_EQ(colls.size(), 5u);
  for (const NcclRecord& c : colls) {
    // Launches are numbered 1, 2, ... in order, and the sequence numbers follow them.
    EXPECT_EQ(c.external_id, c.seq_number) << "seq " << c.seq_number;
    EXPECT_EQ(c.comm_hash, c.seq_number == 5 ? 0xb1u : 0xa1u);
  }
  auto calls = CapturedColls(GraphRows(r));
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].external_id, 2u);  // the capture's launch
  EXPECT_EQ(calls[0].comm_hash, 0xa1u);
  EXPECT_EQ(calls[0].count, 4096u);
  EXPECT_EQ(calls[0].bytes, 4096u * 4);
  EXPECT_EQ(strings->Get(calls[0].func_id), "AllReduce");
  EXPECT_EQ(strings->Get(calls[0].datatype_id), "ncclFloat32");
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  bool order = false, graphs = false;
  for (const std::string& n : meta->notes) {
    order |= n.find("5 operations reported after their launch, 0 before it, 0 with no launch") !=
             std::string::npos;
    graphs |= n.find("1 NCCL launches under stream capture (1 with no graph kernel node") !=
              std::string::npos;
  }
  EXPECT_TRUE(order);
  EXPECT_TRUE(graphs);  // no CUPTI in this process: no node callbacks, and the note says so
}

// With host callbacks in the graph (--nccl channels), NCCL reports nothing at
// capture and every replay from CUDA's callback thread: those records wait for
// no launch (they are emitted as soon as their channels end) and keep
// external_id 0, for the merge to number; the captured call is tied to the
// capture's launch; the user thread's next collective takes its own launch.
TEST_F(NcclPluginTest, ReplaysReportedFromTheHostCallbackThreadWaitForNoLaunch) {
  int st = RunChild("capture-with-host-callbacks", Env());
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto all = Records(r);
  auto colls = OfType(all, NcclEventType::kColl);
  ASSERT_EQ(colls.size(), 4u);
  for (const NcclRecord& c : colls) {
    EXPECT_EQ(c.external_id, c.seq_number == 13 ? 2u : 0u) << "seq " << c.seq_number;
    EXPECT_EQ(c.gpu_timing, static_cast<uint8_t>(NcclGpuTiming::kRaw));
  }
  auto calls = CapturedColls(GraphRows(r));
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].external_id, 1u);
  EXPECT_EQ(calls[0].count, 2048u);
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->dropped[static_cast<size_t>(RecordKind::kNccl)], 0u);
  bool order = false, unfinished = false;
  for (const std::string& n : meta->notes) {
    order |= n.find("1 operations reported after their launch, 0 before it, 3 with no launch") !=
             std::string::npos;
    unfinished |= n.find("had not completed") != std::string::npos;
  }
  EXPECT_TRUE(order);
  EXPECT_FALSE(unfinished);  // nothing was left waiting for a launch
}

// The user's NCCL calls become rows of their own (kGroupApi / kCollApi /
// kP2pApi) with NCCL 2.28.9's real event order, including its repeated stop of
// a CollApi handle, a stop without a start and a group started twice; the merge
// passes them through untouched and counts none of them as an operation.
TEST_F(NcclPluginTest, ApiCallsAreRecordedAroundTheOperationsTheyMake) {
  int st = RunChild("api", Env({{"AON_NCCL", "default"}}));
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto strings = r->ReadStrings();
  ASSERT_TRUE(strings.ok());
  auto all = Records(r);
  auto groups = OfType(all, NcclEventType::kGroupApi);
  auto colls = OfType(all, NcclEventType::kCollApi);
  auto p2ps = OfType(all, NcclEventType::kP2pApi);
  ASSERT_EQ(groups.size(), 5u);
  ASSERT_EQ(colls.size(), 2u);
  ASSERT_EQ(p2ps.size(), 2u);
  for (const auto* rows : {&groups, &colls, &p2ps}) {
    for (const NcclRecord& a : *rows) {
      EXPECT_EQ(a.comm_hash, 0xd1u);
      EXPECT_EQ(a.comm_rank, 0);
      EXPECT_EQ(a.comm_nranks, 2);
      EXPECT_EQ(a.comm_nnodes, 1);
      EXPECT_EQ(a.channel_id, -1);
      EXPECT_EQ(a.peer, -1);
      EXPECT_EQ(a.seq_number, 0u);
      EXPECT_EQ(a.external_id, 0u);
      EXPECT_EQ(a.gpu_timing, static_cast<uint8_t>(NcclGpuTiming::kNone));
      EXPECT_GE(a.end_ns, a.start_ns);
    }
  }
  // Groups in order of start: the lone all-reduce (depth 1), the send/recv
  // group (depth 2), the captured one, the one started again (kept with
  // end = start), the one that replaced it.
  std::sort(groups.begin(), groups.end(),
            [](const NcclRecord& a, const NcclRecord& b) { return a.start_ns < b.start_ns; });
  EXPECT_EQ(groups[0].count, 1u);
  EXPECT_EQ(groups[1].count, 2u);
  EXPECT_EQ(groups[2].n_warps, kNcclApiGraphCaptured);
  EXPECT_EQ(groups[3].end_ns, groups[3].start_ns);
  for (size_t i : {0, 1, 3, 4}) EXPECT_EQ(groups[i].n_warps, 0u) << i;
  const NcclRecord& ar = colls[0].start_ns < colls[1].start_ns ? colls[0] : colls[1];
  const NcclRecord& ag = colls[0].start_ns < colls[1].start_ns ? colls[1] : colls[0];
  EXPECT_EQ(strings->Get(ar.func_id), "AllReduce");
  EXPECT_EQ(ar.count, 1u << 20);
  EXPECT_EQ(ar.bytes, 4u << 20);
  EXPECT_EQ(strings->Get(ar.datatype_id), "ncclFloat32");
  EXPECT_EQ(ar.root, 0);
  EXPECT_EQ(ar.n_warps, 0u);
  EXPECT_EQ(strings->Get(ag.func_id), "AllGather");
  EXPECT_EQ(ag.n_warps, kNcclApiGraphCaptured);
  std::set<std::string> p2p_funcs;
  for (const NcclRecord& p : p2ps) {
    p2p_funcs.insert(strings->Get(p.func_id));
    EXPECT_EQ(p.count, 256u);
    EXPECT_EQ(p.bytes, 512u);
    EXPECT_EQ(p.root, -1);
    EXPECT_GE(p.start_ns, groups[1].start_ns);
    EXPECT_LE(p.end_ns, groups[1].end_ns);
  }
  EXPECT_EQ(p2p_funcs, (std::set<std::string>{"Send", "Recv"}));
  // The call lies in its group; the operation it made starts inside the group
  // too, after the call (NCCL starts operations at the group's launch).
  auto ops = OfType(all, NcclEventType::kColl);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_GE(ar.start_ns, groups[0].start_ns);
  EXPECT_LE(ar.end_ns, ops[0].start_ns);
  EXPECT_LE(ops[0].start_ns, groups[0].end_ns);
  EXPECT_EQ(OfType(all, NcclEventType::kP2p).size(), 2u);
  const std::vector<NcclGraphRecord> graph = GraphRows(r);
  EXPECT_EQ(CapturedColls(graph).size(), 1u);  // kept for the merge
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  bool noted = false;
  for (const std::string& n : meta->notes) {
    noted |= n.find("NCCL API events: 1 started again before their stop, 2 stops of a call "
                    "already stopped") != std::string::npos;
  }
  EXPECT_TRUE(noted);

  // The merge's post-processing: API rows come out byte for byte as they went in.
  auto api_rows = [](const std::vector<NcclRecord>& v) {
    std::vector<NcclRecord> out;
    for (const NcclRecord& x : v) {
      if (x.event_type >= static_cast<uint8_t>(NcclEventType::kGroupApi) &&
          x.event_type <= static_cast<uint8_t>(NcclEventType::kP2pApi)) {
        out.push_back(x);
      }
    }
    return out;
  };
  const std::vector<NcclRecord> before = api_rows(all);
  NcclResolveResult resolved = ResolveNcclRecords(
      all, graph, {}, {}, {}, RealtimeAnchorNs{meta->anchor_clock_ns, meta->anchor_realtime_ns});
  const std::vector<NcclRecord> after = api_rows(all);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(std::memcmp(&before[i], &after[i], sizeof(NcclRecord)), 0) << i;
  }
  // Operations: the all-reduce, the send and the recv, and the captured call
  // turned into its operation; no API row among them.
  EXPECT_EQ(resolved.captured_from_calls, 1u);
  EXPECT_EQ(OfType(all, NcclEventType::kColl).size(), 2u);
  EXPECT_EQ(OfType(all, NcclEventType::kP2p).size(), 2u);
}

// --nccl proxy: ProxyOp rows carry their operation's identity even when it was
// already retired, ProxyStep rows their ProxyOp's; a parent in another process
// or none gives a row without an operation; a step without an op, and
// ProxyCtrl, get no handle.
TEST_F(NcclPluginTest, ProxyEventsAreTiedToTheirOperation) {
  int st = RunChild("proxy", Env({{"AON_NCCL", "proxy"}}));
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto strings = r->ReadStrings();
  ASSERT_TRUE(strings.ok());
  auto all = Records(r);
  auto ops = OfType(all, NcclEventType::kColl);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].external_id, 1u);
  auto proxy_ops = OfType(all, NcclEventType::kProxyOp);
  auto steps = OfType(all, NcclEventType::kProxyStep);
  ASSERT_EQ(proxy_ops.size(), 3u);
  ASSERT_EQ(steps.size(), 2u);
  std::sort(proxy_ops.begin(), proxy_ops.end(),
            [](const NcclRecord& a, const NcclRecord& b) { return a.start_ns < b.start_ns; });
  const NcclRecord& po = proxy_ops[0];
  EXPECT_EQ(po.comm_hash, 0xe1u);
  EXPECT_EQ(po.seq_number, 3u);
  EXPECT_EQ(strings->Get(po.func_id), "AllReduce");
  EXPECT_EQ(po.external_id, 1u);
  EXPECT_EQ(po.channel_id, 1);
  EXPECT_EQ(po.peer, 1);
  EXPECT_EQ(po.count, 2u);
  EXPECT_EQ(po.bytes, 65536u);
  EXPECT_EQ(po.n_warps, kNcclProxySend);
  EXPECT_EQ(po.comm_nranks, 2);
  EXPECT_EQ(po.gpu_timing, static_cast<uint8_t>(NcclGpuTiming::kNone));
  EXPECT_GE(po.start_ns, ops[0].start_ns);
  for (size_t i : {1, 2}) {
    const NcclRecord& orphan = proxy_ops[i];
    EXPECT_EQ(orphan.comm_hash, 0xe1u) << i;  // from the communicator
    EXPECT_EQ(orphan.seq_number, 0u) << i;
    EXPECT_EQ(orphan.func_id, 0u) << i;
    EXPECT_EQ(orphan.external_id, 0u) << i;
    EXPECT_EQ(orphan.n_warps, 0u) << i;  // receives
    EXPECT_EQ(orphan.channel_id, 1) << i;
  }
  std::sort(steps.begin(), steps.end(),
            [](const NcclRecord& a, const NcclRecord& b) { return a.count < b.count; });
  for (uint64_t k = 0; k < 2; ++k) {
    const NcclRecord& s = steps[k];
    EXPECT_EQ(s.count, k);
    EXPECT_EQ(s.bytes, k == 0 ? 65536u : 1000u);
    EXPECT_EQ(s.seq_number, 3u);
    EXPECT_EQ(s.comm_hash, 0xe1u);
    EXPECT_EQ(s.func_id, po.func_id);
    EXPECT_EQ(s.channel_id, 1);
    EXPECT_EQ(s.peer, 1);
    EXPECT_EQ(s.n_warps, kNcclProxySend);
    EXPECT_GE(s.start_ns, po.start_ns);
    EXPECT_LE(s.end_ns, po.end_ns);
  }
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->dropped[static_cast<size_t>(RecordKind::kNccl)], 0u);
  bool noted = false;
  for (const std::string& n : meta->notes) {
    noted |= n.find("NCCL proxy: 3 proxy operations, 2 proxy steps, 2 proxy operations without") !=
             std::string::npos;
  }
  EXPECT_TRUE(noted);
  // Not operations for the merge; passed through as they are.
  const size_t n = all.size();
  ResolveNcclRecords(all, {}, {}, {}, {},
                     RealtimeAnchorNs{meta->anchor_clock_ns, meta->anchor_realtime_ns});
  EXPECT_EQ(all.size(), n);
  EXPECT_EQ(OfType(all, NcclEventType::kProxyOp).size(), 3u);
  EXPECT_EQ(OfType(all, NcclEventType::kProxyStep).size(), 2u);
  for (const NcclRecord& x : OfType(all, NcclEventType::kProxyOp)) {
    EXPECT_EQ(x.correlation_id, 0u);
    EXPECT_EQ(x.gpu_timing, static_cast<uint8_t>(NcclGpuTiming::kNone));
  }
}

TEST_F(NcclPluginTest, ModesSetTheActivationMask) {
  auto mask_of = [&](const std::string& mode) {
    std::string out = dir_ + "/out.txt";
    pid_t pid = fork();
    if (pid == 0) {
      if (freopen(out.c_str(), "w", stdout) == nullptr) _exit(126);
      setenv("NCCL_PROFILER_PLUGIN", kAgent.c_str(), 1);
      setenv("AON_OUTPUT_DIR", dir_.c_str(), 1);
      if (!mode.empty()) setenv("AON_NCCL", mode.c_str(), 1);
      execl(kChildProgram.c_str(), kChildProgram.c_str(), "mask", nullptr);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    unsigned mask = 0xdead;
    if (FILE* f = fopen(out.c_str(), "r")) {
      if (fscanf(f, "mask=%x", &mask) != 1) mask = 0xbad;
      fclose(f);
    }
    return mask;
  };
  // NCCL 2.28 sends the API events with Coll/P2p anyway; v5 asks for them by name
  // in the modes that record them (all but coll).
  constexpr unsigned kApi = kNcclProfileGroupApi | kNcclProfileCollApi | kNcclProfileP2pApi;
  EXPECT_EQ(mask_of(""), static_cast<unsigned>(kNcclProfileColl | kNcclProfileP2p |
                                               kNcclProfileKernelLaunch) | kApi);
  EXPECT_EQ(mask_of("channels"),
            static_cast<unsigned>(kNcclProfileColl | kNcclProfileP2p | kNcclProfileKernelCh |
                                  kNcclProfileKernelLaunch) | kApi);
  EXPECT_EQ(mask_of("coll"), static_cast<unsigned>(kNcclProfileColl | kNcclProfileP2p));
  EXPECT_EQ(mask_of("proxy"),
            static_cast<unsigned>(kNcclProfileColl | kNcclProfileP2p | kNcclProfileKernelLaunch |
                                  kNcclProfileProxyOp | kNcclProfileProxyStep) | kApi);
  EXPECT_EQ(mask_of("off"), 0u);
}

}  // namespace
}  // namespace aon
