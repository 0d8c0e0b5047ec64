// AON as NCCL's profiler plugin: entry_points.cc exports ncclProfiler_v5 and
// ncclProfiler_v4 over these functions (aon/nccl_profiler_abi.h has the ABI).
#pragma once

#include <cstdint>

#include "aon/nccl_profiler_abi.h"
#include "source_context.h"

namespace aon::agent {

// A communicator's init (`v5`: profiler API v5, else v4). The first one that
// records binds `agent`: its sink takes every event of every communicator,
// and FlushLiveNcclOperations runs at the agent's Finish.
aon_nccl_result_t NcclInit(const SourceContext& agent, void** context, int* mask, const char* name,
                           uint64_t hash, int nnodes, int nranks, int rank, bool v5);
aon_nccl_result_t NcclStartV5(void* context, void** handle, AonNcclEventV5* e);
aon_nccl_result_t NcclStartV4(void* context, void** handle, AonNcclEventV4* e);
aon_nccl_result_t NcclStop(void* handle);
aon_nccl_result_t NcclRecordState(void* handle, int state, AonNcclStateArgs* args);
aon_nccl_result_t NcclFinalize(void* context);

// At exit: operations NCCL started but whose events did not all arrive are
// recorded with what is known (and counted in a note).
void FlushLiveNcclOperations();

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
