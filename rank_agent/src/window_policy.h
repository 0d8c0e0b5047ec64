// Capture windows on the same steps of every rank, inside an overhead budget
// (budgeted mode; docs/always-on.md). Pure logic: no CUPTI, no clock reads, no
// locks; the agent (capture_control.h) feeds it step boundaries and does what it
// says. Unit-tested on simulated step times (tests/unit/agent/window_policy_test.cc).
//
// Steps. Several sources mark step boundaries; StepTracker keeps the most
// preferred one that has marked a step (api > pytorch > nvtx > nccl > time) and
// numbers its steps: counted from 0 at the source's first boundary (api,
// pytorch, nvtx), or taken from
// the source (the NCCL sequence number of the first communicator, the time slot
// on the synchronized clock). Every rank runs the same program, so every rank
// numbers the same step alike, without exchanging a message.
//
// Windows. Step s is captured when (s - phase) mod P < W: W steps every P steps,
// phase from a job-wide seed (so windows do not alias with periodic work such as
// checkpoints every 1000 steps). P is a power of two, so the windows of a larger
// period are a subset of those of a smaller one: ranks that chose different
// periods still capture the larger period's windows together. One extra window,
// W = 2 at step kFirstWindowStep, measures the cost early (and gives short jobs
// a window with a step past its lead-in).
//
// Budget. Each window's cost is what its steps and the two steps after it (CUPTI
// is switched off there) took beyond the mean of recent uncaptured steps,
// measured in the same process, split into a fixed part F (attaching, the
// lead-in, the tail's flush and detach) and a part e per captured step (CUPTI's
// per-launch cost, framework observers), so that a window of W steps costs
// F + W e. P is the smallest power of two with
// (F + W e) / (P x median uncaptured step) <= budget / kHeadroom; it rises when
// windows get dearer. With an automatic width (the default), W is chosen with
// P: the pair with the most captured steps per step (W / P) inside the budget,
// W from a grid (3, 4, 6, 8, 12, 16, 24, 32), so a fixed cost F that dominates short
// windows is spread over longer ones. A window opens only while the cost so far
// is within the budget (otherwise it is skipped on this rank: the windows that
// do open stay on P-aligned steps), so the amortized cost exceeds the budget by
// at most one window's cost.
//
// Ranks. Every rank opens its windows on P-aligned steps of the same phase, so
// a window of a rank with a larger P starts where one of every smaller-P rank
// starts, and the first W_min steps of it are captured on both. With a fixed
// width that is all a dearer rank captures (a subset of the others' steps); with
// an automatic width a rank whose fixed cost is larger may choose longer windows
// than the others, whose extra steps are then its own.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "aon/format/records.h"

namespace aon::agent {

class StepTracker {
 public:
  // forced = kNone: the most preferred source that marks steps; else only that one.
  explicit StepTracker(StepSource forced = StepSource::kNone) : forced_(forced) {}

  struct Boundary {
    bool counts = false;    // a boundary of the active source
    bool switched = false;  // the active source changed at this boundary
    uint64_t step = 0;      // the step that begins here
  };
  // A boundary of `source`; `number` = the source's own step number, or
  // kCounted for sources numbered here.
  static constexpr uint64_t kCounted = UINT64_MAX;
  Boundary Mark(StepSource source, uint64_t number = kCounted);

  StepSource active() const { return active_; }

  // Higher is preferred: api > pytorch > nvtx > nccl > time > none. Written out
  // because StepSource values are file-format values, numbered in the order
  // sources were added, not by preference (pytorch came after api).
  static int Preference(StepSource s);

 private:
  StepSource forced_;
  StepSource active_ = StepSource::kNone;
  uint64_t counted_ = 0;  // boundaries of the active source so far (counted sources)
};

struct WindowSettings {
  uint32_t width = 3;       // W: steps per window (the least, with auto_width)
  bool auto_width = false;  // W chosen with P inside the budget, from width x 1, 4/3, 2, 8/3, 4...
  uint32_t max_width = 32;  // ... up to this
  uint32_t fixed_period = 0;  // P fixed (a power of two); 0: chosen by the budget
  double budget = 0.01;       // share of step time windows may cost
  uint64_t seed = 0;          // job-wide (the job id's hash): the phase
  uint32_t min_period = 16;   // the budget never asks for windows closer than this
  uint32_t max_period = 1u << 20;
};

// What the agent does at a step boundary, in this order.
struct StepDecision {
  bool detach = false;   // switch CUPTI off entirely (the second step after a window)
  bool quiesce = false;  // stop recording: the window ended at this boundary
  bool open = false;     // switch CUPTI on: this step starts a window
  // The step that begins: captured (in a window), a window's tail, on demand.
  uint8_t flags = 0;
  uint64_t window_first_step = UINT64_MAX;
  uint32_t window = 0;  // n-th window, 0: none
  uint32_t period = 0;  // P in force
};

struct WindowSummary {
  uint64_t steps = 0;
  uint64_t captured_steps = 0;
  uint64_t windows = 0;
  uint32_t period = 0;
  double window_step_ratio = 0;  // median captured step / median uncaptured step (0: unknown)
  double duty_cycle = 0;         // captured_steps / steps
  double amortized_cost = -1;    // extra time / uncaptured-equivalent time (-1: unknown)
};

class WindowPolicy {
 public:
  static constexpr uint64_t kFirstWindowStep = aon::kFirstWindowStep;  // records.h
  static constexpr uint32_t kFirstWindowWidth = 3;
  static constexpr double kHeadroom = 1.25;
  static constexpr int kTailSteps = 2;
  static constexpr double kGrossOutlier = 3.0;  // x the median: not an ordinary step

  explicit WindowPolicy(const WindowSettings& settings);

  // Step `step` begins at `t_ns` (the previous boundary ended the step before).
  StepDecision OnStep(uint64_t step, uint64_t t_ns);
  // The step numbering restarted (another source took over): a window in
  // progress ends here (the decision says how to switch CUPTI off); the
  // measurements made on the old source's steps are dropped (its time stays in
  // the totals) and the new source starts with a measuring window again. The
  // summary's step, captured-step and window counts and its in-window step
  // ratio start again too: they describe the active source's steps (window
  // numbers go on, unique per rank).
  StepDecision Restart(uint64_t t_ns);
  // An on-demand window of `steps` steps from the next boundary at or after
  // `not_before_ns` (on the clock OnStep is given).
  void RequestCapture(uint32_t steps, uint64_t not_before_ns);
  // A job-wide on-demand window (aon-ctl capture): steps [first_step,
  // first_step + steps) of the active source, the same steps on every rank. A
  // window in progress or in its tail is carried on to hold them; a request
  // whose steps have all passed (and were not in the last window) is counted
  // late and dropped.
  void RequestCaptureAt(uint64_t first_step, uint32_t steps);
  uint64_t late_requests() const { return late_requests_; }

  WindowSummary Summary() const;
  uint32_t period() const { return period_; }
  uint32_t width() const { return width_; }  // W of the periodic windows now
  // Whether step `step` lies in / starts a periodic window under period `p`
  // (and the width now in force).
  bool InWindow(uint64_t step, uint32_t p) const;
  bool StartsWindow(uint64_t step, uint32_t p) const;

 private:
  enum class State { kIdle, kOpen, kTail };
  void EndStep(uint64_t t_ns);
  void FinishWindowCost();
  bool OverBudget() const;  // the windows so far cost more than the budget
  double BaseStepNs() const;
  double BaseMeanNs() const;
  void ChoosePeriod();
  // The expected extra time of a periodic window of `w` steps (ns): F + w e.
  double WindowCostNs(uint32_t w) const;

  WindowSettings s_;
  uint64_t phase_ = 0;
  uint32_t period_ = 0;
  uint32_t width_ = 0;
  // The step in progress.
  bool have_step_ = false;
  uint64_t step_start_ns_ = 0;
  uint8_t step_flags_ = 0;
  bool step_opens_ = false;  // CUPTI attached at its start: a window's lead-in
  // Window state.
  State state_ = State::kIdle;
  uint64_t window_first_ = UINT64_MAX;
  uint32_t window_left_ = 0;  // captured steps still to come in the open window
  uint32_t window_width_ = 0;
  int tail_left_ = 0;
  bool window_on_demand_ = false;
  uint32_t windows_ = 0;
  bool first_window_done_ = false;
  // On demand.
  uint32_t demand_steps_ = 0;
  uint64_t demand_not_before_ = 0;
  static constexpr uint64_t kNoStep = UINT64_MAX;
  uint64_t demand_first_ = kNoStep;  // RequestCaptureAt
  uint32_t demand_at_steps_ = 0;
  uint64_t late_requests_ = 0;
  // Measurements.
  std::deque<double> base_;             // recent uncaptured step durations (ns)
  std::vector<double> base_all_;        // every uncaptured step, for the summary's median
  std::vector<double> captured_;        // every captured step (ns)
  std::deque<double> window_fixed_;     // recent windows' fixed cost F (ns)
  std::deque<double> window_per_step_;  // recent windows' cost per captured step e (ns)
  double current_cost_ = 0;             // the window being measured: its steps' time
  uint64_t current_steps_ = 0;          // ... and how many steps that was
  uint64_t current_captured_ = 0;       // ... of which captured
  double current_inner_ns_ = 0;         // ... the captured steps after the lead-in
  uint64_t current_inner_ = 0;
  double extra_ns_ = 0;  // all windows' extra time
  double total_ns_ = 0;  // all steps
  uint64_t steps_ = 0;
  uint64_t captured_steps_ = 0;
  // The counts when the active source took over (Restart): the summary's are
  // the active source's.
  uint64_t steps_before_ = 0;
  uint64_t captured_before_ = 0;
  uint32_t windows_before_ = 0;
};

}  // namespace aon::agent
