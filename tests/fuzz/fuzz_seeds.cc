// aon_fuzz_seeds RANK_DIR RING_DIR MESSAGE_DIR: writes the fuzzers' seed corpus.
//
// RANK_DIR gets small valid rank files written by the real TraceWriter: every
// record kind with values that take the merge's paths (NCCL operations to
// resolve by external correlation and by time, raw channel times, CUDA-graph
// nodes, clones and captured calls, steps, NVTX step ranges), random records of
// every kind, an empty file, a collector's unfinished .partial file, a finished
// file to salvage as .partial, a format 1.3 file with CUDA-graph rows in its
// NCCL table, and the same records with other chunk sizes and without
// compression (each ends in the byte that tells rank_file_fuzz.cc which it is). RING_DIR gets
// images of rings (header + ring) written by a real Producer: every entry type, a long name cut to
// kMaxStringBytes, a ring whose entries wrap around its end (padding), one half drained, one full
// with drops counted, one whose producer finished. MESSAGE_DIR gets the collector protocol's
// messages as an agent and the tools send them (HELLO and FINISH with real metadata) and the
// collector's replies. Seeds are small, so that mutations stay cheap. Generated at test time, never
// committed.
#include <hdf5.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "aon/ipc/collector_protocol.h"
#include "aon/merge/nccl_resolve.h"
#include "aon/format/metadata_wire.h"
#include "aon/ipc/shm_ring.h"
#include "aon/format/trace_file.h"
#include "merge_test_util.h"
#include "nccl_legacy_rows.h"
#include "trace_test_util.h"

namespace aon {
namespace {

namespace fs = std::filesystem;

uint8_t U8(auto e) { return static_cast<uint8_t>(e); }

// One rank of a small job as a real agent would have seen it, with a record of
// every kind; ids point into its string table.
testing::RankTrace RealisticRank() {
  testing::RankTrace t;
  t.meta = testing::BasicMetadata(0, 2);
  t.meta.anchor_clock_ns = 5'000'000;
  t.meta.anchor_realtime_ns = 1'700'000'000'000'000'000;
  t.meta.notes = {"seed"};
  StringTable& s = t.strings;
  const uint32_t gemm = s.Intern("gemm_kernel"), launch = s.Intern("cudaLaunchKernel");
  const uint32_t step = s.Intern("step"), all_reduce = s.Intern("AllReduce");
  const uint32_t ring = s.Intern("Ring"), simple = s.Intern("Simple");
  const uint32_t f32 = s.Intern("float32"), comm = s.Intern("comm0");
  t.meta.devices.push_back(
      DeviceInfo{0, s.Intern("GPU-0"), s.Intern("NVIDIA H200"), 132, 150ull << 30, 9, 0, 5, 16});
  const uint64_t t0 = 10'000'000;

  auto& kernels = t.Get<KernelRecord>();
  for (uint32_t corr = 1; corr <= 4; ++corr) {
    KernelRecord k{};
    k.start_ns = t0 + corr * 1000;
    k.end_ns = k.start_ns + 500;
    k.correlation_id = corr;
    k.stream_id = 7;
    k.name_id = gemm;
    k.grid_x = k.block_x = 128;
    k.graph_node_id = corr == 4 ? 77 : 0;  // a replay of graph node 66's clone
    kernels.push_back(k);
  }
  t.Get<MemcpyRecord>().push_back(MemcpyRecord{.start_ns = t0,
                                               .end_ns = t0 + 50,
                                               .bytes = 4096,
                                               .correlation_id = 5,
                                               .context_id = 1,
                                               .stream_id = 7,
                                               .copy_kind = 1,
                                               .src_kind = 2,
                                               .dst_kind = 3,
                                               .flags = 1});
  t.Get<MemsetRecord>().push_back(MemsetRecord{.start_ns = t0 + 60,
                                               .end_ns = t0 + 70,
                                               .bytes = 512,
                                               .correlation_id = 6,
                                               .context_id = 1,
                                               .stream_id = 7,
                                               .memory_kind = 3,
                                               .flags = 1});
  t.Get<SyncRecord>().push_back(SyncRecord{.start_ns = t0 + 80,
                                           .end_ns = t0 + 90,
                                           .correlation_id = 7,
                                           .context_id = 1,
                                           .stream_id = UINT32_MAX,
                                           .event_id = 3,
                                           .sync_type = 4});
  for (uint32_t corr = 1; corr <= 4; ++corr) {
    t.Get<ApiRecord>().push_back(ApiRecord{.start_ns = t0 + corr * 1000 - 300,
                                           .end_ns = t0 + corr * 1000 - 200,
                                           .correlation_id = corr,
                                           .callback_id = 211,
                                           .thread_id = 4242,
                                           .name_id = launch,
                                           .domain = U8(ApiDomain::kRuntime)});
  }
  // Ten steps, the last three times as long as the others: a flight-mode spike;
  // steps 2 and 3 were a capture window.
  for (uint32_t i = 0; i < 10; ++i) {
    const uint64_t start = t0 + i * 10'000;
    const uint64_t end = start + (i == 9 ? 30'000 : 9'000);
    const bool captured = i >= 2 && i < 4;
    t.Get<NvtxRecord>().push_back(NvtxRecord{.start_ns = start,
                                             .end_ns = end,
                                             .thread_id = 4242,
                                             .name_id = step,
                                             .color = 0xff00ff00,
                                             .type = U8(NvtxType::kPushPop)});
    t.Get<StepRecord>().push_back(StepRecord{.start_ns = start,
                                             .end_ns = end,
                                             .step = i,
                                             .window_first_step = captured ? 2 : UINT64_MAX,
                                             .window = captured ? 1u : 0u,
                                             .period = 50,
                                             .source = U8(StepSource::kNvtx),
                                             .flags = U8(captured ? kStepCaptured : 0)});
  }
  t.Get<NvtxRecord>().push_back(NvtxRecord{.start_ns = t0 + 5,
                                           .end_ns = t0 + 5,
                                           .thread_id = 4242,
                                           .name_id = step,
                                           .type = U8(NvtxType::kMark)});

  auto nccl_row = [&](NcclEventType type, uint64_t start, uint64_t end) {
    NcclRecord r{};
    r.start_ns = start;
    r.end_ns = end;
    r.comm_hash = 0xc0ffee;
    r.seq_number = 1;
    r.count = 1024;
    r.bytes = 4096;
    r.func_id = all_reduce;
    r.algo_id = ring;
    r.proto_id = simple;
    r.datatype_id = f32;
    r.root = r.peer = r.channel_id = -1;
    r.n_channels = 2;
    r.comm_nranks = 2;
    r.comm_nnodes = 1;
    r.event_type = U8(type);
    return r;
  };
  auto& nccl = t.Get<NcclRecord>();
  NcclRecord by_external = nccl_row(NcclEventType::kColl, t0 + 1900, t0 + 1950);
  by_external.external_id = 100;  // -> correlation 2
  by_external.gpu_timing = U8(NcclGpuTiming::kRaw);
  by_external.gpu_start_ns = 1'700'000'000'000'002'000;
  by_external.end_ns = by_external.gpu_start_ns + 400;
  nccl.push_back(by_external);
  NcclRecord by_time = nccl_row(NcclEventType::kP2p, t0 + 2800, t0 + 2850);  // launch 3
  by_time.peer = 1;
  nccl.push_back(by_time);
  NcclRecord channel =
      nccl_row(NcclEventType::kKernelCh, by_external.gpu_start_ns, by_external.gpu_start_ns + 300);
  channel.channel_id = 0;
  channel.gpu_timing = U8(NcclGpuTiming::kRaw);
  nccl.push_back(channel);
  NcclRecord communicator = nccl_row(NcclEventType::kComm, t0, t0 + 100'000);
  communicator.func_id = comm;
  nccl.push_back(communicator);
  nccl.push_back(nccl_row(NcclEventType::kCollApi, t0 + 1800, t0 + 1850));
  NcclRecord proxy = nccl_row(NcclEventType::kProxyOp, t0 + 2000, t0 + 2100);
  proxy.n_warps = kNcclProxySend;
  nccl.push_back(proxy);
  nccl.push_back(nccl_row(NcclEventType::kProxyStep, t0 + 2010, t0 + 2020));

  auto& ext = t.Get<ExternalCorrelationRecord>();
  ext.push_back(ExternalCorrelationRecord{100, 2, kNcclExternalCorrelationKind});
  ext.push_back(ExternalCorrelationRecord{101, 3, kNcclExternalCorrelationKind});
  ext.push_back(ExternalCorrelationRecord{102, 4, kNcclExternalCorrelationKind});

  auto graph_row = [](NcclGraphEvent event, uint64_t time, uint64_t node, uint64_t original,
                      uint64_t external) {
    NcclGraphRecord g{};
    g.time_ns = time;
    g.node_id = node;
    g.original_node_id = original;
    g.external_id = external;
    g.comm_hash = 0xc0ffee;
    g.root = -1;
    g.comm_nranks = 2;
    g.comm_nnodes = 1;
    g.event = U8(event);
    return g;
  };
  auto& graph = t.Get<NcclGraphRecord>();
  graph.push_back(graph_row(NcclGraphEvent::kNodeCreated, t0 + 3500, 66, 0, 102));
  graph.push_back(graph_row(NcclGraphEvent::kNodeCloned, t0 + 3600, 77, 66, 0));
  NcclGraphRecord call = graph_row(NcclGraphEvent::kCapturedColl, t0 + 3400, 0, 0, 102);
  call.count = 1024;
  call.bytes = 4096;
  call.func_id = all_reduce;
  call.datatype_id = f32;
  graph.push_back(call);
  return t;
}

void Check(const Status& st, const std::string& what) {
  if (!st.ok()) {
    std::fprintf(stderr, "aon_fuzz_seeds: %s: %s\n", what.c_str(), st.ToString().c_str());
    std::exit(1);
  }
}

void WriteRank(const fs::path& dir, const std::string& name, const testing::RankTrace& t,
               const WriteOptions& options) {
  Check(testing::WriteRankTrace((dir / name).string(), t, options), name);
}

// A collector's file before its rank finished: metadata and the kernels
// flushed, no string table, no other table, still .partial.
void WriteUnfinished(const fs::path& dir, const testing::RankTrace& t) {
  const std::string path = (dir / "unfinished.h5").string();
  {
    auto writer =
        TraceWriter::Create(path, FileKind::kRank, {.deflate_level = 1, .chunk_records = 4});
    Check(writer.status(), path);
    RankMetadata running = t.meta;
    running.truncated = 1;
    Check((*writer)->WriteRankMetadata(running), path);
    Check((*writer)->Append<KernelRecord>(t.Get<KernelRecord>()), path);
    Check((*writer)->Flush(), path);
  }  // closed without Finish: the file stays <path>.partial
  fs::rename(path + ".partial", dir / "unfinished.h5");
}

// Format 1.3: CUDA-graph bookkeeping rows in the nccl table (event types 6-8).
void WriteFormat13(const fs::path& dir, testing::RankTrace t) {
  for (const NcclGraphRecord& g : t.Get<NcclGraphRecord>()) {
    t.Get<NcclRecord>().push_back(testing::LegacyGraphRow(g));
  }
  t.Get<NcclGraphRecord>().clear();
  const std::string path = (dir / "format-1.3.h5").string();
  Check(testing::WriteRankTrace(path, t, {.deflate_level = 1, .chunk_records = 16}), path);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t a = f < 0 ? -1 : H5Aopen(f, "aon_format_minor", H5P_DEFAULT);
  const int64_t minor = 3;
  if (a < 0 || H5Awrite(a, H5T_NATIVE_INT64, &minor) < 0) Check(IoError("minor version"), path);
  H5Aclose(a);
  H5Fclose(f);
}

// rank_file_fuzz.cc merges its input as rank-00000.h5, or as a collector's
// rank-00000.h5.partial when the input's last byte is odd: a byte after the
// HDF5 file's end (which HDF5 does not read) makes a seed stand for one or the
// other.
void MarkKind(const fs::path& file, bool partial) {
  std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out | std::ios::ate);
  f.seekg(-1, std::ios::end);
  const bool odd = (f.get() & 1) != 0;
  if (odd != partial) {
    f.seekp(0, std::ios::end);
    f.put(partial ? '\x01' : '\x00');
  }
  if (!f) Check(IoError("marking " + file.string()), "rank seed");
}

void WriteRankSeeds(const fs::path& dir) {
  const testing::RankTrace realistic = RealisticRank();
  WriteRank(dir, "realistic.h5", realistic, {.deflate_level = 1, .chunk_records = 16});
  WriteRank(dir, "realistic-salvaged.h5", realistic, {.deflate_level = 1, .chunk_records = 16});
  WriteRank(dir, "realistic-small-chunks.h5", realistic, {.deflate_level = 4, .chunk_records = 2});
  WriteRank(dir, "realistic-uncompressed.h5", realistic, {.deflate_level = 0, .chunk_records = 8});
  std::mt19937_64 rng(20261201);
  WriteRank(dir, "random.h5",
            testing::RandomRankTrace(rng, 1, 2, {.max_records = 6, .random_offset = true}),
            {.deflate_level = 1, .chunk_records = 4});
  testing::RankTrace empty;
  empty.meta = testing::BasicMetadata(0, 1);
  WriteRank(dir, "empty.h5", empty, {.deflate_level = 1, .chunk_records = 16});
  WriteUnfinished(dir, realistic);
  WriteFormat13(dir, realistic);
  for (const auto& seed : fs::directory_iterator(dir)) {
    const std::string name = seed.path().filename().string();
    MarkKind(seed.path(), name == "unfinished.h5" || name == "realistic-salvaged.h5");
  }
}

// ---- Rings ---------------------------------------------------------------------

void DumpRegion(const ring::Region& region, const fs::path& file) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(region.header()),
            static_cast<std::streamsize>(region.region_bytes()));
  if (!out) Check(IoError("writing " + file.string()), "ring seed");
}

// Pushes `t`'s strings and records of every kind as an agent would.
void PushRank(ring::Producer& p, const testing::RankTrace& t) {
  for (uint32_t id = 1; id < t.strings.size(); ++id) p.PushString(id, t.strings.Get(id));
  ForEachRankFileRecordType([&](auto tag) {
    using T = decltype(tag);
    for (const T& r : t.Get<T>()) p.Push(r);
  });
}

ring::Region NewRing(uint64_t ring_bytes) {
  auto region = ring::Region::Create(ring_bytes, 4242, 0);
  Check(region.status(), "ring");
  return std::move(region).value();
}

void WriteRingSeeds(const fs::path& dir) {
  const testing::RankTrace realistic = RealisticRank();
  {
    // Everything fits in 8 KiB... almost: what does not is dropped and counted.
    ring::Region r = NewRing(8192);
    ring::Producer p(r);
    PushRank(p, realistic);
    DumpRegion(r, dir / "every-kind.ring");
    r.header()->producer_state.store(1);
    DumpRegion(r, dir / "every-kind-finished.ring");
  }
  {
    ring::Region r = NewRing(4096);
    ring::Producer p(r);
    p.PushString(1, std::string(ring::kMaxStringBytes + 100, 'x'));  // cut, ends in "..."
    DumpRegion(r, dir / "long-name.ring");
  }
  {
    // Entries that wrap around the end of a 4 KiB ring: drained part way
    // twice, so tail and head are past the ring's size and a padding entry sits
    // before its end.
    ring::Region r = NewRing(4096);
    ring::Producer p(r);
    ring::Consumer c(r);
    for (int round = 0; round < 3; ++round) {
      for (const KernelRecord& k : realistic.Get<KernelRecord>()) p.Push(k);
      for (const NvtxRecord& n : realistic.Get<NvtxRecord>()) p.Push(n);
      p.PushString(3, "step");
      if (round < 2) (void)c.Drain([](const ring::Entry&) {});
    }
    DumpRegion(r, dir / "wrapped.ring");
  }
  {
    // Full: later pushes are dropped and counted per kind.
    ring::Region r = NewRing(4096);
    ring::Producer p(r);
    for (int i = 0; i < 100; ++i) p.Push(realistic.Get<NcclRecord>()[i % 7]);
    p.PushString(5, "dropped");
    DumpRegion(r, dir / "full.ring");
  }
}

// ---- Collector messages ------------------------------------------------------------

void WriteMessageSeeds(const fs::path& dir) {
  RankMetadata meta = RealisticRank().meta;
  meta.notes.push_back("a note\nwith a newline and a \\ backslash");
  const std::string body = EncodeRankMetadata(meta);
  const std::pair<const char*, std::string> messages[] = {
      {"hello", EncodeRequest(CollectorRequest::Hello(body))},
      {"finish", EncodeRequest(CollectorRequest::Finish(body))},
      {"trigger", EncodeRequest(CollectorRequest::Trigger("rank 3: step spike"))},
      {"quiesce", EncodeRequest(CollectorRequest::Quiesce())},
      {"reply-ok", EncodeReply({CollectorReplyKind::kOk, "/job/rank-00000.h5"})},
      {"reply-error", EncodeReply({CollectorReplyKind::kError, "not this collector's user"})},
  };
  for (const auto& [name, wire] : messages) {
    std::ofstream out(dir / name, std::ios::binary);
    out << wire;
    if (!out) Check(IoError("writing " + (dir / name).string()), "message seed");
  }
}

}  // namespace
}  // namespace aon

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: aon_fuzz_seeds RANK_DIR RING_DIR MESSAGE_DIR\n");
    return 2;
  }
  namespace fs = std::filesystem;
  for (int i = 1; i < 4; ++i) fs::create_directories(argv[i]);
  aon::WriteRankSeeds(argv[1]);
  aon::WriteRingSeeds(argv[2]);
  aon::WriteMessageSeeds(argv[3]);
  return 0;
}
