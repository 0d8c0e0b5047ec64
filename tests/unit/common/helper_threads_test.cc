// HelperThreads (aon/base/helper_threads.h): every share of every piece of work runs
// exactly once, on its own thread when there is a helper for it; a share that
// throws fails only its piece; helpers' CPU time is counted; the pool is
// joined when destroyed with work done and with none.
#include "aon/base/helper_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <new>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "aon/base/thread_cpu.h"

namespace aon {
namespace {

TEST(HelperThreads, EveryShareRunsOnceEachTimeOnItsOwnThread) {
  HelperThreads pool(3);
  ASSERT_EQ(pool.helpers(), 3u);
  const std::thread::id caller = std::this_thread::get_id();
  for (int round = 0; round < 2000; ++round) {
    const unsigned n = static_cast<unsigned>(round % 7);  // 0 .. 6: fewer and more than 4
    std::vector<std::atomic<int>> runs(n);
    std::mutex m;
    std::vector<std::thread::id> on(n);
    ASSERT_TRUE(pool.Run(n, [&](unsigned w) {
      runs[w].fetch_add(1);
      const std::lock_guard lock(m);
      on[w] = std::this_thread::get_id();
    }));
    for (unsigned w = 0; w < n; ++w) {
      ASSERT_EQ(runs[w].load(), 1) << "round " << round << " share " << w;
      // Share 0 and the shares past the helpers run on the caller; 1 .. 3 on helpers.
      if (w == 0 || w > 3) {
        ASSERT_EQ(on[w], caller) << w;
      } else {
        ASSERT_NE(on[w], caller) << w;
      }
    }
    if (n == 4) {
      ASSERT_EQ(std::set<std::thread::id>(on.begin(), on.end()).size(), 4u);
    }
  }
}

TEST(HelperThreads, AThrowingShareFailsItsPieceOnly) {
  HelperThreads pool(2);
  for (unsigned thrower = 0; thrower < 3; ++thrower) {
    std::atomic<int> ran{0};
    EXPECT_FALSE(pool.Run(3, [&](unsigned w) {
      ran.fetch_add(1);
      if (w == thrower) throw std::bad_alloc();
    })) << thrower;
    EXPECT_EQ(ran.load(), 3) << "the other shares still ran";
    std::atomic<int> again{0};
    EXPECT_TRUE(pool.Run(3, [&](unsigned) { again.fetch_add(1); }));
    EXPECT_EQ(again.load(), 3);
  }
}

TEST(HelperThreads, HelpersCpuTimeIsCounted) {
  HelperThreads pool(1);
  const double before = HelperCpuSeconds();
  // Share 1 (the helper's) spins for 50 ms of its own CPU time.
  ASSERT_TRUE(pool.Run(2, [](unsigned w) {
    if (w != 1) return;
    const uint64_t start = ThisThreadCpuNs();
    while (ThisThreadCpuNs() - start < 50'000'000) {
    }
  }));
  EXPECT_GE(HelperCpuSeconds() - before, 0.05);
}

TEST(HelperThreads, NoHelpersRunsEverythingOnTheCaller) {
  HelperThreads pool(0);
  EXPECT_EQ(pool.helpers(), 0u);
  std::vector<int> order;
  EXPECT_TRUE(pool.Run(3, [&](unsigned w) { order.push_back(static_cast<int>(w)); }));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

TEST(HelperThreads, DestroyedIdleOrAfterWork) {
  { HelperThreads idle(4); }
  {
    HelperThreads used(4);
    std::atomic<int> ran{0};
    EXPECT_TRUE(used.Run(5, [&](unsigned) { ran.fetch_add(1); }));
    EXPECT_EQ(ran.load(), 5);
  }
}

}  // namespace
}  // namespace aon
