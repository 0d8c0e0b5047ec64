// DetectRankIdentity for each launcher's environment.
#include "aon/config/rank_identity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>

namespace aon {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string Hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

TEST(CommonRankIdentity, OpenMpi) {
  RankIdentity id = DetectRankIdentity(Env({{"OMPI_COMM_WORLD_RANK", "3"},
                                            {"OMPI_COMM_WORLD_SIZE", "8"},
                                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                            {"OMPI_MCA_ess_base_jobid", "12345"},
                                            // Slurm and torchrun variables lose to Open MPI.
                                            {"SLURM_PROCID", "0"},
                                            {"SLURM_STEP_ID", "0"},
                                            {"RANK", "0"}}));
  EXPECT_EQ(id.launcher, "openmpi");
  EXPECT_EQ(id.rank, 3);
  EXPECT_EQ(id.world_size, 8);
  EXPECT_EQ(id.local_rank, 1);
  EXPECT_EQ(id.local_size, 2);
  EXPECT_EQ(id.host, Hostname());
}

TEST(CommonRankIdentity, Slurm) {
  RankIdentity id = DetectRankIdentity(Env({{"SLURM_PROCID", "5"},
                                            {"SLURM_STEP_ID", "2"},
                                            {"SLURM_NTASKS", "16"},
                                            {"SLURM_LOCALID", "1"},
                                            {"SLURM_STEP_TASKS_PER_NODE", "4"},
                                            {"SLURM_JOB_ID", "777"},
                                            {"SLURMD_NODENAME", "node-b"}}));
  EXPECT_EQ(id.launcher, "slurm");
  EXPECT_EQ(id.rank, 5);
  EXPECT_EQ(id.world_size, 16);
  EXPECT_EQ(id.local_rank, 1);
  EXPECT_EQ(id.local_size, 4);
  EXPECT_EQ(id.job_id, "777.2");
  EXPECT_EQ(id.host, "node-b");
}

TEST(CommonRankIdentity, SlurmAllocationWithoutStepIsNotARank) {
  // sbatch's batch shell has SLURM_PROCID but is not a task of a step.
  RankIdentity id = DetectRankIdentity(Env({{"SLURM_PROCID", "0"}, {"SLURM_JOB_ID", "777"}}));
  EXPECT_EQ(id.launcher, "none");
  EXPECT_EQ(id.job_id, "777");
}

TEST(CommonRankIdentity, Torchrun) {
  RankIdentity id = DetectRankIdentity(Env({{"RANK", "2"},
                                            {"WORLD_SIZE", "4"},
                                            {"LOCAL_RANK", "0"},
                                            {"LOCAL_WORLD_SIZE", "2"},
                                            {"TORCHELASTIC_RUN_ID", "run-9"}}));
  EXPECT_EQ(id.launcher, "torchrun");
  EXPECT_EQ(id.rank, 2);
  EXPECT_EQ(id.world_size, 4);
  EXPECT_EQ(id.local_rank, 0);
  EXPECT_EQ(id.local_size, 2);
  EXPECT_EQ(id.job_id, "run-9");
}

TEST(CommonRankIdentity, TorchStyleVariablesWithMasterAddr) {
  RankIdentity id =
      DetectRankIdentity(Env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}}));
  EXPECT_EQ(id.launcher, "torchrun");
  EXPECT_EQ(id.rank, 1);
  EXPECT_EQ(id.world_size, 2);
}

TEST(CommonRankIdentity, StrayRankVariablesDoNotLeak) {
  // RANK/WORLD_SIZE without torchrun's markers: a lone process, all defaults.
  RankIdentity id = DetectRankIdentity(Env({{"RANK", "3"}, {"WORLD_SIZE", "4"}}));
  EXPECT_EQ(id.launcher, "none");
  EXPECT_EQ(id.rank, 0);
  EXPECT_EQ(id.world_size, 1);
  EXPECT_EQ(id.local_rank, 0);
  EXPECT_EQ(id.local_size, 1);
}

TEST(CommonRankIdentity, Pmix) {
  RankIdentity id = DetectRankIdentity(Env({{"PMIX_RANK", "6"}}));
  EXPECT_EQ(id.launcher, "pmix");
  EXPECT_EQ(id.rank, 6);
  EXPECT_EQ(id.world_size, -1);
  EXPECT_EQ(id.local_rank, -1);
}

TEST(CommonRankIdentity, None) {
  RankIdentity id = DetectRankIdentity(Env({}));
  EXPECT_EQ(id.launcher, "none");
  EXPECT_EQ(id.rank, 0);
  EXPECT_EQ(id.world_size, 1);
  EXPECT_EQ(id.job_id, "");
  EXPECT_EQ(id.host, Hostname());
}

TEST(CommonRankIdentity, MalformedNumbersAreIgnored) {
  for (const char* bad : {"", "x", "-1", "3x", "99999999999"}) {
    RankIdentity id = DetectRankIdentity(Env({{"OMPI_COMM_WORLD_RANK", bad}}));
    EXPECT_EQ(id.launcher, "none") << "'" << bad << "'";
    EXPECT_EQ(id.rank, 0);
  }
  RankIdentity id =
      DetectRankIdentity(Env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "many"}}));
  EXPECT_EQ(id.launcher, "openmpi");
  EXPECT_EQ(id.world_size, 1) << "an unparsable size keeps the default";
}

TEST(CommonRankIdentity, JobIdPrecedence) {
  EXPECT_EQ(DetectRankIdentity(Env({{"AON_JOB_ID", "mine"}, {"SLURM_JOB_ID", "1"}})).job_id,
            "mine");
  EXPECT_EQ(DetectRankIdentity(Env({{"AON_JOB_ID", ""}, {"SLURM_JOB_ID", "1"}})).job_id, "1");
  EXPECT_EQ(DetectRankIdentity(Env({{"OMPI_MCA_ess_base_jobid", "42"}})).job_id, "42");
  EXPECT_EQ(DetectRankIdentity(Env({{"SLURMD_NODENAME", ""}})).host, Hostname());
}

}  // namespace
}  // namespace aon
