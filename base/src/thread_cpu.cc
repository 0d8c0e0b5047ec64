#include "aon/base/thread_cpu.h"

#include <time.h>

#include <atomic>

namespace aon {
namespace {
std::atomic<uint64_t> g_helper_cpu_ns{0};
}  // namespace

uint64_t ThisThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

void AddHelperCpuNs(uint64_t ns) { g_helper_cpu_ns.fetch_add(ns, std::memory_order_relaxed); }

double HelperCpuSeconds() {
  return 1e-9 * static_cast<double>(g_helper_cpu_ns.load(std::memory_order_relaxed));
}

}  // namespace aon
