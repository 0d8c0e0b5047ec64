// The synthetic programs' part of NCCL: one communicator over MPI_COMM_WORLD as
// NCCL's profiler plugin sees it. NCCL loads the plugin named by
// NCCL_PROFILER_PLUGIN (aon-run points it at AON's agent, docs/always-on.md)
// and reports each collective as a Coll event from the rank's arrival to its
// end; this does the same through the plugin's v5 ABI
// (rank_agent/include/aon/nccl_profiler_abi.h), so the agent's NCCL records,
// their cross-rank identity (communicator hash, sequence number) and what the
// merge and the report make of them are the real ones. The collective's
// kernel is the caller's to run on the synthetic GPU.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "aon/nccl_profiler_abi.h"

namespace aon::synthetic {

class FakeNccl {
 public:
  // False with the reason on stderr (`program` names the caller).
  bool Open(const char* program, int rank, int nranks) {
    const char* path = std::getenv("NCCL_PROFILER_PLUGIN");
    void* lib = path != nullptr ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    if (lib != nullptr) p_ = static_cast<AonNcclProfilerV5*>(dlsym(lib, "ncclProfiler_v5"));
    if (p_ == nullptr) {
      std::fprintf(stderr,
                   "%s: NCCL's profiler plugin is not in NCCL_PROFILER_PLUGIN (run it under "
                   "aon-run; --nccl off has none): %s\n",
                   program, path == nullptr ? "not set" : dlerror());
      return false;
    }
    int mask = 0;
    if (p_->init(&ctx_, 0x57a66e7ull, &mask, "synthetic-comm", 1, nranks, rank, nullptr) != 0) {
      std::fprintf(stderr, "%s: the NCCL profiler plugin's init failed\n", program);
      p_ = nullptr;
      return false;
    }
    colls_ = (mask & kNcclProfileColl) != 0;
    return true;
  }
  // A collective's Coll event from the rank's arrival (Begin) to its end (End).
  void* Begin(const char* func, uint64_t seq, size_t count, int root = 0) {
    if (!colls_) return nullptr;
    AonNcclEventV5 e{};
    e.type = kNcclProfileColl;
    e.coll.seq_number = seq;
    e.coll.func = func;
    e.coll.count = count;
    e.coll.root = root;
    e.coll.datatype = "ncclFloat32";
    e.coll.n_channels = 2;
    e.coll.n_warps = 16;
    e.coll.algo = "RING";
    e.coll.proto = "LL";
    void* h = nullptr;
    p_->start_event(ctx_, &h, &e);
    return h;
  }
  void End(void* h) {
    if (h != nullptr) p_->stop_event(h);
  }
  void Close() {
    if (ctx_ != nullptr) p_->finalize(ctx_);
    ctx_ = nullptr;
  }

 private:
  AonNcclProfilerV5* p_ = nullptr;
  void* ctx_ = nullptr;
  bool colls_ = false;
};

}  // namespace aon::synthetic
