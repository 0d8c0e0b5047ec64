// Where a merge process spends its time: wall and CPU seconds per phase
// (MergePhaseTimes, merge.h), measured around the phases of merge.cc and,
// inside the record phase, around reading, exchanging, sorting and writing.
// `aon-merge --timings` prints process 0's; bench/RESULTS.md uses them.
#pragma once

#include <time.h>

#include "aon/merge/merge_types.h"
#include "aon/base/thread_cpu.h"

namespace aon::merge {

// Adds the time between its construction (or Start) and Stop / its end to
// one phase. CPU time is this thread's and that of the helper threads
// (aon/base/thread_cpu.h: compressing and inflating chunks, the k-way merge): an MPI
// library's progress thread is not the merge's work.
class PhaseClock {
 public:
  PhaseClock(MergePhaseTimes* times, MergePhase phase) : times_(times), phase_(phase) { Start(); }
  ~PhaseClock() { Stop(); }
  PhaseClock(const PhaseClock&) = delete;
  PhaseClock& operator=(const PhaseClock&) = delete;

  void Start() {  // a running clock goes on
    if (running_) return;
    wall0_ = Now(CLOCK_MONOTONIC);
    cpu0_ = Cpu();
    running_ = true;
  }
  void Stop() {
    if (!running_ || times_ == nullptr) return;
    running_ = false;
    const size_t p = static_cast<size_t>(phase_);
    times_->wall_s[p] += Now(CLOCK_MONOTONIC) - wall0_;
    times_->cpu_s[p] += Cpu() - cpu0_;
  }

 private:
  static double Cpu() { return Now(CLOCK_THREAD_CPUTIME_ID) + HelperCpuSeconds(); }
  static double Now(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
  MergePhaseTimes* times_;
  MergePhase phase_;
  double wall0_ = 0, cpu0_ = 0;
  bool running_ = false;
};

}  // namespace aon::merge
