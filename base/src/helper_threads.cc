#include "aon/base/helper_threads.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "aon/base/thread_cpu.h"

namespace aon {

struct HelperThreads::State {
  std::mutex m;
  std::condition_variable work;  // a new piece of work, or quit
  std::condition_variable done;  // the last helper share finished
  const std::function<void(unsigned)>* share = nullptr;
  unsigned n = 0;           // shares of the current piece of work
  uint64_t generation = 0;  // pieces of work handed out so far
  unsigned pending = 0;     // helper shares of the current piece not yet done
  bool failed = false;      // a share of the current piece threw
  bool quit = false;
  std::vector<std::thread> threads;  // helper w (1-based) is threads[w - 1]

  void Serve(unsigned w) {
    uint64_t seen = 0;
    std::unique_lock lock(m);
    for (;;) {
      work.wait(lock, [&] { return quit || generation != seen; });
      if (quit) return;
      seen = generation;
      if (w >= n) continue;
      const std::function<void(unsigned)>& f = *share;
      lock.unlock();
      const uint64_t cpu0 = ThisThreadCpuNs();
      bool threw = false;
      try {
        f(w);
      } catch (...) {
        threw = true;
      }
      AddHelperCpuNs(ThisThreadCpuNs() - cpu0);
      lock.lock();
      failed = failed || threw;
      if (--pending == 0) done.notify_one();
    }
  }
};

HelperThreads::HelperThreads(unsigned helpers) : state_(std::make_unique<State>()) {
  State& s = *state_;
  for (unsigned w = 1; w <= helpers; ++w) {
    try {
      s.threads.emplace_back([&s, w] { s.Serve(w); });
    } catch (const std::system_error&) {
      break;  // the shares of the missing ones run on the caller's thread
    }
  }
}

HelperThreads::~HelperThreads() {
  {
    const std::lock_guard lock(state_->m);
    state_->quit = true;
  }
  state_->work.notify_all();
  for (std::thread& t : state_->threads) t.join();
}

unsigned HelperThreads::helpers() const { return static_cast<unsigned>(state_->threads.size()); }

bool HelperThreads::Run(unsigned n, const std::function<void(unsigned)>& share) {
  State& s = *state_;
  const unsigned on_helpers = n == 0 ? 0 : std::min(n - 1, helpers());
  if (on_helpers > 0) {
    const std::lock_guard lock(s.m);
    s.share = &share;
    s.n = on_helpers + 1;
    s.pending = on_helpers;
    s.failed = false;
    ++s.generation;
  }
  if (on_helpers > 0) s.work.notify_all();
  bool ok = true;
  for (unsigned w = 0; w < n; ++w) {
    if (w > 0 && w <= on_helpers) continue;
    try {
      share(w);
    } catch (...) {
      ok = false;
    }
  }
  if (on_helpers > 0) {
    std::unique_lock lock(s.m);
    s.done.wait(lock, [&] { return s.pending == 0; });
    ok = ok && !s.failed;
    s.share = nullptr;
  }
  return ok;
}

}  // namespace aon
