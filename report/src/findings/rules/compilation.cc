// compilation: the host compiling (XLA, torch.compile; CompileAnalysis) for a
// share of the run worth a finding, on the rank where it took longest. It is
// start-up or recompilation time, not a phase of the program: a persistent
// compilation cache removes a start-up compile from the next runs, static
// shapes remove recompilations. Gain: what the action saves on that rank (the
// union over its threads, never longer than the run): all of its compile time
// when a cache is the action (the next run compiles nothing it compiled
// before), its recompile time when static shapes are (the first compilation of
// each module stays).
#include <algorithm>
#include <string>

#include "findings/rule.h"

namespace aon::report {

namespace {

std::string StartUpAction(const CompileRank& c) {
  std::string s =
      "Compilation is start-up time here: keep compiled programs between runs with a "
      "persistent compilation cache";
  if (c.framework_ns.count("XLA"))
    s += " (JAX: jax.config.update(\"jax_compilation_cache_dir\", <dir>) on a shared disk)";
  if (c.framework_ns.count("torch.compile"))
    s += " (torch.compile: keep TORCHINDUCTOR_CACHE_DIR, with the FX graph and autotune caches, "
         "on a disk that outlives the job; or compile ahead with AOTInductor)";
  return s + "; a longer run amortizes it";
}

std::string RecompileAction(const CompileRank& c) {
  std::string s =
      "Stop recompiling: the same function is compiled again because what it is called with "
      "changes (shapes, dtypes, Python values)";
  if (c.framework_ns.count("XLA"))
    s += "; in JAX keep array shapes static (pad batches to a few bucket sizes, mark values "
         "static_argnums only when they rarely change)";
  if (c.framework_ns.count("torch.compile"))
    s += "; in torch.compile mark changing dimensions dynamic (torch._dynamo.mark_dynamic, "
         "dynamic=True) and see why with TORCH_LOGS=recompiles";
  return s;
}

std::optional<Detection> DetectCompilation(const RuleInput& in, Claims* /*claims*/) {
  const Report& r = in.report;
  const CompileRank* worst = nullptr;
  uint32_t rank = 0;
  for (uint32_t q = 0; q < r.compile.ranks.size(); ++q) {
    const CompileRank& c = r.compile.ranks[q];
    if (c.ns > 0 && (worst == nullptr || c.ns > worst->ns)) worst = &c, rank = q;
  }
  if (worst == nullptr || static_cast<double>(worst->ns) < in.min_gain_ns) return std::nullopt;
  const CompileRank& c = *worst;
  Detection d;
  d.rank = static_cast<int>(rank);
  const bool recompiling = c.recompilations > 0 && 2 * c.recompile_ns >= c.ns;
  d.gain_ns = static_cast<double>(recompiling ? c.recompile_ns : c.ns);
  d.values["action"] = recompiling ? RecompileAction(c) : StartUpAction(c);
  d.values["rank"] = std::to_string(rank);
  d.values["time"] = FormatDuration(static_cast<double>(c.ns));
  // The run as the timeline saw it: GPU activity and the compile ranges.
  if (r.end_ns > r.start_ns) {
    const uint64_t from = std::min(r.start_ns, c.spans.front().start);
    const uint64_t to = std::max(r.end_ns, c.spans.back().end);
    d.values["run"] = FormatDuration(static_cast<double>(to - from));
    d.numbers["run_ns"] = static_cast<double>(to - from);
  }
  std::string frameworks;
  for (const auto& [name, ns] : c.framework_ns)
    frameworks += (frameworks.empty() ? "" : ", ") + name;
  d.values["framework"] = frameworks;
  d.values["compilations"] = std::to_string(c.compilations);
  if (c.recompilations > 0) {
    d.values["recompilations"] = std::to_string(c.recompilations);
    d.values["recompile_time"] = FormatDuration(static_cast<double>(c.recompile_ns));
  }
  std::string most;
  uint64_t most_n = 0;
  for (const auto& [what, n] : c.compiled)
    if (!what.empty() && n > most_n) most = what, most_n = n;
  if (!most.empty()) d.values["what"] = most + " (" + std::to_string(most_n) + " times)";
  // The GPU gaps that lay mostly inside compile time: counted, not summed (a
  // gap may run on past the compile, so their total is no compile figure).
  if (rank < r.idle.cause_count.size()) {
    auto it = r.idle.cause_count[rank].find(GapCause::kCompile);
    if (it != r.idle.cause_count[rank].end() && it->second > 0)
      d.values["gpu_idle"] = std::to_string(it->second);
  }
  d.numbers["compile_ns"] = static_cast<double>(c.ns);
  d.numbers["compilations"] = static_cast<double>(c.compilations);
  d.numbers["recompilations"] = static_cast<double>(c.recompilations);
  d.numbers["recompile_ns"] = static_cast<double>(c.recompile_ns);
  return d;
}

}  // namespace

AON_FINDING_RULE(compilation) {
  static constexpr FindingRule kRule{
      .id = "compilation",
      .precedence = 5,
      .uses = Uses({RecordKind::kNvtx, RecordKind::kOps}),
      .detects =
          "the host compiling (XLA compiler passes, torch.compile compilations) for a share "
          "of the run: start-up or recompilation time, never a phase of the program",
      .action = "{action}",
      .evidence =
          "rank {rank} compiled for {time}[ of a {run} run] ({framework}): {compilations} "
          "compilations[, {recompilations} of them compiling again what was compiled before "
          "({recompile_time})][; most often {what}][; its GPU was idle in {gpu_idle} gaps while "
          "the host compiled]",
      .per_step = false,
      .detect = DetectCompilation,
  };
  return kRule;
}

}  // namespace aon::report
