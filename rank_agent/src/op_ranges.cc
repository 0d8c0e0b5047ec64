#include "op_ranges.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "agent_notes.h"
#include "aon/base/timebase.h"
#include "aon/format/records.h"
#include "record_sink.h"

namespace aon::agent {
namespace {

// Bound when the agent is made, before any range can be recorded.
std::atomic<RecordSink*> g_sink{nullptr};
std::atomic<AgentNotes*> g_notes{nullptr};
RecordSink& Sink() { return *g_sink.load(std::memory_order_acquire); }
// Written by CaptureControl under its lock; read by every range.
std::atomic<bool> g_recording{false};
// Bumped before every detach of the GPU source: a push is popped only in its epoch.
std::atomic<uint64_t> g_epoch{1};
std::atomic<const OpCorrelation*> g_correlation{nullptr};

// Ids are unique in the process. A thread takes them in blocks, so threads do
// not bounce one counter's cache line on every range.
constexpr uint64_t kIdBlock = 1024;
std::atomic<uint64_t> g_next_block{1};

// A child forked from a recording process (PyTorch's DataLoader workers run
// aten operators too) is not this rank: it records no range, ends none it
// inherited (their records would land in the parent's ring), and never calls
// the parent's CUPTI.
std::atomic<bool> g_forked_child{false};

void OnForkChild() {
  g_forked_child.store(true, std::memory_order_relaxed);
  g_recording.store(false, std::memory_order_relaxed);
  g_correlation.store(nullptr, std::memory_order_relaxed);
}

// Registered when the library is loaded, before any range can exist.
const int g_atfork = pthread_atfork(nullptr, nullptr, OnForkChild);

// What could not be recorded (NoteOpRangeLosses).
std::atomic<uint64_t> g_unmatched_ends{0};      // no such range open on the ending thread
std::atomic<uint64_t> g_ended_by_enclosing{0};  // their own end never came
std::atomic<uint64_t> g_abandoned{0};           // still open when their thread ended

struct OpenRange {
  uint64_t id;
  uint64_t parent_id;
  uint64_t start_ns;
  uint64_t push_epoch;  // the epoch of its correlation push; 0: not pushed
  int64_t sequence_nr;
  uint32_t name_id;
  uint32_t framework_thread;
  uint32_t forward_thread;
  uint8_t kind;
};

// Names seen by this thread, so a repeated name takes no lock (the sink's
// string table is shared and locked). Bounded: cleared when full.
struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
constexpr size_t kThreadNameCache = 4096;

// Set when this thread's ThreadRanges is destroyed (thread exit; for the main
// thread, exit() runs thread-local destructors before atexit handlers, where
// the agent finishes). Trivially destructible, so it is still readable then:
// a range begun or ended later (another atexit handler, a static destructor)
// is ignored instead of touching a destroyed object.
thread_local bool t_gone = false;

struct ThreadRanges {
  std::vector<OpenRange> open;  // the recorded ranges open on this thread, innermost last
  uint64_t next_id = 0, id_end = 0;
  uint32_t tid = static_cast<uint32_t>(syscall(SYS_gettid));
  // This thread's correlation pushes against the GPU source's stack: the epoch
  // it last reconciled in, and pushes of ranges that ended after their
  // attach's detach (not popped then: the source was gone).
  uint64_t epoch_seen = 0;
  uint64_t owed_pops = 0;
  std::unordered_map<std::string, uint32_t, NameHash, std::equal_to<>> names;

  ThreadRanges() { open.reserve(32); }
  ~ThreadRanges() {
    if (!open.empty()) g_abandoned.fetch_add(open.size(), std::memory_order_relaxed);
    t_gone = true;
  }
  ThreadRanges(const ThreadRanges&) = delete;
  ThreadRanges& operator=(const ThreadRanges&) = delete;

  uint64_t NextId() {
    if (next_id == id_end) {
      next_id = g_next_block.fetch_add(kIdBlock, std::memory_order_relaxed);
      id_end = next_id + kIdBlock;
    }
    return next_id++;
  }

  uint32_t Intern(const char* s) {
    if (s == nullptr || *s == '\0') return 0;
    const std::string_view name(s);
    if (auto it = names.find(name); it != names.end()) return it->second;
    const uint32_t id = Sink().Intern(name, RecordKind::kOps);
    if (names.size() >= kThreadNameCache) names.clear();
    names.emplace(std::string(name), id);
    return id;
  }

  // First push of this thread in a new attach: whatever it pushed before
  // belongs to an earlier one. Pops as many (a stack the source kept across
  // its detach) until the source says its stack is empty (one it cleared),
  // then pushes the ranges still open again, outermost first, so the source's
  // stack is this thread's stack of open ranges whatever the source did.
  void Reconcile(const OpCorrelation& c, uint64_t epoch) {
    uint64_t stale = owed_pops;
    for (const OpenRange& r : open) {
      if (r.push_epoch != 0) ++stale;
    }
    while (stale > 0 && c.pop()) --stale;
    owed_pops = 0;
    epoch_seen = epoch;
    for (OpenRange& r : open) r.push_epoch = c.push(r.id) ? epoch : 0;
  }
};

ThreadRanges& Ranges() {
  thread_local ThreadRanges ranges;
  return ranges;
}

void Emit(const ThreadRanges& t, const OpenRange& r, uint64_t end_ns) {
  OpRecord rec{};
  rec.start_ns = r.start_ns;
  rec.end_ns = end_ns;
  rec.op_id = r.id;
  rec.parent_id = r.parent_id;
  rec.sequence_nr = r.sequence_nr;
  rec.name_id = r.name_id;
  rec.thread_id = t.tid;
  rec.framework_thread = r.framework_thread;
  rec.forward_thread = r.forward_thread;
  rec.kind = r.kind;
  Sink().Push(rec);
}

}  // namespace

void SetOpCorrelation(const OpCorrelation* correlation) {
  g_correlation.store(correlation, std::memory_order_release);
}

bool OpsRecording() { return g_recording.load(std::memory_order_acquire); }
bool ForkedChild() { return g_forked_child.load(std::memory_order_relaxed); }

// The framework's observer switch (aon_ops_listen). The mutex orders its calls
// with the changes: a registration between two transitions gets the state
// that holds until the next one is told.
std::mutex g_listener_mu;
void (*g_listener)(int) = nullptr;

void SetOpsRecording(bool on, bool tell) {
  if (g_forked_child.load(std::memory_order_relaxed)) return;  // a forked child's capture
  std::lock_guard<std::mutex> lock(g_listener_mu);
  const bool was = g_recording.exchange(on, std::memory_order_acq_rel);
  if (!tell || was == on || g_listener == nullptr) return;
  g_listener(on ? 1 : 0);
}

void SetOpsListener(void (*listener)(int on)) {
  if (g_forked_child.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g_listener_mu);
  g_listener = listener;
  if (listener != nullptr) listener(g_recording.load(std::memory_order_acquire) ? 1 : 0);
}

void NoteCaptureDetach() { g_epoch.fetch_add(1, std::memory_order_acq_rel); }

uint64_t BeginOpRange(const char* name, uint8_t kind, int64_t sequence_nr,
                      uint32_t framework_thread, uint32_t forward_thread) {
  if (!g_recording.load(std::memory_order_acquire) || t_gone) return 0;
  ThreadRanges& t = Ranges();
  OpenRange r{};
  r.start_ns = TimebaseNowNs();
  r.id = t.NextId();
  r.parent_id = t.open.empty() ? 0 : t.open.back().id;
  r.sequence_nr = sequence_nr;
  r.name_id = t.Intern(name);
  r.framework_thread = framework_thread;
  r.forward_thread = forward_thread;
  r.kind = kind;
  if (const OpCorrelation* c = g_correlation.load(std::memory_order_acquire)) {
    const uint64_t epoch = g_epoch.load(std::memory_order_acquire);
    if (t.epoch_seen != epoch) t.Reconcile(*c, epoch);
    if (c->push(r.id)) r.push_epoch = epoch;
  }
  t.open.push_back(r);
  return r.id;
}

uint64_t InnermostOpRange() {
  if (t_gone || g_forked_child.load(std::memory_order_relaxed)) return 0;
  const ThreadRanges& t = Ranges();
  return t.open.empty() ? 0 : t.open.back().id;
}

void EndOpRange(uint64_t id) {
  if (id == 0 || t_gone || g_forked_child.load(std::memory_order_relaxed)) return;
  ThreadRanges& t = Ranges();
  size_t depth = t.open.size();
  while (depth > 0 && t.open[depth - 1].id != id) --depth;
  if (depth == 0) {
    g_unmatched_ends.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const uint64_t end_ns = TimebaseNowNs();
  const OpCorrelation* c = g_correlation.load(std::memory_order_acquire);
  const uint64_t epoch = g_epoch.load(std::memory_order_acquire);
  // `id` and every range above it (those end with it), innermost first: the
  // source's stack is popped in the order it was pushed.
  while (t.open.size() >= depth) {
    const OpenRange r = t.open.back();
    t.open.pop_back();
    if (r.push_epoch != 0 && c != nullptr) {
      if (r.push_epoch == epoch) {
        c->pop();
      } else {
        ++t.owed_pops;  // detached since: popped at this thread's next attach
      }
    }
    if (r.id != id) g_ended_by_enclosing.fetch_add(1, std::memory_order_relaxed);
    Emit(t, r, end_ns);
  }
}

namespace {

// Graph nodes tied to a range (created in it, or cloned from one that was):
// node id -> op id. Nodes are made at capture and instantiation, not per
// replay: a lock is fine. Leaked, so callbacks at exit find it alive.
std::mutex g_graph_mu;
std::unordered_map<uint64_t, uint64_t>& GraphNodeOps() {
  static auto* nodes = new std::unordered_map<uint64_t, uint64_t>();
  return *nodes;
}
std::atomic<uint64_t> g_graph_nodes_over{0};  // past kMaxGraphNodes: not tied

void PushGraphOp(uint64_t node_id, uint64_t op_id, uint64_t original_node_id) {
  GraphOpRecord r{};
  r.node_id = node_id;
  r.op_id = op_id;
  r.original_node_id = original_node_id;
  Sink().Push(r);
}

// Inserts node -> op unless full; false when not remembered. Under g_graph_mu.
bool RememberGraphNodeLocked(uint64_t node_id, uint64_t op_id) {
  auto& nodes = GraphNodeOps();
  if (nodes.size() >= kMaxGraphNodes && !nodes.count(node_id)) {
    g_graph_nodes_over.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  nodes[node_id] = op_id;
  return true;
}

}  // namespace

void NoteGraphNodeCreated(uint64_t node_id) {
  if (node_id == 0 || t_gone || g_sink.load(std::memory_order_acquire) == nullptr ||
      g_forked_child.load(std::memory_order_relaxed)) {
    return;
  }
  const ThreadRanges& t = Ranges();
  if (t.open.empty()) return;
  const uint64_t op_id = t.open.back().id;
  bool remembered;
  {
    std::lock_guard<std::mutex> lock(g_graph_mu);
    remembered = RememberGraphNodeLocked(node_id, op_id);
  }
  if (remembered) PushGraphOp(node_id, op_id, 0);
}

void NoteGraphNodeCloned(uint64_t original_node_id, uint64_t clone_node_id) {
  if (original_node_id == 0 || clone_node_id == 0 || original_node_id == clone_node_id ||
      g_sink.load(std::memory_order_acquire) == nullptr) {
    return;
  }
  uint64_t op_id = 0;
  {
    std::lock_guard<std::mutex> lock(g_graph_mu);
    auto it = GraphNodeOps().find(original_node_id);
    if (it == GraphNodeOps().end()) return;  // not made inside a range
    op_id = it->second;
    if (!RememberGraphNodeLocked(clone_node_id, op_id)) return;
  }
  PushGraphOp(clone_node_id, op_id, original_node_id);
}

namespace {

// At the agent's Finish: what could not be recorded, said once in the notes.
void NoteOpRangeLosses() {
  AgentNotes& agent = *g_notes.load(std::memory_order_acquire);
  if (const uint64_t n = g_graph_nodes_over.load(std::memory_order_relaxed); n > 0) {
    agent.Note("ops: " + std::to_string(n) + " CUDA-graph kernel node(s) past the " +
               std::to_string(kMaxGraphNodes) +
               " remembered: their replays are tied to the graph launch's op, not their own");
  }
  if (const uint64_t n = g_abandoned.load(std::memory_order_relaxed); n > 0) {
    agent.Note("ops: " + std::to_string(n) +
               " framework range(s) were still open when their thread ended: not recorded");
  }
  if (const uint64_t n = g_ended_by_enclosing.load(std::memory_order_relaxed); n > 0) {
    agent.Note("ops: " + std::to_string(n) +
               " framework range(s) never ended on their own: ended with the range enclosing "
               "them");
  }
  if (const uint64_t n = g_unmatched_ends.load(std::memory_order_relaxed); n > 0) {
    agent.Note("ops: " + std::to_string(n) +
               " aon_op_end call(s) named no range open on their thread (ended twice, or on "
               "another thread): ignored");
  }
}

}  // namespace

void BindOpRanges(RecordSink& sink, AgentNotes& notes) {
  g_notes.store(&notes, std::memory_order_release);
  g_sink.store(&sink, std::memory_order_release);
  notes.AddFinishHook(NoteOpRangeLosses);
}

}  // namespace aon::agent
