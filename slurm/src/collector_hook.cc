// The node collector of a step (collector): one per job step per
// node, running as the job's user.
//
// Start: the first rank's agent on the node starts it (as the user, with no
// privileges to drop), so here we only tell the agents where aon-collector is
// (AON_COLLECTOR, put in the tasks' environment with the rest of the agent's).
// Stop: at the step's end on this node (slurmstepd, as root), ask it to finish
// every rank file (ranks that died included) and wait until it has, so that the
// step's merge reads finished files and nothing is left running. The socket is
// checked to be the job's user's before QUIESCE is sent (kWrongPeer otherwise:
// logged, nothing waited for).
#include <unistd.h>

#include "aon/ipc/collector_protocol.h"
#include "aon/config/tool_paths.h"
#include "secure_fs.h"
#include "state.h"

namespace aon::spank {
namespace {
constexpr int kQuiesceTimeoutMs = 30000;
}

std::string StartNodeCollector(uid_t uid) {
  PluginState& s = State();
  s.job_uid = uid;
  const std::string bindir = !s.site.bindir.empty() ? s.site.bindir : FindBinDir(PluginDirectory());
  const std::string collector = ToolPath(bindir, Tool::kCollector);
  if (bindir.empty() || access(collector.c_str(), X_OK) != 0) {
    // The agents then look beside themselves, and without a collector each
    // rank writes its own file at exit (degraded, said in the trace).
    LogInfo("aon-collector not found next to " + PluginDirectory() + " (set bindir=)");
    return "";
  }
  return collector;
}

void StopNodeCollector(spank_t) {
  PluginState& s = State();
  if (s.collector_key.empty()) return;  // the directory was not made: no collector either
  const std::string job = std::to_string(s.job_id) + "." + std::to_string(s.step_id);
  // The key was made by the user's child in user_init (remote.cc): root reads
  // nothing of the user's here. The collector must run as the job's user.
  const CollectorEndpoint collector{CollectorSocketName(s.job_uid, job, s.job_dir, s.collector_key),
                                    s.job_uid};
  auto idle = CallCollector(collector, CollectorRequest::Quiesce(), kQuiesceTimeoutMs);
  // No collector (already gone, or never started on this node) is the usual case.
  if (!idle.ok() && idle.code() != CollectorErrc::kNoCollector) {
    LogInfo("step " + job + ": node collector: " + idle.error().message());
  }
}

}  // namespace aon::spank
