// Simulated GPU behind aon/synthetic_device.h. Timing model, per stream: an
// operation starts when both the host has issued it (+ a launch latency) and
// the stream is idle, and lasts its duration (copies: bytes at a fixed PCIe-like
// bandwidth, a quarter of it from or to pageable host memory, which the driver
// stages through a pinned buffer: a real H200 moved 256 MB in 41 ms pageable,
// 4.9 ms pinned). Synchronous calls sleep until the simulated work is done, so host
// and "GPU" records interleave as they would on a real device.
#include "synthetic_source.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "aon/base/timebase.h"
#include "aon/synthetic_device.h"
#include "correlation_ids.h"
#include "counter_sampler.h"
#include "op_ranges.h"
#include "source_context.h"

namespace aon::agent {
namespace {

// The model (aon/synthetic_device.h says it to the programs that use it).
constexpr uint64_t kLaunchLatencyNs = AON_SYNTHETIC_LAUNCH_LATENCY_NS;
constexpr double kCopyBytesPerNs = AON_SYNTHETIC_COPY_BYTES_PER_NS_PINNED;  // ~25 GB/s
constexpr double kPageableCopyBytesPerNs = AON_SYNTHETIC_COPY_BYTES_PER_NS_PAGEABLE;
constexpr uint64_t kCopyFixedNs = AON_SYNTHETIC_COPY_FIXED_NS;
constexpr uint32_t kDeviceId = 0;
constexpr uint32_t kContextId = 1;

// Runtime callback ids as CUPTI numbers them, so records look like real ones.
constexpr uint32_t kCbidMemcpy = 31, kCbidMemcpyAsync = 41, kCbidMemset = 46, kCbidMemsetAsync = 51,
                   kCbidDeviceSynchronize = 165, kCbidStreamSynchronize = 131,
                   kCbidLaunchKernel = 211, kCbidGraphInstantiate = 310, kCbidGraphLaunch = 311,
                   kCbidStreamBeginCapture = 315, kCbidStreamEndCapture = 317;

// Bound by StartSyntheticSource, before the device is enabled.
BoundContext g_agent;
std::atomic<bool> g_enabled{false};
// Activity is recorded (as CUPTI would record it): all the time in full mode,
// in capture windows in budgeted mode. The device runs either way.
std::atomic<bool> g_recording{false};
// A graph capture outside windows (OpenGraphNodes): node callbacks only.
std::atomic<bool> g_graph_nodes{false};

bool Recording(RecordKind kind) {
  return g_recording.load(std::memory_order_acquire) && g_agent->enabled(kind);
}

// The device's own correlation numbering restarts at 1 on every attach, as
// CUPTI's does after a detach; the records carry g_correlation.Map of it.
std::atomic<uint32_t> g_next_correlation{1};
CorrelationIds g_correlation;

// The device's external correlation stack of kind CUSTOM0 (framework op
// ranges, op_ranges.h), per thread, as CUPTI keeps it: a push while activity is
// recorded with external correlation on, and before each API record the
// innermost id becomes an ExternalCorrelationRecord. Like a CUPTI that keeps
// its stacks across a detach, nothing here clears them at Close: op_ranges.cc
// must pop what it owes itself. Fixed depth (trivially destructible: usable
// during thread exit); a push beyond it fails, as a refused CUPTI push would.
constexpr size_t kExternalDepth = 64;
thread_local uint64_t t_external[kExternalDepth];
thread_local size_t t_external_depth = 0;

bool PushOpCorrelation(uint64_t op_id) {
  if (!Recording(RecordKind::kExternalCorrelation) || t_external_depth == kExternalDepth) {
    return false;
  }
  t_external[t_external_depth++] = op_id;
  return true;
}

bool PopOpCorrelation() {
  if (t_external_depth == 0) return false;  // CUPTI_ERROR_QUEUE_EMPTY
  --t_external_depth;
  return true;
}

constexpr OpCorrelation kSyntheticOpCorrelation = {PushOpCorrelation, PopOpCorrelation};

// The counters' view of this thread's next kernels (set_kernel_profile).
struct KernelProfile {
  double sm = 90, dram = 10, tensor = 0;
};
thread_local KernelProfile t_profile;

// The synthetic GPU's sampled counters in capture windows (counter_sampler.h):
// the kernels the device runs (also those queued before a window opens: the
// last second's are kept outside windows), and at a window's end one sample
// per interval of the window, computed from the planted profiles of the
// kernels that overlap it (docs/counters.md, "Without a GPU"):
//   gpu_active = the union of the kernels' time / interval,
//   sm_active, tensor, dram = sum of overlap x the kernel's figure / interval,
//   sm_issue_active = sum of overlap x (sm - tensor) / interval (the tensor
//   pipe's work is issued as few wide instructions), each at most 100.
// AON_FAKE_PM_SAMPLING=privileges|busy|unsupported|fell-behind plays the
// refusals CUPTI gives for those cases, with the same notes.
class SyntheticSampler final : public CounterSampler {
 public:
  SyntheticSampler(GpuUuid uuid, int64_t interval_us)
      : writer_(g_agent->sink(), uuid, kDeviceId, CounterSource::kSyntheticPmSampling),
        interval_ns_(static_cast<uint64_t>(interval_us) * 1000) {
    const char* fake = std::getenv("AON_FAKE_PM_SAMPLING");
    const std::string f = fake != nullptr ? fake : "";
    if (f == "privileges") refusal_ = SamplerRefusal::kPrivileges;
    if (f == "busy") refusal_ = SamplerRefusal::kBusy;
    if (f == "unsupported") refusal_ = SamplerRefusal::kUnsupported;
    fall_behind_ = f == "fell-behind";
  }

  void Begin() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (refusal_) {
      if (!refused_said_)
        g_agent->notes().Note(SamplerRefusalNote(*refusal_, "AON_FAKE_PM_SAMPLING"));
      refused_said_ = true;
      return;
    }
    begin_ns_ = TimebaseNowNs();
    sampling_ = true;
  }

  void End() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!sampling_) return;
    sampling_ = false;
    uint64_t end = TimebaseNowNs();
    if (fall_behind_) {
      end = begin_ns_ + (end - begin_ns_) / 2;  // the rest of the window is lost
      if (!fell_behind_said_)
        g_agent->notes().Note(
            SamplerRefusalNote(SamplerRefusal::kFellBehind, "AON_FAKE_PM_SAMPLING"));
      fell_behind_said_ = true;
    }
    ++windows_;
    std::sort(kernels_.begin(), kernels_.end());
    size_t first = 0;  // kernels before it ended before the sample being made
    for (uint64_t t = begin_ns_; t + interval_ns_ <= end; t += interval_ns_) {
      while (first < kernels_.size() && kernels_[first].end <= t) ++first;
      Emit(t, t + interval_ns_, first);
    }
  }

  // A kernel the device runs over [start, end) (any thread).
  void Kernel(uint64_t start, uint64_t end, const KernelProfile& p) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!sampling_ && kernels_.size() >= prune_at_) {
      // Outside windows only what a window opening now could overlap is kept
      // (amortized: pruned again once the list has doubled).
      const uint64_t now = TimebaseNowNs();
      const uint64_t horizon = now - std::min<uint64_t>(now, kKeepNs);
      std::erase_if(kernels_, [&](const Run& k) { return k.end < horizon; });
      prune_at_ = std::max(kKeepOutside, 2 * kernels_.size());
    }
    if (kernels_.size() >= kMaxKernels) {
      if (!dropped_said_)
        g_agent->notes().Note("counters: the synthetic sampler kept " +
                              std::to_string(kMaxKernels) +
                              " kernels of this window; later ones are not in its samples");
      dropped_said_ = true;
      return;
    }
    kernels_.push_back({start, end, p.sm, p.dram, p.tensor});
  }

  void Summarize() {
    std::lock_guard<std::mutex> lock(mu_);
    if (writer_.samples() == 0) return;
    g_agent->notes().Note("counters: " + std::to_string(writer_.samples()) +
                          " SYNTHETIC PM samples (" + std::to_string(writer_.rows()) +
                          " rows) in " + std::to_string(windows_) + " capture window(s), every " +
                          std::to_string(interval_ns_ / 1000) +
                          " us: computed from planted kernel "
                          "profiles, not measured");
  }

 private:
  struct Run {
    uint64_t start, end;
    double sm, dram, tensor;
    bool operator<(const Run& o) const { return start < o.start; }
  };
  static constexpr size_t kMaxKernels = 1u << 22;
  static constexpr size_t kKeepOutside = 4096;     // pruned past this many, outside windows
  static constexpr uint64_t kKeepNs = 1000000000;  // ... to those that ended in the last second

  // One sample over [from, to) from kernels_ (sorted by start) from `first` on.
  void Emit(uint64_t from, uint64_t to, size_t first) {
    const double len = static_cast<double>(to - from);
    double sm = 0, dram = 0, tensor = 0, issue = 0, busy = 0;
    uint64_t covered_to = from;  // kernels_ by start: the union of their time
    for (size_t i = first; i < kernels_.size(); ++i) {
      const Run& k = kernels_[i];
      if (k.start >= to) break;
      const uint64_t lo = std::max(k.start, from), hi = std::min(k.end, to);
      if (hi <= lo) continue;
      const double o = static_cast<double>(hi - lo);
      sm += o * k.sm;
      dram += o * k.dram;
      tensor += o * k.tensor;
      issue += o * std::max(0.0, k.sm - k.tensor);
      const uint64_t u = std::max(lo, covered_to);
      if (hi > u) busy += static_cast<double>(hi - u), covered_to = hi;
    }
    auto pct = [&](double v) { return std::min(100.0, v / len); };
    // The order of kSampledMetrics.
    const double values[] = {std::min(100.0, 100.0 * busy / len), pct(sm), pct(issue), pct(tensor),
                             pct(dram)};
    static_assert(std::size(values) == kSampledMetricCount);
    writer_.Write(from, to, values);
  }

  std::mutex mu_;  // guards everything below
  bool sampling_ = false;
  bool dropped_said_ = false;
  size_t prune_at_ = kKeepOutside;
  SampleWriter writer_;
  const uint64_t interval_ns_;
  std::optional<SamplerRefusal> refusal_;
  bool fall_behind_ = false, refused_said_ = false, fell_behind_said_ = false;
  uint64_t begin_ns_ = 0, windows_ = 0;
  std::vector<Run> kernels_;
};
SyntheticSampler* g_sampler = nullptr;  // null: AON_COUNTERS is not auto

// The synthetic device as the capture windows' activity source: a gate.
class SyntheticCapture final : public ActivityCapture {
 public:
  bool Open() override {
    g_recording.store(true, std::memory_order_release);
    if (g_sampler != nullptr) g_sampler->Begin();
    return true;
  }
  void Quiesce() override {
    if (g_sampler != nullptr) g_sampler->End();
    g_recording.store(false, std::memory_order_release);
  }
  void Close() override {
    if (g_sampler != nullptr) g_sampler->End();
    g_correlation.NextAttach();
    g_next_correlation.store(1, std::memory_order_relaxed);
  }
  bool OpenGraphNodes() override {
    if (!g_agent->enabled(RecordKind::kGraphOps)) return false;
    g_graph_nodes.store(true, std::memory_order_release);
    return true;
  }
  void CloseGraphNodes() override { g_graph_nodes.store(false, std::memory_order_release); }
};

// At exit (full mode: the capture is never closed).
void FlushSynthetic() {
  if (g_sampler == nullptr) return;
  g_sampler->End();
  g_sampler->Summarize();
}
std::mutex g_streams_mu;
std::map<uint32_t, uint64_t>& StreamBusyUntil() {
  static auto* m = new std::map<uint32_t, uint64_t>();
  return *m;
}
// Kernels launched open (launch_open_kernel) and not yet closed, by stream:
// what their record needs when close_kernel gives their end. Under g_streams_mu.
struct OpenKernel {
  uint64_t start_ns;
  std::string name;
  int grid_x, block_x;
  uint32_t corr;
};
std::map<uint32_t, OpenKernel>& OpenKernels() {
  static auto* m = new std::map<uint32_t, OpenKernel>();
  return *m;
}
// Whether `stream` (any stream for AON_SYNTHETIC_ALL_STREAMS) has an open
// kernel: nothing else may be queued on it or waited for until it is closed.
bool HasOpenKernel(uint32_t stream) {
  std::lock_guard<std::mutex> lock(g_streams_mu);
  if (stream == AON_SYNTHETIC_ALL_STREAMS) return !OpenKernels().empty();
  return OpenKernels().count(stream) != 0;
}

uint32_t ThreadId() {
  thread_local uint32_t tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return tid;
}

// Reserves [start, end) on `stream` for work issued now; returns start.
uint64_t Schedule(uint32_t stream, uint64_t issued_ns, uint64_t duration_ns, uint64_t* end_ns) {
  std::lock_guard<std::mutex> lock(g_streams_mu);
  uint64_t& busy = StreamBusyUntil()[stream];
  uint64_t start = std::max(issued_ns + kLaunchLatencyNs, busy);
  busy = start + duration_ns;
  *end_ns = busy;
  return start;
}

void SleepUntil(uint64_t t_ns) {
  timespec ts{static_cast<time_t>(t_ns / 1000000000ull), static_cast<long>(t_ns % 1000000000ull)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

void PushApi(uint64_t start, uint32_t correlation, uint32_t cbid, const char* name) {
  const SourceContext& agent = *g_agent;
  if (!Recording(RecordKind::kApi)) return;
  // CUPTI writes external correlation records only with an API record, just
  // before it: one per kind whose stack is not empty on the calling thread.
  if (t_external_depth > 0 && Recording(RecordKind::kExternalCorrelation)) {
    ExternalCorrelationRecord e{};
    e.external_id = t_external[t_external_depth - 1];
    e.correlation_id = correlation;
    e.external_kind = kOpExternalCorrelationKind;
    agent.sink().Push(e);
  }
  ApiRecord r{};
  r.start_ns = start;
  r.end_ns = TimebaseNowNs();
  r.correlation_id = correlation;
  r.callback_id = cbid;
  r.thread_id = ThreadId();
  r.name_id = agent.sink().Intern(name, RecordKind::kApi);
  r.domain = static_cast<uint8_t>(ApiDomain::kRuntime);
  agent.sink().Push(r);
}

// <AON_SYNTHETIC_GPU_DIR>/<uuid>.activity, -1 when not asked for.
int g_activity_fd = -1;

int SetKernelProfile(double sm_active_pct, double dram_pct, double tensor_pct) {
  auto bad = [](double v) { return !(v >= 0 && v <= 100); };
  if (bad(sm_active_pct) || bad(dram_pct) || bad(tensor_pct)) return 1;
  t_profile = {sm_active_pct, dram_pct, tensor_pct};
  return 0;
}

// One kernel as the fake NVML reads it (tests/fakes/fake_nvml.cc: Activity).
void AppendActivity(uint64_t start_ns, uint64_t end_ns) {
  if (g_activity_fd < 0) return;
  struct {
    uint64_t start_ns, end_ns;
    double sm, dram, tensor;
  } row{start_ns, end_ns, t_profile.sm, t_profile.dram, t_profile.tensor};
  static_assert(sizeof(row) == 40);
  // O_APPEND: one write() per row keeps rows whole for a concurrent reader.
  if (write(g_activity_fd, &row, sizeof(row)) != static_cast<ssize_t>(sizeof(row))) {
    close(g_activity_fd);
    g_activity_fd = -1;
  }
}

// CUDA graphs. A kernel node: what its launch asked for. Node ids are the
// device's, unique in the process (CUPTI's cuptiGetGraphNodeId); a graph's
// instantiated nodes are clones with ids of their own, which replays carry.
struct GraphNode {
  uint64_t id;
  std::string name;
  uint64_t duration_ns;
  int grid_x, block_x;
};
std::atomic<uint64_t> g_next_node{1};
// This thread's capture in progress (stream, nodes so far); none when capturing is false.
struct Capture {
  bool capturing = false;
  uint32_t stream = 0;
  std::vector<GraphNode> nodes;
};
thread_local Capture t_capture;
std::mutex g_graphs_mu;
std::map<uint64_t, std::vector<GraphNode>>& Graphs() {  // instantiated graphs by handle
  static auto* m = new std::map<uint64_t, std::vector<GraphNode>>();
  return *m;
}
// CUPTI's resource callbacks reach AON only while it is attached: in windows,
// and while a graph capture outside them asked for them.
bool NodeCallbacks() {
  return Recording(RecordKind::kGraphOps) ||
         (g_graph_nodes.load(std::memory_order_acquire) && g_agent->enabled(RecordKind::kGraphOps));
}

// The record of a kernel that ran [start, end) on `stream` (pushed when kernels
// are recorded).
void PushKernel(uint32_t stream, uint64_t start_ns, uint64_t end_ns, const char* name, int grid_x,
                int block_x, uint32_t corr, uint64_t node_id, uint32_t graph_id) {
  const SourceContext& agent = *g_agent;
  KernelRecord k{};
  k.start_ns = start_ns;
  k.end_ns = end_ns;
  AppendActivity(k.start_ns, k.end_ns);
  if (g_sampler != nullptr) g_sampler->Kernel(k.start_ns, k.end_ns, t_profile);
  k.correlation_id = corr;
  k.device_id = kDeviceId;
  k.context_id = kContextId;
  k.stream_id = stream;
  k.grid_x = grid_x;
  k.grid_y = k.grid_z = 1;
  k.block_x = block_x;
  k.block_y = k.block_z = 1;
  k.registers_per_thread = 32;
  k.graph_node_id = node_id;
  k.graph_id = graph_id;
  if (Recording(RecordKind::kKernel)) {
    k.name_id = agent.sink().Intern(name ? name : "synthetic_kernel", RecordKind::kKernel);
    agent.sink().Push(k);
  }
}

// A kernel of `duration_ns` on `stream` issued at `now`.
void RunKernel(uint32_t stream, uint64_t now, const char* name, uint64_t duration_ns, int grid_x,
               int block_x, uint32_t corr, uint64_t node_id, uint32_t graph_id) {
  uint64_t end = 0;
  const uint64_t start = Schedule(stream, now, duration_ns, &end);
  PushKernel(stream, start, end, name, grid_x, block_x, corr, node_id, graph_id);
}

int LaunchKernel(uint32_t stream, const char* name, uint64_t duration_ns, int grid_x, int block_x) {
  if (!g_enabled.load(std::memory_order_acquire) || HasOpenKernel(stream)) return 1;
  uint64_t now = TimebaseNowNs();
  uint32_t corr = g_correlation.Map(g_next_correlation.fetch_add(1, std::memory_order_relaxed));
  if (t_capture.capturing && t_capture.stream == stream) {
    GraphNode n{g_next_node.fetch_add(1, std::memory_order_relaxed),
                name ? name : "synthetic_kernel", duration_ns, grid_x, block_x};
    if (NodeCallbacks()) NoteGraphNodeCreated(n.id);  // inside the capturing launch
    t_capture.nodes.push_back(std::move(n));
  } else {
    RunKernel(stream, now, name, duration_ns, grid_x, block_x, corr, 0, 0);
  }
  PushApi(now, corr, kCbidLaunchKernel, "cudaLaunchKernel");
  return 0;
}

int BeginCapture(uint32_t stream) {
  if (!g_enabled.load(std::memory_order_acquire) || t_capture.capturing) return 1;
  const uint64_t now = TimebaseNowNs();
  t_capture = Capture{true, stream, {}};
  PushApi(now, g_correlation.Map(g_next_correlation.fetch_add(1, std::memory_order_relaxed)),
          kCbidStreamBeginCapture, "cudaStreamBeginCapture");
  return 0;
}

int EndCapture(uint32_t stream, uint64_t* graph) {
  if (!g_enabled.load(std::memory_order_acquire) || !t_capture.capturing ||
      t_capture.stream != stream || graph == nullptr) {
    return 1;
  }
  uint64_t now = TimebaseNowNs();
  PushApi(now, g_correlation.Map(g_next_correlation.fetch_add(1, std::memory_order_relaxed)),
          kCbidStreamEndCapture, "cudaStreamEndCapture");
  now = TimebaseNowNs();
  std::vector<GraphNode> exec = std::move(t_capture.nodes);
  t_capture = Capture{};
  for (GraphNode& n : exec) {  // instantiation clones every node
    const uint64_t clone = g_next_node.fetch_add(1, std::memory_order_relaxed);
    if (NodeCallbacks()) NoteGraphNodeCloned(n.id, clone);
    n.id = clone;
  }
  {
    std::lock_guard<std::mutex> lock(g_graphs_mu);
    *graph = Graphs().size() + 1;
    Graphs().emplace(*graph, std::move(exec));
  }
  PushApi(now, g_correlation.Map(g_next_correlation.fetch_add(1, std::memory_order_relaxed)),
          kCbidGraphInstantiate, "cudaGraphInstantiate");
  return 0;
}

int LaunchGraph(uint64_t graph, uint32_t stream) {
  if (!g_enabled.load(std::memory_order_acquire) || HasOpenKernel(stream)) return 1;
  std::vector<GraphNode> nodes;
  {
    std::lock_guard<std::mutex> lock(g_graphs_mu);
    auto it = Graphs().find(graph);
    if (it == Graphs().end()) return 1;
    nodes = it->second;
  }
  const uint64_t now = TimebaseNowNs();
  const uint32_t corr =
      g_correlation.Map(g_next_correlation.fetch_add(1, std::memory_order_relaxed));
  for (const GraphNode& n : nodes) {
    RunKernel(stream, now, n.name.c_str(), n.duration_ns, n.grid_x, n.block_x, corr, n.id,
              static_cast<uint32_t>(graph));
  }
  PushApi(now, corr, kCbidGraphLaunch, "cudaGraphLaunch");
  return 0;
}

int Memcpy(uint32_t stream, uint8_t copy_kind, uint64_t bytes, int async) {
  if (!g_enabled.load(std::memory_order_acquire) || HasOpenKernel(stream)) return 1;
  const SourceContext& agent = *g_agent;
  uint64_t now = TimebaseNowNs();
  uint32_t corr = g_correlation.Map(g_next_correlation.fetch_add(1, std::memory_order_relaxed));
  MemcpyRecord m{};
  // Host side pinned for async copies, pageable for synchronous ones; device memory = 3.
  const uint8_t host_kind = async ? 2 : 1;
  const bool pageable = !async && (copy_kind == 1 || copy_kind == 2);
  auto duration =
      kCopyFixedNs + static_cast<uint64_t>(static_cast<double>(bytes) /
                                           (pageable ? kPageableCopyBytesPerNs : kCopyBytesPerNs));
  m.start_ns = Schedule(stream, now, duration, &m.end_ns);
  m.bytes = bytes;
  m.correlation_id = corr;
  m.device_id = m.src_device_id = m.dst_device_id = kDeviceId;
  m.context_id = kContextId;
  m.stream_id = stream;
  m.copy_kind = copy_kind;
  m.src_kind = copy_kind == 1 ? host_kind : 3;
  m.dst_kind = copy_kind == 2 ? host_kind : 3;
  m.flags = async ? 1 : 0;
  if (Recording(RecordKind::kMemcpy)) agent.sink().Push(m);
  if (!async) SleepUntil(m.end_ns);
  PushApi(now, corr, async ? kCbidMemcpyAsync : kCbidMemcpy,
          async ? "cudaMemcpyAsync" : "cudaMemcpy");
  return 0;
}

int Memset(uint32_t stream, uint64_t bytes, int async) {
  if (!g_enabled.load(std::memory_order_acquire) || HasOpenKernel(stream)) return 1;
  const SourceContext& agent = *g_agent;
  uint64_t now = TimebaseNowNs();
  uint32_t corr = g_correlation.Map(g_next_correlation.fetch_add(1, std::memory_order_relaxed));
  MemsetRecord m{};
  m.start_ns = Schedule(stream, now, 1000 + bytes / 200, &m.end_ns);
  m.bytes = bytes;
  m.correlation_id = corr;
  m.device_id = kDeviceId;
  m.context_id = kContextId;
  m.stream_id = stream;
  m.memory_kind = 3;
  m.flags = async ? 1 : 0;
  if (Recording(RecordKind::kMemset)) agent.sink().Push(m);
  if (!async) SleepUntil(m.end_ns);
  PushApi(now, corr, async ? kCbidMemsetAsync : kCbidMemset,
          async ? "cudaMemsetAsync" : "cudaMemset");
  return 0;
}

// NCCL's kernels wait on the GPU for their peers: a kernel launched open runs
// from its start until close_kernel gives its end (the host learns when the
// peers arrived only after the fact).
int LaunchOpenKernel(uint32_t stream, const char* name, int grid_x, int block_x) {
  if (!g_enabled.load(std::memory_order_acquire)) return 1;
  const uint64_t now = TimebaseNowNs();
  const uint32_t corr =
      g_correlation.Map(g_next_correlation.fetch_add(1, std::memory_order_relaxed));
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    if (OpenKernels().count(stream) != 0) return 1;
    uint64_t& busy = StreamBusyUntil()[stream];
    const uint64_t start = std::max(now + kLaunchLatencyNs, busy);
    busy = start;
    OpenKernels().emplace(
        stream, OpenKernel{start, name ? name : "synthetic_kernel", grid_x, block_x, corr});
  }
  PushApi(now, corr, kCbidLaunchKernel, "cudaLaunchKernel");
  return 0;
}

int CloseKernel(uint32_t stream, uint64_t end_ns) {
  if (!g_enabled.load(std::memory_order_acquire)) return 1;
  OpenKernel k;
  uint64_t end = 0;
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    auto it = OpenKernels().find(stream);
    if (it == OpenKernels().end()) return 1;
    k = std::move(it->second);
    OpenKernels().erase(it);
    end = std::max(k.start_ns, end_ns);
    StreamBusyUntil()[stream] = end;
  }
  PushKernel(stream, k.start_ns, end, k.name.c_str(), k.grid_x, k.block_x, k.corr, 0, 0);
  return 0;
}

int Synchronize(uint32_t stream) {
  if (!g_enabled.load(std::memory_order_acquire) || HasOpenKernel(stream)) return 1;
  const SourceContext& agent = *g_agent;
  uint64_t now = TimebaseNowNs();
  uint32_t corr = g_correlation.Map(g_next_correlation.fetch_add(1, std::memory_order_relaxed));
  uint64_t until = now;
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    for (const auto& [s, busy] : StreamBusyUntil()) {
      if (stream == AON_SYNTHETIC_ALL_STREAMS || s == stream) until = std::max(until, busy);
    }
  }
  SleepUntil(until);
  bool device = stream == AON_SYNTHETIC_ALL_STREAMS;
  SyncRecord s{};
  s.start_ns = now;
  s.end_ns = TimebaseNowNs();
  s.correlation_id = corr;
  s.context_id = kContextId;
  s.stream_id = device ? UINT32_MAX : stream;
  s.event_id = UINT32_MAX;
  s.sync_type = device ? 4 : 3;  // context sync / stream sync
  if (Recording(RecordKind::kSync)) agent.sink().Push(s);
  PushApi(now, corr, device ? kCbidDeviceSynchronize : kCbidStreamSynchronize,
          device ? "cudaDeviceSynchronize" : "cudaStreamSynchronize");
  return 0;
}

const AonSyntheticDeviceV1 kDevice = {sizeof(AonSyntheticDeviceV1),
                                      LaunchKernel,
                                      Memcpy,
                                      Memset,
                                      Synchronize,
                                      SetKernelProfile,
                                      BeginCapture,
                                      EndCapture,
                                      LaunchGraph,
                                      LaunchOpenKernel,
                                      CloseKernel};

}  // namespace

bool StartSyntheticSource(const SourceContext& agent) {
  g_agent.Bind(agent);
  RecordSink& store = agent.sink();
  DeviceInfo d{};
  d.device_id = kDeviceId;
  const std::string uuid =
      "SYNTHETIC-" + agent.identity().host + "-rank" + std::to_string(agent.identity().rank);
  d.uuid_id = store.Intern(uuid, RecordKind::kKernel);
  if (const char* dir = std::getenv("AON_SYNTHETIC_GPU_DIR"); dir != nullptr && *dir != '\0') {
    const std::string path = std::string(dir) + "/" + uuid + ".activity";
    g_activity_fd =
        open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (g_activity_fd < 0)
      agent.notes().Note("synthetic GPU: cannot write " + path + ": " + std::strerror(errno));
  }
  d.name_id = store.Intern("AON synthetic GPU (not real)", RecordKind::kKernel);
  d.sm_count = 0;
  agent.notes().AddDevice(d);
  agent.notes().SetSource("synthetic");
  agent.notes().Note("SYNTHETIC source: GPU activity in this trace is simulated, not measured");
  if (agent.config().counters == CounterMode::kAuto && agent.enabled(RecordKind::kCounters)) {
    g_sampler = new SyntheticSampler(GpuUuidFromText(uuid), agent.config().counters_sample_us);
    agent.notes().SetFlushHook(FlushSynthetic);
  }
  SetOpCorrelation(&kSyntheticOpCorrelation);
  g_enabled.store(true, std::memory_order_release);
  static SyntheticCapture capture;
  agent.capture().Start(&capture);  // full mode: recording from now on
  return true;
}

}  // namespace aon::agent

extern "C" __attribute__((visibility("default"))) const AonSyntheticDeviceV1* aonSyntheticDeviceV1(
    void) {
  return aon::agent::g_enabled.load(std::memory_order_acquire) ? &aon::agent::kDevice : nullptr;
}
