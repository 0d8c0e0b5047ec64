// Cost of one record on the shared-memory record ring (aon/ipc/shm_ring.h), the
// agent's hot path: Producer::Push of a KernelRecord (88 bytes) and of an
// NvtxRecord (40 bytes) and PushString of 32 bytes, from 1 and 8 producer
// threads while a consumer thread drains in the background (drops reported as
// counters); the consumer's Drain cost per record; and, as the baseline of the
// same run, a plain memcpy of the record into a thread-local array.
// Command, machine and figures: RESULTS.md, "Ring record cost".
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <thread>

#include "aon/format/records.h"
#include "aon/ipc/shm_ring.h"

namespace {

using aon::KernelRecord;
using aon::NvtxRecord;
using aon::ring::Consumer;
using aon::ring::Entry;
using aon::ring::Producer;
using aon::ring::Region;

// Records pushed per run, over all producer threads. One consumer drains at
// ~10 ns/record while a producer in a tight loop pushes faster, so no ring
// keeps up with a loop that only pushes: instead the ring holds a whole run
// (8 Mi entries of <= 96 bytes), the consumer drains concurrently, and a
// dropped record would show in the counters.
constexpr int64_t kRecordsPerRun = int64_t{8} << 20;
constexpr uint64_t kRingBytes = uint64_t{1} << 30;

KernelRecord SampleKernel() {
  KernelRecord r{};
  r.start_ns = 1'000'000'000;
  r.end_ns = 1'000'004'000;
  r.device_id = 1;
  r.stream_id = 7;
  r.name_id = 42;
  r.grid_x = 1024;
  r.block_x = 256;
  return r;
}

NvtxRecord SampleNvtx() {
  NvtxRecord r{};
  r.start_ns = 1'000'000'000;
  r.end_ns = 1'000'000'500;
  r.thread_id = 1234;
  r.name_id = 9;
  r.type = 1;
  return r;
}

constexpr std::string_view kString32 = "ncclDevKernel_AllReduce_Sum_f32_";
static_assert(kString32.size() == 32);

Region MakeRing() {
  auto r = Region::Create(kRingBytes, 1, 0);
  if (!r.ok()) {
    std::fprintf(stderr, "ring: %s\n", r.status().ToString().c_str());
    std::abort();
  }
  // Touch every page now: first-touch page faults are not the ring's cost.
  std::memset(r->ring(), 0, r->ring_bytes());
  return std::move(r).value();
}

// Copies each drained record out, as the collector does.
struct Sink {
  uint8_t buf[4200];
  uint64_t records = 0;
  void operator()(const Entry& e) {
    std::memcpy(buf, e.payload, e.payload_bytes);
    benchmark::DoNotOptimize(buf);
    ++records;
  }
};

// One ring and its background consumer, shared by the threads of one run.
// Thread 0 makes it before the timing loop and ends it after; the benchmark
// library's start/stop barriers order that with the other threads.
struct LiveRing {
  Region region = MakeRing();
  Producer producer{region};
  std::atomic<bool> stop{false};
  std::thread consumer;
  uint64_t consumed = 0;

  LiveRing() {
    consumer = std::thread([this] {
      Consumer c(region);
      Sink sink;
      for (;;) {
        const bool last = stop.load(std::memory_order_acquire);
        auto r = c.Drain(sink);
        if (!r.ok()) std::abort();
        if (last) break;
        if (r->entries == 0) std::this_thread::yield();
      }
      consumed = sink.records;
    });
  }
  uint64_t Dropped() const {
    uint64_t n = 0;
    for (size_t s = 0; s < aon::ring::kDropSlots; ++s) n += region.header()->dropped[s].load();
    return n;
  }
};
LiveRing* g_ring = nullptr;

// Wall time of the whole run per record of all threads (aggregate throughput),
// measured by thread 0 from the start of its loop until every thread is done.
// (With threads, the library's real time is the threads' mean wall time over
// all threads' iterations, which says little when 8 threads share 2 cores.)
class RunWallClock {
 public:
  explicit RunWallClock(const benchmark::State& state)
      : start_(std::chrono::steady_clock::now()), thread0_(state.thread_index() == 0) {}
  // Call after the timing loop (its stop barrier: all threads have finished).
  void Report(benchmark::State& state) const {
    if (!thread0_) return;
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start_).count();
    state.counters["wall_ns_per_record"] =
        ns / (static_cast<double>(state.iterations()) * state.threads());
  }

 private:
  std::chrono::steady_clock::time_point start_;
  bool thread0_;
};

template <typename PushFn>
void RunPush(benchmark::State& state, PushFn push) {
  if (state.thread_index() == 0) g_ring = new LiveRing();
  uint32_t seq = 0;
  const RunWallClock wall(state);
  // g_ring is read inside the loop: only the loop's start barrier makes thread
  // 0's write of it visible to the other threads.
  for (auto _ : state) {
    push(g_ring->producer, seq++);
  }
  wall.Report(state);
  if (state.thread_index() == 0) {
    // After the stop barrier: every producer thread has finished pushing.
    g_ring->stop.store(true, std::memory_order_release);
    g_ring->consumer.join();
    const double pushed = static_cast<double>(state.iterations()) * state.threads();
    const uint64_t dropped = g_ring->Dropped();
    state.counters["dropped"] = static_cast<double>(dropped);
    state.counters["drop_pct"] = 100.0 * static_cast<double>(dropped) / pushed;
    state.counters["consumed"] = static_cast<double>(g_ring->consumed);
    delete g_ring;
    g_ring = nullptr;
  }
}

void BM_PushKernel(benchmark::State& state) {
  KernelRecord r = SampleKernel();
  benchmark::DoNotOptimize(r);
  RunPush(state, [&](Producer& p, uint32_t) { benchmark::DoNotOptimize(p.Push(r)); });
}

void BM_PushNvtx(benchmark::State& state) {
  NvtxRecord r = SampleNvtx();
  benchmark::DoNotOptimize(r);
  RunPush(state, [&](Producer& p, uint32_t) { benchmark::DoNotOptimize(p.Push(r)); });
}

void BM_PushString32(benchmark::State& state) {
  RunPush(state, [&](Producer& p, uint32_t seq) {
    benchmark::DoNotOptimize(p.PushString(seq, kString32));
  });
}

// Baseline: the same record copied into a thread-local array (no ring).
template <typename T>
void RunMemcpy(benchmark::State& state, T r) {
  thread_local T sink[1024];
  benchmark::DoNotOptimize(r);
  uint32_t i = 0;
  const RunWallClock wall(state);
  for (auto _ : state) {
    std::memcpy(&sink[i++ & 1023], &r, sizeof r);
    benchmark::ClobberMemory();
  }
  wall.Report(state);
}
void BM_BaselineMemcpyKernel(benchmark::State& state) { RunMemcpy(state, SampleKernel()); }
void BM_BaselineMemcpyNvtx(benchmark::State& state) { RunMemcpy(state, SampleNvtx()); }

// The consumer's side: Drain of a batch of committed records (pushed with the
// timer paused). Time is per batch; ns_per_record = time / batch.
template <typename PushFn>
void RunDrain(benchmark::State& state, PushFn push) {
  constexpr uint32_t kBatch = 8192;
  Region region = MakeRing();
  Producer p(region);
  Consumer c(region);
  Sink sink;
  for (auto _ : state) {
    state.PauseTiming();
    for (uint32_t i = 0; i < kBatch; ++i) push(p, i);
    state.ResumeTiming();
    auto r = c.Drain(sink);
    if (!r.ok() || r->entries != kBatch) {
      state.SkipWithError("drain did not return the batch");
      break;
    }
  }
  state.counters["ns_per_record"] = benchmark::Counter(
      kBatch, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kBatch);
}

void BM_DrainKernel(benchmark::State& state) {
  const KernelRecord r = SampleKernel();
  RunDrain(state, [&](Producer& p, uint32_t) { p.Push(r); });
}
void BM_DrainString32(benchmark::State& state) {
  RunDrain(state, [&](Producer& p, uint32_t i) { p.PushString(i, kString32); });
}

// 1 and 8 threads, kRecordsPerRun records in all (Iterations() is per thread).
// CPU: CPU time per record (the cost to the pushing thread);
// wall_ns_per_record: see RunWallClock.
#define AON_RING_BENCH(fn)                                              \
  BENCHMARK(fn)->Threads(1)->Iterations(kRecordsPerRun)->UseRealTime(); \
  BENCHMARK(fn)->Threads(8)->Iterations(kRecordsPerRun / 8)->UseRealTime()
AON_RING_BENCH(BM_BaselineMemcpyKernel);
AON_RING_BENCH(BM_PushKernel);
AON_RING_BENCH(BM_BaselineMemcpyNvtx);
AON_RING_BENCH(BM_PushNvtx);
AON_RING_BENCH(BM_PushString32);
BENCHMARK(BM_DrainKernel)->UseRealTime();
BENCHMARK(BM_DrainString32)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
