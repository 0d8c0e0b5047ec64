#include "window_policy.h"

#include <algorithm>

namespace aon::agent {
namespace {

constexpr size_t kRecentBase = 256;        // uncaptured steps the baseline is taken from
constexpr size_t kRecentWindows = 8;       // windows the cost estimate is the median of
constexpr size_t kSummarySamples = 4096;   // steps kept for the summary's medians
constexpr uint32_t kInitialPeriod = 1024;  // before any window was measured

}  // namespace

int StepTracker::Preference(StepSource s) {
  switch (s) {
    case StepSource::kApi:
      return 7;
    case StepSource::kPytorch:
      return 6;
    case StepSource::kJax:
      return 5;
    case StepSource::kNvtx:
      return 4;
    case StepSource::kXla:
      return 3;
    case StepSource::kNccl:
      return 2;
    case StepSource::kTime:
      return 1;
    case StepSource::kNone:
      return 0;
  }
  return 0;  // a value from a newer peer: never preferred
}

namespace {

template <typename C>
double Median(const C& values) {
  if (values.empty()) return 0;
  std::vector<double> v(values.begin(), values.end());
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

template <typename C>
double Mean(const C& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

template <typename C>
void PushBounded(C& c, double v, size_t cap) {
  c.push_back(v);
  if (c.size() > cap) c.erase(c.begin());
}

// The automatic widths: w0 x 1, 4/3, 2, 8/3, 4, ... (3, 4, 6, 8, 12, 16, 24,
// 32): steps of a third or a half, coarse enough that ranks with the same costs
// but their own noise choose alike.
uint32_t GridWidth(uint32_t w0, uint32_t i) {
  if (i >= 40) return UINT32_MAX;
  const uint64_t twos = uint64_t{w0} << (i / 2);
  const uint64_t w = i % 2 == 0 ? twos : (twos * 4 + 2) / 3;
  return w > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(w);
}

uint32_t PowerOfTwoAtLeast(double x, uint32_t cap) {
  uint32_t p = 1;
  while (static_cast<double>(p) < x && p < cap) p <<= 1;
  return p;
}

// splitmix64: a seed's bits spread over the phase.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

StepTracker::Boundary StepTracker::Mark(StepSource source, uint64_t number) {
  Boundary b;
  if (source == StepSource::kNone) return b;
  if (forced_ != StepSource::kNone && source != forced_) return b;
  if (Preference(source) < Preference(active_)) return b;
  if (source != active_) {
    b.switched = active_ != StepSource::kNone;
    active_ = source;
    counted_ = 0;
  }
  b.counts = true;
  b.step = number == kCounted ? counted_++ : number;
  return b;
}

WindowPolicy::WindowPolicy(const WindowSettings& settings) : s_(settings) {
  if (s_.width == 0) s_.width = 1;
  if (s_.max_period < s_.min_period) s_.max_period = s_.min_period;
  if (s_.max_width < s_.width) s_.max_width = s_.width;
  width_ = s_.width;
  // The phase lies below the largest period, so it is the same under every P.
  phase_ = Mix(s_.seed) % s_.max_period;
  period_ = s_.fixed_period != 0 ? s_.fixed_period : kInitialPeriod;
}

// (step - phase) mod p without underflow: the phase is below max_period, a
// multiple of every p.
bool WindowPolicy::InWindow(uint64_t step, uint32_t p) const {
  if (p == 0) return false;
  const uint64_t m = s_.max_period;
  return ((step % m + m - phase_) % m) % p < width_;
}

bool WindowPolicy::StartsWindow(uint64_t step, uint32_t p) const {
  if (p == 0) return false;
  const uint64_t m = s_.max_period;
  return ((step % m + m - phase_) % m) % p == 0;
}

bool WindowPolicy::OverBudget() const {
  return s_.fixed_period == 0 && extra_ns_ > s_.budget * (total_ns_ - extra_ns_);
}

double WindowPolicy::BaseStepNs() const { return Median(base_); }

// The mean, not the median: a window's cost is a sum of its steps' times, and a
// sum compared with n x median counts the steps' ordinary noise (right-skewed:
// preemption, allocator, data loading) as cost. Steps over kGrossOutlier x the
// median (a checkpoint, an evaluation) are left out of the mean; one that lands in
// a window is counted as that window's cost, which errs on the safe side.
double WindowPolicy::BaseMeanNs() const {
  const double median = Median(base_);
  double sum = 0;
  size_t n = 0;
  for (double d : base_) {
    if (d <= kGrossOutlier * median) sum += d, ++n;
  }
  return n ? sum / static_cast<double>(n) : 0.0;
}

void WindowPolicy::EndStep(uint64_t t_ns) {
  if (!have_step_) return;
  have_step_ = false;
  const double d = t_ns > step_start_ns_ ? static_cast<double>(t_ns - step_start_ns_) : 0.0;
  total_ns_ += d;
  ++steps_;
  if (step_flags_ & kStepCaptured) {
    ++captured_steps_;
    PushBounded(captured_, d, kSummarySamples);
    ++current_captured_;
    if (!step_opens_) current_inner_ns_ += d, ++current_inner_;
  }
  if (step_flags_ & (kStepCaptured | kStepWindowTail)) {
    current_cost_ += d;  // the baseline is taken off when the window is finished
    current_steps_ += 1;
  } else {
    PushBounded(base_, d, kRecentBase);
    PushBounded(base_all_, d, kSummarySamples);
  }
  if (state_ == State::kTail && tail_left_ == 0) FinishWindowCost();
}

void WindowPolicy::FinishWindowCost() {
  state_ = State::kIdle;
  const double base = BaseMeanNs();
  if (base > 0 && current_steps_ > 0) {
    // Noise makes some windows look cheaper than free: kept negative, so that it
    // cancels the noise of the others instead of adding up.
    const double extra = current_cost_ - base * static_cast<double>(current_steps_);
    extra_ns_ += extra;
    // Split into a cost per captured step, from the captured steps after the
    // lead-in (which pays for attaching), and the rest, fixed. A window with no
    // such step (one step long) is split as the recent ones were, or, before
    // any, in proportion to its steps with the tail's.
    const auto captured = static_cast<double>(current_captured_);
    double per_step = 0;
    if (current_inner_ > 0) {
      per_step = current_inner_ns_ / static_cast<double>(current_inner_) - base;
    } else if (!window_per_step_.empty()) {
      per_step = Mean(window_per_step_);
    } else {
      per_step = extra / (captured + kTailSteps);
    }
    PushBounded(window_per_step_, per_step, kRecentWindows);
    PushBounded(window_fixed_, extra - per_step * captured, kRecentWindows);
    ChoosePeriod();
  }
  current_cost_ = 0;
  current_steps_ = 0;
  current_captured_ = 0;
  current_inner_ns_ = 0;
  current_inner_ = 0;
}

// The mean of the recent windows' parts: each is an unbiased but noisy
// measurement (a median of them would keep the noise's skew). Below zero only by
// noise: no measurable cost.
double WindowPolicy::WindowCostNs(uint32_t w) const {
  if (window_fixed_.empty()) return 0;
  const double per_step = std::max(0.0, Mean(window_per_step_));
  return std::max(0.0, Mean(window_fixed_) + static_cast<double>(w) * per_step);
}

void WindowPolicy::ChoosePeriod() {
  if (s_.fixed_period != 0) {
    period_ = s_.fixed_period;
    return;
  }
  const double base = BaseStepNs();
  if (base <= 0 || window_fixed_.empty()) return;
  // What a window may cost per step of the period.
  const double allowed = s_.budget * base / kHeadroom;
  const double floor = std::max<double>(s_.min_period, s_.width + kTailSteps + 1);
  if (!s_.auto_width) {
    width_ = s_.width;
    period_ = PowerOfTwoAtLeast(std::max(WindowCostNs(width_) / allowed, floor), s_.max_period);
    return;
  }
  // Every period from the floor up, with the widest window of the grid that
  // fits it (a longer window than the least only where it leaves the period
  // three quarters uncaptured); the most captured steps per step wins, the
  // shorter period on a tie (windows spread over more of the job). Past the
  // period where the grid's widest fits, the share only falls.
  uint32_t best_p = 0, best_w = s_.width;
  for (uint64_t p = PowerOfTwoAtLeast(floor, s_.max_period); p <= s_.max_period; p <<= 1) {
    uint32_t fit = 0;
    bool widest = false;
    for (uint32_t i = 0;; ++i) {
      const uint32_t w = GridWidth(s_.width, i);
      if (w > s_.max_width) {
        widest = true;
        break;
      }
      if (i > 0 && uint64_t{w} * 4 > p) break;
      if (WindowCostNs(w) > allowed * static_cast<double>(p)) break;
      fit = w;
    }
    if (fit == 0) continue;
    if (best_p == 0 || uint64_t{fit} * best_p > uint64_t{best_w} * p) {
      best_p = static_cast<uint32_t>(p);
      best_w = fit;
    }
    if (widest) break;  // larger periods only lower the share
  }
  period_ = best_p != 0 ? best_p : s_.max_period;
  width_ = best_p != 0 ? best_w : s_.width;
}

StepDecision WindowPolicy::Restart(uint64_t t_ns) {
  StepDecision d;
  EndStep(t_ns);
  if (state_ == State::kOpen || state_ == State::kTail) {
    d.quiesce = state_ == State::kOpen;
    d.detach = true;
  }
  // The new source's steps are not the old one's (one-second time slots, then
  // 5 ms NVTX steps): a baseline or a window cost of the old steps says nothing
  // about the new ones. The window cut short is not measured; the time it and
  // the finished windows cost stays in the totals. The new source gets its own
  // short measuring window at its step kFirstWindowStep.
  current_cost_ = 0;
  current_steps_ = 0;
  steps_before_ = steps_;
  captured_before_ = captured_steps_;
  windows_before_ = windows_;
  captured_.clear();  // the summary's step times, too, are the new source's
  base_all_.clear();
  base_.clear();
  window_fixed_.clear();
  window_per_step_.clear();
  width_ = s_.width;  // chosen afresh from the new steps' windows
  current_captured_ = 0;
  current_inner_ns_ = 0;
  current_inner_ = 0;
  first_window_done_ = false;
  demand_first_ = kNoStep;  // numbered by the old source
  state_ = State::kIdle;
  window_left_ = 0;
  tail_left_ = 0;
  d.period = period_;
  return d;
}

void WindowPolicy::RequestCapture(uint32_t steps, uint64_t not_before_ns) {
  demand_steps_ = std::max<uint32_t>(steps, 1);
  demand_not_before_ = not_before_ns;
}

void WindowPolicy::RequestCaptureAt(uint64_t first_step, uint32_t steps) {
  demand_first_ = first_step;
  demand_at_steps_ = std::max<uint32_t>(steps, 1);
}

StepDecision WindowPolicy::OnStep(uint64_t step, uint64_t t_ns) {
  EndStep(t_ns);
  StepDecision d;
  uint8_t flags = 0;
  // A window in progress (or its tail) makes neither a job-wide request whose
  // steps include this one nor a periodic window starting here wait: both are
  // the same steps on every rank. The window is carried on as one, and its
  // measured cost holds every step from its first to the end of the others,
  // and the two tail steps after.
  const uint64_t demand_end = demand_first_ != kNoStep ? demand_first_ + demand_at_steps_ : 0;
  const bool demanded = demand_first_ != kNoStep && step >= demand_first_ && step < demand_end;
  const uint64_t periodic_end =
      state_ != State::kIdle && StartsWindow(step, period_) && !OverBudget() ? step + width_ : 0;
  const uint64_t carry_end = std::max(demanded ? demand_end : 0, periodic_end);
  if (state_ != State::kIdle && carry_end > step) {
    const auto wanted = static_cast<uint32_t>(carry_end - step - 1);  // after this step
    if (state_ == State::kOpen && window_left_ > 0) {
      const uint32_t left = window_left_ - 1;  // this step is in the window already
      window_left_ = std::max(left, wanted);
      window_width_ += window_left_ - left;
    } else {
      if (state_ == State::kTail) {
        // Recording stopped a step ago: CUPTI is switched off and on again (the
        // step in between counts in this window's cost).
        d.detach = true;
        d.open = true;
        window_width_ += 1;
      }
      window_left_ = wanted;
      window_width_ += wanted + 1;
    }
    state_ = State::kOpen;
    if (demanded) {
      window_on_demand_ = true;
      demand_first_ = kNoStep;
    }
    flags = kStepCaptured | (window_on_demand_ ? kStepOnDemand : 0);
    d.window_first_step = window_first_;
    d.window = windows_;
  } else if (state_ == State::kOpen) {
    if (window_left_ > 0) {
      --window_left_;
      flags = kStepCaptured | (window_on_demand_ ? kStepOnDemand : 0);
      d.window_first_step = window_first_;
      d.window = windows_;
    } else {
      // The window ended at this boundary: stop recording now, detach at the next.
      d.quiesce = true;
      state_ = State::kTail;
      tail_left_ = kTailSteps - 1;
      flags = kStepWindowTail;
      d.window_first_step = window_first_;
      d.window = windows_;
    }
  } else if (state_ == State::kTail) {
    if (tail_left_ > 0) --tail_left_;
    d.detach = tail_left_ == 0;
    flags = kStepWindowTail;
    d.window_first_step = window_first_;
    d.window = windows_;
  } else {
    uint32_t width = 0;
    bool on_demand = false;
    if (demand_first_ != kNoStep && step >= demand_first_) {
      // Job-wide: exactly the requested steps (what is left of them).
      if (demanded) {
        width = static_cast<uint32_t>(demand_end - step);
        on_demand = true;
      } else if (windows_ == 0 || demand_first_ < window_first_ ||
                 demand_end > window_first_ + window_width_) {
        ++late_requests_;  // not all held by the window that just ended
      }
      demand_first_ = kNoStep;
    } else if (demand_steps_ > 0 && t_ns >= demand_not_before_) {
      width = demand_steps_;
      on_demand = true;
      demand_steps_ = 0;
    } else if (!first_window_done_ && step == kFirstWindowStep) {
      // Short: measures the cost before the budget sets the period. Three
      // steps: the report leaves a window's edges out of per-step figures (its
      // lead-in, CUPTI attaching and work queued before it did; its last step,
      // whose gap into the next step is not traced), so a short job's one
      // window still has a step to measure whole.
      width = kFirstWindowWidth;
      first_window_done_ = true;
    }
    // A periodic window starts here (with an on-demand one, the longer of the
    // two); it opens only while the cost so far is within the budget, so the
    // amortized cost exceeds it by at most one window.
    if (StartsWindow(step, period_) && !OverBudget()) width = std::max(width, width_);
    if (width > 0) {
      d.open = true;
      state_ = State::kOpen;
      window_first_ = step;
      window_left_ = width - 1;
      window_width_ = width;
      window_on_demand_ = on_demand;
      ++windows_;
      flags = kStepCaptured | (on_demand ? kStepOnDemand : 0);
      d.window_first_step = step;
      d.window = windows_;
    }
  }
  d.flags = flags;
  d.period = s_.fixed_period != 0 || !window_fixed_.empty() ? period_ : 0;
  have_step_ = true;
  step_start_ns_ = t_ns;
  step_flags_ = flags;
  step_opens_ = d.open;
  return d;
}

WindowSummary WindowPolicy::Summary() const {
  WindowSummary s;
  s.steps = steps_ - steps_before_;
  s.captured_steps = captured_steps_ - captured_before_;
  s.windows = windows_ - windows_before_;
  s.period = period_;
  const double base = Median(base_all_);
  if (base > 0 && !captured_.empty()) s.window_step_ratio = Median(captured_) / base;
  s.duty_cycle =
      s.steps > 0 ? static_cast<double>(s.captured_steps) / static_cast<double>(s.steps) : 0;
  if (windows_ == 0) {
    s.amortized_cost = 0;
  } else if (total_ns_ > extra_ns_ && base > 0) {
    // Below zero only by noise: reported as no measurable cost.
    s.amortized_cost = std::max(0.0, extra_ns_ / (total_ns_ - extra_ns_));
  }
  return s;
}

}  // namespace aon::agent
