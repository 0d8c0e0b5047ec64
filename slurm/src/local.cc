// srun (local context, running as the user). The job directory is created here
// as the user, and when the step's tasks have ended (normally, failed or killed)
// slurm_spank_exit merges the step: one aon-merge process on the submit node, then
// aon-report if it is installed. Issue #7 makes the merge a collective MPI step.
#include <pwd.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

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
    auto dir =
        JobDirectory(s.plan, SubmitDirectory(), UserName(getuid()), getuid(), s.job_id, s.step_id);
    Status made = dir.ok() ? MakePrivateDirectories(*dir) : dir.status();
    if (made.ok()) {
      s.job_dir = *dir;
      return 0;
    }
    s.failure = made;
  }
  UserMessage(s.failure.message() + "; this step runs without profiling");
  return s.site.strict ? -1 : 0;
}

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
  // -q: the line printed below says where the results are; problems still show.
  auto rc = RunProgram({bindir + "/aon-merge", "-q", s.job_dir});
  const bool merged = rc.ok() && *rc == 0;
  if (merged && access((bindir + "/aon-report").c_str(), X_OK) == 0) {
    auto report = RunProgram({bindir + "/aon-report", s.job_dir});
    if (!report.ok() || *report != 0)
      UserMessage("aon-report failed for " + s.job_dir + " (the timeline is complete)");
  }
  Status privacy = MakeFilesPrivate(s.job_dir);
  if (!privacy.ok()) UserMessage(privacy.message());
  if (merged) {
    const std::string report = s.job_dir + "/report.html";
    UserMessage("step " + step + " profiled: " + s.job_dir + "/timeline.h5, " + s.job_dir +
                "/trace.json (open in https://ui.perfetto.dev)" +
                (access(report.c_str(), R_OK) == 0 ? ", " + report : std::string()));
  } else {
    UserMessage("step " + step + ": merging " + s.job_dir + " failed (" +
                (rc.ok() ? "aon-merge exit status " + std::to_string(*rc) : rc.status().message()) +
                "); the rank files are kept there");
  }
  return 0;
}

}  // namespace aon::spank
