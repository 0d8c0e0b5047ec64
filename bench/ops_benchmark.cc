// What a framework hook pays per operator for aon_op_begin + aon_op_end
// (rank_agent/include/aon/capture_api.h), with the real agent loaded as the
// CUDA driver would load it (dlopen + InitializeInjection, synthetic source,
// budgeted mode, its node collector draining the ring):
//   Inactive*   no capture window: what every operator costs between windows;
//   Active*     inside a window (an on-demand capture opened by this program):
//               clock reads, the name lookup, the synthetic device's external
//               correlation push/pop and one 64-byte ring push per range.
// The functions are called through pointers from dlsym, as a hook calls them.
// Results and the command: bench/RESULTS.md, "Framework op ranges".
//
// Usage: aon-bench-ops [Google Benchmark flags]; AON_BENCH_AGENT overrides the
// agent's path (default: <build>/lib/libaon_agent.so next to this program's bin/).
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace {

using BeginFn = uint64_t (*)(const char*, uint8_t, int64_t, uint32_t, uint32_t);
using EndFn = void (*)(uint64_t);
using ActiveFn = int (*)();
using StepFn = void (*)();
using CaptureFn = int (*)(uint32_t, uint32_t);

struct Agent {
  BeginFn begin = nullptr;
  EndFn end = nullptr;
  ActiveFn active = nullptr;
  StepFn step = nullptr;
  CaptureFn capture = nullptr;
};

std::string AgentPath() {
  if (const char* p = std::getenv("AON_BENCH_AGENT")) return p;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string("./x");
  dir = dir.substr(0, dir.rfind('/'));  // <build>/bin
  return dir.substr(0, dir.rfind('/')) + "/lib/libaon_agent.so";
}

const Agent& LoadAgent() {
  static const Agent agent = [] {
    Agent a;
    char tmpl[] = "/tmp/aon-bench-ops-XXXXXX";
    const char* dir = mkdtemp(tmpl);
    const std::string path = AgentPath();
    setenv("CUDA_INJECTION64_PATH", path.c_str(), 1);
    setenv("AON_OUTPUT_DIR", dir != nullptr ? dir : "/tmp", 1);
    setenv("AON_JOB_ID", "bench-ops", 1);
    setenv("AON_SOURCE", "synthetic", 1);
    setenv("AON_MODE", "budgeted", 1);
    setenv("AON_STEP_SOURCE", "api", 1);  // no time slots: a window only when asked for
    // A 128 MiB ring, drained by the collector: warm after its first laps (a
    // larger one measures the kernel zeroing its pages at first touch).
    setenv("AON_MEMORY_CAP", "256M", 1);
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      std::fprintf(stderr, "aon-bench-ops: cannot load %s: %s\n", path.c_str(), dlerror());
      std::exit(2);
    }
    auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
    a.begin = reinterpret_cast<BeginFn>(dlsym(lib, "aon_op_begin"));
    a.end = reinterpret_cast<EndFn>(dlsym(lib, "aon_op_end"));
    a.active = reinterpret_cast<ActiveFn>(dlsym(lib, "aon_ops_active"));
    a.step = reinterpret_cast<StepFn>(dlsym(lib, "aon_step"));
    a.capture = reinterpret_cast<CaptureFn>(dlsym(lib, "aon_capture"));
    if (!init || !a.begin || !a.end || !a.active || !a.step || !a.capture || !init()) {
      std::fprintf(stderr, "aon-bench-ops: %s is not an AON agent with aon_op_begin\n",
                   path.c_str());
      std::exit(2);
    }
    return a;
  }();
  return agent;
}

// Opens a window for the rest of the run: an on-demand capture of many steps
// from the next step boundary, and that boundary.
void OpenWindow(const Agent& a) {
  if (a.active()) return;
  a.capture(1000000, 0);
  a.step();
}

void PairLoop(benchmark::State& state, const Agent& a) {
  for (auto _ : state) {
    uint64_t id = a.begin("aten::addmm", 0, 12345, 1, 0);  // non-const: DoNotOptimize(T&)
    benchmark::DoNotOptimize(id);
    a.end(id);
  }
}

void Nested3Loop(benchmark::State& state, const Agent& a) {
  for (auto _ : state) {
    const uint64_t m = a.begin("encoder.layers.3.self_attn", 2, -1, 1, 0);
    const uint64_t l = a.begin("aten::linear", 0, 12344, 1, 0);
    const uint64_t k = a.begin("aten::addmm", 0, 12345, 1, 0);
    a.end(k);
    a.end(l);
    a.end(m);
  }
  state.SetItemsProcessed(state.iterations() * 3);
}

void BM_InactiveBeginEnd(benchmark::State& state) {
  const Agent& a = LoadAgent();
  if (a.active()) state.SkipWithError("a window is open");
  PairLoop(state, a);
}
BENCHMARK(BM_InactiveBeginEnd);

void BM_InactiveOpsActive(benchmark::State& state) {
  const Agent& a = LoadAgent();
  for (auto _ : state) benchmark::DoNotOptimize(a.active());
}
BENCHMARK(BM_InactiveOpsActive);

void BM_ActiveBeginEnd(benchmark::State& state) {
  const Agent& a = LoadAgent();
  if (state.thread_index() == 0) OpenWindow(a);
  if (!a.active()) state.SkipWithError("no window opened");
  PairLoop(state, a);
}
BENCHMARK(BM_ActiveBeginEnd)->Threads(1)->Threads(2);

void BM_ActiveNested3(benchmark::State& state) {
  const Agent& a = LoadAgent();
  if (state.thread_index() == 0) OpenWindow(a);
  if (!a.active()) state.SkipWithError("no window opened");
  Nested3Loop(state, a);
}
BENCHMARK(BM_ActiveNested3);

}  // namespace

BENCHMARK_MAIN();
