// AON as NCCL's profiler plugin (exports ncclProfiler_v5 and ncclProfiler_v4).
#pragma once

#include <cstdint>

namespace aon::agent {

// At exit: operations NCCL started but whose events did not all arrive are
// recorded with what is known (and counted in a note).
void FlushLiveNcclOperations();

// Called once CUPTI records external correlations: from then on NCCL kernel
// launches are bracketed with a CUPTI external correlation id.
void EnableNcclCuptiCorrelation();

}  // namespace aon::agent
