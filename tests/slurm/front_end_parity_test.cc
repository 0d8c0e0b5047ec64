// aon-run and srun --aon side by side: the real aon-run command line (CLI11,
// launcher/src/run_cli.cc) and the real SPANK option list and setters
// (slurm/src/settings.cc), both built from the table in
// config/src/options.cc.
//  - every aon-run option has its srun twin, or the table says why not, and the
//    other way round;
//  - twins accept and refuse the same values;
//  - the same options give the agent the same environment, byte for byte, and
//    each front end's defaults give the agent the same configuration.
// A new option added to one front end only fails here until its twin, or the
// reason it has none, is written down.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "aon/config/agent_config.h"
#include "aon/config/options.h"
#include "aon/launcher/run_cli.h"
#include "settings.h"

namespace aon {
namespace {

using launcher::RunCommandLine;
using session::FrontEndOption;
using session::PassthroughOption;
using session::SessionOption;
using spank::SpankOptionSpec;

const char kAgent[] = "/opt/aon/lib/libaon_agent.so";
const char kCollector[] = "/opt/aon/bin/aon-collector";
const char kJobDir[] = "/scratch/alice/aon-42.3";
const char kJobId[] = "42.3";
const char kJobPythonPath[] = "/home/alice/lib/python";

EnvLookupFn Lookup(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

std::map<std::string, std::string> AsMap(const std::vector<EnvVar>& env) {
  std::map<std::string, std::string> m;
  for (const EnvVar& v : env) m[v.name] = v.value;
  return m;
}

const FrontEndOption* EntryOf(SessionOption id) {
  for (const FrontEndOption& o : session::FrontEndOptions())
    if (o.id == id) return &o;
  return nullptr;
}

const SpankOptionSpec* SpankSpecOf(SessionOption id) {
  for (const SpankOptionSpec& s : spank::SpankOptionSpecs())
    if (s.id == id) return &s;
  return nullptr;
}

// aon-run's real command line, parsed: the options, or an error (CLI11's or
// ValidateOptions').
struct ParsedRun {
  RunCommandLine values;
  Status status;
};
ParsedRun ParseAonRun(std::vector<std::string> args) {
  ParsedRun out;
  CLI::App app{"aon-run", "aon-run"};
  launcher::DefineRunOptions(app, out.values);
  args.insert(args.begin(), "aon-run");
  args.push_back("--");
  args.push_back("true");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    out.status = InvalidArgument(e.what());
    return out;
  }
  out.values.options.command = app.remaining();
  if (!out.values.options.command.empty() && out.values.options.command.front() == "--")
    out.values.options.command.erase(out.values.options.command.begin());
  out.status = launcher::ValidateOptions(out.values.options);
  return out;
}

// srun's options, set through the plugin's own setters, and the step plan the
// site policy (here: none) makes of them.
struct ParsedSrun {
  spank::UserOptions user;
  StatusOr<spank::StepPlan> plan = Internal("not planned");
  Status status;
};
ParsedSrun ParseSrun(const std::vector<std::pair<SessionOption, std::string>>& options) {
  ParsedSrun out;
  for (const auto& [id, value] : options) {
    out.status = spank::SetUserOption(out.user, id, value.empty() ? nullptr : value.c_str());
    if (!out.status.ok()) return out;
  }
  out.plan = spank::MakeStepPlan(spank::SiteConfig{}, out.user);
  out.status = out.plan.status();
  return out;
}

std::vector<EnvVar> AonRunEnvironment(RunCommandLine values) {
  values.options.collector = kCollector;
  auto env =
      launcher::AgentEnvironment(values.options, kAgent, kJobDir,
                                 Lookup({{"AON_JOB_ID", kJobId}, {"PYTHONPATH", kJobPythonPath}}));
  EXPECT_TRUE(env.ok()) << env.status().ToString();
  return env.ok() ? *env : std::vector<EnvVar>();
}

std::vector<EnvVar> SrunEnvironment(const ParsedSrun& srun) {
  EXPECT_TRUE(srun.plan.ok()) << srun.plan.status().ToString();
  if (!srun.plan.ok()) return {};
  auto env =
      spank::StepEnvironment(*srun.plan, {kAgent, kJobDir, kJobId, kCollector, kJobPythonPath});
  EXPECT_TRUE(env.ok()) << env.status().ToString();
  return env.ok() ? *env : std::vector<EnvVar>();
}

TEST(OptionParity, EveryAonRunOptionHasItsSrunTwinOrAReason) {
  CLI::App app{"aon-run", "aon-run"};
  RunCommandLine values;
  launcher::DefineRunOptions(app, values);
  int checked = 0;
  for (const CLI::Option* option : app.get_options()) {
    if (option == app.get_help_ptr()) continue;
    const FrontEndOption* entry = nullptr;
    for (const FrontEndOption& o : session::FrontEndOptions()) {
      if (o.run != nullptr && option->get_name(false, true) == o.run) entry = &o;
    }
    ASSERT_NE(entry, nullptr) << "aon-run " << option->get_name(false, true)
                              << " is not in the option table (config/src/options.cc)";
    ++checked;
    const SpankOptionSpec* twin = SpankSpecOf(entry->id);
    if (entry->differs != nullptr) {
      EXPECT_GT(std::string(entry->differs).size(), 20u) << entry->run << ": say why";
      continue;
    }
    ASSERT_NE(twin, nullptr) << "aon-run " << entry->run << " has no srun twin and no reason";
    EXPECT_EQ(twin->name, std::string("aon-") + session::RunName(entry->id).substr(2));
    EXPECT_EQ(option->get_expected_min() == 0, twin->has_arg == 0) << entry->run;
    if (twin->has_arg != 0) {
      EXPECT_EQ(option->get_type_name(), twin->arginfo) << entry->run;
    }
    EXPECT_EQ(twin->usage, "AON: " + std::string(entry->help) + ".");
    std::string description = option->get_description();  // wrapped for the terminal
    std::replace(description.begin(), description.end(), '\n', ' ');
    EXPECT_EQ(description, entry->help) << entry->run;
  }
  EXPECT_GE(checked, 11) << "every aon-run option was looked at";
}

TEST(OptionParity, EverySrunOptionHasItsAonRunTwinOrAReason) {
  CLI::App app{"aon-run", "aon-run"};
  RunCommandLine values;
  launcher::DefineRunOptions(app, values);
  for (const SpankOptionSpec& spec : spank::SpankOptionSpecs()) {
    const FrontEndOption* entry = EntryOf(spec.id);
    ASSERT_NE(entry, nullptr) << spec.name;
    if (entry->differs != nullptr) continue;
    ASSERT_NE(entry->run, nullptr)
        << "srun --" << spec.name << " has no aon-run twin and no reason";
    EXPECT_NE(app.get_option_no_throw(session::RunName(spec.id)), nullptr)
        << "aon-run lacks " << session::RunName(spec.id) << ", the twin of --" << spec.name;
  }
  // The options srun users rely on are all there, with their value names: scripts and
  // batch files use them. New options may join (each has its table entry, checked above);
  // none of these may go or change its value text.
  std::map<std::string, std::string> registered;
  for (const SpankOptionSpec& spec : spank::SpankOptionSpecs())
    registered[spec.name] = spec.arginfo;
  const std::map<std::string, std::string> relied_on = {
      {"aon", "[MODE]"},
      {"aon-output", "DIR"},
      {"aon-kinds", "LIST"},
      {"aon-memory-cap", "SIZE"},
      {"aon-source", "cupti|synthetic"},
      {"aon-nccl", "default|channels|coll|proxy|off"},
      {"aon-flight", "SECONDS"},
      {"aon-verbose", ""},
      {"aon-merge", "on|off"},
      {"aon-mode", "budgeted|full|flight"},
      {"aon-overhead-budget", "PCT"},
      {"aon-capture-steps", "auto|N"},
      {"aon-capture-period", "N"},
      {"aon-step-source", "auto|api|pytorch|jax|nvtx|xla|nccl|time"},
      {"aon-step-range", "NAMES"},
      {"aon-counters", "auto|gpm|off"},
      {"aon-counters-interval", "MS"},
      {"aon-counters-sample-interval", "US"},
      {"aon-python-hook", "on|off"},
  };
  for (const auto& [name, arginfo] : relied_on) {
    auto it = registered.find(name);
    ASSERT_NE(it, registered.end()) << "srun --" << name << " is gone";
    EXPECT_EQ(it->second, arginfo) << "srun --" << name;
  }
}

TEST(OptionParity, TwinsAcceptAndRefuseTheSameValues) {
  struct Case {
    SessionOption run;
    SessionOption srun;
    std::vector<std::string> values;
  };
  const std::vector<Case> cases = {
      {SessionOption::kKinds,
       SessionOption::kKinds,
       {"all", "default", "kernels", "kernel,nvtx", "api,runtime,driver", "nccl,sync", "bogus",
        "kernels,", ",kernels", "KERNELS", ""}},
      {SessionOption::kMemoryCap,
       SessionOption::kMemoryCap,
       {"64M", "1M", "1G", "1048576", "512K", "4K", "0", "12Q", "MiB", "1.5G", "", "32G", "64G",
        "-1M", "99999999999999999999"}},
      {SessionOption::kSource, SessionOption::kSource, {"cupti", "synthetic", "gpu", "CUPTI", ""}},
      {SessionOption::kNccl,
       SessionOption::kNccl,
       {"default", "channels", "coll", "proxy", "off", "on", "maybe", "ON", "1", ""}},
      {PassthroughOption(AgentVar::kPythonHook),
       PassthroughOption(AgentVar::kPythonHook),
       {"on", "off", "ON", "1", "", "no"}},
      {PassthroughOption(AgentVar::kStepSource),
       PassthroughOption(AgentVar::kStepSource),
       {"auto", "api", "pytorch", "jax", "xla", "nvtx", "nccl", "time", "torch", "PYTORCH", "JAX", ""}},
      {PassthroughOption(AgentVar::kCaptureSteps),
       PassthroughOption(AgentVar::kCaptureSteps),
       {"auto", "3", "1", "1000", "0", "1001", "2.5", "AUTO", "-3", ""}},
      // aon-run's --window is srun's --aon-flight (the table says why they differ).
      {SessionOption::kWindow,
       SessionOption::kFlight,
       {"1", "60", "86400", "2.5", "0", "86401", "10m", "abc", "-5", ""}},
  };
  for (const Case& c : cases) {
    for (const std::string& value : c.values) {
      const ParsedRun run = ParseAonRun({session::RunName(c.run) + "=" + value});
      const ParsedSrun srun = ParseSrun({{SessionOption::kProfile, "on"}, {c.srun, value}});
      EXPECT_EQ(run.status.ok(), srun.status.ok())
          << session::RunName(c.run) << "=" << value << " -> " << run.status.ToString() << "; "
          << session::SpankName(c.srun) << "=" << value << " -> " << srun.status.ToString();
      if (!run.status.ok()) {
        EXPECT_NE(run.status.message().find(session::RunName(c.run)), std::string::npos)
            << run.status.message();
      }
      if (!srun.status.ok()) {
        EXPECT_NE(srun.status.message().find(session::SpankName(c.srun) + "=" + value),
                  std::string::npos)
            << srun.status.message();
      }
    }
  }
}

TEST(OptionParity, TheSameOptionsGiveTheAgentTheSameEnvironment) {
  for (const char* nccl : {"default", "channels", "coll", "proxy", "off", "on"}) {
    const ParsedRun run =
        ParseAonRun({"--kinds=kernels,nvtx,nccl", "--memory-cap=128M", "--source=synthetic",
                     std::string("--nccl=") + nccl, "--mode=flight", "--window=30", "-v"});
    ASSERT_TRUE(run.status.ok()) << run.status.ToString();
    const ParsedSrun srun = ParseSrun({{SessionOption::kProfile, "on"},
                                       {SessionOption::kKinds, "kernels,nvtx,nccl"},
                                       {SessionOption::kMemoryCap, "128M"},
                                       {SessionOption::kSource, "synthetic"},
                                       {SessionOption::kNccl, nccl},
                                       {SessionOption::kFlight, "30"},
                                       {SessionOption::kVerbose, ""}});
    ASSERT_TRUE(srun.status.ok()) << srun.status.ToString();
    const std::vector<EnvVar> from_run = AonRunEnvironment(run.values);
    EXPECT_EQ(from_run, SrunEnvironment(srun)) << "--nccl " << nccl;
    const std::string canonical = std::string(nccl) == "on" ? "default" : nccl;
    auto env = AsMap(from_run);
    EXPECT_EQ(env["AON_NCCL"], canonical);
    EXPECT_EQ(env.count("NCCL_PROFILER_PLUGIN"), canonical == "off" ? 0u : 1u);
    EXPECT_EQ(env["AON_MODE"], "flight");
    EXPECT_EQ(env["AON_WINDOW"], "30");
    EXPECT_EQ(env["AON_VERBOSE"], "1");
    EXPECT_EQ(env["PYTHONPATH"], PythonHookDir(kAgent) + ":" + kJobPythonPath)
        << "AON's hook first, then the job's own path";
  }
}

// --python-hook off leaves the job's PYTHONPATH alone on both front ends.
TEST(OptionParity, PythonHookOffLeavesPythonPathAlone) {
  const ParsedRun run = ParseAonRun({"--python-hook=off"});
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  const ParsedSrun srun = ParseSrun(
      {{SessionOption::kProfile, "on"}, {PassthroughOption(AgentVar::kPythonHook), "off"}});
  ASSERT_TRUE(srun.status.ok()) << srun.status.ToString();
  // aon-run sets every variable it has a default for, srun only those chosen:
  // compare what this option decides.
  for (auto env : {AsMap(AonRunEnvironment(run.values)), AsMap(SrunEnvironment(srun))}) {
    EXPECT_EQ(env.count("PYTHONPATH"), 0u);
    EXPECT_EQ(env["AON_PYTHON_HOOK"], "off");
  }
}

// srun --aon=full / --aon=light are aon-run's --kinds all / --kinds kernels,nvtx.
TEST(OptionParity, SrunModesAreAonRunKinds) {
  for (const auto& [mode, kinds] : std::vector<std::pair<std::string, std::string>>{
           {"full", "all"}, {"light", "kernels,nvtx"}, {"on", "default"}}) {
    const ParsedRun run = ParseAonRun({"--kinds=" + kinds});
    ASSERT_TRUE(run.status.ok());
    const ParsedSrun srun = ParseSrun({{SessionOption::kProfile, mode}});
    ASSERT_TRUE(srun.status.ok());
    EXPECT_EQ(AsMap(AonRunEnvironment(run.values))["AON_KINDS"],
              AsMap(SrunEnvironment(srun))["AON_KINDS"])
        << "--aon=" << mode;
  }
}

// Without options aon-run spells out every default and srun --aon leaves the
// agent's defaults alone: the agent ends up configured the same.
TEST(OptionParity, DefaultsConfigureTheAgentAlike) {
  const ParsedRun run = ParseAonRun({});
  ASSERT_TRUE(run.status.ok()) << run.status.ToString();
  const ParsedSrun srun = ParseSrun({{SessionOption::kProfile, ""}});
  ASSERT_TRUE(srun.status.ok()) << srun.status.ToString();
  const auto from_run = AsMap(AonRunEnvironment(run.values));
  const auto from_srun = AsMap(SrunEnvironment(srun));
  auto run_config = LoadAgentConfig(Lookup(from_run));
  auto srun_config = LoadAgentConfig(Lookup(from_srun));
  ASSERT_TRUE(run_config.ok()) << run_config.status().ToString();
  ASSERT_TRUE(srun_config.ok()) << srun_config.status().ToString();
  EXPECT_TRUE(*run_config == *srun_config);
  for (const auto& [name, value] : from_srun) EXPECT_EQ(from_run.at(name), value) << name;
  for (const ConfigVariable& var : AgentConfigVariables()) {
    if (from_run.count(var.env) && !from_srun.count(var.env)) {
      EXPECT_EQ(from_run.at(var.env), var.default_value)
          << var.env << ": aon-run's default must be the agent's";
    }
  }
}

}  // namespace
}  // namespace aon
