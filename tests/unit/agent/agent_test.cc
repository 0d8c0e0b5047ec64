// The agent in real processes: a child loads libaon_agent.so through NVTX
// injection (and the fake driver), exits in various ways, and the rank file it
// leaves is read back with the trace reader.
#include <map>
#include <string>

#include "agent_child_fixture.h"

namespace aon {

const std::string kChildProgram = std::string(AON_BUILD_BIN_DIR) + "/../tests-bin/agent_test_child";

namespace {

TEST_F(AgentTest, NvtxRangesNestingDomainsAndCrossThreadRanges) {
  int st = RunChild("nvtx");
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto strings = r->ReadStrings();
  ASSERT_TRUE(strings.ok());
  auto nvtx = r->ReadAll<NvtxRecord>();
  ASSERT_TRUE(nvtx.ok());
  std::map<std::string, NvtxRecord> by_name;
  for (const NvtxRecord& n : *nvtx) by_name[strings->Get(n.name_id)] = n;
  ASSERT_EQ(nvtx->size(), 6u);
  EXPECT_EQ(by_name["outer"].depth, 0);
  EXPECT_EQ(by_name["inner"].depth, 1);
  EXPECT_EQ(by_name["outer"].type, static_cast<uint8_t>(NvtxType::kPushPop));
  EXPECT_LE(by_name["outer"].start_ns, by_name["inner"].start_ns);
  EXPECT_GE(by_name["outer"].end_ns, by_name["inner"].end_ns);
  EXPECT_EQ(by_name["mark in inner"].type, static_cast<uint8_t>(NvtxType::kMark));
  EXPECT_EQ(by_name["mark in inner"].start_ns, by_name["mark in inner"].end_ns);
  const NvtxRecord& reg = by_name["registered name"];
  EXPECT_EQ(strings->Get(reg.domain_id), "my-domain");
  EXPECT_EQ(reg.color, 0xff00ff00u);
  EXPECT_EQ(reg.category, 7u);
  EXPECT_EQ(reg.depth, 0);  // depth counts within its own domain
  EXPECT_EQ(by_name["cross-thread"].type, static_cast<uint8_t>(NvtxType::kStartEnd));
  EXPECT_GE(by_name["cross-thread"].end_ns, by_name["cross-thread"].start_ns);
  EXPECT_EQ(by_name.count("wide \xc3\xa9t\xc3\xa9"), 1u);
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->job_id, "agent-test");
  EXPECT_EQ(meta->end_reason, "exit");
  EXPECT_EQ(meta->clock_domain, "CLOCK_MONOTONIC");
  EXPECT_GT(meta->anchor_realtime_ns, 0u);
}

TEST_F(AgentTest, ExitFromAnotherThreadStillWritesTheFile) {
  int st = RunChild("exit-from-thread");
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 5);  // the application's own status is kept
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto nvtx = r->ReadAll<NvtxRecord>();
  ASSERT_TRUE(nvtx.ok());
  EXPECT_EQ(nvtx->size(), 1u);
}

TEST_F(AgentTest, SigtermWritesTheFileThenTerminatesBySignal) {
  int st = RunChild("sigterm");
  ASSERT_TRUE(WIFSIGNALED(st)) << "status " << st;
  EXPECT_EQ(WTERMSIG(st), SIGTERM);
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->end_reason, "signal TERM");
  auto nvtx = r->ReadAll<NvtxRecord>();
  ASSERT_TRUE(nvtx.ok());
  EXPECT_EQ(nvtx->size(), 1u);
}

TEST_F(AgentTest, MemoryCapDropsAndCountsInsteadOfGrowing) {
  // Without a collector draining it, the ring is all the memory there is: the
  // flood must be cut at the cap and every mark kept or counted. (With a
  // collector more reaches the disk than the cap holds; the memory bound under
  // load is measured in bench/memory_under_load.sh.)
  int st = RunChild("flood", {{"AON_MEMORY_CAP", "1M"}, {"AON_COLLECTOR", "off"}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  auto n = r->TableSize(RecordTraits<NvtxRecord>::Schema());
  ASSERT_TRUE(n.ok());
  uint64_t dropped = meta->dropped[static_cast<size_t>(RecordKind::kNvtx)];
  EXPECT_EQ(*n + dropped, 200000u);  // every mark is either kept or counted
  EXPECT_GT(dropped, 0u);
  EXPECT_LE(*n * sizeof(NvtxRecord), 1u << 20);
}

TEST_F(AgentTest, BadSettingDisablesCaptureButNotTheApplication) {
  int st = RunChild("nvtx", {{"AON_KINDS", "kernels,bogus"}});
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  ASSERT_FALSE(meta->notes.empty());
  EXPECT_NE(meta->notes[0].find("bogus"), std::string::npos) << meta->notes[0];
  auto nvtx = r->ReadAll<NvtxRecord>();
  ASSERT_TRUE(nvtx.ok());
  EXPECT_TRUE(nvtx->empty());
}

TEST_F(AgentTest, LauncherProcessRecordsNothing) {
  // As under `aon-run torchrun`: the process whose parent is aon-run is the
  // launcher, not a rank, and must not leave a rank file.
  int st = RunChild("nvtx", {{"AON_LAUNCHER_PARENT_PID", std::to_string(getpid())}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT_TRUE(fs::is_empty(dir_));
  // Its CUDA initialization (the fake driver here) must not start a source or
  // crash: the synthetic device is simply not offered (the child's status 10).
  st = RunChild("synthetic", {{"AON_LAUNCHER_PARENT_PID", std::to_string(getpid())},
                              {"AON_SOURCE", "synthetic"}});
  ASSERT_TRUE(WIFEXITED(st)) << "launcher process died: status " << st;
  EXPECT_EQ(WEXITSTATUS(st), 10);
  EXPECT_TRUE(fs::is_empty(dir_));
  // Any other parent pid: a normal rank.
  st = RunChild("nvtx", {{"AON_LAUNCHER_PARENT_PID", "1"}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT_TRUE(fs::exists(dir_ + "/rank-00000.h5"));
}

TEST_F(AgentTest, SyntheticDeviceRecordsEveryCallLabeledSynthetic) {
  int st = RunChild("synthetic", {{"AON_SOURCE", "synthetic"}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->source, "synthetic");
  ASSERT_EQ(meta->devices.size(), 1u);
  auto strings = r->ReadStrings();
  ASSERT_TRUE(strings.ok());
  EXPECT_NE(strings->Get(meta->devices[0].name_id).find("not real"), std::string::npos);
  auto kernels = r->ReadAll<KernelRecord>();
  auto copies = r->ReadAll<MemcpyRecord>();
  auto sets = r->ReadAll<MemsetRecord>();
  auto syncs = r->ReadAll<SyncRecord>();
  auto api = r->ReadAll<ApiRecord>();
  ASSERT_TRUE(kernels.ok() && copies.ok() && sets.ok() && syncs.ok() && api.ok());
  EXPECT_EQ(kernels->size(), 10u);
  EXPECT_EQ(copies->size(), 10u);
  EXPECT_EQ(sets->size(), 10u);
  EXPECT_EQ(syncs->size(), 1u);
  EXPECT_EQ(api->size(), 31u);
  // Work on one stream never overlaps, and every GPU record has its API call.
  std::map<uint32_t, const ApiRecord*> by_corr;
  for (const ApiRecord& a : *api) by_corr[a.correlation_id] = &a;
  for (size_t i = 0; i < kernels->size(); ++i) {
    const KernelRecord& k = (*kernels)[i];
    EXPECT_EQ(strings->Get(k.name_id), "k_a");
    ASSERT_TRUE(by_corr.count(k.correlation_id));
    EXPECT_EQ(strings->Get(by_corr[k.correlation_id]->name_id), "cudaLaunchKernel");
    EXPECT_GE(k.start_ns, by_corr[k.correlation_id]->start_ns);
  }
}

}  // namespace
}  // namespace aon
