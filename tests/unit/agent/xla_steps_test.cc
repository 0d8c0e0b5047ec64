// The XLA step module (rank_agent/src/xla_steps.h): which executions of which
// XLA module begin steps, on simulated execution sequences.
#include "xla_steps.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace aon::agent {
namespace {

TEST(XlaModuleName, ReadsTheModuleOfAnExecutionRangeOnly) {
  EXPECT_EQ(XlaModuleName("XlaModule:#hlo_module=jit_step,program_id=7#"), "jit_step");
  EXPECT_EQ(XlaModuleName("XlaModule:#program_id=7,hlo_module=jit_train#"), "jit_train");
  EXPECT_FALSE(XlaModuleName("XlaModule:#hlo_module=gemm_fusion_dot.2#")) << "the autotuner's";
  EXPECT_FALSE(XlaModuleName("Thunk:#name=jit(step)/dot,hlo_op=dot.1#"));
  EXPECT_FALSE(XlaModuleName("XlaModule:#program_id=7#"));
  EXPECT_FALSE(XlaModuleName("XlaModule:#hlo_module=,program_id=7#"));
  EXPECT_FALSE(XlaModuleName("step 3"));
  EXPECT_FALSE(XlaModuleName(""));
}

// One iteration: the modules executed in it, with their host time each.
struct Execution {
  std::string module;
  uint64_t host_ns;
};

// Runs `iterations` of `body`; returns, per iteration, how many steps began.
std::vector<int> RunIterations(XlaStepModule& x, const std::vector<Execution>& body, int iterations) {
  std::vector<int> steps;
  for (int i = 0; i < iterations; ++i) {
    int n = 0;
    for (const Execution& e : body) {
      n += x.Began(e.module) ? 1 : 0;
      x.Ended(e.module, e.host_ns);
    }
    steps.push_back(n);
  }
  return steps;
}

TEST(XlaStepModule, TheStepFunctionIsChosenOverHelpersRunMoreOftenOrBriefly) {
  XlaStepModule x;
  // A jitted helper three times per iteration (shorter each), the step once,
  // an eval-metrics function once but brief.
  const std::vector<Execution> body = {{"jit_normalize", 50'000},
                                       {"jit_normalize", 50'000},
                                       {"jit_normalize", 50'000},
                                       {"jit_train_step", 900'000},
                                       {"jit_metrics", 30'000}};
  std::vector<int> steps = RunIterations(x, body, 40);
  EXPECT_EQ(x.chosen(), "jit_train_step");
  // Undecided until a module ran kDecideAt times (the helper, early in the
  // 16th iteration); then exactly one step per iteration.
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(steps[i], 0) << i;
  for (size_t i = 15; i < steps.size(); ++i) EXPECT_EQ(steps[i], 1) << i;
}

TEST(XlaStepModule, AHelperWithMoreHostTimeInAllIsNotTheStepWhenEachRunIsLighter) {
  XlaStepModule x;
  // The helper runs 12x per iteration (the most the rule allows for): more
  // executions and more host time in all than the step, but each of its
  // executions is lighter.
  std::vector<Execution> body(12, Execution{"jit_inner", 60'000});
  body.push_back({"jit_step", 200'000});
  std::vector<int> steps = RunIterations(x, body, 12);
  EXPECT_EQ(x.chosen(), "jit_step");
  for (size_t i = 4; i < steps.size(); ++i) EXPECT_EQ(steps[i], 1) << i;
}

TEST(XlaStepModule, AOneOffHeavyModuleIsNeverTheStep) {
  XlaStepModule x;
  x.Began("jit_init");
  x.Ended("jit_init", 50'000'000);  // initialization: heavy, run once
  x.Began("jit_init");
  x.Ended("jit_init", 50'000'000);
  RunIterations(x, {{"jit_step", 1'000'000}}, 60);
  EXPECT_EQ(x.chosen(), "jit_step");
}

TEST(XlaStepModule, ConcurrentExecutionsOfTheStepAreOneStep) {
  XlaStepModule x;
  for (uint64_t i = 0; i < XlaStepModule::kDecideAt; ++i) {
    x.Began("jit_step");
    x.Ended("jit_step", 1000);
  }
  ASSERT_EQ(x.chosen(), "jit_step");
  // Two local GPUs: the same step dispatched on two threads at once.
  EXPECT_TRUE(x.Began("jit_step"));
  EXPECT_FALSE(x.Began("jit_step"));
  x.Ended("jit_step", 1000);
  x.Ended("jit_step", 1000);
  EXPECT_TRUE(x.Began("jit_step"));
  x.Ended("jit_step", 1000);
}

TEST(XlaStepModule, ARecompiledStepKeepsMarkingStepsAndOtherModulesNever) {
  XlaStepModule x;
  for (uint64_t i = 0; i <= XlaStepModule::kDecideAt; ++i) {
    x.Began("jit_step");
    x.Ended("jit_step", 1000);
  }
  // program_id changes with a recompilation; the module name does not.
  EXPECT_TRUE(x.Began(*XlaModuleName("XlaModule:#hlo_module=jit_step,program_id=99#")));
  x.Ended("jit_step", 1000);
  EXPECT_FALSE(x.Began("jit_other"));
  x.Ended("jit_other", 10'000'000);
  EXPECT_EQ(x.chosen(), "jit_step");
}

}  // namespace
}  // namespace aon::agent
