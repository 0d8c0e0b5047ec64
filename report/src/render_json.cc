// aon-report --json: the Report as one JSON object (fields in report/README.md),
// written with the one JSON writer (aon/base/json_writer.h).
#include <cmath>
#include <cstdint>
#include <string>

#include "aon/base/json_writer.h"
#include "aon/report/report.h"

namespace aon::report {

namespace {

// Numbers here are always numbers: integral values as integers, others with 6
// significant digits, NaN and infinities (which no analysis should produce) as 0.
void Number(JsonWriter& w, double v) {
  if (!std::isfinite(v)) v = 0;
  if (v == std::floor(v) && std::fabs(v) < 1e18) {
    w.Int(static_cast<int64_t>(v));
  } else {
    w.Double(v, 6);
  }
}

void Member(JsonWriter& w, std::string_view key, double v) {
  w.Key(key);
  Number(w, v);
}
void Member(JsonWriter& w, std::string_view key, std::string_view v) {
  w.Key(key);
  w.String(v);
}

void Findings(JsonWriter& w, const std::vector<Finding>& findings) {
  w.BeginArray();
  for (const Finding& f : findings) {
    w.BeginObject();
    Member(w, "kind", f.kind);
    w.Key("rank");
    w.Int(f.rank);
    Member(w, "gain_ns", static_cast<double>(f.gain_ns));
    Member(w, "gain_per_step_ns", f.gain_per_step_ns);
    Member(w, "action", f.action);
    Member(w, "evidence", f.evidence);
    w.Key("numbers");
    w.BeginObject();
    for (const auto& [k, v] : f.numbers) Member(w, k, v);
    w.EndObject();
    w.Key("built_on");
    w.BeginArray();
    for (const std::string& kind : f.built_on) w.String(kind);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
}

void Ranks(JsonWriter& w, const Report& r) {
  w.BeginArray();
  for (uint32_t q = 0; q < r.world_size; ++q) {
    const RankBreakdown& b = r.breakdown[q];
    const StragglerStats& s = r.comm.stragglers[q];
    w.BeginObject();
    Member(w, "rank", q);
    Member(w, "status", RankStatusName(r.ranks[q].status));
    Member(w, "host", r.ranks[q].host);
    Member(w, "span_ns", static_cast<double>(b.span_ns));
    Member(w, "busy_ns", static_cast<double>(b.busy_ns));
    Member(w, "idle_ns", static_cast<double>(b.idle_ns));
    Member(w, "compute_ns", static_cast<double>(b.compute_ns));
    Member(w, "comm_ns", static_cast<double>(b.comm_ns));
    Member(w, "copy_ns", static_cast<double>(b.copy_ns));
    Member(w, "memset_ns", static_cast<double>(b.memset_ns));
    Member(w, "exposed_comm_ns", static_cast<double>(b.exposed_comm_ns));
    Member(w, "overlap_fraction", b.overlap_fraction);
    Member(w, "steps", static_cast<double>(b.steps));
    Member(w, "step_mean_ns", b.step_mean_ns);
    const RankInfo& info = r.ranks[q];
    Member(w, "capture_mode",
           EnumValueName(kCaptureModeValues, static_cast<int64_t>(info.capture_mode)));
    Member(w, "captured_steps", static_cast<double>(info.captured_steps));
    Member(w, "windows", static_cast<double>(info.windows));
    Member(w, "capture_period", static_cast<double>(info.capture_period));
    Member(w, "window_step_ratio", info.window_step_ratio);
    Member(w, "amortized_cost", info.amortized_cost);
    Member(w, "run_scale", b.run_scale);
    Member(w, "collectives", static_cast<double>(s.collectives));
    Member(w, "last_count", static_cast<double>(s.last_count));
    Member(w, "last_fraction", s.last_fraction);
    Member(w, "caused_lost_ns", static_cast<double>(s.caused_lost_ns));
    Member(w, "waited_ns", static_cast<double>(s.waited_ns));
    w.Key("idle_by_cause_ns");
    w.BeginObject();
    if (q < r.idle.cause_ns.size()) {
      for (const auto& [c, ns] : r.idle.cause_ns[q])
        Member(w, GapCauseName(c), static_cast<double>(ns));
    }
    w.EndObject();
    const MemoryRank& m = r.memory[q];
    Member(w, "pageable_copies", static_cast<double>(m.pageable_count));
    Member(w, "pageable_bytes", static_cast<double>(m.pageable_bytes));
    Member(w, "small_copies", static_cast<double>(m.small_count));
    w.EndObject();
  }
  w.EndArray();
}

void CommGroups(JsonWriter& w, const std::vector<CommGroup>& groups) {
  w.BeginArray();
  for (const CommGroup& g : groups) {
    w.BeginObject();
    Member(w, "type", g.type);
    Member(w, "bytes", static_cast<double>(g.bytes));
    Member(w, "nranks", g.nranks);
    Member(w, "count", static_cast<double>(g.count));
    Member(w, "mean_transfer_ns", g.mean_transfer_ns);
    Member(w, "algbw_gbps", g.algbw_gbps);
    Member(w, "busbw_gbps", g.busbw_gbps);
    Member(w, "algo", g.algo);
    Member(w, "proto", g.proto);
    w.EndObject();
  }
  w.EndArray();
}

void Kernels(JsonWriter& w, const std::vector<KernelStats>& kernels) {
  w.BeginArray();
  for (size_t i = 0; i < kernels.size() && i < 50; ++i) {
    const KernelStats& k = kernels[i];
    w.BeginObject();
    Member(w, "name", k.name);
    Member(w, "family", KernelFamilyName(k.family));
    Member(w, "count", static_cast<double>(k.count));
    Member(w, "total_ns", static_cast<double>(k.total_ns));
    Member(w, "mean_ns", k.mean_ns);
    Member(w, "stddev_ns", k.stddev_ns);
    Member(w, "launch_config", k.launch_config);
    w.EndObject();
  }
  w.EndArray();
}

void Nvtx(JsonWriter& w, const std::vector<NvtxStat>& nvtx) {
  w.BeginArray();
  for (size_t i = 0; i < nvtx.size() && i < 50; ++i) {
    const NvtxStat& n = nvtx[i];
    w.BeginObject();
    Member(w, "name", n.name);
    Member(w, "count", static_cast<double>(n.count));
    Member(w, "range_ns", static_cast<double>(n.range_ns));
    Member(w, "gpu_ns", static_cast<double>(n.gpu_ns));
    w.EndObject();
  }
  w.EndArray();
}

// The numbers behind a verdict (-1: not measured).
void VerdictMembers(JsonWriter& w, const CounterVerdict& v) {
  Member(w, "verdict", VerdictName(v.verdict));
  Member(w, "why", v.why);
  Member(w, "action", v.action);
  Member(w, "busy_pct", v.busy_pct);
  Member(w, "busy_metric", v.busy_metric);
  Member(w, "compute_pct", v.compute_pct);
  Member(w, "compute_pipe", v.compute_pipe);
  Member(w, "memory_pct", v.memory_pct);
  Member(w, "sm_active_pct", v.sm_active_pct);
  Member(w, "occupancy_pct", v.occupancy_pct);
}

// A module row's top kernels and verdict (PyTorch's modules, XLA's).
void ModuleTail(JsonWriter& w, const TorchModule& m) {
  w.Key("top_kernels");
  w.BeginArray();
  for (const auto& [name, ns] : m.top_kernels) {
    w.BeginObject();
    Member(w, "name", name);
    Member(w, "gpu_ns", static_cast<double>(ns));
    w.EndObject();
  }
  w.EndArray();
  w.Key("sampled");
  w.Bool(m.sampled);
  VerdictMembers(w, m.verdict);
}

void Torch(JsonWriter& w, const TorchAnalysis& a) {
  w.BeginObject();
  w.Key("present");
  w.Bool(a.present);
  Member(w, "note", a.note);
  Member(w, "ops", static_cast<double>(a.ops));
  Member(w, "kernels", static_cast<double>(a.kernels));
  Member(w, "attributed", static_cast<double>(a.attributed));
  Member(w, "kernel_ns", static_cast<double>(a.kernel_ns));
  Member(w, "attributed_ns", static_cast<double>(a.attributed_ns));
  Member(w, "steps", static_cast<double>(a.steps));
  Member(w, "forward_ns", static_cast<double>(a.forward_ns));
  Member(w, "backward_ns", static_cast<double>(a.backward_ns));
  Member(w, "optimizer_ns", static_cast<double>(a.optimizer_ns));
  Member(w, "other_ns", static_cast<double>(a.other_ns));
  w.Key("modules");
  w.BeginArray();
  for (const TorchModule& m : a.modules) {
    w.BeginObject();
    Member(w, "path", m.path);
    Member(w, "gpu_ns", static_cast<double>(m.gpu_ns));
    Member(w, "forward_ns", static_cast<double>(m.forward_ns));
    Member(w, "backward_ns", static_cast<double>(m.backward_ns));
    Member(w, "kernels", static_cast<double>(m.kernels));
    ModuleTail(w, m);
    w.EndObject();
  }
  w.EndArray();
  w.Key("operators");
  w.BeginArray();
  for (const TorchOperator& op : a.operators) {
    w.BeginObject();
    Member(w, "name", op.name);
    Member(w, "gpu_ns", static_cast<double>(op.gpu_ns));
    Member(w, "kernels", static_cast<double>(op.kernels));
    Member(w, "top_kernel", op.top_kernel);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void Xla(JsonWriter& w, const XlaAnalysis& a) {
  w.BeginObject();
  w.Key("present");
  w.Bool(a.present);
  Member(w, "note", a.note);
  Member(w, "executions", static_cast<double>(a.executions));
  Member(w, "kernels", static_cast<double>(a.kernels));
  Member(w, "kernel_ns", static_cast<double>(a.kernel_ns));
  Member(w, "compile_kernels", static_cast<double>(a.compile_kernels));
  Member(w, "compile_kernel_ns", static_cast<double>(a.compile_kernel_ns));
  Member(w, "program_kernels", static_cast<double>(a.program_kernels));
  Member(w, "program_kernel_ns", static_cast<double>(a.program_kernel_ns));
  Member(w, "attributed", static_cast<double>(a.attributed));
  Member(w, "attributed_ns", static_cast<double>(a.attributed_ns));
  Member(w, "autotuner_executions", static_cast<double>(a.autotuner_executions));
  Member(w, "graph_kernels", static_cast<double>(a.graph_kernels));
  Member(w, "graph_unresolved", static_cast<double>(a.graph_unresolved));
  Member(w, "steps", static_cast<double>(a.steps));
  w.Key("modules");
  w.BeginArray();
  for (size_t i = 0; i < a.modules.size(); ++i) {
    const TorchModule& m = a.modules[i];
    w.BeginObject();
    Member(w, "name", m.path);
    Member(w, "gpu_ns", static_cast<double>(m.gpu_ns));
    Member(w, "kernels", static_cast<double>(m.kernels));
    Member(w, "executions", static_cast<double>(a.module_executions[i]));
    ModuleTail(w, m);
    w.EndObject();
  }
  w.EndArray();
  w.Key("instructions");
  w.BeginArray();
  for (const XlaInstruction& h : a.instructions) {
    w.BeginObject();
    Member(w, "module", h.module);
    Member(w, "hlo_op", h.hlo_op);
    Member(w, "jax_op", h.jax_op);
    Member(w, "gpu_ns", static_cast<double>(h.gpu_ns));
    Member(w, "kernels", static_cast<double>(h.kernels));
    Member(w, "top_kernel", h.top_kernel);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void Counters(JsonWriter& w, const CounterAnalysis& c) {
  w.BeginObject();
  w.Key("present");
  w.Bool(c.present);
  w.Key("synthetic");
  w.Bool(c.synthetic);
  Member(w, "note", c.note);
  w.Key("gpus");
  w.BeginArray();
  for (const CounterGpu& g : c.gpus) {
    w.BeginObject();
    Member(w, "device", g.device);
    Member(w, "uuid", g.uuid_text);
    Member(w, "host", g.host);
    Member(w, "source", g.source);
    w.Key("sampled");
    w.Bool(g.sampled);
    w.Key("ranks");
    w.BeginArray();
    for (uint32_t q : g.ranks) Number(w, q);
    w.EndArray();
    w.Key("assumed");
    w.Bool(g.assumed);
    Member(w, "interval_ns", static_cast<double>(g.interval_ns));
    w.Key("means");
    w.BeginObject();
    for (const EnumValue& m : kCounterMetricValues) {
      const auto metric = static_cast<CounterMetric>(m.value);
      if (g.means.Has(metric)) Member(w, m.name, g.means.Mean(metric));
    }
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.Key("phases");
  w.BeginArray();
  for (const CounterPhase& p : c.phases) {
    w.BeginObject();
    Member(w, "name", p.name);
    VerdictMembers(w, p.verdict);
    Member(w, "seconds", p.seconds);
    Member(w, "intervals", p.intervals);
    Member(w, "instances", static_cast<double>(p.instances));
    w.Key("sampled");
    w.Bool(p.sampled);
    Member(w, "traced_ns", static_cast<double>(p.traced_ns));
    w.Key("idle_by_cause_ns");
    w.BeginObject();
    for (const auto& [cause, ns] : p.idle_ns)
      Member(w, GapCauseName(cause), static_cast<double>(ns));
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.Key("kernels");
  w.BeginArray();
  for (const CounterKernel& k : c.kernels) {
    w.BeginObject();
    Member(w, "name", k.name);
    VerdictMembers(w, k.verdict);
    Member(w, "intervals", static_cast<double>(k.intervals));
    w.Key("sampled");
    w.Bool(k.sampled);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace

std::string RenderJson(const Report& r) {
  std::string o;
  JsonWriter w(&o);
  w.BeginObject();
  Member(w, "file", r.path);
  Member(w, "job", r.job_id);
  Member(w, "source", r.source);
  w.Key("synthetic");
  w.Bool(r.synthetic);
  w.Key("clock_synchronized");
  w.Bool(r.clock_synchronized);
  Member(w, "world_size", r.world_size);
  Member(w, "duration_ns", static_cast<double>(r.end_ns - r.start_ns));
  // What profiling cost and covered (docs/always-on.md); absent before format 1.5.
  if (r.capture.known) {
    const CaptureSummary& c = r.capture;
    w.Key("capture");
    w.BeginObject();
    Member(w, "mode", c.mode);
    Member(w, "overhead_budget", c.budget);
    Member(w, "amortized_cost", c.cost);
    Member(w, "amortized_cost_median", c.cost_median);
    Member(w, "window_step_ratio", c.window_ratio);
    Member(w, "steps", static_cast<double>(c.steps));
    Member(w, "captured_steps", static_cast<double>(c.captured_steps));
    Member(w, "windows", static_cast<double>(c.windows));
    Member(w, "period", static_cast<double>(c.period));
    w.Key("ranks_without_window");
    w.BeginArray();
    for (uint32_t q : c.ranks_without_window) Number(w, q);
    w.EndArray();
    Member(w, "statement", c.statement);
    w.EndObject();
  }
  // What was lost (always present; empty when nothing was).
  w.Key("lost");
  w.BeginObject();
  Member(w, "records", static_cast<double>(r.loss.dropped));
  Member(w, "statement", r.loss.statement);
  w.Key("ranks");
  w.BeginArray();
  for (const RankLoss& q : r.loss.ranks) {
    w.BeginObject();
    Member(w, "rank", static_cast<double>(q.rank));
    Member(w, "records", static_cast<double>(q.dropped));
    Member(w, "collector_lost", q.collector_lost);
    w.Key("kinds");
    w.BeginArray();
    for (const KindLoss& k : q.kinds) {
      w.BeginObject();
      Member(w, "kind", std::string(RecordKindName(k.kind)));
      Member(w, "kept", static_cast<double>(k.kept));
      Member(w, "lost", static_cast<double>(k.dropped));
      Member(w, "unwritten", static_cast<double>(k.unwritten));
      Member(w, "damaged", static_cast<double>(k.damaged));
      Member(w, "share", k.share());
      Member(w, "why", k.why());
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  w.Key("steps");
  w.BeginObject();
  Member(w, "method", r.steps.method);
  Member(w, "count", static_cast<double>(r.steps.typical_count));
  w.Key("windowed");
  w.Bool(r.steps.windowed);
  w.EndObject();
  Member(w, "communication_source", r.comm.source);
  Member(w, "collectives", static_cast<double>(r.comm.collectives.size()));
  w.Key("notes");
  w.BeginArray();
  for (const std::string& n : r.notes) w.String(n);
  w.EndArray();
  w.Key("findings");
  Findings(w, r.findings);
  w.Key("ranks");
  Ranks(w, r);
  w.Key("comm_groups");
  CommGroups(w, r.comm.groups);
  w.Key("kernels");
  Kernels(w, r.kernels);
  w.Key("nvtx");
  Nvtx(w, r.nvtx);
  w.Key("counters");
  Counters(w, r.counters);
  w.Key("torch");
  Torch(w, r.torch);
  w.Key("xla");
  Xla(w, r.xla);
  w.EndObject();
  w.Newline();
  return o;
}

}  // namespace aon::report
