// ParseKinds, ParseSize and LoadAgentConfig: strict parsing, errors that name the
// variable and the value.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "aon/config/agent_config.h"

namespace aon {
namespace {

bool Enabled(const std::array<bool, kRecordKindCount>& kinds, RecordKind k) {
  return kinds[static_cast<size_t>(k)];
}

EnvLookupFn Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(CommonConfig, ParseKindsAllAndDefault) {
  for (const char* text : {"all", "default", ""}) {
    auto k = ParseKinds(text);
    ASSERT_TRUE(k.ok()) << text;
    for (bool b : *k) EXPECT_TRUE(b) << text;
  }
}

TEST(CommonConfig, ParseKindsList) {
  auto k = ParseKinds("memcpy,nvtx");
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_TRUE(Enabled(*k, RecordKind::kMemcpy));
  EXPECT_TRUE(Enabled(*k, RecordKind::kNvtx));
  EXPECT_FALSE(Enabled(*k, RecordKind::kKernel));
  EXPECT_FALSE(Enabled(*k, RecordKind::kApi));
  EXPECT_FALSE(Enabled(*k, RecordKind::kExternalCorrelation));
}

TEST(CommonConfig, ParseKindsAliasesAndCorrelation) {
  auto k = ParseKinds("kernel");
  ASSERT_TRUE(k.ok());
  EXPECT_TRUE(Enabled(*k, RecordKind::kKernel));
  EXPECT_TRUE(Enabled(*k, RecordKind::kExternalCorrelation)) << "correlation rides with kernels";
  for (const char* alias : {"runtime", "driver", "api"}) {
    auto a = ParseKinds(alias);
    ASSERT_TRUE(a.ok()) << alias;
    EXPECT_TRUE(Enabled(*a, RecordKind::kApi)) << alias;
    EXPECT_TRUE(Enabled(*a, RecordKind::kExternalCorrelation)) << alias;
    EXPECT_FALSE(Enabled(*a, RecordKind::kKernel)) << alias;
  }
}

// Ops are tied to the GPU work they launched by external correlation rows: the
// rows ride with ops whenever some GPU work is recorded, and not without any.
TEST(CommonConfig, ParseKindsOpsBringCorrelationWithGpuWork) {
  for (const char* text : {"ops,memcpy", "memset,ops", "ops,kernels", "ops,api"}) {
    auto k = ParseKinds(text);
    ASSERT_TRUE(k.ok()) << text;
    EXPECT_TRUE(Enabled(*k, RecordKind::kOps)) << text;
    EXPECT_TRUE(Enabled(*k, RecordKind::kExternalCorrelation)) << text;
  }
  auto alone = ParseKinds("ops,nvtx");
  ASSERT_TRUE(alone.ok());
  EXPECT_TRUE(Enabled(*alone, RecordKind::kOps));
  EXPECT_FALSE(Enabled(*alone, RecordKind::kExternalCorrelation));
  auto without = ParseKinds("memcpy");
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(Enabled(*without, RecordKind::kOps));
  EXPECT_FALSE(Enabled(*without, RecordKind::kExternalCorrelation));
}

TEST(CommonConfig, ParseKindsErrorsNameTheItem) {
  for (const char* text : {"kernels,bogus", "kernels,", ",kernels", "KERNELS", "kernels;memcpy"}) {
    auto k = ParseKinds(text);
    ASSERT_FALSE(k.ok()) << text;
    EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(k.status().message().find("AON_KINDS"), std::string::npos) << k.status().message();
  }
  auto k = ParseKinds("kernels,bogus");
  EXPECT_NE(k.status().message().find("'bogus'"), std::string::npos) << k.status().message();
}

TEST(CommonConfig, ParseSizeUnits) {
  const std::pair<const char*, uint64_t> cases[] = {
      {"0", 0},
      {"4096", 4096},
      {"4096B", 4096},
      {"512K", 512 << 10},
      {"512k", 512 << 10},
      {"512KiB", 512 << 10},
      {"64M", 64ull << 20},
      {"64MiB", 64ull << 20},
      {"1G", 1ull << 30},
      {"16GiB", 16ull << 30},
      {"18446744073709551615", UINT64_MAX},
  };
  for (const auto& [text, bytes] : cases) {
    auto v = ParseSize(text);
    ASSERT_TRUE(v.ok()) << text << ": " << v.status().ToString();
    EXPECT_EQ(*v, bytes) << text;
  }
}

TEST(CommonConfig, ParseSizeErrors) {
  for (const char* text : {"", "M", "-1", "12X", "1.5G", " 1M", "1M ", "1T"}) {
    auto v = ParseSize(text);
    ASSERT_FALSE(v.ok()) << "'" << text << "'";
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(CommonConfig, ParseSizeOverflow) {
  // Each of these exceeds 2^64 - 1, some only after a multiplication that wraps
  // around to a value larger than before.
  for (const char* text : {"18446744073709551616", "27670116110564327424", "99999999999999999999",
                           "17179869184G", "100000000000000000000000"}) {
    auto v = ParseSize(text);
    ASSERT_FALSE(v.ok()) << text << " parsed as " << (v.ok() ? *v : 0);
    EXPECT_NE(v.status().message().find("overflows"), std::string::npos) << v.status().message();
  }
}

TEST(CommonConfig, LoadAgentConfigDefaults) {
  auto c = LoadAgentConfig(Env({}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->output_dir, "");
  EXPECT_EQ(c->memory_cap_bytes, 64ull << 20);
  EXPECT_EQ(ChoiceName(c->source), "cupti");
  EXPECT_EQ(c->verbose, 0);
  EXPECT_EQ(c->job_id, "");
  for (bool b : c->kinds) EXPECT_TRUE(b);
  EXPECT_EQ(c->KindsString(),
            "kernels,memcpy,memset,sync,api,nvtx,nccl,external_correlation,steps,counters,ops,"
            "graph_ops,host_samples");
  EXPECT_EQ(c->host_sample_hz, 1000);
}

TEST(CommonConfig, LoadAgentConfigValues) {
  auto c = LoadAgentConfig(Env({{"AON_OUTPUT_DIR", "/scratch/job"},
                                {"AON_KINDS", "kernels,nvtx"},
                                {"AON_MEMORY_CAP", "128M"},
                                {"AON_SOURCE", "synthetic"},
                                {"AON_VERBOSE", "1"},
                                {"AON_JOB_ID", "abc"}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->output_dir, "/scratch/job");
  EXPECT_EQ(c->memory_cap_bytes, 128ull << 20);
  EXPECT_EQ(ChoiceName(c->source), "synthetic");
  EXPECT_EQ(c->verbose, 1);
  EXPECT_EQ(c->job_id, "abc");
  EXPECT_TRUE(c->enabled(RecordKind::kKernel));
  EXPECT_TRUE(c->enabled(RecordKind::kNvtx));
  EXPECT_FALSE(c->enabled(RecordKind::kMemcpy));
  EXPECT_EQ(c->KindsString(), "kernels,nvtx,external_correlation,steps");  // steps: always
}

TEST(CommonConfig, LoadAgentConfigErrorsNameTheVariable) {
  const std::pair<std::map<std::string, std::string>, const char*> cases[] = {
      {{{"AON_KINDS", "gpu"}}, "AON_KINDS"},
      {{{"AON_MEMORY_CAP", "lots"}}, "AON_MEMORY_CAP"},
      {{{"AON_MEMORY_CAP", "512K"}}, "AON_MEMORY_CAP"},  // below the 1M minimum
      {{{"AON_MEMORY_CAP", "64G"}}, "AON_MEMORY_CAP"},   // the ring cannot be 32G
      {{{"AON_VERBOSE", "-1"}}, "AON_VERBOSE"},
      {{{"AON_VERBOSE", "loud"}}, "AON_VERBOSE"},
      {{{"AON_SOURCE", "nvml"}}, "AON_SOURCE"},
      {{{"AON_LAUNCHER_PARENT_PID", "12abc"}}, "AON_LAUNCHER_PARENT_PID"},  // atol took 12
      {{{"AON_LAUNCHER_PARENT_PID", "-5"}}, "AON_LAUNCHER_PARENT_PID"},
      {{{"AON_LAUNCHER_PARENT_PID", "1.5"}}, "AON_LAUNCHER_PARENT_PID"},
      {{{"AON_OVERHEAD_BUDGET", "-1"}}, "AON_OVERHEAD_BUDGET"},
      {{{"AON_CAPTURE_PERIOD", "48"}}, "AON_CAPTURE_PERIOD"},  // not a power of two
      {{{"AON_CAPTURE_STEPS", "0"}}, "AON_CAPTURE_STEPS"},     // 'auto' is the automatic width
      {{{"AON_CAPTURE_STEPS", "2.5"}}, "AON_CAPTURE_STEPS"},
      {{{"AON_CAPTURE_STEPS", "Auto"}}, "AON_CAPTURE_STEPS"},
      {{{"AON_STEP_SOURCE", "sundial"}}, "AON_STEP_SOURCE"},
  };
  for (const auto& [vars, name] : cases) {
    auto c = LoadAgentConfig(Env(vars));
    ASSERT_FALSE(c.ok()) << name;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(name), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find(vars.begin()->second), std::string::npos)
        << "the message names the value: " << c.status().message();
  }
}

TEST(CommonConfig, VariablesTableIsComplete) {
  std::map<std::string, std::string> seen;
  for (const ConfigVariable& v : AgentConfigVariables()) {
    ASSERT_NE(v.env, nullptr);
    EXPECT_TRUE(std::string(v.env).starts_with("AON_")) << v.env;
    EXPECT_NE(std::string(v.description), "") << v.env;
    EXPECT_TRUE(seen.emplace(v.env, v.default_value).second) << "duplicate " << v.env;
  }
  for (const char* name : {"AON_OUTPUT_DIR", "AON_KINDS", "AON_MEMORY_CAP", "AON_SOURCE",
                           "AON_VERBOSE", "AON_JOB_ID"}) {
    EXPECT_EQ(seen.count(name), 1u) << name;
  }
  // The documented defaults are what LoadAgentConfig applies.
  auto defaults = LoadAgentConfig(Env(seen));
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->memory_cap_bytes, 64ull << 20);
  EXPECT_EQ(ChoiceName(defaults->source), "cupti");
}

// A default is written once, in its row: AgentConfig() applies each row's default through
// the row's own parser, so every default must parse, and an unset variable, an empty one
// (where empty is not a value) and its documented default all give the same settings.
TEST(CommonConfig, EveryDefaultIsWhatItsParserMakesOfIt) {
  const AgentConfig defaults;
  for (const ConfigVariable& v : AgentConfigVariables()) {
    if (v.default_value[0] == '\0') continue;
    AgentConfig parsed;
    EXPECT_TRUE(v.parse(v.default_value, &parsed).ok()) << v.env << "='" << v.default_value << "'";
    EXPECT_TRUE(parsed == defaults) << v.env << ": its default is not what AgentConfig() holds";
  }
  auto unset = LoadAgentConfig(Env({}));
  ASSERT_TRUE(unset.ok()) << unset.status().ToString();
  EXPECT_TRUE(*unset == defaults);
  // Spot checks against the documented values (docs and help say these).
  EXPECT_EQ(defaults.memory_cap_bytes, 64ull << 20);
  EXPECT_DOUBLE_EQ(defaults.overhead_budget, 0.01);
  EXPECT_EQ(defaults.capture_steps, 0) << "auto";
  EXPECT_EQ(ChoiceName(defaults.mode), "budgeted");
  EXPECT_TRUE(defaults.python_hook);
  EXPECT_TRUE(defaults.kinds == *ParseKinds("default"));
}

}  // namespace
}  // namespace aon
