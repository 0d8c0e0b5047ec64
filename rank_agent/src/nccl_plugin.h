// AON as NCCL's profiler plugin (exports ncclProfiler_v5 and ncclProfiler_v4).
#pragma once

#include <cstdint>

namespace aon::agent {

// At write time: ties every NCCL operation to its CUPTI kernel record (through
// the external correlation pushed around NCCL's kernel launch), measures the
// %globaltimer -> host-timebase offset on those pairs, and converts every NCCL
// GPU time with it. Fills the calibration fields of the metadata.
struct NcclClockCalibration {
  int64_t offset_ns = 0;
  int64_t pairs = 0;
  int64_t spread_ns = -1;
};
NcclClockCalibration FinalizeNcclRecords();

// Called once CUPTI records external correlations: from then on NCCL kernel
// launches are bracketed with a CUPTI external correlation id.
void EnableNcclCuptiCorrelation();

// CUDA graphs (from CUPTI's resource callbacks, on the calling thread): a kernel
// node created while NCCL launches on this thread (stream capture) belongs to
// that launch; instantiating a graph clones nodes under new ids.
void OnGraphKernelNodeCreated(uint64_t node_id);
void OnGraphNodeCloned(uint64_t original_node_id, uint64_t clone_node_id);

}  // namespace aon::agent
