// The report on a budgeted job (docs/always-on.md): GPU activity exists only in
// capture windows, step times for every step. The analyses must use the windows
// for GPU figures, not take the time between windows for idle GPU, scale their
// totals to the whole run, and say first what capturing cost.
#include <gtest/gtest.h>

#include <string>

#include "aon/report/report.h"
#include "timeline_builder.h"

namespace aon::report {
namespace {

using testing::kMs;
using testing::TempDir;
using testing::TimelineBuilder;

constexpr uint64_t kStep = 10 * kMs;
constexpr uint64_t kSteps = 100;
const uint64_t kCaptured[] = {10, 40, 41, 42, 72, 73, 74};

bool Captured(uint64_t s) {
  for (uint64_t c : kCaptured)
    if (c == s) return true;
  return false;
}

// One rank, 100 steps of 10 ms from `from_ns`; in each captured step a 6 ms
// kernel from 1 ms to 7 ms into the step (the GPU records of a budgeted job
// exist only there).
TimelineBuilder WindowedJob(uint64_t from_ns = 0) {
  TimelineBuilder b;
  b.Rank(0);
  for (uint64_t s = 0; s < kSteps; ++s) {
    const uint64_t start = from_ns + s * kStep + kMs;
    b.Step(0, s, start, start + kStep, Captured(s) ? kStepCaptured : 0);
    if (Captured(s)) b.Kernel(0, "sgemm_kernel", start + kMs, start + 7 * kMs, 100 + 0);
  }
  RankSummary& row = b.ranks[0];
  row.capture_mode = static_cast<uint8_t>(CaptureMode::kBudgeted);
  row.steps = kSteps;
  row.captured_steps = std::size(kCaptured);
  row.windows = 3;
  row.capture_period = 32;
  row.overhead_budget = 0.01;
  row.window_step_ratio = 2.5;
  row.amortized_cost = 0.0042;
  return b;
}

TEST(Windows, StepsComeFromAonMarkersAndGpuStepsFromTheWindows) {
  TempDir dir;
  const Timeline t = WindowedJob().WriteAndLoad(dir.File("t.h5"));
  const Steps s = DetectSteps(t);
  EXPECT_EQ(s.method, "AON step markers (nvtx)");
  EXPECT_EQ(s.typical_count, kSteps);
  EXPECT_TRUE(s.windowed);
  ASSERT_EQ(s.GpuSteps(0).size(), std::size(kCaptured));
  EXPECT_EQ(s.GpuSteps(0)[1].start, 40 * kStep + kMs);
  EXPECT_TRUE(s.GpuSteps(7).empty()) << "a rank out of range has no steps";
}

// A program that marks its steps only after loading its model: the time source
// marked one-second steps until then (two of them captured, with GPU work).
// Those are start-up: the steps, the step time and the per-step GPU figures are
// the program's steps alone, and the method says what was left out.
TEST(Windows, TimeSlotStepsBeforeTheProgramsStepsAreStartUp) {
  TempDir dir;
  const uint64_t second = 1000 * kMs;
  TimelineBuilder b = WindowedJob(5 * second);
  for (uint64_t slot = 0; slot < 5; ++slot) {
    const uint64_t start = slot * second;
    const bool captured = slot == 1 || slot == 2;
    b.Step(0, 1'700'000'000 + slot, start, start + second, captured ? kStepCaptured : 0,
           StepSource::kTime);
    if (captured) b.Kernel(0, "init_kernel", start + kMs, start + 900 * kMs, 100);
  }
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const Steps s = DetectSteps(t);
  EXPECT_EQ(s.method, "AON step markers (nvtx); start-up left out: 5 time slot steps before them");
  EXPECT_EQ(s.typical_count, kSteps);
  ASSERT_EQ(s.GpuSteps(0).size(), std::size(kCaptured)) << "the time slots' windows are not steps";
  const std::vector<RankBreakdown> br = ComputeBreakdown(t, s);
  ASSERT_EQ(br.size(), 1u);
  EXPECT_EQ(br[0].steps, kSteps);
  EXPECT_DOUBLE_EQ(br[0].step_mean_ns, static_cast<double>(kStep));
  EXPECT_DOUBLE_EQ(br[0].step_busy_ns, 6.0 * kMs);
}

TEST(Windows, BreakdownIsOverTheCapturedStepsScaledToTheRun) {
  TempDir dir;
  const Timeline t = WindowedJob().WriteAndLoad(dir.File("t.h5"));
  const std::vector<RankBreakdown> br = ComputeBreakdown(t, DetectSteps(t));
  ASSERT_EQ(br.size(), 1u);
  const RankBreakdown& b = br[0];
  EXPECT_EQ(b.steps, kSteps);
  EXPECT_DOUBLE_EQ(b.step_mean_ns, static_cast<double>(kStep));
  EXPECT_DOUBLE_EQ(b.run_scale, 100.0 / 7.0);
  // 7 captured steps of 10 ms, 6 ms busy each, stand for 100 steps: 1 s, 600 ms.
  EXPECT_NEAR(static_cast<double>(b.span_ns), 1000.0 * kMs, 1e3);
  EXPECT_NEAR(static_cast<double>(b.busy_ns), 600.0 * kMs, 1e3);
  EXPECT_NEAR(static_cast<double>(b.idle_ns), 400.0 * kMs, 2e3);
  EXPECT_DOUBLE_EQ(b.step_busy_ns, 6.0 * kMs);
  EXPECT_DOUBLE_EQ(b.step_idle_ns, 4.0 * kMs);
}

TEST(Windows, TheTimeBetweenWindowsIsNotIdleGpu) {
  TempDir dir;
  const Timeline t = WindowedJob().WriteAndLoad(dir.File("t.h5"));
  const Steps s = DetectSteps(t);
  const IdleAnalysis a = AnalyzeIdle(t, &s);
  // Only the 4 ms gaps between consecutive captured steps (40-41, 41-42, 72-73,
  // 73-74); not the 300 ms stretches between windows.
  uint64_t gaps = 0;
  for (const auto& [cause, n] : a.cause_count[0]) gaps += n;
  EXPECT_EQ(gaps, 4u);
  ASSERT_FALSE(a.top_gaps.empty());
  EXPECT_EQ(a.top_gaps.front().length(), 4 * kMs);
}

// AON's own cost inside a window is host time (CUPTI), and in a launch-bound
// step it shows as GPU idle: figures from the windows must not carry it to the
// whole run. 100 steps of 10 ms; the 7 captured ones (one window, 40-46) take
// 23 ms, their GPU idling 2.1 ms before each of 10 late launches: 20.9 ms of
// gaps a step (9 x 2.1, and the 2 ms of the gap into the next step that lie in
// this one; the last step's gap after the window is not seen). Taking each
// captured step's 13 ms beyond the outside step off its idle time leaves 7.9 ms,
// so the steady gain is the median 7.9 ms x 100 steps, never more than the run:
// uncorrected, 20.9 ms a step would state 2.09 s for a run of 1.09 s.
TEST(Windows, IdleInsideWindowsIsCorrectedForTheirCostBeforeItIsExtrapolated) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  constexpr uint64_t kOutside = 10 * kMs, kInside = 23 * kMs;
  uint64_t start = kMs;
  for (uint64_t s = 0; s < kSteps; ++s) {
    const bool captured = s >= 40 && s <= 46;
    const uint64_t length = captured ? kInside : kOutside;
    b.Step(0, s, start, start + length, captured ? kStepCaptured : 0);
    for (uint64_t k = 0; captured && k < 10; ++k) {
      const uint64_t at = start + 100 * testing::kUs + k * 2300 * testing::kUs;
      b.Kernel(0, "k", at, at + 200 * testing::kUs, 5);
    }
    start += length;
  }
  b.ranks[0].capture_mode = static_cast<uint8_t>(CaptureMode::kBudgeted);
  const uint64_t run_ns = start - kMs;
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const Steps steps = DetectSteps(t);
  ASSERT_TRUE(steps.windowed);
  const IdleAnalysis a = AnalyzeIdle(t, &steps);
  EXPECT_EQ(a.outside_step_ns[0], kOutside);
  const uint64_t steady = a.Steady(0, GapCause::kHostWork);
  EXPECT_NEAR(static_cast<double>(steady), 7.9 * kMs * kSteps, 1000.0);
  EXPECT_LE(steady, run_ns);

  const Report r = Analyze(t);
  ASSERT_FALSE(r.findings.empty());
  for (const Finding& f : r.findings) {
    EXPECT_LE(f.gain_ns, run_ns) << f.kind;
    EXPECT_LE(f.gain_per_step_ns, static_cast<double>(kOutside)) << f.kind;
  }
}

// A window's first step (a lead-in) follows a step whose GPU work was not
// traced: the gap that began in that step, and the work that ran on into this
// one, are not seen. 100 steps of 10 ms, each with a kernel from 5 ms into the
// step to 2 ms into the next (GPU idle 3 ms a step, busy 7 ms in it); windows
// {10}, {40, 41, 42}, {72, 73, 74}. Lead-ins 10, 40 and 72 show no gap and 5 ms
// busy; 41 and 73 show the truth (42 and 74 are their windows' last steps).
// Counting the lead-ins, the median gap would be 0.
TEST(Windows, PerStepFiguresLeaveOutEachWindowsLeadIn) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  auto captured = [](uint64_t s) {
    return s == 10 || (s >= 40 && s <= 42) || (s >= 72 && s <= 74);
  };
  for (uint64_t s = 0; s < kSteps; ++s) {
    const uint64_t start = kMs + s * kStep;
    b.Step(0, s, start, start + kStep, captured(s) ? kStepCaptured : 0);
    if (captured(s)) b.Kernel(0, "sgemm_kernel", start + 5 * kMs, start + 12 * kMs, 100);
  }
  b.ranks[0].capture_mode = static_cast<uint8_t>(CaptureMode::kBudgeted);
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const Steps steps = DetectSteps(t);
  ASSERT_EQ(steps.GpuSteps(0).size(), 7u);
  const std::vector<bool> want = {true, true, false, true, true, false, true};
  EXPECT_EQ(steps.edge[0], want);
  const IdleAnalysis a = AnalyzeIdle(t, &steps);
  // The builder's launches come just before their kernels: host work before them.
  EXPECT_NEAR(static_cast<double>(a.Steady(0, GapCause::kHostWork)), 3.0 * kMs * kSteps, 1000.0);
  const std::vector<RankBreakdown> br = ComputeBreakdown(t, steps);
  ASSERT_EQ(br.size(), 1u);
  EXPECT_DOUBLE_EQ(br[0].step_busy_ns, 7.0 * kMs);
  EXPECT_DOUBLE_EQ(br[0].step_idle_ns, 3.0 * kMs);
}

// 100 budgeted steps of 10 ms on rank 0, windows of three steps from each of
// `firsts` (by default {40, 41, 42} and {72, 73, 74}); `traced(b, step, start)`
// adds each captured step's records.
template <typename Traced>
Timeline TwoWindowsOfThree(TempDir& dir, Traced traced, std::vector<uint64_t> firsts = {40, 72}) {
  TimelineBuilder b;
  b.Rank(0);
  auto captured = [&](uint64_t s) {
    return std::any_of(firsts.begin(), firsts.end(),
                       [s](uint64_t f) { return s >= f && s < f + 3; });
  };
  for (uint64_t s = 0; s < kSteps; ++s) {
    const uint64_t start = kMs + s * kStep;
    b.Step(0, s, start, start + kStep, captured(s) ? kStepCaptured : 0);
    if (captured(s)) traced(b, s, start);
  }
  b.ranks[0].capture_mode = static_cast<uint8_t>(CaptureMode::kBudgeted);
  return b.WriteAndLoad(dir.File("t.h5"));
}

// One gap in the windows is not a per-step pattern. 100 steps of 10 ms, the GPU
// busy from each step's start into the next; windows {40, 41, 42} and
// {72, 73, 74}: the observed steps are 41 and 73, and only 41 has a gap (its
// kernel starts 3 ms late). The median of two would put half of it, 1.5 ms, on
// every step (150 ms for a run whose windows saw 3 ms): what was seen is what
// is said.
TEST(Windows, AGapSeenInOneObservedStepIsNotCarriedToEveryStep) {
  TempDir dir;
  const Timeline t = TwoWindowsOfThree(dir, [](TimelineBuilder& b, uint64_t s, uint64_t start) {
    const uint64_t late = s == 41 ? 3 * kMs : 0;
    b.Kernel(0, "sgemm_kernel", start + late, start + kStep + kMs / 2, 100);
  });
  const Steps steps = DetectSteps(t);
  ASSERT_EQ(steps.GpuSteps(0).size(), 6u);
  const IdleAnalysis a = AnalyzeIdle(t, &steps);
  const uint64_t seen = a.Steady(0, GapCause::kHostWork);
  EXPECT_GT(seen, 2 * kMs) << "the gap was seen";
  EXPECT_LE(seen, 3 * kMs) << "and is not carried to the 100 steps";
}

// One window of three steps, {40, 41, 42}, and the same gap in each step: the
// kernel of every step starts 3 ms after the step does (host work before the
// launch) and the previous one ended 0.5 ms into it, so 41 and 42 show 2.5 ms
// (40, the lead-in, has no kernel before it). Only 41 is whole, but the gap is
// in two captured steps: a per-step pattern, carried to the 100 steps.
TEST(Windows, AGapInEveryStepOfOneWindowIsCarriedToEveryStep) {
  TempDir dir;
  const Timeline t = TwoWindowsOfThree(dir,
                                       [](TimelineBuilder& b, uint64_t, uint64_t start) {
                                         b.Kernel(0, "sgemm_kernel", start + 3 * kMs,
                                                  start + kStep + kMs / 2, 100);
                                       },
                                       {40});
  const Steps steps = DetectSteps(t);
  ASSERT_EQ(steps.GpuSteps(0).size(), 3u);
  const IdleAnalysis a = AnalyzeIdle(t, &steps);
  EXPECT_NEAR(static_cast<double>(a.Steady(0, GapCause::kHostWork)), 2.5 * kMs * kSteps,
              0.01 * 2.5 * kMs * kSteps);
}

// A window's last step is followed by one whose GPU work is not traced: a gap
// that runs on into it is not seen. 100 steps of 10 ms, each a 4 ms kernel at
// its start, then the host waiting on it (.item()) and working until the next
// step launches (GPU idle 6 ms a step); windows {40, 41, 42} and {72, 73, 74}.
// The last steps 42 and 74 show no gap; 41 and 73 show 6 ms. Counting the last
// steps, the median would be 3 ms.
TEST(Windows, PerStepFiguresLeaveOutEachWindowsLastStep) {
  TempDir dir;
  const Timeline t = TwoWindowsOfThree(dir, [](TimelineBuilder& b, uint64_t, uint64_t start) {
    b.Kernel(0, "sgemm_kernel", start + 10 * testing::kUs, start + 4 * kMs, 1, start);
    b.Api(0, "cudaStreamSynchronize", start + 20 * testing::kUs, start + 4 * kMs + 5 * testing::kUs,
          1);
  });
  const Steps steps = DetectSteps(t);
  const std::vector<bool> want = {true, false, true, true, false, true};
  EXPECT_EQ(steps.edge[0], want);
  const IdleAnalysis a = AnalyzeIdle(t, &steps);
  EXPECT_NEAR(static_cast<double>(a.Steady(0, GapCause::kHostSync)), 6.0 * kMs * kSteps, 1000.0);
  const Report r = Analyze(t);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings.front().kind, "idle-host-sync");
  EXPECT_NEAR(r.findings.front().gain_per_step_ns, 6.0 * kMs, 1000.0);
}

// A GPU-bound loop (10 ms steps, the host waiting on the GPU) whose windows
// {40, 41, 42} and {70, 71, 72} open with a 14 ms lead-in (4 ms of AON's
// attaching): the host enters step 41 late, the GPU runs dry for 1.5 ms at its
// start, and the host, waiting less, ends it after 8 ms. That gap is AON's cost
// caught up on (2 ms shorter than an uncaptured step, 4 ms owed), not the
// program's. The same windows in a host-bound loop: step 41 takes its 10 ms (a
// host that does not wait cannot wait less) and its 3 ms gap is the program's,
// whole.
TimelineBuilder CatchUpJob(uint64_t next_length, uint64_t gap) {
  TimelineBuilder b;
  b.Rank(0);
  uint64_t start = kMs;
  for (uint64_t s = 0; s < kSteps; ++s) {
    const bool lead_in = s == 40 || s == 70, next = s == 41 || s == 71, last = s == 42 || s == 72;
    const uint64_t length = lead_in ? 14 * kMs : next ? next_length : kStep;
    b.Step(0, s, start, start + length, lead_in || next || last ? kStepCaptured : 0);
    if (lead_in || last) b.Kernel(0, "sgemm_kernel", start, start + length, 100 + s);
    if (next) b.Kernel(0, "sgemm_kernel", start + gap, start + length, 100 + s);
    start += length;
  }
  b.ranks[0].capture_mode = static_cast<uint8_t>(CaptureMode::kBudgeted);
  return b;
}

TEST(Windows, AStepShorterAfterItsLeadInIsTheHostCatchingUpOnAonsCost) {
  TempDir dir;
  const Timeline gpu_bound =
      CatchUpJob(8 * kMs, 1500 * testing::kUs).WriteAndLoad(dir.File("g.h5"));
  const Steps gs = DetectSteps(gpu_bound);
  const IdleAnalysis g = AnalyzeIdle(gpu_bound, &gs);
  EXPECT_EQ(g.outside_step_ns[0], kStep);
  EXPECT_EQ(g.cause_ns[0].at(GapCause::kHostWork), 2 * 1500 * testing::kUs);  // seen,
  EXPECT_EQ(g.Steady(0, GapCause::kHostWork), 0u);                            // AON's
  for (const Finding& f : Analyze(gpu_bound).findings) EXPECT_NE(f.kind, "host-work");

  const Timeline host_bound = CatchUpJob(kStep, 3 * kMs).WriteAndLoad(dir.File("h.h5"));
  const Steps hs = DetectSteps(host_bound);
  const IdleAnalysis h = AnalyzeIdle(host_bound, &hs);
  EXPECT_NEAR(static_cast<double>(h.Steady(0, GapCause::kHostWork)), 3.0 * kMs * kSteps, 1000.0);
  const Report r = Analyze(host_bound);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings.front().kind, "host-work");
}

// Windows of two steps (AON_CAPTURE_STEPS=2) after the first of three: leaving
// both edges out would leave one step of the whole run (11, right after CUPTI
// attached); only their lead-ins are left out then.
TEST(Windows, TwoStepWindowsLeaveOutOnlyTheirLeadIns) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  auto captured = [](uint64_t s) {
    return (s >= 10 && s <= 12) || s == 40 || s == 41 || s == 60 || s == 61 || s == 80 || s == 81;
  };
  for (uint64_t s = 0; s < kSteps; ++s) {
    const uint64_t start = kMs + s * kStep;
    b.Step(0, s, start, start + kStep, captured(s) ? kStepCaptured : 0);
    if (captured(s)) b.Kernel(0, "sgemm_kernel", start + 5 * kMs, start + 9 * kMs, 100);
  }
  b.ranks[0].capture_mode = static_cast<uint8_t>(CaptureMode::kBudgeted);
  const Steps steps = DetectSteps(b.WriteAndLoad(dir.File("t.h5")));
  const std::vector<bool> lead_ins = {true, false, false, true, false, true, false, true, false};
  EXPECT_EQ(steps.edge[0], lead_ins);
}

// Only one-step windows (a short job's first window): no step is better
// observed, so every one counts.
TEST(Windows, OneStepWindowsAllCount) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  for (uint64_t s = 0; s < 20; ++s) {
    const uint64_t start = kMs + s * kStep;
    b.Step(0, s, start, start + kStep, s == 10 ? kStepCaptured : 0);
    if (s == 10) b.Kernel(0, "sgemm_kernel", start + 5 * kMs, start + 9 * kMs, 100);
  }
  b.ranks[0].capture_mode = static_cast<uint8_t>(CaptureMode::kBudgeted);
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const Steps steps = DetectSteps(t);
  EXPECT_EQ(steps.edge[0], std::vector<bool>{false});
  EXPECT_DOUBLE_EQ(ComputeBreakdown(t, steps)[0].step_busy_ns, 4.0 * kMs);
}

TEST(Windows, TheReportSaysFirstWhatCapturingCost) {
  TempDir dir;
  TimelineBuilder b = WindowedJob();
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  ASSERT_TRUE(r.capture.known);
  EXPECT_EQ(r.capture.mode, "budgeted");
  EXPECT_DOUBLE_EQ(r.capture.cost, 0.0042);
  const std::string& s = r.capture.statement;
  EXPECT_EQ(s.rfind("AON cost this job ~0.4 % of its step time (budget 1.0 %", 0), 0u) << s;
  EXPECT_NE(s.find("2.50x"), std::string::npos) << s;
  EXPECT_NE(s.find("3 windows, 7 of 100 steps per rank"), std::string::npos) << s;
  // The terminal says it right after the header line; JSON and HTML carry it.
  const std::string text = RenderTerminal(r);
  const size_t header_end = text.find('\n');
  EXPECT_EQ(text.compare(header_end + 1, 17, "AON cost this job"), 0) << text;
  EXPECT_NE(text.find("traced/steps"), std::string::npos) << text;
  EXPECT_NE(text.find("7/100"), std::string::npos) << text;
  const std::string json = RenderJson(r);
  EXPECT_NE(json.find("\"capture\":{\"mode\":\"budgeted\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"amortized_cost\":0.0042"), std::string::npos) << json;
  const std::string html = RenderHtml(r);
  EXPECT_NE(html.find("<p class=cost>AON cost this job"), std::string::npos);
  EXPECT_NE(html.find("Capture per rank"), std::string::npos);
}

// Steps traced because aon ctl capture asked, and flight-recorder dumps (the
// merge's capture_events, from the collectors' notes), are said with the cost.
TEST(Windows, OnDemandStepsAndFlightDumpsAreSaid) {
  TempDir dir;
  Timeline t = WindowedJob().WriteAndLoad(dir.File("t.h5"));
  for (auto& m : t.steps)
    if (m.record.step >= 40 && m.record.step <= 42) m.record.flags |= kStepOnDemand;
  t.world_size = 4;
  t.capture_events = {
      "rank 0: flight recorder dump 1: requested (aon ctl trigger: loss spike): 812 records (the "
      "last 4.0 s)",
      "rank 1: flight recorder dump 1: requested (aon ctl trigger: loss spike): 790 records (the "
      "last 4.0 s)",
      "rank 3: flight recorder dump 1: requested (aon ctl trigger: loss spike): 800 records (the "
      "last 4.0 s)",
      "rank 2: flight recorder dump 2: rank 2: NCCL stall: 10 records (the last 1.0 s)",
      "rank 9 flight recorder dump 7: malformed, skipped"};
  const Report r = Analyze(t);
  EXPECT_EQ(r.capture.on_demand_steps, 3u);
  ASSERT_EQ(r.capture.dumps.size(), 2u);
  EXPECT_EQ(r.capture.dumps[0], "dump 1: requested (aon ctl trigger: loss spike) (ranks 0-1,3)");
  EXPECT_EQ(r.capture.dumps[1], "dump 2: rank 2: NCCL stall (rank 2)");
  const std::string& s = r.capture.statement;
  EXPECT_NE(s.find("3 of the traced steps per rank were asked for on demand (aon ctl capture)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("The flight recorder wrote its window 2 times: dump 1: requested (aon ctl "
                   "trigger: loss spike) (ranks 0-1,3); dump 2"),
            std::string::npos)
      << s;
  // An older timeline (no capture_events) and no on-demand steps: nothing said.
  const Report plain = Analyze(WindowedJob().WriteAndLoad(dir.File("u.h5")));
  EXPECT_EQ(plain.capture.statement.find("on demand"), std::string::npos);
  EXPECT_EQ(plain.capture.statement.find("flight recorder"), std::string::npos);
}

TEST(Windows, ARankWithoutAWindowIsNotMissing) {
  TempDir dir;
  TimelineBuilder b = WindowedJob();
  b.Rank(1);
  RankSummary& row = b.ranks[1];
  row.capture_mode = static_cast<uint8_t>(CaptureMode::kBudgeted);
  row.steps = 8;
  row.overhead_budget = 0.01;
  row.amortized_cost = 0;
  for (uint64_t s = 0; s < 8; ++s) b.Step(1, s, s * kStep + kMs, (s + 1) * kStep + kMs);
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  EXPECT_EQ(r.ranks[1].status, RankStatus::kOk);
  ASSERT_EQ(r.capture.ranks_without_window, std::vector<uint32_t>{1});
  EXPECT_NE(r.capture.statement.find("1 rank opened no window (not missing"), std::string::npos)
      << r.capture.statement;
  for (const std::string& n : r.notes) EXPECT_EQ(n.find("rank 1 is"), std::string::npos) << n;
}

TEST(Windows, FullCaptureAndOlderTimelines) {
  TempDir dir;
  TimelineBuilder full = WindowedJob();
  full.ranks[0].capture_mode = static_cast<uint8_t>(CaptureMode::kFull);
  for (auto& m : full.steps) m.record.flags = kStepCaptured;
  const Report r = Analyze(full.WriteAndLoad(dir.File("full.h5")));
  EXPECT_FALSE(r.steps.windowed);
  EXPECT_EQ(r.capture.statement.rfind("AON traced every step (--mode full)", 0), 0u)
      << r.capture.statement;
  // A timeline from before format 1.5: no capture fields, nothing said.
  TimelineBuilder old;
  old.Rank(0);
  old.Kernel(0, "sgemm_kernel", 0, kMs);
  const Report o = Analyze(old.WriteAndLoad(dir.File("old.h5")));
  EXPECT_FALSE(o.capture.known);
  EXPECT_TRUE(o.capture.statement.empty());
  EXPECT_EQ(RenderJson(o).find("\"capture\""), std::string::npos);
}

}  // namespace
}  // namespace aon::report
