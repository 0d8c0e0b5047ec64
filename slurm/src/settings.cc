#include "settings.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "aon/config/agent_config.h"

namespace aon::spank {
namespace {

using session::ParseOnOff;
using session::PassthroughOption;
using session::SessionOption;

std::vector<std::string_view> SplitCommas(std::string_view s) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

struct SiteKey {
  const char* name;
  const char* help;
};
constexpr SiteKey kSiteKeys[] = {
    {"default", "on|off: profile every step unless the user says --aon=off (default off: opt-in)"},
    {"disable", "kill switch: the options stay (scripts keep working) but nothing is profiled"},
    {"output_root",
     "root of job directories, %u %U %j %s expanded (default: the submit directory)"},
    {"modes", "comma-separated modes users may choose (default off,on,full,light)"},
    {"max_memory_cap", "largest --aon-memory-cap a user may ask for (e.g. 256M)"},
    {"memory_cap", "default per-rank memory cap (default: the agent's, 64M)"},
    {"nccl",
     "default|channels|coll|proxy|off (on = default): default of --aon-nccl (default: "
     "the agent's, default)"},
    {"counters",
     "auto|gpm|off: default of --aon-counters and the most users may ask for (off: GPU "
     "counters never read, e.g. where the site reserves them for its own monitoring)"},
    {"strict", "profiler failures fail the step (only with `required` in plugstack.conf)"},
    {"agent", "path of libaon_agent.so (default: next to aon.so)"},
    {"bindir", "directory of aon-merge and aon-report (default: next to aon.so)"},
};

}  // namespace

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kOff:
      return "off";
    case Mode::kOn:
      return "on";
    case Mode::kFull:
      return "full";
    case Mode::kLight:
      return "light";
  }
  return "?";
}

StatusOr<Mode> ParseMode(std::string_view text) {
  for (Mode m : {Mode::kOff, Mode::kOn, Mode::kFull, Mode::kLight})
    if (text == ModeName(m)) return m;
  return InvalidArgument("unknown mode '" + std::string(text) + "' (off, on, full or light)");
}

bool SiteConfig::ModeAllowed(Mode m) const {
  return std::find(allowed_modes.begin(), allowed_modes.end(), m) != allowed_modes.end();
}

StatusOr<SiteConfig> ParseSiteArgs(const std::vector<std::string>& args) {
  SiteConfig c;
  std::vector<std::string> unknown;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const bool has_value = eq != std::string::npos;
    const std::string value = has_value ? arg.substr(eq + 1) : "";
    auto bad = [&](const std::string& why) {
      return InvalidArgument("plugstack.conf argument '" + arg + "': " + why);
    };
    if (key == "default") {
      if (!ParseOnOff(value, &c.enabled_by_default)) return bad("expected on or off");
    } else if (key == "disable") {
      c.disabled = true;
      if (has_value && !ParseOnOff(value, &c.disabled)) return bad("expected on or off");
    } else if (key == "strict") {
      c.strict = true;
      if (has_value && !ParseOnOff(value, &c.strict)) return bad("expected on or off");
    } else if (key == "nccl") {
      auto mode = session::CheckOptionValue(SessionOption::kNccl, value);
      if (!mode.ok()) return bad(mode.status().message());
      c.nccl = *mode;
    } else if (key == "counters") {
      auto mode = session::CheckOptionValue(PassthroughOption(AgentVar::kCounters), value);
      if (!mode.ok()) return bad(mode.status().message());
      c.counters = *mode;
    } else if (key == "output_root") {
      if (value.empty()) return bad("needs a path");
      AON_ASSIGN_OR_RETURN(std::string probe, ExpandPathTemplate(value, "u", 0, 1, 0));
      (void)probe;
      c.output_root = value;
    } else if (key == "modes") {
      c.allowed_modes.clear();
      for (std::string_view item : SplitCommas(value)) {
        auto m = ParseMode(item);
        if (!m.ok()) return bad(m.status().message());
        c.allowed_modes.push_back(*m);
      }
      if (c.allowed_modes.empty()) return bad("needs at least one mode");
      if (!c.ModeAllowed(Mode::kOff)) c.allowed_modes.push_back(Mode::kOff);  // always allowed
    } else if (key == "max_memory_cap" || key == "memory_cap") {
      auto size = ParseSize(value);
      if (!size.ok()) return bad(size.status().message());
      // The agent's bounds (aon/config/agent_config.h): a default it would refuse disables capture.
      if (key == "memory_cap" && (*size < kMinMemoryCapBytes || *size > kMaxMemoryCapBytes))
        return bad("'" + value + "' is outside the agent's range, 1M to 32G");
      (key == "memory_cap" ? c.default_memory_cap : c.max_memory_cap) = *size;
    } else if (key == "agent") {
      if (value.empty() || value[0] != '/') return bad("needs an absolute path");
      c.agent = value;
    } else if (key == "bindir") {
      if (value.empty() || value[0] != '/') return bad("needs an absolute path");
      c.bindir = value;
    } else {
      unknown.push_back(key);
    }
  }
  if (!unknown.empty()) {
    std::string names;
    for (const std::string& k : unknown) names += (names.empty() ? "'" : ", '") + k + "'";
    std::string known;
    for (const SiteKey& k : kSiteKeys) known += (known.empty() ? "" : " ") + std::string(k.name);
    return InvalidArgument("unknown plugstack.conf argument" +
                           std::string(unknown.size() > 1 ? "s " : " ") + names +
                           " (known: " + known + ")");
  }
  if (c.max_memory_cap != 0 && c.default_memory_cap > c.max_memory_cap)
    return InvalidArgument("plugstack.conf: memory_cap is above max_memory_cap");
  return c;
}

const std::vector<SpankOptionSpec>& SpankOptionSpecs() {
  static const std::vector<SpankOptionSpec> specs = [] {
    std::vector<SpankOptionSpec> out;
    for (const session::FrontEndOption& e : session::FrontEndOptions()) {
      if (e.spank == nullptr) continue;
      SpankOptionSpec spec;
      spec.id = e.id;
      spec.name = e.spank;
      const bool flag = e.spank_arg == session::OptionArg::kFlag;
      spec.arginfo = flag || e.value == nullptr ? "" : e.value;
      if (e.spank_arg == session::OptionArg::kOptional) spec.arginfo = "[" + spec.arginfo + "]";
      // --aon says what it is; the others say whose option they are.
      spec.usage = std::string(e.id == SessionOption::kProfile ? "" : "AON: ") + e.help + ".";
      spec.has_arg = flag ? 0 : e.spank_arg == session::OptionArg::kOptional ? 2 : 1;
      out.push_back(std::move(spec));
    }
    return out;
  }();
  return specs;
}

namespace {

// The canonical value of `option` (aon-run's check), or an error naming the
// option as srun's user typed it.
StatusOr<std::string> Checked(SessionOption option, const char* optarg) {
  const std::string v = optarg != nullptr ? optarg : "";
  auto checked = session::CheckOptionValue(option, v);
  if (!checked.ok())
    return InvalidArgument(session::SpankName(option) + "=" + v + ": " +
                           checked.status().message());
  return checked;
}

}  // namespace

Status SetUserOption(UserOptions& o, SessionOption option, const char* optarg) {
  if (session::FrontEndOptionOf(option).passthrough) {  // --aon-mode and the like
    AON_ASSIGN_OR_RETURN(o.passthrough[option], Checked(option, optarg));
    return Status::Ok();
  }
  switch (option) {
    case SessionOption::kProfile:
      return SetModeOption(o, optarg);
    case SessionOption::kOutput:
      return SetOutputOption(o, optarg);
    case SessionOption::kKinds:
      return SetKindsOption(o, optarg);
    case SessionOption::kSource:
      return SetSourceOption(o, optarg);
    case SessionOption::kNccl:
      return SetNcclOption(o, optarg);
    case SessionOption::kMemoryCap:
      return SetMemoryCapOption(o, optarg);
    case SessionOption::kMerge:
      return SetMergeOption(o, optarg);
    case SessionOption::kFlight:
      return SetFlightOption(o, optarg);
    case SessionOption::kVerbose:
      o.verbose = true;
      return Status::Ok();
    default:  // aon-run only (--window, --no-report, --merge-procs)
      break;
  }
  return Internal(session::RunName(option) + " is not an srun option");
}

Status SetModeOption(UserOptions& o, const char* optarg) {
  // sbatch --aon reaches the batch script's srun as the text "(null)" (Slurm 22.05
  // prints a null optarg into SLURM_SPANK__SLURM_SPANK_OPTION_aon_aon).
  if (optarg == nullptr || *optarg == '\0' || std::string_view(optarg) == "(null)") {
    o.mode = Mode::kOn;
    return Status::Ok();
  }
  AON_ASSIGN_OR_RETURN(std::string text, Checked(SessionOption::kProfile, optarg));
  AON_ASSIGN_OR_RETURN(o.mode, ParseMode(text));
  return Status::Ok();
}

Status SetOutputOption(UserOptions& o, const char* optarg) {
  if (optarg == nullptr || *optarg == '\0')
    return InvalidArgument("--aon-output needs a directory");
  auto probe = ExpandPathTemplate(optarg, "u", 0, 1, 0);
  if (!probe.ok())
    return InvalidArgument("--aon-output=" + std::string(optarg) + ": " + probe.status().message());
  o.output = optarg;
  return Status::Ok();
}

Status SetKindsOption(UserOptions& o, const char* optarg) {
  AON_ASSIGN_OR_RETURN(o.kinds, Checked(SessionOption::kKinds, optarg));
  return Status::Ok();
}

Status SetSourceOption(UserOptions& o, const char* optarg) {
  AON_ASSIGN_OR_RETURN(o.source, Checked(SessionOption::kSource, optarg));
  return Status::Ok();
}

Status SetNcclOption(UserOptions& o, const char* optarg) {
  AON_ASSIGN_OR_RETURN(o.nccl, Checked(SessionOption::kNccl, optarg));
  return Status::Ok();
}

Status SetMergeOption(UserOptions& o, const char* optarg) {
  auto on = Checked(SessionOption::kMerge, optarg);
  if (!on.ok()) return on.status();
  o.merge = *on == "on";
  return Status::Ok();
}

Status SetFlightOption(UserOptions& o, const char* optarg) {
  AON_ASSIGN_OR_RETURN(o.flight_window, Checked(SessionOption::kFlight, optarg));
  return Status::Ok();
}

Status SetMemoryCapOption(UserOptions& o, const char* optarg) {
  AON_ASSIGN_OR_RETURN(o.memory_cap_text, Checked(SessionOption::kMemoryCap, optarg));
  AON_ASSIGN_OR_RETURN(o.memory_cap, ParseSize(o.memory_cap_text));
  return Status::Ok();
}

StatusOr<StepPlan> MakeStepPlan(const SiteConfig& site, const UserOptions& user) {
  StepPlan p;
  if (site.disabled) return p;
  Mode mode = user.mode.value_or(site.enabled_by_default ? Mode::kOn : Mode::kOff);
  if (!site.ModeAllowed(mode)) {
    std::string allowed;
    for (Mode m : site.allowed_modes)
      allowed += (allowed.empty() ? "" : ", ") + std::string(ModeName(m));
    return InvalidArgument(std::string("--aon=") + ModeName(mode) + ": this cluster allows only " +
                           allowed);
  }
  p.mode = mode;
  p.profile = mode != Mode::kOff;
  if (!user.kinds.empty()) {
    p.kinds = user.kinds;
  } else if (mode == Mode::kFull) {
    p.kinds = "all";
  } else if (mode == Mode::kLight) {
    p.kinds = "kernels,nvtx";
  } else {
    p.kinds = "default";
  }
  if (user.memory_cap) {
    if (site.max_memory_cap != 0 && *user.memory_cap > site.max_memory_cap)
      return InvalidArgument("--aon-memory-cap=" + user.memory_cap_text +
                             ": above this cluster's limit of " +
                             std::to_string(site.max_memory_cap >> 20) + "M");
    p.memory_cap = user.memory_cap_text;
  } else if (site.default_memory_cap != 0) {
    p.memory_cap = std::to_string(site.default_memory_cap);
  }
  p.nccl = user.nccl.value_or(site.nccl);
  p.source = user.source;
  p.merge = user.merge.value_or(true);
  p.flight_window = user.flight_window;
  p.verbose = user.verbose;
  p.output_root = !user.output.empty() ? user.output : site.output_root;
  p.passthrough = user.passthrough;
  if (!site.counters.empty()) {
    auto rank = [](std::string_view m) {
      return std::find(kCounterModes.begin(), kCounterModes.end(), m) - kCounterModes.begin();
    };
    auto asked = p.passthrough.find(PassthroughOption(AgentVar::kCounters));
    if (asked == p.passthrough.end()) {
      p.passthrough[PassthroughOption(AgentVar::kCounters)] = site.counters;
    } else if (rank(asked->second) > rank(site.counters)) {
      return InvalidArgument("--aon-counters=" + asked->second +
                             ": this cluster allows GPU counters up to '" + site.counters +
                             "' (plugstack.conf counters=" + site.counters + ")");
    }
  }
  return p;
}

StatusOr<AgentSettings> StepSettings(const StepPlan& plan, const StepPaths& paths) {
  AgentSettings settings;
  AON_RETURN_IF_ERROR(settings.Set(AgentVar::kOutputDir, paths.job_dir));
  AON_RETURN_IF_ERROR(settings.Set(AgentVar::kJobId, paths.job_id));
  // What the user or the site chose; nothing else (the job's own AON_* stay).
  const std::pair<SessionOption, std::string> chosen[] = {
      {SessionOption::kKinds, plan.kinds},   {SessionOption::kMemoryCap, plan.memory_cap},
      {SessionOption::kSource, plan.source}, {SessionOption::kVerbose, plan.verbose ? "1" : ""},
      {SessionOption::kNccl, plan.nccl},     {SessionOption::kFlight, plan.flight_window},
  };
  for (const auto& [option, value] : chosen) {
    if (!value.empty()) AON_RETURN_IF_ERROR(session::ApplyOption(settings, option, value));
  }
  for (const auto& [option, value] : plan.passthrough) {
    if (!value.empty()) AON_RETURN_IF_ERROR(session::ApplyOption(settings, option, value));
  }
  if (!paths.collector.empty())
    AON_RETURN_IF_ERROR(settings.Set(AgentVar::kCollector, paths.collector));
  return settings;
}

StatusOr<std::vector<EnvVar>> StepEnvironment(const StepPlan& plan, const StepPaths& paths) {
  AON_ASSIGN_OR_RETURN(AgentSettings settings, StepSettings(plan, paths));
  return AgentEnvironment(settings, paths.agent, paths.pythonpath);
}

Status CheckStepInheritance(const StepPlan& plan, const EnvLookupFn& env) {
  StepPaths paths;  // stand-ins: the step's own are known on its nodes only
  paths.job_dir = "/";
  paths.job_id = "0.0";
  paths.collector = "unix:/";
  AON_ASSIGN_OR_RETURN(AgentSettings settings, StepSettings(plan, paths));
  return CheckInheritedAgentVariables(settings, env, /*spank=*/true);
}

StatusOr<std::string> ExpandPathTemplate(std::string_view tmpl, std::string_view user, uint32_t uid,
                                         uint32_t job_id, uint32_t step_id) {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] != '%') {
      out += tmpl[i];
      continue;
    }
    if (i + 1 == tmpl.size())
      return InvalidArgument("'" + std::string(tmpl) + "' ends with a lone %");
    switch (tmpl[++i]) {
      case 'u':
        out += user;
        break;
      case 'U':
        out += std::to_string(uid);
        break;
      case 'j':
        out += std::to_string(job_id);
        break;
      case 's':
        out += std::to_string(step_id);
        break;
      case '%':
        out += '%';
        break;
      default:
        return InvalidArgument("'" + std::string(tmpl) + "': unknown %" + tmpl[i] +
                               " (known: %u %U %j %s %%)");
    }
  }
  return out;
}

StatusOr<std::string> JobDirectory(const StepPlan& plan, std::string_view base_dir,
                                   std::string_view user, uint32_t uid, uint32_t job_id,
                                   uint32_t step_id) {
  std::string root;
  if (!plan.output_root.empty()) {
    AON_ASSIGN_OR_RETURN(root, ExpandPathTemplate(plan.output_root, user, uid, job_id, step_id));
  }
  if (root.empty() || root[0] != '/') {
    if (base_dir.empty() || base_dir[0] != '/')
      return InvalidArgument("no absolute directory to put '" +
                             (root.empty() ? std::string(".") : root) +
                             "' in (the submit directory is unknown)");
    root = std::string(base_dir) + (root.empty() ? "" : "/" + root);
  }
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (root.find("/../") != std::string::npos || root.ends_with("/.."))
    return InvalidArgument("'" + root + "': '..' is not allowed in the output directory");
  return root + "/aon-" + std::to_string(job_id) + "." + std::to_string(step_id);
}

}  // namespace aon::spank
