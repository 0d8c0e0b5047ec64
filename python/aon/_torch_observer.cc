// AON's PyTorch operator observer: a RecordFunction callback (the C++ API the
// PyTorch profiler itself observes operators through) that turns each operator,
// autograd node and user range into an AON op range (aon_op_begin/aon_op_end of
// the agent, rank_agent/include/aon/capture_api.h). While a range is open the
// agent ties every CUDA launch of the thread to it (CUPTI external correlation).
//
// Built against the torch found when AON was built (python/CMakeLists.txt);
// python/aon/_hook.py loads it only into a process running that same torch version,
// and hands aon_torch_switch to the agent (aon_ops_listen), which registers the
// callback exactly while it records ops (a capture window is open, or always in
// full mode): outside windows PyTorch runs with no AON callback at all.
#include <ATen/record_function.h>

#include <cstdint>
#include <memory>
#include <mutex>

namespace {

using BeginFn = uint64_t (*)(const char* name, uint8_t kind, int64_t sequence_nr,
                             uint32_t framework_thread, uint32_t forward_thread);
using EndFn = void (*)(uint64_t id);

// Kinds, as AON_OP_* in capture_api.h.
constexpr uint8_t kOperator = 0;
constexpr uint8_t kBackward = 1;
constexpr uint8_t kUser = 3;

BeginFn g_begin = nullptr;
EndFn g_end = nullptr;
std::mutex g_mutex;  // registration only; the callbacks take no lock
at::CallbackHandle g_handle = 0;

struct Range : at::ObserverContext {
  uint64_t id = 0;
};

std::unique_ptr<at::ObserverContext> OnEnter(const at::RecordFunction& fn) {
  // An async range ends on another thread; AON's ranges nest per thread.
  if (fn.isAsync()) return nullptr;
  uint8_t kind = kOperator;
  uint32_t forward_thread = 0;
  switch (fn.scope()) {
    case at::RecordScope::BACKWARD_FUNCTION:
      kind = kBackward;
      forward_thread = static_cast<uint32_t>(fn.forwardThreadId());
      break;
    case at::RecordScope::USER_SCOPE:
      kind = kUser;
      break;
    default:
      break;
  }
  const uint64_t id =
      g_begin(fn.name(), kind, fn.seqNr(),
              static_cast<uint32_t>(at::RecordFunction::currentThreadId()), forward_thread);
  if (id == 0) return nullptr;
  auto range = std::make_unique<Range>();
  range->id = id;
  return range;
}

void OnExit(const at::RecordFunction&, at::ObserverContext* context) {
  if (context != nullptr) g_end(static_cast<Range*>(context)->id);
}

}  // namespace

extern "C" {

// The torch version this library was compiled against ("2.11.0+cu130").
__attribute__((visibility("default"))) const char* aon_torch_built_for(void) {
  return AON_TORCH_VERSION;
}

// The agent's functions. Returns 0, or -1 when one is missing.
__attribute__((visibility("default"))) int aon_torch_bind(void* begin, void* end) {
  if (begin == nullptr || end == nullptr) return -1;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_begin = reinterpret_cast<BeginFn>(begin);
  g_end = reinterpret_cast<EndFn>(end);
  return 0;
}

// on = 1: observe every operator, autograd node and user range of every thread
// from now on; on = 0: remove the callback (ranges already open still end).
// Returns 1 while observing, 0 when not, -1 before aon_torch_bind.
__attribute__((visibility("default"))) int aon_torch_observe(int on) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_begin == nullptr) return -1;
  if (on != 0 && g_handle == 0) {
    g_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(&OnEnter, &OnExit)
            .needsInputs(false)
            .needsIds(true)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                     at::RecordScope::USER_SCOPE}));
  } else if (on == 0 && g_handle != 0) {
    at::removeCallback(g_handle);
    g_handle = 0;
  }
  return g_handle != 0 ? 1 : 0;
}

// The agent's switch (aon_ops_listen): called with 1 right after the rank
// starts recording ops, 0 just before it stops, on the thread that marked the
// step boundary, whatever marked it. Observing exactly while ops are recorded.
__attribute__((visibility("default"))) void aon_torch_switch(int on) { aon_torch_observe(on); }

}  // extern "C"
