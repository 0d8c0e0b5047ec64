// The synthetic programs' part of the CUDA driver: load the agent as cuInit
// would (dlopen of CUDA_INJECTION64_PATH, then InitializeInjection) and take its
// synthetic device (rank_agent/include/aon/synthetic_device.h). The agent must
// run its synthetic source: the caller sets AON_SOURCE=synthetic first.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "aon/synthetic_device.h"

namespace aon::synthetic {

// The device, or null (with the reason on stderr, or on stdout when AON is not
// there at all: the program then runs without a trace).
inline const AonSyntheticDeviceV1* LoadFakeDriver(const char* program, bool say) {
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  if (path == nullptr || *path == '\0') {
    if (say) std::printf("%s: CUDA_INJECTION64_PATH not set: running without AON\n", program);
    return nullptr;
  }
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "%s: cannot load %s: %s\n", program, path, dlerror());
    return nullptr;
  }
  using InitFn = int (*)();
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "InitializeInjection"));
  auto get = reinterpret_cast<AonGetSyntheticDeviceFn>(dlsym(lib, "aonSyntheticDeviceV1"));
  if (init == nullptr || get == nullptr || init() == 0) {
    std::fprintf(stderr, "%s: %s is not an AON agent with a synthetic device\n", program, path);
    return nullptr;
  }
  const AonSyntheticDeviceV1* device = get();
  if (device == nullptr)
    std::fprintf(stderr,
                 "%s: the agent started no synthetic device (capture disabled? its message "
                 "above says why): running without a GPU\n",
                 program);
  return device;
}

// A function of the agent already loaded (aon/capture_api.h), or null.
template <typename Fn>
Fn AgentFunction(const char* name) {
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  void* lib = path != nullptr ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  return lib != nullptr ? reinterpret_cast<Fn>(dlsym(lib, name)) : nullptr;
}

}  // namespace aon::synthetic
