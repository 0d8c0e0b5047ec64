// Builds small merged timelines with known answers, written as real HDF5 files
// (FileKind::kTimeline) with the real TraceWriter, for the report tests.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "aon/base/gpu_uuid.h"
#include "aon/format/records.h"
#include "aon/format/string_table.h"
#include "aon/format/trace_file.h"
#include "aon/format/trace_format.h"
#include "aon/report/report.h"
#include "temp_dir.h"

namespace aon::report::testing {

constexpr uint64_t kUs = 1000, kMs = 1000 * 1000;

using TempDir = ::aon::test_support::TempDir;  // tests/support/temp_dir.h

class TimelineBuilder {
 public:
  StringTable strings;
  std::vector<Merged<KernelRecord>> kernels;
  std::vector<Merged<MemcpyRecord>> memcpys;
  std::vector<Merged<MemsetRecord>> memsets;
  std::vector<Merged<SyncRecord>> syncs;
  std::vector<Merged<ApiRecord>> apis;
  std::vector<Merged<NvtxRecord>> nvtx;
  std::vector<Merged<NcclRecord>> nccl;
  std::vector<Merged<StepRecord>> steps;
  std::vector<Merged<CounterRecord>> counters;
  std::vector<Merged<DeviceInfo>> devices;  // /meta/devices of the timeline
  std::vector<Merged<OpRecord>> ops;
  std::vector<Merged<ExternalCorrelationRecord>> external;
  std::vector<Merged<GraphOpRecord>> graph_ops;
  std::vector<RankSummary> ranks;
  std::vector<RankDrops> drops;  // /meta/drops (1.11)
  std::string source = "cupti";
  int64_t world_size = 0;
  int64_t clock_synchronized = 0;
  uint32_t next_corr = 1;

  // Adds a /meta/ranks row.
  void Rank(uint32_t rank, const std::string& host = "node1", RankStatus status = RankStatus::kOk,
            const std::string& message = "", uint32_t local_rank = 0) {
    RankSummary s{};
    s.rank = rank;
    s.local_rank = local_rank;
    s.host_id = strings.Intern(host);
    s.message_id = strings.Intern(message);
    s.status = static_cast<uint8_t>(status);
    ranks.push_back(s);
    world_size = std::max<int64_t>(world_size, rank + 1);
  }

  // A kernel; with tid != 0 also its cudaLaunchKernel call at `launch_ns` (default: start - 5 us).
  uint32_t Kernel(uint32_t rank, const std::string& name, uint64_t start, uint64_t end,
                  uint32_t tid = 0, int64_t launch_ns = -1, uint32_t stream = 7) {
    Merged<KernelRecord> k{};
    k.rank = rank;
    k.record.start_ns = start;
    k.record.end_ns = end;
    k.record.name_id = strings.Intern(name);
    k.record.stream_id = stream;
    k.record.correlation_id = next_corr++;
    k.record.grid_x = 108, k.record.grid_y = 1, k.record.grid_z = 1;
    k.record.block_x = 256, k.record.block_y = 1, k.record.block_z = 1;
    k.record.registers_per_thread = 32;
    kernels.push_back(k);
    if (tid != 0) {
      const uint64_t at = launch_ns >= 0 ? static_cast<uint64_t>(launch_ns)
                                         : (start > 5 * kUs ? start - 5 * kUs : 0);
      Api(rank, name.rfind("nccl", 0) == 0 ? "cuLaunchKernelEx" : "cudaLaunchKernel", at,
          at + 3 * kUs, tid, k.record.correlation_id);
    }
    return k.record.correlation_id;
  }
  void Api(uint32_t rank, const std::string& name, uint64_t start, uint64_t end, uint32_t tid,
           uint32_t corr = 0) {
    Merged<ApiRecord> a{};
    a.rank = rank;
    a.record.start_ns = start;
    a.record.end_ns = end;
    a.record.thread_id = tid;
    a.record.correlation_id = corr ? corr : next_corr++;
    a.record.name_id = strings.Intern(name);
    a.record.domain = name.rfind("cu", 0) == 0 && name.rfind("cuda", 0) != 0 ? 2 : 1;
    apis.push_back(a);
  }
  uint32_t Memcpy(uint32_t rank, uint64_t start, uint64_t end, uint64_t bytes, uint8_t copy_kind,
                  bool pageable, bool async) {
    Merged<MemcpyRecord> m{};
    m.rank = rank;
    m.record.start_ns = start;
    m.record.end_ns = end;
    m.record.bytes = bytes;
    m.record.copy_kind = copy_kind;
    m.record.src_kind = copy_kind == 1 ? (pageable ? 1 : 2) : 3;
    m.record.dst_kind = copy_kind == 2 ? (pageable ? 1 : 2) : 3;
    m.record.flags = async ? 1 : 0;
    m.record.stream_id = 7;
    m.record.correlation_id = next_corr++;
    memcpys.push_back(m);
    return m.record.correlation_id;
  }
  void Nvtx(uint32_t rank, const std::string& name, uint64_t start, uint64_t end, uint32_t tid,
            uint16_t depth, const std::string& domain = "") {
    Merged<NvtxRecord> n{};
    n.rank = rank;
    n.record.start_ns = start;
    n.record.end_ns = end;
    n.record.thread_id = tid;
    n.record.depth = depth;
    n.record.type = static_cast<uint8_t>(NvtxType::kPushPop);
    n.record.name_id = strings.Intern(name);
    n.record.domain_id = strings.Intern(domain);
    nvtx.push_back(n);
  }
  void Coll(uint32_t rank, const std::string& func, uint64_t comm, uint64_t seq, uint64_t start,
            uint64_t end, uint64_t bytes, const std::string& algo = "RING",
            const std::string& proto = "SIMPLE") {
    Merged<NcclRecord> n{};
    n.rank = rank;
    n.record.start_ns = start;
    n.record.end_ns = end;
    n.record.comm_hash = comm;
    n.record.seq_number = seq;
    n.record.bytes = bytes;
    n.record.count = bytes / 4;
    n.record.func_id = strings.Intern(func);
    n.record.algo_id = strings.Intern(algo);
    n.record.proto_id = strings.Intern(proto);
    n.record.datatype_id = strings.Intern("ncclFloat32");
    n.record.channel_id = -1;
    n.record.peer = -1;
    n.record.event_type = static_cast<uint8_t>(NcclEventType::kColl);
    nccl.push_back(n);
  }

  // One of AON's step markers (format 1.5); `flags`: kStepCaptured, ...
  void Step(uint32_t rank, uint64_t step, uint64_t start, uint64_t end, uint8_t flags = 0,
            StepSource step_source = StepSource::kNvtx) {
    Merged<StepRecord> m{};
    m.rank = rank;
    m.record.start_ns = start;
    m.record.end_ns = end;
    m.record.step = step;
    m.record.window_first_step = UINT64_MAX;
    m.record.source = static_cast<uint8_t>(step_source);
    m.record.flags = flags;
    steps.push_back(m);
  }

  // A GPU `rank` saw (/meta/devices): CUDA ordinal `device`, UUID text `uuid`.
  void Device(uint32_t rank, uint32_t device, const std::string& uuid) {
    Merged<DeviceInfo> d{};
    d.rank = rank;
    d.record.device_id = device;
    d.record.uuid_id = strings.Intern(uuid);
    d.record.name_id = strings.Intern("NVIDIA H200");
    devices.push_back(d);
  }
  // One counter row of the GPU `uuid` (NVML index `device`), kept in `file_rank`'s file.
  void Counter(uint32_t file_rank, const std::string& uuid, uint32_t device, CounterMetric metric,
               uint64_t start, uint64_t end, double value,
               CounterSource counter_source = CounterSource::kGpm) {
    Merged<CounterRecord> m{};
    m.rank = file_rank;
    const GpuUuid u = GpuUuidFromText(uuid);
    m.record.start_ns = start;
    m.record.end_ns = end;
    m.record.value = value;
    m.record.gpu_uuid_hi = u.hi;
    m.record.gpu_uuid_lo = u.lo;
    m.record.device = device;
    m.record.metric = static_cast<uint16_t>(metric);
    m.record.source = static_cast<uint8_t>(counter_source);
    counters.push_back(m);
  }

  // A framework op range (format 1.8) with the given id and parent.
  void Op(uint32_t rank, uint64_t id, uint64_t parent, OpKind kind, const std::string& name,
          uint64_t start, uint64_t end, int64_t sequence_nr = -1, uint32_t framework_thread = 1,
          uint32_t forward_thread = 0) {
    Merged<OpRecord> m{};
    m.rank = rank;
    m.record.start_ns = start;
    m.record.end_ns = end;
    m.record.op_id = id;
    m.record.parent_id = parent;
    m.record.sequence_nr = sequence_nr;
    m.record.name_id = strings.Intern(name);
    m.record.thread_id = 100;
    m.record.framework_thread = framework_thread;
    m.record.forward_thread = forward_thread;
    m.record.kind = static_cast<uint8_t>(kind);
    ops.push_back(m);
  }
  // Ties the launch with `correlation` to op `id` (external correlation kind 3).
  void LaunchedIn(uint32_t rank, uint32_t correlation, uint64_t id) {
    Merged<ExternalCorrelationRecord> e{};
    e.rank = rank;
    e.record.external_id = id;
    e.record.correlation_id = correlation;
    e.record.external_kind = kOpExternalCorrelationKind;
    external.push_back(e);
  }

  // CUDA graphs: graph node `node` was captured inside op `id` (graph_ops row;
  // `original`: the node it is a clone of, 0 = created in the op).
  void CapturedIn(uint32_t rank, uint64_t node, uint64_t id, uint64_t original = 0) {
    Merged<GraphOpRecord> g{};
    g.rank = rank;
    g.record.node_id = node;
    g.record.op_id = id;
    g.record.original_node_id = original;
    graph_ops.push_back(g);
  }

  template <typename T>
  static void SortByStart(std::vector<Merged<T>>* v) {
    std::stable_sort(v->begin(), v->end(), [](const Merged<T>& a, const Merged<T>& b) {
      return a.record.start_ns != b.record.start_ns ? a.record.start_ns < b.record.start_ns
                                                    : a.rank < b.rank;
    });
  }

  Status Write(const std::string& path) {
    SortByStart(&kernels);
    SortByStart(&memcpys);
    SortByStart(&memsets);
    SortByStart(&syncs);
    SortByStart(&apis);
    SortByStart(&nvtx);
    SortByStart(&nccl);
    SortByStart(&steps);
    AON_ASSIGN_OR_RETURN(std::unique_ptr<TraceWriter> w,
                         TraceWriter::Create(path, FileKind::kTimeline));
    AON_RETURN_IF_ERROR(w->SetMetaAttribute("job_id", std::string_view("test-job")));
    AON_RETURN_IF_ERROR(w->SetMetaAttribute("world_size", world_size));
    AON_RETURN_IF_ERROR(w->SetMetaAttribute("source", std::string_view(source)));
    AON_RETURN_IF_ERROR(w->SetMetaAttribute("clock_synchronized", clock_synchronized));
    AON_RETURN_IF_ERROR(w->SetMetaAttribute("clock_note", std::string_view("one host")));
    AON_RETURN_IF_ERROR(w->AppendMerged<KernelRecord>(kernels));
    AON_RETURN_IF_ERROR(w->AppendMerged<MemcpyRecord>(memcpys));
    AON_RETURN_IF_ERROR(w->AppendMerged<MemsetRecord>(memsets));
    AON_RETURN_IF_ERROR(w->AppendMerged<SyncRecord>(syncs));
    AON_RETURN_IF_ERROR(w->AppendMerged<ApiRecord>(apis));
    AON_RETURN_IF_ERROR(w->AppendMerged<NvtxRecord>(nvtx));
    AON_RETURN_IF_ERROR(w->AppendMerged<NcclRecord>(nccl));
    if (!steps.empty()) AON_RETURN_IF_ERROR(w->AppendMerged<StepRecord>(steps));
    SortByStart(&counters);
    if (!counters.empty()) AON_RETURN_IF_ERROR(w->AppendMerged<CounterRecord>(counters));
    SortByStart(&ops);
    if (!ops.empty()) AON_RETURN_IF_ERROR(w->AppendMerged<OpRecord>(ops));
    if (!external.empty())
      AON_RETURN_IF_ERROR(w->AppendMerged<ExternalCorrelationRecord>(external));
    if (!graph_ops.empty()) AON_RETURN_IF_ERROR(w->AppendMerged<GraphOpRecord>(graph_ops));
    if (!devices.empty()) {
      AON_RETURN_IF_ERROR(
          w->AppendTable(MergedSchema(DeviceInfoSchema()), devices.data(), devices.size(), "meta"));
    }
    if (!ranks.empty()) {
      AON_RETURN_IF_ERROR(w->AppendTable(RankSummarySchema(), ranks.data(), ranks.size(), "meta"));
    }
    if (!drops.empty()) {
      AON_RETURN_IF_ERROR(w->AppendTable(RankDropsSchema(), drops.data(), drops.size(), "meta"));
    }
    AON_RETURN_IF_ERROR(w->WriteStrings(strings));
    return w->Finish();
  }

  // Writes to `path` and loads it back through LoadTimeline.
  Timeline WriteAndLoad(const std::string& path) {
    const Status s = Write(path);
    EXPECT_TRUE(s.ok()) << s.ToString();
    auto t = LoadTimeline(path);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(t).value() : Timeline{};
  }
};

// 4 ranks, `steps` steps of 17.3 ms. Every rank computes 10 ms and then all-reduces;
// rank `late` first spends 5 ms in a "data_loader" range, so it arrives at every
// all-reduce exactly 5 ms after the others. The all-reduce (64 MiB) moves data for
// 2 ms once everyone is there. With nccl_records, NCCL coll records are added
// (start = host call = arrival, end = GPU end).
inline void PlantStraggler(TimelineBuilder* b, uint32_t late, int steps, bool nccl_records) {
  const uint64_t period = 17300 * kUs;
  const std::string gemm =
      "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params<T&>)";
  const std::string allreduce =
      "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  for (uint32_t r = 0; r < 4; ++r) b->Rank(r);
  for (int s = 0; s < steps; ++s) {
    const uint64_t base = static_cast<uint64_t>(s) * period + 1 * kMs;
    for (uint32_t r = 0; r < 4; ++r) {
      const uint32_t tid = 1000 + r;
      const uint64_t delay = r == late ? 5 * kMs : 0;
      b->Nvtx(r, "step " + std::to_string(s), base, base + period - 100 * kUs, tid, 0);
      b->Nvtx(r, "data_loader", base + 20 * kUs, base + 100 * kUs + delay, tid, 1);
      b->Nvtx(r, "forward", base + 100 * kUs + delay, base + 10100 * kUs + delay, tid, 1);
      b->Kernel(r, gemm, base + 100 * kUs + delay, base + 10100 * kUs + delay, tid,
                base + 100 * kUs + delay);
      const uint64_t arrival = base + 10100 * kUs + delay;
      b->Kernel(r, allreduce, arrival, base + 17100 * kUs, tid, arrival - 10 * kUs, 9);
      if (nccl_records) {
        b->Coll(r, "AllReduce", 0xabcdef, static_cast<uint64_t>(s), arrival, base + 17100 * kUs,
                64ull << 20);
      }
    }
  }
}

}  // namespace aon::report::testing
