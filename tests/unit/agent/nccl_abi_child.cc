// Drives libaon_agent.so's NCCL profiler tables by hand, the way NCCL would,
// in a real process: dlopen(NCCL_PROFILER_PLUGIN), dlsym("ncclProfiler_v5"/_v4),
// then the event sequences each mode names. Prints "mask=<hex>" after init.
// Usage: nccl_abi_child MODE
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <chrono>
#include <thread>
#include <vector>

#include "aon/nccl_profiler_abi.h"

namespace {

AonNcclProfilerV5* v5 = nullptr;
AonNcclProfilerV4* v4 = nullptr;

void* Load() {
  void* lib = dlopen(std::getenv("NCCL_PROFILER_PLUGIN"), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    std::exit(20);
  }
  v5 = static_cast<AonNcclProfilerV5*>(dlsym(lib, "ncclProfiler_v5"));
  v4 = static_cast<AonNcclProfilerV4*>(dlsym(lib, "ncclProfiler_v4"));
  if (v5 == nullptr || v4 == nullptr) std::exit(21);
  return lib;
}

#define CHECK(x)                                                   \
  do {                                                             \
    if ((x) != 0) {                                                \
      std::fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #x); \
      std::exit(22);                                               \
    }                                                              \
  } while (0)

void* InitV5(uint64_t hash, int rank, int nranks, int* mask_out = nullptr) {
  void* ctx = nullptr;
  int mask = 0;
  CHECK(v5->init(&ctx, hash, &mask, "test-comm", 1, nranks, rank, nullptr));
  std::printf("mask=%x\n", mask);
  if (mask_out) *mask_out = mask;
  return ctx;
}

void* StartColl(void* ctx, uint64_t seq, uint8_t channels, const char* func = "AllReduce") {
  AonNcclEventV5 e{};
  e.type = kNcclProfileColl;
  e.coll.seq_number = seq;
  e.coll.func = func;
  e.coll.count = 1024;
  e.coll.root = 0;
  e.coll.datatype = "ncclFloat32";
  e.coll.n_channels = channels;
  e.coll.n_warps = 16;
  e.coll.algo = "RING";
  e.coll.proto = "LL";
  void* h = nullptr;
  CHECK(v5->start_event(ctx, &h, &e));
  return h;
}

void* StartChannel(void* ctx, void* parent, uint8_t ch, uint64_t gpu_start) {
  AonNcclEventV5 e{};
  e.type = kNcclProfileKernelCh;
  e.parent = parent;
  e.kernel_ch.channel_id = ch;
  e.kernel_ch.gpu_timer = gpu_start;
  void* h = nullptr;
  CHECK(v5->start_event(ctx, &h, &e));
  return h;
}

void StopChannel(void* h, uint64_t gpu_stop) {
  AonNcclStateArgs a{};
  a.kernel_ch.gpu_timer = gpu_stop;
  CHECK(v5->record_event_state(h, kNcclStateKernelChStop, &a));
  CHECK(v5->stop_event(h));
}

void Launch(void* ctx) {
  AonNcclEventV5 e{};
  e.type = kNcclProfileKernelLaunch;
  void* h = nullptr;
  CHECK(v5->start_event(ctx, &h, &e));
  CHECK(v5->stop_event(h));
}

// The API events NCCL 2.28 sends whenever Coll/P2p are asked for: one GroupApi
// per group call (outermost), then one CollApi per collective call.
void GroupApi(void* ctx, bool captured = false) {
  AonNcclEventV5 e{};
  e.type = kNcclProfileGroupApi;
  e.group_api.graph_captured = captured;
  e.group_api.group_depth = 1;
  void* h = nullptr;
  CHECK(v5->start_event(ctx, &h, &e));
  if (h != nullptr) CHECK(v5->stop_event(h));
}

void CollApi(void* ctx, bool captured, const char* func = "AllReduce", size_t count = 1024) {
  AonNcclEventV5 e{};
  e.type = kNcclProfileCollApi;
  e.coll_api.func = func;
  e.coll_api.count = count;
  e.coll_api.datatype = "ncclFloat32";
  e.coll_api.root = 0;
  e.coll_api.graph_captured = captured;
  void* h = nullptr;
  CHECK(v5->start_event(ctx, &h, &e));
  if (h != nullptr) CHECK(v5->stop_event(h));
}

// Realistic %globaltimer values (Unix-epoch ns, as on current drivers).
constexpr uint64_t kGpu0 = 1'790'000'000'000'000'000ull;

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  Load();
  if (mode == "basic") {
    // An operation reported before its launch (as older NCCL sequences did): op
    // starts, launch, op stops (enqueued), then the proxy thread reports its two
    // channels.
    void* ctx = InitV5(0xabc, 0, 2);
    GroupApi(ctx);
    void* op = StartColl(ctx, 7, 2);
    Launch(ctx);
    CHECK(v5->stop_event(op));
    void* c0 = StartChannel(ctx, op, 0, kGpu0 + 1000);
    void* c1 = StartChannel(ctx, op, 1, kGpu0 + 1200);
    StopChannel(c1, kGpu0 + 9000);
    StopChannel(c0, kGpu0 + 8000);
    CHECK(v5->finalize(ctx));
    return 0;
  }
  if (mode == "null-context") {
    // NCCL 2.28.9 calls on with a NULL context after a failed init.
    AonNcclEventV5 e{};
    e.type = kNcclProfileColl;
    void* h = reinterpret_cast<void*>(0x1);
    CHECK(v5->start_event(nullptr, &h, &e));
    if (h != nullptr) return 23;
    CHECK(v5->stop_event(nullptr));
    CHECK(v5->record_event_state(nullptr, kNcclStateKernelChStop, nullptr));
    CHECK(v5->finalize(nullptr));
    // Events the plugin does not record get no handle and cost nothing.
    void* ctx = InitV5(1, 0, 1);
    e.type = kNcclProfileProxyStep;
    CHECK(v5->start_event(ctx, &h, &e));
    if (h != nullptr) return 24;
    return 0;
  }
  if (mode == "many") {
    // 8 threads, each with its own communicator (as one per stream/process
    // group), 200 collectives each; a "proxy" thread per communicator reports
    // channels concurrently with the user thread.
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([t] {
        void* ctx = InitV5(0x1000 + t, 0, 8);
        for (uint64_t seq = 0; seq < 200; ++seq) {
          GroupApi(ctx);
          void* op = StartColl(ctx, seq, 3);
          Launch(ctx);
          std::thread proxy([ctx, op, seq] {
            void* ch[3];
            for (int c = 0; c < 3; ++c) ch[c] = StartChannel(ctx, op, c, kGpu0 + seq * 100000 + c);
            for (int c = 2; c >= 0; --c) StopChannel(ch[c], kGpu0 + seq * 100000 + 5000 + c);
          });
          if (seq % 2 == 0) CHECK(v5->stop_event(op));  // before or after the channels
          proxy.join();
          if (seq % 2 == 1) CHECK(v5->stop_event(op));
        }
        CHECK(v5->finalize(ctx));
      });
    }
    for (auto& th : threads) th.join();
    return 0;
  }
  if (mode == "steps") {
    // Two communicators; the first one's 40 collectives mark the steps, the
    // second one's (interleaved) do not.
    void* first = InitV5(0x51, 0, 2);
    void* second = InitV5(0x52, 0, 2);
    for (uint64_t seq = 0; seq < 40; ++seq) {
      void* op = StartColl(first, seq, 0);
      CHECK(v5->stop_event(op));
      void* other = StartColl(second, seq, 0, "AllGather");
      CHECK(v5->stop_event(other));
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    CHECK(v5->finalize(second));
    CHECK(v5->finalize(first));
    return 0;
  }
  if (mode == "p2p") {
    void* ctx = InitV5(0x22, 0, 2);
    for (int i = 0; i < 3; ++i) {
      for (const char* func : {"Send", "Recv"}) {
        GroupApi(ctx);
        AonNcclEventV5 e{};
        e.type = kNcclProfileP2p;
        e.p2p.func = func;
        e.p2p.count = 256;
        e.p2p.datatype = "ncclBfloat16";
        e.p2p.peer = 1;
        e.p2p.n_channels = 0;
        void* h = nullptr;
        CHECK(v5->start_event(ctx, &h, &e));
        Launch(ctx);
        CHECK(v5->stop_event(h));
      }
    }
    CHECK(v5->finalize(ctx));
    return 0;
  }
  if (mode == "late-and-missing-channels") {
    void* ctx = InitV5(0x33, 0, 2);
    // Op A announces 1 channel, runs it, and a surplus channel shows up after
    // the op has completed: it must be ignored (counted), not crash.
    GroupApi(ctx);
    void* a = StartColl(ctx, 1, 1);
    Launch(ctx);
    CHECK(v5->stop_event(a));
    StopChannel(StartChannel(ctx, a, 0, kGpu0 + 10), kGpu0 + 20);
    void* late = StartChannel(ctx, a, 5, kGpu0 + 30);
    if (late != nullptr) return 25;
    // Op B announces 2 channels but only one ever reports: at exit it is
    // recorded with what is known.
    GroupApi(ctx);
    void* b = StartColl(ctx, 2, 2);
    Launch(ctx);
    CHECK(v5->stop_event(b));
    StopChannel(StartChannel(ctx, b, 0, kGpu0 + 100), kGpu0 + 200);
    return 0;
  }
  if (mode == "v4") {
    void* ctx = nullptr;
    int mask = 0;
    CHECK(v4->init(&ctx, &mask, "v4-comm", 0x44, 1, 2, 1, nullptr));
    std::printf("mask=%x\n", mask);
    AonNcclEventV4 e{};
    e.type = kNcclProfileColl;
    e.coll.seq_number = 3;
    e.coll.func = "AllGather";
    e.coll.count = 10;
    e.coll.datatype = "ncclInt8";
    e.coll.n_channels = 1;
    e.coll.algo = "RING";
    e.coll.proto = "SIMPLE";
    void* op = nullptr;
    CHECK(v4->start_event(ctx, &op, &e));
    CHECK(v4->stop_event(op));
    AonNcclEventV4 ch{};
    ch.type = kNcclProfileKernelCh;
    ch.parent = op;
    ch.kernel_ch.channel_id = 0;
    ch.kernel_ch.gpu_timer = kGpu0 + 5;
    void* h = nullptr;
    CHECK(v4->start_event(ctx, &h, &ch));
    AonNcclStateArgs a{};
    a.kernel_ch.gpu_timer = kGpu0 + 50;
    CHECK(v4->record_event_state(h, kNcclStateKernelChStop, &a));
    CHECK(v4->stop_event(h));
    CHECK(v4->finalize(ctx));
    return 0;
  }
  if (mode == "launch-then-operation") {
    // NCCL 2.28's real order (src/group.cc doLaunches): a group call's kernel
    // is launched, THEN its operations are reported (same thread). A stream
    // capture in the middle: its all-reduce is reported after the capture's
    // launch too, and must take that launch, not lend it to a neighbour. A
    // group over two communicators launches once per communicator. External
    // ids are numbered from 1 in launch order.
    void* a = InitV5(0xa1, 0, 2);
    void* b = InitV5(0xb1, 0, 2);
    GroupApi(a);                          // seq 1: launch 1
    CollApi(a, false);
    Launch(a);
    CHECK(v5->stop_event(StartColl(a, 1, 0)));
    GroupApi(a, /*captured=*/true);       // seq 2, captured: launch 2
    CollApi(a, true, "AllReduce", 4096);
    Launch(a);
    CHECK(v5->stop_event(StartColl(a, 2, 0)));
    GroupApi(a);                          // seq 3: launch 3
    CollApi(a, false);
    Launch(a);
    CHECK(v5->stop_event(StartColl(a, 3, 0)));
    GroupApi(a);                          // one group: seq 4 on a (launch 4), seq 5 on b (launch 5)
    CollApi(a, false);
    CollApi(b, false);
    Launch(a);
    CHECK(v5->stop_event(StartColl(a, 4, 0)));
    Launch(b);
    CHECK(v5->stop_event(StartColl(b, 5, 0)));
    CHECK(v5->finalize(a));
    CHECK(v5->finalize(b));
    return 0;
  }
  if (mode == "capture-with-host-callbacks") {
    // --nccl channels under stream capture: NCCL reports nothing at capture
    // (launch 1 creates the graph's kernel node), then each replay from CUDA's
    // host-callback thread (no launch there), with channels. Then an ordinary
    // collective on the user thread (launch 2).
    void* ctx = InitV5(0xc1, 0, 2);
    GroupApi(ctx, /*captured=*/true);
    CollApi(ctx, true, "AllReduce", 2048);
    Launch(ctx);
    std::thread host_callbacks([ctx] {
      for (uint64_t r = 0; r < 3; ++r) {
        void* op = StartColl(ctx, 10 + r, 1);
        CHECK(v5->stop_event(op));
        StopChannel(StartChannel(ctx, op, 0, kGpu0 + r * 1000), kGpu0 + r * 1000 + 500);
      }
    });
    host_callbacks.join();
    GroupApi(ctx);
    CollApi(ctx, false);
    Launch(ctx);
    void* op = StartColl(ctx, 13, 1);
    CHECK(v5->stop_event(op));
    StopChannel(StartChannel(ctx, op, 0, kGpu0 + 9000), kGpu0 + 9500);
    CHECK(v5->finalize(ctx));
    return 0;
  }
  if (mode == "api") {
    // NCCL 2.28.9's API events in their real order (src/enqueue.cc taskAppend,
    // src/group.cc): the GroupApi starts at the first call of the outermost
    // group and stops at the end of its ncclGroupEnd, after the launch and the
    // operations; states 23/24 mark ncclGroupStart's end and ncclGroupEnd's
    // start. NCCL 2.28.9 does not clear its CollApi handle after stopping it.
    void* ctx = InitV5(0xd1, 0, 2);
    // 1. A lone all-reduce (its own group), and a second stop of its CollApi.
    AonNcclEventV5 g{};
    g.type = kNcclProfileGroupApi;
    g.group_api.group_depth = 1;
    void* group = nullptr;
    CHECK(v5->start_event(ctx, &group, &g));
    if (group == nullptr) return 30;
    CHECK(v5->record_event_state(group, 23, nullptr));
    AonNcclEventV5 c{};
    c.type = kNcclProfileCollApi;
    c.parent = group;
    c.coll_api.func = "AllReduce";
    c.coll_api.count = 1 << 20;
    c.coll_api.datatype = "ncclFloat32";
    c.coll_api.root = 0;
    c.coll_api.stream = reinterpret_cast<void*>(0x5000);
    void* call = nullptr;
    CHECK(v5->start_event(ctx, &call, &c));
    if (call == nullptr) return 31;
    CHECK(v5->stop_event(call));
    CHECK(v5->record_event_state(group, 24, nullptr));
    Launch(ctx);
    {
      AonNcclEventV5 e{};
      e.type = kNcclProfileColl;
      e.parent = call;  // the (stopped) CollApi, as NCCL passes it
      e.coll.seq_number = 0;
      e.coll.func = "AllReduce";
      e.coll.count = 1 << 20;
      e.coll.datatype = "ncclFloat32";
      e.coll.algo = "RING";
      e.coll.proto = "SIMPLE";
      void* op = nullptr;
      CHECK(v5->start_event(ctx, &op, &e));
      CHECK(v5->stop_event(op));
    }
    CHECK(v5->stop_event(group));
    CHECK(v5->stop_event(call));   // the stale CollApi handle: ignored
    CHECK(v5->stop_event(group));  // a stop without a start: ignored
    // 2. ncclGroupStart; ncclSend; ncclRecv; ncclGroupEnd: one group, two calls.
    g.group_api.group_depth = 2;
    CHECK(v5->start_event(ctx, &group, &g));
    for (const char* func : {"Send", "Recv"}) {
      AonNcclEventV5 p{};
      p.type = kNcclProfileP2pApi;
      p.parent = group;
      p.p2p_api.func = func;
      p.p2p_api.count = 256;
      p.p2p_api.datatype = "ncclBfloat16";
      void* h = nullptr;
      CHECK(v5->start_event(ctx, &h, &p));
      if (h == nullptr) return 32;
      CHECK(v5->stop_event(h));
    }
    Launch(ctx);
    for (const char* func : {"Send", "Recv"}) {
      AonNcclEventV5 e{};
      e.type = kNcclProfileP2p;
      e.p2p.func = func;
      e.p2p.count = 256;
      e.p2p.datatype = "ncclBfloat16";
      e.p2p.peer = 1;
      void* h = nullptr;
      CHECK(v5->start_event(ctx, &h, &e));
      CHECK(v5->stop_event(h));
    }
    CHECK(v5->stop_event(group));
    // 3. A call under stream capture: flagged (and kept as a bookkeeping row too).
    GroupApi(ctx, /*captured=*/true);
    CollApi(ctx, true, "AllGather", 64);
    Launch(ctx);  // captures it; NCCL reports no operation at capture here
    // 4. A group started again before its stop (an NCCL error path): the first
    // one is kept with what is known, the second stops normally.
    void* lost = nullptr;
    g.group_api.group_depth = 1;
    CHECK(v5->start_event(ctx, &lost, &g));
    CHECK(v5->start_event(ctx, &group, &g));
    CHECK(v5->stop_event(group));
    CHECK(v5->finalize(ctx));
    return 0;
  }
  if (mode == "proxy") {
    // --nccl proxy: network proxy events from NCCL's proxy thread, after their
    // operation has been retired (stop = enqueued, and its launch was seen).
    void* ctx = InitV5(0xe1, 0, 2);
    GroupApi(ctx);
    CollApi(ctx, false);
    Launch(ctx);
    void* op = StartColl(ctx, 3, 2);
    CHECK(v5->stop_event(op));
    std::thread proxy([ctx, op] {
      AonNcclEventV5 e{};
      e.type = kNcclProfileProxyOp;
      e.parent = op;
      e.proxy_op.pid = getpid();
      e.proxy_op.channel_id = 1;
      e.proxy_op.peer = 1;
      e.proxy_op.n_steps = 2;
      e.proxy_op.chunk_size = 65536;
      e.proxy_op.is_send = 1;
      void* po = nullptr;
      CHECK(v5->start_event(ctx, &po, &e));
      if (po == nullptr) std::exit(40);
      for (int step = 0; step < 2; ++step) {
        AonNcclEventV5 s{};
        s.type = kNcclProfileProxyStep;
        s.parent = po;
        s.proxy_step.step = step;
        void* ps = nullptr;
        CHECK(v5->start_event(ctx, &ps, &s));
        if (ps == nullptr) std::exit(41);
        AonNcclStateArgs a{};
        a.proxy_step.trans_size = step == 0 ? 65536 : 1000;
        CHECK(v5->record_event_state(ps, 8, &a));  // ncclProfilerProxyStepSendGPUWait
        CHECK(v5->record_event_state(ps, 9, nullptr));
        CHECK(v5->stop_event(ps));
      }
      CHECK(v5->record_event_state(po, 19, nullptr));  // a ProxyOp state: nothing to keep
      CHECK(v5->stop_event(po));
      // A proxy in another process names a parent that is not ours, and one
      // with no parent: rows without an operation, nothing dereferenced.
      e.proxy_op.pid = getpid() + 1;
      e.parent = reinterpret_cast<void*>(0x10);
      e.proxy_op.is_send = 0;
      CHECK(v5->start_event(ctx, &po, &e));
      CHECK(v5->stop_event(po));
      e.proxy_op.pid = getpid();
      e.parent = nullptr;
      CHECK(v5->start_event(ctx, &po, &e));
      CHECK(v5->stop_event(po));
      // A step with no ProxyOp, and ProxyCtrl: no handle.
      AonNcclEventV5 s{};
      s.type = kNcclProfileProxyStep;
      void* ps = reinterpret_cast<void*>(0x1);
      CHECK(v5->start_event(ctx, &ps, &s));
      if (ps != nullptr) std::exit(42);
      s.type = kNcclProfileProxyCtrl;
      ps = reinterpret_cast<void*>(0x1);
      CHECK(v5->start_event(ctx, &ps, &s));
      if (ps != nullptr) std::exit(43);
    });
    proxy.join();
    CHECK(v5->finalize(ctx));
    return 0;
  }
  if (mode == "mask") {
    InitV5(0x55, 0, 1);
    return 0;
  }
  std::fprintf(stderr, "unknown mode '%s'\n", mode.c_str());
  return 2;
}
