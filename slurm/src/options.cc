// The --aon* options of srun, sbatch and salloc: registered from the option
// table that aon-run reads too (aon/config/options.h, via SpankOptionSpecs),
// with its help text. Every callback checks its value and the site policy right
// away, so a bad value makes srun/sbatch fail before anything runs, with a
// message that names the option. Slurm may call a callback twice with the same
// value: setting is idempotent.
#include <vector>

#include "state.h"

namespace aon::spank {
namespace {

// spank_option.val: the table's option id, offset so that 0 is never used.
int OptionValue(session::SessionOption id) { return static_cast<int>(id) + 1; }

int OnOption(int val, const char* optarg, int remote) {
  PluginState& s = State();
  Status st = Internal("unknown option id " + std::to_string(val));
  for (const SpankOptionSpec& spec : SpankOptionSpecs()) {
    if (OptionValue(spec.id) == val) st = SetUserOption(s.user, spec.id, optarg);
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

// Slurm keeps pointers to these (and their strings, owned by SpankOptionSpecs)
// for the life of the process.
std::vector<struct spank_option>& Options() {
  static std::vector<struct spank_option> options = [] {
    std::vector<struct spank_option> out;
    for (const SpankOptionSpec& spec : SpankOptionSpecs()) {
      out.push_back({const_cast<char*>(spec.name.c_str()),
                     spec.arginfo.empty() ? nullptr : const_cast<char*>(spec.arginfo.c_str()),
                     const_cast<char*>(spec.usage.c_str()), spec.has_arg, OptionValue(spec.id),
                     OnOption});
    }
    return out;
  }();
  return options;
}

}  // namespace

void RegisterOptions(spank_t sp) {
  for (struct spank_option& opt : Options()) {
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
