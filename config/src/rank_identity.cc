#include "aon/config/rank_identity.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

namespace aon {
namespace {

bool ParseInt(const char* s, int32_t* out) {
  if (s == nullptr || *s == '\0') return false;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (*end != '\0' || v < 0 || v > INT32_MAX) return false;
  *out = static_cast<int32_t>(v);
  return true;
}

}  // namespace

RankIdentity DetectRankIdentity(const EnvLookup& lookup) {
  EnvLookup env = lookup ? lookup : EnvLookup([](const char* n) { return std::getenv(n); });
  RankIdentity id;
  int32_t v = 0;
  if (ParseInt(env("OMPI_COMM_WORLD_RANK"), &v)) {
    id.launcher = "openmpi";
    id.rank = v;
    if (ParseInt(env("OMPI_COMM_WORLD_SIZE"), &v)) id.world_size = v;
    if (ParseInt(env("OMPI_COMM_WORLD_LOCAL_RANK"), &v)) id.local_rank = v;
    if (ParseInt(env("OMPI_COMM_WORLD_LOCAL_SIZE"), &v)) id.local_size = v;
  } else if (ParseInt(env("SLURM_PROCID"), &v) && env("SLURM_STEP_ID") != nullptr) {
    id.launcher = "slurm";
    id.rank = v;
    if (ParseInt(env("SLURM_NTASKS"), &v) || ParseInt(env("SLURM_NPROCS"), &v)) id.world_size = v;
    if (ParseInt(env("SLURM_LOCALID"), &v)) id.local_rank = v;
    const char* tpn = env("SLURM_STEP_TASKS_PER_NODE");
    if (ParseInt(tpn, &v)) id.local_size = v;
  } else if (int32_t torch_world = 0;
             ParseInt(env("RANK"), &v) && ParseInt(env("WORLD_SIZE"), &torch_world) &&
             (env("TORCHELASTIC_RUN_ID") != nullptr || env("MASTER_ADDR") != nullptr)) {
    // Parsed into a local: a stray WORLD_SIZE without torchrun must not leak into
    // the identity of a lone process.
    id.launcher = "torchrun";
    id.rank = v;
    id.world_size = torch_world;
    if (ParseInt(env("LOCAL_RANK"), &v)) id.local_rank = v;
    if (ParseInt(env("LOCAL_WORLD_SIZE"), &v)) id.local_size = v;
  } else if (ParseInt(env("PMIX_RANK"), &v)) {
    id.launcher = "pmix";
    id.rank = v;
    id.world_size = -1;  // needs PMIx_Get(PMIX_JOB_SIZE): clock sync fills it
    id.local_rank = -1;
    id.local_size = -1;
  } else {
    id.launcher = "none";
  }

  if (const char* j = env("AON_JOB_ID"); j != nullptr && *j != '\0') {
    id.job_id = j;
  } else if (const char* sj = env("SLURM_JOB_ID"); sj != nullptr) {
    id.job_id = sj;
    if (const char* st = env("SLURM_STEP_ID")) id.job_id += std::string(".") + st;
  } else if (const char* oj = env("OMPI_MCA_ess_base_jobid"); oj != nullptr) {
    id.job_id = oj;
  } else if (const char* tj = env("TORCHELASTIC_RUN_ID"); tj != nullptr) {
    id.job_id = tj;
  }

  if (const char* node = env("SLURMD_NODENAME"); node != nullptr && *node != '\0') {
    id.host = node;
  } else {
    char buf[256] = {};
    if (gethostname(buf, sizeof(buf) - 1) == 0) id.host = buf;
  }
  return id;
}

}  // namespace aon
