// The exported step, capture and operator-range functions (aon/capture_api.h).
#include "aon/capture_api.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"
#include "aon/base/timebase.h"
#include "op_ranges.h"

extern "C" __attribute__((visibility("default"))) void aon_step(void) {
  const aon::agent::SourceContext& agent = aon::agent::Agent::Get().context();
  if (agent.recording()) agent.capture().OnBoundary(aon::StepSource::kApi);
}

extern "C" __attribute__((visibility("default"))) void aon_framework_step(void) {
  const aon::agent::SourceContext& agent = aon::agent::Agent::Get().context();
  if (agent.recording()) agent.capture().OnBoundary(aon::StepSource::kPytorch);
}

extern "C" __attribute__((visibility("default"))) void aon_jax_step(void) {
  const aon::agent::SourceContext& agent = aon::agent::Agent::Get().context();
  if (agent.recording()) agent.capture().OnBoundary(aon::StepSource::kJax);
}

extern "C" __attribute__((visibility("default"))) int aon_capture(uint32_t steps,
                                                                  uint32_t delay_ms) {
  const aon::agent::SourceContext& agent = aon::agent::Agent::Get().context();
  if (!agent.recording()) return -1;
  agent.capture().RequestCapture(steps, aon::TimebaseNowNs() + uint64_t{delay_ms} * 1'000'000ull);
  return 0;
}

// The range functions never call Agent::Get() before a range is recorded: a
// framework hook may call them in a process where nothing started the agent
// (recording is off there until a GPU source opens).
extern "C" __attribute__((visibility("default"))) uint64_t aon_op_begin(const char* name,
                                                                        uint8_t kind,
                                                                        int64_t sequence_nr,
                                                                        uint32_t framework_thread,
                                                                        uint32_t forward_thread) {
  return aon::agent::BeginOpRange(name, kind, sequence_nr, framework_thread, forward_thread);
}

extern "C" __attribute__((visibility("default"))) void aon_op_end(uint64_t id) {
  aon::agent::EndOpRange(id);
}

extern "C" __attribute__((visibility("default"))) int aon_ops_active(void) {
  return aon::agent::OpsRecording() ? 1 : 0;
}

extern "C" __attribute__((visibility("default"))) void aon_ops_listen(void (*listener)(int on)) {
  aon::agent::SetOpsListener(listener);
}

extern "C" __attribute__((visibility("default"))) void aon_graph_capture(int on) {
  if (aon::agent::ForkedChild()) return;
  const aon::agent::SourceContext& agent = aon::agent::Agent::Get().context();
  if (agent.recording()) agent.capture().GraphCapture(on != 0);
}

extern "C" __attribute__((visibility("default"))) void aon_host_range(const char* name,
                                                                      uint64_t start_ns,
                                                                      uint64_t end_ns) {
  // A forked child (a DataLoader worker) is not this rank: its records would
  // land in the parent's stream.
  if (name == nullptr || end_ns < start_ns || aon::agent::ForkedChild()) return;
  const aon::agent::SourceContext& agent = aon::agent::Agent::Get().context();
  if (!agent.recording() || !agent.enabled(aon::RecordKind::kNvtx)) return;
  aon::NvtxRecord rec{};
  rec.start_ns = start_ns;
  rec.end_ns = end_ns;
  rec.thread_id = static_cast<uint32_t>(syscall(SYS_gettid));
  rec.domain_id = agent.sink().Intern(aon::kAonNvtxDomain, aon::RecordKind::kNvtx);
  rec.name_id = agent.sink().Intern(name, aon::RecordKind::kNvtx);
  rec.type = static_cast<uint8_t>(aon::NvtxType::kPushPop);
  agent.sink().Push(rec);
}
