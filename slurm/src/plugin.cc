// Entry points of the AON SPANK plugin (aon.so). They only dispatch on
// spank_context() to one file per context: local.cc (srun), options.cc
// (sbatch/salloc), remote.cc (slurmstepd). Only plugin_* and slurm_spank_* are
// exported (aon.map).
#include <cstdio>
#include <string>
#include <vector>

#include "state.h"

// Not SPANK_PLUGIN(): in C++ its const objects would get internal linkage.
extern "C" const char plugin_name[] = "aon";
extern "C" const char plugin_type[] = "spank";
extern "C" const unsigned int plugin_version = SLURM_VERSION_NUMBER;
extern "C" const unsigned int spank_plugin_version = 0;

namespace aon::spank {

PluginState& State() {
  static PluginState state;
  return state;
}

void UserMessage(const std::string& text) { std::fprintf(stderr, "aon: %s\n", text.c_str()); }
void LogError(const std::string& text) { slurm_error("aon: %s", text.c_str()); }
void LogInfo(const std::string& text) { slurm_info("aon: %s", text.c_str()); }

bool IsSpecialStep(uint32_t step_id) { return step_id >= 0xfffffff0u; }

}  // namespace aon::spank

using namespace aon::spank;

extern "C" int slurm_spank_init(spank_t sp, int ac, char** av) {
  const spank_context_t ctx = spank_context();
  if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR) return 0;
  PluginState& s = State();
  std::vector<std::string> args(av, av + ac);
  auto site = ParseSiteArgs(args);
  if (site.ok()) {
    s.site = *site;
  } else {
    // Fail closed: the options stay (so --aon is still understood) but do nothing.
    s.site_status = site.status();
    s.site.disabled = true;
    // Info: slurmstepd would forward an error to every job's stderr.
    if (ctx == S_CTX_REMOTE) LogInfo(s.site_status.message() + "; profiling disabled");
  }
  RegisterOptions(sp);
  return s.site_status.ok() ? 0 : -1;
}

extern "C" int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  switch (spank_context()) {
    case S_CTX_LOCAL:
      return LocalInitPostOpt(sp);
    case S_CTX_ALLOCATOR:
      return AllocatorInitPostOpt(sp);
    default:
      return 0;
  }
}

extern "C" int slurm_spank_local_user_init(spank_t sp, int, char**) {
  return spank_context() == S_CTX_LOCAL ? LocalUserInit(sp) : 0;
}

extern "C" int slurm_spank_user_init(spank_t sp, int, char**) {
  return spank_context() == S_CTX_REMOTE ? RemoteUserInit(sp) : 0;
}

extern "C" int slurm_spank_task_init(spank_t sp, int, char**) {
  return spank_context() == S_CTX_REMOTE ? RemoteTaskInit(sp) : 0;
}

extern "C" int slurm_spank_exit(spank_t sp, int, char**) {
  switch (spank_context()) {
    case S_CTX_LOCAL:
      return LocalExit(sp);
    case S_CTX_REMOTE:
      return RemoteExit(sp);
    default:
      return 0;
  }
}
