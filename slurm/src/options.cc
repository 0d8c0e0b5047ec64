// The --aon* options of srun, sbatch and salloc: one table with help text. Every
// callback checks its value and the site policy right away, so a bad value makes
// srun/sbatch fail before anything runs, with a message that names the option.
// Slurm may call a callback twice with the same value: setting is idempotent.
#include "state.h"

namespace aon::spank {
namespace {

enum OptionId { kAon = 1, kOutput, kKinds, kNccl, kMemoryCap, kMerge, kVerbose, kFlight };

int OnOption(int val, const char* optarg, int remote) {
  PluginState& s = State();
  Status st;
  switch (val) {
    case kAon:
      st = SetModeOption(s.user, optarg);
      break;
    case kOutput:
      st = SetOutputOption(s.user, optarg);
      break;
    case kKinds:
      st = SetKindsOption(s.user, optarg);
      break;
    case kNccl:
      st = SetNcclOption(s.user, optarg);
      break;
    case kMemoryCap:
      st = SetMemoryCapOption(s.user, optarg);
      break;
    case kMerge:
      st = SetMergeOption(s.user, optarg);
      break;
    case kVerbose:
      s.user.verbose = true;
      break;
    case kFlight:
      st = SetFlightOption(s.user, optarg);
      break;
    default:
      st = Internal("unknown option id " + std::to_string(val));
  }
  if (st.ok()) {
    auto plan = MakeStepPlan(s.site, s.user);  // site policy (allowed modes, caps)
    if (!plan.ok()) st = plan.status();
  }
  if (st.ok()) return 0;
  if (remote) {
    LogError(st.message());
  } else {
    UserMessage(st.message());
  }
  return -1;
}

// Slurm keeps pointers to these for the life of the process.
struct spank_option kOptions[] = {
    {const_cast<char*>("aon"), const_cast<char*>("[MODE]"),
     const_cast<char*>("Profile this job's GPUs with AON. MODE: on (default), full (also CUDA "
                       "API calls), light (kernels and NVTX only), off."),
     2, kAon, OnOption},
    {const_cast<char*>("aon-output"), const_cast<char*>("DIR"),
     const_cast<char*>("AON: put each step's trace in DIR/aon-<job>.<step> (%u %j %s expanded; "
                       "default: the site's output root, else the submit directory)."),
     1, kOutput, OnOption},
    {const_cast<char*>("aon-kinds"), const_cast<char*>("LIST"),
     const_cast<char*>("AON: record kinds, e.g. kernels,memcpy,nvtx (or all, default)."), 1, kKinds,
     OnOption},
    {const_cast<char*>("aon-nccl"), const_cast<char*>("on|off"),
     const_cast<char*>("AON: load AON's NCCL profiler plugin into the tasks (default on)."), 1,
     kNccl, OnOption},
    {const_cast<char*>("aon-memory-cap"), const_cast<char*>("SIZE"),
     const_cast<char*>("AON: record memory per rank, e.g. 64M; beyond it records are dropped and "
                       "counted."),
     1, kMemoryCap, OnOption},
    {const_cast<char*>("aon-merge"), const_cast<char*>("on|off"),
     const_cast<char*>("AON: merge the step's rank files when it ends (default on)."), 1, kMerge,
     OnOption},
    {const_cast<char*>("aon-flight"), const_cast<char*>("SECONDS"),
     const_cast<char*>("AON: flight recorder: keep only the last SECONDS in memory and write them "
                       "when something goes wrong (a task dies, an NCCL stall, a step-time spike, "
                       "or aon-collector --trigger)."),
     1, kFlight, OnOption},
    {const_cast<char*>("aon-verbose"), nullptr,
     const_cast<char*>("AON: the agent reports its progress on stderr."), 0, kVerbose, OnOption},
};

}  // namespace

void RegisterOptions(spank_t sp) {
  for (struct spank_option& opt : kOptions) {
    if (spank_option_register(sp, &opt) != ESPANK_SUCCESS)
      LogError(std::string("cannot register --") + opt.name);
  }
}

int AllocatorInitPostOpt(spank_t) {
  PluginState& s = State();
  if (!s.site_status.ok()) {
    if (s.user.mode) UserMessage(s.site_status.message() + "; --aon is ignored");
    return -1;
  }
  if (s.site.disabled && s.user.mode && *s.user.mode != Mode::kOff)
    UserMessage("profiling is disabled on this cluster; --aon is ignored");
  // The batch script's srun commands inherit the options and each merges its own step.
  return 0;
}

}  // namespace aon::spank
