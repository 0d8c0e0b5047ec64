// aon-synthetic-app: an MPI "training loop" on a SYNTHETIC GPU, for machines
// without one (CI, laptops, the demo). Not a GPU workload and never presented
// as one: its rank files say source = "synthetic".
//
// It plays the CUDA driver's part in AON's injection: it dlopens
// CUDA_INJECTION64_PATH and calls InitializeInjection, as cuInit would, then
// drives the agent's synthetic device (rank_agent/include/aon/synthetic_device.h)
// and emits real NVTX ranges through nvtx3, which reach the agent through
// NVTX_INJECTION64_PATH exactly as in a real application. The MPI all-reduce is
// real. Every operation is counted where it is issued, and each rank prints
//   AON_EXPECT rank=R kernels=K memcpy=C memset=M nvtx=V sync=S [ops=O]
// which the tests compare with the rank's trace.
//
// --ops plays AON's PyTorch integration (rank_agent/include/aon/capture_api.h):
// steps marked by aon_framework_step() at each iteration, and each iteration's
// kernels inside framework ranges, as the PyTorch observer reports them:
//   module "model" > operator "aten::linear" > operator "aten::addmm"
// with the GEMM launched in aten::addmm, the elementwise kernel in aten::linear,
// the reduction in the module; copies and memsets outside every range. Ranges
// are begun only while aon_ops_active() says so (a window), as the observer
// does; O counts those the agent recorded (begin returned an id).
//
// --nccl plays NCCL around the all-reduce (fake_nccl.h: the agent's real
// profiler plugin gets each collective, one communicator over the job), with
// its kernel on a communication stream; --straggler-ms MS plants a straggler:
// the last rank reaches every all-reduce MS later (NVTX "straggler_delay"), so
// the other ranks' all-reduce kernels wait for it.
#include <mpi.h>
#include <nvtx3/nvToolsExt.h>
#include <stdint.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <thread>

#include "aon/capture_api.h"
#include "aon/synthetic_device.h"
#include "fake_driver.h"
#include "fake_nccl.h"

namespace {

struct Counts {
  int kernels = 0, memcpy = 0, memset = 0, nvtx = 0, sync = 0, ops = 0;
};

// The agent's framework API (aon/capture_api.h), as a framework hook finds it.
struct FrameworkApi {
  uint64_t (*begin)(const char*, uint8_t, int64_t, uint32_t, uint32_t) = nullptr;
  void (*end)(uint64_t) = nullptr;
  int (*active)() = nullptr;
  void (*step)() = nullptr;
};

FrameworkApi FindFrameworkApi() {
  using aon::synthetic::AgentFunction;
  FrameworkApi api;
  api.begin = AgentFunction<decltype(api.begin)>("aon_op_begin");
  api.end = AgentFunction<decltype(api.end)>("aon_op_end");
  api.active = AgentFunction<decltype(api.active)>("aon_ops_active");
  api.step = AgentFunction<decltype(api.step)>("aon_framework_step");
  if (!api.begin || !api.end || !api.active || !api.step) api = FrameworkApi{};
  return api;
}

// One framework range, begun only while the agent records them.
class Range {
 public:
  Range(const FrameworkApi& api, bool on, const char* name, uint8_t kind, int64_t seq, Counts* c)
      : api_(api) {
    if (!on) return;
    id_ = api.begin(name, kind, seq, 1, 0);
    if (id_ != 0) ++c->ops;
  }
  ~Range() {
    if (id_ != 0) api_.end(id_);
  }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  const FrameworkApi& api_;
  uint64_t id_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int iterations = 20;
  int host_us = 100;
  int phase_ms = 0;
  bool ops = false;
  bool nccl_on = false;
  int straggler_ms = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      iterations = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--host-us") == 0 && i + 1 < argc) {
      host_us = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--phases") == 0 && i + 1 < argc) {
      phase_ms = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--ops") == 0) {
      ops = true;
    } else if (std::strcmp(argv[i], "--nccl") == 0) {
      nccl_on = true;
    } else if (std::strcmp(argv[i], "--straggler-ms") == 0 && i + 1 < argc) {
      straggler_ms = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--help") == 0) {
      std::printf(
          "usage: aon-synthetic-app [--iterations N] [--host-us US] [--phases MS] [--ops]\n"
          "                         [--nccl] [--straggler-ms MS]\n"
          "An MPI loop on a SYNTHETIC (fake) GPU to demonstrate AON without a GPU.\n"
          "--host-us: host work per iteration, microseconds (default 100)\n"
          "--phases: after the loop, four NVTX phases of MS ms each whose kernels the\n"
          "  synthetic GPU's counters see as compute-bound, memory-bound, launch-bound\n"
          "  (tiny kernels, 20 us of host issuing between them) and host-bound (tiny\n"
          "  kernels, 1 ms of host work outside CUDA calls between them): phase:compute,\n"
          "  phase:memory, phase:launch, phase:host\n"
          "--ops: play AON's PyTorch integration: steps marked by aon_framework_step(),\n"
          "  kernels inside framework ranges model > aten::linear > aten::addmm\n"
          "--nccl: play NCCL around each iteration's all-reduce: its collective reaches\n"
          "  AON's NCCL profiler plugin, its kernel runs on a communication stream\n"
          "--straggler-ms: the last rank reaches each all-reduce MS ms late (a planted\n"
          "  straggler: the others' all-reduce kernels wait for it)\n");
      return 0;
    } else {
      std::fprintf(stderr, "aon-synthetic-app: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (iterations < 0) iterations = 0;
  if (host_us < 0) host_us = 0;
  if (straggler_ms < 0) straggler_ms = 0;
  // This program is the synthetic GPU: the agent must use its synthetic source.
  setenv("AON_SOURCE", "synthetic", 1);

  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const AonSyntheticDeviceV1* gpu = aon::synthetic::LoadFakeDriver("aon-synthetic-app", rank == 0);
  const FrameworkApi framework = ops && gpu != nullptr ? FindFrameworkApi() : FrameworkApi{};
  if (ops && gpu != nullptr && framework.begin == nullptr) {
    std::fprintf(stderr, "aon-synthetic-app: --ops: the agent has no aon_op_begin\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (rank == 0) {
    std::printf("aon-synthetic-app: SYNTHETIC workload, %d ranks, %d iterations (no real GPU)\n",
                size, iterations);
  }
  aon::synthetic::FakeNccl nccl;
  if (nccl_on && gpu != nullptr && !nccl.Open("aon-synthetic-app", rank, size))
    MPI_Abort(MPI_COMM_WORLD, 2);
  const bool straggler = straggler_ms > 0 && size > 1 && rank == size - 1;

  Counts c;
  constexpr uint32_t kCompute = 7, kCopy = 13, kComm = 21;
  // The all-reduce's buffer and its transfer on the synthetic GPU: 4 MiB of
  // float32 in 400 us (a ring over a fast link).
  constexpr size_t kAllReduceFloats = size_t{1} << 20;
  constexpr uint64_t kTransferNs = 400000;
  // A planted imbalance: higher ranks compute a little longer.
  const uint64_t gemm_ns = 200000 + 20000ull * static_cast<uint64_t>(rank);
  float local = static_cast<float>(rank + 1), global = 0.0f;
  for (int it = 0; it < iterations; ++it) {
    std::string label = "iteration " + std::to_string(it);
    if (framework.step != nullptr) framework.step();  // the optimizer's step hook
    nvtxRangePushA(label.c_str());
    ++c.nvtx;

    nvtxRangePushA("compute");
    ++c.nvtx;
    if (gpu) {
      gpu->memcpy(kCopy, 1, 4u << 20, 0), ++c.memcpy;  // batch in: synchronous, pageable
      gpu->memset(kCompute, 1u << 20, 1), ++c.memset;
      // The observer switches itself on and off at each step, as the agent says.
      const bool observe = framework.active != nullptr && framework.active() != 0;
      Range model(framework, observe, "model", AON_OP_MODULE, -1, &c);
      {
        Range linear(framework, observe, "aten::linear", AON_OP_OPERATOR, 2 * it, &c);
        {
          Range addmm(framework, observe, "aten::addmm", AON_OP_OPERATOR, 2 * it + 1, &c);
          gpu->launch_kernel(kCompute, "synthetic_gemm_kernel", gemm_ns, 1024, 256), ++c.kernels;
        }
        gpu->launch_kernel(kCompute, "synthetic_elementwise_kernel", 50000, 4096, 256), ++c.kernels;
      }
      gpu->launch_kernel(kCompute, "synthetic_reduce_kernel", 20000, 128, 512), ++c.kernels;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(host_us));  // host work
    nvtxRangePop();

    nvtxRangePushA("communicate");
    ++c.nvtx;
    if (gpu) gpu->synchronize(kCompute), ++c.sync;
    if (straggler) {
      nvtxRangePushA("straggler_delay");
      ++c.nvtx;
      std::this_thread::sleep_for(std::chrono::milliseconds(straggler_ms));
      nvtxRangePop();
    }
    // The collective from this rank's arrival: its kernel waits for the last
    // rank to arrive (the straggler's delay, for the others), then transfers.
    void* coll = nccl_on && gpu
                     ? nccl.Begin("AllReduce", static_cast<uint64_t>(it), kAllReduceFloats)
                     : nullptr;
    if (nccl_on && gpu) {
      const uint64_t wait = straggler_ms > 0 && !straggler ? uint64_t(straggler_ms) * 1'000'000 : 0;
      gpu->launch_kernel(kComm, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", wait + kTransferNs, 2,
                         512);
      ++c.kernels;
    }
    MPI_Allreduce(&local, &global, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (nccl_on && gpu) gpu->synchronize(kComm), ++c.sync;
    nccl.End(coll);
    if (gpu) gpu->memcpy(kCopy, 2, 64u << 10, 1), ++c.memcpy;  // results out: async, pinned
    nvtxRangePop();

    nvtxMarkA("step end");
    ++c.nvtx;
    if (gpu) gpu->synchronize(AON_SYNTHETIC_ALL_STREAMS), ++c.sync;
    nvtxRangePop();
  }
  // Planted phases for the counters' verdicts (docs/counters.md): each runs
  // for phase_ms of wall time and ends with the device idle.
  const bool profiles =
      gpu != nullptr && gpu->struct_size >= offsetof(AonSyntheticDeviceV1, set_kernel_profile) +
                                                sizeof(gpu->set_kernel_profile);
  struct Phase {
    const char* name;
    const char* kernel;
    double sm, dram, tensor;
    uint64_t kernel_ns, host_gap_us;
    bool spin;  // the host gap is issuing work (a busy loop), not time away from CUDA (a sleep)
  };
  const Phase phases[] = {
      {"phase:compute", "synthetic_bf16_gemm_kernel", 95, 20, 85, 2'000'000, 0, false},
      {"phase:memory", "synthetic_elementwise_add_kernel", 70, 92, 0, 2'000'000, 0, false},
      {"phase:launch", "synthetic_tiny_kernel", 40, 10, 0, 5'000, 20, true},
      {"phase:host", "synthetic_tiny_kernel", 40, 10, 0, 5'000, 1000, false},
  };
  for (const Phase& p : phase_ms > 0 ? std::span<const Phase>(phases) : std::span<const Phase>()) {
    nvtxRangePushA(p.name);
    ++c.nvtx;
    if (profiles) gpu->set_kernel_profile(p.sm, p.dram, p.tensor);
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(phase_ms);
    if (gpu && p.host_gap_us == 0) {
      // GPU-bound: the whole phase's kernels are queued at once, so the device
      // runs them back to back whatever the host does meanwhile (a host
      // stalled on a loaded machine cannot leave it idle); the synchronize
      // below waits for them.
      const uint64_t n =
          std::max<uint64_t>(1, static_cast<uint64_t>(phase_ms) * 1'000'000 / p.kernel_ns);
      for (uint64_t k = 0; k < n; ++k)
        gpu->launch_kernel(kCompute, p.kernel, p.kernel_ns, 1024, 256), ++c.kernels;
    }
    while (gpu && p.host_gap_us > 0 && std::chrono::steady_clock::now() < end) {
      // A tiny kernel, then host time far longer than it: launch overhead (the
      // host busy issuing, as a framework's dispatcher is between launches) or
      // host work away from CUDA (an input pipeline).
      gpu->launch_kernel(kCompute, p.kernel, p.kernel_ns, 1024, 256), ++c.kernels;
      const auto gap = std::chrono::microseconds(p.host_gap_us);
      if (p.spin) {
        for (const auto until = std::chrono::steady_clock::now() + gap;
             std::chrono::steady_clock::now() < until;) {
        }
      } else {
        std::this_thread::sleep_for(gap);
      }
    }
    if (gpu) gpu->synchronize(AON_SYNTHETIC_ALL_STREAMS), ++c.sync;
    nvtxRangePop();
  }
  const float expected = static_cast<float>(size) * static_cast<float>(size + 1) / 2.0f;
  if (iterations > 0 && global != expected) {
    std::fprintf(stderr, "aon-synthetic-app: rank %d: all-reduce gave %g, expected %g\n", rank,
                 global, expected);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  nccl.Close();
  std::printf("AON_EXPECT rank=%d kernels=%d memcpy=%d memset=%d nvtx=%d sync=%d", rank, c.kernels,
              c.memcpy, c.memset, c.nvtx, c.sync);
  if (ops) std::printf(" ops=%d", c.ops);
  std::printf("\n");
  std::fflush(stdout);
  MPI_Finalize();
  return 0;
}
