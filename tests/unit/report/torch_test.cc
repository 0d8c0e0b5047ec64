// PyTorch attribution in the report (report/src/analyses/torch_ops.cc): kernels
// to the innermost op that launched them, ops to modules (backward ones through
// the forward op's sequence number), phases, per-step figures, module verdicts.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "aon/report/report.h"
#include "timeline_builder.h"

namespace aon::report {
namespace {

using testing::TempDir;
using testing::TimelineBuilder;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kUsT = 1'000;
constexpr char kGpu[] = "GPU-aaaaaaaa-0000-0000-0000-000000000001";

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Rank 0, two captured steps of 10 ms. Each step: module Net > Net.block >
// aten::addmm (seq 5+s) launching "gemm" (2 ms); autograd node AddmmBackward0
// (seq 5+s, forward thread 1) > aten::mm launching "gemm_bwd" (3 ms); PyTorch's
// optimizer range > aten::_foreach_add_ launching "adam" (1 ms); and a kernel
// "stray" launched outside any op (0.5 ms).
TimelineBuilder TwoSteps() {
  TimelineBuilder b;
  b.Rank(0, "node1");
  b.Device(0, 0, kGpu);
  for (uint64_t s = 0; s < 2; ++s) {
    const uint64_t t0 = s * 10 * kMs, id = 100 * (s + 1);
    b.Step(0, s, t0, t0 + 10 * kMs, kStepCaptured);
    b.Op(0, id + 1, 0, OpKind::kModule, "Net", t0 + 100 * kUsT, t0 + 3 * kMs);
    b.Op(0, id + 2, id + 1, OpKind::kModule, "Net.block", t0 + 200 * kUsT, t0 + 2900 * kUsT);
    b.Op(0, id + 3, id + 2, OpKind::kOperator, "aten::addmm", t0 + 300 * kUsT, t0 + 400 * kUsT,
         static_cast<int64_t>(5 + s));
    b.LaunchedIn(0, b.Kernel(0, "gemm", t0 + 500 * kUsT, t0 + 2500 * kUsT, 100, t0 + 350 * kUsT),
                 id + 3);
    b.Op(0, id + 4, 0, OpKind::kBackward, "AddmmBackward0", t0 + 3 * kMs, t0 + 4 * kMs,
         static_cast<int64_t>(5 + s), 2, 1);
    b.Op(0, id + 5, id + 4, OpKind::kOperator, "aten::mm", t0 + 3100 * kUsT, t0 + 3200 * kUsT);
    b.LaunchedIn(0, b.Kernel(0, "gemm_bwd", t0 + 4 * kMs, t0 + 7 * kMs, 100, t0 + 3150 * kUsT),
                 id + 5);
    b.Op(0, id + 6, 0, OpKind::kUser, "Optimizer.step#AdamW.step", t0 + 7 * kMs, t0 + 9 * kMs);
    b.Op(0, id + 7, id + 6, OpKind::kOperator, "aten::_foreach_add_", t0 + 7100 * kUsT,
         t0 + 7200 * kUsT);
    b.LaunchedIn(0, b.Kernel(0, "adam", t0 + 7500 * kUsT, t0 + 8500 * kUsT, 100, t0 + 7150 * kUsT),
                 id + 7);
    b.Kernel(0, "stray", t0 + 9 * kMs, t0 + 9500 * kUsT, 100);
  }
  return b;
}

TEST(TorchReport, KernelsGoToTheirOpsModulesAndPhases) {
  TempDir dir;
  TimelineBuilder b = TwoSteps();
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  const TorchAnalysis& a = r.torch;
  ASSERT_TRUE(a.present);
  EXPECT_EQ(a.ops, 14u);
  EXPECT_EQ(a.kernels, 8u);
  EXPECT_EQ(a.attributed, 6u) << "the stray kernels belong to no op";
  EXPECT_EQ(a.steps, 2u);
  EXPECT_EQ(a.forward_ns, 4 * kMs);
  EXPECT_EQ(a.backward_ns, 6 * kMs);
  EXPECT_EQ(a.optimizer_ns, 2 * kMs);
  EXPECT_EQ(a.other_ns, 0u);
  ASSERT_EQ(a.modules.size(), 1u) << "only Net.block launches kernels; Net holds none directly";
  const TorchModule& m = a.modules[0];
  EXPECT_EQ(m.path, "Net.block");
  EXPECT_EQ(m.forward_ns, 4 * kMs);
  EXPECT_EQ(m.backward_ns, 6 * kMs) << "backward through the forward op's sequence number";
  EXPECT_EQ(m.gpu_ns, 10 * kMs);
  EXPECT_EQ(m.kernels, 4u);
  ASSERT_EQ(m.top_kernels.size(), 2u);
  EXPECT_EQ(m.top_kernels[0].first, "gemm_bwd");
  EXPECT_STREQ(VerdictName(m.verdict.verdict), "unknown");
  ASSERT_EQ(a.operators.size(), 3u);
  EXPECT_EQ(a.operators[0].name, "aten::mm");
  EXPECT_EQ(a.operators[0].gpu_ns, 6 * kMs);
  EXPECT_EQ(a.operators[0].top_kernel, "gemm_bwd");
  EXPECT_EQ(a.operators[1].name, "aten::addmm");
  EXPECT_EQ(a.operators[2].name, "aten::_foreach_add_");

  const std::string text = RenderTerminal(r);
  EXPECT_TRUE(Contains(text, "PyTorch (14 op ranges; 6 of 8 kernels launched inside one")) << text;
  EXPECT_TRUE(Contains(text, "forward 2.0 ms/step, backward 3.0 ms/step, optimizer 1.0 ms/step"))
      << text;
  const std::string html = RenderHtml(r);
  EXPECT_TRUE(Contains(html, "<table id=torch-modules>"));
  EXPECT_TRUE(Contains(html, "<td class=l>Net.block</td>"));
  const std::string json = RenderJson(r);
  EXPECT_TRUE(Contains(json, "\"torch\":{\"present\":true,")) << json;
  EXPECT_TRUE(Contains(json, "{\"path\":\"Net.block\",\"gpu_ns\":10000000,")) << json;
}

// With PM samples over the module's kernels, the module gets a verdict.
// CUDA graphs: the graph is captured once (module Net.block > aten::addmm and
// aten::relu, each creating a kernel node, then instantiated: clones 11, 12),
// and replayed in 3 steps from inside a user range "Graphed.replay": one
// cudaGraphLaunch (one correlation id) per replay for both kernels. Each
// replayed kernel belongs to the op of its node's capture, not to the range
// that launched the graph; a node captured outside any op (clone 13) keeps the
// launch's range.
TEST(TorchReport, GraphReplaysGoToTheOpsTheirNodesWereCapturedIn) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0, "node1");
  b.Device(0, 0, kGpu);
  b.Op(0, 1, 0, OpKind::kModule, "Net.block", 100 * kUsT, 900 * kUsT);
  b.Op(0, 2, 1, OpKind::kOperator, "aten::addmm", 200 * kUsT, 300 * kUsT, 7);
  b.Op(0, 3, 1, OpKind::kOperator, "aten::relu", 400 * kUsT, 500 * kUsT, 8);
  b.CapturedIn(0, 1, 2);
  b.CapturedIn(0, 2, 3);
  b.CapturedIn(0, 11, 2, 1);
  b.CapturedIn(0, 12, 3, 2);
  for (uint64_t s = 0; s < 3; ++s) {
    const uint64_t t0 = (s + 1) * 10 * kMs, id = 100 * (s + 1);
    b.Step(0, s, t0, t0 + 10 * kMs, kStepCaptured);
    b.Op(0, id, 0, OpKind::kUser, "Graphed.replay", t0 + 100 * kUsT, t0 + 200 * kUsT);
    const uint32_t corr = b.Kernel(0, "gemm", t0 + 1 * kMs, t0 + 3 * kMs, 100, t0 + 150 * kUsT);
    b.kernels.back().record.graph_node_id = 11;
    b.LaunchedIn(0, corr, id);
    b.Kernel(0, "relu", t0 + 3 * kMs, t0 + 4 * kMs);
    b.kernels.back().record.correlation_id = corr;
    b.kernels.back().record.graph_node_id = 12;
    b.Kernel(0, "bare", t0 + 4 * kMs, t0 + 4500 * kUsT);
    b.kernels.back().record.correlation_id = corr;
    b.kernels.back().record.graph_node_id = 13;
  }
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  const TorchAnalysis& a = r.torch;
  ASSERT_TRUE(a.present);
  EXPECT_EQ(a.kernels, 9u);
  EXPECT_EQ(a.attributed, 9u);
  EXPECT_EQ(a.forward_ns, 9 * kMs) << "gemm and relu, in module Net.block";
  EXPECT_EQ(a.other_ns, 1500 * kUsT) << "bare: the replaying range only";
  ASSERT_EQ(a.modules.size(), 1u);
  EXPECT_EQ(a.modules[0].path, "Net.block");
  EXPECT_EQ(a.modules[0].kernels, 6u);
  std::map<std::string, uint64_t> by_op;
  for (const TorchOperator& o : a.operators) by_op[o.name] = o.kernels;
  EXPECT_EQ(by_op["aten::addmm"], 3u);
  EXPECT_EQ(by_op["aten::relu"], 3u);
  EXPECT_EQ(by_op["Graphed.replay"], 3u);
}

TEST(TorchReport, AModuleIsJudgedFromThePmSamplesOverItsKernels) {
  TempDir dir;
  TimelineBuilder b = TwoSteps();
  for (uint64_t at = 0; at < 20 * kMs; at += 100 * kUsT) {
    auto sample = [&](CounterMetric metric, double v) {
      b.Counter(0, kGpu, 0, metric, at, at + 100 * kUsT, v, CounterSource::kPmSampling);
    };
    sample(CounterMetric::kGpuActive, 98);
    sample(CounterMetric::kTensorActive, 90);
    sample(CounterMetric::kDramBandwidth, 20);
  }
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  ASSERT_EQ(r.torch.modules.size(), 1u);
  const TorchModule& m = r.torch.modules[0];
  EXPECT_TRUE(m.sampled);
  EXPECT_STREQ(VerdictName(m.verdict.verdict), "compute-bound") << m.verdict.why;
  EXPECT_DOUBLE_EQ(m.verdict.compute_pct, 90);
}

TEST(TorchReport, NoOpsIsSaid) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  b.Kernel(0, "k", 0, kMs);
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  EXPECT_FALSE(r.torch.present);
  EXPECT_TRUE(Contains(r.torch.note, "no operator ranges")) << r.torch.note;
  EXPECT_FALSE(Contains(RenderTerminal(r), "PyTorch ("));
  EXPECT_TRUE(Contains(RenderHtml(r), "<section id=torch>"));
}

}  // namespace
}  // namespace aon::report
