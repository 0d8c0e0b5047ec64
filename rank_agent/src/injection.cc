// CUDA injection entry point: the driver dlopens CUDA_INJECTION64_PATH during
// the first cuInit and calls InitializeInjection (it must have default
// visibility). A fake driver (examples/synthetic/) calls it the same way.
#include <atomic>

#include "agent.h"
#include "cupti_source.h"
#include "synthetic_source.h"

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  using namespace aon::agent;
  static std::atomic<bool> started{false};
  if (started.exchange(true)) return 1;
  Agent& agent = Agent::Get();
  if (!agent.recording()) return 1;
  if (agent.config().source == "synthetic") {
    StartSyntheticSource();
  } else {
    StartCuptiSource();
  }
  // Non-zero tells the driver the injection succeeded. Even when capture could
  // not start we return success: the reason is in the trace, and the driver's
  // reaction to a failed injection is not ours to choose.
  return 1;
}
