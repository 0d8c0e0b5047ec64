// The node collector's drain + HDF5 append path (collector): a
// producer thread fills a shared-memory ring (aon/ipc/shm_ring.h) with a realistic
// record mix generated up front, while the consumer (this thread, as the
// collector's one thread) drains it into RecordBatches (ipc/include/aon/ipc/record_batches.h) and,
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

#include "aon/format/records.h"
#include "aon/ipc/shm_ring.h"
#include "aon/format/trace_file.h"
#include "aon/format/trace_format.h"
#include "aon/ipc/record_batches.h"
#include "synthetic_step.h"

namespace {

using namespace aon;  // NOLINT(build/namespaces): a benchmark, every name is AON's
using aon::RecordBatches;

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

// The record mix of one op group (synthetic_step.h); records enter the ring in
// completion order, each name once before its first use. Program and timings
// come from one generator (rng_).
class Generator : public bench::StepGenerator<Generator> {
 public:
  explicit Generator(Workload* w) : StepGenerator(20261130, 1), w_(w) {
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
    InitNames(kKernelNames, rng_);
    host_ = 431'337'123'456'789;  // ~5 days of uptime
    gpu_ = std::unordered_map<uint32_t, uint64_t>{
        {kComputeStream, host_}, {kSideStream, host_}, {kNcclStream, host_}, {kCopyStream, host_}};
    thread_ = 4242;
  }

  void Run(uint64_t records) {
    uint64_t group = 0;
    while (w_->records < records) OpGroup(group++);
  }

 private:
  friend class bench::StepGenerator<Generator>;

  struct Pending {
    uint64_t avail_ns;  // when the agent would push it
    uint64_t seq;       // ties: creation order
    uint16_t type;
    uint16_t bytes;
    uint32_t drop_slot;
    std::array<uint8_t, 128> payload;
    std::array<uint32_t, 4> names;  // string ids used (0: none)
  };

  // The string ids a record uses.
  template <typename T>
  static std::array<uint32_t, 4> Names(const T& r) {
    if constexpr (std::is_same_v<T, KernelRecord> || std::is_same_v<T, ApiRecord> ||
                  std::is_same_v<T, NvtxRecord>) {
      return {r.name_id, 0, 0, 0};
    } else if constexpr (std::is_same_v<T, NcclRecord>) {
      return {r.func_id, r.algo_id, r.proto_id, r.datatype_id};
    } else {
      return {};
    }
  }

  template <typename T>
  void Add(const T& r, uint64_t avail_ns) {
    Pending p{};
    p.avail_ns = avail_ns;
    p.seq = seq_++;
    p.type = ring::RecordEntryType(RecordTraits<T>::kKind);
    p.bytes = sizeof(T);
    p.drop_slot = static_cast<uint32_t>(RecordTraits<T>::kKind);
    static_assert(sizeof(T) <= sizeof(p.payload));
    std::memcpy(p.payload.data(), &r, sizeof(T));
    p.names = Names(r);
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

  // StepGenerator's hooks.
  uint64_t BeginGroup(uint64_t group, std::vector<Op>& ops) {
    std::shuffle(ops.begin(), ops.end(), rng_);
    thread_ = group % 2 == 0 ? 4242 : 4251;  // forward thread, autograd thread
    return host_ + Us(1, 20);
  }
  static bool TorchOpAt(size_t i, size_t n) { return i == 0 || i == n / 2; }
  void Launch(size_t /*i*/, uint32_t stream) {
    const uint64_t dur = Us(2, 200);
    const Shape& s = PickKernel(rng_);
    Kernel(stream, s, dur, 0, Api(api_launch_, 211, Us(2, 10)));
  }
  void LaunchNccl(uint64_t /*group*/) {
    const uint64_t enqueue = host_;
    const uint64_t dur = Us(20, 400);
    const KernelRecord k = Kernel(kNcclStream, nccl_kernel_, dur, 0, Api(api_launch_, 211, Us(2, 10)));
    static const uint64_t kBytes[] = {4u << 20, 16u << 20, 25u << 20, 1u << 20};
    const uint64_t start = enqueue + Us(1, 3);
    NcclRecord n = AllReduce(0x9e3779b97f4a7c15ull, kBytes[Rand(4)], 3, 8, 1);
    n.start_ns = start;
    n.end_ns = k.end_ns;
    n.gpu_start_ns = k.start_ns;
    n.seq_number = nccl_seq_++;
    n.external_id = 0;
    n.correlation_id = k.correlation_id;
    n.stream_id = kNcclStream;
    n.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kKernel);
    Add(n, n.end_ns);
  }
  uint32_t InnerNvtxName(size_t /*i*/) { return nvtx_names_[3 + Rand(nvtx_names_.size() - 3)]; }

  // Into the ring in completion order, each name once before its first use.
  void EndGroup() {
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

  Workload* w_;
  std::vector<bool> sent_{true};
  std::vector<Pending> pending_;
  uint64_t seq_ = 0;
  uint64_t nccl_seq_ = 0;
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
    if constexpr (!kJoinTable<T>) {
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
