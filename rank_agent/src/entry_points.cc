// The agent's entry points that the CUDA driver, NVTX and NCCL call: each looks
// the process's agent up (the only places besides capture_api.cc that do) and
// hands its context to the source it starts (source_context.h).
#include <atomic>
#include <cstdint>

#include "agent.h"
#include "aon/nccl_profiler_abi.h"
#include "cupti_source.h"
#include "nccl_plugin.h"
#include "nvtx_injection.h"
#include "synthetic_source.h"

// CUDA injection: the driver dlopens CUDA_INJECTION64_PATH during the first
// cuInit and calls InitializeInjection (it must have default visibility). A
// fake driver (examples/synthetic/) calls it the same way.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  using namespace aon::agent;
  static std::atomic<bool> started{false};
  if (started.exchange(true)) return 1;
  const SourceContext& agent = Agent::Get().context();
  // Capture disabled by a refused setting: no GPU source runs (the rank file
  // says source "none", and why), so nothing costs the application anything.
  if (!agent.recording() || !agent.records()) return 1;
  if (agent.config().source == aon::GpuSource::kSynthetic) {
    StartSyntheticSource(agent);
  } else {
    StartCuptiSource(agent);
  }
  // Non-zero tells the driver the injection succeeded. Even when capture could
  // not start we return success: the reason is in the trace, and the driver's
  // reaction to a failed injection is not ours to choose.
  return 1;
}

// NVTX injection (NVTX_INJECTION64_PATH): each NVTX "module" calls this on its
// first NVTX call (nvtx_injection.cc).
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    aon::agent::NvtxExportTableGetter get_export_table) {
  return aon::agent::InstallNvtxInjection(aon::agent::Agent::Get().context(), get_export_table);
}

// NCCL's profiler plugin (NCCL_PROFILER_PLUGIN): NCCL looks these tables up by name.
namespace {

aon_nccl_result_t InitV5(void** context, uint64_t comm_id, int* mask, const char* name, int nnodes,
                         int nranks, int rank, aon_nccl_logger_t) {
  using namespace aon::agent;
  return NcclInit(Agent::Get().context(), context, mask, name, comm_id, nnodes, nranks, rank, true);
}

aon_nccl_result_t InitV4(void** context, int* mask, const char* name, uint64_t hash, int nnodes,
                         int nranks, int rank, aon_nccl_logger_t) {
  using namespace aon::agent;
  return NcclInit(Agent::Get().context(), context, mask, name, hash, nnodes, nranks, rank, false);
}

}  // namespace

extern "C" {
__attribute__((visibility("default")))
AonNcclProfilerV5 ncclProfiler_v5 = {"AON",
                                     InitV5,
                                     aon::agent::NcclStartV5,
                                     aon::agent::NcclStop,
                                     aon::agent::NcclRecordState,
                                     aon::agent::NcclFinalize};
__attribute__((visibility("default")))
AonNcclProfilerV4 ncclProfiler_v4 = {"AON",
                                     InitV4,
                                     aon::agent::NcclStartV4,
                                     aon::agent::NcclStop,
                                     aon::agent::NcclRecordState,
                                     aon::agent::NcclFinalize};
}
