// The agent in real processes: a child loads libaon_agent.so through NVTX
// injection (and the fake driver), exits in various ways, and the rank file it
// leaves is read back with the trace reader.
#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

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
  EXPECT_NE(meta->capture_disabled.find("bogus"), std::string::npos) << meta->capture_disabled;
  EXPECT_EQ(meta->source, "none") << "nothing ran";
  auto nvtx = r->ReadAll<NvtxRecord>();
  ASSERT_TRUE(nvtx.ok());
  EXPECT_TRUE(nvtx->empty());
}

// aon_host_range (a framework hook's compilations): recorded as "AON"-domain
// push/pop ranges with the caller's times and thread, outside capture windows
// too; a range that ends before it starts is dropped.
TEST_F(AgentTest, HostRangesAreRecordedInTheAonDomainOutsideWindows) {
  const std::string log_path = dir_ + "/host-range.log";
  int st = RunChild(
      "host-range",
      {{"AON_SOURCE", "synthetic"}, {"AON_MODE", "budgeted"}, {"HOST_RANGE_LOG", log_path}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  std::ifstream in(log_path);
  std::vector<std::tuple<std::string, uint64_t, uint64_t>> want;
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find('|'), b = line.rfind('|');
    ASSERT_NE(a, b) << line;
    want.emplace_back(line.substr(0, a), std::stoull(line.substr(a + 1, b - a - 1)),
                      std::stoull(line.substr(b + 1)));
  }
  ASSERT_EQ(want.size(), 2u);
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto strings = r->ReadStrings();
  ASSERT_TRUE(strings.ok());
  auto nvtx = r->ReadAll<NvtxRecord>();
  ASSERT_TRUE(nvtx.ok());
  std::vector<std::tuple<std::string, uint64_t, uint64_t>> got;
  for (const NvtxRecord& n : *nvtx) {
    EXPECT_EQ(strings->Get(n.domain_id), kAonNvtxDomain) << strings->Get(n.name_id);
    EXPECT_EQ(n.type, static_cast<uint8_t>(NvtxType::kPushPop));
    got.emplace_back(strings->Get(n.name_id), n.start_ns, n.end_ns);
  }
  std::sort(got.begin(), got.end(),
            [](const auto& x, const auto& y) { return std::get<1>(x) < std::get<1>(y); });
  EXPECT_EQ(got, want);
  auto steps = r->ReadAll<StepRecord>();
  ASSERT_TRUE(steps.ok());
  for (const StepRecord& s : *steps) {
    if (s.step == 2 || s.step == 20) {
      EXPECT_EQ(s.flags & kStepCaptured, 0) << "step " << s.step;
    }
  }
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

// A child forked from a recording process is not the rank: what it records
// (kernels through the device, NVTX ranges) stays out of the parent's file,
// uncounted, and the parent's own records before and after the fork are all
// there.
TEST_F(AgentTest, AForkedChildsRecordsStayOutOfTheParentsFile) {
  int st = RunChild("fork-push", {{"AON_SOURCE", "synthetic"}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto strings = r->ReadStrings();
  auto kernels = r->ReadAll<KernelRecord>();
  auto nvtx = r->ReadAll<NvtxRecord>();
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(strings.ok() && kernels.ok() && nvtx.ok() && meta.ok());
  std::map<std::string, int> kernel_names, range_names;
  for (const KernelRecord& k : *kernels) ++kernel_names[strings->Get(k.name_id)];
  for (const NvtxRecord& n : *nvtx) ++range_names[strings->Get(n.name_id)];
  EXPECT_EQ(kernel_names, (std::map<std::string, int>{{"k_parent", 10}}));
  EXPECT_EQ(range_names, (std::map<std::string, int>{{"parent", 10}}));
  for (uint64_t d : meta->dropped) EXPECT_EQ(d, 0u);
}

// A kernel launched open (the straggler pathology's NCCL kernels, waiting for
// their peers) runs after the stream's work from its launch until the end its
// close gives; nothing refused while it was open left a record.
TEST_F(AgentTest, SyntheticOpenKernelRunsUntilItsCloseGivesTheEnd) {
  const std::string log = dir_ + "/open-kernel.log";
  int st = RunChild("open-kernel", {{"AON_SOURCE", "synthetic"}, {"OPEN_KERNEL_LOG", log}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  uint64_t end = 0;
  std::ifstream(log) >> end;
  ASSERT_GT(end, 0u);
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto strings = r->ReadStrings();
  auto kernels = r->ReadAll<KernelRecord>();
  auto api = r->ReadAll<ApiRecord>();
  auto copies = r->ReadAll<MemcpyRecord>();
  auto sets = r->ReadAll<MemsetRecord>();
  auto syncs = r->ReadAll<SyncRecord>();
  ASSERT_TRUE(strings.ok() && kernels.ok() && api.ok() && copies.ok() && sets.ok() && syncs.ok());
  std::map<std::string, KernelRecord> by_name;
  for (const KernelRecord& k : *kernels) by_name[strings->Get(k.name_id)] = k;
  ASSERT_EQ(kernels->size(), 3u);
  ASSERT_EQ(by_name.size(), 3u);
  const KernelRecord& before = by_name["k_before"];
  const KernelRecord& open = by_name["k_open"];
  EXPECT_EQ(open.stream_id, 1u);
  EXPECT_EQ(open.grid_x, 2);
  EXPECT_EQ(open.block_x, 64);
  EXPECT_GE(open.start_ns, before.end_ns);
  EXPECT_EQ(open.end_ns, end);
  EXPECT_EQ(by_name.count("k_other"), 1u);
  EXPECT_TRUE(copies->empty());
  EXPECT_TRUE(sets->empty());
  ASSERT_EQ(syncs->size(), 1u);
  EXPECT_GE((*syncs)[0].end_ns, end);
  // Its launch call is recorded with it, as every kernel's.
  size_t launches = 0;
  for (const ApiRecord& a : *api) {
    if (a.correlation_id == open.correlation_id) {
      EXPECT_EQ(strings->Get(a.name_id), "cudaLaunchKernel");
      EXPECT_LE(a.start_ns, open.start_ns);
      ++launches;
    }
  }
  EXPECT_EQ(launches, 1u);
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
  // Windows: the first measuring window (three steps: 10 to 12), and 3 steps
  // every 16 at one phase.
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
    if (w == std::vector<uint64_t>{10, 11, 12}) {
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

// Each step's thread_cpu_ns is the marking thread's CPU time between its two
// boundaries: at least what the step spun, and no more than its wall time less
// what it slept. The last step ends at exit, on another path: not measured.
TEST_F(AgentTest, StepsCarryTheMarkingThreadsCpuTime) {
  constexpr uint64_t kSpinNs = 2'000'000, kSleepNs = 3'000'000;
  int st = RunChild("steps", {{"AON_SOURCE", "synthetic"},
                              {"AON_MODE", "budgeted"},
                              {"STEPS", "40"},
                              {"SPIN_US", std::to_string(kSpinNs / 1000)},
                              {"STEP_US", std::to_string(kSleepNs / 1000)},
                              {"STEP_MARK", "api"}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto steps = r->ReadAll<StepRecord>();
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 40u);
  for (size_t i = 0; i + 1 < steps->size(); ++i) {
    const StepRecord& s = (*steps)[i];
    const uint64_t wall = s.end_ns - s.start_ns;
    EXPECT_GE(s.thread_cpu_ns, kSpinNs) << "step " << s.step;
    // The boundary reads its CPU clock a few microseconds after its time: 100 us of slack.
    EXPECT_LE(s.thread_cpu_ns, wall - kSleepNs + 100'000) << "step " << s.step;
  }
  EXPECT_EQ(steps->back().thread_cpu_ns, 0u) << "the last step ends at exit";
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
    EXPECT_EQ((*steps)[i].thread_cpu_ns, 0u) << "AON's own thread marks time slots";
  }
  EXPECT_GT(meta->captured_steps, 0);
  EXPECT_GT(meta->windows, 0);
}

// A program that marks its own steps only after a while (loading its model):
// the time source marks steps until then, the program's steps take over from
// its first one. The time steps come first, in slot order, tiling the time up
// to that first step; from there on the windows, the GPU records and the
// summary are the NVTX steps' alone (the windows opened on time steps are not
// counted in the summary of the NVTX steps).
TEST_F(AgentTest, TimeSlotsMarkStepsUntilTheProgramDoes) {
  int st = RunChild("steps", {{"AON_SOURCE", "synthetic"},
                              {"AON_MODE", "budgeted"},
                              {"AON_TIME_SLOT", "0.02"},
                              {"AON_CAPTURE_PERIOD", "4"},
                              {"AON_CAPTURE_STEPS", "1"},
                              {"START_US", "1000000"},
                              {"STEPS", "60"},
                              {"STEP_MARK", "nvtx"}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  StepsFile f = ReadSteps(*r);
  size_t lead = 0;
  while (lead < f.steps.size() && f.steps[lead].source == static_cast<uint8_t>(StepSource::kTime))
    ++lead;
  // The first slot boundary comes 20-40 ms after the start; the program's first
  // step 1 s after it.
  ASSERT_GE(lead, 1u);
  size_t time_captured = 0;
  for (size_t i = 0; i < lead; ++i) {
    if (f.steps[i].flags & kStepCaptured) ++time_captured;
    if (i == 0) continue;
    EXPECT_GT(f.steps[i].step, f.steps[i - 1].step) << "slot numbers increase";
    EXPECT_EQ(f.steps[i].start_ns, f.steps[i - 1].end_ns) << "time steps tile the time";
  }
  ASSERT_LT(lead, f.steps.size());
  EXPECT_EQ(f.steps[lead].start_ns, f.steps[lead - 1].end_ns)
      << "the program's first step begins where the last time step ends";
  f.steps.erase(f.steps.begin(), f.steps.begin() + static_cast<std::ptrdiff_t>(lead));
  ExpectWindowsHoldExactlyTheirSteps(f, 60, StepSource::kNvtx);
  EXPECT_EQ(f.meta.step_source, "nvtx");
  std::set<uint32_t> windows;
  for (const StepRecord& s : f.steps) {
    if (s.flags & kStepCaptured) windows.insert(s.window);
  }
  EXPECT_EQ(f.meta.windows, static_cast<int64_t>(windows.size()));
  // Not vacuous: ~45 slots, a window every 4th.
  EXPECT_GT(time_captured, 0u) << "no window opened on the time steps";
}

TEST_F(AgentTest, FullModeMarksEveryStepCaptured) {
  int st = RunChild(
      "steps",
      {{"AON_SOURCE", "synthetic"}, {"AON_MODE", "full"}, {"STEPS", "30"}, {"STEP_MARK", "nvtx"}});
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

// ---- Framework operator ranges (aon_op_begin / aon_op_end, the ops kind) -----

// What the child's "ops" mode did (agent_test_child.cc, RunOpsScript).
struct OpsLog {
  std::map<std::string, uint32_t> tid;  // role -> OS thread id
  std::map<int, int> active;            // step -> aon_ops_active() after its boundary
  struct Begin {
    int step;
    std::string role, name;
    uint32_t kind;
    int64_t seq;
    int active;
    uint64_t id, parent;
  };
  std::vector<Begin> begins;
  struct Work {
    std::string what;  // "launch", "memcpy", "memset"
    int step;
    std::string role, kernel;
    uint64_t owner;  // innermost recorded range open, 0: none
  };
  std::vector<Work> work;
  std::vector<std::pair<int, int>> forks;  // step, the forked child's exit status
  struct Switch {
    int step, on, active, on_marking_thread;
  };
  std::vector<Switch> switches;  // aon_ops_listen's calls, in order
};

OpsLog ReadOpsLog(const std::string& path) {
  OpsLog log;
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string what;
    f >> what;
    if (what == "thread") {
      std::string role;
      uint32_t tid = 0;
      f >> role >> tid;
      log.tid[role] = tid;
    } else if (what == "step") {
      int step = 0, active = 0;
      f >> step >> active;
      log.active[step] = active;
    } else if (what == "begin") {
      OpsLog::Begin b{};
      f >> b.step >> b.role >> b.name >> b.kind >> b.seq >> b.active >> b.id >> b.parent;
      log.begins.push_back(b);
    } else if (what == "listen") {
      OpsLog::Switch w{};
      f >> w.step >> w.on >> w.active >> w.on_marking_thread;
      log.switches.push_back(w);
    } else if (what == "fork") {
      int step = 0, status = 0;
      f >> step >> status;
      log.forks.emplace_back(step, status);
    } else if (what == "launch") {
      OpsLog::Work w{what, 0, "", "", 0};
      f >> w.step >> w.role >> w.kernel >> w.owner;
      log.work.push_back(w);
    } else {
      OpsLog::Work w{what, 0, "", "", 0};
      f >> w.step >> w.role >> w.owner;
      log.work.push_back(w);
    }
    EXPECT_FALSE(f.fail()) << line;
  }
  return log;
}

struct OpsFile {
  RankMetadata meta;
  StringTable strings;
  std::vector<StepRecord> steps;
  std::vector<OpRecord> ops;
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> copies;
  std::vector<MemsetRecord> sets;
  std::vector<ApiRecord> api;
  std::vector<ExternalCorrelationRecord> ext;
};

OpsFile ReadOpsFile(TraceReader& r) {
  OpsFile f;
  auto meta = r.ReadRankMetadata();
  auto strings = r.ReadStrings();
  auto steps = r.ReadAll<StepRecord>();
  auto ops = r.ReadAll<OpRecord>();
  auto kernels = r.ReadAll<KernelRecord>();
  auto copies = r.ReadAll<MemcpyRecord>();
  auto sets = r.ReadAll<MemsetRecord>();
  auto api = r.ReadAll<ApiRecord>();
  auto ext = r.ReadAll<ExternalCorrelationRecord>();
  EXPECT_TRUE(meta.ok() && strings.ok() && steps.ok() && ops.ok() && kernels.ok() && copies.ok() &&
              sets.ok() && api.ok() && ext.ok());
  if (!meta.ok() || !strings.ok() || !steps.ok() || !ops.ok() || !kernels.ok() || !copies.ok() ||
      !sets.ok() || !api.ok() || !ext.ok()) {
    return f;
  }
  f.meta = *meta;
  f.strings = *strings;
  f.steps = *steps;
  f.ops = *ops;
  f.kernels = *kernels;
  f.copies = *copies;
  f.sets = *sets;
  f.api = *api;
  f.ext = *ext;
  return f;
}

// The framework-op ext rows (kind 3) by correlation id.
std::map<uint32_t, std::vector<uint64_t>> OpRowsByCorrelation(const OpsFile& f) {
  std::map<uint32_t, std::vector<uint64_t>> rows;
  for (const ExternalCorrelationRecord& e : f.ext) {
    if (e.external_kind == kOpExternalCorrelationKind)
      rows[e.correlation_id].push_back(e.external_id);
  }
  return rows;
}

bool HasOpsNote(const RankMetadata& m) {
  for (const std::string& n : m.notes) {
    if (n.rfind("ops:", 0) == 0) return true;
  }
  return false;
}

// Budgeted mode, steps marked by aon_framework_step: ranges are recorded exactly
// in the capture windows (and whole when they end after one), with their
// parents, kinds and names; every launch, copy and memset made inside a
// recorded range has exactly one kind-3 external correlation row naming the
// innermost one, and every other call has none.
TEST_F(AgentTest, OpsAreRecordedInWindowsAndOwnTheLaunchesInsideThem) {
  const std::string log_path = dir_ + "/ops.log";
  int st = RunChild("ops", {{"AON_SOURCE", "synthetic"},
                            {"AON_MODE", "budgeted"},
                            {"AON_CAPTURE_PERIOD", "16"},
                            {"AON_CAPTURE_STEPS", "3"},
                            {"STEPS", "60"},
                            {"OPS_FORK", "1"},
                            {"OPS_LOG", log_path}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  const OpsLog log = ReadOpsLog(log_path);
  // A child forked in a window (a DataLoader worker) records nothing; the
  // module it ended is recorded once, by the parent (op ids unique, below).
  ASSERT_EQ(log.forks.size(), 1u);
  EXPECT_EQ(log.forks[0].second, 0) << "the forked child saw a window or got a range id";
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  const OpsFile f = ReadOpsFile(*r);

  // Steps: marked by the framework's hook (NVTX "step <i>" ranges outranked).
  EXPECT_EQ(f.meta.step_source, "pytorch");
  ASSERT_EQ(f.steps.size(), 60u);
  std::set<int> captured;
  for (size_t i = 0; i < f.steps.size(); ++i) {
    EXPECT_EQ(f.steps[i].step, i);
    EXPECT_EQ(f.steps[i].source, static_cast<uint8_t>(StepSource::kPytorch));
    if (f.steps[i].flags & kStepCaptured) captured.insert(static_cast<int>(i));
  }
  ASSERT_GE(f.meta.windows, 3);
  // aon_ops_active() is 1 exactly in the captured steps.
  ASSERT_EQ(log.active.size(), 60u);
  for (const auto& [step, active] : log.active) {
    EXPECT_EQ(active, captured.count(step) ? 1 : 0) << "step " << step;
  }
  // The framework's switch (aon_ops_listen): told "off" when it registered
  // (before the first step), then "on" at the boundary of each window's first
  // step and "off" at the boundary of the first step after it, on the thread
  // that marked it, with aon_ops_active() already saying so; nothing at exit.
  std::vector<std::array<int, 2>> switches = {{-1, 0}};
  for (int i = 0; i < 60; ++i) {
    const bool in = captured.count(i) > 0, before = i > 0 && captured.count(i - 1) > 0;
    if (in != before) switches.push_back({i, in ? 1 : 0});
  }
  std::vector<std::array<int, 2>> got;
  for (const OpsLog::Switch& w : log.switches) {
    got.push_back({w.step, w.on});
    EXPECT_EQ(w.active, w.on) << "step " << w.step;
    EXPECT_EQ(w.on_marking_thread, 1) << "step " << w.step;
  }
  EXPECT_EQ(got, switches);

  // A range is recorded iff aon_op_begin returned an id, iff ops were active.
  std::map<uint64_t, const OpRecord*> by_id;
  for (const OpRecord& op : f.ops) {
    EXPECT_TRUE(by_id.emplace(op.op_id, &op).second) << "op id " << op.op_id << " twice";
  }
  size_t recorded = 0, straddling = 0, engines = 0;
  for (const OpsLog::Begin& b : log.begins) {
    EXPECT_EQ(b.id != 0, b.active == 1) << b.name << " at step " << b.step;
    if (b.id == 0) continue;
    ++recorded;
    auto it = by_id.find(b.id);
    ASSERT_NE(it, by_id.end()) << b.name << " at step " << b.step << " not recorded";
    const OpRecord& op = *it->second;
    EXPECT_EQ(f.strings.Get(op.name_id), b.name);
    EXPECT_EQ(op.kind, b.kind) << b.name;
    EXPECT_EQ(op.sequence_nr, b.seq) << b.name;
    EXPECT_EQ(op.parent_id, b.parent) << b.name << " at step " << b.step;
    EXPECT_EQ(op.thread_id, log.tid.at(b.role)) << b.name;
    EXPECT_EQ(op.framework_thread, b.role == "main" ? 1u : 2u) << b.name;
    EXPECT_EQ(op.forward_thread, b.name == "autograd::AddmmBackward0" ? 1u : 0u) << b.name;
    EXPECT_LE(op.start_ns, op.end_ns);
    // The optimizer's range of step s ends after the boundary of step s + 1:
    // recorded whole also when that boundary closed the window.
    if (b.name == "Optimizer.step" && !captured.count(b.step + 1)) ++straddling;
    if (b.name == "autograd::engine") ++engines;
  }
  EXPECT_EQ(f.ops.size(), recorded) << "ops recorded that no begin returned";
  EXPECT_GE(straddling, 3u) << "a range that outlived its window in each window";
  EXPECT_GE(engines, 3u);
  // The nesting the script made, by kind.
  for (const OpRecord& op : f.ops) {
    const std::string name = f.strings.Get(op.name_id);
    if (name == "aten::addmm") {
      ASSERT_TRUE(by_id.count(op.parent_id));
      EXPECT_EQ(f.strings.Get(by_id.at(op.parent_id)->name_id), "aten::linear");
      EXPECT_EQ(op.kind, static_cast<uint8_t>(OpKind::kOperator));
    } else if (name == "aten::linear") {
      ASSERT_TRUE(by_id.count(op.parent_id));
      EXPECT_EQ(by_id.at(op.parent_id)->kind, static_cast<uint8_t>(OpKind::kModule));
    } else if (name == "model.layer") {
      EXPECT_EQ(op.parent_id, 0u);
    }
  }

  // GPU work: every call of a captured step is there, and tied to exactly the
  // innermost recorded range open around it.
  const auto rows = OpRowsByCorrelation(f);
  std::map<std::string, const KernelRecord*> kernel_by_name;
  for (const KernelRecord& k : f.kernels) {
    EXPECT_TRUE(kernel_by_name.emplace(f.strings.Get(k.name_id), &k).second);
  }
  std::map<std::string, std::vector<const OpsLog::Work*>> copies_and_sets;
  size_t tied = 0, launches = 0;
  for (const OpsLog::Work& w : log.work) {
    if (!captured.count(w.step)) {
      if (w.what == "launch") {
        EXPECT_EQ(kernel_by_name.count(w.kernel), 0u) << w.kernel;
      }
      continue;
    }
    if (w.owner != 0) ++tied;
    if (w.what != "launch") {
      copies_and_sets[w.what].push_back(&w);
      continue;
    }
    ++launches;
    auto k = kernel_by_name.find(w.kernel);
    ASSERT_NE(k, kernel_by_name.end()) << w.kernel << " not recorded";
    auto row = rows.find(k->second->correlation_id);
    if (w.owner == 0) {
      EXPECT_TRUE(row == rows.end())
          << w.kernel << " launched outside every range is tied to op " << row->second.front();
    } else {
      ASSERT_TRUE(row != rows.end()) << w.kernel << " has no op row";
      EXPECT_EQ(row->second, std::vector<uint64_t>{w.owner}) << w.kernel;
    }
  }
  EXPECT_EQ(f.kernels.size(), launches);
  // Copies (inside the module) and memsets (outside every range), in call order.
  auto check_in_order = [&](const auto& records, const std::vector<const OpsLog::Work*>& want,
                            const char* what) {
    ASSERT_EQ(records.size(), want.size()) << what;
    std::vector<uint32_t> corr;
    for (const auto& rec : records) corr.push_back(rec.correlation_id);
    std::sort(corr.begin(), corr.end());  // issue order: correlation ids increase
    for (size_t i = 0; i < corr.size(); ++i) {
      auto row = rows.find(corr[i]);
      if (want[i]->owner == 0) {
        EXPECT_TRUE(row == rows.end())
            << what << " " << i << " is tied to op " << row->second.front();
      } else {
        ASSERT_TRUE(row != rows.end()) << what << " " << i << " has no op row";
        EXPECT_EQ(row->second, std::vector<uint64_t>{want[i]->owner}) << what << " " << i;
      }
    }
  };
  check_in_order(f.copies, copies_and_sets["memcpy"], "memcpy");
  check_in_order(f.sets, copies_and_sets["memset"], "memset");
  // No other framework-op rows: one per tied call (synchronizations run
  // outside every range), each naming a recorded op and an API call.
  size_t op_rows = 0;
  std::set<uint32_t> api_corr;
  for (const ApiRecord& a : f.api) api_corr.insert(a.correlation_id);
  for (const auto& [corr, ids] : rows) {
    op_rows += ids.size();
    EXPECT_TRUE(api_corr.count(corr)) << "row for correlation " << corr << " without its call";
    for (uint64_t id : ids) EXPECT_TRUE(by_id.count(id)) << "row names unrecorded op " << id;
  }
  EXPECT_EQ(op_rows, tied);
  EXPECT_FALSE(HasOpsNote(f.meta)) << "no range lost, no end unmatched";
}

TEST_F(AgentTest, OpsAreNotRecordedWhenTheKindIsOff) {
  const std::string log_path = dir_ + "/ops.log";
  int st = RunChild("ops", {{"AON_SOURCE", "synthetic"},
                            {"AON_MODE", "budgeted"},
                            {"AON_KINDS", "kernels,api,memcpy,memset,sync,nvtx"},
                            {"AON_CAPTURE_PERIOD", "16"},
                            {"STEPS", "30"},
                            {"OPS_LOG", log_path}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  const OpsLog log = ReadOpsLog(log_path);
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  const OpsFile f = ReadOpsFile(*r);
  ASSERT_GT(f.meta.captured_steps, 0);
  ASSERT_FALSE(f.kernels.empty()) << "windows still capture kernels";
  for (const auto& [step, active] : log.active) EXPECT_EQ(active, 0) << step;
  ASSERT_EQ(log.switches.size(), 1u) << "told once, at registration";
  EXPECT_EQ(log.switches[0].on, 0);
  for (const OpsLog::Begin& b : log.begins) EXPECT_EQ(b.id, 0u) << b.name;
  EXPECT_TRUE(f.ops.empty());
  EXPECT_TRUE(OpRowsByCorrelation(f).empty());
}

// Full mode: CUPTI (here the synthetic device) records all the time, so do ops;
// a range still open when the process ends is not recorded, and said so.
TEST_F(AgentTest, FullModeRecordsOpsInEveryStep) {
  const std::string log_path = dir_ + "/ops.log";
  int st = RunChild("ops", {{"AON_SOURCE", "synthetic"},
                            {"AON_MODE", "full"},
                            {"STEPS", "8"},
                            {"OPS_LEAVE_OPEN", "1"},
                            {"OPS_LOG", log_path}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  const OpsLog log = ReadOpsLog(log_path);
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  const OpsFile f = ReadOpsFile(*r);
  for (const auto& [step, active] : log.active) EXPECT_EQ(active, 1) << step;
  // Registered after the capture opened: told "on" at once, and nothing after
  // (not at exit either).
  ASSERT_EQ(log.switches.size(), 1u);
  EXPECT_EQ(log.switches[0].step, -1);
  EXPECT_EQ(log.switches[0].on, 1);
  size_t ended = 0;
  for (const OpsLog::Begin& b : log.begins) {
    EXPECT_NE(b.id, 0u) << b.name;
    if (b.name != "never.ended") ++ended;
  }
  EXPECT_EQ(f.ops.size(), ended);
  EXPECT_EQ(f.steps.size(), 8u);
  bool noted = false;
  for (const std::string& n : f.meta.notes) {
    noted |= n == "ops: 1 framework range(s) were still open when their thread ended: not recorded";
  }
  EXPECT_TRUE(noted);
}

// The graph-ops child's log (agent_test_child.cc): the op open at each
// kernel's capture, the range that launched each step's replay, and
// aon_ops_active inside and after the capture (-1: not logged).
struct GraphLog {
  std::map<std::string, uint64_t> captured_in;  // kernel -> op id at capture
  std::map<int, uint64_t> replay_range;         // step -> replaying range
  int active_in_capture = -1, active_after = -1;
};

GraphLog ReadGraphLog(const std::string& path) {
  GraphLog log;
  std::ifstream f(path);
  std::string what;
  while (f >> what) {
    if (what == "node") {
      std::string k;
      uint64_t op = 0;
      f >> k >> op;
      log.captured_in[k] = op;
    } else if (what == "replay") {
      int step = 0;
      uint64_t id = 0;
      f >> step >> id;
      log.replay_range[step] = id;
    } else if (what == "active") {
      f >> log.active_in_capture >> log.active_after;
    }
  }
  return log;
}

// CUDA graphs in full mode: a graph captured inside ops and replayed every
// step. Every kernel node created inside an op has a graph_ops row naming the
// op open at its capture (the child's own record of it), and so has each of
// its clones (instantiation), with its original; the node captured outside any
// range has none. Every replayed kernel carries a clone's node id, and through
// graph_ops reaches the op of its capture; the replays' launches still belong
// to the range that launched the graph (external correlation).
TEST_F(AgentTest, GraphNodesCapturedInOpsAreTiedToThemAndSoAreTheirReplays) {
  const std::string log_path = dir_ + "/graph.log";
  const int steps = 6;
  int st = RunChild("graph-ops", {{"AON_SOURCE", "synthetic"},
                                  {"AON_MODE", "full"},
                                  {"STEPS", std::to_string(steps)},
                                  {"OPS_LOG", log_path}});
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  const GraphLog log = ReadGraphLog(log_path);
  std::map<std::string, uint64_t> captured_in = log.captured_in;
  const std::map<int, uint64_t>& replay_range = log.replay_range;
  ASSERT_EQ(captured_in.size(), 3u);
  ASSERT_NE(captured_in["k_gemm"], 0u);
  ASSERT_NE(captured_in["k_relu"], 0u);
  ASSERT_EQ(replay_range.size(), static_cast<size_t>(steps));
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  const OpsFile f = ReadOpsFile(*r);
  auto rows = r->ReadAll<GraphOpRecord>();
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  std::map<uint64_t, uint64_t> op_of_node;
  size_t created = 0, clones = 0;
  for (const GraphOpRecord& g : *rows) {
    EXPECT_TRUE(op_of_node.emplace(g.node_id, g.op_id).second) << "one row per node";
    (g.original_node_id == 0 ? created : clones) += 1;
  }
  EXPECT_EQ(created, 2u) << "k_gemm and k_relu; k_bare was captured outside any range";
  EXPECT_EQ(clones, 2u);
  for (const GraphOpRecord& g : *rows) {
    if (g.original_node_id == 0) continue;
    auto o = op_of_node.find(g.original_node_id);
    ASSERT_NE(o, op_of_node.end()) << "a clone's original has its row";
    EXPECT_EQ(o->second, g.op_id) << "a clone keeps its original's op";
  }
  std::set<uint64_t> op_ids;
  for (const OpRecord& o : f.ops) op_ids.insert(o.op_id);
  const auto ext = OpRowsByCorrelation(f);
  std::map<std::string, size_t> replayed;
  for (const KernelRecord& k : f.kernels) {
    if (k.graph_node_id == 0) continue;
    const std::string name = f.strings.Get(k.name_id);
    ++replayed[name];
    auto g = op_of_node.find(k.graph_node_id);
    if (name == "k_bare") {
      EXPECT_EQ(g, op_of_node.end()) << "captured outside any op";
    } else {
      ASSERT_NE(g, op_of_node.end()) << name;
      EXPECT_EQ(g->second, captured_in[name]) << name;
      EXPECT_TRUE(op_ids.count(g->second)) << "the op of the capture is recorded";
    }
    // The launch (cudaGraphLaunch) belongs to the replaying range.
    auto e = ext.find(k.correlation_id);
    ASSERT_NE(e, ext.end()) << name;
    ASSERT_EQ(e->second.size(), 1u);
    bool a_replay = false;
    for (const auto& [step, id] : replay_range) a_replay |= id == e->second[0];
    EXPECT_TRUE(a_replay) << name;
  }
  for (const char* k : {"k_gemm", "k_relu", "k_bare"}) {
    EXPECT_EQ(replayed[k], static_cast<size_t>(steps)) << k;
  }
}

// CUDA graphs captured outside capture windows (budgeted mode: the capture
// comes before the first step, no window is open). Bracketed by
// aon_graph_capture, as the PyTorch hook brackets CUDAGraph.capture_begin and
// capture_end, the capture records its ranges (aon_ops_active is 1 inside it,
// 0 after) and its nodes, and every replayed kernel of a later window reaches
// the op open at its capture. Without the bracket no node is tied: that is
// what it is for.
struct GraphReplays {
  int active_in_capture = -1, active_after = -1;
  size_t graph_op_rows = 0;
  size_t replayed = 0;    // graph kernels in windows (k_gemm, k_relu)
  size_t tied_right = 0;  // ... whose node reaches the op of their capture
  size_t captured_steps = 0;
};

class GraphReplayTest : public AgentTest {
 protected:
  GraphReplays Run(bool bracket);
};

GraphReplays GraphReplayTest::Run(bool bracket) {
  GraphReplays out;
  const std::string log_path = dir_ + "/graph.log";
  std::map<std::string, std::string> env = {
      {"AON_SOURCE", "synthetic"}, {"AON_MODE", "budgeted"}, {"AON_CAPTURE_PERIOD", "4"},
      {"AON_CAPTURE_STEPS", "2"},  {"STEPS", "24"},          {"OPS_LOG", log_path}};
  if (bracket) env.emplace("GRAPH_CAPTURE", "call");
  const int st = RunChild("graph-ops", env);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  GraphLog log = ReadGraphLog(log_path);
  std::map<std::string, uint64_t>& captured_in = log.captured_in;
  out.active_in_capture = log.active_in_capture;
  out.active_after = log.active_after;
  auto r = OpenRank0();
  if (!r) return out;
  const OpsFile file = ReadOpsFile(*r);
  auto rows = r->ReadAll<GraphOpRecord>();
  EXPECT_TRUE(rows.ok());
  std::map<uint64_t, uint64_t> op_of_node;
  if (rows.ok()) {
    out.graph_op_rows = rows->size();
    for (const GraphOpRecord& g : *rows) op_of_node.emplace(g.node_id, g.op_id);
  }
  std::set<uint64_t> op_ids;
  for (const OpRecord& o : file.ops) op_ids.insert(o.op_id);
  for (const StepRecord& s : file.steps) out.captured_steps += (s.flags & kStepCaptured) ? 1 : 0;
  for (const KernelRecord& k : file.kernels) {
    const std::string name = file.strings.Get(k.name_id);
    if (k.graph_node_id == 0 || name == "k_bare") continue;
    ++out.replayed;
    auto g = op_of_node.find(k.graph_node_id);
    if (g != op_of_node.end() && g->second == captured_in[name] && g->second != 0 &&
        op_ids.count(g->second)) {
      ++out.tied_right;
    }
  }
  return out;
}

TEST_F(GraphReplayTest, GraphsCapturedOutsideWindowsAreTiedWhenTheCaptureIsBracketed) {
  const GraphReplays g = Run(/*bracket=*/true);
  EXPECT_EQ(g.active_in_capture, 1) << "ops recorded inside the bracket";
  EXPECT_EQ(g.active_after, 0) << "and off after it: no window is open before the first step";
  EXPECT_EQ(g.graph_op_rows, 4u) << "k_gemm and k_relu, each created and cloned";
  ASSERT_GT(g.captured_steps, 0u);
  // One replay per captured step (the step's two graph kernels): all tied.
  EXPECT_GE(g.replayed, 2 * g.captured_steps);
  EXPECT_EQ(g.tied_right, g.replayed);
}

TEST_F(GraphReplayTest, GraphsCapturedOutsideWindowsWithoutTheBracketAreNotTied) {
  const GraphReplays g = Run(/*bracket=*/false);
  EXPECT_EQ(g.active_in_capture, 0);
  EXPECT_EQ(g.graph_op_rows, 0u);
  ASSERT_GT(g.captured_steps, 0u);
  EXPECT_GT(g.replayed, 0u) << "replays are captured in windows all the same";
  EXPECT_EQ(g.tied_right, 0u);
}

}  // namespace
}  // namespace aon
