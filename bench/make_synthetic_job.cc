// aon-bench-make-job: a synthetic job directory for merge benchmarks, and the
// raw read baseline the merge is compared with.
//
//   aon-bench-make-job --ranks N --records-per-rank R [--seed S] --out DIR
//                      [--jobs J] [--nccl raw|resolved] [--deflate D] [--chunk C]
//   aon-bench-make-job --read DIR [--jobs J]
//
// Generate: writes DIR/rank-NNNNN.h5 for ranks 0..N-1, exactly R records each,
// through TraceWriter as the node collector writes a rank file
// (collector/src/collector.cc): created with 4096-record chunks and
// deflate 4; metadata first written as "running" (truncated = 1) and flushed;
// then at every flush (1 s of trace time, or 8 MiB of records pending, as the
// collector does with a 32 MiB ring) each kind's records appended in completion
// order, the new strings appended (AppendStrings), last_record_ns and end_ns set,
// Flush(); at the end the final RankMetadata and Finish() (atomic rename).
//
// The record mix: "op groups" of 100 records standing for a slice of a PyTorch
// DDP training step (as in collector_benchmark.cc): 35 kernels (26 on the compute
// stream, 8 on a side stream, 1 NCCL all-reduce kernel), 45 runtime API records
// (35 cudaLaunchKernel, 5 cudaMemcpyAsync, 2 cudaMemsetAsync, cudaStreamWaitEvent,
// cudaEventSynchronize, cudaStreamSynchronize), 5 memcpy, 2 memset, 5 sync, 5 NVTX
// push/pop ranges (one outer, four nested), 1 NCCL collective and 2 external
// correlations (a PyTorch op id, CUSTOM0, and the NCCL launch's CUSTOM2 id); plus
// one NCCL communicator record (kComm) per rank. The last group is cut so that a
// rank holds exactly R records. 39 compute kernel names with Zipf-like
// frequencies plus the NCCL kernel (40 names), 20 NVTX names.
//
// Time: host API calls 2..10 us long, 1..20 us apart; kernels 2..200 us
// (log-uniform) 3..8 us after their launch and 1..20 us after the previous work of
// their stream; a group starts every ~2 ms of a schedule all ranks share (a
// data-parallel step: the same ops in the same order on every rank, which is why
// op order, kernel choice and NCCL sizes come from a generator seeded by --seed
// alone), and each rank's own timings (durations, gaps) from a generator seeded by
// (seed, rank). The all-reduce kernel of group g ends no earlier than a shared
// time (the last rank's arrival), so ranks wait in it as in a real job. NCCL
// collectives match across ranks: one communicator (comm_hash from the seed),
// seq_number = group index, same func, count and bytes; comm_rank = rank,
// comm_nranks = N, comm_nnodes = ceil(N / 8).
//
// Clocks: every rank's timestamps are CLOCK_MONOTONIC-like ns on its own host
// clock: reference time minus clock_offset_ns (uniform in +-50 us; rank 0, the
// reference, 0) and a drift of +-0.5 ppm (clock_drift_ppm, clock_reference_ns =
// its start), clock_synchronized = 1 with an error bound of 2..20 us, so the merge
// maps them back onto one clock. Ranks start within 5 ms of each other.
// --nccl raw (default) writes NCCL operations as a collector streams them
// (correlation_id 0, gpu_timing raw: %globaltimer ns, taken here as
// CLOCK_REALTIME plus a per-rank skew of +-2 ms), which the merge resolves;
// --nccl resolved writes them as an agent that resolved them at exit.
// Metadata: job_id (--job-id, default "synthetic-<seed>"), rank, local_rank =
// rank % 8, world_size = N, local_size = 8, host "node-<rank/8>", a pid, launcher
// "slurm", source "synthetic" (the timeline says so), all kinds, one H200-like
// device per rank, a note saying the job is synthetic.
//
// Ranks are written by J worker processes (fork; default: the number of CPUs):
// HDF5 serialises calls of threads with one global lock, processes do not.
//
// Read (the baseline the merge is measured against): reads every rank-*.h5 of
// DIR with the calls the merge makes (TraceReader::Open, ReadRankMetadata,
// ReadStrings, ReadAll<T> of every kind), nothing else, by J worker processes.
//
// Both modes print one line of key=value pairs (wall and CPU seconds, records,
// records/s, bytes) that bench/run_merge_scaling.sh parses.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "aon/base/status.h"
#include "aon/format/records.h"
#include "aon/format/trace_file.h"
#include "aon/format/trace_format.h"
#include "aon/merge/nccl_resolve.h"
#include "synthetic_step.h"

namespace {

using namespace aon;  // NOLINT(build/namespaces): a benchmark tool, every name is AON's
namespace fs = std::filesystem;

constexpr size_t kKinds = kRecordKindCount;

struct Options {
  uint32_t ranks = 0;
  uint64_t records_per_rank = 0;
  uint64_t seed = 1;
  std::string out;
  std::string read_dir;
  std::string check_dir;  // --check: the job whose timeline is checked
  std::string timeline;   // --timeline (default <check_dir>/timeline.h5)
  int jobs = 0;           // 0: the number of CPUs
  bool nccl_raw = true;
  int deflate = 4;  // the collector's WriteOptions
  uint64_t chunk = 4096;
  std::string job_id;
};

[[noreturn]] void Usage(const char* why) {
  const bool help = why == nullptr;
  std::fprintf(help ? stdout : stderr,
               "%s%s%s"
               "usage: aon-bench-make-job --ranks N --records-per-rank R [--seed S] --out DIR\n"
               "                          [--jobs J] [--nccl raw|resolved] [--deflate D]\n"
               "                          [--chunk C] [--job-id ID]\n"
               "       aon-bench-make-job --read DIR [--jobs J]\n"
               "       aon-bench-make-job --check DIR [--timeline FILE]\n",
               help ? "" : "aon-bench-make-job: ", help ? "" : why, help ? "" : "\n");
  std::exit(help ? 0 : 2);
}

uint64_t ParseU64(const char* flag, const char* v) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = std::strtoull(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || v[0] == '-') {
    Usage((std::string("bad value for ") + flag + ": '" + v + "'").c_str());
  }
  return x;
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") Usage(nullptr);
    if (i + 1 >= argc) Usage(("missing value after " + std::string(a)).c_str());
    const char* v = argv[++i];
    if (a == "--ranks") {
      o.ranks = static_cast<uint32_t>(ParseU64(argv[i - 1], v));
    } else if (a == "--records-per-rank") {
      o.records_per_rank = ParseU64(argv[i - 1], v);
    } else if (a == "--seed") {
      o.seed = ParseU64(argv[i - 1], v);
    } else if (a == "--out") {
      o.out = v;
    } else if (a == "--read") {
      o.read_dir = v;
    } else if (a == "--check") {
      o.check_dir = v;
    } else if (a == "--timeline") {
      o.timeline = v;
    } else if (a == "--jobs") {
      o.jobs = static_cast<int>(ParseU64(argv[i - 1], v));
    } else if (a == "--nccl") {
      if (std::string_view(v) == "raw") {
        o.nccl_raw = true;
      } else if (std::string_view(v) == "resolved") {
        o.nccl_raw = false;
      } else {
        Usage("--nccl takes raw or resolved");
      }
    } else if (a == "--deflate") {
      o.deflate = static_cast<int>(ParseU64(argv[i - 1], v));
    } else if (a == "--chunk") {
      o.chunk = ParseU64(argv[i - 1], v);
    } else if (a == "--job-id") {
      o.job_id = v;
    } else {
      Usage(("unknown option " + std::string(a)).c_str());
    }
  }
  if (o.read_dir.empty() && o.check_dir.empty()) {
    if (o.ranks == 0) Usage("--ranks N (N >= 1) is required");
    if (o.records_per_rank == 0) Usage("--records-per-rank R (R >= 1) is required");
    if (o.out.empty()) Usage("--out DIR is required");
    if (o.ranks > 99999) Usage("--ranks: at most 99999 (rank-NNNNN.h5)");
    if (o.chunk == 0) Usage("--chunk must be >= 1");
  }
  if (o.jobs <= 0) o.jobs = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  if (o.job_id.empty()) o.job_id = "synthetic-" + std::to_string(o.seed);
  return o;
}

double NowS() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double ChildrenCpuS() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * t.tv_usec; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

// ---- Worker processes -------------------------------------------------------------

// What a worker reports back: per-kind record counts, bytes and a checksum.
struct Totals {
  std::array<uint64_t, kKinds> records{};
  uint64_t bytes = 0;     // file bytes (generate) or in-memory record bytes (read)
  uint64_t checksum = 0;  // read: keeps the reads from being optimised away
  uint64_t items = 0;     // ranks written / files read
  uint64_t failed = 0;
  void Add(const Totals& t) {
    for (size_t k = 0; k < kKinds; ++k) records[k] += t.records[k];
    bytes += t.bytes;
    checksum ^= t.checksum;
    items += t.items;
    failed += t.failed;
  }
  uint64_t all() const {
    uint64_t n = 0;
    for (uint64_t r : records) n += r;
    return n;
  }
};

// Runs fn(i) for i in [0, n) in `jobs` forked processes (item i in worker i % jobs)
// and sums what they return. Nothing of HDF5 may be touched before this.
Totals RunWorkers(int jobs, size_t n, const std::function<Totals(size_t)>& fn) {
  jobs = static_cast<int>(std::min<size_t>(static_cast<size_t>(jobs), std::max<size_t>(n, 1)));
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int w = 0; w < jobs; ++w) {
    int p[2];
    if (pipe(p) != 0) {
      std::perror("aon-bench-make-job: pipe");
      std::exit(1);
    }
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("aon-bench-make-job: fork");
      std::exit(1);
    }
    if (pid == 0) {
      close(p[0]);
      Totals t;
      for (size_t i = static_cast<size_t>(w); i < n; i += static_cast<size_t>(jobs)) t.Add(fn(i));
      const ssize_t wrote = write(p[1], &t, sizeof(t));
      std::fflush(nullptr);
      _exit(wrote == static_cast<ssize_t>(sizeof(t)) ? 0 : 1);
    }
    close(p[1]);
    pids.push_back(pid);
    fds.push_back(p[0]);
  }
  Totals sum;
  for (size_t w = 0; w < pids.size(); ++w) {
    Totals t;
    const ssize_t got = read(fds[w], &t, sizeof(t));
    close(fds[w]);
    int status = 0;
    waitpid(pids[w], &status, 0);
    if (got != static_cast<ssize_t>(sizeof(t)) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "aon-bench-make-job: worker %zu failed\n", w);
      sum.failed += 1;
      continue;
    }
    sum.Add(t);
  }
  return sum;
}

// ---- The generator ------------------------------------------------------------------

constexpr uint64_t kSecond = 1'000'000'000;
constexpr uint64_t kFlushPeriodNs = kSecond;                     // the collector's flush_ms = 1000
constexpr uint64_t kFlushBytes = uint64_t{8} << 20;              // a quarter of a 32 MiB ring
constexpr uint64_t kGroupPeriodNs = 2'000'000;                   // the shared step schedule
constexpr uint64_t kHostBaseNs = 431'337'123'456'789;            // ~5 days of uptime
constexpr uint64_t kRealtimeBaseNs = 1'796'000'000'000'000'000;  // late 2026
constexpr uint32_t kCustom0 = 3;  // CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 (PyTorch ops)

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

const char* const kKernelNames[] = {
    "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_"
    "off_kernel__5x_cublas",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::Half>, "
    "at::detail::Array<char*, 3>)",
    "sm90_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_"
    "off_kernel__5x_cublas",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
    "cutlass::half_t>, false, true, false, false, true, true, false, "
    "false>(pytorch_flash::Flash_fwd_params)",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>(int, "
    "float, c10::Half const*, c10::Half const*, c10::Half const*, float*, float*, c10::Half*)",
    "sm90_xmma_gemm_f16f16_f16f32_f32_nt_n_tilesize64x128x64_warpgroupsize1x1x1_execute_segment_k_"
    "off_kernel__5x_cublas",
    "void at::native::vectorized_elementwise_kernel<4, "
    "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() "
    "const::{lambda(c10::Half)#1}, at::detail::Array<char*, 2> >",
    "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, "
    "64, 128, 8, 2, 4, 2, false, false, cutlass::half_t>, true, false, true, false, false, "
    "false>(pytorch_flash::Flash_bwd_params)",
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::Half, "
    "float>(c10::Half const*, c10::Half const*, float const*, float const*, c10::Half const*, "
    "c10::Half*, int)",
    "void at::native::vectorized_elementwise_kernel<4, "
    "at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, "
    "at::native::GeluType)::{lambda()#2}, at::detail::Array<char*, 3> >",
    "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<c10::Half, float, unsigned "
    "int, 1, 8, bool>(at::cuda::detail::TensorInfo<c10::Half const, unsigned int>, "
    "at::cuda::detail::TensorInfo<c10::Half, unsigned int>, at::cuda::detail::TensorInfo<bool, "
    "unsigned int>, unsigned int, float, at::PhiloxCudaState)",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
    "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)",
    "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, "
    "at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(float*, float const*, float "
    "const*, int)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
    "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, "
    "float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> "
    ">(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, "
    "float)#1}>, unsigned int, float, 4>)",
    "void "
    "at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::"
    "TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() "
    "const::{lambda(float)#1}, at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned "
    "int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, "
    "at::native::memory::StoreWithCast<1> >",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, "
    "1>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::MulFunctor<float>, at::detail::Array<char*, "
    "3>)",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<4>, at::native::(anonymous "
    "namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, "
    "double, double, double, double, bool, float*, float*>",
    "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::Half, long, unsigned int, "
    "2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::Half, unsigned int>, "
    "at::cuda::detail::TensorInfo<c10::Half const, unsigned int>, "
    "at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, "
    "long)",
    "void at::native::(anonymous namespace)::embedding_backward_feature_kernel<c10::Half, float, "
    "long>(long const*, c10::Half const*, c10::Half*, int, long, int, int)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<float, float, "
    "float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >(int, "
    "at::native::BUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> "
    ">, at::detail::Array<char*, 2>)",
    "void at::native::(anonymous namespace)::masked_scale_kernel<bool, c10::Half, "
    "float>(at::Tensor&, at::Tensor const&, at::Tensor const&, float)::{lambda(c10::Half, bool)#1}",
    "void "
    "cutlass::Kernel2<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8>(cutlass_"
    "80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8::Params)",
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, "
    "false>(cublasLt::cublasSplitKParams<float>, float const*, float const*, float*, float const*, "
    "float const*, float const*, float const*, float*, void*, long, float*, int*)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::Half, "
    "c10::Half, c10::Half, at::native::binary_internal::DivFunctor<c10::Half> >, "
    "at::detail::Array<char*, 2> >(int, at::native::AUnaryFunctor<c10::Half, c10::Half, c10::Half, "
    "at::native::binary_internal::DivFunctor<c10::Half> >, at::detail::Array<char*, 2>)",
    "void at::native::elementwise_kernel<128, 2, "
    "at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&"
    ")::{lambda()#3}::operator()() const::{lambda()#10}::operator()() "
    "const::{lambda(c10::Half)#1}>(at::TensorIteratorBase&, "
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
    "const::{lambda()#10}::operator()() const::{lambda(c10::Half)#1} "
    "const&)::{lambda(int)#1}>(int, "
    "at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&"
    ")::{lambda()#3}::operator()() const::{lambda()#10}::operator()() "
    "const::{lambda(c10::Half)#1}>(at::TensorIteratorBase&, "
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
    "const::{lambda()#10}::operator()() const::{lambda(c10::Half)#1} const&)::{lambda(int)#1})",
    "void at::native::vectorized_elementwise_kernel<4, "
    "at::native::sqrt_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() "
    "const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >",
    "void at::native::reduce_kernel<256, 2, at::native::ReduceOp<float, "
    "at::native::NormTwoOps<float, float, float>, unsigned int, float, 4> "
    ">(at::native::ReduceOp<float, at::native::NormTwoOps<float, float, float>, unsigned int, "
    "float, 4>)",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::ScaleFunctor<float, "
    "float>, float>(at::native::(anonymous namespace)::TensorListMetadata<1>, "
    "at::native::(anonymous namespace)::ScaleFunctor<float, float>, float)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3>)",
    "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, "
    "long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)",
    "void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<float, "
    "long>(float*, float const*, long const*, float const*, float const*, bool, int, int, long, "
    "long)",
    "void at::native::vectorized_elementwise_kernel<4, "
    "at::native::tanh_backward_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() "
    "const::{lambda()#4}::operator()() const::{lambda(c10::Half, c10::Half)#1}, "
    "at::detail::Array<char*, 3> >",
    "void at::native::vectorized_elementwise_kernel<4, "
    "at::native::neg_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() "
    "const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >",
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous "
    "namespace)::OpaqueType<2u>, unsigned int, 3, 128, 1>(at::native::(anonymous "
    "namespace)::OpaqueType<2u>*, at::native::(anonymous "
    "namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<2u>, "
    "unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, "
    "int, unsigned int)",
    "void at::native::index_elementwise_kernel<128, 4, "
    "at::native::gpu_index_kernel<at::native::index_kernel_impl<at::native::OpaqueType<2> "
    ">(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char "
    "const*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, "
    "at::native::index_kernel_impl<at::native::OpaqueType<2> >(at::TensorIteratorBase&, "
    "c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1} const&, "
    "bool)::{lambda(int)#1}>(long, "
    "at::native::gpu_index_kernel<at::native::index_kernel_impl<at::native::OpaqueType<2> "
    ">(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char "
    "const*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, "
    "at::native::index_kernel_impl<at::native::OpaqueType<2> >(at::TensorIteratorBase&, "
    "c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1} const&, "
    "bool)::{lambda(int)#1})",
    "void at::native::triu_tril_kernel<c10::Half, int, false, 4, "
    "true>(at::cuda::detail::TensorInfo<c10::Half, int>, at::cuda::detail::TensorInfo<c10::Half "
    "const, int>, long, long)",
    "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<c10::Half, float>(long, "
    "float, c10::Half const*, float*, float*)",
    "void at::native::vectorized_elementwise_kernel<4, "
    "at::native::clamp_scalar_kernel_impl(at::TensorIteratorBase&, "
    "at::native::detail::ClampLimits, c10::Scalar const&)::{lambda()#1}::operator()() "
    "const::{lambda()#8}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >",
};
constexpr size_t kComputeKernels = sizeof(kKernelNames) / sizeof(kKernelNames[0]);
static_assert(kComputeKernels == 39);

// One rank file. Timestamps are generated on the job's reference clock and put
// on the rank's own clock (Local) as records are made.
class RankGenerator : public bench::StepGenerator<RankGenerator> {
 public:
  RankGenerator(const Options& o, uint32_t rank)
      : StepGenerator(SplitMix(o.seed * 1'000'003 + rank + 1), kCustom0),
        o_(o),
        rank_(rank),
        shared_(SplitMix(o.seed)) {
    // Kernel shapes from the shared generator: every rank runs the same model.
    InitNames(kKernelNames, shared_);
    comm_hash_ = SplitMix(o.seed ^ 0xC0FFEE) | 1;
    // The device's strings, as the agent interns them when it starts.
    uuid_id_ = Intern(UuidString());
    gpu_name_id_ = Intern("NVIDIA H200");

    // Clock: rank 0 is the reference.
    if (rank != 0) {
      offset_ns_ = static_cast<int64_t>(Rand(100'001)) - 50'000;
      drift_ = (static_cast<double>(Rand(1'000'001)) / 1e6 - 0.5) * 1e-6;  // +-0.5 ppm
    }
    error_bound_ns_ = 2'000 + static_cast<int64_t>(Rand(18'001));
    gpu_skew_ns_ = static_cast<int64_t>(Rand(4'000'001)) - 2'000'000;
    host_ = kHostBaseNs + Rand(5'000'000);  // ranks start within 5 ms
    start_ref_ = host_;
    reference_local_ = ToLocalNoDrift(start_ref_);
    for (uint32_t s : {kComputeStream, kSideStream, kNcclStream, kCopyStream}) gpu_[s] = host_;
    next_flush_ref_ = start_ref_ + kFlushPeriodNs;
    schedule_ = kHostBaseNs + 5'000'000;
    pid_ = 300'000 + static_cast<int64_t>(rank % 8) * 1'013 + rank / 8;
  }

  // Writes <out>/rank-NNNNN.h5. Returns counts (and file bytes), or failed = 1.
  Totals Write() {
    Totals t;
    t.items = 1;
    char name[32];
    std::snprintf(name, sizeof(name), "rank-%05u.h5", rank_);
    path_ = (fs::path(o_.out) / name).string();
    WriteOptions wo;
    wo.deflate_level = o_.deflate;
    wo.chunk_records = o_.chunk;
    auto w = TraceWriter::Create(path_, FileKind::kRank, wo);
    if (!w.ok()) return Fail(w.status());
    writer_ = std::move(w).value();

    RankMetadata running = Metadata();
    running.end_reason = "running (written by the node collector up to its last flush)";
    running.truncated = 1;
    Status st = writer_->WriteRankMetadata(running);
    if (st.ok()) st = writer_->Flush();
    if (!st.ok()) return Fail(st);

    const uint64_t target = o_.records_per_rank;
    const uint64_t before_comm = target - 1;  // the kComm record comes last
    uint64_t group = 0;
    limit_ = before_comm;
    while (emitted_ < before_comm && st_.ok()) OpGroup(group++);
    if (st_.ok()) {
      // The communicator: init at the start, finalize at the end (host clock).
      NcclRecord c{};
      c.start_ns = start_ref_ + 1'000'000;
      c.end_ns = host_ + 5'000;
      c.comm_hash = comm_hash_;
      c.func_id = Intern("ncclCommInitRank world");
      c.root = c.peer = -1;
      c.channel_id = -1;
      c.comm_rank = static_cast<int32_t>(rank_);
      c.comm_nranks = static_cast<int32_t>(o_.ranks);
      c.comm_nnodes = static_cast<int32_t>((o_.ranks + 7) / 8);
      c.n_channels = 16;
      c.event_type = static_cast<uint8_t>(NcclEventType::kComm);
      c.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kNone);
      Add(c, c.end_ns);
      Release(pending_.size());
    }
    if (st_.ok()) FlushFile();
    if (!st_.ok()) return Fail(st_);

    RankMetadata m = Metadata();
    m.end_ns = last_record_local_ + 20'000;
    m.end_reason = "exit";
    m.truncated = 0;
    m.last_record_ns = last_record_local_;
    st = writer_->WriteRankMetadata(m);
    if (st.ok()) st = writer_->Finish();
    if (!st.ok()) return Fail(st);
    writer_.reset();

    t.records = counts_;
    std::error_code ec;
    t.bytes = fs::file_size(path_, ec);
    return t;
  }

 private:
  friend class bench::StepGenerator<RankGenerator>;

  struct Pending {
    uint64_t avail_ref;  // when the collector would receive it (completion)
    uint64_t seq;        // ties: creation order
    RecordKind kind;
    std::array<uint8_t, 128> payload;
  };
  using Batches = RecordVectors;

  Totals Fail(const Status& st) {
    std::fprintf(stderr, "aon-bench-make-job: rank %u: %s\n", rank_, st.message().c_str());
    Totals t;
    t.failed = 1;
    return t;
  }

  RankMetadata Metadata() const {
    RankMetadata m;
    m.job_id = o_.job_id;
    m.rank = static_cast<int32_t>(rank_);
    m.local_rank = static_cast<int32_t>(rank_ % 8);
    m.world_size = static_cast<int32_t>(o_.ranks);
    m.local_size = static_cast<int32_t>(std::min<uint32_t>(8, o_.ranks - rank_ / 8 * 8));
    m.host = "node-" + std::to_string(rank_ / 8);
    m.pid = pid_;
    m.launcher = "slurm";
    m.clock_domain = "CLOCK_MONOTONIC";
    m.anchor_clock_ns = reference_local_;
    m.anchor_realtime_ns = kRealtimeBaseNs + (start_ref_ - kHostBaseNs);
    m.clock_offset_ns = offset_ns_;
    m.clock_drift_ppm = drift_ * 1e6;
    m.clock_reference_ns = reference_local_;
    m.clock_error_bound_ns = error_bound_ns_;
    m.clock_synchronized = true;
    m.source = "synthetic";
    m.kinds = "kernels,memcpy,memset,sync,api,nvtx,nccl,external_correlation";
    m.memory_cap_bytes = uint64_t{64} << 20;
    m.agent_version = "0.1.0";
    m.start_ns = reference_local_;
    m.notes.push_back("SYNTHETIC job written by aon-bench-make-job (seed " +
                      std::to_string(o_.seed) + "): records are generated, not measured");
    DeviceInfo d{};
    d.device_id = 0;
    d.uuid_id = uuid_id_;
    d.name_id = gpu_name_id_;
    d.sm_count = 132;
    d.global_memory_bytes = uint64_t{143'771} << 20;
    d.compute_major = 9;
    d.compute_minor = 0;
    m.devices.push_back(d);
    return m;
  }

  uint64_t Shared(uint64_t n) { return shared_() % n; }
  uint64_t SharedUs(double lo_us, double hi_us) {
    return LogUniform(shared_, lo_us * 1e3, hi_us * 1e3);
  }

  // Reference time -> this rank's clock (inverse of reference = t + offset +
  // drift * (t - clock_reference_ns), to ~1 ns over an hour at 0.5 ppm).
  uint64_t ToLocalNoDrift(uint64_t ref) const {
    return static_cast<uint64_t>(static_cast<int64_t>(ref) - offset_ns_);
  }
  uint64_t Local(uint64_t ref) const {
    const uint64_t t0 = ToLocalNoDrift(ref);
    if (drift_ == 0.0) return t0;
    const double dt = static_cast<double>(static_cast<int64_t>(t0 - reference_local_));
    return static_cast<uint64_t>(static_cast<int64_t>(t0) - std::llround(drift_ * dt));
  }
  // A host-clock time as the NCCL plugin's raw %globaltimer would read it.
  uint64_t GpuRaw(uint64_t local) const {
    return static_cast<uint64_t>(
        static_cast<int64_t>(local - reference_local_) +
        static_cast<int64_t>(kRealtimeBaseNs + (start_ref_ - kHostBaseNs)) + gpu_skew_ns_);
  }

  // Queues a record made on the reference clock: its times go to the rank's clock.
  template <typename T>
  void Add(T r, uint64_t avail_ref) {
    if constexpr (!kJoinTable<T>) {
      r.start_ns = Local(r.start_ns);
      r.end_ns = Local(r.end_ns);
    }
    if constexpr (std::is_same_v<T, NcclRecord>) {
      if (r.gpu_start_ns != 0) r.gpu_start_ns = Local(r.gpu_start_ns);
      if (o_.nccl_raw && r.event_type == static_cast<uint8_t>(NcclEventType::kColl)) {
        r.gpu_start_ns = GpuRaw(r.gpu_start_ns);
        r.end_ns = GpuRaw(r.end_ns);
      }
    }
    Pending p{};
    p.avail_ref = avail_ref;
    p.seq = seq_++;
    p.kind = RecordTraits<T>::kKind;
    static_assert(sizeof(T) <= sizeof(p.payload));
    std::memcpy(p.payload.data(), &r, sizeof(T));
    pending_.push_back(p);
  }

  // StepGenerator's hooks. The program (op order, kernel choice, NCCL sizes,
  // NVTX names) comes from the shared generator, drawn up front.
  uint64_t BeginGroup(uint64_t group, std::vector<Op>& ops) {
    std::shuffle(ops.begin(), ops.end(), shared_);
    const uint64_t group_sched = schedule_;
    schedule_ += kGroupPeriodNs - 200'000 + SharedUs(1, 400);
    const size_t nccl_at =
        static_cast<size_t>(std::find(ops.begin(), ops.end(), kLaunchNccl) - ops.begin());
    // The all-reduce ends once the last rank arrived: a shared time.
    allreduce_end_ = group_sched + 250'000 + nccl_at * 26'000 + SharedUs(20, 400);
    static const uint64_t kNcclBytes[] = {4u << 20, 16u << 20, 25u << 20, 1u << 20};
    nccl_bytes_ = kNcclBytes[Shared(4)];
    for (auto& n : nvtx_pick_) n = nvtx_names_[3 + Shared(bench::kStepNvtxNameCount - 3)];
    picks_.clear();
    for (Op op : ops)
      picks_.push_back(op == kLaunch || op == kLaunchSide ? &PickKernel(shared_) : nullptr);

    thread_ = static_cast<uint32_t>(pid_) + (group % 2 == 0 ? 0 : 17);  // forward, autograd
    return std::max(host_ + Us(1, 20), group_sched + Us(1, 30));
  }
  static bool TorchOpAt(size_t i, size_t /*n*/) { return i == 0; }
  void Launch(size_t i, uint32_t stream) {
    const ApiRecord a = Api(api_launch_, 211, Us(2, 10));
    Kernel(stream, *picks_[i], Us(2, 200), 0, a);
  }
  void LaunchNccl(uint64_t group) {
    const uint64_t enqueue = host_ + Us(1, 3);
    const uint64_t launch_id = ++nccl_launch_id_;
    const ApiRecord a = Api(api_launch_, 211, Us(4, 12));
    ExternalCorrelationRecord x{};  // AON's NCCL plugin: CUSTOM2 around the launch
    x.external_id = launch_id;
    x.correlation_id = a.correlation_id;
    x.external_kind = kNcclExternalCorrelationKind;
    Add(x, a.start_ns);
    const KernelRecord k = Kernel(kNcclStream, nccl_kernel_, Us(15, 30), allreduce_end_, a);
    NcclRecord n =
        AllReduce(comm_hash_, nccl_bytes_, static_cast<int32_t>(rank_),
                  static_cast<int32_t>(o_.ranks), static_cast<int32_t>((o_.ranks + 7) / 8));
    n.start_ns = enqueue;
    n.end_ns = k.end_ns - Us(0.5, 2);
    n.gpu_start_ns = k.start_ns + Us(0.5, 2);  // first channel start
    n.seq_number = group;
    n.external_id = launch_id;
    if (o_.nccl_raw) {
      n.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kRaw);
    } else {
      n.correlation_id = k.correlation_id;
      n.stream_id = kNcclStream;
      n.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kCalibrated);
    }
    Add(n, k.end_ns + 1'000);
  }
  uint32_t InnerNvtxName(size_t i) const { return nvtx_pick_[i]; }
  // Completion order, as CUPTI and the ring deliver them; cut at limit_.
  void EndGroup() {
    std::stable_sort(pending_.begin(), pending_.end(),
                     [](const Pending& a, const Pending& b) { return a.avail_ref < b.avail_ref; });
    Release(static_cast<size_t>(std::min<uint64_t>(pending_.size(), limit_ - emitted_)));
  }

  // Moves the first n pending records into the per-kind batches, flushing the
  // file first whenever a flush period ends or 8 MiB are pending.
  void Release(size_t n) {
    for (size_t i = 0; i < n && st_.ok(); ++i) {
      const Pending& p = pending_[i];
      if (p.avail_ref >= next_flush_ref_ || batch_bytes_ >= kFlushBytes) {
        FlushFile();
        while (next_flush_ref_ <= p.avail_ref) next_flush_ref_ += kFlushPeriodNs;
      }
      ForEachRecordType([&](auto tag) {
        using T = decltype(tag);
        if (p.kind != RecordTraits<T>::kKind) return;
        T r;
        std::memcpy(&r, p.payload.data(), sizeof(T));
        std::get<std::vector<T>>(batches_).push_back(r);
        batch_bytes_ += sizeof(T);
        if constexpr (!kJoinTable<T>) {
          // A raw NCCL end is %globaltimer: the collector tracks host times only.
          if constexpr (std::is_same_v<T, NcclRecord>) {
            if (r.gpu_timing != static_cast<uint8_t>(NcclGpuTiming::kRaw)) {
              last_record_local_ = std::max(last_record_local_, r.end_ns);
            }
          } else if constexpr (requires { r.end_ns; }) {
            last_record_local_ = std::max(last_record_local_, r.end_ns);
          } else {
            last_record_local_ = std::max(last_record_local_, r.start_ns);  // an instant
          }
        }
      });
      counts_[static_cast<size_t>(p.kind)]++;
      ++emitted_;
    }
    pending_.clear();
  }

  // What Collector::FlushRank does: every kind's batch, new strings, two /meta
  // attributes, H5Fflush.
  void FlushFile() {
    if (!st_.ok()) return;
    ForEachRecordType([&](auto tag) {
      using T = decltype(tag);
      auto& v = std::get<std::vector<T>>(batches_);
      if (st_.ok() && !v.empty()) st_ = writer_->Append<T>(std::span<const T>(v));
      v.clear();
    });
    batch_bytes_ = 0;
    if (st_.ok() && strings_written_ < strings_.size()) {
      st_ =
          writer_->AppendStrings(std::span<const std::string>(strings_).subspan(strings_written_));
      strings_written_ = strings_.size();
    }
    if (st_.ok()) st_ = writer_->SetMetaAttribute("last_record_ns", last_record_local_);
    if (st_.ok()) st_ = writer_->SetMetaAttribute("end_ns", last_record_local_);
    if (st_.ok()) st_ = writer_->Flush();
  }

  std::string UuidString() const {
    char uuid[64];
    const uint64_t u = SplitMix(o_.seed ^ (uint64_t{rank_} << 20));
    std::snprintf(uuid, sizeof(uuid), "GPU-%08x-%04x-%04x-%04x-%012llx",
                  static_cast<unsigned>(u >> 32), static_cast<unsigned>((u >> 16) & 0xffff),
                  static_cast<unsigned>(u & 0xffff), rank_ & 0xffff,
                  static_cast<unsigned long long>(SplitMix(u) & 0xffffffffffffull));
    return uuid;
  }

  const Options& o_;
  uint32_t rank_;
  std::mt19937_64 shared_;  // the job's program: same on every rank
  std::string path_;
  std::unique_ptr<TraceWriter> writer_;
  Status st_;

  size_t strings_written_ = 0;
  uint32_t uuid_id_ = 0, gpu_name_id_ = 0;

  uint64_t comm_hash_ = 0;

  int64_t offset_ns_ = 0;
  double drift_ = 0.0;
  int64_t error_bound_ns_ = 0;
  int64_t gpu_skew_ns_ = 0;
  uint64_t start_ref_ = 0;
  uint64_t reference_local_ = 0;
  uint64_t schedule_ = 0;
  int64_t pid_ = 0;
  uint64_t nccl_launch_id_ = 0;
  // The current group's program (BeginGroup).
  uint64_t allreduce_end_ = 0;
  uint64_t nccl_bytes_ = 0;
  std::array<uint32_t, 5> nvtx_pick_{};
  std::vector<const Shape*> picks_;
  uint64_t limit_ = 0;  // records before the kComm one

  std::vector<Pending> pending_;
  uint64_t seq_ = 0;
  Batches batches_;
  uint64_t batch_bytes_ = 0;
  uint64_t next_flush_ref_ = 0;
  uint64_t last_record_local_ = 0;
  uint64_t emitted_ = 0;
  std::array<uint64_t, kKinds> counts_{};
};

// ---- Modes ----------------------------------------------------------------------------

std::string KindCounts(const Totals& t) {
  std::string s;
  const double all = static_cast<double>(std::max<uint64_t>(t.all(), 1));
  for (size_t k = 0; k < kKinds; ++k) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%s%s=%llu(%.1f%%)", k == 0 ? "" : ",",
                  RecordKindName(static_cast<RecordKind>(k)),
                  static_cast<unsigned long long>(t.records[k]), 100.0 * t.records[k] / all);
    s += buf;
  }
  return s;
}

int Generate(const Options& o) {
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) {
    std::fprintf(stderr, "aon-bench-make-job: cannot create '%s': %s\n", o.out.c_str(),
                 ec.message().c_str());
    return 1;
  }
  const double t0 = NowS();
  const Totals t = RunWorkers(o.jobs, o.ranks, [&](size_t i) {
    RankGenerator g(o, static_cast<uint32_t>(i));
    return g.Write();
  });
  const double wall = NowS() - t0;
  const double cpu = ChildrenCpuS();
  std::printf(
      "generated: dir=%s ranks=%llu records=%llu records_per_rank=%llu file_bytes=%llu "
      "bytes_per_record=%.2f wall_s=%.3f cpu_s=%.3f jobs=%d nccl=%s failed=%llu kinds=%s\n",
      o.out.c_str(), static_cast<unsigned long long>(t.items),
      static_cast<unsigned long long>(t.all()), static_cast<unsigned long long>(o.records_per_rank),
      static_cast<unsigned long long>(t.bytes),
      static_cast<double>(t.bytes) / static_cast<double>(std::max<uint64_t>(t.all(), 1)), wall, cpu,
      o.jobs, o.nccl_raw ? "raw" : "resolved", static_cast<unsigned long long>(t.failed),
      KindCounts(t).c_str());
  return t.failed == 0 && t.items == o.ranks ? 0 : 1;
}

Totals ReadOne(const std::string& path) {
  Totals t;
  t.items = 1;
  auto fail = [&](const Status& st) {
    std::fprintf(stderr, "aon-bench-make-job: %s: %s\n", path.c_str(), st.message().c_str());
    Totals f;
    f.failed = 1;
    return f;
  };
  auto r = TraceReader::Open(path);
  if (!r.ok()) return fail(r.status());
  auto meta = (*r)->ReadRankMetadata();
  if (!meta.ok()) return fail(meta.status());
  auto strings = (*r)->ReadStrings();
  if (!strings.ok()) return fail(strings.status());
  t.checksum ^= strings->size();
  Status st;
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    if (!st.ok()) return;
    auto v = (*r)->template ReadAll<T>();
    if (!v.ok()) {
      st = v.status();
      return;
    }
    t.records[static_cast<size_t>(RecordTraits<T>::kKind)] += v->size();
    t.bytes += v->size() * sizeof(T);
    for (const T& x : *v) t.checksum += StartOf(x);
  });
  if (!st.ok()) return fail(st);
  return t;
}

int Read(const Options& o) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::directory_iterator it(o.read_dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with("rank-") && name.ends_with(".h5")) files.push_back(it->path().string());
  }
  if (ec || files.empty()) {
    std::fprintf(stderr, "aon-bench-make-job: no rank-*.h5 in '%s'%s%s\n", o.read_dir.c_str(),
                 ec ? ": " : "", ec ? ec.message().c_str() : "");
    return 1;
  }
  std::sort(files.begin(), files.end());
  uint64_t file_bytes = 0;
  for (const std::string& f : files) file_bytes += fs::file_size(f, ec);
  const double t0 = NowS();
  const Totals t = RunWorkers(o.jobs, files.size(), [&](size_t i) { return ReadOne(files[i]); });
  const double wall = NowS() - t0;
  const double cpu = ChildrenCpuS();
  const double n = static_cast<double>(t.all());
  std::printf(
      "read: dir=%s files=%llu records=%llu file_bytes=%llu record_bytes=%llu wall_s=%.3f "
      "cpu_s=%.3f jobs=%d records_per_s=%.0f records_per_cpu_s=%.0f checksum=%llx failed=%llu\n",
      o.read_dir.c_str(), static_cast<unsigned long long>(t.items),
      static_cast<unsigned long long>(t.all()), static_cast<unsigned long long>(file_bytes),
      static_cast<unsigned long long>(t.bytes), wall, cpu, o.jobs, wall > 0 ? n / wall : 0.0,
      cpu > 0 ? n / cpu : 0.0, static_cast<unsigned long long>(t.checksum),
      static_cast<unsigned long long>(t.failed));
  return t.failed == 0 ? 0 : 1;
}

// --check: the timeline of a merged job holds every record of every rank file
// once, per rank and kind, each table in (start, rank) order. Correctness of
// the merge benchmark's jobs, not speed (bench/merge_smoke.sh).
int Check(const Options& o) {
  const std::string timeline =
      o.timeline.empty() ? (fs::path(o.check_dir) / "timeline.h5").string() : o.timeline;
  std::map<std::pair<uint32_t, size_t>, uint64_t> expected, found;
  std::error_code ec;
  for (fs::directory_iterator it(o.check_dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with("rank-") || !name.ends_with(".h5")) continue;
    auto r = TraceReader::Open(it->path().string());
    if (!r.ok()) {
      std::fprintf(stderr, "aon-bench-make-job: %s\n", r.status().message().c_str());
      return 1;
    }
    auto meta = (*r)->ReadRankMetadata();
    if (!meta.ok()) {
      std::fprintf(stderr, "aon-bench-make-job: %s\n", meta.status().message().c_str());
      return 1;
    }
    ForEachRecordType([&](auto tag) {
      using T = decltype(tag);
      auto n = (*r)->TableSize(RecordTraits<T>::Schema());
      const size_t k = static_cast<size_t>(RecordTraits<T>::kKind);
      if (n.ok() && *n > 0) expected[{static_cast<uint32_t>(meta->rank), k}] = *n;
    });
  }
  auto t = TraceReader::Open(timeline);
  if (!t.ok()) {
    std::fprintf(stderr, "aon-bench-make-job: %s\n", t.status().message().c_str());
    return 1;
  }
  uint64_t records = 0, out_of_order = 0;
  Status st;
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    if (!st.ok()) return;
    auto v = (*t)->template ReadAllMerged<T>();
    if (!v.ok()) {
      st = v.status();
      return;
    }
    const size_t k = static_cast<size_t>(RecordTraits<T>::kKind);
    for (size_t x = 0; x < v->size(); ++x) {
      const Merged<T>& m = (*v)[x];
      ++found[{m.rank, k}];
      if (x > 0) {
        const Merged<T>& p = (*v)[x - 1];
        const uint64_t a = StartOf(p.record), b = StartOf(m.record);
        out_of_order += (b < a || (b == a && m.rank < p.rank)) ? 1 : 0;
      }
    }
    records += v->size();
  });
  if (!st.ok()) {
    std::fprintf(stderr, "aon-bench-make-job: %s\n", st.message().c_str());
    return 1;
  }
  // NCCL records are resolved by the merge, which may add CUDA-graph replays:
  // at least the rank file's count.
  uint64_t wrong = 0;
  for (const auto& [key, n] : expected) {
    const uint64_t got = found.count(key) ? found.at(key) : 0;
    const bool nccl = key.second == static_cast<size_t>(RecordKind::kNccl);
    if (nccl ? got < n : got != n) {
      ++wrong;
      std::fprintf(
          stderr,
          "aon-bench-make-job: rank %u %s: %llu records in the timeline, %llu in its file\n",
          key.first, RecordKindName(static_cast<RecordKind>(key.second)),
          static_cast<unsigned long long>(got), static_cast<unsigned long long>(n));
    }
  }
  for (const auto& [key, n] : found) {
    if (!expected.count(key)) ++wrong;
  }
  std::printf(
      "check: timeline=%s records=%llu rank_kinds=%zu wrong_counts=%llu out_of_order=%llu\n",
      timeline.c_str(), static_cast<unsigned long long>(records), expected.size(),
      static_cast<unsigned long long>(wrong), static_cast<unsigned long long>(out_of_order));
  return wrong == 0 && out_of_order == 0 && !expected.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseArgs(argc, argv);
  if (!o.check_dir.empty()) return Check(o);
  return o.read_dir.empty() ? Generate(o) : Read(o);
}
