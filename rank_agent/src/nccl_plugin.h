// AON as NCCL's profiler plugin (exports ncclProfiler_v5 and ncclProfiler_v4).
#pragma once

#include <cstdint>

namespace aon::agent {

// At exit: operations NCCL started but whose events did not all arrive are
// recorded with what is known (and counted in a note).
void FlushLiveNcclOperations();

// Called once CUPTI records external correlations: from then on NCCL kernel
// launches are bracketed with a CUPTI external correlation id.
// CUPTI external correlation around NCCL's launches: on while CUPTI records
// EXTERNAL_CORRELATION (all the time in full mode, in capture windows otherwise).
void SetNcclCuptiCorrelation(bool on);

// CUDA graphs, from CUPTI's resource callbacks (on the calling thread): a
// kernel node created while NCCL launches on this thread (stream capture) is
// that launch's; instantiation or cloning copies a node under a new id. Both
// become NcclGraphRecords (records.h) for the merge (nccl_resolve.h).
void OnGraphKernelNodeCreated(uint64_t node_id);
void OnGraphKernelNodeCloned(uint64_t original_node_id, uint64_t clone_node_id);

}  // namespace aon::agent
