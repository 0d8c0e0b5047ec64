// AON as NCCL's profiler plugin, driven through its exported v5/v4 tables by a
// real child process (nccl_abi_child) with hand-made event sequences; the rank
// file it leaves is read back.
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent_child_fixture.h"
#include "aon/nccl_profiler_abi.h"
#include "aon/nccl_resolve.h"

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
  NcclResolveResult resolved =
      ResolveNcclRecords(all, {}, {}, {}, RealtimeAnchorNs{meta->anchor_clock_ns, meta->anchor_realtime_ns});
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
  auto calls = OfType(all, NcclEventType::kCapturedColl);
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
  auto calls = OfType(all, NcclEventType::kCapturedColl);
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
  EXPECT_EQ(mask_of(""), static_cast<unsigned>(kNcclProfileColl | kNcclProfileP2p |
                                               kNcclProfileKernelLaunch));
  EXPECT_EQ(mask_of("channels"),
            static_cast<unsigned>(kNcclProfileColl | kNcclProfileP2p | kNcclProfileKernelCh |
                                  kNcclProfileKernelLaunch));
  EXPECT_EQ(mask_of("coll"), static_cast<unsigned>(kNcclProfileColl | kNcclProfileP2p));
  EXPECT_EQ(mask_of("off"), 0u);
}

}  // namespace
}  // namespace aon
