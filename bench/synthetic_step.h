// The synthetic PyTorch-like training step shared by the benchmark programs
// (collector_benchmark.cc and make_synthetic_job.cc): an "op group" of 100
// records (35 kernels, 45 runtime API records, 5 memcpy, 2 memset, 5 sync,
// 5 NVTX ranges, 1 NCCL all-reduce, external correlations), with the timing
// model of host API calls, GPU streams and NVTX ranges; each program's file
// comment describes the mix and the times.
//
// StepGenerator<Derived> (CRTP) holds what both programs share: the string
// table, the kernel shapes, the host and stream clocks and the records of every
// op but the NCCL launch. The program (Derived) says what differs:
//   template <typename T> void Add(T r, uint64_t avail_ns);  // where records go
//   uint64_t BeginGroup(uint64_t group, std::vector<Op>& ops);
//       // orders `ops`, sets thread_, returns the group's start on the host
//   bool TorchOpAt(size_t i, size_t n);   // op i of n carries a PyTorch op id
//   void Launch(size_t i, uint32_t stream);  // a compute kernel launch (op i)
//   void LaunchNccl(uint64_t group);         // the all-reduce launch
//   uint32_t InnerNvtxName(size_t i);        // the name of nested range i
//   void EndGroup();                         // after the group's last record
// A program draws its random numbers in its own order, so each keeps its
// output for a given seed.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "aon/format/records.h"

namespace aon::bench {

inline constexpr const char* kStepNvtxNames[] = {
    "forward", "backward", "optimizer.step", "aten::linear", "aten::layer_norm",
    "aten::scaled_dot_product_attention", "aten::gelu", "aten::dropout", "aten::add",
    "aten::embedding", "aten::cross_entropy_loss", "LinearBackward0", "NativeLayerNormBackward0",
    "ScaledDotProductFlashAttentionBackward0", "GeluBackward0", "AddBackward0",
    "DDP.reducer.allreduce", "aten::copy_", "aten::mul", "aten::_foreach_add_"};
inline constexpr size_t kStepNvtxNameCount = sizeof(kStepNvtxNames) / sizeof(kStepNvtxNames[0]);

template <class Derived>
class StepGenerator {
 public:
  static constexpr uint32_t kComputeStream = 7, kSideStream = 14, kNcclStream = 13,
                            kCopyStream = 21;
  enum Op : uint8_t { kLaunch, kLaunchSide, kLaunchNccl, kCopy, kSet, kWait, kEventSync };

  struct Shape {
    uint32_t name_id;
    int32_t block;
    int n_grids;
    int32_t grids[3];
    int32_t grid_y;
    uint32_t regs, static_smem, dynamic_smem;
  };

 protected:
  // `seed`: the generator of this program's timings (rng_); `torch_external_kind`:
  // the external_kind of the PyTorch op ids tied to API calls.
  StepGenerator(uint64_t seed, uint8_t torch_external_kind)
      : rng_(seed), torch_external_kind_(torch_external_kind) {}

  // Interns every name the step uses and draws the compute kernels' shapes
  // (a fixed block size, registers, shared memory and up to three grid sizes,
  // Zipf-like frequencies) from `program`.
  void InitNames(std::span<const char* const> kernel_names, std::mt19937_64& program) {
    static const int32_t kBlocks[] = {128, 256, 512, 1024, 384, 256, 128, 64};
    static const int32_t kGrids[] = {1, 8, 66, 132, 264, 528, 1024, 2048, 4096, 8192, 16384, 65536};
    static const uint32_t kRegs[] = {16, 24, 32, 40, 64, 96, 128, 168, 255};
    auto draw = [&program](uint64_t n) { return program() % n; };
    for (size_t i = 0; i < kernel_names.size(); ++i) {
      Shape s;
      s.name_id = Intern(kernel_names[i]);
      s.block = kBlocks[draw(8)];
      s.n_grids = 1 + static_cast<int>(draw(3));
      for (int g = 0; g < 3; ++g) s.grids[g] = kGrids[draw(12)];
      s.grid_y = draw(6) == 0 ? 1 + static_cast<int32_t>(draw(16)) : 1;
      s.regs = kRegs[draw(9)];
      s.static_smem = draw(3) == 0 ? 0 : static_cast<uint32_t>(256u << draw(7));
      s.dynamic_smem = draw(4) == 0 ? static_cast<uint32_t>(1024u * (8u << draw(5))) : 0;
      kernels_.push_back(s);
      // Zipf-like: the few hot kernels (GEMMs, elementwise) dominate.
      zipf_total_ += 1.0 / static_cast<double>(i + 1);
      zipf_cdf_.push_back(zipf_total_);
    }
    nccl_kernel_ = Shape{Intern("ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
                         512, 1, {16, 16, 16}, 1, 96, 0, 0};
    api_launch_ = Intern("cudaLaunchKernel");
    api_memcpy_ = Intern("cudaMemcpyAsync");
    api_memset_ = Intern("cudaMemsetAsync");
    api_wait_ = Intern("cudaStreamWaitEvent");
    api_event_sync_ = Intern("cudaEventSynchronize");
    api_stream_sync_ = Intern("cudaStreamSynchronize");
    for (const char* n : kStepNvtxNames) nvtx_names_.push_back(Intern(n));
    nccl_allreduce_ = Intern("AllReduce");
    nccl_ring_ = Intern("Ring");
    nccl_simple_ = Intern("Simple");
    nccl_f16_ = Intern("ncclFloat16");
  }

  uint64_t Rand(uint64_t n) { return rng_() % n; }
  static uint64_t LogUniform(std::mt19937_64& g, double lo, double hi) {
    std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
    return static_cast<uint64_t>(std::exp(u(g)));
  }
  uint64_t Us(double lo_us, double hi_us) { return LogUniform(rng_, lo_us * 1e3, hi_us * 1e3); }
  uint32_t NextCorrelation() { return corr_ += 1 + (Rand(3) == 0 ? 1 : 0); }

  uint32_t Intern(const std::string& s) {
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    const auto id = static_cast<uint32_t>(strings_.size());
    strings_.push_back(s);
    ids_.emplace(s, id);
    return id;
  }

  const Shape& PickKernel(std::mt19937_64& g) {
    std::uniform_real_distribution<double> u(0.0, zipf_total_);
    const double x = u(g);
    const size_t i = static_cast<size_t>(
        std::lower_bound(zipf_cdf_.begin(), zipf_cdf_.end(), x) - zipf_cdf_.begin());
    return kernels_[std::min(i, kernels_.size() - 1)];
  }

  // One API record on the host thread (and the pending PyTorch op's external
  // correlation before it); returns it.
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
    if (torch_op_pending_) {
      ExternalCorrelationRecord x{};
      x.external_id = ++torch_op_id_;
      x.correlation_id = a.correlation_id;
      x.external_kind = torch_external_kind_;
      self().Add(x, a.start_ns);
      torch_op_pending_ = false;
    }
    self().Add(a, a.end_ns);
    return a;
  }

  // Start of GPU work on `stream` launched by `a`.
  uint64_t GpuStart(uint32_t stream, const ApiRecord& a) {
    return std::max(a.start_ns + Us(3, 8), gpu_[stream] + Us(1, 20));
  }

  // The kernel launched by `a`: `dur_ns` long, ending no earlier than `not_before_end`.
  KernelRecord Kernel(uint32_t stream, const Shape& s, uint64_t dur_ns, uint64_t not_before_end,
                      const ApiRecord& a) {
    KernelRecord k{};
    k.start_ns = GpuStart(stream, a);
    k.end_ns = std::max(k.start_ns + dur_ns, not_before_end);
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
    self().Add(k, k.end_ns);
    return k;
  }

  // The all-reduce collective's fields both programs set alike.
  NcclRecord AllReduce(uint64_t comm_hash, uint64_t bytes, int32_t comm_rank, int32_t comm_nranks,
                       int32_t comm_nnodes) const {
    NcclRecord n{};
    n.comm_hash = comm_hash;
    n.bytes = bytes;
    n.count = bytes / 2;
    n.func_id = nccl_allreduce_;
    n.algo_id = nccl_ring_;
    n.proto_id = nccl_simple_;
    n.datatype_id = nccl_f16_;
    n.root = -1;
    n.peer = -1;
    n.n_channels = 16;
    n.n_warps = 16;
    n.channel_id = -1;
    n.comm_rank = comm_rank;
    n.comm_nranks = comm_nranks;
    n.comm_nnodes = comm_nnodes;
    n.event_type = static_cast<uint8_t>(NcclEventType::kColl);
    return n;
  }

  // One slice of a training step.
  void OpGroup(uint64_t group) {
    std::vector<Op> ops;
    for (int i = 0; i < 26; ++i) ops.push_back(kLaunch);
    for (int i = 0; i < 8; ++i) ops.push_back(kLaunchSide);
    ops.push_back(kLaunchNccl);
    for (int i = 0; i < 5; ++i) ops.push_back(kCopy);
    for (int i = 0; i < 2; ++i) ops.push_back(kSet);
    ops.push_back(kWait);
    ops.push_back(kEventSync);
    const uint64_t group_start = self().BeginGroup(group, ops);
    host_ = group_start;
    const size_t quarter = ops.size() / 4;
    std::array<uint64_t, 4> inner_start{}, inner_end{};
    int syncs = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (i % quarter == 0 && i / quarter < 4) inner_start[i / quarter] = host_ + 500;
      // PyTorch's external correlation: an op's id, tied to the next API call.
      if (self().TorchOpAt(i, ops.size())) torch_op_pending_ = true;
      switch (ops[i]) {
        case kLaunch: self().Launch(i, kComputeStream); break;
        case kLaunchSide: self().Launch(i, kSideStream); break;
        case kLaunchNccl: self().LaunchNccl(group); break;
        case kCopy: Copy(); break;
        case kSet: Set(); break;
        case kWait: {
          // cudaStreamWaitEvent: two sync records (the event recorded on the
          // side stream, waited for by the compute stream and the NCCL stream).
          const ApiRecord a = Api(api_wait_, 147, Us(2, 5));
          for (uint32_t stream : {kComputeStream, kNcclStream}) {
            AddSync(a, a.end_ns, stream, 17, 2);
            ++syncs;
          }
          break;
        }
        case kEventSync: {
          // The host waits for the side stream's event.
          const ApiRecord a = Api(api_event_sync_, 137, Us(2, 5));
          const uint64_t until = std::max(a.end_ns, gpu_[kSideStream] + Us(2, 8));
          AddSync(a, until, UINT32_MAX, 17, 1);
          ++syncs;
          host_ = until;
          break;
        }
      }
      if ((i + 1) % quarter == 0 && (i + 1) / quarter <= 4) inner_end[(i + 1) / quarter - 1] = host_ + 700;
    }
    {
      // The end of the group: cudaStreamSynchronize waits for every stream (a
      // sync record for each of the two busiest streams).
      const ApiRecord a = Api(api_stream_sync_, 131, Us(2, 5));
      uint64_t until = a.end_ns;
      for (const auto& [stream, end] : gpu_) until = std::max(until, end + Us(2, 8));
      for (uint32_t stream : {kComputeStream, kSideStream}) {
        if (syncs >= 5) break;
        AddSync(a, until, stream, 0, 3);
        ++syncs;
      }
      host_ = until;
    }
    // NVTX: four nested ranges and the group's outer one (pushed when popped).
    for (size_t i = 0; i < 4; ++i) {
      NvtxRecord n{};
      n.start_ns = inner_start[i];
      n.end_ns = std::max(inner_end[i], n.start_ns + 1000);
      n.thread_id = thread_;
      n.name_id = self().InnerNvtxName(i);
      n.depth = 1;
      n.type = static_cast<uint8_t>(NvtxType::kPushPop);
      self().Add(n, n.end_ns);
    }
    NvtxRecord outer{};
    outer.start_ns = group_start;
    outer.end_ns = host_ + 300;
    outer.thread_id = thread_;
    outer.name_id = nvtx_names_[group % 3];
    outer.depth = 0;
    outer.type = static_cast<uint8_t>(NvtxType::kPushPop);
    self().Add(outer, outer.end_ns);
    host_ += Us(1, 20);
    self().EndGroup();
  }

  std::mt19937_64 rng_;  // timings
  uint8_t torch_external_kind_;
  std::vector<std::string> strings_{std::string()};
  std::unordered_map<std::string, uint32_t> ids_{{std::string(), 0}};
  std::vector<Shape> kernels_;
  std::vector<double> zipf_cdf_;
  double zipf_total_ = 0;
  Shape nccl_kernel_{};
  uint32_t api_launch_ = 0, api_memcpy_ = 0, api_memset_ = 0, api_wait_ = 0, api_event_sync_ = 0,
           api_stream_sync_ = 0;
  uint32_t nccl_allreduce_ = 0, nccl_ring_ = 0, nccl_simple_ = 0, nccl_f16_ = 0;
  std::vector<uint32_t> nvtx_names_;
  uint64_t host_ = 0;
  std::unordered_map<uint32_t, uint64_t> gpu_;  // stream -> end of its last work
  uint32_t thread_ = 0;
  uint32_t corr_ = 1000;
  uint64_t torch_op_id_ = 0;
  bool torch_op_pending_ = false;

 private:
  Derived& self() { return static_cast<Derived&>(*this); }

  // A sync record of the API call `a`, ending at `end_ns`.
  void AddSync(const ApiRecord& a, uint64_t end_ns, uint32_t stream, uint32_t event_id,
               uint32_t sync_type) {
    SyncRecord s{};
    s.start_ns = a.start_ns;
    s.end_ns = end_ns;
    s.correlation_id = a.correlation_id;
    s.context_id = 1;
    s.stream_id = stream;
    s.event_id = event_id;
    s.sync_type = sync_type;
    self().Add(s, s.end_ns);
  }

  void Copy() {
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
    self().Add(m, m.end_ns);
  }

  void Set() {
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
    self().Add(s, s.end_ns);
  }
};

}  // namespace aon::bench
