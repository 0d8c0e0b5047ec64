// aon-example-cuda: a small CUDA + MPI + NCCL + NVTX program that AON is demonstrated
// and checked with. One MPI rank per GPU.
//
//   aon-example-cuda [--iterations N] [--no-nccl] [--delay-rank R --delay-ms MS]
//   mpirun -np 2 aon-example-cuda             (plain)
//   aon-run mpirun -np 2 aon-example-cuda     (profiled)
//
// Every GPU operation the program issues is counted next to the call that issues it, and
// at the end each rank prints exactly one line
//
//   AON_EXPECT rank=R kernels=K memcpy=C memset=S nvtx=V nccl_allreduce=A kernel_names=n1,n2,n3
//              nccl_ops=Func:N,... nccl_comms=C nccl_graph_replays=G
//
// followed by `AON_EXAMPLE_OK rank=R`. A checker compares these numbers with what the
// profiler recorded for that rank:
//   kernels         launches of this program's OWN kernels (NCCL's kernels, named
//                   ncclDevKernel_* / ncclKernel_*, are not included)
//   memcpy          cudaMemcpy + cudaMemcpyAsync calls made by this program
//   memset          cudaMemset + cudaMemsetAsync calls made by this program
//   nvtx            nvtxRangePushA calls + nvtxMarkA calls (default NVTX domain only; NCCL
//                   emits its own ranges in its "NCCL" domain, not counted here)
//   nccl_allreduce  ncclAllReduce calls (0 with --no-nccl)
//   nccl_ops        every NCCL call by the name NCCL's profiler gives it (two communicators:
//                   all-reduce on the first; all-gather, reduce-scatter, broadcast, send/recv
//                   on the second)
//   nccl_graph_replays  launches of a CUDA graph holding one captured all-reduce
//   kernel_names    this program's kernels that were launched, in order of first launch
//
// NCCL makes copies/memsets of its own (communicator setup in ncclCommInitRank and, with
// NCCL_RUNTIME_CONNECT=1, lazy connection setup in the first collective), on its own
// internal streams. Those are not counted above. So that a checker can tell them apart:
//  - NCCL_RUNTIME_CONNECT defaults to 0 here, so NCCL connects inside ncclCommInitRank;
//  - every counted operation is issued by the main thread inside one of the default-domain
//    NVTX ranges "nccl_warmup" (one all-reduce + one memset, before the first iteration)
//    or "iteration <i>"; ncclCommInitRank and ncclCommFinalize/Destroy run outside them;
//  - the program's own copies/memsets/kernels use only the legacy default stream and two
//    streams it creates; NCCL's kernels run on the all-reduce stream.
//
// Kernel names: the kernels are declared extern "C", so their symbol is not mangled and
// CUPTI reports exactly "aon_tiny_kernel", "aon_saxpy_kernel", "aon_heavy_kernel" (no
// parameter list), whether or not the consumer demangles.
//
// Nothing here makes hidden copies, memsets or kernels (no cudaMemcpyToSymbol, thrust,
// cub, managed memory): the counts are exact for the program's own calls.
//
// A planted straggler (the findings corpus, tests/gpu/pathologies/): with --delay-rank R
// --delay-ms MS, rank R computes on the host for MS ms (a busy loop, no CUDA call) in
// the NVTX range "straggler_delay" between "compute" and "communicate" of every
// iteration, so the other ranks wait for it in the all-reduce. Rank 0 then prints, last,
//   TRUTH {"straggle_ms": ..., "straggler_rank": R, "step_ms": ..., ...}
// what the ranks measured: straggle_ms is the median over iterations of the last
// rank's arrival at the all-reduce minus the second-last's (steady_clock, gathered
// through MPI: the ranks of one node share that clock), straggler_rank the rank that
// arrived last most often (tests/gpu/pathologies/README.md names the other keys).

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <map>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// ---------------------------------------------------------------------------------------
// Error checking: every CUDA/NCCL/MPI call is checked; a failure prints file:line and
// aborts the whole job (MPI_Abort), so no rank hangs waiting for a dead peer.

namespace {

int g_rank = -1;

[[noreturn]] void die(const char* file, int line, const char* what, const char* detail) {
  std::fprintf(stderr, "FAIL rank=%d %s:%d: %s: %s\n", g_rank, file, line, what, detail);
  std::fflush(stderr);
  std::fflush(stdout);
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

}  // namespace

#define CUDA_CHECK(call)                                                   \
  do {                                                                     \
    cudaError_t aon_err_ = (call);                                         \
    if (aon_err_ != cudaSuccess)                                           \
      die(__FILE__, __LINE__, #call, cudaGetErrorString(aon_err_));        \
  } while (0)

// After a kernel launch: catches bad launch configurations immediately.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define NCCL_CHECK(call)                                                   \
  do {                                                                     \
    ncclResult_t aon_res_ = (call);                                        \
    if (aon_res_ != ncclSuccess)                                           \
      die(__FILE__, __LINE__, #call, ncclGetErrorString(aon_res_));        \
  } while (0)

#define MPI_CHECK(call)                                                    \
  do {                                                                     \
    int aon_mpi_rc_ = (call);                                              \
    if (aon_mpi_rc_ != MPI_SUCCESS) {                                      \
      char aon_msg_[MPI_MAX_ERROR_STRING] = {0};                           \
      int aon_len_ = 0;                                                    \
      MPI_Error_string(aon_mpi_rc_, aon_msg_, &aon_len_);                  \
      die(__FILE__, __LINE__, #call, aon_msg_);                            \
    }                                                                      \
  } while (0)

#define VERIFY(cond, ...)                                                  \
  do {                                                                     \
    if (!(cond)) {                                                         \
      char aon_buf_[512];                                                  \
      std::snprintf(aon_buf_, sizeof aon_buf_, __VA_ARGS__);               \
      die(__FILE__, __LINE__, "verification failed: " #cond, aon_buf_);    \
    }                                                                      \
  } while (0)

// ---------------------------------------------------------------------------------------
// Kernels. extern "C": CUPTI reports these exact names (see the header comment).

// Tiny: one warp. Thread 0 writes the scale factor the saxpy kernel reads, so the saxpy
// check on the host also checks that this kernel ran.
extern "C" __global__ void aon_tiny_kernel(float* params, float scale) {
  const unsigned t = threadIdx.x;
  params[t] = (t == 0) ? scale : static_cast<float>(t);
}

// Medium: elementwise y = a * x + y over 1M floats, a read from device memory.
extern "C" __global__ void aon_saxpy_kernel(const float* __restrict__ params,
                                            const float* __restrict__ x,
                                            float* __restrict__ y, int n) {
  const float a = params[0];
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = fmaf(a, x[i], y[i]);
}

// Heavy: a chain of `rounds` dependent FMAs per element (a few hundred microseconds on an
// H200 with 1M elements and 8192 rounds). Explicitly rounded operations only, so the host
// can recompute sampled elements bit for bit with std::fmaf.
extern "C" __global__ void aon_heavy_kernel(const float* __restrict__ in,
                                            float* __restrict__ out, int n, int rounds) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float d = __fmul_rn(in[i], 1.0e-3f);
    float acc = 0.0f;
    for (int r = 0; r < rounds; ++r) acc = __fmaf_rn(acc, 0.999f, d);
    out[i] = acc;
  }
}

namespace {

constexpr const char* kKernelNames[] = {"aon_tiny_kernel", "aon_saxpy_kernel",
                                        "aon_heavy_kernel"};
enum KernelId { kTiny = 0, kSaxpy = 1, kHeavy = 2, kNumKernels = 3 };

constexpr int kN = 1 << 20;            // elements of the compute buffers (4 MiB)
constexpr int kCommN = 1 << 18;        // elements of the all-reduce (1 MiB)
constexpr int kHeavyRounds = 8192;     // FMAs per element in aon_heavy_kernel
constexpr int kBlock = 256;
constexpr int kHeavySamples = 64;      // elements of the heavy output checked on the host

// Counted as we go: each counter is incremented next to the call it counts.
struct Counts {
  long kernels = 0;
  long memcpy = 0;
  long memset = 0;
  long nvtx = 0;
  long nccl_allreduce = 0;
  // Every NCCL operation by function name, for the check of AON's NCCL records.
  std::map<std::string, long> nccl_ops;
  int launch_order[kNumKernels] = {-1, -1, -1};  // kernel ids in order of first launch
  int distinct = 0;

  void launched(KernelId id) {
    ++kernels;
    for (int i = 0; i < distinct; ++i)
      if (launch_order[i] == id) return;
    launch_order[distinct++] = id;
  }
};

struct Options {
  long iterations = 20;
  bool use_nccl = true;
  int delay_rank = -1;
  double delay_ms = 0;
};

void usage(FILE* out) {
  std::fprintf(out,
               "usage: aon-example-cuda [--iterations N] [--no-nccl] [--delay-rank R --delay-ms MS]\n"
               "  --iterations N  iterations to run (default 20, 1..1000000)\n"
               "  --no-nccl       do the all-reduce with MPI on the host instead of NCCL\n"
               "  --delay-rank R  a planted straggler: rank R computes on the host for\n"
               "  --delay-ms MS   MS ms (0..10000) before every all-reduce; rank 0 prints a\n"
               "                  TRUTH line of what the ranks measured\n");
}

// Returns 0 on success, 1 for --help, 2 for a bad command line.
int parse_args(int argc, char** argv, Options& opt) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return 1;
    if (arg == "--no-nccl") {
      opt.use_nccl = false;
    } else if (const std::string name = arg.substr(0, arg.find('='));
               name == "--iterations" || name == "--delay-rank" || name == "--delay-ms") {
      const char* value = nullptr;
      if (arg.find('=') == std::string::npos) {
        if (i + 1 >= argc) {
          std::fprintf(stderr, "aon-example-cuda: %s needs a value\n", name.c_str());
          return 2;
        }
        value = argv[++i];
      } else {
        value = argv[i] + name.size() + 1;
      }
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(value, &end);
      const double most = name == "--delay-ms" ? 10000 : name == "--delay-rank" ? 65535 : 1000000;
      const double least = name == "--iterations" ? 1 : 0;
      const bool whole = name != "--delay-ms";
      if (errno != 0 || end == value || *end != '\0' || !(v >= least && v <= most) ||
          (whole && v != std::floor(v))) {
        std::fprintf(stderr, "aon-example-cuda: bad %s value '%s' (%s%g..%g)\n", name.c_str(),
                     value, whole ? "a whole number " : "", least, most);
        return 2;
      }
      if (name == "--iterations") opt.iterations = static_cast<long>(v);
      if (name == "--delay-rank") opt.delay_rank = static_cast<int>(v);
      if (name == "--delay-ms") opt.delay_ms = v;
    } else {
      std::fprintf(stderr, "aon-example-cuda: unknown argument '%s'\n", arg.c_str());
      return 2;
    }
  }
  return 0;
}

// Local rank: launcher environment first (Open MPI, Slurm, MPICH/PMI), else the rank in
// the MPI shared-memory communicator. The communicator is always built (it is collective,
// so every rank must take part whatever its environment says).
int local_rank() {
  MPI_Comm node_comm;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                                &node_comm));
  int node_rank = 0;
  MPI_CHECK(MPI_Comm_rank(node_comm, &node_rank));
  MPI_CHECK(MPI_Comm_free(&node_comm));
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                           "MPI_LOCALRANKID", "PMI_LOCAL_RANK"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    errno = 0;
    const long r = std::strtol(v, &end, 10);
    if (errno == 0 && end != v && *end == '\0' && r >= 0 && r < 1000000)
      return static_cast<int>(r);
  }
  return node_rank;
}

// Values the ranks contribute to the all-reduce; sums of small integers, exact in float.
float comm_value(int rank, long iter, int j) {
  return static_cast<float>((rank + 1) * (j % 7 + 1)) + static_cast<float>(iter % 64);
}
float comm_expected(int world, long iter, int j) {
  return static_cast<float>((j % 7 + 1) * world * (world + 1) / 2) +
         static_cast<float>(world * (iter % 64));
}

float saxpy_scale(long iter) { return 0.5f * static_cast<float>(iter % 4 + 1); }
float compute_input(long iter, int j) {
  return static_cast<float>(j % 1000) * 0.25f + static_cast<float>(iter % 16);
}

float heavy_reference(float in, int rounds) {
  const float d = in * 1.0e-3f;
  float acc = 0.0f;
  for (int r = 0; r < rounds; ++r) acc = std::fmaf(acc, 0.999f, d);
  return acc;
}

}  // namespace

// All-gather, reduce-scatter and broadcast, then a ring of send/recv (one
// group), on `comm`, each counted under the name NCCL's profiler reports.
constexpr int kSmallN = 4096;
constexpr int kGraphReplays = 8;
void other_collectives(ncclComm_t comm, cudaStream_t stream, int rank, int world, float* d_c1,
                       float* d_c2, float* d_cw, Counts* counts) {
  NCCL_CHECK(ncclAllGather(d_c1, d_cw, kSmallN, ncclFloat, comm, stream));
  ++counts->nccl_ops["AllGather"];
  NCCL_CHECK(ncclReduceScatter(d_cw, d_c2, kSmallN, ncclFloat, ncclSum, comm, stream));
  ++counts->nccl_ops["ReduceScatter"];
  NCCL_CHECK(ncclBroadcast(d_c1, d_c2, kSmallN, ncclFloat, 0, comm, stream));
  ++counts->nccl_ops["Broadcast"];
  NCCL_CHECK(ncclGroupStart());
  NCCL_CHECK(ncclSend(d_c1, kSmallN, ncclFloat, (rank + 1) % world, comm, stream));
  ++counts->nccl_ops["Send"];
  NCCL_CHECK(ncclRecv(d_c2, kSmallN, ncclFloat, (rank + world - 1) % world, comm, stream));
  ++counts->nccl_ops["Recv"];
  NCCL_CHECK(ncclGroupEnd());
}

int main(int argc, char** argv) {
  const auto process_start = std::chrono::steady_clock::now();
  // NVLink multicast (NVLS) must stay off (examples/README.md). The launch environment
  // sets it; this is the default if it did not. Before any NCCL call, which reads the
  // environment once.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  // Connect NCCL's channels inside ncclCommInitRank (before any NVTX range) rather than
  // lazily in the first collective, so NCCL's own setup copies stay out of the ranges that
  // hold the counted work. Only a default: the environment wins.
  setenv("NCCL_RUNTIME_CONNECT", "0", 0);

  MPI_CHECK(MPI_Init(&argc, &argv));
  int world = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
  const int rank = g_rank;

  Options opt;
  const int parsed = parse_args(argc, argv, opt);
  if (parsed != 0) {
    if (rank == 0) usage(parsed == 1 ? stdout : stderr);
    MPI_CHECK(MPI_Finalize());
    return parsed == 1 ? 0 : 2;
  }

  // ---- device selection: one rank per GPU ------------------------------------------
  const int lrank = local_rank();  // collective: before anything that can fail alone
  int device_count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&device_count));
  VERIFY(device_count > 0, "no CUDA device visible to rank %d", rank);
  const int device = lrank % device_count;
  CUDA_CHECK(cudaSetDevice(device));
  if (lrank >= device_count && opt.use_nccl)
    std::fprintf(stderr,
                 "aon-example-cuda rank %d: local rank %d shares GPU %d (only %d GPUs); "
                 "NCCL needs one GPU per rank, use --no-nccl\n",
                 rank, lrank, device, device_count);
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  if (rank == 0)
    std::printf("aon-example-cuda: %d ranks, %ld iterations, %s, rank 0 on GPU %d (%s)\n",
                world, opt.iterations, opt.use_nccl ? "NCCL all-reduce" : "MPI all-reduce",
                device, prop.name);
  std::fflush(stdout);

  Counts counts;

  // ---- buffers and streams -----------------------------------------------------------
  // Blocking streams (cudaStreamCreate): work on them is ordered after earlier work on the
  // legacy default stream, which the synchronous cudaMemcpy/cudaMemset calls use.
  cudaStream_t compute_stream = nullptr;
  cudaStream_t comm_stream = nullptr;
  CUDA_CHECK(cudaStreamCreate(&compute_stream));
  CUDA_CHECK(cudaStreamCreate(&comm_stream));

  float* d_params = nullptr;  // 32 floats written by aon_tiny_kernel
  float* d_x = nullptr;
  float* d_y = nullptr;
  float* d_heavy = nullptr;
  float* d_send = nullptr;
  float* d_recv = nullptr;
  CUDA_CHECK(cudaMalloc(&d_params, 32 * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_x, kN * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_y, kN * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_heavy, kN * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_send, kCommN * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_recv, kCommN * sizeof(float)));

  std::vector<float> h_x(kN);      // pageable
  std::vector<float> h_heavy(kN);  // pageable
  float* h_y = nullptr;            // pinned
  float* h_send = nullptr;         // pinned
  float* h_recv = nullptr;         // pinned
  CUDA_CHECK(cudaMallocHost(&h_y, kN * sizeof(float)));
  CUDA_CHECK(cudaMallocHost(&h_send, kCommN * sizeof(float)));
  CUDA_CHECK(cudaMallocHost(&h_recv, kCommN * sizeof(float)));

  int sm_count = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
  const int grid = std::min((kN + kBlock - 1) / kBlock, sm_count * 32);

  // ---- NCCL communicator over MPI_COMM_WORLD ------------------------------------------
  ncclComm_t comm = nullptr;
  ncclComm_t comm2 = nullptr;
  float* d_c1 = nullptr;  // kSmallN floats
  float* d_c2 = nullptr;  // kSmallN floats
  float* d_cw = nullptr;  // kSmallN * world floats
  if (opt.use_nccl) {
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD));
    NCCL_CHECK(ncclCommInitRank(&comm, world, id, rank));

    // Warm-up all-reduce: NCCL connects its channels lazily on the first collective and
    // makes copies of its own then; keep that out of the iteration ranges.
    nvtxRangePushA("nccl_warmup");
    ++counts.nvtx;
    CUDA_CHECK(cudaMemset(d_send, 0, kCommN * sizeof(float)));
    ++counts.memset;
    CUDA_CHECK(cudaDeviceSynchronize());
    NCCL_CHECK(ncclAllReduce(d_send, d_recv, kCommN, ncclFloat, ncclSum, comm, comm_stream));
    ++counts.nccl_allreduce, ++counts.nccl_ops["AllReduce"];
    CUDA_CHECK(cudaStreamSynchronize(comm_stream));
    nvtxRangePop();

    // A second communicator (same ranks, its own id) for the other collective
    // kinds and point-to-point. One of each runs here, outside any NVTX range,
    // because NCCL sets up p2p connections lazily on first use, with copies of
    // its own that must stay out of the iteration ranges.
    NCCL_CHECK(ncclCommSplit(comm, 0, rank, &comm2, nullptr));
    CUDA_CHECK(cudaMalloc(&d_c1, kSmallN * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_c2, kSmallN * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_cw, kSmallN * static_cast<size_t>(world) * sizeof(float)));
    other_collectives(comm2, comm_stream, rank, world, d_c1, d_c2, d_cw, &counts);
    CUDA_CHECK(cudaStreamSynchronize(comm_stream));
  }
  MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));

  // ---- iterations --------------------------------------------------------------------
  const auto t0 = std::chrono::steady_clock::now();
  // Per iteration: its wall time and this rank's arrival at the all-reduce (ns of
  // steady_clock), for the TRUTH line.
  std::vector<double> iteration_ms;
  std::vector<int64_t> arrivals;
  auto steady_ns = [] {
    return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now().time_since_epoch())
                                    .count());
  };
  for (long it = 0; it < opt.iterations; ++it) {
    const auto iteration_start = std::chrono::steady_clock::now();
    const std::string iter_name = "iteration " + std::to_string(it);
    nvtxRangePushA(iter_name.c_str());
    ++counts.nvtx;
    nvtxMarkA(("begin " + iter_name).c_str());
    ++counts.nvtx;

    // -- compute: three kernels, pageable + pinned copies, memsets --
    nvtxRangePushA("compute");
    ++counts.nvtx;
    for (int j = 0; j < kN; ++j) h_x[j] = compute_input(it, j);
    CUDA_CHECK(cudaMemcpy(d_x, h_x.data(), kN * sizeof(float), cudaMemcpyHostToDevice));
    ++counts.memcpy;
    CUDA_CHECK(cudaMemsetAsync(d_y, 0, kN * sizeof(float), compute_stream));
    ++counts.memset;
    const float scale = saxpy_scale(it);
    aon_tiny_kernel<<<1, 32, 0, compute_stream>>>(d_params, scale);
    CUDA_CHECK_LAUNCH();
    counts.launched(kTiny);
    aon_saxpy_kernel<<<grid, kBlock, 0, compute_stream>>>(d_params, d_x, d_y, kN);
    CUDA_CHECK_LAUNCH();
    counts.launched(kSaxpy);
    aon_heavy_kernel<<<grid, kBlock, 0, compute_stream>>>(d_y, d_heavy, kN, kHeavyRounds);
    CUDA_CHECK_LAUNCH();
    counts.launched(kHeavy);
    CUDA_CHECK(cudaMemcpyAsync(h_y, d_y, kN * sizeof(float), cudaMemcpyDeviceToHost,
                               compute_stream));
    ++counts.memcpy;
    CUDA_CHECK(cudaStreamSynchronize(compute_stream));
    // Pageable D2H on the legacy default stream, which waits for the blocking compute
    // stream's work (the heavy kernel).
    CUDA_CHECK(cudaMemcpy(h_heavy.data(), d_heavy, kN * sizeof(float),
                          cudaMemcpyDeviceToHost));
    ++counts.memcpy;

    for (int j = 0; j < kN; ++j) {
      const float want = scale * h_x[j];
      VERIFY(h_y[j] == want, "iteration %ld: saxpy y[%d] = %.9g, expected %.9g", it, j,
             static_cast<double>(h_y[j]), static_cast<double>(want));
    }
    for (int s = 0; s < kHeavySamples; ++s) {
      const int j = static_cast<int>((static_cast<long long>(s) * 16411 + it * 131) % kN);
      const float want = heavy_reference(h_y[j], kHeavyRounds);
      VERIFY(h_heavy[j] == want, "iteration %ld: heavy out[%d] = %.9g, expected %.9g", it,
             j, static_cast<double>(h_heavy[j]), static_cast<double>(want));
    }
    nvtxRangePop();  // compute

    if (rank == opt.delay_rank && opt.delay_ms > 0) {
      // The planted straggler: host computation, no CUDA call, no sleep.
      nvtxRangePushA("straggler_delay");
      ++counts.nvtx;
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::nanoseconds(static_cast<int64_t>(opt.delay_ms * 1e6));
      volatile uint64_t spin = 0;
      while (std::chrono::steady_clock::now() < until) spin = spin + 1;
      nvtxRangePop();
    }

    // -- communicate: one all-reduce (sum of floats) on its own stream --
    nvtxRangePushA("communicate");
    ++counts.nvtx;
    for (int j = 0; j < kCommN; ++j) h_send[j] = comm_value(rank, it, j);
    CUDA_CHECK(cudaMemcpyAsync(d_send, h_send, kCommN * sizeof(float),
                               cudaMemcpyHostToDevice, comm_stream));
    ++counts.memcpy;
    CUDA_CHECK(cudaMemset(d_recv, 0xff, kCommN * sizeof(float)));  // NaNs until overwritten
    ++counts.memset;
    CUDA_CHECK(cudaDeviceSynchronize());
    arrivals.push_back(steady_ns());
    if (opt.use_nccl) {
      NCCL_CHECK(ncclAllReduce(d_send, d_recv, kCommN, ncclFloat, ncclSum, comm,
                               comm_stream));
      ++counts.nccl_allreduce, ++counts.nccl_ops["AllReduce"];
      CUDA_CHECK(cudaMemcpyAsync(h_recv, d_recv, kCommN * sizeof(float),
                                 cudaMemcpyDeviceToHost, comm_stream));
      ++counts.memcpy;
      CUDA_CHECK(cudaStreamSynchronize(comm_stream));
    } else {
      CUDA_CHECK(cudaMemcpyAsync(h_recv, d_send, kCommN * sizeof(float),
                                 cudaMemcpyDeviceToHost, comm_stream));
      ++counts.memcpy;
      CUDA_CHECK(cudaStreamSynchronize(comm_stream));
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, h_recv, kCommN, MPI_FLOAT, MPI_SUM,
                              MPI_COMM_WORLD));
    }
    for (int j = 0; j < kCommN; ++j) {
      const float want = comm_expected(world, it, j);
      VERIFY(h_recv[j] == want, "iteration %ld: all-reduce sum[%d] = %.9g, expected %.9g",
             it, j, static_cast<double>(h_recv[j]), static_cast<double>(want));
    }
    if (opt.use_nccl) {
      other_collectives(comm2, comm_stream, rank, world, d_c1, d_c2, d_cw, &counts);
      CUDA_CHECK(cudaStreamSynchronize(comm_stream));
    }
    nvtxRangePop();  // communicate

    CUDA_CHECK(cudaDeviceSynchronize());
    nvtxRangePop();  // iteration
    iteration_ms.push_back(std::chrono::duration<double, std::milli>(
                               std::chrono::steady_clock::now() - iteration_start)
                               .count());
  }
  const auto iterations_end = std::chrono::steady_clock::now();
  // ---- the all-reduce as a CUDA graph, replayed -----------------------------------------
  // NCCL reports a captured collective once, at capture; AON turns each replay of
  // its kernel into a record of its own. Outside any NVTX range: instantiating a
  // graph may copy things, and those are not this program's copies.
  long graph_replays = 0;
  if (opt.use_nccl) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(comm_stream, cudaStreamCaptureModeThreadLocal));
    NCCL_CHECK(ncclAllReduce(d_send, d_recv, kCommN, ncclFloat, ncclSum, comm, comm_stream));
    ++counts.nccl_allreduce, ++counts.nccl_ops["AllReduce"];
    CUDA_CHECK(cudaStreamEndCapture(comm_stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int r = 0; r < kGraphReplays; ++r) {
      CUDA_CHECK(cudaGraphLaunch(exec, comm_stream));
      ++graph_replays;
    }
    CUDA_CHECK(cudaStreamSynchronize(comm_stream));
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
  }

  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
          .count();

  // ---- clean up ----------------------------------------------------------------------
  CUDA_CHECK(cudaDeviceSynchronize());
  if (comm2 != nullptr) {
    NCCL_CHECK(ncclCommFinalize(comm2));
    NCCL_CHECK(ncclCommDestroy(comm2));
    CUDA_CHECK(cudaFree(d_c1));
    CUDA_CHECK(cudaFree(d_c2));
    CUDA_CHECK(cudaFree(d_cw));
  }
  if (comm != nullptr) {
    NCCL_CHECK(ncclCommFinalize(comm));
    NCCL_CHECK(ncclCommDestroy(comm));
  }
  CUDA_CHECK(cudaFreeHost(h_recv));
  CUDA_CHECK(cudaFreeHost(h_send));
  CUDA_CHECK(cudaFreeHost(h_y));
  CUDA_CHECK(cudaFree(d_recv));
  CUDA_CHECK(cudaFree(d_send));
  CUDA_CHECK(cudaFree(d_heavy));
  CUDA_CHECK(cudaFree(d_y));
  CUDA_CHECK(cudaFree(d_x));
  CUDA_CHECK(cudaFree(d_params));
  CUDA_CHECK(cudaStreamDestroy(comm_stream));
  CUDA_CHECK(cudaStreamDestroy(compute_stream));

  std::string nccl_ops;
  for (const auto& [func, n] : counts.nccl_ops) {
    if (!nccl_ops.empty()) nccl_ops += ',';
    nccl_ops += func + ":" + std::to_string(n);
  }
  std::string names;
  for (int i = 0; i < counts.distinct; ++i) {
    if (i > 0) names += ',';
    names += kKernelNames[counts.launch_order[i]];
  }
  if (rank == 0)
    std::printf("aon-example-cuda: %ld iterations in %.1f ms (%.3f ms/iteration)\n",
                opt.iterations, elapsed_ms, elapsed_ms / static_cast<double>(opt.iterations));
  std::printf("AON_EXPECT rank=%d kernels=%ld memcpy=%ld memset=%ld nvtx=%ld "
              "nccl_allreduce=%ld kernel_names=%s nccl_ops=%s nccl_comms=%d nccl_graph_replays=%ld\n",
              rank, counts.kernels, counts.memcpy, counts.memset, counts.nvtx,
              counts.nccl_allreduce, names.c_str(), nccl_ops.c_str(), opt.use_nccl ? 2 : 0,
              graph_replays);
  std::printf("AON_EXAMPLE_OK rank=%d\n", rank);
  std::fflush(stdout);

  if (opt.delay_rank >= 0) {
    // Every rank's arrivals to rank 0; the ranks of one node share steady_clock.
    std::vector<int64_t> all(rank == 0 ? arrivals.size() * static_cast<size_t>(world) : 0);
    MPI_CHECK(MPI_Gather(arrivals.data(), static_cast<int>(arrivals.size()), MPI_INT64_T,
                         all.data(), static_cast<int>(arrivals.size()), MPI_INT64_T, 0,
                         MPI_COMM_WORLD));
    if (rank == 0) {
      const size_t n = arrivals.size();
      std::vector<double> straggle;
      std::vector<long> last_count(static_cast<size_t>(world), 0);
      for (size_t i = 0; i < n; ++i) {
        int64_t last = INT64_MIN, second = INT64_MIN;
        int last_rank = 0;
        for (int q = 0; q < world; ++q) {
          const int64_t a = all[static_cast<size_t>(q) * n + i];
          if (a >= last) second = last, last = a, last_rank = q;
          else if (a > second) second = a;
        }
        ++last_count[static_cast<size_t>(last_rank)];
        if (world > 1) straggle.push_back(static_cast<double>(last - second) / 1e6);
      }
      auto median = [](std::vector<double> v) {
        if (v.empty()) return 0.0;
        std::sort(v.begin(), v.end());
        const size_t m = v.size() / 2;
        return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
      };
      const auto most = std::max_element(last_count.begin(), last_count.end());
      const double process_s = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                            process_start)
                                   .count();
      std::printf("TRUTH {\"steps\": %zu, \"warmup\": 0, \"measured_steps\": %zu, "
                  "\"run_s\": %.6f, \"process_s\": %.6f, \"step_ms\": %.6f, "
                  "\"straggle_ms\": %.6f, \"straggler_rank\": %ld, \"ranks\": %d}\n",
                  n, n, std::chrono::duration<double>(iterations_end - t0).count(), process_s,
                  median(iteration_ms), median(straggle),
                  static_cast<long>(most - last_count.begin()), world);
      std::fflush(stdout);
    }
  }

  MPI_CHECK(MPI_Finalize());
  return 0;
}
