// aon-synthetic-pathology: the planted problems of tests/gpu/pathologies/ on the
// agent's SYNTHETIC device, for machines without a GPU (CI). Not a GPU workload
// and never presented as one: its rank files say source = "synthetic".
//
//   aon-run [--mode full] aon-synthetic-pathology --case NAME [--steps N] [sizes]
//
// Like aon-synthetic-app it plays the CUDA driver (fake_driver.h), marks steps
// as AON's PyTorch hook does (aon_framework_step at the end of each step's
// launches) and emits real NVTX ranges ("step" > phases; XLA's compile ranges
// in the "TSL" domain for the compile cases). Each case plants one cause of a
// report finding, or none, and its last line on stdout is
//   TRUTH <json>
// what the program measured about itself, in the keys the GPU corpus uses
// (tests/gpu/pathologies/README.md): steps, warmup, measured_steps, run_s,
// process_s, step_ms and the case's figure. The GPU's idle time is known here
// exactly: the device's timing model (synthetic_source.cc: an operation starts
// 4 us after it is issued or when its stream is free, whichever is later, and
// lasts its duration) is replayed on the issue times this program reads just
// before each call, so `idle_per_step_ms` is the median over measured steps of
// the time the stream had nothing to run. Every call of the device is made on
// one stream, so that replay is the whole device.
//
// Cases (sizes are options, so that the corpus varies them):
//   host_work    --host-ms of host work outside any CUDA call, then --gpu-ms of
//                kernels: the GPU idles while the host prepares the next batch
//                (an input pipeline). Figure idle_per_step_ms.
//   item_sync    --gpu-ms of kernels, a stream synchronize (PyTorch's .item()),
//                then --host-ms of host work with nothing queued. sync_idle_ms.
//   pageable     a synchronous pageable host-to-device copy of --mb MiB, and a
//                --pinned-mb pinned asynchronous one, then --gpu-ms of kernels;
//                pageable_saving_ms = the pageable copy's time less the time
//                the device takes for the same bytes pinned (its copy model's
//                two rates: the one figure this program states, not measures).
//   tiny_kernels --kernels tiny kernels of --kernel-us, each issued --spacing-us
//                after the previous one: launch overhead (launch_overhead_ms:
//                the idle after dispatch-sized host silences, under 100 us; on
//                a loaded machine the host is sometimes not run for longer, and
//                that idle is not the planted launch overhead).
//   memory_bound phase "elementwise" (DRAM-bound kernels, --phase-ms) and phase
//                "gemm" (tensor-bound, --gemm-ms) per step, each waited for;
//                elementwise_s = the wall time of every "elementwise" range.
//   compute_bound  phase "gemm" of --gpu-ms tensor-bound kernels, the host
//                waiting until the last is left before it marks the step (one
//                kernel ahead, never dry): nothing is wrong.
//   compile_startup  XLA compiling module jit_step for --compile-ms in the first
//                step (host), then steps of --gpu-ms: compile_s.
//   recompile    XLA compiling jit_step again every step (--compile-ms), then
//                --gpu-ms of its kernels: recompile_s = every step's compile but
//                the first.
//   straggler    MPI ranks (mpirun -np N), each step --gpu-ms of kernels, then an
//                all-reduce; rank --delay-rank first computes on the host for
//                --delay-ms (NVTX "straggler_delay"). The all-reduce plays NCCL:
//                its profiler plugin (NCCL_PROFILER_PLUGIN, AON's agent) gets the
//                Coll event at each rank's arrival, the device runs the
//                collective's kernel from the arrival to the last rank's and its
//                transfer (an open kernel, closed once MPI has exchanged the
//                arrivals: the ranks really wait for the last one, on the GPU as
//                NCCL's do, and a loaded host's late MPI wake-up keeps the
//                kernel running instead of idling the GPU). Then a small broadcast (the ranks tied
//                within microseconds: which one is last there is noise). Rank 0 prints the TRUTH
//                line: straggle_ms = median over measured steps of the last arrival at the
//                all-reduce minus the second-last, straggler_rank the rank last most often there.
#include <fcntl.h>
#include <linux/futex.h>
#include <mpi.h>
#include <nvtx3/nvToolsExt.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "aon/synthetic_device.h"
#include "fake_driver.h"
#include "fake_nccl.h"

namespace {

constexpr const char* kProgram = "aon-synthetic-pathology";
constexpr uint32_t kStream = 7;
constexpr uint64_t kLaunchLatencyNs = AON_SYNTHETIC_LAUNCH_LATENCY_NS;
constexpr int kWarmup = 3;
// The longest host silence between two device calls that is a framework's
// dispatch of the next operation (microseconds; the planted spacings are at
// most tens): a longer one is host work, or the host not running at all.
constexpr uint64_t kDispatchNs = 100000;

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
const uint64_t g_started = NowNs();

uint64_t Ns(double ms) { return static_cast<uint64_t>(ms * 1e6); }
double Ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

// Host work until `ns` from now, as a sleep: a busy loop would be what a
// loaded machine takes the CPU from first (a thread that sleeps is woken ahead
// of one that computes), and the planted pattern must survive a busy CI host.
// AON cannot tell the two apart anyway (no CUDA call either way); the timer
// slack is set to its least at the start so that microseconds mean microseconds.
void HostWork(uint64_t ns) {
  const uint64_t until = NowNs() + ns;
  timespec ts{static_cast<time_t>(until / 1000000000ull), static_cast<long>(until % 1000000000ull)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Options {
  std::string name;
  int steps = 60;
  double host_ms = 8, gpu_ms = 2, mb = 64, pinned_mb = 8, kernel_us = 2, spacing_us = 15;
  int kernels = 200;
  double phase_ms = 12, gemm_ms = 3, compile_ms = 300;
  double delay_ms = 10;
  int delay_rank = 1;
};

// The device, the replay of its timing and the step marks.
class Run {
 public:
  explicit Run(const AonSyntheticDeviceV1* gpu) : gpu_(gpu) {
    step_ = aon::synthetic::AgentFunction<void (*)()>("aon_framework_step");
    tsl_ = nvtxDomainCreateA("TSL");
  }

  // Each device call: the replay first (issue time read just before the call).
  void Kernel(const char* name, uint64_t ns) {
    Issue(ns);
    gpu_->launch_kernel(kStream, name, ns, 1024, 256);
    returned_ = NowNs();
  }
  void Copy(uint8_t kind, uint64_t bytes, bool async, uint64_t modeled_ns) {
    Issue(modeled_ns);
    gpu_->memcpy(kStream, kind, bytes, async ? 1 : 0);
    returned_ = NowNs();
  }
  void Sync() {
    gpu_->synchronize(kStream);
    returned_ = NowNs();
  }
  // Whether the device (an agent of this build or an older one) has open kernels.
  bool CanOpenKernels() const {
    return gpu_->struct_size >= offsetof(AonSyntheticDeviceV1, close_kernel) + sizeof(void*);
  }
  // A kernel that runs until CloseKernel gives its end (NCCL's kernels wait on
  // the GPU for their peers). Needs CanOpenKernels().
  void OpenKernel(const char* name) {
    Issue(0);
    gpu_->launch_open_kernel(kStream, name, 1024, 256);
    returned_ = NowNs();
  }
  void CloseKernel(uint64_t end_ns) {
    gpu_->close_kernel(kStream, end_ns);
    busy_until_ = std::max(busy_until_, end_ns);
  }
  void Profile(double sm, double dram, double tensor) {
    gpu_->set_kernel_profile(sm, dram, tensor);
  }

  void BeginStep() {
    step_start_ = NowNs();
    if (steps_.empty()) first_start_ = step_start_;
    step_idle_ = step_dispatch_idle_ = 0;
    nvtxRangePushA("step");
  }
  // The step's launches are done: the optimizer's step hook marks it.
  void EndStep() {
    if (step_ != nullptr) step_();
    nvtxRangePop();
    const uint64_t end = NowNs();
    last_end_ = end;
    steps_.push_back({Ms(end - step_start_), Ms(step_idle_), Ms(step_dispatch_idle_)});
  }
  // When the stream runs dry, as the replay has it (0: nothing issued yet).
  uint64_t busy_until() const { return busy_until_; }

  void Compile(const std::string& module, int program_id, uint64_t ns) {
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    const std::string name =
        "XlaCompile:#module=" + module + ",program_id=" + std::to_string(program_id) + "#";
    a.message.ascii = name.c_str();
    nvtxDomainRangePushEx(tsl_, &a);
    HostWork(ns);
    nvtxDomainRangePop(tsl_);
  }

  // Medians over the steps after the warm-up, and the run's extent.
  std::map<std::string, double> Figures() const {
    std::vector<double> wall, idle, dispatch;
    for (size_t i = kWarmup; i < steps_.size(); ++i) {
      wall.push_back(steps_[i].wall_ms);
      idle.push_back(steps_[i].idle_ms);
      dispatch.push_back(steps_[i].dispatch_idle_ms);
    }
    return {{"steps", static_cast<double>(steps_.size())},
            {"warmup", kWarmup},
            {"measured_steps", static_cast<double>(wall.size())},
            {"run_s", static_cast<double>(last_end_ - first_start_) / 1e9},
            {"step_ms", Median(wall)},
            {"idle_per_step_ms", Median(idle)},
            {"dispatch_idle_ms", Median(dispatch)}};
  }

 private:
  // The stream's idle before an operation issued now; the share of it after
  // a host silence of dispatch size (under kDispatchNs since the last device
  // call returned) is the idle of launch overhead, the rest the host's.
  void Issue(uint64_t ns) {
    const uint64_t now = NowNs(), at = now + kLaunchLatencyNs;
    if (at > busy_until_ && busy_until_ != 0) {
      step_idle_ += at - busy_until_;
      if (now - returned_ < kDispatchNs) step_dispatch_idle_ += at - busy_until_;
    }
    busy_until_ = std::max(at, busy_until_) + ns;
  }

  struct Step {
    double wall_ms, idle_ms, dispatch_idle_ms;
  };
  const AonSyntheticDeviceV1* gpu_;
  void (*step_)() = nullptr;
  nvtxDomainHandle_t tsl_ = nullptr;
  uint64_t busy_until_ = 0, returned_ = 0, step_start_ = 0, step_idle_ = 0, step_dispatch_idle_ = 0,
           first_start_ = 0, last_end_ = 0;
  std::vector<Step> steps_;
};

// --gpu-ms of work in kernels of at most 1 ms.
void GpuWork(Run& run, double ms, const char* name = "synthetic_gemm_kernel") {
  const uint64_t total = Ns(ms);
  for (uint64_t done = 0; done < total;) {
    const uint64_t k = std::min<uint64_t>(total - done, 1000000);
    run.Kernel(name, k);
    done += k;
  }
}

// The copy durations the device gives (its model: aon/synthetic_device.h).
uint64_t CopyNs(uint64_t bytes, bool pinned) {
  return AON_SYNTHETIC_COPY_FIXED_NS +
         static_cast<uint64_t>(static_cast<double>(bytes) /
                               (pinned ? AON_SYNTHETIC_COPY_BYTES_PER_NS_PINNED
                                       : AON_SYNTHETIC_COPY_BYTES_PER_NS_PAGEABLE));
}

using Figures = std::map<std::string, double>;

Figures HostWorkCase(Run& run, const Options& o) {
  for (int s = 0; s < o.steps; ++s) {
    run.BeginStep();
    nvtxRangePushA("data");
    HostWork(Ns(o.host_ms));  // the batch, prepared on the host
    nvtxRangePop();
    nvtxRangePushA("forward_backward");
    GpuWork(run, o.gpu_ms);
    nvtxRangePop();
    run.EndStep();
  }
  return run.Figures();
}

Figures ItemSyncCase(Run& run, const Options& o) {
  for (int s = 0; s < o.steps; ++s) {
    run.BeginStep();
    GpuWork(run, o.gpu_ms);
    run.Sync();               // loss.item()
    HostWork(Ns(o.host_ms));  // logging what it read, with nothing queued
    run.EndStep();
  }
  Figures f = run.Figures();
  f["sync_idle_ms"] = f["idle_per_step_ms"];
  return f;
}

Figures PageableCase(Run& run, const Options& o) {
  const auto bytes = static_cast<uint64_t>(o.mb * 1048576.0);
  const auto pinned_bytes = static_cast<uint64_t>(o.pinned_mb * 1048576.0);
  for (int s = 0; s < o.steps; ++s) {
    run.BeginStep();
    run.Copy(1, bytes, false, CopyNs(bytes, false));              // the batch, from pageable memory
    run.Copy(1, pinned_bytes, true, CopyNs(pinned_bytes, true));  // the labels, pinned
    GpuWork(run, o.gpu_ms);
    run.EndStep();
  }
  Figures f = run.Figures();
  // What the device's copy model (its two rates) says pinning saves a step:
  // stated, not measured; AON must find it from the copies' records.
  f["pageable_saving_ms"] = Ms(CopyNs(bytes, false) - CopyNs(bytes, true));
  return f;
}

Figures TinyKernelsCase(Run& run, const Options& o) {
  for (int s = 0; s < o.steps; ++s) {
    run.BeginStep();
    for (int k = 0; k < o.kernels; ++k) {
      run.Kernel("synthetic_tiny_elementwise_kernel", Ns(o.kernel_us / 1000));
      HostWork(Ns(o.spacing_us / 1000));  // the framework's dispatch of the next op
    }
    run.EndStep();
  }
  Figures f = run.Figures();
  f["launch_overhead_ms"] = f["dispatch_idle_ms"];
  return f;
}

Figures MemoryBoundCase(Run& run, const Options& o) {
  uint64_t elementwise = 0;
  for (int s = 0; s < o.steps; ++s) {
    run.BeginStep();
    const uint64_t t = NowNs();
    nvtxRangePushA("elementwise");
    run.Profile(70, 92, 0);
    GpuWork(run, o.phase_ms, "synthetic_elementwise_add_kernel");
    run.Sync();
    nvtxRangePop();
    elementwise += NowNs() - t;
    nvtxRangePushA("gemm");
    run.Profile(95, 20, 85);
    GpuWork(run, o.gemm_ms, "synthetic_bf16_gemm_kernel");
    run.Sync();
    nvtxRangePop();
    run.EndStep();
  }
  Figures f = run.Figures();
  f["elementwise_s"] = static_cast<double>(elementwise) / 1e9;
  return f;
}

Figures ComputeBoundCase(Run& run, const Options& o) {
  run.Profile(95, 20, 85);
  const uint64_t kernel = std::min<uint64_t>(Ns(o.gpu_ms), 1000000);  // GpuWork's largest
  for (int s = 0; s < o.steps; ++s) {
    run.BeginStep();
    nvtxRangePushA("gemm");
    GpuWork(run, o.gpu_ms, "synthetic_bf16_gemm_kernel");
    // The host waits until the step's last kernel is left (as on an event
    // recorded before it), then marks the step: it never runs ahead by more
    // than that kernel, and never lets the GPU run dry.
    const uint64_t now = NowNs(), until = run.busy_until() > kernel ? run.busy_until() - kernel : 0;
    if (until > now) HostWork(until - now);
    nvtxRangePop();
    run.EndStep();
  }
  return run.Figures();
}

Figures CompileCase(Run& run, const Options& o, bool every_step) {
  uint64_t compile = 0, recompile = 0;
  for (int s = 0; s < o.steps; ++s) {
    run.BeginStep();
    if (s == 0 || every_step) {
      const uint64_t t = NowNs();
      run.Compile("jit_step", s + 1, Ns(o.compile_ms));
      const uint64_t took = NowNs() - t;
      compile += took;
      if (s > 0) recompile += took;
    }
    GpuWork(run, o.gpu_ms);
    run.Sync();  // the step's result, as JAX's block_until_ready
    run.EndStep();
  }
  Figures f = run.Figures();
  f["compile_s"] = static_cast<double>(compile) / 1e9;
  f["recompile_s"] = static_cast<double>(recompile) / 1e9;
  return f;
}

// The ranks meeting on the host, each giving a value and getting every rank's,
// through shared memory: each writes its value and counts itself in, the last
// one wakes the others (a futex). MPI's collectives busy-poll (Open MPI yields,
// which the scheduler mostly ignores) and progress only while each rank polls:
// with more ranks than cores, or a loaded host, the waiting ranks took the CPU
// from the one they waited for and learned of its arrival milliseconds late.
// All ranks are on one host (the corpus runs mpirun on one machine).
class HostRendezvous {
 public:
  static constexpr int kMaxRanks = 64;
  ~HostRendezvous() {
    if (shared_ != nullptr) munmap(shared_, sizeof(Shared));
  }
  // Collective over MPI_COMM_WORLD. False with the reason on stderr.
  bool Open(int rank, int nranks) {
    if (nranks > kMaxRanks) {
      std::fprintf(stderr, "%s: at most %d ranks\n", kProgram, kMaxRanks);
      return false;
    }
    rank_ = rank;
    nranks_ = nranks;
    char name[64] = {};
    if (rank == 0) {
      std::snprintf(name, sizeof(name), "/aon-pathology-%d-%llu", static_cast<int>(getpid()),
                    static_cast<unsigned long long>(NowNs()));
    }
    MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, MPI_COMM_WORLD);
    int fd = -1;
    if (rank == 0) {
      fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
      if (fd >= 0 && ftruncate(fd, sizeof(Shared)) != 0) {
        close(fd);
        fd = -1;
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0) fd = shm_open(name, O_RDWR, 0600);
    void* at = fd >= 0 ? mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                       : MAP_FAILED;
    if (fd >= 0) close(fd);
    int ok = at != MAP_FAILED, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0) shm_unlink(name);
    if (at != MAP_FAILED) shared_ = static_cast<Shared*>(at);
    if (!all_ok)
      std::fprintf(stderr, "%s: rank %d: shared memory %s: %s\n", kProgram, rank, name,
                   ok ? "another rank failed" : std::strerror(errno));
    return all_ok != 0;
  }
  // Every rank's `value`, once all have given theirs.
  void Exchange(int64_t value, std::vector<int64_t>* all) {
    const uint32_t round = round_++;
    int64_t* values = shared_->values[round % 2];
    values[rank_] = value;
    if (shared_->arrived.fetch_add(1) + 1 == static_cast<uint32_t>(nranks_)) {
      shared_->arrived.store(0);
      shared_->round.store(round + 1);
      syscall(SYS_futex, &shared_->round, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
    } else {
      for (uint32_t r; (r = shared_->round.load()) == round;) {
        syscall(SYS_futex, &shared_->round, FUTEX_WAIT, r, nullptr, nullptr, 0);
      }
    }
    all->assign(values, values + nranks_);
  }

 private:
  // Two rounds' values: a rank may give the next round's before a slower one
  // has read this round's, never two rounds ahead.
  struct Shared {
    std::atomic<uint32_t> arrived;
    std::atomic<uint32_t> round;
    int64_t values[2][kMaxRanks];
  };
  Shared* shared_ = nullptr;
  int rank_ = 0, nranks_ = 0;
  uint32_t round_ = 0;
};

Figures StragglerCase(Run& run, const Options& o) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  aon::synthetic::FakeNccl nccl;
  HostRendezvous meet;
  if (nranks < 2 || o.delay_rank >= nranks || !run.CanOpenKernels() || !meet.Open(rank, nranks) ||
      !nccl.Open(kProgram, rank, nranks)) {
    if (nranks < 2 || o.delay_rank >= nranks)
      std::fprintf(stderr, "%s: the straggler case needs mpirun -np N (N >= 2, > --delay-rank)\n",
                   kProgram);
    else if (!run.CanOpenKernels())
      std::fprintf(stderr, "%s: the synthetic device of this agent has no open kernels (older)\n",
                   kProgram);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  constexpr uint64_t kTransferNs = 300000, kBroadcastNs = 50000;
  std::vector<int64_t> arrivals(static_cast<size_t>(nranks)), ignored;
  std::vector<double> straggle;
  std::vector<int> last_count(static_cast<size_t>(nranks), 0);
  for (int s = 0; s < o.steps; ++s) {
    run.BeginStep();
    GpuWork(run, o.gpu_ms);
    run.Sync();  // the backward pass's gradients are ready
    if (rank == o.delay_rank) {
      nvtxRangePushA("straggler_delay");
      HostWork(Ns(o.delay_ms));
      nvtxRangePop();
    }
    // The all-reduce: arrival, the kernel (waiting on the GPU for the last
    // rank, then the transfer), the ranks meeting on the host, the end. The
    // kernel ends at the last arrival plus the transfer, or when this rank's
    // host learned of the last arrival if that was later (a loaded host): the
    // GPU never idles for the host's own waiting to meet, which is this
    // program's plumbing, not what it plays (NCCL's host calls return at once).
    const auto arrival = static_cast<int64_t>(NowNs());
    void* coll = nccl.Begin("AllReduce", static_cast<uint64_t>(2 * s), 1 << 20);
    run.OpenKernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    meet.Exchange(arrival, &arrivals);
    const auto last_arrival =
        static_cast<uint64_t>(*std::max_element(arrivals.begin(), arrivals.end()));
    run.CloseKernel(std::max(last_arrival + kTransferNs, NowNs()));
    run.Sync();
    nccl.End(coll);
    // A small broadcast that every rank reaches together.
    void* bcast = nccl.Begin("Broadcast", static_cast<uint64_t>(2 * s + 1), 1024);
    run.OpenKernel("ncclDevKernel_Broadcast_RING_LL");
    const uint64_t bcast_issued = NowNs();
    meet.Exchange(0, &ignored);
    run.CloseKernel(std::max(bcast_issued + kBroadcastNs, NowNs()));
    run.Sync();
    nccl.End(bcast);
    run.EndStep();
    if (s >= kWarmup) {
      const auto last = std::max_element(arrivals.begin(), arrivals.end());
      int64_t second = INT64_MIN;
      for (auto it = arrivals.begin(); it != arrivals.end(); ++it)
        if (it != last) second = std::max(second, *it);
      straggle.push_back(static_cast<double>(*last - second) / 1e6);
      ++last_count[static_cast<size_t>(last - arrivals.begin())];
    }
  }
  nccl.Close();
  Figures f = run.Figures();
  f["straggle_ms"] = Median(straggle);
  f["straggler_rank"] = static_cast<double>(std::max_element(last_count.begin(), last_count.end()) -
                                            last_count.begin());
  f["ranks"] = nranks;
  f["rank"] = rank;
  return f;
}

bool Parse(int argc, char** argv, Options* o) {
  std::map<std::string, double*> numbers = {{"--host-ms", &o->host_ms},
                                            {"--gpu-ms", &o->gpu_ms},
                                            {"--mb", &o->mb},
                                            {"--pinned-mb", &o->pinned_mb},
                                            {"--kernel-us", &o->kernel_us},
                                            {"--spacing-us", &o->spacing_us},
                                            {"--phase-ms", &o->phase_ms},
                                            {"--gemm-ms", &o->gemm_ms},
                                            {"--compile-ms", &o->compile_ms},
                                            {"--delay-ms", &o->delay_ms}};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--case" && has_value) {
      o->name = argv[++i];
    } else if ((a == "--steps" || a == "--kernels") && has_value) {
      const int v = std::atoi(argv[++i]);
      if (v <= 0) return false;
      (a == "--steps" ? o->steps : o->kernels) = v;
    } else if (a == "--delay-rank" && has_value) {
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || v < 0 || v > 65535) return false;
      o->delay_rank = static_cast<int>(v);
    } else if (numbers.count(a) && has_value) {
      char* end = nullptr;
      const double v = std::strtod(argv[++i], &end);
      if (end == argv[i] || *end != '\0' || !(v >= 0 && v < 1e6)) return false;
      *numbers[a] = v;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const std::map<std::string, std::function<Figures(Run&, const Options&)>> cases = {
      {"host_work", HostWorkCase},
      {"item_sync", ItemSyncCase},
      {"pageable", PageableCase},
      {"tiny_kernels", TinyKernelsCase},
      {"memory_bound", MemoryBoundCase},
      {"compute_bound", ComputeBoundCase},
      {"compile_startup", [](Run& r, const Options& x) { return CompileCase(r, x, false); }},
      {"recompile", [](Run& r, const Options& x) { return CompileCase(r, x, true); }},
      {"straggler", StragglerCase}};
  if (!Parse(argc, argv, &o) || !cases.count(o.name)) {
    std::fprintf(stderr,
                 "usage: %s --case NAME [--steps N] [--host-ms X] [--gpu-ms X] [--mb X] "
                 "[--pinned-mb X] [--kernels N] [--kernel-us X] [--spacing-us X] [--phase-ms X] "
                 "[--gemm-ms X] [--compile-ms X] [--delay-rank R] [--delay-ms X]\ncases:",
                 kProgram);
    for (const auto& [name, fn] : cases) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr,
                 "\n(the header of examples/synthetic/pathology.cc says what each plants)\n");
    return 2;
  }
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // HostWork's sleeps end when asked
  // This program is the synthetic GPU: the agent must use its synthetic source.
  setenv("AON_SOURCE", "synthetic", 1);
  const AonSyntheticDeviceV1* gpu = aon::synthetic::LoadFakeDriver(kProgram, true);
  if (gpu == nullptr) return 3;
  std::printf("%s: SYNTHETIC workload, case %s, %d steps (no real GPU)\n", kProgram, o.name.c_str(),
              o.steps);
  // Only the straggler case is an MPI program: the others run alone.
  const bool mpi = o.name == "straggler";
  if (mpi) MPI_Init(&argc, &argv);
  Run run(gpu);
  Figures f = cases.at(o.name)(run, o);
  gpu->synchronize(AON_SYNTHETIC_ALL_STREAMS);
  if (mpi) {
    const bool truth_here = f["rank"] == 0;
    MPI_Finalize();
    if (!truth_here) return 0;  // rank 0 says what every rank measured
  }
  f["process_s"] = static_cast<double>(NowNs() - g_started) / 1e9;
  std::string json;
  for (const auto& [key, value] : f) {
    char number[64];
    std::snprintf(number, sizeof number, "%.6g", value);
    json += (json.empty() ? "{\"" : ", \"") + key + "\": " + number;
  }
  std::fflush(stderr);
  std::printf("TRUTH %s}\n", json.c_str());
  return 0;
}
