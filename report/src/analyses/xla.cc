// JAX / XLA: each kernel tied to the HLO instruction and the module execution
// that launched it, from the NVTX ranges XLA's GPU runtime opens on the
// launching thread (report.h, XlaAnalysis; docs/jax.md). The same join as the
// Python reader's `hlo_op` / `hlo_module` columns (python/aon/reader.py).
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "analyses/analysis.h"

namespace aon::report {

namespace {

// The ranges of one kind on one thread of one rank, sorted by start, each with
// the range enclosing it (-1: none): the innermost range open at a time.
struct Nest {
  std::vector<uint64_t> starts, ends;
  std::vector<int64_t> parent;
  std::vector<uint32_t> what;  // index into the parsed ranges

  void Finish() {
    std::vector<size_t> order(starts.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    // By start, an enclosing range before a nested one that starts with it.
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return starts[a] != starts[b] ? starts[a] < starts[b] : ends[a] > ends[b];
    });
    Nest sorted;
    for (size_t i : order) {
      sorted.starts.push_back(starts[i]);
      sorted.ends.push_back(ends[i]);
      sorted.what.push_back(what[i]);
    }
    *this = std::move(sorted);
    parent.assign(starts.size(), -1);
    std::vector<int64_t> stack;
    for (size_t i = 0; i < starts.size(); ++i) {
      while (!stack.empty() && ends[static_cast<size_t>(stack.back())] < starts[i])
        stack.pop_back();
      parent[i] = stack.empty() ? -1 : stack.back();
      stack.push_back(static_cast<int64_t>(i));
    }
  }

  // Position (in these arrays) of the innermost range open at `t`, or -1.
  int64_t At(uint64_t t) const {
    int64_t i = std::upper_bound(starts.begin(), starts.end(), t) - starts.begin() - 1;
    while (i >= 0 && ends[static_cast<size_t>(i)] < t) i = parent[static_cast<size_t>(i)];
    return i;
  }
};

// XLA names each kernel it emits after its fusion instruction, '.' written '_'
// ("gemm_fusion_dot.2" -> "gemm_fusion_dot_2").
bool NamedAfter(const std::string& kernel, const std::string& hlo_op) {
  if (hlo_op.empty() || kernel.size() != hlo_op.size()) return false;
  for (size_t i = 0; i < kernel.size(); ++i) {
    const char c = hlo_op[i] == '.' ? '_' : hlo_op[i];
    if (kernel[i] != c) return false;
  }
  return true;
}

struct Key {
  uint32_t rank, thread;
  bool thunk;
  bool operator<(const Key& o) const {
    return std::tie(rank, thread, thunk) < std::tie(o.rank, o.thread, o.thunk);
  }
};

}  // namespace

XlaAnalysis AnalyzeXla(const Timeline& t, const Steps* steps, const CompileAnalysis* compile) {
  XlaAnalysis a;
  std::vector<XlaRange> parsed;
  std::map<Key, Nest> nests;
  std::map<std::string, uint64_t> executions;  // program module -> its execution ranges
  for (const auto& n : t.nvtx) {
    auto r = ParseXlaRange(t.strings.Get(n.record.name_id));
    if (!r) continue;
    if (!r->thunk && r->program) ++executions[r->module];
    if (!r->thunk && !r->program) ++a.autotuner_executions;
    Nest& nest = nests[{n.rank, n.record.thread_id, r->thunk}];
    nest.starts.push_back(n.record.start_ns);
    nest.ends.push_back(n.record.end_ns);
    nest.what.push_back(static_cast<uint32_t>(parsed.size()));
    parsed.push_back(std::move(*r));
  }
  if (parsed.empty()) {
    a.note = "no XLA execution ranges in this timeline (JAX programs under aon-run; docs/jax.md)";
    return a;
  }
  a.present = true;
  for (const auto& [module, n] : executions) a.executions += n;
  for (auto& [key, nest] : nests) nest.Finish();
  // (rank, correlation id) -> the launch call's thread and start.
  std::map<std::pair<uint32_t, uint32_t>, std::pair<uint32_t, uint64_t>> calls;
  for (const auto& c : t.apis)
    calls[{c.rank, c.record.correlation_id}] = {c.record.thread_id, c.record.start_ns};
  // The innermost range of the kind open at `at` and its start.
  auto innermost = [&](uint32_t rank, uint32_t thread, bool thunk,
                       uint64_t at) -> std::pair<const XlaRange*, uint64_t> {
    auto it = nests.find({rank, thread, thunk});
    if (it == nests.end()) return {nullptr, 0};
    const int64_t i = it->second.At(at);
    if (i < 0) return {nullptr, 0};
    return {&parsed[it->second.what[static_cast<size_t>(i)]],
            it->second.starts[static_cast<size_t>(i)]};
  };
  // A kernel replayed from a command buffer (a CUDA graph) carries the graph
  // launch's call. XLA records the buffer's commands during the execution that
  // launches it, each inside the thunk of its instruction (nested in the
  // buffer's thunk, or before it the first time), and names each kernel it
  // emits after its fusion: the last thunk of the kernel's name begun in
  // [since, at] on the thread, or nullptr.
  auto recorded_for = [&](uint32_t rank, uint32_t thread, uint64_t since, uint64_t at,
                          const std::string& kernel) -> const XlaRange* {
    auto it = nests.find({rank, thread, true});
    if (it == nests.end()) return nullptr;
    const Nest& n = it->second;
    auto lo = std::lower_bound(n.starts.begin(), n.starts.end(), since) - n.starts.begin();
    auto hi = std::upper_bound(n.starts.begin(), n.starts.end(), at) - n.starts.begin();
    for (auto j = hi; j > lo; --j) {
      const XlaRange& r = parsed[n.what[static_cast<size_t>(j - 1)]];
      if (NamedAfter(kernel, r.hlo_op)) return &r;
    }
    return nullptr;
  };

  std::map<std::string, TorchModule> modules;
  std::map<std::string, std::map<uint32_t, uint64_t>> module_kernels;
  std::map<std::string, std::map<uint32_t, std::vector<Interval>>> module_spans;
  std::map<std::pair<std::string, std::string>, XlaInstruction> instructions;
  std::map<std::pair<std::string, std::string>, std::map<uint32_t, uint64_t>> instruction_kernels;
  std::map<std::pair<uint32_t, int32_t>, bool> steps_seen;
  for (const auto& k : t.kernels) {
    if (k.record.end_ns <= k.record.start_ns) continue;
    const uint64_t ns = k.record.end_ns - k.record.start_ns;
    auto call = calls.find({k.rank, k.record.correlation_id});
    const XlaRange* execution = nullptr;
    const XlaRange* thunk = nullptr;
    bool recorded = false;  // a graph kernel tied to the thunk recorded for it
    if (call != calls.end()) {
      const auto [e, e_start] = innermost(k.rank, call->second.first, false, call->second.second);
      const auto [th, th_start] = innermost(k.rank, call->second.first, true, call->second.second);
      execution = e;
      thunk = th;
      if (thunk != nullptr && k.record.graph_node_id != 0) {
        const XlaRange* found =
            recorded_for(k.rank, call->second.first, e != nullptr ? e_start : th_start,
                         call->second.second, t.strings.Get(k.record.name_id));
        if (found != nullptr) thunk = found;
        recorded = found != nullptr;
      }
    }
    ++a.kernels;
    a.kernel_ns += ns;
    // Compile time, not the program's: a module XLA's autotuner runs while it
    // compiles, or any launch made while the host compiled outside an execution
    // of the program (the autotuner's candidate kernels, its buffer checks).
    const CompileRank* compiling = compile != nullptr ? compile->Of(k.rank) : nullptr;
    if ((execution != nullptr && !execution->program) ||
        (execution == nullptr && call != calls.end() && compiling != nullptr &&
         StepOf(compiling->spans, call->second.second) >= 0)) {
      ++a.compile_kernels;
      a.compile_kernel_ns += ns;
      continue;
    }
    ++a.program_kernels;
    a.program_kernel_ns += ns;
    if (k.record.graph_node_id != 0) {
      ++a.graph_kernels;
      if (thunk != nullptr && !recorded) ++a.graph_unresolved;
    }
    if (thunk == nullptr && execution == nullptr) continue;
    ++a.attributed;
    a.attributed_ns += ns;
    if (const auto* windows = StepWindows(steps, k.rank)) {
      const int32_t s = StepOf(*windows, k.record.start_ns);
      if (s >= 0) steps_seen[{k.rank, s}] = true;
    }
    const std::string module = execution != nullptr ? execution->module : "";
    if (!module.empty()) {
      TorchModule& m = modules[module];
      m.gpu_ns += ns;
      ++m.kernels;
      module_kernels[module][k.record.name_id] += ns;
      module_spans[module][k.rank].push_back({k.record.start_ns, k.record.end_ns});
    }
    const std::string op = thunk != nullptr && !thunk->hlo_op.empty() ? thunk->hlo_op : "";
    if (op.empty()) continue;
    XlaInstruction& i = instructions[{module, op}];
    if (i.jax_op.empty()) i.jax_op = thunk->jax_op;
    i.gpu_ns += ns;
    ++i.kernels;
    instruction_kernels[{module, op}][k.record.name_id] += ns;
  }
  a.steps = steps_seen.size();

  auto top = [&](const std::map<uint32_t, uint64_t>& by_name, size_t n) {
    return TopKernels(t.strings, by_name, n);
  };
  for (auto& [name, m] : modules) {
    m.path = name;
    m.forward_ns = m.gpu_ns;  // one pass: no forward/backward split
    m.top_kernels = top(module_kernels[name], 3);
    for (auto& [rank, spans] : module_spans[name])
      m.spans.push_back({rank, Union(std::move(spans))});
    m.verdict.verdict = Verdict::kUnknown;
    m.verdict.why = "no GPU counters in this timeline";
    a.modules.push_back(std::move(m));
  }
  for (auto& [key, i] : instructions) {
    i.module = key.first;
    i.hlo_op = key.second;
    auto k = top(instruction_kernels[key], 1);
    if (!k.empty()) i.top_kernel = k[0].first;
    a.instructions.push_back(std::move(i));
  }
  auto by_time = [](const auto& x, const auto& y) { return x.gpu_ns > y.gpu_ns; };
  std::stable_sort(a.modules.begin(), a.modules.end(), by_time);
  std::stable_sort(a.instructions.begin(), a.instructions.end(), by_time);
  if (a.modules.size() > XlaAnalysis::kRows) a.modules.resize(XlaAnalysis::kRows);
  if (a.instructions.size() > XlaAnalysis::kRows) a.instructions.resize(XlaAnalysis::kRows);
  for (const TorchModule& m : a.modules) a.module_executions.push_back(executions[m.path]);
  return a;
}

const Analysis kXlaAnalysis = {"xla", "steps,compile", "xla", [](const Timeline& t, Report* r) {
                                 r->xla = AnalyzeXla(t, &r->steps, &r->compile);
                               }};

}  // namespace aon::report
