// The node collector's drain + HDF5 append path (rank_agent/collector): a
// producer thread fills a shared-memory ring (aon/shm_ring.h) with a realistic
// record mix generated up front, while the consumer (this thread, as the
// collector's one thread) drains it into RecordBatches (record_batches.h) and,
// every `flush` records (standing for the collector's 1 s flush interval),
// appends them to a real TraceWriter rank file in /tmp, appends new strings,
// rewrites the two /meta attributes and calls Flush(), exactly as
// Collector::FlushRank does. Reported per run:
//   * records/s (items_per_second) and record bytes/s (bytes_per_second, the
//     in-memory struct sizes) from the first push to the last Flush();
//   * after Finish(): bytes on disk per record, per kind (H5Dget_storage_size of
//     /records/<kind> / its records: "B/kernel", "B/api", ...), over all records
//     ("B/rec_data"), and the whole file's size per record ("B/rec_file":
//     string table, metadata and space HDF5 left unused included);
//   * "appends" (batches appended per run), "prod_waits" (times the producer
//     found the ring full and waited 50 us), "kern_unsorted_pct" (kernel
//     records that reach the ring after one that started later).
// Baselines of the same run: BM_DrainCopy (each record memcpy'd out of the ring
// into a scratch buffer, nothing else) and BM_DrainBatches (into RecordBatches,
// cleared every `flush` records, no file).
//
// The record mix ("op group" of 100 records, standing for a slice of a PyTorch
// training step; class Generator below): 35 kernels, 45 runtime API records
// (35 cudaLaunchKernel, 5 cudaMemcpyAsync, 2 cudaMemsetAsync, a
// cudaStreamWaitEvent, a cudaEventSynchronize, a cudaStreamSynchronize at the
// end), 5 memcpy, 2 memset, 5 sync, 5 NVTX ranges (one outer range, four nested
// ones), 1 NCCL all-reduce and 2 external-correlation records. Timestamps are
// CLOCK_MONOTONIC-like ns: host API calls 2..10 us long, 1..20 us apart;
// kernels 2..200 us long (log-uniform; the NCCL kernel 20..400 us), 1..20 us
// after the previous kernel of their stream and 3..8 us after their launch;
// the group ends with a stream synchronize that waits for every stream.
// Correlation ids increase by 1 or 2 per API call; 39 compute kernel names
// (Zipf-like frequencies, each with its own block size, registers, shared
// memory and 1-3 grid sizes) plus the NCCL kernel, on 3 streams (compute, a
// side stream, NCCL) and a copy stream; two host threads (forward, autograd)
// alternate per group. Records enter the ring in completion order (end time),
// the order in which CUPTI hands over activity records, so a kind's records
// are not in start order where streams overlap; names enter the ring once,
// before their first use, as the agent sends them.
//
// Environment: AON_BENCH_RECORDS (default 2000000) records per run;
// AON_BENCH_DIR (default /tmp) where the rank files go (each is deleted after
// it was measured).
// Command, machine and figures: RESULTS.md, "Collector drain and HDF5 append".
#include <benchmark/benchmark.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "aon/records.h"
#include "aon/shm_ring.h"
#include "aon/trace_file.h"
#include "aon/trace_format.h"
#include "record_batches.h"

namespace {

using namespace aon;  // NOLINT(build/namespaces): a benchmark, every name is AON's
using aon::collector::RecordBatches;

// The ring of a rank with the default AON_MEMORY_CAP (64M): half the cap.
constexpr uint64_t kRingBytes = uint64_t{32} << 20;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "collector_benchmark: %s\n", what.c_str());
  std::abort();
}

uint64_t RecordsPerRun() {
  const char* v = std::getenv("AON_BENCH_RECORDS");
  return v != nullptr ? std::strtoull(v, nullptr, 10) : 2'000'000;
}

std::string BenchDir() {
  const char* v = std::getenv("AON_BENCH_DIR");
  return v != nullptr ? v : "/tmp";
}

// ---- The workload: ring entries generated up front -----------------------------

struct Workload {
  struct Item {
    uint16_t type;   // ring::EntryType / RecordEntryType
    uint16_t bytes;  // payload bytes
    uint32_t drop_slot;
    uint64_t offset;  // into arena
  };
  std::vector<uint8_t> arena;
  std::vector<Item> items;  // in ring order, strings included
  uint64_t records = 0;
  uint64_t record_bytes = 0;  // in-memory struct bytes of the records
  uint64_t kernels_out_of_order = 0;  // kernels that start before the previous one in the ring
  std::array<uint64_t, kRecordKindCount> per_kind{};
};

class Generator {
 public:
  explicit Generator(Workload* w) : w_(w) {
    // Compute kernels: name, then a fixed block size, registers, shared memory
    // and up to three grid sizes (the same kernel sees few shapes).
    static const char* const kKernelNames[] = {
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
        "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
        "segment_k_off_kernel__5x_cublas",
        "sm90_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
        "segment_k_off_kernel__5x_cublas",
        "sm90_xmma_gemm_f16f16_f16f32_f32_nt_n_tilesize64x128x64_warpgroupsize1x1x1_execute_"
        "segment_k_off_kernel__5x_cublas",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>"
        "(int, float, c10::Half const*, c10::Half const*, c10::Half const*, float*, float*, c10::Half*)",
        "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::Half, "
        "float>(c10::Half const*, c10::Half const*, float const*, float const*, c10::Half const*, "
        "c10::Half*, int)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::"
        "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}"
        "::operator()() const::{lambda(c10::Half)#1}, at::detail::Array<char*, 2> >",
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::"
        "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}, at::detail::Array<char*, 3> >",
        "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
        "cutlass::half_t>, false, true, false, false, true, true, false, false>(pytorch_flash::"
        "Flash_fwd_params)",
        "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, "
        "64, 128, 8, 2, 4, 2, false, false, cutlass::half_t>, true, false, true, false, false, false>"
        "(pytorch_flash::Flash_bwd_params)",
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
        "at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)",
        "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, "
        "at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(float*, float const*, float "
        "const*, int)",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t"
        "<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::"
        "{lambda(float, float)#1}>, unsigned int, float, 4> >(at::native::ReduceOp<float, ...>)",
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::"
        "TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::"
        "{lambda(float)#1}, at::detail::Array<char*, 2>, TrivialOffsetCalculator<1, unsigned int> >",
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>, "
        "at::detail::Array<char*, 3> >(int, at::native::MulFunctor<float>, at::detail::Array<char*, 3>)",
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
        "namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor"
        "<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, "
        "bool, float*, float*>",
        "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::Half, long, unsigned int, "
        "2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::Half, unsigned int>, ...)",
        "void at::native::(anonymous namespace)::embedding_backward_feature_kernel<c10::Half, float, "
        "long>(long const*, c10::Half const*, c10::Half*, int, long, int, int)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<float, float, "
        "float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 2> >",
        "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<c10::Half, float, unsigned "
        "int, 1, 8, bool>(at::cuda::detail::TensorInfo<c10::Half const, unsigned int>, ...)",
        "void at::native::(anonymous namespace)::masked_scale_kernel<bool, c10::Half, float>(at::"
        "Tensor&, at::Tensor const&, at::Tensor const&, float)::{lambda(c10::Half, bool)#1}",
        "void cutlass::Kernel2<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8>"
        "(cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8::Params)",
        "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, "
        "false>(cublasLt::cublasSplitKParams<float>, float const*, float const*, float*, ...)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::Half, "
        "c10::Half, c10::Half, at::native::binary_internal::DivFunctor<c10::Half> >, at::detail::"
        "Array<char*, 2> >",
        "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
        "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}>(at::TensorIteratorBase&, ...)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::sqrt_kernel_cuda(at::"
        "TensorIteratorBase&)::{lambda()#2}, at::detail::Array<char*, 2> >",
        "void at::native::reduce_kernel<256, 2, at::native::ReduceOp<float, at::native::NormTwoOps"
        "<float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, ...>)",
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
        "namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::ScaleFunctor<float>>",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>, "
        "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::Half>, ...)",
        "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, "
        "long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)",
        "void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<float, long>"
        "(float*, float const*, long const*, float const*, float const*, bool, int, int, long, long)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::tanh_backward_kernel_cuda(at::"
        "TensorIteratorBase&)::{lambda()#2}, at::detail::Array<char*, 3> >",
        "void at::native::vectorized_elementwise_kernel<4, at::native::neg_kernel_cuda(at::"
        "TensorIteratorBase&)::{lambda()#2}, at::detail::Array<char*, 2> >",
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy<c10::Half, unsigned int, 3, 128, "
        "1>(c10::Half*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<...>)",
        "void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::"
        "index_kernel_impl<at::native::OpaqueType<2> >(at::TensorIteratorBase&, ...)",
        "void at::native::triu_tril_kernel<c10::Half, int, false, 4, true>(at::cuda::detail::"
        "TensorInfo<c10::Half, int>, at::cuda::detail::TensorInfo<c10::Half const, int>, long, long)",
        "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<c10::Half, float>(long, "
        "float, c10::Half const*, float*, float*)",
        "void at::native::vectorized_elementwise_kernel<4, at::native::clamp_scalar_kernel_impl(at::"
        "TensorIteratorBase&, at::native::detail::ClampLimits, c10::Scalar const&)::{lambda()#1}>",
    };
    static_assert(sizeof(kKernelNames) / sizeof(kKernelNames[0]) == 39);
    static const int32_t kBlocks[] = {128, 256, 512, 1024, 384, 256, 128, 64};
    static const int32_t kGrids[] = {1, 8, 66, 132, 264, 528, 1024, 2048, 4096, 8192, 16384, 65536};
    static const uint32_t kRegs[] = {16, 24, 32, 40, 64, 96, 128, 168, 255};
    for (size_t i = 0; i < 39; ++i) {
      Shape s;
      s.name_id = Intern(kKernelNames[i]);
      s.block = kBlocks[Rand(8)];
      s.n_grids = 1 + static_cast<int>(Rand(3));
      for (int g = 0; g < 3; ++g) s.grids[g] = kGrids[Rand(12)];
      s.grid_y = Rand(6) == 0 ? 1 + static_cast<int32_t>(Rand(16)) : 1;
      s.regs = kRegs[Rand(9)];
      s.static_smem = Rand(3) == 0 ? 0 : static_cast<uint32_t>(256 << Rand(7));
      s.dynamic_smem = Rand(4) == 0 ? static_cast<uint32_t>(1024 * (8 << Rand(5))) : 0;
      kernels_.push_back(s);
      // Zipf-like: the few hot kernels (GEMMs, elementwise) dominate.
      zipf_total_ += 1.0 / static_cast<double>(i + 1);
      zipf_cdf_.push_back(zipf_total_);
    }
    nccl_kernel_ = Intern("ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevKernelArgsStorage<4096ul>)");
    api_launch_ = Intern("cudaLaunchKernel");
    api_memcpy_ = Intern("cudaMemcpyAsync");
    api_memset_ = Intern("cudaMemsetAsync");
    api_wait_ = Intern("cudaStreamWaitEvent");
    api_event_sync_ = Intern("cudaEventSynchronize");
    api_stream_sync_ = Intern("cudaStreamSynchronize");
    static const char* const kNvtxNames[] = {
        "forward", "backward", "optimizer.step", "aten::linear", "aten::layer_norm",
        "aten::scaled_dot_product_attention", "aten::gelu", "aten::dropout", "aten::add",
        "aten::embedding", "aten::cross_entropy_loss", "LinearBackward0", "NativeLayerNormBackward0",
        "ScaledDotProductFlashAttentionBackward0", "GeluBackward0", "AddBackward0",
        "DDP.reducer.allreduce", "aten::copy_", "aten::mul", "aten::_foreach_add_"};
    for (const char* n : kNvtxNames) nvtx_names_.push_back(Intern(n));
    nccl_allreduce_ = Intern("AllReduce");
    nccl_ring_ = Intern("Ring");
    nccl_simple_ = Intern("Simple");
    nccl_f16_ = Intern("ncclFloat16");
  }

  void Run(uint64_t records) {
    uint64_t group = 0;
    while (w_->records < records) OpGroup(group++);
  }

 private:
  struct Shape {
    uint32_t name_id;
    int32_t block;
    int n_grids;
    int32_t grids[3];
    int32_t grid_y;
    uint32_t regs, static_smem, dynamic_smem;
  };
  struct Pending {
    uint64_t avail_ns;  // when the agent would push it
    uint64_t seq;       // ties: creation order
    uint16_t type;
    uint16_t bytes;
    uint32_t drop_slot;
    std::array<uint8_t, 128> payload;
    std::array<uint32_t, 4> names;  // string ids used (0: none)
  };

  uint64_t Rand(uint64_t n) { return rng_() % n; }
  uint64_t LogUniform(double lo, double hi) {
    std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
    return static_cast<uint64_t>(std::exp(u(rng_)));
  }
  uint64_t Us(double lo_us, double hi_us) { return LogUniform(lo_us * 1000.0, hi_us * 1000.0); }
  uint32_t NextCorrelation() { return corr_ += 1 + (Rand(3) == 0 ? 1 : 0); }

  uint32_t Intern(const std::string& s) {
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    const auto id = static_cast<uint32_t>(strings_.size());
    strings_.push_back(s);
    ids_.emplace(s, id);
    return id;
  }

  const Shape& PickKernel() {
    std::uniform_real_distribution<double> u(0.0, zipf_total_);
    const double x = u(rng_);
    const size_t i = static_cast<size_t>(
        std::lower_bound(zipf_cdf_.begin(), zipf_cdf_.end(), x) - zipf_cdf_.begin());
    return kernels_[std::min(i, kernels_.size() - 1)];
  }

  template <typename T>
  void Add(const T& r, uint64_t avail_ns, std::array<uint32_t, 4> names = {}) {
    Pending p{};
    p.avail_ns = avail_ns;
    p.seq = seq_++;
    p.type = ring::RecordEntryType(RecordTraits<T>::kKind);
    p.bytes = sizeof(T);
    p.drop_slot = static_cast<uint32_t>(RecordTraits<T>::kKind);
    static_assert(sizeof(T) <= sizeof(p.payload));
    std::memcpy(p.payload.data(), &r, sizeof(T));
    p.names = names;
    pending_.push_back(p);
    w_->records++;
    w_->record_bytes += sizeof(T);
    w_->per_kind[static_cast<size_t>(RecordTraits<T>::kKind)]++;
  }

  void Emit(uint16_t type, const void* payload, uint16_t bytes, uint32_t drop_slot) {
    const uint64_t off = w_->arena.size();
    w_->arena.resize(off + ((bytes + 7u) & ~7u));
    std::memcpy(w_->arena.data() + off, payload, bytes);
    w_->items.push_back(Workload::Item{type, bytes, drop_slot, off});
  }

  // One API record on the host thread; returns it (start/end set).
  ApiRecord Api(uint32_t name_id, uint32_t cbid, uint64_t dur_ns) {
    ApiRecord a{};
    host_ += Us(1, 20);
    a.start_ns = host_;
    a.end_ns = host_ + dur_ns;
    host_ = a.end_ns;
    a.correlation_id = NextCorrelation();
    a.callback_id = cbid;
    a.thread_id = thread_;
    a.return_value = 0;
    a.name_id = name_id;
    a.domain = static_cast<uint8_t>(ApiDomain::kRuntime);
    if (external_pending_) {
      ExternalCorrelationRecord x{};
      x.external_id = ++op_id_;
      x.correlation_id = a.correlation_id;
      x.external_kind = 1;
      Add(x, a.start_ns);
      external_pending_ = false;
    }
    Add(a, a.end_ns, {name_id, 0, 0, 0});
    return a;
  }

  // Start of GPU work on `stream` launched by `a`.
  uint64_t GpuStart(uint32_t stream, const ApiRecord& a) {
    uint64_t& g = gpu_[stream];
    return std::max(a.start_ns + Us(3, 8), g + Us(1, 20));
  }

  void Kernel(uint32_t stream, const Shape& s, uint64_t dur_ns) {
    const ApiRecord a = Api(api_launch_, 211, Us(2, 10));
    KernelRecord k{};
    k.start_ns = GpuStart(stream, a);
    k.end_ns = k.start_ns + dur_ns;
    gpu_[stream] = k.end_ns;
    k.correlation_id = a.correlation_id;
    k.device_id = 0;
    k.context_id = 1;
    k.stream_id = stream;
    k.name_id = s.name_id;
    k.grid_x = s.grids[Rand(static_cast<uint64_t>(s.n_grids))];
    k.grid_y = s.grid_y;
    k.grid_z = 1;
    k.block_x = s.block;
    k.block_y = 1;
    k.block_z = 1;
    k.registers_per_thread = s.regs;
    k.static_shared_bytes = s.static_smem;
    k.dynamic_shared_bytes = s.dynamic_smem;
    Add(k, k.end_ns, {s.name_id, 0, 0, 0});
    last_kernel_ = k;
  }

  // A slice of a training step: see the file comment for the mix.
  void OpGroup(uint64_t group) {
    enum Op : uint8_t { kLaunch, kLaunchSide, kLaunchNccl, kCopy, kSet, kWait, kEventSync };
    std::vector<Op> ops;
    for (int i = 0; i < 26; ++i) ops.push_back(kLaunch);
    for (int i = 0; i < 8; ++i) ops.push_back(kLaunchSide);
    ops.push_back(kLaunchNccl);
    for (int i = 0; i < 5; ++i) ops.push_back(kCopy);
    for (int i = 0; i < 2; ++i) ops.push_back(kSet);
    ops.push_back(kWait);
    ops.push_back(kEventSync);
    std::shuffle(ops.begin(), ops.end(), rng_);
    thread_ = group % 2 == 0 ? 4242 : 4251;  // forward thread, autograd thread

    const uint64_t group_start = host_ + Us(1, 20);
    host_ = group_start;
    const size_t quarter = ops.size() / 4;
    std::array<uint64_t, 4> inner_start{}, inner_end{};
    int syncs = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (i % quarter == 0 && i / quarter < 4) inner_start[i / quarter] = host_ + 500;
      // PyTorch's external correlation: an op's id, tied to the next API call.
      if (i == 0 || i == ops.size() / 2) external_pending_ = true;
      switch (ops[i]) {
        case kLaunch: Kernel(kComputeStream, PickKernel(), Us(2, 200)); break;
        case kLaunchSide: Kernel(kSideStream, PickKernel(), Us(2, 200)); break;
        case kLaunchNccl: {
          const uint64_t enqueue = host_;
          Kernel(kNcclStream, Shape{nccl_kernel_, 512, 1, {16, 16, 16}, 1, 96, 0, 0}, Us(20, 400));
          static const uint64_t kBytes[] = {4u << 20, 16u << 20, 25u << 20, 1u << 20};
          NcclRecord n{};
          n.start_ns = enqueue + Us(1, 3);
          n.end_ns = last_kernel_.end_ns;
          n.gpu_start_ns = last_kernel_.start_ns;
          n.comm_hash = 0x9e3779b97f4a7c15ull;
          n.seq_number = nccl_seq_++;
          n.bytes = kBytes[Rand(4)];
          n.count = n.bytes / 2;
          n.external_id = 0;
          n.correlation_id = last_kernel_.correlation_id;
          n.func_id = nccl_allreduce_;
          n.algo_id = nccl_ring_;
          n.proto_id = nccl_simple_;
          n.datatype_id = nccl_f16_;
          n.root = -1;
          n.peer = -1;
          n.n_channels = 16;
          n.n_warps = 16;
          n.stream_id = kNcclStream;
          n.channel_id = -1;
          n.comm_rank = 3;
          n.comm_nranks = 8;
          n.comm_nnodes = 1;
          n.event_type = static_cast<uint8_t>(NcclEventType::kColl);
          n.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kKernel);
          Add(n, n.end_ns, {nccl_allreduce_, nccl_ring_, nccl_simple_, nccl_f16_});
          break;
        }
        case kCopy: {
          static const uint64_t kBytes[] = {8, 4096, 65536, 1u << 20, 4u << 20};
          const uint32_t stream = Rand(2) == 0 ? kComputeStream : kCopyStream;
          const ApiRecord a = Api(api_memcpy_, 41, Us(3, 10));
          MemcpyRecord m{};
          m.bytes = kBytes[Rand(5)];
          m.start_ns = GpuStart(stream, a);
          m.end_ns = m.start_ns + 1500 + m.bytes / 20;  // ~20 GB/s
          gpu_[stream] = m.end_ns;
          m.correlation_id = a.correlation_id;
          m.device_id = 0;
          m.context_id = 1;
          m.stream_id = stream;
          m.src_device_id = 0;
          m.dst_device_id = 0;
          m.copy_kind = Rand(3) == 0 ? 2 : 1;  // DtoH, HtoD
          m.src_kind = m.copy_kind == 1 ? 2 : 3;
          m.dst_kind = m.copy_kind == 1 ? 3 : 2;
          m.flags = 1;
          Add(m, m.end_ns);
          break;
        }
        case kSet: {
          const ApiRecord a = Api(api_memset_, 51, Us(2, 6));
          MemsetRecord s{};
          s.bytes = uint64_t{1} << (12 + Rand(12));
          s.start_ns = GpuStart(kComputeStream, a);
          s.end_ns = s.start_ns + 1000 + s.bytes / 400;
          gpu_[kComputeStream] = s.end_ns;
          s.correlation_id = a.correlation_id;
          s.device_id = 0;
          s.context_id = 1;
          s.stream_id = kComputeStream;
          s.value = 0;
          s.memory_kind = 3;
          s.flags = 1;
          Add(s, s.end_ns);
          break;
        }
        case kWait: {
          // cudaStreamWaitEvent: two sync records (the event recorded on the
          // side stream, waited for by the compute stream and the NCCL stream).
          const ApiRecord a = Api(api_wait_, 147, Us(2, 5));
          for (uint32_t stream : {kComputeStream, kNcclStream}) {
            SyncRecord s{};
            s.start_ns = a.start_ns;
            s.end_ns = a.end_ns;
            s.correlation_id = a.correlation_id;
            s.context_id = 1;
            s.stream_id = stream;
            s.event_id = 17;
            s.sync_type = 2;
            Add(s, s.end_ns);
            ++syncs;
          }
          break;
        }
        case kEventSync: {
          // The host waits for the side stream's event.
          ApiRecord a = Api(api_event_sync_, 137, Us(2, 5));
          const uint64_t until = std::max(a.end_ns, gpu_[kSideStream] + Us(2, 8));
          SyncRecord s{};
          s.start_ns = a.start_ns;
          s.end_ns = until;
          s.correlation_id = a.correlation_id;
          s.context_id = 1;
          s.stream_id = UINT32_MAX;
          s.event_id = 17;
          s.sync_type = 1;
          Add(s, s.end_ns);
          ++syncs;
          host_ = until;
          break;
        }
      }
      if ((i + 1) % quarter == 0 && (i + 1) / quarter <= 4) inner_end[(i + 1) / quarter - 1] = host_ + 700;
    }
    // The end of the group: cudaStreamSynchronize waits for every stream (a
    // sync record for each of the two busiest streams).
    {
      const ApiRecord a = Api(api_stream_sync_, 131, Us(2, 5));
      uint64_t until = a.end_ns;
      for (const auto& [stream, end] : gpu_) until = std::max(until, end + Us(2, 8));
      for (uint32_t stream : {kComputeStream, kSideStream}) {
        if (syncs >= 5) break;
        SyncRecord s{};
        s.start_ns = a.start_ns;
        s.end_ns = until;
        s.correlation_id = a.correlation_id;
        s.context_id = 1;
        s.stream_id = stream;
        s.sync_type = 3;
        Add(s, s.end_ns);
        ++syncs;
      }
      host_ = until;
    }
    // NVTX: the group's outer range and four nested ones (pushed when popped).
    const uint32_t outer_name = nvtx_names_[group % 3];
    for (int i = 0; i < 4; ++i) {
      NvtxRecord n{};
      n.start_ns = inner_start[static_cast<size_t>(i)];
      n.end_ns = std::max(inner_end[static_cast<size_t>(i)], n.start_ns + 1000);
      n.thread_id = thread_;
      n.name_id = nvtx_names_[3 + Rand(nvtx_names_.size() - 3)];
      n.depth = 1;
      n.type = static_cast<uint8_t>(NvtxType::kPushPop);
      Add(n, n.end_ns, {n.name_id, 0, 0, 0});
    }
    NvtxRecord outer{};
    outer.start_ns = group_start;
    outer.end_ns = host_ + 300;
    outer.thread_id = thread_;
    outer.name_id = outer_name;
    outer.depth = 0;
    outer.type = static_cast<uint8_t>(NvtxType::kPushPop);
    Add(outer, outer.end_ns, {outer_name, 0, 0, 0});
    host_ += Us(1, 20);

    // Into the ring in completion order, each name once before its first use.
    std::stable_sort(pending_.begin(), pending_.end(), [](const Pending& a, const Pending& b) {
      return a.avail_ns < b.avail_ns;
    });
    for (const Pending& p : pending_) {
      for (uint32_t id : p.names) {
        if (id == 0 || (id < sent_.size() && sent_[id])) continue;
        if (id >= sent_.size()) sent_.resize(id + 1, false);
        sent_[id] = true;
        const std::string& s = strings_[id];
        std::vector<uint8_t> buf(4 + s.size());
        std::memcpy(buf.data(), &id, 4);
        std::memcpy(buf.data() + 4, s.data(), s.size());
        Emit(static_cast<uint16_t>(ring::EntryType::kString), buf.data(),
             static_cast<uint16_t>(buf.size()), ring::kStringDropSlot);
      }
      Emit(p.type, p.payload.data(), p.bytes, p.drop_slot);
      if (p.type == ring::RecordEntryType(RecordKind::kKernel)) {
        uint64_t start;
        std::memcpy(&start, p.payload.data() + offsetof(KernelRecord, start_ns), sizeof(start));
        if (start < last_kernel_start_) ++w_->kernels_out_of_order;
        last_kernel_start_ = start;
      }
    }
    pending_.clear();
  }

  static constexpr uint32_t kComputeStream = 7, kSideStream = 14, kNcclStream = 13,
                            kCopyStream = 21;

  Workload* w_;
  std::mt19937_64 rng_{20261130};
  std::vector<std::string> strings_{std::string()};
  std::unordered_map<std::string, uint32_t> ids_{{std::string(), 0}};
  std::vector<bool> sent_{true};
  std::vector<Shape> kernels_;
  std::vector<double> zipf_cdf_;
  double zipf_total_ = 0;
  uint32_t nccl_kernel_ = 0, api_launch_ = 0, api_memcpy_ = 0, api_memset_ = 0, api_wait_ = 0,
           api_event_sync_ = 0, api_stream_sync_ = 0;
  uint32_t nccl_allreduce_ = 0, nccl_ring_ = 0, nccl_simple_ = 0, nccl_f16_ = 0;
  std::vector<uint32_t> nvtx_names_;
  std::vector<Pending> pending_;
  uint64_t seq_ = 0;
  uint64_t host_ = 431'337'123'456'789;  // ~5 days of uptime
  std::unordered_map<uint32_t, uint64_t> gpu_{{kComputeStream, host_}, {kSideStream, host_},
                                               {kNcclStream, host_}, {kCopyStream, host_}};
  uint32_t corr_ = 1000;
  uint32_t thread_ = 4242;
  uint64_t op_id_ = 0;
  bool external_pending_ = false;
  uint64_t nccl_seq_ = 0;
  KernelRecord last_kernel_{};
  uint64_t last_kernel_start_ = 0;
};

const Workload& GetWorkload() {
  static const Workload w = [] {
    Workload wl;
    Generator g(&wl);
    g.Run(RecordsPerRun());
    return wl;
  }();
  return w;
}

// ---- One run: producer thread -> ring -> this thread ---------------------------

ring::Region MakeRing() {
  auto r = ring::Region::Create(kRingBytes, static_cast<int32_t>(getpid()), 0);
  if (!r.ok()) Die("ring: " + r.status().ToString());
  std::memset(r->ring(), 0, r->ring_bytes());  // first-touch faults are not the cost measured
  return std::move(r).value();
}

// Pushes every item; a full ring makes it wait (50 us) and try again, so no
// record is lost; the waits are counted.
void Produce(const ring::Region& region, const Workload& w, uint64_t* full_waits) {
  ring::Producer p(region);
  uint64_t waits = 0;
  for (const Workload::Item& it : w.items) {
    while (!p.Write(it.type, w.arena.data() + it.offset, it.bytes, it.drop_slot)) {
      ++waits;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  *full_waits = waits;
}

struct RunStats {
  double seconds = 0;
  uint64_t full_waits = 0;
  uint64_t batches = 0;  // on_batch calls
};

// Drains until every item of `w` went through; `on_entry(e)` per entry,
// `on_batch()` whenever at least `flush_every` records came since the last one
// (and once at the end).
template <typename OnEntry, typename OnBatch>
RunStats RunOnce(const ring::Region& region, const Workload& w, uint64_t flush_every,
                 OnEntry&& on_entry, OnBatch&& on_batch) {
  RunStats stats;
  ring::Consumer c(region);
  const uint64_t total = w.items.size();
  uint64_t seen = 0, since_flush = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread producer(Produce, std::cref(region), std::cref(w), &stats.full_waits);
  while (seen < total) {
    uint64_t records = 0;
    auto r = c.Drain(
        [&](const ring::Entry& e) {
          if (e.type != static_cast<uint16_t>(ring::EntryType::kString)) ++records;
          on_entry(e);
        },
        uint64_t{64} << 10);  // small steps: a batch overshoots `flush_every` by < ~1000 records
    if (!r.ok()) Die("drain: " + r.status().ToString());
    seen += r->entries;
    since_flush += records;
    if (since_flush >= flush_every) {
      on_batch();
      ++stats.batches;
      since_flush = 0;
    }
    if (r->entries == 0) std::this_thread::yield();
  }
  on_batch();
  ++stats.batches;
  producer.join();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

void ReportThroughput(benchmark::State& state, const Workload& w, uint64_t full_waits) {
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(w.records));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.record_bytes));
  state.counters["records"] = static_cast<double>(w.records);
  // Share of kernel records that reach the ring before one that started earlier.
  state.counters["kern_unsorted_pct"] =
      100.0 * static_cast<double>(w.kernels_out_of_order) /
      static_cast<double>(w.per_kind[static_cast<size_t>(RecordKind::kKernel)]);
  state.counters["prod_waits"] = static_cast<double>(full_waits);
}

// Baseline: each entry memcpy'd out of the ring into a scratch buffer.
void BM_DrainCopy(benchmark::State& state) {
  const Workload& w = GetWorkload();
  const ring::Region region = MakeRing();
  alignas(8) static uint8_t scratch[ring::kMaxStringBytes + 8];
  uint64_t waits = 0;
  for (auto _ : state) {
    RunStats s = RunOnce(
        region, w, UINT64_MAX,
        [&](const ring::Entry& e) {
          std::memcpy(scratch, e.payload, e.payload_bytes);
          benchmark::DoNotOptimize(scratch);
        },
        [] {});
    state.SetIterationTime(s.seconds);
    waits += s.full_waits;
  }
  ReportThroughput(state, w, waits);
}

// The collector's drain without the file: RecordBatches, cleared every batch.
void BM_DrainBatches(benchmark::State& state) {
  const Workload& w = GetWorkload();
  const ring::Region region = MakeRing();
  const auto flush_every = static_cast<uint64_t>(state.range(0));
  uint64_t waits = 0;
  for (auto _ : state) {
    RecordBatches batches;
    RunStats s = RunOnce(
        region, w, flush_every,
        [&](const ring::Entry& e) {
          if (e.type != static_cast<uint16_t>(ring::EntryType::kString)) batches.Add(e);
        },
        [&] { batches.Clear(); });
    state.SetIterationTime(s.seconds);
    waits += s.full_waits;
  }
  ReportThroughput(state, w, waits);
}

// Sorts every kind of a batch by start time (stable: ties keep drain order), in
// place, as a collector would just before AppendTo. (RecordBatches exposes its
// vectors read-only; the benchmark owns the object, so casting const away is
// what an in-class sort would do.)
void SortByStart(RecordBatches& b) {
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, ExternalCorrelationRecord>) {
      auto& v = const_cast<std::vector<T>&>(b.Of<T>());
      std::stable_sort(v.begin(), v.end(),
                       [](const T& a, const T& c) { return a.start_ns < c.start_ns; });
    }
  });
}

// Bytes on disk: storage of each /records dataset and its record count.
struct DiskUsage {
  std::array<uint64_t, kRecordKindCount> storage{};
  std::array<uint64_t, kRecordKindCount> records{};
  uint64_t file_bytes = 0;
};

DiskUsage MeasureFile(const std::string& path) {
  DiskUsage d;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) Die("stat " + path);
  d.file_bytes = static_cast<uint64_t>(st.st_size);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) Die("H5Fopen " + path);
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    const std::string name = std::string("/records/") + RecordKindName(static_cast<RecordKind>(k));
    hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    if (ds < 0) Die("H5Dopen2 " + name);
    d.storage[k] = H5Dget_storage_size(ds);
    hid_t space = H5Dget_space(ds);
    hsize_t n = 0;
    H5Sget_simple_extent_dims(space, &n, nullptr);
    d.records[k] = n;
    H5Sclose(space);
    H5Dclose(ds);
  }
  H5Fclose(f);
  return d;
}

const char* ShortKindName(size_t k) {
  static const char* const kNames[kRecordKindCount] = {"kernel", "memcpy", "memset", "sync",
                                                       "api",    "nvtx",   "nccl",   "extcorr"};
  return kNames[k];
}

// The collector's full path: drain into RecordBatches, then every `flush`
// records append to the rank file, append new strings, set last_record_ns and
// end_ns, Flush(). Args: deflate level, records per chunk, sort (0/1), flush.
void BM_DrainAppend(benchmark::State& state) {
  const Workload& w = GetWorkload();
  const ring::Region region = MakeRing();
  WriteOptions opt;
  opt.deflate_level = static_cast<int>(state.range(0));
  opt.chunk_records = static_cast<uint64_t>(state.range(1));
  const bool sort = state.range(2) != 0;
  const auto flush_every = static_cast<uint64_t>(state.range(3));
  const std::string path = BenchDir() + "/aon-collector-bench-" + std::to_string(getpid()) + ".h5";
  uint64_t waits = 0, appends = 0;
  DiskUsage disk;
  for (auto _ : state) {
    auto created = TraceWriter::Create(path, FileKind::kRank, opt);
    if (!created.ok()) Die(created.status().ToString());
    std::unique_ptr<TraceWriter> writer = std::move(created).value();
    RankMetadata meta;
    meta.job_id = "collector-bench";
    meta.rank = 0;
    meta.world_size = 1;
    meta.host = "bench";
    meta.pid = getpid();
    meta.source = "synthetic";
    meta.kinds = "all";
    meta.end_reason = "running";
    if (Status st = writer->WriteRankMetadata(meta); !st.ok()) Die(st.ToString());
    if (Status st = writer->Flush(); !st.ok()) Die(st.ToString());

    RecordBatches batches;
    std::vector<std::string> strings{std::string()};
    std::vector<uint8_t> have{1};
    size_t strings_written = 0;
    uint64_t last_ns = 0;
    RunStats s = RunOnce(
        region, w, flush_every,
        [&](const ring::Entry& e) {
          if (e.type == static_cast<uint16_t>(ring::EntryType::kString)) {
            uint32_t id;
            std::memcpy(&id, e.payload, 4);
            if (id >= strings.size()) {
              strings.resize(id + 1);
              have.resize(id + 1, 0);
            }
            strings[id].assign(reinterpret_cast<const char*>(e.payload) + 4, e.payload_bytes - 4u);
            have[id] = 1;
            return;
          }
          if (batches.Add(e) == RecordKind::kKernel) {
            last_ns = std::max(last_ns, batches.Of<KernelRecord>().back().end_ns);
          }
        },
        [&] {
          if (sort) SortByStart(batches);
          Status st = batches.AppendTo(*writer);
          if (!st.ok()) Die(st.ToString());
          batches.Clear();
          size_t end = strings_written;
          while (end < strings.size() && have[end] != 0) ++end;
          if (end > strings_written) {
            st = writer->AppendStrings(std::span<const std::string>(strings).subspan(
                strings_written, end - strings_written));
            if (!st.ok()) Die(st.ToString());
            strings_written = end;
          }
          st = writer->SetMetaAttribute("last_record_ns", last_ns);
          if (st.ok()) st = writer->SetMetaAttribute("end_ns", last_ns);
          if (st.ok()) st = writer->Flush();
          if (!st.ok()) Die(st.ToString());
        });
    state.SetIterationTime(s.seconds);
    waits += s.full_waits;
    appends = s.batches;
    meta.end_reason = "exit";
    if (Status st = writer->WriteRankMetadata(meta); !st.ok()) Die(st.ToString());
    if (Status st = writer->Finish(); !st.ok()) Die(st.ToString());
    writer.reset();
    disk = MeasureFile(path);
    std::remove(path.c_str());
  }
  ReportThroughput(state, w, waits);
  uint64_t storage = 0, records = 0;
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    if (disk.records[k] != w.per_kind[k]) {
      Die(std::string("file holds ") + std::to_string(disk.records[k]) + " " + ShortKindName(k) +
          " records, expected " + std::to_string(w.per_kind[k]));
    }
    storage += disk.storage[k];
    records += disk.records[k];
    state.counters[std::string("B/") + ShortKindName(k)] =
        disk.records[k] > 0 ? static_cast<double>(disk.storage[k]) / static_cast<double>(disk.records[k]) : 0;
  }
  state.counters["B/rec_data"] = static_cast<double>(storage) / static_cast<double>(records);
  state.counters["B/rec_file"] = static_cast<double>(disk.file_bytes) / static_cast<double>(records);
  state.counters["file_MB"] = static_cast<double>(disk.file_bytes) / 1e6;
  state.counters["appends"] = static_cast<double>(appends);
}

constexpr int64_t kFlush = 131072;  // ~1 s of a busy rank (~130 k records/s)

BENCHMARK(BM_DrainCopy)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DrainBatches)->ArgName("flush")->Arg(kFlush)->UseManualTime()->Unit(benchmark::kMillisecond);
// Writer defaults (deflate 4, 16384 records per chunk, drain order) at three
// batch sizes: 1 s of a light rank (16 Ki records/s), of a busy one, and of the
// 1 M records/s load of memory_under_load.sh.
BENCHMARK(BM_DrainAppend)
    ->ArgNames({"deflate", "chunk", "sort", "flush"})
    ->Args({4, 16384, 0, 16384})
    ->Args({4, 16384, 0, kFlush})
    ->Args({4, 16384, 0, 1 << 20})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
// Smaller chunks than the default: less to inflate and deflate again at every
// append (each append rewrites the partial last chunk of every kind); also
// with deflate level 1.
BENCHMARK(BM_DrainAppend)
    ->Name("BM_DrainAppendChunk4K")
    ->ArgNames({"deflate", "chunk", "sort", "flush"})
    ->Args({4, 4096, 0, 16384})
    ->Args({4, 4096, 0, kFlush})
    ->Args({4, 4096, 0, 1 << 20})
    ->Args({1, 4096, 0, 16384})
    ->Args({1, 4096, 0, kFlush})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
// What the on-disk size depends on: deflate level x chunk size x sorting.
void SweepArgs(benchmark::internal::Benchmark* b) {
  for (int64_t sort : {0, 1}) {
    for (int64_t chunk : {16384, 65536, 262144}) {
      for (int64_t deflate : {1, 4, 6, 9}) b->Args({deflate, chunk, sort, kFlush});
    }
  }
}
BENCHMARK(BM_DrainAppend)
    ->Name("BM_DrainAppendSweep")
    ->ArgNames({"deflate", "chunk", "sort", "flush"})
    ->Apply(SweepArgs)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
