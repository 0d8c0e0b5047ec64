// A real second process for the agent tests: it loads libaon_agent.so through
// NVTX_INJECTION64_PATH (and, for the synthetic device, the way the CUDA driver
// would), does what `mode` says, and leaves in the way the test wants to see
// handled. Usage: agent_test_child MODE
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "aon/capture_api.h"
#include "aon/synthetic_device.h"

namespace {

void NestedRanges() {
  nvtxRangePushA("outer");  // depth 0
  nvtxRangePushA("inner");  // depth 1
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

// Runs on this thread until its CPU clock advanced `us` microseconds.
void SpinThreadCpu(int us) {
  auto cpu_ns = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
  };
  const long long until = cpu_ns() + static_cast<long long>(us) * 1000;
  volatile unsigned sink = 0;
  while (cpu_ns() < until) sink = sink + 1;
}

const AonSyntheticDeviceV1* FakeDriver() {
  void* lib = dlopen(std::getenv("CUDA_INJECTION64_PATH"), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return nullptr;
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
  auto get = reinterpret_cast<AonGetSyntheticDeviceFn>(dlsym(lib, "aonSyntheticDeviceV1"));
  if (!init || !get || !init()) return nullptr;
  return get();
}

// The operator-range API as a framework hook finds it (aon/capture_api.h).
struct OpsApi {
  uint64_t (*begin)(const char*, uint8_t, int64_t, uint32_t, uint32_t) = nullptr;
  void (*end)(uint64_t) = nullptr;
  int (*active)() = nullptr;
  void (*framework_step)() = nullptr;
  void (*listen)(void (*)(int)) = nullptr;
};

bool FindOpsApi(OpsApi* api) {
  void* agent = dlopen(std::getenv("CUDA_INJECTION64_PATH"), RTLD_NOW | RTLD_NOLOAD);
  if (agent == nullptr) return false;
  api->begin = reinterpret_cast<decltype(api->begin)>(dlsym(agent, "aon_op_begin"));
  api->end = reinterpret_cast<decltype(api->end)>(dlsym(agent, "aon_op_end"));
  api->active = reinterpret_cast<decltype(api->active)>(dlsym(agent, "aon_ops_active"));
  api->framework_step =
      reinterpret_cast<decltype(api->framework_step)>(dlsym(agent, "aon_framework_step"));
  api->listen = reinterpret_cast<decltype(api->listen)>(dlsym(agent, "aon_ops_listen"));
  return api->begin && api->end && api->active && api->framework_step && api->listen;
}

// The framework's observer switch (aon_ops_listen), as the PyTorch observer
// registers it: logs "listen <step being marked, -1: none yet> <on>
// <aon_ops_active() then> <on the marking thread>".
FILE* g_listen_log = nullptr;
int g_marking_step = -1;
pid_t g_marking_thread = 0;
int (*g_active)() = nullptr;
void OnOpsSwitch(int on) {
  std::fprintf(g_listen_log, "listen %d %d %d %d\n", g_marking_step, on, g_active(),
               static_cast<pid_t>(syscall(SYS_gettid)) == g_marking_thread ? 1 : 0);
}

// What the "ops" mode did, for the test to compare with the rank file (OPS_LOG):
//   thread <role> <tid>
//   step <i> <aon_ops_active() after the step began>
//   listen <step> <on> <active then> <1: on the marking thread> (OnOpsSwitch)
//   begin <step> <role> <name> <kind> <seq> <active before the call> <id> <parent>
//   launch <step> <role> <kernel name> <innermost recorded range open, 0: none>
//   memcpy|memset <step> <role> <innermost recorded range open>
// `parent` is the innermost recorded range open on the thread; the child keeps
// its own stacks, the oracle the agent's records are checked against.
class OpsScript {
 public:
  OpsScript(const AonSyntheticDeviceV1* gpu, const OpsApi& api, FILE* log)
      : gpu_(gpu), api_(api), log_(log) {}

  // Begins a range; logs it with what the agent said.
  uint64_t Begin(std::vector<uint64_t>& stack, int step, const char* role, const char* name,
                 uint8_t kind, int64_t seq, uint32_t fw, uint32_t fwd) {
    const int active = api_.active();
    const uint64_t id = api_.begin(name, kind, seq, fw, fwd);
    Log("begin %d %s %s %u %lld %d %llu %llu\n", step, role, name, kind,
        static_cast<long long>(seq), active, static_cast<unsigned long long>(id),
        static_cast<unsigned long long>(Innermost(stack)));
    stack.push_back(id);
    return id;
  }
  void End(std::vector<uint64_t>& stack) {
    api_.end(stack.back());
    stack.pop_back();
  }
  void Launch(const std::vector<uint64_t>& stack, int step, const char* role,
              const std::string& kernel) {
    gpu_->launch_kernel(1, kernel.c_str(), 2000, 1, 32);
    Log("launch %d %s %s %llu\n", step, role, kernel.c_str(),
        static_cast<unsigned long long>(Innermost(stack)));
  }
  void Copy(const std::vector<uint64_t>& stack, int step, const char* role) {
    gpu_->memcpy(2, 1, 4096, 1);
    Log("memcpy %d %s %llu\n", step, role, static_cast<unsigned long long>(Innermost(stack)));
  }
  void Set(const std::vector<uint64_t>& stack, int step, const char* role) {
    gpu_->memset(1, 4096, 1);
    Log("memset %d %s %llu\n", step, role, static_cast<unsigned long long>(Innermost(stack)));
  }
  void Log(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    std::lock_guard<std::mutex> lock(mu_);
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(log_, fmt, ap);
    va_end(ap);
  }

 private:
  static uint64_t Innermost(const std::vector<uint64_t>& stack) {
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
      if (*it != 0) return *it;
    }
    return 0;
  }
  const AonSyntheticDeviceV1* gpu_;
  OpsApi api_;
  FILE* log_;
  std::mutex mu_;
};

// A helper thread that runs one job per step while the main thread waits (the
// autograd engine's thread, as seen by the agent: its own ranges and launches).
class StepWorker {
 public:
  StepWorker() : thread_([this] { Loop(); }) {}
  ~StepWorker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Run(std::function<void()> job) {
    std::unique_lock<std::mutex> lock(mu_);
    job_ = std::move(job);
    cv_.notify_all();
    cv_.wait(lock, [this] { return !job_; });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || job_; });
      if (stop_) return;
      job_();
      job_ = nullptr;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool stop_ = false;
  std::thread thread_;
};

// STEPS steps marked by aon_framework_step (and NVTX "step <i>" ranges, which
// the pytorch source outranks). Each step, on the main thread:
//   [Optimizer.step (user) begun in the previous step, ended after the boundary]
//     launch k_step<i>_optim
//   model.layer (module) > aten::linear (operator) > aten::addmm (operator)
//     launch k_step<i>_addmm in addmm, k_step<i>_linear in linear, a copy in the module
//   launch k_step<i>_outside, a memset outside every range
// and on the worker thread:
//   autograd::AddmmBackward0 (backward, seq = addmm's, forward thread 1)
//     launch k_step<i>_bw
//   launch k_step<i>_wfree (inside autograd::engine when that is open)
//   autograd::engine (user) begun at a window's first step, ended 4 steps after
//   the window (after the GPU source detached), or when the next one starts.
// OPS_LEAVE_OPEN=1: a last range is begun and never ended.
// OPS_FORK=1: in the first captured step, inside model.layer, a child is forked
// (a DataLoader worker): it exits 0 if it sees no window, gets no id from
// aon_op_begin and ends the module it inherited (which must not reach the
// parent's file); logged as "fork <step> <child's exit status>".
int RunOpsScript(const AonSyntheticDeviceV1* gpu) {
  OpsApi api;
  if (!FindOpsApi(&api)) return 11;
  const char* log_path = std::getenv("OPS_LOG");
  FILE* log = log_path ? std::fopen(log_path, "w") : nullptr;
  if (log == nullptr) return 12;
  const int steps = std::getenv("STEPS") ? std::atoi(std::getenv("STEPS")) : 40;
  OpsScript s(gpu, api, log);
  std::vector<uint64_t> main_stack, worker_stack;
  s.Log("thread main %ld\n", static_cast<long>(syscall(SYS_gettid)));
  g_listen_log = log;
  g_active = api.active;
  g_marking_thread = static_cast<pid_t>(syscall(SYS_gettid));
  api.listen(OnOpsSwitch);
  {
    StepWorker worker;
    worker.Run([&] { s.Log("thread worker %ld\n", static_cast<long>(syscall(SYS_gettid))); });
    bool prev_active = false;
    int steps_after_window = 0;  // of the worker's open engine range
    bool fork_worker = std::getenv("OPS_FORK") != nullptr;
    for (int i = 0; i < steps; ++i) {
      const std::string k = "k_step" + std::to_string(i) + "_";
      // The optimizer's step hook runs inside its own range.
      if (i > 0) s.Begin(main_stack, i - 1, "main", "Optimizer.step", AON_OP_USER, -1, 1, 0);
      g_marking_step = i;
      api.framework_step();
      const int active = api.active();
      s.Log("step %d %d\n", i, active);
      if (i > 0) {
        s.Launch(main_stack, i, "main", k + "optim");
        s.End(main_stack);
      }
      nvtxRangePushA(("step " + std::to_string(i)).c_str());
      s.Begin(main_stack, i, "main", "model.layer", AON_OP_MODULE, -1, 1, 0);
      if (fork_worker && active) {
        fork_worker = false;
        std::fflush(log);
        const pid_t child = fork();
        if (child == 0) {
          const bool quiet =
              api.active() == 0 && api.begin("worker op", AON_OP_OPERATOR, -1, 9, 0) == 0;
          api.end(main_stack.back());
          _exit(quiet ? 0 : 1);
        }
        int status = -1;
        waitpid(child, &status, 0);
        s.Log("fork %d %d\n", i, WIFEXITED(status) ? WEXITSTATUS(status) : 100);
      }
      s.Begin(main_stack, i, "main", "aten::linear", AON_OP_OPERATOR, 10 * i, 1, 0);
      s.Begin(main_stack, i, "main", "aten::addmm", AON_OP_OPERATOR, 10 * i + 1, 1, 0);
      s.Launch(main_stack, i, "main", k + "addmm");
      s.End(main_stack);
      s.Launch(main_stack, i, "main", k + "linear");
      s.End(main_stack);
      s.Copy(main_stack, i, "main");
      s.End(main_stack);
      s.Launch(main_stack, i, "main", k + "outside");
      s.Set(main_stack, i, "main");
      worker.Run([&] {
        s.Begin(worker_stack, i, "worker", "autograd::AddmmBackward0", AON_OP_BACKWARD, 10 * i + 1,
                2, 1);
        s.Launch(worker_stack, i, "worker", k + "bw");
        s.End(worker_stack);
        s.Launch(worker_stack, i, "worker", k + "wfree");
        const bool window_starts = active && !prev_active;
        if (!worker_stack.empty()) {
          // Past the window's tail (the source has detached), or a new window.
          if (window_starts || (!active && ++steps_after_window >= 4)) s.End(worker_stack);
        }
        if (window_starts) {
          s.Begin(worker_stack, i, "worker", "autograd::engine", AON_OP_USER, -1, 2, 0);
          steps_after_window = 0;
        }
      });
      gpu->synchronize(AON_SYNTHETIC_ALL_STREAMS);
      nvtxRangePop();
      prev_active = active != 0;
    }
    if (!main_stack.empty()) s.End(main_stack);
    worker.Run([&] {
      while (!worker_stack.empty()) s.End(worker_stack);
    });
  }
  if (std::getenv("OPS_LEAVE_OPEN") != nullptr) {
    s.Begin(main_stack, steps, "main", "never.ended", AON_OP_USER, -1, 1, 0);
  }
  std::fclose(log);
  return 0;
}

}  // namespace

// CLOCK_MONOTONIC ns: the clock aon_host_range's times are on (capture_api.h).
uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

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
    // The agent's thread writes the file, then re-raises; it may wait up to
    // 30 s for its collector, so 60 s here (a loaded machine is slow, and a
    // hang is still caught).
    for (int i = 0; i < 6000; ++i) usleep(10000);
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
  if (mode == "fork-push") {
    // The parent: 5 kernels and NVTX ranges "parent" before a fork and 5
    // after; its forked child launches 50 kernels, pushes 50 ranges "child"
    // and exits without the agent's exit path (as a DataLoader worker does).
    const AonSyntheticDeviceV1* gpu = FakeDriver();
    if (!gpu) return 10;
    auto parent_work = [&] {
      for (int i = 0; i < 5; ++i) {
        nvtxRangePushA("parent");
        gpu->launch_kernel(1, "k_parent", 2000, 1, 32);
        nvtxRangePop();
      }
    };
    parent_work();
    const pid_t child = fork();
    if (child == 0) {
      for (int i = 0; i < 50; ++i) {
        nvtxRangePushA("child");
        gpu->launch_kernel(1, "k_child", 2000, 1, 32);
        nvtxRangePop();
      }
      _exit(0);
    }
    int st = 0;
    if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st)) return 11;
    parent_work();
    gpu->synchronize(AON_SYNTHETIC_ALL_STREAMS);
    return 0;
  }
  if (mode == "open-kernel") {
    // A kernel on stream 1, then one launched open there: while it is open,
    // stream 1 refuses launches, copies, memsets, waits and a second open
    // kernel (status 1), and stream 2 takes work; it is closed at a time 2 ms
    // ahead, which a wait on stream 1 then reaches. Writes that end to
    // OPEN_KERNEL_LOG.
    const AonSyntheticDeviceV1* gpu = FakeDriver();
    if (!gpu || gpu->struct_size < sizeof(AonSyntheticDeviceV1)) return 10;
    if (gpu->launch_kernel(1, "k_before", 10000, 1, 32) != 0) return 11;
    if (gpu->launch_open_kernel(1, "k_open", 2, 64) != 0) return 12;
    if (gpu->launch_kernel(1, "k_refused", 10000, 1, 32) != 1) return 13;
    if (gpu->memcpy(1, 1, 4096, 1) != 1 || gpu->memset(1, 4096, 1) != 1) return 14;
    if (gpu->synchronize(1) != 1 || gpu->synchronize(AON_SYNTHETIC_ALL_STREAMS) != 1) return 15;
    if (gpu->launch_open_kernel(1, "k_open2", 1, 1) != 1) return 16;
    if (gpu->launch_kernel(2, "k_other", 10000, 1, 32) != 0) return 17;
    usleep(1000);
    const uint64_t end = MonotonicNs() + 2000000;
    if (gpu->close_kernel(1, end) != 0 || gpu->close_kernel(1, end) != 1) return 18;
    if (gpu->synchronize(1) != 0 || MonotonicNs() < end) return 19;
    FILE* log = std::fopen(std::getenv("OPEN_KERNEL_LOG"), "w");
    if (log == nullptr) return 20;
    std::fprintf(log, "%llu\n", static_cast<unsigned long long>(end));
    std::fclose(log);
    return 0;
  }
  if (mode == "steps") {
    // STEPS steps (default 100), after START_US, each marked by STEP_MARK:
    // "nvtx" (a range "step <i>"), "api" (aon_step()) or "none" (for the time
    // source: each step lasts STEP_US microseconds). Each step launches two kernels named
    // "k_step<i>", one copy and one memset, then synchronizes: a test can tell
    // which step every GPU record belongs to.
    const AonSyntheticDeviceV1* gpu = FakeDriver();
    if (!gpu) return 10;
    const int steps = std::getenv("STEPS") ? std::atoi(std::getenv("STEPS")) : 100;
    const std::string mark = std::getenv("STEP_MARK") ? std::getenv("STEP_MARK") : "nvtx";
    const int step_us = std::getenv("STEP_US") ? std::atoi(std::getenv("STEP_US")) : 0;
    // SPIN_US: microseconds of this thread's CPU time each step spends before it sleeps.
    const int spin_us = std::getenv("SPIN_US") ? std::atoi(std::getenv("SPIN_US")) : 0;
    // START_US: microseconds between the agent's start and the first step (a
    // program that loads its model first).
    if (const char* start_us = std::getenv("START_US"); start_us != nullptr) {
      usleep(static_cast<useconds_t>(std::atoi(start_us)));
    }
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
      if (spin_us > 0) SpinThreadCpu(spin_us);
      if (step_us > 0) usleep(static_cast<useconds_t>(step_us));
      if (mark == "nvtx") nvtxRangePop();
    }
    return 0;
  }
  if (mode == "host-range") {
    // 30 steps marked by aon_step, each with one kernel; aon_host_range at steps
    // 2 and 20 (outside the capture windows of a budgeted job: the first opens at
    // step 10) and one range that ends before it starts. Logs "<name> <start> <end>"
    // of the two valid ranges to HOST_RANGE_LOG.
    const AonSyntheticDeviceV1* gpu = FakeDriver();
    if (!gpu) return 10;
    void* agent = dlopen(std::getenv("CUDA_INJECTION64_PATH"), RTLD_NOW | RTLD_NOLOAD);
    using StepFn = void (*)();
    using RangeFn = void (*)(const char*, uint64_t, uint64_t);
    auto step_fn = agent ? reinterpret_cast<StepFn>(dlsym(agent, "aon_step")) : nullptr;
    auto range_fn = agent ? reinterpret_cast<RangeFn>(dlsym(agent, "aon_host_range")) : nullptr;
    if (step_fn == nullptr || range_fn == nullptr) return 11;
    FILE* log = std::fopen(std::getenv("HOST_RANGE_LOG"), "w");
    if (log == nullptr) return 12;
    for (int i = 0; i < 30; ++i) {
      step_fn();
      if (i == 2 || i == 20) {
        const uint64_t start = MonotonicNs();
        usleep(2000);
        const uint64_t end = MonotonicNs();
        const std::string name =
            i == 2 ? "torch.compile (dynamo)" : "torch.compile (lazy_backward)";
        range_fn(name.c_str(), start, end);
        std::fprintf(log, "%s|%llu|%llu\n", name.c_str(), static_cast<unsigned long long>(start),
                     static_cast<unsigned long long>(end));
        range_fn("backwards", end, start);  // ignored
      }
      gpu->launch_kernel(1, "k_step", 2000, 1, 32);
      gpu->synchronize(AON_SYNTHETIC_ALL_STREAMS);
    }
    std::fclose(log);
    return 0;
  }
  if (mode == "ops") {
    const AonSyntheticDeviceV1* gpu = FakeDriver();
    if (!gpu) return 10;
    return RunOpsScript(gpu);
  }
  if (mode == "graph-ops") {
    // A CUDA graph captured in ops, replayed every step (OPS_LOG):
    //   node <kernel> <op id open at its capture, 0: none>
    //   replay <step> <id of the range that launched the graph>
    // Capture (before the first step): module "model" > aten::addmm launching
    // k_gemm, aten::relu launching k_relu; then k_bare outside any range. Each
    // step: "Graphed.replay" launching the graph, then aten::add launching k_eager.
    const AonSyntheticDeviceV1* gpu = FakeDriver();
    if (!gpu || gpu->struct_size < sizeof(AonSyntheticDeviceV1)) return 10;
    OpsApi api;
    if (!FindOpsApi(&api)) return 11;
    FILE* log = std::getenv("OPS_LOG") ? std::fopen(std::getenv("OPS_LOG"), "w") : nullptr;
    if (log == nullptr) return 12;
    const int steps = std::getenv("STEPS") ? std::atoi(std::getenv("STEPS")) : 8;
    uint64_t graph = 0;
    // GRAPH_CAPTURE=call: the capture is bracketed by aon_graph_capture, as the
    // PyTorch hook brackets CUDAGraph.capture_begin/capture_end; the log gets
    // "active <in the capture> <after it>" (aon_ops_active).
    void (*graph_capture)(int) = nullptr;
    if (std::getenv("GRAPH_CAPTURE") && std::string(std::getenv("GRAPH_CAPTURE")) == "call") {
      graph_capture = reinterpret_cast<void (*)(int)>(
          dlsym(dlopen(std::getenv("CUDA_INJECTION64_PATH"), RTLD_NOW | RTLD_NOLOAD),
                "aon_graph_capture"));
      if (graph_capture == nullptr) return 16;
      graph_capture(1);
    }
    const int active_in_capture = api.active();
    if (gpu->begin_capture(3) != 0) return 13;
    const uint64_t model = api.begin("model", AON_OP_MODULE, -1, 1, 0);
    for (const char* k : {"k_gemm", "k_relu"}) {
      const uint64_t op =
          api.begin(k[2] == 'g' ? "aten::addmm" : "aten::relu", AON_OP_OPERATOR, -1, 1, 0);
      gpu->launch_kernel(3, k, 3000, 4, 64);
      std::fprintf(log, "node %s %llu\n", k, static_cast<unsigned long long>(op));
      api.end(op);
    }
    api.end(model);
    gpu->launch_kernel(3, "k_bare", 1000, 1, 32);
    std::fprintf(log, "node k_bare 0\n");
    if (gpu->end_capture(3, &graph) != 0 || graph == 0) return 14;
    if (graph_capture != nullptr) graph_capture(0);
    std::fprintf(log, "active %d %d\n", active_in_capture, api.active());
    for (int i = 0; i < steps; ++i) {
      api.framework_step();
      const uint64_t replay = api.begin("Graphed.replay", AON_OP_USER, -1, 1, 0);
      if (gpu->launch_graph(graph, 3) != 0) return 15;
      std::fprintf(log, "replay %d %llu\n", i, static_cast<unsigned long long>(replay));
      api.end(replay);
      const uint64_t add = api.begin("aten::add", AON_OP_OPERATOR, -1, 1, 0);
      gpu->launch_kernel(3, "k_eager", 1000, 1, 32);
      api.end(add);
    }
    gpu->synchronize(AON_SYNTHETIC_ALL_STREAMS);
    std::fclose(log);
    return 0;
  }
  if (mode == "marks-forever" || mode == "marks-for-3s" || mode == "marks-until-stopped") {
    // Reports on stdout how many marks have returned (i.e. are in the ring),
    // so a test that kills this process knows what must be on disk.
    // marks-until-stopped: until the file $STOP_FILE exists (at most 10 min).
    const bool forever = mode == "marks-forever";
    const char* stop_file = mode == "marks-until-stopped" ? std::getenv("STOP_FILE") : nullptr;
    const long limit = stop_file != nullptr ? 600'000 : 3000;
    for (long i = 1; forever || i <= limit; ++i) {
      for (int j = 0; j < 100; ++j) nvtxMarkA("tick");
      std::printf("%ld\n", i * 100);
      std::fflush(stdout);
      if (stop_file != nullptr && access(stop_file, F_OK) == 0) break;
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
