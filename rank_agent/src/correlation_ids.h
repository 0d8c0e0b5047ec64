// Correlation ids unique over a whole process that attaches its GPU activity
// source more than once (capture windows, docs/always-on.md). CUPTI numbers its
// correlation ids afresh after every cuptiFinalize, so with a detach after each
// window the same id would name launches of different windows, and every join by
// correlation id (a kernel to its launch call, an NCCL operation to its kernel)
// would go wrong. Each attach's ids are shifted past the largest id delivered
// before it. The synthetic device (synthetic_source.cc) restarts its numbering
// on every attach too, so CI exercises the same path.
#pragma once

#include <atomic>
#include <cstdint>

namespace aon::agent {

class CorrelationIds {
 public:
  // The process-wide id of `source_id` from the current attach (0 stays 0:
  // "none"). Any thread.
  uint32_t Map(uint32_t source_id);
  // The source was detached and every record of that attach delivered: the next
  // attach's ids start past every id handed out so far.
  void NextAttach();

 private:
  std::atomic<uint32_t> base_{0};
  std::atomic<uint32_t> max_{0};
};

}  // namespace aon::agent
