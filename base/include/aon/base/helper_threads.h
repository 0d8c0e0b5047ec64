// Threads kept for work split into shares, one piece of work at a time: the
// trace files' chunk coders run on them (TraceReader::SetDecodeThreads,
// TraceWriter's compress_threads). Starting threads for every read of a rank
// file's few chunks cost more than decoding them: 0.2-0.6 ms per three threads
// started and joined on a loaded 2-core VM, against a rank's 5 chunks per kind.
//
// Not for use across fork(): a child has none of the threads.
#pragma once

#include <functional>
#include <memory>

namespace aon {

class HelperThreads {
 public:
  // Starts `helpers` threads (fewer when the system refuses more).
  explicit HelperThreads(unsigned helpers);
  ~HelperThreads();  // joins them
  HelperThreads(const HelperThreads&) = delete;
  HelperThreads& operator=(const HelperThreads&) = delete;

  unsigned helpers() const;

  // Runs share(0) on the calling thread and share(1) .. share(n - 1) on helper
  // threads (shares past helpers() run on the calling thread after its own),
  // and returns when all are done. The helpers' CPU time goes to
  // HelperCpuSeconds (aon/base/thread_cpu.h). False when a share threw (out of
  // memory): the caller's result is then incomplete. One caller at a time.
  bool Run(unsigned n, const std::function<void(unsigned)>& share);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace aon
