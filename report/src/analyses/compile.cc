// Compilation: per rank, the wall time its host spent compiling (XLA's compiler
// passes, torch.compile's compilations), how many compilations there were and
// which of them compiled the same thing again (report.h, CompileAnalysis).
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analyses/analysis.h"

namespace aon::report {

namespace {

// Dynamo's own compile ranges, where ops were recorded.
constexpr std::string_view kDynamoTimed = "(dynamo_timed)";

// What a compile range compiled: "XLA module jit_step" from "module=jit_step";
// "torch.compile frame 0" from a trailing compile id "0/1"; "" when unknown.
// `attempt` is set from the compile id (-1 without one).
std::string Identity(std::string_view framework, std::string_view name, int* attempt) {
  *attempt = -1;
  if (framework == "XLA") {
    // Only the compile of a module names what was compiled: the passes and
    // emitters inside it name their own sub-modules (Triton's
    // "LLVMDialectModule" for every autotuned kernel), which are parts of it.
    if (!name.starts_with("XlaCompile:")) return "";
    const size_t at = name.find("module=");
    if (at == std::string_view::npos) return "";
    const size_t from = at + 7;
    size_t to = from;
    while (to < name.size() && name[to] != ',' && name[to] != '#') ++to;
    return to > from ? "XLA module " + std::string(name.substr(from, to - from)) : "";
  }
  // "torch.compile (dynamo) 0/1" (or "[0/1]", "!2/0/1"): the last "<frame>/<attempt>".
  const size_t slash = name.rfind('/');
  if (slash == std::string_view::npos || slash == 0) return "";
  size_t a = slash + 1, b = slash;
  while (a < name.size() && std::isdigit(static_cast<unsigned char>(name[a]))) ++a;
  while (b > 0 && std::isdigit(static_cast<unsigned char>(name[b - 1]))) --b;
  if (a == slash + 1 || b == slash) return "";
  if (a - slash - 1 > 6) return "";  // no compile id has that many attempts
  *attempt = 0;
  for (size_t i = slash + 1; i < a; ++i) *attempt = *attempt * 10 + (name[i] - '0');
  return "torch.compile frame " + std::string(name.substr(b, slash - b));
}

struct CompileRange {
  uint64_t start, end;
  std::string identity;
  int attempt;
};

void Summarize(std::vector<CompileRange> ranges, CompileRank* out) {
  std::vector<Interval> all, recompiled, named;
  std::map<std::string, std::vector<Interval>> by_identity;
  std::vector<Interval> anonymous;
  // A compile id names one compilation: the backward pass, autotuning and
  // CUDA-graph recording of a frame's compilation reuse it.
  std::map<std::pair<std::string, int>, std::vector<Interval>> by_id;
  for (const CompileRange& c : ranges) {
    all.push_back({c.start, c.end});
    if (c.attempt >= 0) {
      by_id[{c.identity, c.attempt}].push_back({c.start, c.end});
      named.push_back({c.start, c.end});
    } else if (!c.identity.empty()) {
      by_identity[c.identity].push_back({c.start, c.end});
    } else {
      anonymous.push_back({c.start, c.end});
    }
  }
  for (auto& [id, spans] : by_id) {
    ++out->compilations;
    ++out->compiled[id.first];
    if (id.second > 0) {
      ++out->recompilations;
      recompiled.insert(recompiled.end(), spans.begin(), spans.end());
    }
  }
  // A module's overlapping compile ranges are one compilation; each later one
  // compiles it again.
  for (auto& [identity, spans] : by_identity) {
    const std::vector<Interval> each = Union(std::move(spans));
    out->compilations += each.size();
    out->compiled[identity] += each.size();
    out->recompilations += each.size() - 1;
    recompiled.insert(recompiled.end(), each.begin() + 1, each.end());
    named.insert(named.end(), each.begin(), each.end());
  }
  // Ranges that name nothing (passes, emitters) are parts of a named compile
  // where they overlap one; elsewhere each connected stretch is a compilation.
  named = Union(std::move(named));
  for (const Interval& u : Union(std::move(anonymous))) {
    if (LengthWithin(named, u) == 0) ++out->compilations;
  }
  out->spans = Union(std::move(all));
  out->ns = TotalLength(out->spans);
  out->recompile_ns = TotalLength(Union(std::move(recompiled)));
}

}  // namespace

bool CompileRank::Covers(uint64_t from, uint64_t to) const {
  return to > from && 2 * LengthWithin(spans, {from, to}) > to - from;
}

CompileAnalysis AnalyzeCompilation(const Timeline& t) {
  CompileAnalysis a;
  a.ranks.resize(t.world_size);
  std::vector<std::vector<CompileRange>> ranges(t.world_size);
  std::vector<std::map<std::string, std::vector<Interval>>> framework_spans(t.world_size);
  auto add = [&](uint32_t rank, uint64_t start, uint64_t end, const std::string& framework,
                 const std::string& name) {
    if (rank >= t.world_size || end <= start) return;
    int attempt = -1;
    std::string identity = Identity(framework, WithoutTslPrefix(name), &attempt);
    ranges[rank].push_back({start, end, std::move(identity), attempt});
    framework_spans[rank][framework].push_back({start, end});
  };
  for (const auto& m : t.nvtx) {
    const NvtxRecord& n = m.record;
    if (n.type == static_cast<uint8_t>(NvtxType::kMark)) continue;
    const std::string& name = t.strings.Get(n.name_id);
    const std::string framework = CompileFramework(t.strings.Get(n.domain_id), name);
    if (!framework.empty()) add(m.rank, n.start_ns, n.end_ns, framework, name);
  }
  for (const auto& m : t.ops) {
    const std::string& name = t.strings.Get(m.record.name_id);
    // Dynamo's own ranges, where the ops were recorded: timing only (the hook's
    // ranges, when there, say which compilation each is).
    if (!name.ends_with(kDynamoTimed)) continue;
    if (m.rank >= t.world_size || m.record.end_ns <= m.record.start_ns) continue;
    framework_spans[m.rank]["torch.compile"].push_back({m.record.start_ns, m.record.end_ns});
  }
  for (uint32_t r = 0; r < t.world_size; ++r) {
    CompileRank& c = a.ranks[r];
    Summarize(std::move(ranges[r]), &c);
    std::vector<Interval> all = c.spans;
    for (auto& [framework, spans] : framework_spans[r]) {
      all.insert(all.end(), spans.begin(), spans.end());
      c.framework_ns[framework] = TotalLength(Union(std::move(spans)));
    }
    c.spans = Union(std::move(all));  // with Dynamo's ranges that no hook range marked
    c.ns = TotalLength(c.spans);
    if (c.compilations == 0 && !c.spans.empty()) c.compilations = c.spans.size();
  }
  return a;
}

const Analysis kCompileAnalysis = {"compile", "", "compile", [](const Timeline& t, Report* r) {
                                     r->compile = AnalyzeCompilation(t);
                                   }};

}  // namespace aon::report
