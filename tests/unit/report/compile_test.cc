// Compilation (report/src/analyses/compile.cc, report/src/findings/rules/compilation.cc): the host
// compiling is start-up or recompilation time with its own finding, never a
// launch-bound or host-work gap, nor a phase of the program.
#include <gtest/gtest.h>

#include <string>

#include "aon/report/report.h"
#include "timeline_builder.h"

namespace aon::report {
namespace {

using testing::kMs;
using testing::kUs;
using testing::TempDir;
using testing::TimelineBuilder;

const Finding* FindingOf(const Report& r, const std::string& kind) {
  for (const Finding& f : r.findings)
    if (f.kind == kind) return &f;
  return nullptr;
}

// A jitted step called with a new shape every step (JAX): each of 10 steps
// compiles module jit_step for 100 ms on two threads at once (XLA's compile and
// a pass inside it), then runs 2 ms of kernels. The GPU idles while the host
// compiles: that is the compilation finding's, with 9 recompilations, not
// host work nor launch overhead.
TEST(Compilation, RecompilingEveryStepIsCompilationNotHostWork) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  constexpr uint64_t kStep = 110 * kMs;
  for (uint64_t s = 0; s < 10; ++s) {
    const uint64_t at = kMs + s * kStep;
    b.Step(0, s, at, at + kStep, kStepCaptured, StepSource::kApi);
    b.Nvtx(0, "XlaCompile:#module=jit_step,program_id=" + std::to_string(40 + s) + "#", at,
           at + 100 * kMs, 2, 0, "TSL");
    b.Nvtx(0, "XlaPass:#name=fusion,module=jit_step#", at + 10 * kMs, at + 90 * kMs, 3, 0, "TSL");
    // Triton's autotuning compiles kernels as modules of their own inside it.
    b.Nvtx(0, "XlaEmitGpuAsm:#module=LLVMDialectModule#", at + 20 * kMs, at + 30 * kMs, 4, 0,
           "TSL");
    b.Nvtx(0, "XlaEmitGpuAsm:#module=LLVMDialectModule#", at + 40 * kMs, at + 50 * kMs, 4, 0,
           "TSL");
    b.Nvtx(0, "XlaModule:#hlo_module=jit_step#", at + 100 * kMs, at + 103 * kMs, 1, 0, "TSL");
    for (uint64_t k = 0; k < 4; ++k) {
      const uint64_t start = at + 100 * kMs + k * 500 * kUs;
      b.Kernel(0, "gemm_fusion", start, start + 450 * kUs, 1);
    }
  }
  const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
  const CompileAnalysis c = AnalyzeCompilation(t);
  ASSERT_EQ(c.ranks.size(), 1u);
  EXPECT_EQ(c.ranks[0].ns, 1000 * kMs);
  EXPECT_EQ(c.ranks[0].compilations, 10u);
  EXPECT_EQ(c.ranks[0].recompilations, 9u);
  EXPECT_EQ(c.ranks[0].recompile_ns, 900 * kMs);
  EXPECT_EQ(c.ranks[0].compiled.at("XLA module jit_step"), 10u);
  EXPECT_EQ(c.ranks[0].framework_ns.at("XLA"), 1000 * kMs);

  const Report r = Analyze(t);
  ASSERT_FALSE(r.findings.empty());
  const Finding& f = r.findings.front();
  EXPECT_EQ(f.kind, "compilation");
  // Static shapes save the recompilations; jit_step's first compilation stays.
  EXPECT_EQ(f.gain_ns, 900 * kMs);
  EXPECT_EQ(f.numbers.at("compile_ns"), 1000 * kMs);
  EXPECT_NE(f.action.find("Stop recompiling"), std::string::npos) << f.action;
  EXPECT_NE(f.action.find("JAX"), std::string::npos) << f.action;
  EXPECT_NE(f.evidence.find("10 compilations, 9 of them compiling again"), std::string::npos)
      << f.evidence;
  EXPECT_NE(f.evidence.find("XLA module jit_step (10 times)"), std::string::npos) << f.evidence;
  EXPECT_EQ(FindingOf(r, "host-work"), nullptr);
  EXPECT_EQ(FindingOf(r, "launch-bound"), nullptr);
  EXPECT_EQ(FindingOf(r, "phase-bottleneck"), nullptr);
  // The gaps (9 of ~100 ms between steps) are the host compiling.
  ASSERT_EQ(r.idle.cause_count.size(), 1u);
  EXPECT_EQ(r.idle.cause_count[0].at(GapCause::kCompile), 9u);
  EXPECT_EQ(r.idle.cause_count[0].count(GapCause::kHostWork), 0u);
}

// torch.compile at start-up (AON's hook ranges): one 3 s compilation of frame
// 0 in the first step, then 200 steps of 5 ms; a start-up compile, whose action
// is a persistent cache. A second compilation of frame 0 (compile id 0/1) is a
// recompilation, one with its backward pass (same id), and an overlong id no
// compile id at all.
TEST(Compilation, TorchCompileAtStartUpAndItsRecompilation) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  uint64_t at = kMs;
  for (uint64_t s = 0; s < 200; ++s) {
    const uint64_t length = s == 0 ? 3005 * kMs : 5 * kMs;
    b.Step(0, s, at, at + length, 0, StepSource::kPytorch);
    if (s == 0) b.Nvtx(0, "torch.compile (dynamo) 0/0", at, at + 3000 * kMs, 1, 0, "AON");
    b.Kernel(0, "triton_poi_fused", at + length - 4 * kMs, at + length - kMs, 1);
    at += length;
  }
  {
    const Timeline t = b.WriteAndLoad(dir.File("t.h5"));
    const CompileAnalysis c = AnalyzeCompilation(t);
    EXPECT_EQ(c.ranks[0].ns, 3000 * kMs);
    EXPECT_EQ(c.ranks[0].compilations, 1u);
    EXPECT_EQ(c.ranks[0].recompilations, 0u);
    const Report r = Analyze(t);
    ASSERT_FALSE(r.findings.empty());
    EXPECT_EQ(r.findings.front().kind, "compilation");
    EXPECT_NE(r.findings.front().action.find("persistent compilation cache"), std::string::npos)
        << r.findings.front().action;
    EXPECT_NE(r.findings.front().action.find("TORCHINDUCTOR_CACHE_DIR"), std::string::npos);
    EXPECT_LE(r.findings.front().gain_ns, r.end_ns - kMs) << "never longer than the run";
  }
  b.Nvtx(0, "torch.compile (dynamo) 0/1", at, at + 200 * kMs, 1, 0, "AON");
  // Its backward pass, compiled later under the same compile id: the same compilation.
  b.Nvtx(0, "torch.compile (lazy_backward) 0/1", at + 300 * kMs, at + 350 * kMs, 1, 0, "AON");
  const CompileAnalysis c = AnalyzeCompilation(b.WriteAndLoad(dir.File("t2.h5")));
  EXPECT_EQ(c.ranks[0].compilations, 2u);
  EXPECT_EQ(c.ranks[0].recompilations, 1u);
  EXPECT_EQ(c.ranks[0].recompile_ns, 250 * kMs);
  EXPECT_EQ(c.ranks[0].compiled.at("torch.compile frame 0"), 2u);
}

TEST(Compilation, WhichRangesMarkCompilation) {
  EXPECT_EQ(CompileFramework("TSL", "XlaCompile:#module=jit_f#"), "XLA");
  EXPECT_EQ(CompileFramework("", "TSL:XlaCompileBackend:#module=jit_f#"), "XLA");
  EXPECT_EQ(CompileFramework("TSL", "XlaEmitGpuAsm:#module=jit_f#"), "XLA");
  EXPECT_EQ(CompileFramework("TSL", "XlaPass:#name=fusion#"), "XLA");
  EXPECT_EQ(CompileFramework("AON", "torch.compile (dynamo) 0/0"), "torch.compile");
  EXPECT_EQ(CompileFramework("", "compile_fx_inner (dynamo_timed)"), "torch.compile");
  // Running work, and a program's own range that happens to say "compile".
  EXPECT_EQ(CompileFramework("TSL", "XlaModule:#hlo_module=jit_f#"), "");
  EXPECT_EQ(CompileFramework("TSL", "Thunk:#name=dot#"), "");
  EXPECT_EQ(CompileFramework("", "torch.compile (dynamo) 0/0"), "") << "only AON's domain";
  EXPECT_EQ(CompileFramework("", "compile_model"), "");
  // An id too long to be one is no id (and no crash).
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Nvtx(0, "torch.compile (dynamo) 0/99999999999999999999", kMs, 2 * kMs, 1, 0, "AON");
  const CompileAnalysis c = AnalyzeCompilation(b.WriteAndLoad(dir.File("t.h5")));
  EXPECT_EQ(c.ranks[0].compilations, 1u);
  EXPECT_EQ(c.ranks[0].recompilations, 0u);
}

}  // namespace
}  // namespace aon::report
