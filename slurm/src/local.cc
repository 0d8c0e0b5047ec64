// srun (local context, running as the user). The job directory is created here
// as the user, and when the step's tasks have ended (normally, failed or killed)
// slurm_spank_exit merges the step: by one aon-merge process here, or, for a step
// of several nodes inside an allocation (salloc, sbatch), by one aon-merge process
// per node run as a step of the same job (srun --mpi=pmix: the processes are an
// MPI job), falling back to one process here when that step cannot run. (A bare
// multi-node srun's own allocation is gone when its exit callback runs.) Then
// aon-report if it is installed.
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "aon/config/merge_report.h"
#include "aon/config/tool_paths.h"
#include "secure_fs.h"
#include "state.h"

namespace aon::spank {
namespace {

std::string UserName(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found != nullptr) return pw.pw_name;
  return std::to_string(uid);
}

// The submit directory as the tasks see it ($PWD, which srun passes on), else getcwd.
std::string SubmitDirectory() {
  const char* pwd = std::getenv("PWD");
  if (pwd != nullptr && pwd[0] == '/') return pwd;
  char buf[PATH_MAX];
  return getcwd(buf, sizeof(buf)) != nullptr ? std::string(buf) : std::string();
}

}  // namespace

std::string UserNameOf(uid_t uid) { return UserName(uid); }

int LocalInitPostOpt(spank_t) {
  PluginState& s = State();
  if (!s.site_status.ok()) {
    if (s.user.mode) UserMessage(s.site_status.message() + "; --aon is ignored");
    return -1;
  }
  auto plan = MakeStepPlan(s.site, s.user);
  if (!plan.ok()) {
    UserMessage(plan.status().message());
    return -1;
  }
  s.plan = *plan;
  if (s.plan.profile) {
    // srun passes its environment to the tasks: a bad AON_* there would reach
    // every rank's agent, which would disable capture.
    const Status inherited = CheckStepInheritance(s.plan);
    if (!inherited.ok()) {
      UserMessage(inherited.message());
      return -1;
    }
  }
  // Before srun allocates anything: a job id here means salloc/sbatch made the
  // allocation, which is still there when the step ends (srun's own is not).
  s.in_allocation = std::getenv("SLURM_JOB_ID") != nullptr;
  if (s.site.disabled && s.user.mode && *s.user.mode != Mode::kOff)
    UserMessage("profiling is disabled on this cluster; --aon is ignored");
  return 0;
}

int LocalUserInit(spank_t sp) {
  PluginState& s = State();
  if (!s.plan.profile) return 0;
  if (spank_get_item(sp, S_JOB_ID, &s.job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &s.step_id) != ESPANK_SUCCESS) {
    s.failure = Internal("srun did not say which job step this is");
  } else if (IsSpecialStep(s.step_id)) {
    return 0;
  } else {
    s.step_known = true;
    // Only here: slurm_spank_exit in srun no longer has the step's node count.
    uint32_t nodes = 1;
    if (spank_get_item(sp, S_JOB_NNODES, &nodes) == ESPANK_SUCCESS && nodes > 0)
      s.step_nodes = nodes;
    auto dir =
        JobDirectory(s.plan, SubmitDirectory(), UserName(getuid()), getuid(), s.job_id, s.step_id);
    std::vector<std::string> warnings;
    Status made = dir.ok() ? MakePrivateDirectories(*dir, &warnings) : dir.status();
    for (const std::string& w : warnings) UserMessage("warning: " + w);
    if (made.ok()) {
      s.job_dir = *dir;
      return 0;
    }
    s.failure = made;
  }
  UserMessage(s.failure.message() + "; this step runs without profiling");
  return s.site.strict ? -1 : 0;
}

namespace {

// An executable named `name` in $PATH, or "".
std::string FindInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

// The step's merge on its nodes, one process each, run as a step of the same
// job (srun --mpi=pmix: the processes are an MPI job); empty without srun.
std::vector<std::string> MergeOnNodesCommand(const PluginState& s, const std::string& bindir,
                                             uint32_t nodes) {
  const std::string srun = FindInPath("srun");
  if (srun.empty()) return {};
  // --aon=off: the merge step itself is never profiled (an inherited --aon,
  // e.g. from sbatch --aon, would otherwise apply to it).
  return {srun,
          "--jobid=" + std::to_string(s.job_id),
          "--overlap",
          "--quiet",
          "-N",
          std::to_string(nodes),
          "-n",
          std::to_string(nodes),
          "--ntasks-per-node=1",
          "--mpi=pmix",
          "--aon=off",
          ToolPath(bindir, Tool::kMerge),
          "-q",
          "--no-progress",
          s.job_dir};
}

std::string Outcome(const Status& error, int exit_status, const char* program) {
  return !error.ok() ? error.message()
                     : std::string(program) + " exit status " + std::to_string(exit_status);
}

}  // namespace

int LocalExit(spank_t) {
  PluginState& s = State();
  if (s.job_dir.empty()) return 0;
  const std::string step = std::to_string(s.job_id) + "." + std::to_string(s.step_id);
  if (!s.plan.merge) {
    UserMessage("step " + step + ": rank files in " + s.job_dir + " (not merged: --aon-merge=off)");
    MakeFilesPrivate(s.job_dir).ok();
    return 0;
  }
  const std::string bindir = !s.site.bindir.empty() ? s.site.bindir : FindBinDir(PluginDirectory());
  if (bindir.empty()) {
    UserMessage("aon-merge not found next to " + PluginDirectory() +
                " (set bindir= in plugstack.conf); step " + step + " rank files are in " +
                s.job_dir);
    return 0;
  }
  MergePlan merge;
  merge.job_dir = s.job_dir;
  merge.merge_program = ToolPath(bindir, Tool::kMerge);
  merge.report_program = ToolPath(bindir, Tool::kReport);
  const uint32_t nodes = s.step_nodes;
  if (nodes > 1 && s.in_allocation) {
    std::vector<std::string> on_nodes = MergeOnNodesCommand(s, bindir, nodes);
    if (!on_nodes.empty()) {
      merge.attempts.push_back({std::move(on_nodes), true});
    } else {
      UserMessage("step " + step + ": merging on its " + std::to_string(nodes) +
                  " nodes failed (srun is not in PATH); merging here with one process");
    }
  }
  // -q: the line printed below says where the results are; problems still show.
  merge.attempts.push_back({{merge.merge_program, "-q", s.job_dir}, false});
  const MergeOutcome out = MergeThenReport(merge, RunProgram, [&](const MergeEvent& e) {
    if (e.kind == MergeEvent::Kind::kMergeFailed && e.attempt + 1 < merge.attempts.size()) {
      UserMessage("step " + step + ": merging on its " + std::to_string(nodes) + " nodes failed (" +
                  Outcome(e.error, e.exit_status, "srun") + "); merging here with one process");
    }
  });
  if (out.report == ReportResult::kFailed)
    UserMessage("aon-report failed for " + s.job_dir + " (the timeline is complete)");
  Status privacy = MakeFilesPrivate(s.job_dir);
  if (!privacy.ok()) UserMessage(privacy.message());
  switch (out.merge) {
    case MergeResult::kMerged: {
      const std::string report = s.job_dir + "/report.html";
      UserMessage("step " + step + " profiled: " + s.job_dir + "/timeline.h5, " + s.job_dir +
                  "/trace.json (open in https://ui.perfetto.dev)" +
                  (access(report.c_str(), R_OK) == 0 ? ", " + report : std::string()));
      break;
    }
    case MergeResult::kNoRankFiles:
      UserMessage("step " + step + ": no rank files were written to " + s.job_dir +
                  " (the agent runs only in tasks that use CUDA or NVTX): nothing to merge");
      break;
    case MergeResult::kNoMergeProgram:
      UserMessage(merge.merge_program + " is not executable; step " + step + " rank files are in " +
                  s.job_dir);
      break;
    case MergeResult::kMergeFailed:
      UserMessage("step " + step + ": merging " + s.job_dir + " failed (" +
                  Outcome(out.merge_error, out.merge_exit_status, "aon-merge") +
                  "); the rank files are kept there");
      break;
  }
  return 0;
}

}  // namespace aon::spank
