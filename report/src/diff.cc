// aon-diff's comparison (aon/report/diff.h).
#include "aon/report/diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "analyses/analysis.h"
#include "aon/base/json_writer.h"
#include "aon/report/stats.h"

namespace aon::report {
namespace {

struct Side {
  Report report;
  double step_ns = 0;
  std::vector<double> rank_step_ns;  // median per rank
  bool modules_cut = false;          // the report kept only its top modules
  uint64_t steps = 0, gpu_steps = 0;
  // category -> name -> (time, count), summed over ranks
  std::map<std::string, std::map<std::string, std::pair<double, double>>> sums;
  std::map<std::string, double> per;  // category -> the steps its sums are over
};

// GPU work and operators are recorded for the launches of the traced steps
// (a window's work still running after it is delivered too, and nothing
// launched after it): their sum over the traced steps' count is per step,
// wherever the GPU ran them.
template <typename T, typename NameOf>
void Sum(const Timeline& t, const std::vector<Merged<T>>& rows, NameOf name_of,
         std::map<std::string, std::pair<double, double>>* out) {
  for (const Merged<T>& m : rows) {
    if (m.rank >= t.world_size) continue;
    auto& [ns, n] = (*out)[name_of(m.record)];
    ns += static_cast<double>(m.record.end_ns - m.record.start_ns);
    n += 1;
  }
}

Side Measure(const Timeline& t) {
  Side s;
  s.report = Analyze(t);
  const Steps& steps = s.report.steps;
  std::vector<double> lengths;
  s.rank_step_ns.assign(t.world_size, 0);
  for (uint32_t r = 0; r < t.world_size && r < steps.per_rank.size(); ++r) {
    std::vector<double> mine;
    for (const Interval& i : steps.per_rank[r]) {
      lengths.push_back(static_cast<double>(i.end - i.start));
      mine.push_back(static_cast<double>(i.end - i.start));
    }
    s.rank_step_ns[r] = Median(std::move(mine));
    s.steps += steps.per_rank[r].size();
    s.gpu_steps += steps.GpuSteps(r).size();
  }
  s.step_ns = Median(std::move(lengths));
  auto name = [&](uint32_t id) { return t.strings.Get(id); };
  Sum(
      t, t.kernels, [&](const KernelRecord& k) { return name(k.name_id); }, &s.sums["kernel"]);
  Sum(
      t, t.ops, [&](const OpRecord& o) { return name(o.name_id); }, &s.sums["op"]);
  // Modules: the report's top modules by GPU time (PyTorch runs), their kernels
  // over the traced steps as the kernels'.
  s.modules_cut = s.report.torch.modules.size() >= TorchAnalysis::kTorchRows;
  for (const TorchModule& m : s.report.torch.modules)
    s.sums["module"][m.path] = {static_cast<double>(m.gpu_ns), static_cast<double>(m.kernels)};
  s.per["kernel"] = s.per["op"] = s.per["module"] = static_cast<double>(s.gpu_steps);
  // NCCL is recorded in every step (its profiler plugin), not only in windows.
  for (const StatsRow& row : ComputeStats(t, StatsReport::kNccl, false).rows)
    s.sums["nccl"][row.name] = {static_cast<double>(row.total_ns), static_cast<double>(row.count)};
  s.per["nccl"] = static_cast<double>(s.steps);
  // Idle causes: the report's steady state per rank (median per step x steps).
  const IdleAnalysis& idle = s.report.idle;
  double rank_steps = 0;
  for (uint32_t r = 0; r < idle.cause_ns.size(); ++r) {
    const double n = r < steps.per_rank.size() ? static_cast<double>(steps.per_rank[r].size()) : 0;
    if (n == 0) continue;
    rank_steps += n;
    for (GapCause c : kGapCauses) {
      auto& [ns, count] = s.sums["idle"][GapCauseName(c)];
      ns += static_cast<double>(idle.Steady(r, c));
      auto it = idle.cause_count[r].find(c);
      if (it != idle.cause_count[r].end())
        count += static_cast<double>(it->second) * idle.run_scale[r];
    }
  }
  s.per["idle"] = rank_steps;
  return s;
}

}  // namespace

RunDiff DiffRuns(const Timeline& base, const Timeline& next) {
  RunDiff d;
  d.base_job = base.job_id;
  d.new_job = next.job_id;
  d.world_size = next.world_size;
  if (base.world_size != next.world_size) {
    d.not_comparable = "the runs have " + std::to_string(base.world_size) + " and " +
                       std::to_string(next.world_size) + " ranks";
    return d;
  }
  const Side a = Measure(base), b = Measure(next);
  d.base_step_ns = a.step_ns, d.new_step_ns = b.step_ns;
  d.base_steps = a.steps, d.new_steps = b.steps;
  d.base_gpu_steps = a.gpu_steps, d.new_gpu_steps = b.gpu_steps;
  if (a.steps == 0 || b.steps == 0) {
    d.not_comparable = std::string("no steps in the ") + (a.steps == 0 ? "base" : "new") +
                       " run: nothing to compare per step";
    return d;
  }
  for (uint32_t r = 0; r < next.world_size; ++r) {
    d.ranks.push_back(RankDiff{r, r < a.rank_step_ns.size() ? a.rank_step_ns[r] : 0,
                               r < b.rank_step_ns.size() ? b.rank_step_ns[r] : 0});
  }
  for (const char* category : {"kernel", "op", "module", "nccl", "idle"}) {
    const auto& sa = a.sums.count(category) ? a.sums.at(category) : decltype(a.sums)::mapped_type{};
    const auto& sb = b.sums.count(category) ? b.sums.at(category) : decltype(b.sums)::mapped_type{};
    const double pa = a.per.at(category), pb = b.per.at(category);
    std::map<std::string, DiffItem> items;
    for (const auto& [name, v] : sa) {
      DiffItem& it = items[name];
      it.base_ns = pa > 0 ? v.first / pa : 0;
      it.base_count = pa > 0 ? v.second / pa : 0;
    }
    for (const auto& [name, v] : sb) {
      DiffItem& it = items[name];
      it.new_ns = pb > 0 ? v.first / pb : 0;
      it.new_count = pb > 0 ? v.second / pb : 0;
    }
    for (auto& [name, it] : items) {
      if (it.base_ns == 0 && it.new_ns == 0) continue;
      // A module missing from a run's top list is unknown there, not 0.
      if (std::string_view(category) == "module" &&
          ((it.base_ns == 0 && a.modules_cut) || (it.new_ns == 0 && b.modules_cut)))
        continue;
      it.category = category;
      it.name = name;
      d.items.push_back(std::move(it));
    }
  }
  std::sort(d.items.begin(), d.items.end(), [](const DiffItem& x, const DiffItem& y) {
    const double ax = std::fabs(x.delta()), ay = std::fabs(y.delta());
    return ax != ay ? ax > ay : x.name < y.name;
  });
  // Different programs? Most of either run's kernel time under names the other lacks.
  double shared = 0, total = 0;
  for (const DiffItem& it : d.items) {
    if (it.category != "kernel") continue;
    total += it.base_ns + it.new_ns;
    if (it.base_ns > 0 && it.new_ns > 0) shared += it.base_ns + it.new_ns;
  }
  if (total > 0 && shared < total / 2)
    d.warnings.push_back("most GPU time is in kernels only one run has: different programs?");
  if (base.synthetic() != next.synthetic())
    d.warnings.push_back("one run is SYNTHETIC (fake GPU), the other is not");
  return d;
}

namespace {

std::string Signed(double ns) { return (ns < 0 ? "-" : "+") + FormatDuration(std::fabs(ns)); }

// An item's share of the step's change, for every rendering: none when that
// change is noise (under 1 % of the base step, or under a nanosecond), where a
// share would say nothing.
std::optional<double> ShareOfChange(const RunDiff& d, const DiffItem& it) {
  const double change = d.new_step_ns - d.base_step_ns;
  if (std::fabs(change) < 0.01 * d.base_step_ns || std::fabs(change) < 1) return std::nullopt;
  return it.delta() / change;
}
std::string ShareText(const RunDiff& d, const DiffItem& it) {
  const std::optional<double> share = ShareOfChange(d, it);
  return share ? std::to_string(static_cast<int>(std::lround(100 * *share))) + " %" : "-";
}

}  // namespace

std::string RenderDiffText(const RunDiff& d, size_t top) {
  std::string o = "aon-diff: " + d.base_job + " (base) vs " + d.new_job + " (new)\n";
  if (!d.not_comparable.empty()) return o + "not comparable: " + d.not_comparable + "\n";
  for (const std::string& w : d.warnings) o += "warning: " + w + "\n";
  const double change = d.new_step_ns - d.base_step_ns;
  char line[256];
  std::snprintf(line, sizeof line,
                "median step %s -> %s (%s, %+.1f %%); %u ranks, %llu vs %llu steps; GPU work "
                "per step over %llu vs %llu traced steps\n\n",
                FormatDuration(d.base_step_ns).c_str(), FormatDuration(d.new_step_ns).c_str(),
                Signed(change).c_str(), d.base_step_ns > 0 ? 100 * change / d.base_step_ns : 0.0,
                d.world_size, static_cast<unsigned long long>(d.base_steps),
                static_cast<unsigned long long>(d.new_steps),
                static_cast<unsigned long long>(d.base_gpu_steps),
                static_cast<unsigned long long>(d.new_gpu_steps));
  o += line;
  if (d.ranks.size() > 1) {
    o += "Median step per rank:";
    size_t n = 0;
    for (const RankDiff& r : d.ranks) {
      if (n++ == 16) {
        o += " ... (" + std::to_string(d.ranks.size() - 16) + " more in --json/--html)";
        break;
      }
      o += (n % 4 == 1 ? "\n " : ";") + std::string(" rank ") + std::to_string(r.rank) + " " +
           FormatDuration(r.base_step_ns) + " -> " + FormatDuration(r.new_step_ns);
    }
    o += "\n\n";
  }
  o += "Changes per step, largest first (share of the step's change):\n";
  size_t shown = 0;
  for (const DiffItem& it : d.items) {
    if (top != 0 && shown == top) break;
    if (std::fabs(it.delta()) < 1) continue;
    const std::string share = ShareText(d, it);
    std::snprintf(line, sizeof line, "  %10s  %6s  %-7s %s -> %s  ", Signed(it.delta()).c_str(),
                  share.c_str(), it.category.c_str(), FormatDuration(it.base_ns).c_str(),
                  FormatDuration(it.new_ns).c_str());
    o += line + it.name + "\n";
    ++shown;
  }
  if (shown == 0) o += "  nothing changed by a microsecond or more per step\n";
  return o;
}

std::string RenderDiffJson(const RunDiff& d) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("base_job");
  w.String(d.base_job);
  w.Key("new_job");
  w.String(d.new_job);
  w.Key("comparable");
  w.Bool(d.not_comparable.empty());
  if (!d.not_comparable.empty()) {
    w.Key("not_comparable");
    w.String(d.not_comparable);
  }
  w.Key("world_size");
  w.Uint(d.world_size);
  w.Key("base_step_ns");
  w.Double(d.base_step_ns, 12);
  w.Key("new_step_ns");
  w.Double(d.new_step_ns, 12);
  w.Key("base_steps");
  w.Uint(d.base_steps);
  w.Key("new_steps");
  w.Uint(d.new_steps);
  w.Key("base_gpu_steps");
  w.Uint(d.base_gpu_steps);
  w.Key("new_gpu_steps");
  w.Uint(d.new_gpu_steps);
  w.Key("warnings");
  w.BeginArray();
  for (const std::string& s : d.warnings) w.String(s);
  w.EndArray();
  w.Key("ranks");
  w.BeginArray(JsonWriter::Layout::kOnePerLine);
  for (const RankDiff& r : d.ranks) {
    w.BeginObject();
    w.Key("rank");
    w.Uint(r.rank);
    w.Key("base_step_ns");
    w.Double(r.base_step_ns, 12);
    w.Key("new_step_ns");
    w.Double(r.new_step_ns, 12);
    w.EndObject();
  }
  w.EndArray();
  w.Key("changes");
  w.BeginArray(JsonWriter::Layout::kOnePerLine);
  for (const DiffItem& it : d.items) {
    w.BeginObject();
    w.Key("category");
    w.String(it.category);
    w.Key("name");
    w.String(it.name);
    w.Key("base_ns");
    w.Double(it.base_ns, 12);
    w.Key("new_ns");
    w.Double(it.new_ns, 12);
    w.Key("delta_ns");
    w.Double(it.delta(), 12);
    w.Key("share_of_step_change");
    if (const std::optional<double> share = ShareOfChange(d, it)) {
      w.Double(*share, 6);
    } else {
      w.Null();
    }
    w.Key("base_count");
    w.Double(it.base_count, 9);
    w.Key("new_count");
    w.Double(it.new_count, 9);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  out += "\n";
  return out;
}

std::string RenderDiffHtml(const RunDiff& d) {
  auto e = [](const std::string& t) { return HtmlEscape(t); };
  auto dur = [&](double ns) { return e(FormatDuration(ns)); };
  std::string o =
      "<!DOCTYPE html>\n<html lang=en><head><meta charset='utf-8'><title>aon diff: " +
      e(d.base_job) + " vs " + e(d.new_job) +
      "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:"
      "collapse;font-size:12px;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 6px;"
      "text-align:right}td.l,th.l{text-align:left}th{background:#eef}.up{color:#a00}.down{color:"
      "#060}.warn{background:#ffd;padding:4px 8px}</style></head><body>\n<h1>aon diff: " +
      e(d.base_job) + " (base) vs " + e(d.new_job) + " (new)</h1>\n";
  if (!d.not_comparable.empty())
    return o + "<p class=warn>Not comparable: " + e(d.not_comparable) + "</p></body></html>\n";
  for (const std::string& w : d.warnings) o += "<p class=warn>" + e(w) + "</p>\n";
  const double change = d.new_step_ns - d.base_step_ns;
  char pct[32];
  std::snprintf(pct, sizeof pct, "%+.1f %%",
                d.base_step_ns > 0 ? 100 * change / d.base_step_ns : 0.0);
  o += "<p>Median step " + dur(d.base_step_ns) + " &rarr; " + dur(d.new_step_ns) + " (" +
       e(Signed(change)) + ", " + pct + "); " + std::to_string(d.world_size) + " ranks, " +
       std::to_string(d.base_steps) + " vs " + std::to_string(d.new_steps) +
       " steps; GPU work per step over " + std::to_string(d.base_gpu_steps) + " vs " +
       std::to_string(d.new_gpu_steps) + " traced steps.</p>\n";
  o += "<h2>Median step per rank</h2><table id=ranks><tr><th>rank</th><th>base</th><th>new</th>"
       "<th>change</th></tr>\n";
  for (const RankDiff& r : d.ranks) {
    const double c = r.new_step_ns - r.base_step_ns;
    o += "<tr><td>" + std::to_string(r.rank) + "</td><td>" + dur(r.base_step_ns) + "</td><td>" +
         dur(r.new_step_ns) + "</td><td class=" + (c > 0 ? "up" : "down") + ">" + e(Signed(c)) +
         "</td></tr>\n";
  }
  o += "</table>\n<h2>Changes per step, largest first</h2><table id=changes><tr><th>change</th>"
       "<th>share of the step's change</th><th class=l>what</th><th>base</th><th>new</th>"
       "<th>base count</th><th>new count</th><th class=l>name</th></tr>\n";
  for (const DiffItem& it : d.items) {
    if (std::fabs(it.delta()) < 1) continue;
    char cnt[2][32];
    std::snprintf(cnt[0], sizeof cnt[0], "%.3g", it.base_count);
    std::snprintf(cnt[1], sizeof cnt[1], "%.3g", it.new_count);
    o += "<tr><td class=" + std::string(it.delta() > 0 ? "up" : "down") + ">" +
         e(Signed(it.delta())) + "</td><td>" + ShareText(d, it) + "</td><td class=l>" +
         e(it.category) + "</td><td>" + dur(it.base_ns) + "</td><td>" + dur(it.new_ns) +
         "</td><td>" + cnt[0] + "</td><td>" + cnt[1] + "</td><td class=l><code>" + e(it.name) +
         "</code></td></tr>\n";
  }
  return o +
         "</table>\n<p>Generated by aon diff. Self-contained: no scripts, no network.</p>"
         "</body></html>\n";
}

}  // namespace aon::report
