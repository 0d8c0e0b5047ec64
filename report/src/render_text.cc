// Terminal summary of a Report, and the number formats every rendering uses.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <utility>

#include "aon/report/report.h"

namespace aon::report {

std::string GpuActivitySummary(const Report& r) {
  double busy = 0, span = 0;
  size_t ranks = 0;
  bool scaled = false;
  for (const RankBreakdown& b : r.breakdown) {
    if (!b.has_gpu) continue;
    busy += static_cast<double>(b.busy_ns);
    span += static_cast<double>(b.span_ns);
    scaled |= b.run_scale != 1.0;
    ++ranks;
  }
  const double whole = static_cast<double>(r.end_ns - r.start_ns);
  if (ranks == 0) return "none (span " + FormatDuration(whole) + ")";
  busy /= static_cast<double>(ranks);
  span /= static_cast<double>(ranks);
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.0f%%", span > 0 ? 100.0 * busy / span : 0.0);
  return "busy " + FormatDuration(busy) + (ranks > 1 ? " per rank" : "") + " (" + pct + " of " +
         FormatDuration(span) + (scaled ? "; estimated from the captured steps" : "") + ")";
}

std::string FormatDuration(double ns) {
  char buf[48];
  const double a = std::fabs(ns);
  if (a >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
  } else if (a >= 1e6) {
    std::snprintf(buf, sizeof buf, a >= 1e8 ? "%.0f ms" : "%.1f ms", ns / 1e6);
  } else if (a >= 1e3) {
    std::snprintf(buf, sizeof buf, a >= 1e5 ? "%.0f us" : "%.1f us", ns / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  }
  return buf;
}

std::string FormatBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, (b == std::floor(b) || u == 0) ? "%.0f %s" : "%.1f %s", b,
                units[u]);
  return buf;
}

namespace {

std::string Wrap(const std::string& text, size_t width, const std::string& indent) {
  std::string out, line;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t sp = text.find(' ', pos);
    if (sp == std::string::npos) sp = text.size();
    const std::string word = text.substr(pos, sp - pos);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    pos = sp + 1;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

// "PyTorch": GPU time per step by phase, the top modules and operators.
std::string TorchBlock(const Report& r) {
  const TorchAnalysis& a = r.torch;
  if (!a.present) return "";
  const double per = a.steps > 0 ? static_cast<double>(a.steps) : 1.0;
  const char* unit = a.steps > 0 ? "/step" : "";
  auto d = [&](uint64_t ns) { return FormatDuration(static_cast<double>(ns) / per) + unit; };
  char head[256];
  std::snprintf(
      head, sizeof head,
      "\nPyTorch (%llu op ranges; %llu of %llu kernels launched inside one, %.1f %% of their "
      "GPU time; %s):\n",
      static_cast<unsigned long long>(a.ops), static_cast<unsigned long long>(a.attributed),
      static_cast<unsigned long long>(a.kernels),
      a.kernel_ns ? 100.0 * static_cast<double>(a.attributed_ns) / static_cast<double>(a.kernel_ns)
                  : 0.0,
      a.steps > 0 ? (std::to_string(a.steps) + " captured rank-steps").c_str()
                  : "no steps: whole run");
  std::string o = head;
  o += "  GPU time" + std::string(unit) + ": forward " + d(a.forward_ns) + ", backward " +
       d(a.backward_ns) + ", optimizer " + d(a.optimizer_ns) + ", other " + d(a.other_ns) + "\n";
  for (size_t i = 0; i < a.modules.size() && i < 5; ++i) {
    const TorchModule& m = a.modules[i];
    char line[256];
    std::snprintf(line, sizeof line, "  module %-40.40s %12s (fwd %s, bwd %s) %s", m.path.c_str(),
                  d(m.gpu_ns).c_str(), d(m.forward_ns).c_str(), d(m.backward_ns).c_str(),
                  VerdictName(m.verdict.verdict));
    o += line;
    o += "\n";
  }
  for (size_t i = 0; i < a.operators.size() && i < 5; ++i) {
    const TorchOperator& op = a.operators[i];
    char line[256];
    std::snprintf(line, sizeof line, "  op     %-40.40s %12s %6llu kernels, top %.40s\n",
                  op.name.c_str(), d(op.gpu_ns).c_str(),
                  static_cast<unsigned long long>(op.kernels), op.top_kernel.c_str());
    o += line;
  }
  return o;
}

// "JAX / XLA": GPU time per step by HLO module and HLO instruction, and what
// compiling (and XLA's autotuner) took.
std::string XlaBlock(const Report& r) {
  const XlaAnalysis& a = r.xla;
  if (!a.present) return "";
  const double per = a.steps > 0 ? static_cast<double>(a.steps) : 1.0;
  const char* unit = a.steps > 0 ? "/step" : "";
  auto d = [&](uint64_t ns) { return FormatDuration(static_cast<double>(ns) / per) + unit; };
  auto pct = [](uint64_t x, uint64_t of) {
    return of ? 100.0 * static_cast<double>(x) / static_cast<double>(of) : 0.0;
  };
  char head[320];
  std::snprintf(
      head, sizeof head,
      "\nJAX / XLA (%llu module executions; %llu of the program's %llu kernels launched "
      "inside one, %.1f %% of their GPU time; %s):\n",
      static_cast<unsigned long long>(a.executions), static_cast<unsigned long long>(a.attributed),
      static_cast<unsigned long long>(a.program_kernels), pct(a.attributed_ns, a.program_kernel_ns),
      a.steps > 0 ? (std::to_string(a.steps) + " rank-steps").c_str() : "no steps: whole run");
  std::string o = head;
  for (size_t i = 0; i < a.modules.size() && i < 5; ++i) {
    const TorchModule& m = a.modules[i];
    char line[256];
    std::snprintf(line, sizeof line, "  module %-40.40s %12s %6llu executions %s\n", m.path.c_str(),
                  d(m.gpu_ns).c_str(), static_cast<unsigned long long>(a.module_executions[i]),
                  VerdictName(m.verdict.verdict));
    o += line;
  }
  for (size_t i = 0; i < a.instructions.size() && i < 8; ++i) {
    const XlaInstruction& h = a.instructions[i];
    char line[320];
    std::snprintf(line, sizeof line, "  hlo    %-30.30s %12s %6llu kernels  %.60s\n",
                  h.hlo_op.c_str(), d(h.gpu_ns).c_str(), static_cast<unsigned long long>(h.kernels),
                  (h.jax_op.empty() ? "(no JAX name)" : h.jax_op).c_str());
    o += line;
  }
  if (a.graph_kernels > 0) {
    o += "  " + std::to_string(a.graph_kernels) +
         " of the program's kernels ran in XLA's command buffers (CUDA graphs), tied to the "
         "instruction recorded for them";
    if (a.graph_unresolved > 0) {
      o += "; " + std::to_string(a.graph_unresolved) +
           " kept the buffer's thunk: no thunk of their name was recorded in their execution "
           "(XLA names the kernels it emits after their fusion; a library's are not)";
    }
    o += " (docs/jax.md)\n";
  }
  uint64_t compile_ns = 0, compilations = 0, recompilations = 0;
  for (const CompileRank& c : r.compile.ranks) {
    auto x = c.framework_ns.find("XLA");
    if (x == c.framework_ns.end()) continue;
    compile_ns = std::max(compile_ns, x->second);
    compilations += c.compilations;
    recompilations += c.recompilations;
  }
  if (compile_ns > 0 || a.compile_kernels > 0) {
    o += "  compiling (apart from the steps): " + FormatDuration(static_cast<double>(compile_ns)) +
         " on the busiest rank, " + std::to_string(compilations) + " compilations (" +
         std::to_string(recompilations) + " again); " + std::to_string(a.compile_kernels) +
         " kernels ran while XLA compiled (" + std::to_string(a.autotuner_executions) +
         " autotuner modules), " + FormatDuration(static_cast<double>(a.compile_kernel_ns)) +
         " of GPU time\n";
  }
  return o;
}

// "GPU counters": a line per phase with a verdict (the 5 longest), or why none.
std::string CountersBlock(const Report& r) {
  const CounterAnalysis& c = r.counters;
  if (!c.present) return "\nGPU counters: " + c.note + "\n";
  std::string sources;
  for (const CounterGpu& g : c.gpus)
    if (sources.find(g.source) == std::string::npos)
      sources += (sources.empty() ? "" : ", ") + g.source;
  // A GPU read by both tiers is two entries: count GPUs, not entries.
  std::set<std::pair<std::string, std::string>> distinct;
  for (const CounterGpu& g : c.gpus) distinct.emplace(g.host, g.uuid_text);
  std::string o = "\nGPU counters (" + sources + ", " + std::to_string(distinct.size()) + " GPU" +
                  (distinct.size() == 1 ? "" : "s") + ")" +
                  (c.synthetic ? " *** SYNTHETIC: FAKE counters ***" : "") + ":\n";
  int shown = 0;
  for (const CounterPhase& p : c.phases) {
    if (p.verdict.verdict == Verdict::kUnknown || p.verdict.verdict == Verdict::kTooShort) continue;
    if (++shown > 5) break;
    char head[160];
    std::snprintf(head, sizeof head, "  %-20.20s %9s  %-14s", p.name.c_str(),
                  FormatDuration(p.seconds * 1e9).c_str(), VerdictName(p.verdict.verdict));
    o += head + p.verdict.why + (p.sampled ? " [PM samples]" : "") + "\n";
  }
  if (shown == 0) o += "  no NVTX phase long enough for a verdict (2 sample intervals)\n";
  // Kernels with a verdict (PM samples in capture windows give them), the 5 longest.
  shown = 0;
  for (const CounterKernel& k : c.kernels) {
    if (k.verdict.verdict == Verdict::kUnknown || ++shown > 5) continue;
    char head[200];
    std::snprintf(head, sizeof head, "  kernel %-33.33s %-14s", k.name.c_str(),
                  VerdictName(k.verdict.verdict));
    o += head + k.verdict.why + (k.sampled ? " [PM samples]" : "") + "\n";
  }
  if (!c.note.empty()) o += "  note: " + c.note + "\n";
  return o;
}

}  // namespace

std::string RenderTerminal(const Report& r) {
  std::string o;
  char buf[512];
  o += "AON report: job " + (r.job_id.empty() ? std::string("?") : r.job_id) + "  (" + r.path +
       ")\n";
  // What profiling cost comes first (docs/always-on.md).
  if (!r.capture.statement.empty()) o += Wrap(r.capture.statement, 100, "");
  // Then what was lost, before any figure built on what was kept.
  if (!r.loss.statement.empty()) o += Wrap("*** " + r.loss.statement, 100, "");
  uint32_t ok = 0;
  for (const RankInfo& i : r.ranks) ok += i.status == RankStatus::kOk;
  std::snprintf(buf, sizeof buf, "%u ranks (%u ok), source %s, steps: %zu (%s); GPU %s",
                r.world_size, ok, r.source.empty() ? "?" : r.source.c_str(), r.steps.typical_count,
                r.steps.method.c_str(), GpuActivitySummary(r).c_str());
  o += Wrap(buf, 100, "");
  if (r.synthetic)
    o += "*** SYNTHETIC: the GPU activity in this timeline is FAKE (AON's synthetic device) ***\n";
  int notes = 0;
  for (const std::string& n : r.notes) {
    if (++notes > 3) {
      o += "note: (" + std::to_string(r.notes.size() - 3) + " more notes in the HTML report)\n";
      break;
    }
    o += "note: " + n.substr(0, 150) + "\n";
  }
  o += "\nFindings (by estimated time to gain):\n";
  if (r.findings.empty())
    o += "  none: no straggler, exposed communication, idle or imbalance above 0.2 % of the run\n";
  for (size_t i = 0; i < r.findings.size() && i < 5; ++i) {
    const Finding& f = r.findings[i];
    // A gain of 0: the rule does not estimate one (counter verdicts).
    std::snprintf(
        buf, sizeof buf, "%zu. [%s%s%s] ", i + 1, f.gain_ns ? "gain ~" : "gain not estimated",
        f.gain_ns ? FormatDuration(static_cast<double>(f.gain_ns)).c_str() : "",
        f.gain_per_step_ns > 0 ? (", " + FormatDuration(f.gain_per_step_ns) + "/step").c_str()
                               : "");
    std::string text = Wrap(std::string(buf) + f.action, 96, "    ");
    o += " " + text.substr(4);
    o += Wrap("evidence: " + f.evidence, 92, "      ");
  }
  o += TorchBlock(r);
  o += XlaBlock(r);
  o += CountersBlock(r);
  // With capture windows the steps column reads captured/all and the GPU shares
  // are over the captured steps.
  std::snprintf(buf, sizeof buf, "\n %4s  %-12s  %11s  %9s  %8s  %7s  %6s  %7s  %6s  %6s\n", "rank",
                "host", r.steps.windowed ? "traced/steps" : "steps", "step mean", "GPU busy",
                "compute", "comm", "exposed", "idle", "last");
  o += buf;
  const uint32_t shown = std::min<uint32_t>(r.world_size, 16);
  for (uint32_t q = 0; q < shown; ++q) {
    const RankInfo& info = r.ranks[q];
    if (info.status != RankStatus::kOk) {
      std::snprintf(buf, sizeof buf, " %4u  %-12.12s  %s\n", q, info.host.c_str(),
                    RankStatusName(info.status));
      o += buf;
      continue;
    }
    const RankBreakdown& b = r.breakdown[q];
    auto pct = [&](uint64_t v) {
      return b.span_ns ? 100.0 * static_cast<double>(v) / b.span_ns : 0.0;
    };
    const StragglerStats& s = r.comm.stragglers[q];
    const std::string nsteps = r.steps.windowed ? std::to_string(r.steps.GpuSteps(q).size()) + "/" +
                                                      std::to_string(b.steps)
                                                : std::to_string(b.steps);
    std::snprintf(
        buf, sizeof buf,
        " %4u  %-12.12s  %11s  %9s  %7.1f%%  %6.1f%%  %5.1f%%  %6.1f%%  %5.1f%%  %6s\n", q,
        info.host.c_str(), nsteps.c_str(), b.steps ? FormatDuration(b.step_mean_ns).c_str() : "-",
        pct(b.busy_ns), pct(b.compute_ns), pct(b.comm_ns), pct(b.exposed_comm_ns), pct(b.idle_ns),
        s.collectives
            ? (std::to_string(static_cast<int>(std::lround(s.last_fraction * 100))) + "%").c_str()
            : "-");
    o += buf;
  }
  if (shown < r.world_size)
    o += " ... " + std::to_string(r.world_size - shown) + " more ranks in the HTML report\n";
  return o;
}

}  // namespace aon::report
