// JAX / XLA in the report (report/src/analyses/xla.cc): XLA's range names
// parsed, kernels tied to the HLO instruction and module execution open on the
// launching thread, the autotuner's and the compiler's kernels kept apart as
// compile time, per-step figures and the block in every rendering.
#include <gtest/gtest.h>

#include <string>

#include "aon/report/report.h"
#include "timeline_builder.h"

namespace aon::report {
namespace {

using testing::TempDir;
using testing::TimelineBuilder;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kUsT = 1'000;
constexpr uint32_t kTid = 11;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(XlaRangeNames, FieldsWithCommasInTheirValues) {
  auto t = ParseXlaRange(
      "Thunk:#name=jit(step)/dot_general[dimension_numbers=(((1,), (0,)), ((), ())) "
      "precision=None],hlo_op=gemm_fusion_dot.4,unique_hlo_op_id=12#");
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(t->thunk);
  EXPECT_EQ(t->jax_op,
            "jit(step)/dot_general[dimension_numbers=(((1,), (0,)), ((), ())) precision=None]");
  EXPECT_EQ(t->hlo_op, "gemm_fusion_dot.4");
  auto m = ParseXlaRange("TSL:XlaModule:#prefix=args[0],hlo_module=jit_step,program_id=7#");
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(m->thunk);
  EXPECT_TRUE(m->program);
  EXPECT_EQ(m->module, "jit_step");
  auto tuner = ParseXlaRange("XlaModule:#hlo_module=gemm_fusion_dot.2#");
  ASSERT_TRUE(tuner.has_value());
  EXPECT_FALSE(tuner->program) << "the autotuner's modules carry no program_id";
  auto library = ParseXlaRange("Thunk:#hlo_op=custom-call.1#");
  ASSERT_TRUE(library.has_value());
  EXPECT_EQ(library->hlo_op, "custom-call.1");
  EXPECT_EQ(library->jax_op, "");
  for (const char* other : {"XlaCompile:#module=jit_step#", "Thunk:#hlo_op=x", "Thunk", "step 3",
                            "XlaModuleX:#hlo_module=a#", "Thunk:#", ""}) {
    EXPECT_FALSE(ParseXlaRange(other).has_value()) << other;
  }
}

// Rank 0, thread kTid. First XLA compiles jit_step for 3 ms: inside, its
// autotuner runs a candidate module (one kernel, 0.2 ms) and checks buffers
// outside any module (one kernel, 0.1 ms). Then two steps of 10 ms (source jax),
// each one execution of jit_step: thunk fusion.4 launching "gemm" (2 ms), thunk
// reduce launching two kernels (0.5 + 0.25 ms), a kernel launched inside the
// execution but outside any thunk (0.125 ms); and a kernel launched outside
// every XLA range (1 ms: not XLA's).
TimelineBuilder JitSteps() {
  TimelineBuilder b;
  b.Rank(0, "node1");
  b.Nvtx(0, "XlaCompile:#module=jit_step#", 1 * kMs, 4 * kMs, kTid, 0, "TSL");
  b.Nvtx(0, "XlaModule:#hlo_module=gemm_fusion_dot.2#", 1500 * kUsT, 2 * kMs, kTid, 1, "TSL");
  b.Kernel(0, "candidate_gemm", 1600 * kUsT, 1800 * kUsT, kTid, 1550 * kUsT);
  b.Kernel(0, "RedzoneAllocator_check", 3 * kMs, 3100 * kUsT, kTid, 2500 * kUsT);
  for (uint64_t s = 0; s < 2; ++s) {
    const uint64_t t0 = 10 * kMs + s * 10 * kMs;
    b.Step(0, s, t0, t0 + 10 * kMs, kStepCaptured, StepSource::kJax);
    b.Nvtx(0, "XlaModule:#hlo_module=jit_step,program_id=7#", t0 + 100 * kUsT, t0 + 5 * kMs, kTid,
           0, "TSL");
    b.Nvtx(0,
           "Thunk:#name=jit(step)/dot_general[dimension_numbers=(((1,), (0,)), ((), ()))],"
           "hlo_op=fusion.4,unique_hlo_op_id=12#",
           t0 + 200 * kUsT, t0 + 300 * kUsT, kTid, 1, "TSL");
    b.Kernel(0, "gemm", t0 + 1 * kMs, t0 + 3 * kMs, kTid, t0 + 250 * kUsT);
    b.Nvtx(0, "Thunk:#name=jit(step)/reduce_sum,hlo_op=reduce.1#", t0 + 400 * kUsT, t0 + 600 * kUsT,
           kTid, 1, "TSL");
    b.Kernel(0, "reduce_pass1", t0 + 3 * kMs, t0 + 3500 * kUsT, kTid, t0 + 450 * kUsT);
    b.Kernel(0, "reduce_pass2", t0 + 3500 * kUsT, t0 + 3750 * kUsT, kTid, t0 + 550 * kUsT);
    b.Kernel(0, "copy_out", t0 + 3750 * kUsT, t0 + 3875 * kUsT, kTid, t0 + 700 * kUsT);
    b.Kernel(0, "not_xla", t0 + 6 * kMs, t0 + 7 * kMs, kTid, t0 + 5500 * kUsT);
  }
  return b;
}

TEST(XlaReport, KernelsGoToTheirInstructionsAndModulesAndCompilingIsApart) {
  TempDir dir;
  TimelineBuilder b = JitSteps();
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  const XlaAnalysis& a = r.xla;
  ASSERT_TRUE(a.present);
  EXPECT_EQ(a.kernels, 12u);
  EXPECT_EQ(a.compile_kernels, 2u) << "the autotuner's candidate and its buffer check";
  EXPECT_EQ(a.compile_kernel_ns, 300 * kUsT);
  EXPECT_EQ(a.program_kernels, 10u);
  EXPECT_EQ(a.attributed, 8u) << "not_xla ran outside every XLA range";
  EXPECT_EQ(a.attributed_ns, 2 * (2 * kMs + 875 * kUsT));
  EXPECT_EQ(a.executions, 2u);
  EXPECT_EQ(a.autotuner_executions, 1u);
  EXPECT_EQ(a.steps, 2u);
  ASSERT_EQ(a.modules.size(), 1u);
  EXPECT_EQ(a.modules[0].path, "jit_step");
  EXPECT_EQ(a.modules[0].gpu_ns, 2 * (2 * kMs + 875 * kUsT));
  EXPECT_EQ(a.modules[0].kernels, 8u);
  EXPECT_EQ(a.module_executions[0], 2u);
  ASSERT_EQ(a.instructions.size(), 2u) << "copy_out ran in no thunk";
  EXPECT_EQ(a.instructions[0].hlo_op, "fusion.4");
  EXPECT_EQ(a.instructions[0].module, "jit_step");
  EXPECT_EQ(a.instructions[0].jax_op,
            "jit(step)/dot_general[dimension_numbers=(((1,), (0,)), ((), ()))]");
  EXPECT_EQ(a.instructions[0].gpu_ns, 4 * kMs);
  EXPECT_EQ(a.instructions[0].kernels, 2u);
  EXPECT_EQ(a.instructions[0].top_kernel, "gemm");
  EXPECT_EQ(a.instructions[1].hlo_op, "reduce.1");
  EXPECT_EQ(a.instructions[1].gpu_ns, 1500 * kUsT);
  EXPECT_EQ(a.instructions[1].kernels, 4u);
  EXPECT_EQ(a.instructions[1].top_kernel, "reduce_pass1");

  const std::string text = RenderTerminal(r);
  EXPECT_TRUE(Contains(text, "JAX / XLA (2 module executions; 8 of the program's 10 kernels"))
      << text;
  EXPECT_TRUE(Contains(text, "module jit_step")) << text;
  EXPECT_TRUE(Contains(text, "2.9 ms/step")) << text;  // (2 + 0.875 ms) a step
  EXPECT_TRUE(Contains(text, "hlo    fusion.4")) << text;
  EXPECT_TRUE(Contains(text, "2 kernels ran while XLA compiled (1 autotuner modules)")) << text;
  const std::string html = RenderHtml(r);
  EXPECT_TRUE(Contains(html, "<section id=xla>"));
  EXPECT_TRUE(Contains(html, "<td class=l>reduce.1</td>")) << "instructions table";
  const std::string json = RenderJson(r);
  EXPECT_TRUE(Contains(json, "\"xla\":{\"present\":true")) << json.substr(0, 200);
  EXPECT_TRUE(Contains(json, "\"hlo_op\":\"fusion.4\""));
}

// XLA's command buffers (docs/jax.md). Two executions of jit_step on thread
// kTid: in the first, XLA runs the buffer's thunks one by one while it records
// them (sibling thunks before the buffer's), in the second it records them
// inside the buffer's thunk; each ends with one graph launch replaying the
// nodes. A kernel XLA emits is named after its fusion ('.' -> '_') and gets
// that thunk; a library kernel keeps the buffer's.
TEST(XlaReport, CommandBufferKernelsGetTheThunkRecordedForThem) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0, "node1");
  auto replay = [&](uint64_t t0, uint64_t node) {
    const uint32_t corr = b.Kernel(0, "gemm_fusion_dot_2", t0 + 2 * kMs, t0 + 3 * kMs);
    b.kernels.back().record.graph_node_id = node;
    b.Kernel(0, "library_gemm", t0 + 3 * kMs, t0 + 3500 * kUsT);
    b.kernels.back().record.graph_node_id = node + 1;
    b.kernels.back().record.correlation_id = corr;
    b.Api(0, "cuGraphLaunch", t0 + 900 * kUsT, t0 + 950 * kUsT, kTid, corr);
  };
  // First execution: siblings, then the buffer's thunk holding the launch.
  b.Nvtx(0, "XlaModule:#hlo_module=jit_step,program_id=7#", 0, 5 * kMs, kTid, 0, "TSL");
  b.Nvtx(0, "Thunk:#name=jit(step)/dot_general,hlo_op=gemm_fusion_dot.2#", 100 * kUsT, 200 * kUsT,
         kTid, 1, "TSL");
  b.Nvtx(0, "Thunk:#hlo_op=custom-call.3#", 300 * kUsT, 400 * kUsT, kTid, 1, "TSL");
  b.Nvtx(0, "Thunk:#hlo_op=command_buffer_1#", 800 * kUsT, 1 * kMs, kTid, 1, "TSL");
  replay(0, 50);
  // Second execution: the same thunks nested in the buffer's.
  const uint64_t t1 = 10 * kMs;
  b.Nvtx(0, "XlaModule:#hlo_module=jit_step,program_id=7#", t1, t1 + 5 * kMs, kTid, 0, "TSL");
  b.Nvtx(0, "Thunk:#hlo_op=command_buffer_1#", t1 + 100 * kUsT, t1 + 1 * kMs, kTid, 1, "TSL");
  b.Nvtx(0, "Thunk:#name=jit(step)/dot_general,hlo_op=gemm_fusion_dot.2#", t1 + 200 * kUsT,
         t1 + 300 * kUsT, kTid, 2, "TSL");
  b.Nvtx(0, "Thunk:#hlo_op=custom-call.3#", t1 + 400 * kUsT, t1 + 500 * kUsT, kTid, 2, "TSL");
  replay(t1, 50);
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  const XlaAnalysis& a = r.xla;
  ASSERT_TRUE(a.present);
  EXPECT_EQ(a.graph_kernels, 4u);
  EXPECT_EQ(a.graph_unresolved, 2u) << "library_gemm is not named after custom-call.3";
  ASSERT_EQ(a.instructions.size(), 2u);
  EXPECT_EQ(a.instructions[0].hlo_op, "gemm_fusion_dot.2");
  EXPECT_EQ(a.instructions[0].kernels, 2u) << "both executions";
  EXPECT_EQ(a.instructions[0].jax_op, "jit(step)/dot_general");
  EXPECT_EQ(a.instructions[1].hlo_op, "command_buffer_1");
  EXPECT_EQ(a.instructions[1].kernels, 2u);
  EXPECT_EQ(a.instructions[1].top_kernel, "library_gemm");
  EXPECT_TRUE(Contains(RenderTerminal(r), "2 kept the buffer's thunk"));
}

// A launch on another thread than the ranges: not theirs. A PyTorch timeline
// (no XLA range): no block, a note in the JSON.
TEST(XlaReport, OnlyTheLaunchingThreadsRangesCount) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0, "node1");
  b.Nvtx(0, "XlaModule:#hlo_module=jit_step,program_id=7#", 0, 5 * kMs, kTid, 0, "TSL");
  b.Nvtx(0, "Thunk:#hlo_op=fusion.1#", 100 * kUsT, 200 * kUsT, kTid, 1, "TSL");
  b.Kernel(0, "other_thread", 1 * kMs, 2 * kMs, kTid + 1, 150 * kUsT);
  // A nested thunk that starts with its parent: the launch inside it is its.
  b.Nvtx(0, "Thunk:#hlo_op=while.1#", 3 * kMs, 4 * kMs, kTid, 1, "TSL");
  b.Nvtx(0, "Thunk:#hlo_op=body_fusion#", 3 * kMs, 3500 * kUsT, kTid, 2, "TSL");
  b.Kernel(0, "body_fusion", 4500 * kUsT, 4600 * kUsT, kTid, 3200 * kUsT);
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  ASSERT_TRUE(r.xla.present);
  EXPECT_EQ(r.xla.program_kernels, 2u);
  EXPECT_EQ(r.xla.attributed, 1u);
  ASSERT_EQ(r.xla.instructions.size(), 1u);
  EXPECT_EQ(r.xla.instructions[0].hlo_op, "body_fusion");

  TimelineBuilder none;
  none.Rank(0, "node1");
  none.Nvtx(0, "step 0", 0, 5 * kMs, kTid, 0);
  none.Kernel(0, "k", 1 * kMs, 2 * kMs, kTid);
  const Report plain = Analyze(none.WriteAndLoad(dir.File("p.h5")));
  EXPECT_FALSE(plain.xla.present);
  EXPECT_FALSE(Contains(RenderTerminal(plain), "JAX / XLA"));
  EXPECT_FALSE(Contains(RenderHtml(plain), "<section id=xla>"));
  EXPECT_TRUE(Contains(RenderJson(plain), "no XLA execution ranges"));
}

}  // namespace
}  // namespace aon::report
