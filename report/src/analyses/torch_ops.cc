// PyTorch attribution: kernels to the operators and modules that launched them
// (format 1.8; the rules are in aon/report/report.h next to TorchAnalysis and in
// docs/pytorch.md).
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "analysis.h"

namespace aon::report {
namespace {

enum class Phase : uint8_t { kOther, kForward, kBackward, kOptimizer };

struct OpInfo {
  const OpRecord* op = nullptr;
  uint32_t module = 0;  // string id of its module path, 0 = none
  Phase phase = Phase::kOther;
};

bool IsOptimizerRange(const std::string& name) {
  return name.rfind("Optimizer.step#", 0) == 0 || name.rfind("Optimizer.zero_grad#", 0) == 0;
}

}  // namespace

TorchAnalysis AnalyzeTorch(const Timeline& t, const Steps* steps) {
  TorchAnalysis a;
  if (t.ops.empty()) {
    a.note =
        "no operator ranges in this timeline (PyTorch jobs under aon-run or srun --aon "
        "get them in capture windows; docs/pytorch.md)";
    return a;
  }
  a.present = true;
  a.ops = t.ops.size();
  // Per rank: its ops by id, begin order (ids grow as ranges begin, so a
  // parent's id is smaller than its children's).
  std::map<uint32_t, std::vector<const OpRecord*>> by_rank;
  for (const auto& m : t.ops) by_rank[m.rank].push_back(&m.record);
  // (rank, op id) -> info
  std::map<uint32_t, std::unordered_map<uint64_t, OpInfo>> info;
  for (auto& [rank, ops] : by_rank) {
    std::sort(ops.begin(), ops.end(),
              [](const OpRecord* x, const OpRecord* y) { return x->op_id < y->op_id; });
    auto& mine = info[rank];
    mine.reserve(ops.size());
    // Forward ops with a sequence number: (forward thread, sequence nr) -> module.
    std::map<std::pair<uint32_t, int64_t>, uint32_t> forward_module;
    for (const OpRecord* op : ops) {
      OpInfo i;
      i.op = op;
      const OpInfo* parent = nullptr;
      if (auto p = mine.find(op->parent_id); op->parent_id != 0 && p != mine.end())
        parent = &p->second;
      const auto kind = static_cast<OpKind>(op->kind);
      if (parent != nullptr) {
        i.module = parent->module;
        i.phase = parent->phase;
      }
      if (kind == OpKind::kModule) {
        i.module = op->name_id;
        if (i.phase == Phase::kOther) i.phase = Phase::kForward;
      } else if (kind == OpKind::kBackward) {
        i.phase = Phase::kBackward;
        auto f = forward_module.find({op->forward_thread, op->sequence_nr});
        i.module = f != forward_module.end() ? f->second : 0;
      } else if (kind == OpKind::kUser && i.phase != Phase::kBackward &&
                 IsOptimizerRange(t.strings.Get(op->name_id))) {
        i.phase = Phase::kOptimizer;
      } else if (kind == OpKind::kOperator && i.phase == Phase::kForward && op->sequence_nr >= 0 &&
                 i.module != 0) {
        forward_module[{op->framework_thread, op->sequence_nr}] = i.module;
      }
      mine.emplace(op->op_id, i);
    }
  }
  // (rank, correlation id) -> op id, for launches inside an op.
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> owner;
  for (const auto& e : t.external)
    if (e.record.external_kind == kOpExternalCorrelationKind)
      owner[{e.rank, e.record.correlation_id}] = e.record.external_id;

  // (rank, graph node id) -> op id, for kernels replayed from a CUDA graph:
  // the op open when the node was captured comes before the replaying launch's.
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> captured_in;
  for (const auto& g : t.graph_ops) captured_in[{g.rank, g.record.node_id}] = g.record.op_id;

  std::map<uint32_t, TorchModule> modules;      // by module string id
  std::map<uint32_t, TorchOperator> operators;  // by op name id
  std::map<uint32_t, std::map<uint32_t, uint64_t>> module_kernels, operator_kernels;
  std::map<uint32_t, std::map<uint32_t, std::vector<Interval>>> module_spans;  // module, rank
  std::map<std::pair<uint32_t, int32_t>, bool> steps_seen;
  for (const auto& k : t.kernels) {
    auto ranks_ops = info.find(k.rank);
    if (ranks_ops == info.end() || k.record.end_ns <= k.record.start_ns) continue;
    const uint64_t ns = k.record.end_ns - k.record.start_ns;
    ++a.kernels;
    a.kernel_ns += ns;
    auto it = ranks_ops->second.end();
    if (k.record.graph_node_id != 0) {
      if (auto g = captured_in.find({k.rank, k.record.graph_node_id}); g != captured_in.end())
        it = ranks_ops->second.find(g->second);
    }
    if (it == ranks_ops->second.end()) {
      auto o = owner.find({k.rank, k.record.correlation_id});
      if (o == owner.end()) continue;
      it = ranks_ops->second.find(o->second);
    }
    if (it == ranks_ops->second.end()) continue;
    const OpInfo& i = it->second;
    ++a.attributed;
    a.attributed_ns += ns;
    switch (i.phase) {
      case Phase::kForward:
        a.forward_ns += ns;
        break;
      case Phase::kBackward:
        a.backward_ns += ns;
        break;
      case Phase::kOptimizer:
        a.optimizer_ns += ns;
        break;
      case Phase::kOther:
        a.other_ns += ns;
        break;
    }
    if (const auto* windows = StepWindows(steps, k.rank)) {
      const int32_t s = StepOf(*windows, k.record.start_ns);
      if (s >= 0) steps_seen[{k.rank, s}] = true;
    }
    TorchOperator& op = operators[i.op->name_id];
    op.gpu_ns += ns;
    ++op.kernels;
    operator_kernels[i.op->name_id][k.record.name_id] += ns;
    if (i.module == 0) continue;
    TorchModule& m = modules[i.module];
    m.gpu_ns += ns;
    ++m.kernels;
    (i.phase == Phase::kBackward ? m.backward_ns : m.forward_ns) += ns;
    module_kernels[i.module][k.record.name_id] += ns;
    module_spans[i.module][k.rank].push_back({k.record.start_ns, k.record.end_ns});
  }
  a.steps = steps_seen.size();

  auto top = [&](const std::map<uint32_t, uint64_t>& by_name, size_t n) {
    return TopKernels(t.strings, by_name, n);
  };
  for (auto& [id, m] : modules) {
    m.path = t.strings.Get(id);
    m.top_kernels = top(module_kernels[id], 3);
    for (auto& [rank, spans] : module_spans[id]) m.spans.push_back({rank, Union(std::move(spans))});
    m.verdict.verdict = Verdict::kUnknown;
    m.verdict.why = "no GPU counters in this timeline";
    a.modules.push_back(std::move(m));
  }
  for (auto& [id, op] : operators) {
    op.name = t.strings.Get(id);
    auto k = top(operator_kernels[id], 1);
    if (!k.empty()) op.top_kernel = k[0].first;
    a.operators.push_back(std::move(op));
  }
  auto by_time = [](const auto& x, const auto& y) { return x.gpu_ns > y.gpu_ns; };
  std::stable_sort(a.modules.begin(), a.modules.end(), by_time);
  std::stable_sort(a.operators.begin(), a.operators.end(), by_time);
  if (a.modules.size() > TorchAnalysis::kTorchRows) a.modules.resize(TorchAnalysis::kTorchRows);
  if (a.operators.size() > TorchAnalysis::kTorchRows) a.operators.resize(TorchAnalysis::kTorchRows);
  return a;
}

const Analysis kTorchAnalysis = {"torch", "steps", "torch", [](const Timeline& t, Report* r) {
                                   r->torch = AnalyzeTorch(t, &r->steps);
                                 }};

}  // namespace aon::report
