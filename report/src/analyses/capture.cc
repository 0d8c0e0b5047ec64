// Capture: what profiling cost the job and which steps it traced
// (docs/always-on.md). Every rank measures its own cost while it runs (step times
// inside capture windows against the steps outside them, in the same process) and
// writes it into its rank file; the merge copies it into the timeline's rank
// table. This analysis gathers those figures and says them in one statement,
// which every rendering prints first.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "analyses/analysis.h"

namespace aon::report {

namespace {

std::string Percent(double fraction) {
  char buf[32];
  const double p = fraction * 100.0;
  std::snprintf(buf, sizeof buf, p < 0.095 ? "%.2f %%" : p < 9.95 ? "%.1f %%" : "%.0f %%", p);
  return buf;
}

std::string Ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", r);
  return buf;
}

template <typename T>
T MedianOf(std::vector<T> v) {
  if (v.empty()) return T{};
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string Statement(const CaptureSummary& c, const Steps& steps) {
  const std::string per_rank =
      std::to_string(c.captured_steps) + " of " + std::to_string(c.steps) + " steps";
  if (c.mode == "full") {
    return "AON traced every step (--mode " + c.mode +
           "): its cost is not held to a budget and not measured in this mode; the default "
           "budgeted mode keeps it within 1 % of step time.";
  }
  std::string s;
  // A budget of 0: the period was fixed (--capture-period), no budget applied.
  const std::string budget =
      c.budget > 0 ? "budget " + Percent(c.budget) : "no budget: --capture-period fixed the period";
  if (c.cost >= 0) {
    s = "AON cost this job ~" + Percent(c.cost) + " of its step time (" + budget +
        "; measured by each rank";
    if (c.window_ratio > 0)
      s += ": steps inside capture windows took " + Ratio(c.window_ratio) + " the others";
    s += ").";
  } else {
    s = "AON's cost was not measured (" + budget +
        "): no rank ran enough steps outside capture windows to compare.";
  }
  if (c.windows == 0) {
    s += " No capture window opened (the job ran " + std::to_string(c.steps) +
         " steps per rank; the first window opens at step " + std::to_string(kFirstWindowStep) +
         "): step times come from every step, but there is no GPU activity to analyze.";
  } else {
    s += " CUPTI traced " + std::to_string(c.windows) + " window" + (c.windows == 1 ? "" : "s") +
         ", " + per_rank + " per rank";
    if (c.period > 0) s += ", every " + std::to_string(c.period) + " steps now";
    s += "; GPU findings come from those steps, step times from all " +
         std::to_string(steps.typical_count) + ".";
  }
  if (c.on_demand_steps > 0) {
    s += " " + std::to_string(c.on_demand_steps) + " of the traced steps per rank were asked for " +
         "on demand (aon ctl capture).";
  }
  if (!c.dumps.empty()) {
    s += " The flight recorder wrote its window " + std::to_string(c.dumps.size()) + " time" +
         (c.dumps.size() == 1 ? "" : "s") + ": ";
    for (size_t i = 0; i < c.dumps.size() && i < 3; ++i) s += (i ? "; " : "") + c.dumps[i];
    if (c.dumps.size() > 3) s += "; and " + std::to_string(c.dumps.size() - 3) + " more";
    s += ".";
  }
  if (!c.ranks_without_window.empty() && c.windows > 0) {
    s += " " + std::to_string(c.ranks_without_window.size()) + " rank" +
         (c.ranks_without_window.size() == 1 ? "" : "s") +
         " opened no window (not missing: too few steps).";
  }
  return s;
}

// "rank R: flight recorder dump N: <reason>: M records (the last S s)" (the
// collector's note, carried by the merge) -> R and "dump N: <reason>".
bool ParseDump(const std::string& event, uint32_t* rank, std::string* dump) {
  unsigned r = 0;
  int used = 0;
  if (std::sscanf(event.c_str(), "rank %u: %n", &r, &used) != 1 || used == 0) return false;
  std::string rest = event.substr(static_cast<size_t>(used));
  const std::string prefix = "flight recorder dump ";
  if (rest.rfind(prefix, 0) != 0) return false;
  rest = rest.substr(prefix.size());
  const size_t records = rest.rfind(": ");
  if (records == std::string::npos) return false;
  *rank = r;
  *dump = "dump " + rest.substr(0, records);
  return true;
}

// Each dump once, with the ranks it wrote ("dump 1: SIGUSR1 (ranks 0-3)").
std::vector<std::string> Dumps(const Timeline& t) {
  std::vector<std::pair<std::string, std::vector<uint32_t>>> dumps;
  for (const std::string& e : t.capture_events) {
    uint32_t rank = 0;
    std::string dump;
    if (!ParseDump(e, &rank, &dump)) continue;
    auto it =
        std::find_if(dumps.begin(), dumps.end(), [&](const auto& d) { return d.first == dump; });
    if (it == dumps.end()) it = dumps.insert(dumps.end(), {dump, {}});
    it->second.push_back(rank);
  }
  std::vector<std::string> out;
  for (auto& [dump, ranks] : dumps) {
    std::sort(ranks.begin(), ranks.end());
    std::string list;
    for (size_t i = 0; i < ranks.size();) {
      size_t j = i;
      while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
      list += (list.empty() ? "" : ",") + std::to_string(ranks[i]) +
              (j > i ? "-" + std::to_string(ranks[j]) : "");
      i = j + 1;
    }
    out.push_back(dump + " (rank" + (ranks.size() == 1 ? " " : "s ") + list + ")");
  }
  return out;
}

}  // namespace

CaptureSummary SummarizeCapture(const Timeline& t, const Steps& steps) {
  CaptureSummary c;
  c.dumps = Dumps(t);
  std::vector<uint64_t> on_demand(t.world_size, 0);
  for (const auto& s : t.steps) {
    if ((s.record.flags & kStepOnDemand) && s.rank < on_demand.size()) ++on_demand[s.rank];
  }
  if (!on_demand.empty()) c.on_demand_steps = *std::max_element(on_demand.begin(), on_demand.end());
  std::vector<std::string> modes;
  std::vector<double> costs, ratios;
  std::vector<uint64_t> nsteps, captured, windows;
  for (const RankInfo& info : t.ranks) {
    if (!RankMerged(info.status) || info.capture_mode == CaptureMode::kUnknown) continue;
    c.known = true;
    const std::string mode =
        EnumValueName(kCaptureModeValues, static_cast<int64_t>(info.capture_mode));
    if (std::find(modes.begin(), modes.end(), mode) == modes.end()) modes.push_back(mode);
    c.budget = std::max(c.budget, info.overhead_budget);
    if (info.amortized_cost >= 0) costs.push_back(info.amortized_cost);
    if (info.window_step_ratio > 0) ratios.push_back(info.window_step_ratio);
    nsteps.push_back(info.steps);
    captured.push_back(info.captured_steps);
    windows.push_back(info.windows);
    c.period = std::max(c.period, info.capture_period);
    const bool windowed =
        info.capture_mode == CaptureMode::kBudgeted || info.capture_mode == CaptureMode::kFlight;
    if (windowed && info.windows == 0) c.ranks_without_window.push_back(info.rank);
  }
  if (!c.known) return c;
  c.mode = modes.size() == 1 ? modes[0] : "mixed";
  if (!costs.empty()) {
    c.cost = *std::max_element(costs.begin(), costs.end());
    c.cost_median = MedianOf(costs);
  }
  c.window_ratio = MedianOf(ratios);
  c.steps = MedianOf(nsteps);
  c.captured_steps = MedianOf(captured);
  c.windows = MedianOf(windows);
  c.statement = Statement(c, steps);
  return c;
}

const Analysis kCaptureAnalysis = {"capture", "steps", "capture", [](const Timeline& t, Report* r) {
                                     r->capture = SummarizeCapture(t, r->steps);
                                   }};

}  // namespace aon::report
