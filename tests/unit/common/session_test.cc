// The session core shared by aon-run and the SPANK plugin (common/session):
// the agent variable table, AgentSettings -> environment (and back through the
// agent's own LoadAgentConfig), the front-end option table and its value
// checks, and where AON's files are found in install and build trees (real
// files in a temporary directory).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "aon/config/agent_config.h"
#include "aon/config/agent_env.h"
#include "aon/config/options.h"
#include "aon/config/tool_paths.h"

namespace aon {
namespace {

namespace fs = std::filesystem;
using session::CheckOptionValue;
using session::SessionOption;

std::map<std::string, std::string> AsMap(const std::vector<EnvVar>& env) {
  std::map<std::string, std::string> m;
  for (const EnvVar& v : env) EXPECT_TRUE(m.emplace(v.name, v.value).second) << v.name;
  return m;
}

EnvLookupFn Lookup(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

// ---- the agent variable table -----------------------------------------------

TEST(AgentVariables, TableIsIndexedByItsIdsAndSelfDescribing) {
  const auto& vars = AgentConfigVariables();
  for (size_t i = 0; i < vars.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(vars[i].id), i) << vars[i].env;
    EXPECT_EQ(&AgentConfigVariable(vars[i].id), &vars[i]);
    EXPECT_NE(vars[i].parse, nullptr) << vars[i].env;
    EXPECT_STRNE(ConfigTypeName(vars[i].type), "?") << vars[i].env;
    // Every documented default is accepted by the variable's own parser.
    EXPECT_TRUE(CheckAgentVariable(vars[i].id, vars[i].default_value).ok()) << vars[i].env;
  }
}

TEST(AgentVariables, CheckUsesTheAgentsParser) {
  EXPECT_TRUE(CheckAgentVariable(AgentVar::kMemoryCap, "1M").ok());
  Status small = CheckAgentVariable(AgentVar::kMemoryCap, "512K");
  EXPECT_EQ(small.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(small.message(), "AON_MEMORY_CAP: '512K' is below the 1M minimum");
  // Issue #18: 64G was taken, and the agent then had no ring: every record dropped.
  EXPECT_TRUE(CheckAgentVariable(AgentVar::kMemoryCap, "32G").ok());
  Status large = CheckAgentVariable(AgentVar::kMemoryCap, "64G");
  EXPECT_EQ(large.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(large.message(),
            "AON_MEMORY_CAP: '64G' is above the 32G maximum (the record ring, half the cap, holds "
            "at most 16G)");
  Status window = CheckAgentVariable(AgentVar::kWindow, "0.5");
  EXPECT_EQ(window.message(), "AON_WINDOW: '0.5' is not a number in [1, 86400]");
  for (std::string_view mode : kNcclModes) {
    EXPECT_TRUE(CheckAgentVariable(AgentVar::kNccl, mode).ok()) << mode;
  }
  EXPECT_FALSE(CheckAgentVariable(AgentVar::kNccl, "on").ok()) << "an alias of the front ends only";
}

// ---- AgentSettings -> environment -------------------------------------------------

TEST(AgentEnvironment, InjectionFirstThenTableOrderThenNcclPlugin) {
  AgentSettings s;
  ASSERT_TRUE(s.Set(AgentVar::kNccl, "coll").ok());
  ASSERT_TRUE(s.Set(AgentVar::kOutputDir, "/j").ok());
  ASSERT_TRUE(s.Set(AgentVar::kKinds, "kernels").ok());
  const std::vector<EnvVar> env = AgentEnvironment(s, "/lib/libaon_agent.so");
  const std::vector<EnvVar> want = {{"CUDA_INJECTION64_PATH", "/lib/libaon_agent.so"},
                                    {"NVTX_INJECTION64_PATH", "/lib/libaon_agent.so"},
                                    {"AON_OUTPUT_DIR", "/j"},
                                    {"AON_KINDS", "kernels"},
                                    {"AON_NCCL", "coll"},
                                    {"NCCL_PROFILER_PLUGIN", "/lib/libaon_agent.so"},
                                    {"PYTHONPATH", "/lib/aon-python"}};
  EXPECT_EQ(env, want);
}

TEST(AgentEnvironment, NcclOffLeavesTheJobsProfilerPluginAlone) {
  AgentSettings s;
  ASSERT_TRUE(s.Set(AgentVar::kNccl, "off").ok());
  auto env = AsMap(AgentEnvironment(s, "/a.so"));
  EXPECT_EQ(env.count("NCCL_PROFILER_PLUGIN"), 0u);
  EXPECT_EQ(env.at("AON_NCCL"), "off");
  // Unset: the agent's default (NCCL captured), so NCCL must load the agent.
  EXPECT_EQ(AsMap(AgentEnvironment(AgentSettings(), "/a.so")).at("NCCL_PROFILER_PLUGIN"), "/a.so");
}

TEST(AgentEnvironment, RefusesWhatTheAgentWouldRefuseAndKeepsTheOldValue) {
  AgentSettings s;
  ASSERT_TRUE(s.Set(AgentVar::kSource, "synthetic").ok());
  Status bad = s.Set(AgentVar::kSource, "nvml");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("AON_SOURCE"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("nvml"), std::string::npos) << bad.message();
  EXPECT_EQ(*s.Get(AgentVar::kSource), "synthetic");
  s.Clear(AgentVar::kSource);
  EXPECT_FALSE(s.Get(AgentVar::kSource).has_value());
}

TEST(AgentEnvironment, TheAgentReadsBackWhatWasSet) {
  AgentSettings s;
  const std::map<AgentVar, std::string> values = {
      {AgentVar::kOutputDir, "/scratch/job"},
      {AgentVar::kKinds, "kernels,nvtx"},
      {AgentVar::kMemoryCap, "128M"},
      {AgentVar::kSource, "synthetic"},
      {AgentVar::kVerbose, "2"},
      {AgentVar::kJobId, "42.3"},
      {AgentVar::kNccl, "proxy"},
      {AgentVar::kMode, "flight"},
      {AgentVar::kWindow, "30"},
      {AgentVar::kCollector, "/opt/aon/bin/aon-collector"},
  };
  for (const auto& [var, value] : values) ASSERT_TRUE(s.Set(var, value).ok());
  auto loaded = LoadAgentConfig(Lookup(AsMap(AgentEnvironment(s, "/a.so"))));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  AgentConfig want;  // the defaults, and then what was set
  want.output_dir = "/scratch/job";
  want.kinds = *ParseKinds("kernels,nvtx");
  want.memory_cap_bytes = 128ull << 20;
  want.source = GpuSource::kSynthetic;
  want.verbose = 2;
  want.job_id = "42.3";
  want.nccl = NcclMode::kProxy;
  want.mode = CaptureMode::kFlight;
  want.window_s = 30;
  want.collector = "/opt/aon/bin/aon-collector";
  EXPECT_TRUE(*loaded == want);
}

// ---- the front-end option table -------------------------------------------------------

TEST(FrontEndOptions, EveryOptionHasOneEntryAndEachSideSaysWhyItDiffers) {
  std::set<int> ids;
  std::set<std::string> run_names, spank_names;
  for (const session::FrontEndOption& o : session::FrontEndOptions()) {
    EXPECT_TRUE(ids.insert(static_cast<int>(o.id)).second) << "duplicate entry";
    EXPECT_NE(o.help, nullptr);
    EXPECT_EQ(o.run == nullptr, o.run_arg == session::OptionArg::kAbsent);
    EXPECT_EQ(o.spank == nullptr, o.spank_arg == session::OptionArg::kAbsent);
    if (o.run == nullptr || o.spank == nullptr || o.run_arg != o.spank_arg) {
      EXPECT_NE(o.differs, nullptr) << (o.run ? o.run : o.spank) << ": the reason is missing";
    }
    if (o.run_help != nullptr) {
      EXPECT_NE(o.differs, nullptr) << o.run;
    }
    if (o.run) {
      EXPECT_TRUE(run_names.insert(o.run).second) << o.run;
    }
    if (o.spank) {
      EXPECT_TRUE(spank_names.insert(o.spank).second) << o.spank;
      EXPECT_TRUE(std::string(o.spank).starts_with("aon")) << o.spank;
    }
  }
  // Every named option has its entry, and the others are exactly the agent variables
  // whose rows name front-end options, each passing its value to that variable.
  for (int named = 0; named < static_cast<int>(SessionOption::kNamedCount); ++named)
    EXPECT_EQ(ids.count(named), 1u) << "SessionOption " << named << " has no entry";
  size_t passthrough_rows = 0;
  for (const ConfigVariable& var : AgentConfigVariables()) {
    if (var.front_end.run == nullptr && var.front_end.spank == nullptr) continue;
    ++passthrough_rows;
    const session::FrontEndOption& o =
        session::FrontEndOptionOf(session::PassthroughOption(var.id));
    EXPECT_EQ(o.id, session::PassthroughOption(var.id)) << var.env;
    EXPECT_TRUE(o.passthrough) << var.env;
    EXPECT_EQ(o.var, var.id) << var.env;
  }
  EXPECT_EQ(ids.size(), static_cast<size_t>(SessionOption::kNamedCount) + passthrough_rows);
  EXPECT_EQ(session::RunName(SessionOption::kOutput), "--output");
  EXPECT_EQ(session::SpankName(SessionOption::kKinds), "--aon-kinds");
  EXPECT_EQ(session::RunName(SessionOption::kFlight), "");
}

// Every option's value is checked somewhere: as its passthrough variable, or
// by its own case. An option added without either fails here (the check then
// answers Internal, naming it), whatever value it is given.
TEST(FrontEndOptions, EveryOptionHasAValueCheck) {
  for (const session::FrontEndOption& o : session::FrontEndOptions()) {
    for (std::string_view value : {"", "1", "on", "x"}) {
      auto v = CheckOptionValue(o.id, value);
      EXPECT_TRUE(v.ok() || v.status().code() != StatusCode::kInternal)
          << (o.run ? o.run : o.spank) << " '" << value << "': " << v.status().ToString();
    }
  }
}

TEST(FrontEndOptions, NcclTakesTheFiveModesAndOnOffAliases) {
  for (std::string_view mode : kNcclModes) {
    auto v = CheckOptionValue(SessionOption::kNccl, mode);
    ASSERT_TRUE(v.ok()) << mode;
    EXPECT_EQ(*v, mode);
  }
  EXPECT_EQ(*CheckOptionValue(SessionOption::kNccl, "on"), "default");
  EXPECT_EQ(*CheckOptionValue(SessionOption::kNccl, "off"), "off");
  auto bad = CheckOptionValue(SessionOption::kNccl, "maybe");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "unknown mode 'maybe' (default, channels, coll, proxy or off)");
}

TEST(FrontEndOptions, MessagesSpeakOfTheValueNotTheVariable) {
  const std::vector<std::pair<SessionOption, std::string>> bad = {
      {SessionOption::kKinds, "kernels,bogus"}, {SessionOption::kKinds, ""},
      {SessionOption::kMemoryCap, "12Q"},       {SessionOption::kMemoryCap, "4K"},
      {SessionOption::kMemoryCap, "64G"},       {SessionOption::kSource, "gpu"},
      {SessionOption::kMode, "fast"},           {SessionOption::kWindow, "0"},
      {SessionOption::kFlight, "10m"},          {SessionOption::kMerge, "maybe"},
      {SessionOption::kProfile, "turbo"},       {SessionOption::kMergeProcs, "0"},
      {SessionOption::kVerbose, "-1"},
  };
  for (const auto& [option, value] : bad) {
    auto v = CheckOptionValue(option, value);
    ASSERT_FALSE(v.ok()) << session::RunName(option) << session::SpankName(option) << " " << value;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(v.status().message().find("AON_"), std::string::npos) << v.status().message();
  }
  EXPECT_EQ(*CheckOptionValue(SessionOption::kMerge, "yes"), "on");
  EXPECT_EQ(*CheckOptionValue(SessionOption::kMerge, "0"), "off");
}

TEST(FrontEndOptions, FlightSetsModeAndWindow) {
  AgentSettings s;
  ASSERT_TRUE(session::ApplyOption(s, SessionOption::kFlight, "120").ok());
  EXPECT_EQ(*s.Get(AgentVar::kMode), "flight");
  EXPECT_EQ(*s.Get(AgentVar::kWindow), "120");
  ASSERT_TRUE(session::ApplyOption(s, SessionOption::kNccl, "on").ok());
  EXPECT_EQ(*s.Get(AgentVar::kNccl), "default");
  EXPECT_FALSE(session::ApplyOption(s, SessionOption::kNccl, "maybe").ok());
  EXPECT_EQ(*s.Get(AgentVar::kNccl), "default");
  EXPECT_EQ(session::ApplyOption(s, SessionOption::kMerge, "on").code(), StatusCode::kInternal);
}

// ---- where AON's files are --------------------------------------------------------------

class ToolPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "aon-tool-paths-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = fs::canonical(pattern).string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Make(const std::string& relative, bool executable) {
    const fs::path p = fs::path(dir_) / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "x";
    fs::permissions(
        p, executable ? fs::perms::owner_all : fs::perms::owner_read | fs::perms::owner_write);
    return p.string();
  }
  // The programs and the agent of one tree rooted at `root`.
  void Tree(const std::string& root) {
    for (Tool t : {Tool::kMerge, Tool::kReport, Tool::kCollector})
      Make(root + "/bin/" + ToolFileName(t), true);
    Make(root + "/lib/libaon_agent.so", false);
  }
  std::string dir_;
};

TEST_F(ToolPathsTest, InstallTreeFromEachOrigin) {
  Tree("prefix");
  const std::string prefix = dir_ + "/prefix";
  // aon-run in <prefix>/bin.
  auto agent = FindTool(ToolOrigin::kProgram, prefix + "/bin", Tool::kAgent);
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  EXPECT_EQ(*agent, prefix + "/lib/libaon_agent.so");
  EXPECT_EQ(*FindTool(ToolOrigin::kProgram, prefix + "/bin", Tool::kMerge),
            prefix + "/bin/aon-merge");
  // The SPANK plugin in <prefix>/lib/aon and <prefix>/lib/<multiarch>/aon.
  for (const std::string& plugin_dir :
       {prefix + "/lib/aon", prefix + "/lib/x86_64-linux-gnu/aon"}) {
    fs::create_directories(plugin_dir);
    auto bindir = FindBinDir(ToolOrigin::kSpankPlugin, plugin_dir);
    ASSERT_TRUE(bindir.ok()) << plugin_dir << ": " << bindir.status().ToString();
    EXPECT_EQ(*bindir, prefix + "/bin");
  }
  EXPECT_EQ(*FindTool(ToolOrigin::kSpankPlugin, prefix + "/lib/aon", Tool::kAgent),
            prefix + "/lib/libaon_agent.so");
  // The agent in <prefix>/lib finds aon-collector.
  EXPECT_EQ(*FindTool(ToolOrigin::kAgentLibrary, prefix + "/lib", Tool::kCollector),
            prefix + "/bin/aon-collector");
}

TEST_F(ToolPathsTest, BuildTreeFromThePlugin) {
  Tree("build");
  const std::string build = dir_ + "/build";
  EXPECT_EQ(*FindTool(ToolOrigin::kSpankPlugin, build + "/lib", Tool::kAgent),
            build + "/lib/libaon_agent.so");
  EXPECT_EQ(*FindBinDir(ToolOrigin::kSpankPlugin, build + "/lib"), build + "/bin");
  EXPECT_EQ(ToolPath(build + "/bin", Tool::kReport), build + "/bin/aon-report");
}

TEST_F(ToolPathsTest, MissingOrUnusableFilesAreNamed) {
  Make("p/lib/libaon_agent.so", false);
  Make("p/bin/aon-merge", false);  // not executable
  auto merge = FindTool(ToolOrigin::kProgram, dir_ + "/p/bin", Tool::kMerge);
  ASSERT_FALSE(merge.ok());
  EXPECT_NE(merge.status().message().find(dir_ + "/p/bin/aon-merge is not executable"),
            std::string::npos)
      << merge.status().message();
  auto none = FindTool(ToolOrigin::kSpankPlugin, dir_ + "/nowhere", Tool::kAgent);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  for (const std::string& c :
       ToolCandidates(ToolOrigin::kSpankPlugin, dir_ + "/nowhere", Tool::kAgent))
    EXPECT_NE(none.status().message().find(c), std::string::npos) << none.status().message();
  fs::create_directories(dir_ + "/d/lib/libaon_agent.so");  // a directory
  EXPECT_FALSE(UsableToolFile(dir_ + "/d/lib/libaon_agent.so", Tool::kAgent).ok());
}

TEST(ToolPaths, DirectoryOf) {
  EXPECT_EQ(DirectoryOf("/opt/aon/bin/aon-run"), "/opt/aon/bin");
  EXPECT_EQ(DirectoryOf("/aon-run"), "/");
  EXPECT_EQ(DirectoryOf("aon-run"), ".");
}

}  // namespace
}  // namespace aon
