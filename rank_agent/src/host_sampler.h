// Host stack sampling (docs/host-sampling.md): while a capture window is open
// (from start to end in --mode full), every thread of the application is
// interrupted on its own CPU time, AON_HOST_SAMPLE_HZ times per CPU-second,
// and its stack is recorded: the Python frames (python_frames.h) and the
// native frame it was interrupted in.
//
// Mechanism, chosen by measurement (RESULTS.md): a perf_event task clock per
// thread, sampling where that thread runs its own code, delivers a real-time signal
// to that thread on every period; the handler reads the thread's own frames
// into a ring of its own. Task clocks are high-resolution timers that run only
// while the thread is on a CPU: a thread blocked in a CUDA or NCCL call is
// never woken (no EINTR for code that does not expect it), and the asked rate
// holds. Where perf events are not allowed (perf_event_paranoid 3, a seccomp
// filter), a POSIX timer on the thread's CPU clock does the same at the
// kernel tick's rate at most; where neither is, nothing is sampled and the
// notes say why.
//
// The handler: no locks, no allocation, no Python API, errno kept; a sample
// that finds its ring full is dropped and counted. The handler is installed
// once and never removed (a signal still queued when sampling stops finds
// it, and a disarmed ring). The events of all threads are made by the
// sampler's own thread ("aon/sampler"), outside windows, disabled; a window
// only enables them (one system call per thread), and its end disables them
// before the step that follows begins. That thread drains the rings every
// 20 ms and turns the addresses into frames and records.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "python_frames.h"
#include "source_context.h"

namespace aon::agent {

class HostSampler final : public WindowFollower {
 public:
  // Starts nothing yet: the first Start() does. Null where sampling is off
  // (the kind is not recorded, the rate is 0); otherwise made even where the
  // node forbids sampling, so that the notes say why at the first window.
  static std::unique_ptr<HostSampler> Make(const SourceContext& context);
  ~HostSampler() override;

  // A window opens (or --mode full starts): the threads are sampled from now on.
  void Start() override;
  // The window's last step ended: no sample is taken after this returns.
  void Stop() override;
  // The rank file is about to be written: sampling ends for good and every
  // sample taken is recorded; what was lost is said in the notes.
  void Finish();

 private:
  explicit HostSampler(const SourceContext& context);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aon::agent
