// The plugin's settings without Slurm: plugstack.conf arguments (fail closed on
// unknown keys), option values, site policy, job directory templates.
#include "settings.h"

#include <gtest/gtest.h>

namespace aon::spank {
namespace {

TEST(SiteArgs, DefaultsAreOptInWithEveryMode) {
  auto c = ParseSiteArgs({});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->enabled_by_default);
  EXPECT_FALSE(c->disabled);
  EXPECT_TRUE(c->ModeAllowed(Mode::kFull));
}

TEST(SiteArgs, UnknownKeysFailAndAreNamed) {
  auto c = ParseSiteArgs({"default=on", "outptu_root=/x", "colour=red"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'outptu_root', 'colour'"), std::string::npos)
      << c.status().message();
}

TEST(SiteArgs, PolicyKeys) {
  auto c = ParseSiteArgs({"default=on", "output_root=/scratch/%u/aon/%j", "modes=on,light",
                          "max_memory_cap=256M", "memory_cap=32M", "nccl=off", "disable",
                          "strict=1", "agent=/opt/aon/lib/libaon_agent.so", "bindir=/opt/aon/bin"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->enabled_by_default);
  EXPECT_TRUE(c->disabled);
  EXPECT_TRUE(c->strict);
  EXPECT_EQ(c->nccl, "off");
  EXPECT_FALSE(c->ModeAllowed(Mode::kFull));
  EXPECT_TRUE(c->ModeAllowed(Mode::kOff));
  EXPECT_EQ(c->max_memory_cap, 256ull << 20);
  EXPECT_FALSE(ParseSiteArgs({"agent=relative.so"}).ok());
  EXPECT_FALSE(ParseSiteArgs({"output_root=/x/%q"}).ok());
  EXPECT_FALSE(ParseSiteArgs({"modes=on,turbo"}).ok());
  // A default memory cap the agent would refuse fails closed, naming the range.
  auto huge = ParseSiteArgs({"memory_cap=64G"});
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("1M to 32G"), std::string::npos)
      << huge.status().message();
  EXPECT_FALSE(ParseSiteArgs({"memory_cap=512K"}).ok());
}

TEST(Options, ValuesAreCheckedAndIdempotent) {
  UserOptions o;
  EXPECT_TRUE(SetModeOption(o, nullptr).ok());
  EXPECT_EQ(*o.mode, Mode::kOn);
  EXPECT_TRUE(SetModeOption(o, "(null)").ok());  // sbatch --aon as seen by the script's srun
  EXPECT_TRUE(SetModeOption(o, "light").ok());
  EXPECT_TRUE(SetModeOption(o, "light").ok());
  EXPECT_EQ(*o.mode, Mode::kLight);
  Status bad = SetModeOption(o, "fast");
  EXPECT_NE(bad.message().find("--aon=fast"), std::string::npos) << bad.message();
  EXPECT_FALSE(SetKindsOption(o, "bogus").ok());
  EXPECT_TRUE(SetKindsOption(o, "kernels,nvtx").ok());
  EXPECT_FALSE(SetNcclOption(o, "maybe").ok());
  EXPECT_FALSE(SetMemoryCapOption(o, "12X").ok());
  EXPECT_FALSE(SetMemoryCapOption(o, "4K").ok());
  EXPECT_FALSE(SetMemoryCapOption(o, "64G").ok());
  EXPECT_TRUE(SetMemoryCapOption(o, "128M").ok());
}

TEST(StepPlan, SitePolicyWins) {
  SiteConfig site = *ParseSiteArgs({"modes=on", "max_memory_cap=64M", "nccl=off"});
  UserOptions o;
  ASSERT_TRUE(SetModeOption(o, "full").ok());
  EXPECT_FALSE(MakeStepPlan(site, o).ok());
  ASSERT_TRUE(SetModeOption(o, "on").ok());
  ASSERT_TRUE(SetMemoryCapOption(o, "128M").ok());
  auto plan = MakeStepPlan(site, o);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("--aon-memory-cap=128M"), std::string::npos);
  o.memory_cap.reset();
  plan = MakeStepPlan(site, o);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->profile);
  EXPECT_EQ(plan->nccl, "off");
  EXPECT_EQ(plan->kinds, "default");
  // Opt-in by default, on by default when the site says so, off on request.
  EXPECT_FALSE(MakeStepPlan(SiteConfig{}, UserOptions{})->profile);
  SiteConfig on = *ParseSiteArgs({"default=on"});
  EXPECT_TRUE(MakeStepPlan(on, UserOptions{})->profile);
  UserOptions off;
  ASSERT_TRUE(SetModeOption(off, "off").ok());
  EXPECT_FALSE(MakeStepPlan(on, off)->profile);
  EXPECT_FALSE(MakeStepPlan(*ParseSiteArgs({"disable"}), o)->profile);
}

// srun passes its environment to the tasks: a bad AON_* the step would pass on
// as it is gets refused before the step (naming srun's option), a good one
// passes, and one the step sets itself is not the user's to check.
TEST(StepPlan, ABadInheritedAgentVariableIsRefused) {
  UserOptions o;
  ASSERT_TRUE(SetModeOption(o, "on").ok());
  const StepPlan plan = *MakeStepPlan(*ParseSiteArgs({"modes=on"}), o);
  auto env = [](const char* period, const char* kinds) {
    return [=](const char* name) -> const char* {
      if (std::string_view(name) == "AON_CAPTURE_PERIOD") return period;
      if (std::string_view(name) == "AON_KINDS") return kinds;
      return nullptr;
    };
  };
  const Status bad = CheckStepInheritance(plan, env("3", nullptr));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("AON_CAPTURE_PERIOD: '3'"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("unset it or pass --aon-capture-period"), std::string::npos)
      << bad.message();
  EXPECT_TRUE(CheckStepInheritance(plan, env("64", nullptr)).ok());
  // AON_KINDS is the step's own (plan.kinds): replaced, whatever it was.
  EXPECT_TRUE(CheckStepInheritance(plan, env(nullptr, "nonsense")).ok());
}

// plugstack.conf counters= is the default of --aon-counters and its ceiling
// (off < gpm < auto): more is refused with the key named, less is allowed.
TEST(StepPlan, SiteCountersAreTheDefaultAndTheCeiling) {
  EXPECT_FALSE(ParseSiteArgs({"counters=some"}).ok());
  SiteConfig gpm = *ParseSiteArgs({"counters=gpm"});
  auto counters = [](const StepPlan& p) {
    auto it = p.passthrough.find(session::PassthroughOption(AgentVar::kCounters));
    return it == p.passthrough.end() ? std::string("(agent default)") : it->second;
  };
  UserOptions o;
  ASSERT_TRUE(SetModeOption(o, "on").ok());
  EXPECT_EQ(counters(*MakeStepPlan(gpm, o)), "gpm");
  ASSERT_TRUE(SetUserOption(o, session::PassthroughOption(AgentVar::kCounters), "auto").ok());
  auto refused = MakeStepPlan(gpm, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("plugstack.conf counters=gpm"), std::string::npos)
      << refused.status().message();
  ASSERT_TRUE(SetUserOption(o, session::PassthroughOption(AgentVar::kCounters), "off").ok());
  EXPECT_EQ(counters(*MakeStepPlan(gpm, o)), "off");
  SiteConfig none = *ParseSiteArgs({"counters=off"});
  ASSERT_TRUE(SetUserOption(o, session::PassthroughOption(AgentVar::kCounters), "gpm").ok());
  EXPECT_FALSE(MakeStepPlan(none, o).ok());
  // No key: the user's choice, or the agent's default.
  EXPECT_EQ(counters(*MakeStepPlan(SiteConfig{}, o)), "gpm");
  EXPECT_FALSE(SetUserOption(o, session::PassthroughOption(AgentVar::kCounters), "maybe").ok());
}

TEST(JobDirectory, TemplatesAndRelativePaths) {
  StepPlan p;
  EXPECT_EQ(*JobDirectory(p, "/home/a/run", "alice", 1000, 42, 3), "/home/a/run/aon-42.3");
  p.output_root = "/scratch/%u/aon/%j/";
  EXPECT_EQ(*JobDirectory(p, "/home/a", "alice", 1000, 42, 0), "/scratch/alice/aon/42/aon-42.0");
  p.output_root = "traces";
  EXPECT_EQ(*JobDirectory(p, "/home/a", "alice", 1000, 42, 0), "/home/a/traces/aon-42.0");
  EXPECT_FALSE(JobDirectory(p, "", "alice", 1000, 42, 0).ok());
  p.output_root = "/scratch/../etc";
  EXPECT_FALSE(JobDirectory(p, "/", "alice", 1000, 42, 0).ok());
}

}  // namespace
TEST(SpankSettings, FlightOptionTakesSecondsAndReachesThePlan) {
  UserOptions o;
  EXPECT_FALSE(SetFlightOption(o, "").ok());
  EXPECT_FALSE(SetFlightOption(o, "0").ok());
  EXPECT_FALSE(SetFlightOption(o, "10m").ok());
  Status bad = SetFlightOption(o, "abc");
  EXPECT_NE(bad.message().find("--aon-flight=abc"), std::string::npos) << bad.message();
  ASSERT_TRUE(SetFlightOption(o, "120").ok());
  o.mode = Mode::kOn;
  SiteConfig site;
  auto plan = MakeStepPlan(site, o);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->flight_window, "120");
  UserOptions full;
  full.mode = Mode::kOn;
  EXPECT_EQ(MakeStepPlan(site, full)->flight_window, "");
}

}  // namespace aon::spank
