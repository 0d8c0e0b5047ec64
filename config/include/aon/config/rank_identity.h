// Who this process is in its job, from the launcher's environment.
//
// Looked up in order: Open MPI (OMPI_COMM_WORLD_*), Slurm (SLURM_PROCID, ...),
// torchrun (RANK/LOCAL_RANK/WORLD_SIZE with TORCHELASTIC_* or MASTER_ADDR), PMIx
// (PMIX_RANK; local rank unknown), else a lone process (rank 0 of 1). The host is
// SLURMD_NODENAME when Slurm set it (several Slurm "nodes" may share a kernel
// hostname), else gethostname().
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace aon {

struct RankIdentity {
  int32_t rank = 0;
  int32_t local_rank = 0;
  int32_t world_size = 1;
  int32_t local_size = 1;
  std::string job_id;  // AON_JOB_ID, else SLURM_JOB_ID[.step], else OMPI's jobid, else ""
  std::string host;
  std::string launcher;  // "openmpi", "slurm", "torchrun", "pmix", "none"
};

using EnvLookup = std::function<const char*(const char*)>;

// Reads the identity from `env` (defaults to getenv).
RankIdentity DetectRankIdentity(const EnvLookup& env = nullptr);

}  // namespace aon
