#include "capture_control.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include "aon/base/timebase.h"
#include "aon/ipc/shm_ring.h"
#include "op_ranges.h"

namespace aon::agent {
namespace {

// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID: a system call, once
// per counted step boundary), and the step this thread began (by its start
// time), for the step's thread_cpu_ns.
uint64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}
struct StepBegun {
  const void* control = nullptr;  // the CaptureControl whose step it is
  uint64_t start_ns = 0;          // the step's start_ns
  uint64_t cpu_ns = 0;            // this thread's CPU time then
};
thread_local StepBegun t_step_begun;

StepSource ForcedSource(StepSourceSetting setting) {
  switch (setting) {
    case StepSourceSetting::kApi:
      return StepSource::kApi;
    case StepSourceSetting::kPytorch:
      return StepSource::kPytorch;
    case StepSourceSetting::kJax:
      return StepSource::kJax;
    case StepSourceSetting::kXla:
      return StepSource::kXla;
    case StepSourceSetting::kNvtx:
      return StepSource::kNvtx;
    case StepSourceSetting::kNccl:
      return StepSource::kNccl;
    case StepSourceSetting::kTime:
      return StepSource::kTime;
    case StepSourceSetting::kAuto:
      break;
  }
  return StepSource::kNone;
}

WindowSettings SettingsOf(const AgentConfig& c, uint64_t seed) {
  WindowSettings s;
  // 0: automatic, windows of 3 steps or more, as the budget captures most.
  s.width = c.capture_steps > 0 ? static_cast<uint32_t>(c.capture_steps) : 3;
  s.auto_width = c.capture_steps == 0;
  s.fixed_period = static_cast<uint32_t>(c.capture_period);
  s.budget = c.overhead_budget;
  s.seed = seed;
  // A fixed period below the default floor is the user's choice.
  if (s.fixed_period != 0) s.min_period = std::min<uint32_t>(s.min_period, s.fixed_period);
  return s;
}

}  // namespace

bool MatchesStepRange(std::string_view names, std::string_view range_name) {
  while (!names.empty()) {
    const size_t comma = names.find(',');
    std::string_view prefix = names.substr(0, comma);
    names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
    while (!prefix.empty() && prefix.front() == ' ') prefix.remove_prefix(1);
    while (!prefix.empty() && prefix.back() == ' ') prefix.remove_suffix(1);
    if (prefix.empty() || range_name.size() < prefix.size()) continue;
    bool same = true;
    for (size_t i = 0; i < prefix.size() && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(prefix[i])) ==
             std::tolower(static_cast<unsigned char>(range_name[i]));
    }
    if (!same) continue;
    if (range_name.size() == prefix.size()) return true;
    const char next = range_name[prefix.size()];
    if (std::isdigit(static_cast<unsigned char>(next)) ||
        std::string_view(" _-:#").find(next) != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

CaptureControl::CaptureControl(const AgentConfig& config, uint64_t seed, RecordSink& sink,
                               AgentNotes& notes, bool records)
    : config_(config),
      sink_(sink),
      notes_(notes),
      records_(records),
      // Flight mode captures as budgeted mode does (windows inside the budget
      // plus the continuous tier); only the collector differs: it keeps the
      // last seconds in memory and writes them when a trigger fires.
      budgeted_(config.mode == CaptureMode::kBudgeted || config.mode == CaptureMode::kFlight),
      tracker_(ForcedSource(config.step_source)),
      policy_(SettingsOf(config, seed)) {}

CaptureControl::~CaptureControl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    time_stop_ = true;
  }
  time_cv_.notify_all();
  if (time_thread_.joinable()) time_thread_.join();
}

bool CaptureControl::StepRangeName(std::string_view name) const {
  return MatchesStepRange(config_.step_range, name);
}

void CaptureControl::Start(ActivityCapture* capture) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    capture_ = capture;
    if (!budgeted_ && capture_ != nullptr) {
      open_ = attached_ = capture_->Open();
      failed_ = !open_;
      if (open_) Recording(true);
    }
  }
  const bool time_source = config_.step_source == StepSourceSetting::kAuto ||
                           config_.step_source == StepSourceSetting::kTime;
  if (budgeted_ && time_source && !time_thread_.joinable()) {
    time_thread_ = std::thread([this] { TimeSlots(); });
  }
}

// Boundaries every AON_TIME_SLOT seconds of CLOCK_REALTIME (NTP keeps hosts'
// realtime clocks within milliseconds; slot k is [k, k + 1) x slot): the same
// slot number on every rank. Ends once a preferred source marks steps. The
// first boundary comes a whole slot after the start at the earliest: a program
// that marks its own steps within a slot of starting (NVTX ranges, the PyTorch
// hook) gets no partial time-slot step before its first one.
void CaptureControl::TimeSlots() {
  pthread_setname_np(pthread_self(), "aon/timeslots");  // AON's own: never host-sampled
  const auto slot_ns = static_cast<uint64_t>(config_.time_slot_s * 1e9);
  const uint64_t not_before = RealtimeNowNs() + slot_ns;
  std::unique_lock<std::mutex> lock(mu_);
  while (!time_stop_) {
    const uint64_t now = std::max(RealtimeNowNs(), not_before);
    const uint64_t next = (now / slot_ns + 1) * slot_ns;
    const auto deadline = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::nanoseconds(next)));
    if (time_cv_.wait_until(lock, deadline, [this] { return time_stop_; })) break;
    const StepSource active = tracker_.active();
    if (active != StepSource::kNone && active != StepSource::kTime) break;
    lock.unlock();
    OnBoundary(StepSource::kTime, RealtimeNowNs() / slot_ns);
    lock.lock();
  }
}

void CaptureControl::AttachFollower(WindowFollower* follower) {
  std::lock_guard<std::mutex> lock(mu_);
  follower_ = follower;
  if (open_ && follower_ != nullptr) follower_->Start();
}

// Framework op ranges (op_ranges.h) and host samples (host_sampler.h) are
// recorded exactly while the capture records: switched on once the source is
// open, off before it quiesces; ops are told before the source detaches
// (their correlation pops must not outlive it).
void CaptureControl::Recording(bool on) {
  // A CUDA graph capture in progress keeps ranges on past a window's end.
  SetOpsRecording((on || graph_nodes_) && Enabled(RecordKind::kOps));
  if (follower_ == nullptr) return;
  if (on) {
    follower_->Start();
  } else {
    follower_->Stop();
  }
}

void CaptureControl::Apply(const StepDecision& d) {
  if (d.quiesce && open_) {
    Recording(false);
    capture_->Quiesce();
    open_ = false;
  }
  if (d.detach && attached_) {
    NoteCaptureDetach();
    capture_->Close();
    attached_ = false;
  }
  if (d.open && capture_ != nullptr && !failed_ && !attached_) {
    if (capture_->Open()) {
      open_ = attached_ = true;
      Recording(true);
    } else {
      failed_ = true;  // the capture said why in the notes; steps go on being recorded
    }
  }
}

void CaptureControl::OnBoundary(StepSource source, uint64_t number) {
  const uint64_t now = TimebaseNowNs();
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  const StepTracker::Boundary b = tracker_.Mark(source, number);
  if (!b.counts) return;
  if (b.switched) steps_ = 0;  // the summary counts the active source's steps
  ++steps_;
  if (b.switched) {
    notes_.Log("steps: now marked by %s",
               EnumValueName(kStepSourceValues, static_cast<int64_t>(source)));
    if (budgeted_) Apply(policy_.Restart(now));
  }
  // Time slots are marked by AON's own thread: its CPU time says nothing of the program's.
  const uint64_t cpu = source == StepSource::kTime ? 0 : ThreadCpuNs();
  if (have_step_) {
    step_.end_ns = now;
    // Measured only when this thread also began the step (0: not measured).
    if (cpu != 0 && t_step_begun.control == this && t_step_begun.start_ns == step_.start_ns)
      step_.thread_cpu_ns = std::max<uint64_t>(1, cpu - t_step_begun.cpu_ns);
    if (Enabled(RecordKind::kSteps)) sink_.Push(step_);
  }
  t_step_begun = {this, now, cpu};
  step_ = StepRecord{};
  step_.start_ns = now;
  step_.step = b.step;
  step_.source = static_cast<uint8_t>(source);
  step_.window_first_step = UINT64_MAX;
  if (budgeted_) {
    CheckCollectorRequest(source);
    const StepDecision d = policy_.OnStep(b.step, now);
    Apply(d);
    step_.flags = d.flags;
    if ((d.flags & kStepCaptured) && !open_) step_.flags &= ~kStepCaptured;  // Open failed
    step_.window_first_step = d.window_first_step;
    step_.window = d.window;
    step_.period = d.period;
  } else {
    step_.flags = open_ ? kStepCaptured : 0;
  }
  // Outside windows (and their tails), the capture may make ready what a window
  // will need: whatever that costs falls in this step, which no window counts
  // and whose outlier time the window policy leaves out of its baseline.
  if (capture_ != nullptr && !failed_ && !attached_ &&
      !(step_.flags & (kStepCaptured | kStepWindowTail)))
    capture_->Prepare();
  have_step_ = true;
}

// Graph capture outside windows. The kernel nodes of a captured graph are made
// once, at its capture, and replayed in every later step: a graph captured
// between windows (warm-up, torch.compile's CUDA graph trees, make_graphed_
// callables) would have no operator behind any replayed kernel. The cost is
// the capture's own duration (once per graph); the source stays attached
// afterwards when the graph was instantiated (cupti_source.cc says why).
void CaptureControl::GraphCapture(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || !budgeted_ || capture_ == nullptr) return;
  if (on) {
    // Counted even when nothing opens, so that its end matches; an end always
    // closes what its begin opened, whatever happened in between (a window
    // that failed to open).
    if (graph_captures_++ > 0 || failed_) return;
    if (!Enabled(RecordKind::kGraphOps) && !Enabled(RecordKind::kNccl)) return;
    graph_nodes_ = capture_->OpenGraphNodes();
    if (!graph_nodes_) {
      if (!graph_refused_said_) {
        graph_refused_said_ = true;
        notes_.Note(
            "CUDA graphs captured outside capture windows are not tied to operators: the GPU "
            "source cannot report their nodes there");
      }
      return;
    }
    notes_.Log("CUDA graph capture: framework ranges and graph nodes recorded until it ends");
    if (!open_) SetOpsRecording(Enabled(RecordKind::kOps));
    return;
  }
  if (graph_captures_ == 0 || --graph_captures_ > 0 || !graph_nodes_) return;
  graph_nodes_ = false;
  if (!open_) SetOpsRecording(false);
  capture_->CloseGraphNodes();
}

void CaptureControl::CheckCollectorRequest(StepSource active) {
  const ring::Region& region = sink_.region();
  if (!region.valid()) return;  // no collector: no job-wide requests
  ring::RingHeader* h = region.header();
  const uint64_t seq = h->capture_seq.load(std::memory_order_acquire);
  if (seq == request_seq_) return;
  request_seq_ = seq;
  const uint64_t first = h->capture_first_step.load(std::memory_order_relaxed);
  const uint32_t steps = h->capture_steps.load(std::memory_order_relaxed);
  const auto source = static_cast<StepSource>(h->capture_source.load(std::memory_order_relaxed));
  if (source != active) {
    const char* want = EnumValueName(kStepSourceValues, static_cast<int64_t>(source));
    const char* have = EnumValueName(kStepSourceValues, static_cast<int64_t>(active));
    notes_.Note(std::string("on-demand capture request ") + std::to_string(seq) + " names " +
                (want ? want : "?") + " steps, but this rank's steps are marked by " +
                (have ? have : "?") + ": not captured");
    return;
  }
  policy_.RequestCaptureAt(first, steps);
  notes_.Log("on-demand capture %llu: steps %llu..%llu", static_cast<unsigned long long>(seq),
             static_cast<unsigned long long>(first),
             static_cast<unsigned long long>(first + steps - 1));
}

void CaptureControl::RequestCapture(uint32_t steps, uint64_t not_before_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  policy_.RequestCapture(steps, not_before_ns);
  notes_.Log("capture of %u steps requested from %llu ns", steps,
             static_cast<unsigned long long>(not_before_ns));
}

void CaptureControl::Finish(RankMetadata* m) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    time_stop_ = true;
  }
  time_cv_.notify_all();
  if (time_thread_.joinable()) time_thread_.join();
  const uint64_t now = TimebaseNowNs();
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  // Ranges begun from now on would miss the file. The framework's observer is
  // left registered (begins return 0): it may be torn down already.
  SetOpsRecording(false, /*tell=*/false);
  if (follower_ != nullptr) follower_->Stop();
  // A graph capture that never ended (the program exits inside it) keeps
  // the source subscribed: detaching under a capture could fail its end.
  graph_nodes_ = false;
  if (have_step_) {
    step_.end_ns = now;
    if (Enabled(RecordKind::kSteps)) sink_.Push(step_);
  }
  const char* source = EnumValueName(kStepSourceValues, static_cast<int64_t>(tracker_.active()));
  m->step_source = source != nullptr ? source : "none";
  m->steps = static_cast<int64_t>(steps_);
  if (!records_) {
    // Capture disabled (a refused setting): no mode ran, nothing was captured
    // and nothing cost; the windows the policy counted were never opened.
    m->capture_mode.clear();
    m->amortized_cost = -1;
    have_step_ = false;
    return;
  }
  m->capture_mode = std::string(ChoiceName(config_.mode));
  // A period fixed by AON_CAPTURE_PERIOD is not held to the budget: 0 says so.
  m->overhead_budget = budgeted_ && config_.capture_period == 0 ? config_.overhead_budget : 0.0;
  if (budgeted_) {
    // A window still open at exit is closed here; its records reach the file.
    if (open_) capture_->Quiesce();
    if (attached_) {
      NoteCaptureDetach();
      capture_->Close();
    }
    open_ = attached_ = false;
    const WindowSummary s = policy_.Summary();
    m->steps = static_cast<int64_t>(steps_);
    m->captured_steps = static_cast<int64_t>(s.captured_steps) +
                        (have_step_ && (step_.flags & kStepCaptured) ? 1 : 0);
    m->windows = static_cast<int64_t>(s.windows);
    m->capture_period = s.period;
    m->window_step_ratio = s.window_step_ratio;
    m->duty_cycle =
        m->steps > 0 ? static_cast<double>(m->captured_steps) / static_cast<double>(m->steps) : 0.0;
    m->amortized_cost = s.amortized_cost;
    if (policy_.late_requests() > 0) {
      notes_.Note("on-demand capture: " + std::to_string(policy_.late_requests()) +
                  " request(s) reached this rank after their steps had passed (raise aon-ctl "
                  "capture --lead)");
    }
  } else {
    // Full capture: every step is traced; its cost is not measured in-process.
    m->steps = static_cast<int64_t>(steps_);
    m->captured_steps = open_ || attached_ ? m->steps : 0;
    m->duty_cycle = m->steps > 0 && m->captured_steps > 0 ? 1.0 : 0.0;
    m->amortized_cost = -1;
  }
  have_step_ = false;
}

}  // namespace aon::agent
