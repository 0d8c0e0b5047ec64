// A real second process for the agent tests: it loads libaon_agent.so through
// NVTX_INJECTION64_PATH (and, for the synthetic device, the way the CUDA driver
// would), does what `mode` says, and leaves in the way the test wants to see
// handled. Usage: agent_test_child MODE
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "aon/synthetic_device.h"

namespace {

void NestedRanges() {
  nvtxRangePushA("outer");      // depth 0
  nvtxRangePushA("inner");      // depth 1
  nvtxMarkA("mark in inner");
  nvtxRangePop();
  nvtxRangePop();
  nvtxDomainHandle_t d = nvtxDomainCreateA("my-domain");
  nvtxStringHandle_t s = nvtxDomainRegisterStringA(d, "registered name");
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = s;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = 0xff00ff00;
  a.category = 7;
  nvtxDomainRangePushEx(d, &a);
  nvtxDomainRangePop(d);
  // A start/end range that ends on another thread.
  nvtxRangeId_t id = nvtxRangeStartA("cross-thread");
  std::thread([id] { nvtxRangeEnd(id); }).join();
  nvtxRangePushW(L"wide \u00e9t\u00e9");
  nvtxRangePop();
  // A pop with nothing open must not crash and must return a negative depth.
  if (nvtxRangePop() >= 0) std::printf("unexpected depth from empty pop\n");
}

const AonSyntheticDeviceV1* FakeDriver() {
  void* lib = dlopen(std::getenv("CUDA_INJECTION64_PATH"), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return nullptr;
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
  auto get = reinterpret_cast<AonGetSyntheticDeviceFn>(dlsym(lib, "aonSyntheticDeviceV1"));
  if (!init || !get || !init()) return nullptr;
  return get();
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "nvtx") {
    NestedRanges();
    return 0;
  }
  if (mode == "exit-from-thread") {
    nvtxRangePushA("before exit");
    nvtxRangePop();
    std::thread([] { std::exit(5); }).join();
    return 0;  // not reached
  }
  if (mode == "sigterm") {
    nvtxMarkA("before sigterm");
    std::printf("ready\n");
    std::fflush(stdout);
    kill(getpid(), SIGTERM);
    for (int i = 0; i < 500; ++i) usleep(10000);  // the agent's thread writes, then re-raises
    return 3;  // reached only if SIGTERM did not end the process
  }
  if (mode == "flood") {
    // Far more marks than a 1 MiB cap holds: drops must be counted, the app unaffected.
    for (int i = 0; i < 200000; ++i) nvtxMarkA("flood");
    std::printf("flood done\n");
    return 0;
  }
  if (mode == "synthetic") {
    const AonSyntheticDeviceV1* gpu = FakeDriver();
    if (!gpu) return 10;
    for (int i = 0; i < 10; ++i) {
      gpu->launch_kernel(1, "k_a", 10000, 1, 32);
      gpu->memcpy(2, 1, 1 << 20, 1);
      gpu->memset(1, 4096, 0);
    }
    gpu->synchronize(AON_SYNTHETIC_ALL_STREAMS);
    return 0;
  }
  if (mode == "steps") {
    // STEPS steps (default 100), each marked by STEP_MARK: "nvtx" (a range
    // "step <i>"), "api" (aon_step()) or "none" (for the time source: each step
    // lasts STEP_US microseconds). Each step launches two kernels named
    // "k_step<i>", one copy and one memset, then synchronizes: a test can tell
    // which step every GPU record belongs to.
    const AonSyntheticDeviceV1* gpu = FakeDriver();
    if (!gpu) return 10;
    const int steps = std::getenv("STEPS") ? std::atoi(std::getenv("STEPS")) : 100;
    const std::string mark = std::getenv("STEP_MARK") ? std::getenv("STEP_MARK") : "nvtx";
    const int step_us = std::getenv("STEP_US") ? std::atoi(std::getenv("STEP_US")) : 0;
    using StepFn = void (*)();
    // As an application would find it (aon/capture_api.h): the agent is loaded.
    void* agent = dlopen(std::getenv("CUDA_INJECTION64_PATH"), RTLD_NOW | RTLD_NOLOAD);
    auto step_fn = agent ? reinterpret_cast<StepFn>(dlsym(agent, "aon_step")) : nullptr;
    if (mark == "api" && step_fn == nullptr) return 11;
    for (int i = 0; i < steps; ++i) {
      const std::string name = "k_step" + std::to_string(i);
      if (mark == "nvtx") nvtxRangePushA(("step " + std::to_string(i)).c_str());
      if (mark == "api") step_fn();
      gpu->launch_kernel(1, name.c_str(), 2000, 1, 32);
      gpu->launch_kernel(1, name.c_str(), 2000, 1, 32);
      gpu->memcpy(2, 1, 4096, 1);
      gpu->memset(1, 4096, 1);
      gpu->synchronize(AON_SYNTHETIC_ALL_STREAMS);
      if (step_us > 0) usleep(static_cast<useconds_t>(step_us));
      if (mark == "nvtx") nvtxRangePop();
    }
    return 0;
  }
  if (mode == "marks-forever" || mode == "marks-for-3s") {
    // Reports on stdout how many marks have returned (i.e. are in the ring),
    // so a test that kills this process knows what must be on disk.
    const bool forever = mode == "marks-forever";
    for (long i = 1; forever || i <= 3000; ++i) {
      for (int j = 0; j < 100; ++j) nvtxMarkA("tick");
      std::printf("%ld\n", i * 100);
      std::fflush(stdout);
      usleep(1000);
    }
    return 0;
  }
  if (mode == "steps-with-spike") {
    // 20 steps of ~2 ms, one of 40 ms (a spike), then 10 more of ~2 ms.
    for (int i = 0; i < 31; ++i) {
      nvtxRangePushA("train step");
      nvtxMarkA("inside");
      usleep(i == 20 ? 40000 : 2000);
      nvtxRangePop();
    }
    return 0;
  }
  std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
  return 2;
}
