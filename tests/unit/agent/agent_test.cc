// The agent in real processes: a child loads libaon_agent.so through NVTX
// injection (and the fake driver), exits in various ways, and the rank file it
// leaves is read back with the trace reader.
#include <map>
#include <set>
#include <vector>
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

// ---- Budgeted mode: capture windows on steps ---------------------------------

struct StepsFile {
  RankMetadata meta;
  std::vector<StepRecord> steps;
  std::map<uint64_t, int> kernels_of_step;  // from the kernels' names "k_step<i>"
  size_t memcpy = 0, memset = 0, sync = 0, api = 0;
};

StepsFile ReadSteps(TraceReader& r) {
  StepsFile f;
  auto meta = r.ReadRankMetadata();
  EXPECT_TRUE(meta.ok()) << meta.status().ToString();
  if (meta.ok()) f.meta = *meta;
  auto strings = r.ReadStrings();
  auto steps = r.ReadAll<StepRecord>();
  auto kernels = r.ReadAll<KernelRecord>();
  EXPECT_TRUE(strings.ok() && steps.ok() && kernels.ok());
  if (!strings.ok() || !steps.ok() || !kernels.ok()) return f;
  f.steps = *steps;
  for (const KernelRecord& k : *kernels) {
    const std::string& name = strings->Get(k.name_id);
    EXPECT_EQ(name.rfind("k_step", 0), 0u) << name;
    ++f.kernels_of_step[std::stoull(name.substr(6))];
  }
  f.memcpy = r.ReadAll<MemcpyRecord>()->size();
  f.memset = r.ReadAll<MemsetRecord>()->size();
  f.sync = r.ReadAll<SyncRecord>()->size();
  f.api = r.ReadAll<ApiRecord>()->size();
  return f;
}

// Every step is recorded (the continuous tier); GPU records exist for exactly
// the steps marked captured, all of each, and for no other step.
void ExpectWindowsHoldExactlyTheirSteps(const StepsFile& f, size_t steps, StepSource source) {
  ASSERT_EQ(f.steps.size(), steps);
  std::set<uint64_t> captured;
  for (size_t i = 0; i < f.steps.size(); ++i) {
    const StepRecord& s = f.steps[i];
    EXPECT_EQ(s.step, i);
    EXPECT_EQ(s.source, static_cast<uint8_t>(source));
    EXPECT_LE(s.start_ns, s.end_ns);
    if (i > 0) {
      EXPECT_EQ(s.start_ns, f.steps[i - 1].end_ns) << "steps tile the time";
    }
    if (s.flags & kStepCaptured) {
      captured.insert(s.step);
      EXPECT_NE(s.window, 0u);
      EXPECT_LE(s.window_first_step, s.step);
    }
  }
  ASSERT_FALSE(captured.empty());
  for (const auto& [step, n] : f.kernels_of_step) {
    EXPECT_TRUE(captured.count(step)) << "kernels of uncaptured step " << step;
    EXPECT_EQ(n, 2) << "step " << step;
  }
  EXPECT_EQ(f.kernels_of_step.size(), captured.size());
  EXPECT_EQ(f.memcpy, captured.size());
  EXPECT_EQ(f.memset, captured.size());
  EXPECT_EQ(f.sync, captured.size());
  EXPECT_EQ(f.api, 5 * captured.size());
  EXPECT_EQ(f.meta.capture_mode, "budgeted");
  EXPECT_EQ(f.meta.steps, static_cast<int64_t>(steps));
  EXPECT_EQ(f.meta.captured_steps, static_cast<int64_t>(captured.size()));
}

TEST_F(AgentTest, BudgetedModeCapturesWindowsOfNvtxStepsAndNothingBetween) {
  int st = RunChild("steps", {{"AON_SOURCE", "synthetic"},
                              {"AON_MODE", "budgeted"},
                              {"AON_CAPTURE_PERIOD", "16"},
                              {"AON_CAPTURE_STEPS", "3"},
                              {"STEPS", "100"},
                              {"STEP_MARK", "nvtx"}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  const StepsFile f = ReadSteps(*r);
  ExpectWindowsHoldExactlyTheirSteps(f, 100, StepSource::kNvtx);
  EXPECT_EQ(f.meta.step_source, "nvtx");
  EXPECT_EQ(f.meta.capture_period, 16);
  // Windows: the first measuring window (one step: step 10), and 3 steps every
  // 16 at one phase.
  std::vector<std::vector<uint64_t>> windows;
  uint32_t last = 0;
  for (const StepRecord& s : f.steps) {
    if (!(s.flags & kStepCaptured)) continue;
    if (s.window != last) windows.emplace_back();
    last = s.window;
    windows.back().push_back(s.step);
  }
  ASSERT_GE(windows.size(), 6u);
  int first = 0;
  std::set<uint64_t> phases;
  for (const std::vector<uint64_t>& w : windows) {
    if (w == std::vector<uint64_t>{10}) {
      ++first;
      continue;
    }
    if (w.back() == 99 && w.size() < 3) continue;  // cut by the end of the run
    ASSERT_EQ(w.size(), 3u) << "window at step " << w[0];
    EXPECT_EQ(w[1], w[0] + 1);
    EXPECT_EQ(w[2], w[0] + 2);
    phases.insert(w[0] % 16);
  }
  EXPECT_EQ(first, 1);
  EXPECT_EQ(phases.size(), 1u) << "every periodic window at one phase";
  EXPECT_EQ(f.meta.windows, static_cast<int64_t>(windows.size()));
}

TEST_F(AgentTest, AonStepMarksStepsBeforeNvtx) {
  int st = RunChild("steps", {{"AON_SOURCE", "synthetic"},
                              {"AON_MODE", "budgeted"},
                              {"AON_CAPTURE_PERIOD", "32"},
                              {"STEPS", "80"},
                              {"STEP_MARK", "api"}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  const StepsFile f = ReadSteps(*r);
  ExpectWindowsHoldExactlyTheirSteps(f, 80, StepSource::kApi);
  EXPECT_EQ(f.meta.step_source, "api");
}

TEST_F(AgentTest, TimeSlotsMarkStepsWhenNothingElseDoes) {
  int st = RunChild("steps", {{"AON_SOURCE", "synthetic"},
                              {"AON_MODE", "budgeted"},
                              {"AON_STEP_SOURCE", "time"},
                              {"AON_TIME_SLOT", "0.02"},
                              {"AON_CAPTURE_PERIOD", "8"},
                              {"STEPS", "150"},
                              {"STEP_US", "5000"},
                              {"STEP_MARK", "none"}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->step_source, "time slot");
  auto steps = r->ReadAll<StepRecord>();
  ASSERT_TRUE(steps.ok());
  ASSERT_GE(steps->size(), 20u);  // ~0.8 s of 20 ms slots
  for (size_t i = 1; i < steps->size(); ++i) {
    // Slot numbers are CLOCK_REALTIME / slot: increasing (a slot is skipped
    // only when the timer thread was descheduled past a boundary).
    EXPECT_GT((*steps)[i].step, (*steps)[i - 1].step);
    EXPECT_EQ((*steps)[i].source, static_cast<uint8_t>(StepSource::kTime));
  }
  EXPECT_GT(meta->captured_steps, 0);
  EXPECT_GT(meta->windows, 0);
}

TEST_F(AgentTest, FullModeMarksEveryStepCaptured) {
  int st = RunChild("steps", {{"AON_SOURCE", "synthetic"},
                              {"AON_MODE", "full"},
                              {"STEPS", "30"},
                              {"STEP_MARK", "nvtx"}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  const StepsFile f = ReadSteps(*r);
  ASSERT_EQ(f.steps.size(), 30u);
  for (const StepRecord& s : f.steps) EXPECT_EQ(s.flags, kStepCaptured);
  EXPECT_EQ(f.kernels_of_step.size(), 30u);
  EXPECT_EQ(f.meta.capture_mode, "full");
  EXPECT_EQ(f.meta.captured_steps, 30);
  EXPECT_EQ(f.meta.amortized_cost, -1.0);
}

}  // namespace
}  // namespace aon
