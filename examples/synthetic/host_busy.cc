// aon-host-busy: a native program with a known hot function, for the CI test
// of host stack sampling (tests/python/test_host_samples.py;
// docs/host-sampling.md). Every step it spins in aon_planted_native_busy for
// --busy-ms of its thread's CPU time, while a second thread, made and ended
// each step, spins in aon_planted_helper_busy; then it launches a kernel on
// the SYNTHETIC device and marks the step. Every 10 steps a helper thread is
// made that spins in aon_planted_helper_busy for 10 steps' worth of CPU time
// and ends. It prints, one per line,
// "busy START_NS END_NS" (CLOCK_MONOTONIC, AON's timebase) of each planted
// call of the main thread, so that the test knows where every sample of the
// main thread should have landed.
//
//   aon-run --source synthetic aon-host-busy [--steps N] [--busy-ms X]
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "fake_driver.h"

namespace {

uint64_t Now(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

// CPU work until the thread has spent `cpu_ns`, inlined into each planted
// function so that a sample inside it lands in that function's own code.
__attribute__((always_inline)) inline uint64_t Spin(uint64_t cpu_ns, uint64_t seed) {
  const uint64_t until = Now(CLOCK_THREAD_CPUTIME_ID) + cpu_ns;
  volatile uint64_t x = seed;
  while (Now(CLOCK_THREAD_CPUTIME_ID) < until) {
    for (int i = 0; i < 20000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  }
  return x;
}

// Exported (the executable is linked with its symbols dynamic) so that the
// sample's native frame is named by dladdr, as a shared library's would be.
extern "C" __attribute__((noinline, visibility("default"))) uint64_t aon_planted_native_busy(
    uint64_t cpu_ns) {
  return Spin(cpu_ns, 1);
}

extern "C" __attribute__((noinline, visibility("default"))) uint64_t aon_planted_helper_busy(
    uint64_t cpu_ns) {
  return Spin(cpu_ns, 3);
}

int main(int argc, char** argv) {
  int steps = 100;
  double busy_ms = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--steps") {
      steps = std::atoi(argv[i + 1]);
    } else if (a == "--busy-ms") {
      busy_ms = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: aon-host-busy [--steps N] [--busy-ms X]\n");
      return 2;
    }
  }
  const AonSyntheticDeviceV1* gpu = aon::synthetic::LoadFakeDriver("aon-host-busy", true);
  using StepFn = void (*)();
  auto step = aon::synthetic::AgentFunction<StepFn>("aon_step");
  const auto busy_ns = static_cast<uint64_t>(busy_ms * 1e6);
  std::vector<std::pair<uint64_t, uint64_t>> planted;
  std::thread helper;
  for (int s = 0; s < steps; ++s) {
    if (s % 10 == 0) {
      if (helper.joinable()) helper.join();
      helper = std::thread([busy_ns] { aon_planted_helper_busy(10 * busy_ns); });
    }
    const uint64_t start = Now(CLOCK_MONOTONIC);
    aon_planted_native_busy(busy_ns);
    planted.emplace_back(start, Now(CLOCK_MONOTONIC));
    if (gpu != nullptr) gpu->launch_kernel(0, "after_busy", 200000, 1, 1);
    if (step != nullptr) step();
  }
  if (helper.joinable()) helper.join();
  for (const auto& [a, b] : planted)
    std::printf("busy %llu %llu\n", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return 0;
}
