// The exported step and capture functions (aon/capture_api.h).
#include "aon/capture_api.h"

#include "agent.h"
#include "aon/timebase.h"

extern "C" __attribute__((visibility("default"))) void aon_step(void) {
  aon::agent::Agent& agent = aon::agent::Agent::Get();
  if (agent.recording()) agent.capture().OnBoundary(aon::StepSource::kApi);
}

extern "C" __attribute__((visibility("default"))) void aon_framework_step(void) {
  aon::agent::Agent& agent = aon::agent::Agent::Get();
  if (agent.recording()) agent.capture().OnBoundary(aon::StepSource::kPytorch);
}

extern "C" __attribute__((visibility("default"))) int aon_capture(uint32_t steps, uint32_t delay_ms) {
  aon::agent::Agent& agent = aon::agent::Agent::Get();
  if (!agent.recording()) return -1;
  agent.capture().RequestCapture(steps, aon::TimebaseNowNs() + uint64_t{delay_ms} * 1'000'000ull);
  return 0;
}
