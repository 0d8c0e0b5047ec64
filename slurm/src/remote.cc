// slurmstepd (remote context, root). Per step per node, in slurm_spank_user_init
// (before any task is forked): the job directory is created by a forked child
// that became the job's user, the node collector is started (issue #3), and the
// agent's environment is put in the step's environment, which every task gets
// (StepEnvironment in settings.cc, built as aon-run builds it):
//   CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH = libaon_agent.so
//   NCCL_PROFILER_PLUGIN = libaon_agent.so (unless --aon-nccl=off)
//   AON_OUTPUT_DIR, AON_JOB_ID (<job>.<step>), AON_KINDS, AON_COLLECTOR, and what
//   the user or the site chose: AON_MEMORY_CAP, AON_SOURCE, AON_NCCL, AON_VERBOSE,
//   AON_MODE=flight with AON_WINDOW
// Each task's rank identity comes from SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID,
// which slurmstepd sets per task. A failure here is logged once to the slurmd log
// and the step runs without the agent, unless the site asked for strict (then
// task_init fails the task, which is how an error reaches srun).
#include <pwd.h>

#include <cstdio>
#include <vector>

#include "secure_fs.h"
#include "state.h"

namespace aon::spank {

std::string UserNameOf(uid_t uid);  // local.cc

namespace {

std::string JobEnv(spank_t sp, const char* name) {
  char buf[4096];
  if (spank_getenv(sp, name, buf, sizeof(buf)) != ESPANK_SUCCESS) return "";
  return buf;
}

Status SetupStep(spank_t sp, PluginState& s) {
  JobUser user;
  gid_t* groups = nullptr;
  int ngroups = 0;
  if (spank_get_item(sp, S_JOB_UID, &user.uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &user.gid) != ESPANK_SUCCESS)
    return Internal("slurmstepd did not give the job's uid/gid");
  if (spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &groups, &ngroups) == ESPANK_SUCCESS && groups)
    user.groups.assign(groups, groups + ngroups);

  std::string base = JobEnv(sp, "PWD");
  if (base.empty() || base[0] != '/') base = JobEnv(sp, "SLURM_SUBMIT_DIR");
  AON_ASSIGN_OR_RETURN(std::string dir, JobDirectory(s.plan, base, UserNameOf(user.uid), user.uid,
                                                     s.job_id, s.step_id));
  const std::string agent = !s.site.agent.empty() ? s.site.agent : FindAgent(PluginDirectory());
  if (agent.empty())
    return NotFound("libaon_agent.so not found next to " + PluginDirectory() +
                    " (set agent= in plugstack.conf)");

  PreparedJobDir prepared;
  AON_RETURN_IF_ERROR(MakePrivateDirectoriesAs(user, dir, &prepared));
  for (const std::string& w : prepared.warnings) LogInfo("step job directory: " + w);
  s.job_dir = dir;
  s.collector_key = prepared.collector_key;
  StepPaths paths;
  paths.agent = agent;
  paths.job_dir = dir;
  paths.job_id = std::to_string(s.job_id) + "." + std::to_string(s.step_id);
  paths.collector = StartNodeCollector(user.uid);
  paths.pythonpath = JobEnv(sp, "PYTHONPATH");
  AON_ASSIGN_OR_RETURN(std::vector<EnvVar> env, StepEnvironment(s.plan, paths));
  for (const EnvVar& var : env) {
    if (spank_setenv(sp, var.name.c_str(), var.value.c_str(), 1) != ESPANK_SUCCESS)
      return Internal("cannot set " + var.name + " for the tasks");
  }
  return Status::Ok();
}

}  // namespace

int RemoteUserInit(spank_t sp) {
  PluginState& s = State();
  if (!s.site_status.ok() || s.site.disabled) return 0;
  auto plan = MakeStepPlan(s.site, s.user);
  if (!plan.ok()) {
    s.failure = plan.status();
  } else {
    s.plan = *plan;
    if (!s.plan.profile) return 0;
    if (spank_get_item(sp, S_JOB_ID, &s.job_id) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_STEPID, &s.step_id) != ESPANK_SUCCESS) {
      s.failure = Internal("slurmstepd did not give the job step id");
    } else if (IsSpecialStep(s.step_id)) {
      return 0;  // the batch script, extern step: their srun steps are profiled instead
    } else {
      s.step_known = true;
      s.failure = SetupStep(sp, s);
    }
  }
  // Info, not error: slurmstepd forwards its errors to srun's stderr, and srun has
  // already told the user (the same directory failed there first).
  if (!s.failure.ok())
    LogInfo("step " + std::to_string(s.job_id) + "." + std::to_string(s.step_id) + ": " +
            s.failure.message() + "; the step runs without profiling on this node");
  return 0;
}

int RemoteTaskInit(spank_t) {
  PluginState& s = State();
  if (s.failure.ok() || !s.site.strict) return 0;
  // Only way to reach the user from here: the task's own stderr.
  std::fprintf(stderr, "aon: %s (strict profiling: the task is not started)\n",
               s.failure.message().c_str());
  return -1;
}

int RemoteExit(spank_t sp) {
  PluginState& s = State();
  if (!s.job_dir.empty()) StopNodeCollector(sp);
  return 0;
}

}  // namespace aon::spank
