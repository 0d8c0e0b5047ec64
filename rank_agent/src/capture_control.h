// Where the agent's step boundaries meet capture windows (budgeted mode,
// docs/always-on.md): every source of steps (aon_step(), NVTX step ranges, the
// NCCL collectives of the first communicator, time slots) calls OnBoundary; it
// records the step that ended (StepRecord, the continuous tier), asks the
// WindowPolicy what the step that begins is, and switches the GPU activity
// source on and off accordingly, on the thread that marked the boundary, so a
// window starts and ends exactly at step boundaries.
//
// The GPU activity source is behind ActivityCapture: CUPTI (cupti_source.cc) on
// real GPUs, the synthetic device (synthetic_source.cc) in CI. Both are real
// implementations of the same three transitions; the synthetic one is the
// labeled fake GPU of aon/synthetic_device.h.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent_notes.h"
#include "aon/config/agent_config.h"
#include "aon/format/records.h"
#include "aon/format/trace_format.h"
#include "record_sink.h"
#include "window_policy.h"

namespace aon::agent {

// What records on the host exactly while the capture records (host stack
// sampling, host_sampler.h): started when a window opens (or, in full mode,
// when the capture does), stopped before its quiesce.
class WindowFollower {
 public:
  virtual ~WindowFollower() = default;
  virtual void Start() = 0;
  virtual void Stop() = 0;
};

class ActivityCapture {
 public:
  virtual ~ActivityCapture() = default;
  // Starts recording GPU activity (CUPTI: subscribe and enable the kinds).
  // False with the reason in the agent's notes (CUPTI held by another tool ...).
  virtual bool Open() = 0;
  // Stops recording new work; what was issued still completes and is delivered.
  virtual void Quiesce() = 0;
  // Delivers everything recorded and detaches: no cost until the next Open.
  virtual void Close() = 0;
  // At step boundaries outside windows and their tails (CUPTI detached): what
  // windows will need and can be made ready outside them (the PM sampler's
  // set-up). Cheap once done.
  virtual void Prepare() {}
  // A CUDA graph is being captured outside a window (GraphCapture): the
  // source reports the graph's kernel nodes as they are created and cloned
  // (op_ranges.h ties them to the open ranges) and records no activity. False
  // when it cannot (the reason in the notes). CloseGraphNodes undoes it; a
  // window opened or closed in between keeps the node callbacks on.
  virtual bool OpenGraphNodes() { return false; }
  virtual void CloseGraphNodes() {}
};

class CaptureControl {
 public:
  // `mode`: budgeted (windows), full or flight (the capture is opened once, at
  // Start, and every step is marked captured). Steps go to `sink` (kinds on
  // only where `records`); what goes wrong, to `notes`.
  CaptureControl(const AgentConfig& config, uint64_t seed, RecordSink& sink, AgentNotes& notes,
                 bool records);
  ~CaptureControl();

  // Binds the GPU activity source (null: none, e.g. no GPU; steps are still
  // recorded). In full/flight mode this opens it.
  void Start(ActivityCapture* capture);
  // Host stack sampling follows the capture: on while it records.
  void AttachFollower(WindowFollower* follower);
  // A step boundary of `source` (any thread).
  void OnBoundary(StepSource source, uint64_t number = StepTracker::kCounted);
  // An on-demand window: `steps` steps from the first boundary at or after
  // `not_before_ns` on the host timebase.
  void RequestCapture(uint32_t steps, uint64_t not_before_ns);
  // The last step ends; an open window is closed; the summary goes into `m`.
  void Finish(RankMetadata* m);
  // The framework begins (on) or ends (off) capturing a CUDA graph
  // (aon_graph_capture). In budgeted and flight modes, from the first begin to
  // the matching end, framework ranges are recorded and the source reports
  // the graph's kernel nodes, so that replays in later windows are tied to the
  // operators and modules of the capture. Nests (depth counted); no-op in full
  // mode, where both are on all along.
  void GraphCapture(bool on);

  // Capture windows (budgeted and flight modes) rather than CUPTI all along (full).
  bool windowed() const { return budgeted_; }
  bool StepRangeName(std::string_view name) const;

 private:
  void Apply(const StepDecision& d);
  // Framework op ranges and host samples, recorded exactly while the capture records.
  void Recording(bool on);
  bool Enabled(RecordKind kind) const { return records_ && config_.enabled(kind); }
  void TimeSlots();
  // A job-wide on-demand request the collector put in the ring's header.
  void CheckCollectorRequest(StepSource active);

  const AgentConfig config_;
  RecordSink& sink_;
  AgentNotes& notes_;
  const bool records_;
  const bool budgeted_;
  std::mutex mu_;  // guards everything below; held while CUPTI switches
  ActivityCapture* capture_ = nullptr;
  WindowFollower* follower_ = nullptr;
  bool open_ = false;      // the capture records (Open succeeded, not quiesced)
  bool attached_ = false;  // Open succeeded and Close is still due
  bool failed_ = false;    // Open failed once: not tried again
  bool finished_ = false;
  uint32_t graph_captures_ = 0;  // GraphCapture depth
  bool graph_nodes_ = false;     // OpenGraphNodes succeeded, CloseGraphNodes is due
  bool graph_refused_said_ = false;
  StepTracker tracker_;
  WindowPolicy policy_;
  // The step in progress.
  bool have_step_ = false;
  StepRecord step_{};
  uint64_t steps_ = 0;        // boundaries of the active source (steps begun)
  uint64_t request_seq_ = 0;  // the last collector request taken
  uint64_t late_noted_ = 0;
  // The time-slot source.
  std::thread time_thread_;
  std::condition_variable time_cv_;
  bool time_stop_ = false;
};

// The matcher behind AON_STEP_RANGE: comma-separated prefixes, case-insensitive,
// each followed by the end of the name, a digit or one of " _-:#".
bool MatchesStepRange(std::string_view names, std::string_view range_name);

}  // namespace aon::agent
