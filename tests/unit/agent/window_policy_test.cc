// Capture windows and the overhead budget (rank_agent/src/window_policy.h), on
// simulated step times: which steps each rank captures, and what the windows
// cost against the budget. The simulated cost model is the one measured on an
// H200 (bench/RESULTS.md, "CUPTI switched on and off"): a captured step takes
// `ratio` x a plain one, the first captured step also pays for attaching CUPTI,
// the first step after a window runs with CUPTI quiesced, the second pays for
// the detach.
#include "window_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <vector>

namespace aon::agent {
namespace {

struct CostModel {
  double base_ns = 8e6;        // a plain step
  double ratio = 1.5;          // a captured step, x base
  double attach_ns = 14e6;     // first captured step: CUPTI subscribe + first launches
  double quiesce_ratio = 1.3;  // the step after a window
  double detach_ns = 8e6;      // flush + finalize
  double jitter = 0.02;        // +- uniform, per step
  // Right-skewed noise (preemption, data loading): with this probability a step
  // takes tail_ns longer, captured or not.
  double tail_prob = 0;
  double tail_ns = 0;
};

struct SimRun {
  std::vector<StepDecision> decisions;  // one per step
  double plain_ns = 0;                  // what the steps would have taken without AON
  double total_ns = 0;
  double worst_excess_ns = 0;  // max over time of extra - budget x plain
  double max_window_ns = 0;    // the dearest window's extra time
  std::set<uint64_t> captured;
};

// Runs `steps` steps through `p`; `model(step)` gives the cost model in force.
template <typename Model>
SimRun Simulate(WindowPolicy& p, uint64_t steps, Model model, uint64_t seed, double budget) {
  std::mt19937_64 rng(seed);
  SimRun r;
  uint64_t t = 1'000'000'000;
  double extra = 0, window_extra = 0;
  for (uint64_t s = 0; s < steps; ++s) {
    const StepDecision d = p.OnStep(s, t);
    r.decisions.push_back(d);
    const CostModel m = model(s);
    double plain = m.base_ns * (1 + m.jitter * (std::uniform_real_distribution<>(-1, 1)(rng)));
    if (m.tail_prob > 0 && std::uniform_real_distribution<>(0, 1)(rng) < m.tail_prob)
      plain += m.tail_ns;
    double took = plain;
    if (d.flags & kStepCaptured) {
      took = plain * m.ratio + (d.open ? m.attach_ns : 0);
      r.captured.insert(s);
    } else if (d.flags & kStepWindowTail) {
      took = d.detach ? plain + m.detach_ns : plain * m.quiesce_ratio;
    }
    extra += took - plain;
    if (d.flags & (kStepCaptured | kStepWindowTail)) {
      window_extra += took - plain;
    } else if (window_extra > 0) {
      r.max_window_ns = std::max(r.max_window_ns, window_extra);
      window_extra = 0;
    }
    r.plain_ns += plain;
    r.total_ns += took;
    r.worst_excess_ns = std::max(r.worst_excess_ns, extra - budget * r.plain_ns);
    t += static_cast<uint64_t>(took);
  }
  return r;
}

double Amortized(const SimRun& r) { return (r.total_ns - r.plain_ns) / r.plain_ns; }

TEST(StepTracker, PrefersApiThenNvtxThenNcclThenTime) {
  StepTracker t;
  auto b = t.Mark(StepSource::kTime, 1'000);
  EXPECT_TRUE(b.counts);
  EXPECT_EQ(b.step, 1'000u);  // time slots keep their own number
  b = t.Mark(StepSource::kNccl, 7);
  EXPECT_TRUE(b.counts && b.switched);
  EXPECT_EQ(b.step, 7u);
  EXPECT_FALSE(t.Mark(StepSource::kTime, 1'001).counts) << "a less preferred source is ignored";
  b = t.Mark(StepSource::kNvtx);
  EXPECT_TRUE(b.counts && b.switched);
  EXPECT_EQ(b.step, 0u);  // counted from 0 at the source's first boundary
  EXPECT_EQ(t.Mark(StepSource::kNvtx).step, 1u);
  EXPECT_FALSE(t.Mark(StepSource::kNccl, 8).counts);
  b = t.Mark(StepSource::kApi);
  EXPECT_TRUE(b.switched);
  EXPECT_EQ(b.step, 0u);
  EXPECT_FALSE(t.Mark(StepSource::kNvtx).counts);
  EXPECT_EQ(t.Mark(StepSource::kApi).step, 1u);
  EXPECT_EQ(t.active(), StepSource::kApi);
}

// kPytorch (5) has the largest value but ranks below kApi (4): the preference is
// its own order, not the enum's.
TEST(StepTracker, PytorchHooksRankBelowApiAndAboveNvtx) {
  const StepSource order[] = {StepSource::kApi,  StepSource::kPytorch, StepSource::kNvtx,
                              StepSource::kNccl, StepSource::kTime,    StepSource::kNone};
  for (size_t i = 1; i < std::size(order); ++i) {
    EXPECT_GT(StepTracker::Preference(order[i - 1]), StepTracker::Preference(order[i])) << i;
  }
  EXPECT_EQ(StepTracker::Preference(static_cast<StepSource>(200)), 0) << "unknown: never preferred";

  StepTracker t;
  EXPECT_TRUE(t.Mark(StepSource::kNvtx).counts);
  EXPECT_TRUE(t.Mark(StepSource::kNvtx).counts);
  auto b = t.Mark(StepSource::kPytorch);
  EXPECT_TRUE(b.counts && b.switched) << "the framework's hook takes over from NVTX";
  EXPECT_EQ(b.step, 0u);
  EXPECT_FALSE(t.Mark(StepSource::kNvtx).counts);
  EXPECT_FALSE(t.Mark(StepSource::kNccl, 9).counts);
  EXPECT_EQ(t.Mark(StepSource::kPytorch).step, 1u);
  b = t.Mark(StepSource::kApi);
  EXPECT_TRUE(b.counts && b.switched) << "the program's own aon_step() wins";
  EXPECT_EQ(b.step, 0u);
  EXPECT_FALSE(t.Mark(StepSource::kPytorch).counts);
  EXPECT_EQ(t.Mark(StepSource::kApi).step, 1u);
  EXPECT_EQ(t.active(), StepSource::kApi);
}

// kJax (6) ranks below kPytorch and above kNvtx: a JAX program's
// StepTraceAnnotations win over step-named NVTX ranges (and XLA's own ranges).
TEST(StepTracker, JaxHooksRankBelowPytorchAndAboveNvtx) {
  EXPECT_GT(StepTracker::Preference(StepSource::kPytorch),
            StepTracker::Preference(StepSource::kJax));
  EXPECT_GT(StepTracker::Preference(StepSource::kJax), StepTracker::Preference(StepSource::kNvtx));
  StepTracker t;
  EXPECT_TRUE(t.Mark(StepSource::kTime, 7).counts);
  auto b = t.Mark(StepSource::kJax);
  EXPECT_TRUE(b.counts && b.switched) << "the JAX hook takes over from time slots";
  EXPECT_EQ(b.step, 0u);
  EXPECT_FALSE(t.Mark(StepSource::kNvtx).counts);
  EXPECT_EQ(t.Mark(StepSource::kJax).step, 1u);
  b = t.Mark(StepSource::kPytorch);
  EXPECT_TRUE(b.counts && b.switched);
  EXPECT_FALSE(t.Mark(StepSource::kJax).counts);
  StepTracker forced(StepSource::kJax);
  EXPECT_FALSE(forced.Mark(StepSource::kApi).counts);
  EXPECT_TRUE(forced.Mark(StepSource::kJax).counts);
}

TEST(StepTracker, AForcedPytorchSourceIgnoresApi) {
  StepTracker t(StepSource::kPytorch);
  EXPECT_FALSE(t.Mark(StepSource::kApi).counts);
  EXPECT_TRUE(t.Mark(StepSource::kPytorch).counts);
  EXPECT_EQ(t.Mark(StepSource::kPytorch).step, 1u);
}

TEST(StepTracker, AForcedSourceIsTheOnlyOne) {
  StepTracker t(StepSource::kNccl);
  EXPECT_FALSE(t.Mark(StepSource::kApi).counts);
  EXPECT_FALSE(t.Mark(StepSource::kNvtx).counts);
  auto b = t.Mark(StepSource::kNccl, 3);
  EXPECT_TRUE(b.counts);
  EXPECT_FALSE(b.switched);
  EXPECT_EQ(b.step, 3u);
}

TEST(WindowPolicy, AFixedPeriodCapturesExactlyItsSteps) {
  WindowSettings s;
  s.width = 3;
  s.fixed_period = 64;
  s.seed = 42;
  WindowPolicy p(s);
  SimRun r = Simulate(
      p, 2'000, [](uint64_t) { return CostModel{}; }, 1, 1.0);
  std::set<uint64_t> want;
  for (uint64_t step = 0; step < 2'000; ++step) {
    if (p.InWindow(step, 64) ||
        (step >= WindowPolicy::kFirstWindowStep &&
         step < WindowPolicy::kFirstWindowStep + WindowPolicy::kFirstWindowWidth)) {
      want.insert(step);
    }
  }
  EXPECT_EQ(r.captured, want);
  // Each periodic window: 3 captured steps, then a quiesced step, then the detach.
  for (uint64_t step = 0; step + 5 < 2'000; ++step) {
    if (!p.StartsWindow(step, 64) ||
        step <= WindowPolicy::kFirstWindowStep + WindowPolicy::kFirstWindowWidth + 2) {
      continue;
    }
    EXPECT_TRUE(r.decisions[step].open) << step;
    EXPECT_EQ(r.decisions[step].window_first_step, step);
    EXPECT_TRUE(r.decisions[step + 3].quiesce) << step;
    EXPECT_TRUE(r.decisions[step + 4].detach) << step;
    EXPECT_EQ(r.decisions[step + 5].flags, 0) << step;
  }
}

// Two ranks of one job: the same seed and the same costs, but their own step-time
// noise. They capture exactly the same steps.
TEST(WindowPolicy, RanksOfOneJobCaptureTheSameSteps) {
  WindowSettings s;
  s.seed = 0xfeed;
  std::vector<std::set<uint64_t>> captured;
  for (uint64_t rank = 0; rank < 4; ++rank) {
    WindowPolicy p(s);
    captured.push_back(Simulate(
                           p, 50'000, [](uint64_t) { return CostModel{}; }, 100 + rank, s.budget)
                           .captured);
  }
  ASSERT_GT(captured[0].size(), 10u);
  for (size_t r = 1; r < captured.size(); ++r) EXPECT_EQ(captured[r], captured[0]) << "rank " << r;
}

// A rank whose windows cost more chooses a longer period; its windows are then a
// subset of the others', so the steps it captures are captured everywhere.
TEST(WindowPolicy, ARankWithDearerWindowsCapturesASubsetOfTheOthersSteps) {
  WindowSettings s;
  s.seed = 99;
  WindowPolicy cheap(s), dear(s);
  SimRun a = Simulate(
      cheap, 100'000, [](uint64_t) { return CostModel{}; }, 1, s.budget);
  CostModel expensive;
  expensive.ratio = 3.0;
  expensive.attach_ns = 60e6;
  SimRun b = Simulate(
      dear, 100'000, [&](uint64_t) { return expensive; }, 2, s.budget);
  EXPECT_GT(dear.period(), cheap.period());
  ASSERT_FALSE(b.captured.empty());
  for (uint64_t step : b.captured) EXPECT_TRUE(a.captured.count(step)) << step;
}

// The default width (AON_CAPTURE_STEPS=auto). On the H200's measured costs a
// window's fixed part (attach, tail, detach: ~3 steps here) dominates a 3-step
// window; longer windows spread it, so the same budget captures more steps,
// and the cost stays inside the budget. The agent chooses the width with the
// period from its own measurements; nothing here tells it F or e.
TEST(WindowPolicy, AnAutomaticWidthCapturesMoreStepsInsideTheSameBudget) {
  for (double budget : {0.01, 0.03}) {
    for (double ratio : {1.2, 1.5, 2.0}) {
      SCOPED_TRACE("budget " + std::to_string(budget) + ", in-window ratio " +
                   std::to_string(ratio));
      CostModel m;
      m.ratio = ratio;
      WindowSettings fixed;
      fixed.budget = budget;
      fixed.seed = 21;
      WindowSettings automatic = fixed;
      automatic.auto_width = true;
      WindowPolicy a(fixed), b(automatic);
      const uint64_t steps = 400'000;
      SimRun ra = Simulate(
          a, steps, [&](uint64_t) { return m; }, 7, budget);
      SimRun rb = Simulate(
          b, steps, [&](uint64_t) { return m; }, 7, budget);
      EXPECT_LE(Amortized(rb), budget);
      EXPECT_NEAR(b.Summary().amortized_cost, Amortized(rb), budget * 0.1);
      EXPECT_EQ(b.Summary().captured_steps, rb.captured.size());
      // Never fewer steps; where the fixed part is at least twice what the
      // least window's steps cost, at least 1.5 times as many.
      const double fixed_part = m.attach_ns + (m.quiesce_ratio - 1) * m.base_ns + m.detach_ns;
      const double least_steps = 3 * (m.ratio - 1) * m.base_ns;
      const double gain = fixed_part >= 2 * least_steps ? 1.5 : 1.0;
      EXPECT_GE(static_cast<double>(rb.captured.size()),
                gain * static_cast<double>(ra.captured.size()))
          << "fixed: " << ra.captured.size() << " steps, period " << a.period() << "; auto: width "
          << b.width() << ", period " << b.period();
      // The width comes from the grid, and leaves most of the period uncaptured.
      const std::set<uint32_t> grid = {3, 4, 6, 8, 12, 16, 24, 32};
      EXPECT_TRUE(grid.count(b.width())) << b.width();
      EXPECT_LE(b.width() * 4, b.period());
      std::printf(
          "budget %.2f ratio %.1f: fixed width 3 period %u captures %zu; auto width %u "
          "period %u captures %zu (cost %.4f)\n",
          budget, ratio, a.period(), ra.captured.size(), b.width(), b.period(), rb.captured.size(),
          Amortized(rb));
    }
  }
}

// Automatic width, ranks of one job with the same costs and their own noise:
// the same steps, as with a fixed width.
TEST(WindowPolicy, RanksOfOneJobCaptureTheSameStepsWithAnAutomaticWidth) {
  WindowSettings s;
  s.seed = 0xbeef;
  s.auto_width = true;
  std::vector<std::set<uint64_t>> captured;
  for (uint64_t rank = 0; rank < 4; ++rank) {
    WindowPolicy p(s);
    captured.push_back(Simulate(
                           p, 100'000, [](uint64_t) { return CostModel{}; }, 300 + rank, s.budget)
                           .captured);
  }
  ASSERT_GT(captured[0].size(), 30u);
  for (size_t r = 1; r < captured.size(); ++r) EXPECT_EQ(captured[r], captured[0]) << "rank " << r;
}

// Automatic width, ranks with different costs: they may choose different
// periods and widths, but every window of the rank with the longer period
// starts on a window of the other, and its first three steps (the least width)
// are captured on both.
TEST(WindowPolicy, RanksWithDifferentCostsShareTheFirstStepsOfTheSparserRanksWindows) {
  WindowSettings s;
  s.seed = 77;
  s.auto_width = true;
  CostModel dearer;
  dearer.ratio = 2.5;
  dearer.attach_ns = 40e6;
  for (const CostModel& other : {CostModel{}, dearer}) {
    CostModel cheap;
    cheap.ratio = 1.1;
    cheap.attach_ns = 4e6;
    cheap.detach_ns = 2e6;
    WindowPolicy a(s), b(s);
    const uint64_t steps = 200'000;
    SimRun ra = Simulate(
        a, steps, [&](uint64_t) { return cheap; }, 1, s.budget);
    SimRun rb = Simulate(
        b, steps, [&](uint64_t) { return other; }, 2, s.budget);
    const bool a_sparser = a.period() >= b.period();
    const SimRun& sparse = a_sparser ? ra : rb;
    const SimRun& dense = a_sparser ? rb : ra;
    size_t windows = 0;
    for (uint64_t step = steps / 2; step + 3 < steps; ++step) {
      if (!sparse.decisions[step].open) continue;
      ++windows;
      for (uint64_t k = step; k < step + 3; ++k) {
        EXPECT_TRUE(dense.captured.count(k))
            << "step " << k << " of the window at " << step << " (periods " << a.period() << ", "
            << b.period() << ")";
      }
    }
    EXPECT_GT(windows, 5u);
    std::printf("cheap rank: width %u period %u; other: width %u period %u\n", a.width(),
                a.period(), b.width(), b.period());
  }
}

TEST(WindowPolicy, ConvergesToTheBudget) {
  for (double budget : {0.01, 0.03}) {
    WindowSettings s;
    s.budget = budget;
    s.seed = 5;
    WindowPolicy p(s);
    SimRun r = Simulate(
        p, 200'000, [](uint64_t) { return CostModel{}; }, 3, budget);
    const double cost = Amortized(r);
    // Within the budget, and not needlessly below it: the period is the smallest
    // power of two inside budget / headroom, so the cost is above a quarter of it.
    EXPECT_LE(cost, budget) << budget;
    EXPECT_GE(cost, budget / (2 * WindowPolicy::kHeadroom) * 0.8) << budget;
    const WindowSummary w = p.Summary();
    EXPECT_NEAR(w.amortized_cost, cost, budget * 0.1) << "the agent's own estimate";
    EXPECT_NEAR(w.window_step_ratio, CostModel{}.ratio, 0.1);
    EXPECT_EQ(w.captured_steps, r.captured.size());
    EXPECT_EQ(w.steps, 200'000u - 1);  // the last step has not ended
  }
}

// Windows that cost nothing in a job whose steps are noisy with a long right tail
// (the median step is well below the mean): the noise is not taken for cost, so
// the windows are not skipped and the period stays at its floor.
TEST(WindowPolicy, SkewedNoiseIsNotTakenForCost) {
  WindowSettings s;
  s.seed = 9;
  WindowPolicy p(s);
  CostModel free;
  free.ratio = 1;
  free.attach_ns = 0;
  free.quiesce_ratio = 1;
  free.detach_ns = 0;
  free.tail_prob = 0.2;
  free.tail_ns = 4e6;  // half a step, one step in five: mean 10 % above the median
  const uint64_t steps = 100'000;
  SimRun r = Simulate(
      p, steps, [&](uint64_t) { return free; }, 11, s.budget);
  const WindowSummary w = p.Summary();
  EXPECT_LT(w.amortized_cost, s.budget / 5) << "noise counted as cost";
  EXPECT_LT(Amortized(r), s.budget / 5);
  // The noise still blurs each window's measurement (a step's spread here is 20 %
  // of it, the budget 1 %), so the period wanders above its floor; it must not
  // run away: at least half of the floor's windows open.
  const double floor_steps = static_cast<double>(steps) * s.width / s.min_period;
  EXPECT_GE(static_cast<double>(r.captured.size()), floor_steps / 2) << "period " << p.period();
  std::printf("skewed noise: %zu captured steps (floor period: %.0f), period now %u\n",
              r.captured.size(), floor_steps, p.period());
}

TEST(WindowPolicy, BacksOffWhenWindowsGetDearer) {
  WindowSettings s;
  s.seed = 6;
  WindowPolicy p(s);
  CostModel later;
  later.ratio = 4.0;
  later.attach_ns = 80e6;
  later.detach_ns = 40e6;
  uint32_t period_before = 0;
  SimRun r = Simulate(
      p, 300'000,
      [&](uint64_t step) {
        if (step == 100'000) period_before = p.period();
        return step < 100'000 ? CostModel{} : later;
      },
      4, s.budget);
  EXPECT_GE(p.period(), 4 * period_before) << "period " << period_before << " -> " << p.period();
  // Over the dearer part alone the budget holds too.
  double plain = 0, total = 0;
  (void)r;
  WindowPolicy q(s);
  SimRun only_later = Simulate(
      q, 200'000, [&](uint64_t) { return later; }, 5, s.budget);
  plain = only_later.plain_ns;
  total = only_later.total_ns;
  EXPECT_LE((total - plain) / plain, s.budget);
}

// At no point does the cost so far exceed the budget by more than one window.
TEST(WindowPolicy, NeverExceedsTheBudgetByMoreThanOneWindow) {
  for (uint64_t seed : {1, 2, 3}) {
    WindowSettings s;
    s.seed = seed;
    WindowPolicy p(s);
    CostModel spiky;
    SimRun r = Simulate(
        p, 100'000,
        [&](uint64_t step) {
          CostModel m = spiky;
          // Windows get suddenly dearer and cheaper again.
          if ((step / 10'000) % 2 == 1) {
            m.ratio = 5;
            m.attach_ns = 100e6;
          }
          return m;
        },
        seed, s.budget);
    EXPECT_LE(r.worst_excess_ns, r.max_window_ns * 1.0001) << "seed " << seed;
  }
}

TEST(WindowPolicy, OnDemandCaptureStartsAtTheFirstStepAfterItsTime) {
  WindowSettings s;
  s.fixed_period = 1u << 20;  // no periodic window in reach
  WindowPolicy p(s);
  uint64_t t = 1'000;
  for (uint64_t step = 0; step < 20; ++step, t += 100) p.OnStep(step, t);
  p.RequestCapture(5, t + 250);  // steps begin every 100: the third boundary from here
  std::vector<StepDecision> d;
  for (uint64_t step = 20; step < 40; ++step, t += 100) d.push_back(p.OnStep(step, t));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(d[i].flags, 0) << i;
  EXPECT_TRUE(d[3].open);
  for (int i = 3; i < 8; ++i) {
    EXPECT_EQ(d[i].flags, kStepCaptured | kStepOnDemand) << i;
    EXPECT_EQ(d[i].window_first_step, 23u);
  }
  EXPECT_TRUE(d[8].quiesce);
  EXPECT_TRUE(d[9].detach);
  EXPECT_EQ(d[10].flags, 0);
}

TEST(WindowPolicy, ARestartEndsTheWindowInProgress) {
  WindowSettings s;
  WindowPolicy p(s);
  uint64_t t = 0;
  for (uint64_t step = 0; step <= WindowPolicy::kFirstWindowStep; ++step, t += 100) {
    const StepDecision d = p.OnStep(step, t);
    EXPECT_EQ(d.open, step == WindowPolicy::kFirstWindowStep);
  }
  const StepDecision d = p.Restart(t);
  EXPECT_TRUE(d.quiesce);
  EXPECT_TRUE(d.detach);
  // The summary is the new source's: the old source's steps and window are not in it.
  EXPECT_EQ(p.Summary().steps, 0u);
  EXPECT_EQ(p.Summary().captured_steps, 0u);
  EXPECT_EQ(p.Summary().windows, 0u);
  EXPECT_EQ(p.Summary().window_step_ratio, 0.0) << "no step of the new source measured yet";
  EXPECT_EQ(p.OnStep(0, t + 100).flags, 0);
  // Its own measuring window, numbered after the old source's.
  t += 200;
  for (uint64_t step = 1; step <= WindowPolicy::kFirstWindowStep + 1; ++step, t += 100) {
    const StepDecision again = p.OnStep(step, t);
    EXPECT_EQ(again.open, step == WindowPolicy::kFirstWindowStep);
    if (again.open) {
      EXPECT_EQ(again.window, 2u);
    }
  }
  EXPECT_EQ(p.Summary().steps, WindowPolicy::kFirstWindowStep + 1);
  EXPECT_EQ(p.Summary().captured_steps, 1u);
  EXPECT_EQ(p.Summary().windows, 1u);
}

// aon-ctl capture: exactly the requested steps; the rest of them when another
// window holds the first; nothing (counted late) when they have all passed.
TEST(WindowPolicy, AJobWideRequestCapturesExactlyItsSteps) {
  WindowSettings s;
  s.fixed_period = 1u << 20;  // no periodic window in the way
  s.max_period = 1u << 20;
  s.seed = 0;  // one periodic window in 2^20 steps at most
  WindowPolicy p(s);
  uint64_t t = 0;
  std::set<uint64_t> captured, on_demand;
  for (uint64_t step = 0; step < 300; ++step, t += 1000) {
    if (step == 50) p.RequestCaptureAt(100, 5);
    if (step == 150) p.RequestCaptureAt(10, 3);  // long past
    const StepDecision d = p.OnStep(step, t);
    if (d.flags & kStepCaptured) captured.insert(step);
    if (d.flags & kStepOnDemand) on_demand.insert(step);
  }
  EXPECT_EQ(on_demand, (std::set<uint64_t>{100, 101, 102, 103, 104}));
  EXPECT_EQ(p.late_requests(), 1u);
  // The measuring window at step 10 overlaps a request for steps 9..12: the
  // steps after the measuring window and its tail that are still requested.
  WindowPolicy q(s);
  on_demand.clear();
  for (uint64_t step = 0; step < 40; ++step, t += 1000) {
    if (step == 5) q.RequestCaptureAt(9, 8);  // steps 9..16
    const StepDecision d = q.OnStep(step, t);
    if (d.flags & kStepOnDemand) on_demand.insert(step);
  }
  // Step 9 opens the request's window (idle before it); it runs to 16.
  EXPECT_EQ(on_demand, (std::set<uint64_t>{9, 10, 11, 12, 13, 14, 15, 16}));
}

// A job-wide request that meets a periodic window (seen in a two-node Slurm run:
// the request's last two steps fell on the window's tail and were never
// captured). Whatever the offset between them, every requested step is
// captured, no request is counted late, and the decisions keep CUPTI's state
// consistent: a step is flagged captured exactly when recording is on.
TEST(WindowPolicy, AJobWideRequestMeetingAPeriodicWindowCapturesAllItsSteps) {
  WindowSettings s;
  s.fixed_period = 64;
  s.width = 3;
  s.seed = 11;
  for (uint32_t width : {1u, 2u, 5u, 9u}) {
    for (int offset = -12; offset <= 8; ++offset) {
      SCOPED_TRACE("request of " + std::to_string(width) + " steps at window + " +
                   std::to_string(offset));
      WindowPolicy p(s);
      // The first periodic window after the measuring window.
      uint64_t start = 64;
      while (!p.StartsWindow(start, 64)) ++start;
      const uint64_t first = static_cast<uint64_t>(static_cast<int64_t>(start) + offset);
      bool attached = false, recording = false;
      std::set<uint64_t> captured;
      uint64_t t = 0;
      for (uint64_t step = 0; step < start + 40; ++step, t += 1000) {
        if (step + 3 == first) p.RequestCaptureAt(first, width);
        const StepDecision d = p.OnStep(step, t);
        // What CaptureControl::Apply does with the decision.
        if (d.quiesce && recording) recording = false;
        if (d.detach && attached) attached = false;
        if (d.open && !attached) attached = recording = true;
        EXPECT_EQ(static_cast<bool>(d.flags & kStepCaptured), recording) << "step " << step;
        if (d.flags & kStepCaptured) captured.insert(step);
      }
      for (uint64_t step = first; step < first + width; ++step)
        EXPECT_TRUE(captured.count(step)) << "requested step " << step;
      for (uint64_t step = start; step < start + s.width; ++step)
        EXPECT_TRUE(captured.count(step)) << "periodic step " << step;
      EXPECT_EQ(p.late_requests(), 0u);
    }
  }
}

// Time slots (one second) mark the steps until the program's own NVTX steps
// (8 ms) begin: the one-second baseline must not be held against the new steps,
// or a window's cost comes out hugely negative and the budget is never applied.
TEST(WindowPolicy, ARestartMeasuresTheNewStepsAfresh) {
  WindowSettings s;
  s.fixed_period = 16;
  s.seed = 3;
  WindowPolicy p(s);
  uint64_t t = 1'000'000'000;
  StepDecision d;
  for (uint64_t slot = 0; slot < 40; ++slot) {  // time slots, windows among them
    d = p.OnStep(5'000 + slot, t);
    t += 1'000'000'000;
  }
  p.Restart(t);
  // 8 ms steps; a captured step costs 4 ms more, a window's first 10 ms more.
  const CostModel m;
  double extra = 0, plain = 0;
  for (uint64_t step = 0; step < 2'000; ++step) {
    d = p.OnStep(step, t);
    double took = m.base_ns;
    if (d.flags & kStepCaptured) took += 4e6 + (d.open ? 10e6 : 0);
    extra += took - m.base_ns;
    plain += m.base_ns;
    t += static_cast<uint64_t>(took);
  }
  const WindowSummary w = p.Summary();
  EXPECT_GT(w.windows, 100u);
  // Measured over the NVTX steps: the windows' cost against all the time the job
  // ran (the forty seconds of time slots included).
  const double truth = extra / (plain + 40e9);
  EXPECT_GT(w.amortized_cost, truth * 0.8) << "truth " << truth;
  EXPECT_LT(w.amortized_cost, truth * 1.5) << "truth " << truth;
}

}  // namespace
}  // namespace aon::agent
