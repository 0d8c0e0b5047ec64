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

}  // namespace aon::agent
