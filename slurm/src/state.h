// What the plugin knows in the process it is loaded in (srun, sbatch, salloc or
// slurmstepd): one instance per process, filled by the callbacks in order.
#pragma once

#include <cstdint>
#include <string>

#include "settings.h"

extern "C" {
#include <slurm/spank.h>
}

namespace aon::spank {

struct PluginState {
  SiteConfig site;
  Status site_status;  // plugstack.conf errors: the plugin then does nothing
  UserOptions user;
  StepPlan plan;
  bool step_known = false;
  uint32_t job_id = 0;
  uint32_t step_id = 0;
  uint32_t step_nodes = 1;     // nodes of the step (srun, from local_user_init)
  bool in_allocation = false;  // srun started inside salloc/sbatch: the job outlives the step
  std::string job_dir;         // set once the directory exists
  uid_t job_uid = 0;           // the job's user (its collector runs as that user)
  std::string collector_key;   // slurmstepd: the step's collector key, made as the user
  Status failure;              // first profiler failure of this step (reported once)
};
PluginState& State();

// Messages: one prefix ("aon: "). In srun/sbatch/salloc they go to the user's
// stderr; in slurmstepd to the slurmd log.
void UserMessage(const std::string& text);
void LogError(const std::string& text);
void LogInfo(const std::string& text);

// True for steps that are not a user's srun (batch script, extern, interactive).
bool IsSpecialStep(uint32_t step_id);

// One file per context; each returns the SPANK return code.
void RegisterOptions(spank_t sp);
int LocalInitPostOpt(spank_t sp);      // srun
int LocalUserInit(spank_t sp);         // srun: job and step known
int LocalExit(spank_t sp);             // srun: the step's tasks have ended -> merge
int AllocatorInitPostOpt(spank_t sp);  // sbatch / salloc
int RemoteUserInit(spank_t sp);        // slurmstepd: job directory, agent environment
int RemoteTaskInit(spank_t sp);        // slurmstepd: strict failures
int RemoteExit(spank_t sp);            // slurmstepd: step end on this node

// The node collector (issue #3), once per step per node. Start: remembers the
// job's user and returns the aon-collector the agents should start ("" when
// none is installed: they look beside themselves). Stop: finishes it.
std::string StartNodeCollector(uid_t uid);
void StopNodeCollector(spank_t sp);

}  // namespace aon::spank
