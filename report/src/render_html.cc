// The self-contained HTML report: inline CSS and SVG, no scripts, no network.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <optional>
#include <string_view>

#include "aon/format/host_stack.h"
#include "aon/report/report.h"

namespace aon::report {

std::string HtmlEscape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

namespace {

std::string E(const std::string& s) { return HtmlEscape(s); }
std::string D(double ns) { return E(FormatDuration(ns)); }
__attribute__((format(printf, 1, 2))) std::string F(const char* fmt, ...) {
  char buf[64];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}
std::string Pct(double part, double whole) {
  return whole > 0 ? F("%.1f %%", 100.0 * part / whole) : "-";
}

// Utilization 0..1 -> white..dark blue.
std::string HeatColor(double u) {
  u = std::clamp(u, 0.0, 1.0);
  const int r = static_cast<int>(245 - 215 * u), g = static_cast<int>(245 - 150 * u),
            b = static_cast<int>(250 - 60 * u);
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}
// Lateness 0..1 -> pale yellow..red.
std::string LateColor(double u) {
  u = std::clamp(u, 0.0, 1.0);
  const int r = static_cast<int>(255 - 40 * u), g = static_cast<int>(245 - 200 * u),
            b = static_cast<int>(220 - 190 * u);
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}
const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                          "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

// Tick values for [lo, hi]: multiples of 1, 2 or 5 x 10^k, about `target` of
// them, every one inside the range (the range's ends are not ticks unless
// they fall on one).
std::vector<double> Ticks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!(hi > lo) || target < 1) return ticks;
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return ticks;
}

// A plot's frame: the data box [left, right] x [top, bottom] in pixels and the
// values at its edges; ticks with labels and light grid lines on both axes.
struct Frame {
  int left = 0, right = 0, top = 0, bottom = 0;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  double X(double v) const { return left + (v - x0) / (x1 - x0) * (right - left); }
  double Y(double v) const { return bottom - (v - y0) / (y1 - y0) * (bottom - top); }
};

// Ticks and labels under the frame's bottom edge at the values `xs`.
template <typename XLabel>
std::string XTicks(const Frame& f, const std::vector<double>& xs, XLabel xl) {
  std::string s;
  for (double v : xs) {
    const std::string x = F("%.1f", f.X(v));
    s += "<line x1=" + x + " y1=" + std::to_string(f.bottom) + " x2=" + x +
         " y2=" + std::to_string(f.bottom + 4) + " stroke=#888 /><text x=" + x +
         " y=" + std::to_string(f.bottom + 15) + " font-size=10 text-anchor=middle>" + E(xl(v)) +
         "</text>";
  }
  return s;
}

// `xs` / `ys`: the tick values; `xl` / `yl`: their labels.
template <typename XLabel, typename YLabel>
std::string Axes(const Frame& f, const std::vector<double>& xs, XLabel xl,
                 const std::vector<double>& ys, YLabel yl, const std::string& xtitle,
                 const std::string& ytitle) {
  std::string s = "<line x1=" + std::to_string(f.left) + " y1=" + std::to_string(f.top) +
                  " x2=" + std::to_string(f.left) + " y2=" + std::to_string(f.bottom) +
                  " stroke=#888 /><line x1=" + std::to_string(f.left) +
                  " y1=" + std::to_string(f.bottom) + " x2=" + std::to_string(f.right) +
                  " y2=" + std::to_string(f.bottom) + " stroke=#888 />";
  for (double v : ys) {
    const std::string y = F("%.1f", f.Y(v));
    s += "<line x1=" + std::to_string(f.left) + " y1=" + y + " x2=" + std::to_string(f.right) +
         " y2=" + y + " stroke=#eee /><line x1=" + std::to_string(f.left - 4) + " y1=" + y +
         " x2=" + std::to_string(f.left) + " y2=" + y +
         " stroke=#888 /><text x=" + std::to_string(f.left - 6) + " y=" + y +
         " dy=4 font-size=10 text-anchor=end>" + E(yl(v)) + "</text>";
  }
  s += XTicks(f, xs, xl);
  if (!xtitle.empty()) {
    s += "<text x=" + std::to_string((f.left + f.right) / 2) +
         " y=" + std::to_string(f.bottom + 28) + " font-size=11 text-anchor=middle>" + E(xtitle) +
         "</text>";
  }
  if (!ytitle.empty()) {
    s += "<text x=" + std::to_string(f.left + 4) + " y=" + std::to_string(f.top + 10) +
         " font-size=11 fill=#555>" + E(ytitle) + "</text>";
  }
  return s;
}

std::string Number(double v) { return F("%g", v); }
// A duration tick's label: "0" at the origin.
std::string TickDuration(double ns) { return ns == 0 ? std::string("0") : FormatDuration(ns); }

// Per rank: how it captured, which share of its steps, and what that cost as the
// rank measured it (docs/always-on.md). Empty before format 1.5.
std::string CaptureTable(const Report& r) {
  if (!r.capture.known) return "";
  std::string o =
      "<h3>Capture per rank</h3><table><tr><th>rank</th><th class=l>mode</th><th>steps</th>"
      "<th>captured</th><th>windows</th><th>period</th><th>in-window step time</th>"
      "<th>cost</th></tr>\n";
  char buf[64];
  for (const RankInfo& i : r.ranks) {
    if (!RankMerged(i.status)) continue;
    const char* mode = EnumValueName(kCaptureModeValues, static_cast<int64_t>(i.capture_mode));
    o += "<tr><td>" + std::to_string(i.rank) + "</td><td class=l>" + E(mode ? mode : "?") +
         "</td><td>" + std::to_string(i.steps) + "</td><td>" + std::to_string(i.captured_steps) +
         "</td><td>" + std::to_string(i.windows) + "</td><td>" +
         (i.capture_period ? std::to_string(i.capture_period) : "-") + "</td><td>";
    if (i.window_step_ratio > 0) {
      std::snprintf(buf, sizeof buf, "%.2fx", i.window_step_ratio);
      o += buf;
    } else {
      o += "-";
    }
    o += "</td><td>";
    if (i.amortized_cost >= 0) {
      std::snprintf(buf, sizeof buf, "%.2f %%", i.amortized_cost * 100);
      o += buf;
    } else {
      o += "not measured";
    }
    o += "</td></tr>\n";
  }
  return o + "</table>\n";
}

std::string HeatStrip(const Report& r) {
  if (r.heat.empty()) return "<p class=muted>No GPU activity to plot.</p>";
  const int label = 70, cell = 6, row = 16;
  const int w = label + Report::kHeatBins * cell + 40,
            h = static_cast<int>(r.heat.size()) * row + 34;
  std::string s = "<svg class=plot id=plot-heat width=" + std::to_string(w) +
                  " height=" + std::to_string(h) + " xmlns='http://www.w3.org/2000/svg'>";
  for (size_t q = 0; q < r.heat.size(); ++q) {
    const int y = static_cast<int>(q) * row;
    s += "<text x=0 y=" + std::to_string(y + 12) + " font-size=11>rank " + std::to_string(q) +
         "</text>";
    for (int b = 0; b < Report::kHeatBins; ++b) {
      s += "<rect x=" + std::to_string(label + b * cell) + " y=" + std::to_string(y) +
           " width=" + std::to_string(cell) + " height=" + std::to_string(row - 2) + " fill='" +
           HeatColor(r.heat[q][b]) + "'/>";
    }
  }
  // Time ticks under the strip, from the timeline's start.
  const double span = static_cast<double>(r.end_ns - r.start_ns);
  const int y = static_cast<int>(r.heat.size()) * row;
  Frame f;
  f.left = label;
  f.right = label + Report::kHeatBins * cell;
  f.top = 0;
  f.bottom = y;
  f.x1 = span > 0 ? span : 1;
  s += XTicks(f, Ticks(0, span, 8), [](double v) { return TickDuration(v); });
  s += "<text x=" + std::to_string(label) + " y=" + std::to_string(y + 28) +
       " font-size=11>time from the first record; white = idle, dark blue = GPU busy</text></svg>";
  return s;
}

// Step time per rank: a panel per rank (the first kMaxPanels ranks by rank),
// one shared scale, so that ranks are compared by eye without lines drawn
// over each other.
std::string StepPlot(const Report& r) {
  constexpr size_t kMaxPanels = 16;
  double max = 0;
  size_t n = 0;
  std::vector<const RankBreakdown*> shown;
  for (const RankBreakdown& b : r.breakdown) {
    for (uint64_t v : b.step_ns) max = std::max(max, static_cast<double>(v));
    n = std::max(n, b.step_ns.size());
    if (!b.step_ns.empty() && shown.size() < kMaxPanels) shown.push_back(&b);
  }
  if (n == 0 || max <= 0) return "<p class=muted>No steps detected.</p>";
  const int w = 900, panel = 90, gap = 30, top = 8;
  const int h = top + static_cast<int>(shown.size()) * (panel + gap) + 10;
  std::string s = "<svg class=plot id=plot-steps width=" + std::to_string(w) +
                  " height=" + std::to_string(h) + " xmlns='http://www.w3.org/2000/svg'>";
  const std::vector<double> yticks = Ticks(0, max, 4);
  const std::vector<double> xticks = Ticks(0, static_cast<double>(n > 1 ? n - 1 : 1), 10);
  for (size_t p = 0; p < shown.size(); ++p) {
    const RankBreakdown& b = *shown[p];
    Frame f;
    f.left = 80;
    f.right = w - 20;
    f.top = top + static_cast<int>(p) * (panel + gap);
    f.bottom = f.top + panel;
    f.x0 = 0;
    f.x1 = n > 1 ? static_cast<double>(n - 1) : 1;
    f.y0 = 0;
    f.y1 = max;
    s += Axes(
        f, xticks, [](double v) { return Number(v); }, yticks,
        [](double v) { return TickDuration(v); }, p + 1 == shown.size() ? "step index" : "",
        "rank " + std::to_string(b.rank));
    std::string pts;
    for (size_t i = 0; i < b.step_ns.size(); ++i) {
      pts += F("%.1f", f.X(static_cast<double>(i))) + "," +
             F("%.1f", f.Y(static_cast<double>(b.step_ns[i]))) + " ";
    }
    s += "<polyline fill=none stroke='" + std::string(kPalette[b.rank % 8]) +
         "' stroke-width=1.5 points='" + pts + "'/>";
  }
  s += "</svg>";
  size_t with_steps = 0;
  for (const RankBreakdown& b : r.breakdown) with_steps += !b.step_ns.empty();
  if (with_steps > shown.size()) {
    s += "<p class=muted>The first " + std::to_string(shown.size()) + " of " +
         std::to_string(with_steps) + " ranks; the table above has them all.</p>";
  }
  return s;
}

std::string StragglerMatrix(const Report& r) {
  const auto& cols = r.comm.collectives;
  if (cols.empty()) return "<p class=muted>No collectives matched across ranks.</p>";
  const size_t ncol = std::min<size_t>(cols.size(), 150);
  const int label = 70, cell = std::max(4, static_cast<int>(900 / ncol)), row = 16;
  const int w = label + static_cast<int>(ncol) * cell + 10,
            h = static_cast<int>(r.world_size) * row + 30;
  uint64_t max_skew = 1;
  for (const Collective& c : cols) max_skew = std::max(max_skew, c.skew_ns);
  std::string s = "<svg class=plot id=plot-stragglers width=" + std::to_string(w) +
                  " height=" + std::to_string(h) + " xmlns='http://www.w3.org/2000/svg'>";
  for (uint32_t q = 0; q < r.world_size; ++q) {
    s += "<text x=0 y=" + std::to_string(q * row + 12) + " font-size=11>rank " + std::to_string(q) +
         "</text>";
  }
  for (size_t j = 0; j < ncol; ++j) {
    const Collective& c = cols[j * cols.size() / ncol];
    for (size_t i = 0; i < c.ranks.size(); ++i) {
      const double late =
          static_cast<double>(c.arrival_ns[i] - c.first_arrival_ns) / static_cast<double>(max_skew);
      s += "<rect x=" + std::to_string(label + static_cast<int>(j) * cell) +
           " y=" + std::to_string(c.ranks[i] * row) + " width=" + std::to_string(cell - 1) +
           " height=" + std::to_string(row - 2) + " fill='" +
           (c.ranks[i] == c.last_rank && c.skew_ns > 0 ? std::string("#b00000") : LateColor(late)) +
           "'/>";
    }
  }
  s += "<text x=" + std::to_string(label) + " y=" + std::to_string(r.world_size * row + 14) +
       " font-size=11>" + std::to_string(ncol) + " of " + std::to_string(cols.size()) +
       " collectives in time order; color = arrival after the first rank (max " +
       D(static_cast<double>(max_skew)) + "); dark red = last to arrive</text></svg>";
  return s;
}

std::string KernelBars(const Report& r) {
  if (r.kernels.empty()) return "<p class=muted>No kernels.</p>";
  const size_t n = std::min<size_t>(r.kernels.size(), 15);
  const int label = 420, bar = 420, row = 18;
  const double max = static_cast<double>(r.kernels[0].total_ns);
  std::string s = "<svg class=plot id=plot-kernels width=" + std::to_string(label + bar + 120) +
                  " height=" + std::to_string(static_cast<int>(n) * row + 5) +
                  " xmlns='http://www.w3.org/2000/svg'>";
  for (size_t i = 0; i < n; ++i) {
    const KernelStats& k = r.kernels[i];
    std::string name = k.name.size() > 64 ? k.name.substr(0, 61) + "..." : k.name;
    const int y = static_cast<int>(i) * row;
    const int len = max > 0 ? static_cast<int>(bar * static_cast<double>(k.total_ns) / max) : 0;
    s += "<text x=0 y=" + std::to_string(y + 13) + " font-size=11>" + E(name) + "</text>";
    s += "<rect x=" + std::to_string(label) + " y=" + std::to_string(y + 2) +
         " width=" + std::to_string(std::max(1, len)) + " height=" + std::to_string(row - 4) +
         " fill='" + kPalette[static_cast<int>(k.family) % 8] + "'/>";
    s += "<text x=" + std::to_string(label + len + 5) + " y=" + std::to_string(y + 13) +
         " font-size=11>" + D(static_cast<double>(k.total_ns)) + " (" + KernelFamilyName(k.family) +
         ")</text>";
  }
  return s + "</svg>";
}

std::string BandwidthPlot(const Report& r) {
  double max_bw = 0, lo = 1e30, hi = 0;
  for (const CommGroup& g : r.comm.groups) {
    if (g.bytes == 0 || g.busbw_gbps <= 0) continue;
    max_bw = std::max(max_bw, g.busbw_gbps);
    lo = std::min(lo, std::log2(static_cast<double>(g.bytes)));
    hi = std::max(hi, std::log2(static_cast<double>(g.bytes)));
  }
  if (max_bw <= 0)
    return "<p class=muted>No message sizes known (needs NCCL records): no bandwidth plot.</p>";
  if (hi - lo < 1) lo -= 1, hi += 1;
  const int w = 700, h = 270;
  std::string s = "<svg class=plot id=plot-bandwidth width=" + std::to_string(w) +
                  " height=" + std::to_string(h) + " xmlns='http://www.w3.org/2000/svg'>";
  Frame f;
  f.left = 70;
  f.right = w - 160;
  f.top = 10;
  f.bottom = h - 40;
  f.x0 = lo;
  f.x1 = hi;
  f.y0 = 0;
  f.y1 = max_bw * 1.1;
  // Sizes at powers of two (at most 8 labels).
  std::vector<double> xticks;
  const int every = std::max(1, static_cast<int>(std::ceil((hi - lo) / 8)));
  for (int e = static_cast<int>(std::ceil(lo)); e <= static_cast<int>(std::floor(hi)); e += every)
    xticks.push_back(e);
  s += Axes(
      f, xticks, [](double v) { return FormatBytes(std::exp2(v)); }, Ticks(0, f.y1, 5),
      [](double v) { return F("%g GB/s", v); }, "message size (log scale)", "bus bandwidth");
  std::vector<std::string> types;
  for (const CommGroup& g : r.comm.groups) {
    if (g.bytes == 0 || g.busbw_gbps <= 0) continue;
    auto it = std::find(types.begin(), types.end(), g.type);
    const size_t ti = it - types.begin();
    if (it == types.end()) types.push_back(g.type);
    const double x = f.X(std::log2(static_cast<double>(g.bytes)));
    const double y = f.Y(g.busbw_gbps);
    s += "<circle cx=" + F("%.1f", x) + " cy=" + F("%.1f", y) + " r=4 fill='" + kPalette[ti % 8] +
         "'/>";
  }
  for (size_t i = 0; i < types.size(); ++i) {
    s += "<text x=" + std::to_string(w - 150) + " y=" + std::to_string(20 + 13 * i) +
         " font-size=11 fill='" + kPalette[i % 8] + "'>" + E(types[i]) + "</text>";
  }
  return s + "</svg>";
}

// One GPU's counters over time: gpu_active, sm_active, tensor_active and
// dram_bandwidth (0..100 %), one polyline each, at the middle of each interval.
std::string CounterPlot(const CounterGpu& g, const std::string& id) {
  static constexpr std::pair<CounterMetric, const char*> kLines[] = {
      {CounterMetric::kGpuActive, "gpu_active"},
      {CounterMetric::kSmActive, "sm_active"},
      {CounterMetric::kTensorActive, "tensor_active"},
      {CounterMetric::kDramBandwidth, "dram_bandwidth"}};
  uint64_t t0 = UINT64_MAX, t1 = 0;
  for (const auto& [metric, pts] : g.series) {
    if (pts.empty()) continue;
    t0 = std::min(t0, pts.front().start_ns);
    for (const CounterPoint& p : pts) t1 = std::max(t1, p.end_ns);
  }
  const int w = 900, h = 210;
  std::string s = "<svg class=plot id=plot-counters-" + id + " width=" + std::to_string(w) +
                  " height=" + std::to_string(h) + " xmlns='http://www.w3.org/2000/svg'>";
  Frame f;
  f.left = 50;
  f.right = w - 140;
  f.top = 10;
  f.bottom = h - 40;
  f.x0 = 0;
  f.x1 = t1 > t0 ? static_cast<double>(t1 - t0) : 1;
  f.y0 = 0;
  f.y1 = 100;
  s += Axes(
      f, Ticks(0, f.x1, 8), [](double v) { return TickDuration(v); },
      std::vector<double>{0, 25, 50, 75, 100}, [](double v) { return F("%g %%", v); },
      "time from the first sample", "");
  int line = 0;
  for (const auto& [metric, label] : kLines) {
    auto it = g.series.find(static_cast<uint16_t>(metric));
    const char* color = kPalette[line % 8];
    s += "<text x=" + std::to_string(w - 125) + " y=" + std::to_string(20 + 13 * line++) +
         " font-size=11 fill='" + color + "'>" + label + "</text>";
    if (it == g.series.end()) continue;
    // At most one point per pixel column (a long run has ~10 samples a second):
    // each column's samples averaged, weighted by length.
    std::vector<double> sum(w, 0), weight(w, 0);
    for (const CounterPoint& p : it->second) {
      const double mid =
          (static_cast<double>(p.start_ns - t0) + static_cast<double>(p.end_ns - t0)) / 2;
      const size_t x = std::min<size_t>(w - 1, static_cast<size_t>(f.X(mid)));
      const double len = static_cast<double>(p.end_ns - p.start_ns);
      sum[x] += std::clamp(p.value, 0.0, 100.0) * len;
      weight[x] += len;
    }
    std::string pts;
    for (int x = 0; x < w; ++x) {
      if (weight[x] > 0) pts += std::to_string(x) + "," + F("%.1f", f.Y(sum[x] / weight[x])) + " ";
    }
    s += "<polyline fill=none stroke='" + std::string(color) + "' stroke-width=1.5 points='" + pts +
         "'/>";
  }
  return s + "</svg>";
}

std::string P(double pct) { return pct < 0 ? "-" : F("%.1f", pct); }

// The numbers behind a verdict, as table cells.
std::string VerdictCells(const CounterVerdict& v) {
  return "<td class=l><b>" + E(VerdictName(v.verdict)) + "</b></td><td>" + P(v.busy_pct) +
         "</td><td>" + P(v.compute_pct) +
         (v.compute_pipe.empty() ? "" : " (" + E(v.compute_pipe) + ")") + "</td><td>" +
         P(v.memory_pct) + "</td><td>" + P(v.sm_active_pct) + "</td><td>" + P(v.occupancy_pct) +
         "</td><td class=l>" + E(v.action.empty() ? v.why : v.action) + "</td>";
}
const char* kVerdictHeads =
    "<th class=l>verdict</th><th>busy %</th><th>compute %</th><th>memory %</th><th>sm_active "
    "%</th><th>occupancy %</th><th class=l>action / why none</th>";

std::string TorchSection(const Report& r) {
  const TorchAnalysis& a = r.torch;
  std::string o = "<section id=torch><h2>PyTorch: modules and operators</h2>";
  if (!a.present) return o + "<p class=muted>" + E(a.note) + "</p></section>\n";
  const double per = a.steps > 0 ? static_cast<double>(a.steps) : 1.0;
  auto d = [&](uint64_t ns) { return D(static_cast<double>(ns) / per); };
  o += "<p>GPU time of kernels launched inside PyTorch operators, " +
       std::string(a.steps > 0 ? "per captured step (" + std::to_string(a.steps) +
                                     " rank-steps in capture windows)"
                               : "over the run") +
       ": forward " + d(a.forward_ns) + ", backward " + d(a.backward_ns) + ", optimizer " +
       d(a.optimizer_ns) + ", other " + d(a.other_ns) + ". " + std::to_string(a.attributed) +
       " of " + std::to_string(a.kernels) +
       " kernels were launched inside an operator. A backward kernel counts for the module of "
       "the forward operator with its autograd node's sequence number (docs/pytorch.md).</p>";
  o += "<h3>Modules</h3><table id=torch-modules><tr><th class=l>module</th><th>GPU time</th>"
       "<th>forward</th><th>backward</th><th>kernels</th><th class=l>top kernels</th>" +
       std::string(kVerdictHeads) + "</tr>";
  for (const TorchModule& m : a.modules) {
    std::string top;
    for (const auto& [name, ns] : m.top_kernels)
      top += (top.empty() ? "" : "<br>") + E(name.substr(0, 80)) + " (" + d(ns) + ")";
    o += "<tr><td class=l>" + E(m.path) + "</td><td>" + d(m.gpu_ns) + "</td><td>" +
         d(m.forward_ns) + "</td><td>" + d(m.backward_ns) + "</td><td>" +
         std::to_string(m.kernels) + "</td><td class=l>" + top + "</td>" + VerdictCells(m.verdict) +
         "</tr>";
  }
  o += "</table><h3>Operators</h3><table id=torch-operators><tr><th class=l>operator</th>"
       "<th>GPU time</th><th>kernels</th><th class=l>top kernel</th></tr>";
  for (const TorchOperator& op : a.operators)
    o += "<tr><td class=l>" + E(op.name) + "</td><td>" + d(op.gpu_ns) + "</td><td>" +
         std::to_string(op.kernels) + "</td><td class=l>" + E(op.top_kernel.substr(0, 120)) +
         "</td></tr>";
  return o + "</table></section>\n";
}

// Only for a timeline with XLA's ranges (a JAX program).
std::string XlaSection(const Report& r) {
  const XlaAnalysis& a = r.xla;
  if (!a.present) return "";
  const double per = a.steps > 0 ? static_cast<double>(a.steps) : 1.0;
  auto d = [&](uint64_t ns) { return D(static_cast<double>(ns) / per); };
  std::string o = "<section id=xla><h2>JAX / XLA: modules and HLO instructions</h2>";
  o += "<p>GPU time of kernels launched inside XLA's executions, " +
       std::string(a.steps > 0 ? "per step (" + std::to_string(a.steps) + " rank-steps)"
                               : "over the run") +
       ". " + std::to_string(a.attributed) + " of the program's " +
       std::to_string(a.program_kernels) +
       " kernels were launched inside one of its module executions or thunks; " +
       std::to_string(a.compile_kernels) + " more (" + D(static_cast<double>(a.compile_kernel_ns)) +
       ") ran while XLA compiled (its autotuner), counted as compile time. A kernel's "
       "instruction is the thunk open on its launch call's thread (docs/jax.md).</p>";
  o += "<h3>Modules</h3><table id=xla-modules><tr><th class=l>module</th><th>GPU time</th>"
       "<th>executions</th><th>kernels</th><th class=l>top kernels</th>" +
       std::string(kVerdictHeads) + "</tr>";
  for (size_t i = 0; i < a.modules.size(); ++i) {
    const TorchModule& m = a.modules[i];
    std::string top;
    for (const auto& [name, ns] : m.top_kernels)
      top += (top.empty() ? "" : "<br>") + E(name.substr(0, 80)) + " (" + d(ns) + ")";
    o += "<tr><td class=l>" + E(m.path) + "</td><td>" + d(m.gpu_ns) + "</td><td>" +
         std::to_string(a.module_executions[i]) + "</td><td>" + std::to_string(m.kernels) +
         "</td><td class=l>" + top + "</td>" + VerdictCells(m.verdict) + "</tr>";
  }
  o += "</table><h3>HLO instructions</h3><table id=xla-instructions><tr><th class=l>module</th>"
       "<th class=l>instruction</th><th class=l>JAX operation</th><th>GPU time</th>"
       "<th>kernels</th><th class=l>top kernel</th></tr>";
  for (const XlaInstruction& h : a.instructions)
    o += "<tr><td class=l>" + E(h.module) + "</td><td class=l>" + E(h.hlo_op) +
         "</td><td class=l>" + E(h.jax_op.substr(0, 120)) + "</td><td>" + d(h.gpu_ns) +
         "</td><td>" + std::to_string(h.kernels) + "</td><td class=l>" +
         E(h.top_kernel.substr(0, 120)) + "</td></tr>";
  return o + "</table></section>\n";
}

std::string CountersSection(const Report& r) {
  const CounterAnalysis& c = r.counters;
  std::string o = "<section id=counters><h2>GPU counters: why is it slow</h2>";
  if (!c.present) return o + "<p class=muted>" + E(c.note) + "</p></section>\n";
  if (c.synthetic)
    o += "<div class=synthetic>SYNTHETIC: these counters are FAKE (the labeled fake NVML).</div>";
  o += "<p class=muted>Verdicts: busy = gpu_active (else sm_active); busy &lt; 50 %: "
       "launch-bound, or for a phase host-bound when most of the trace's GPU gaps in it are "
       "host work outside CUDA calls, host synchronization or synchronous copies; compute (busiest "
       "of tensor/fp16/fp32/fp64/SM issue) &ge; 60 % and &ge; "
       "memory: "
       "compute-bound; else DRAM bandwidth &ge; 60 %: memory-bound; else latency-bound. A phase "
       "needs 2 sample intervals of overlap; PM samples (capture windows) are used where they "
       "cover it, else the node's GPM metrics; interval counts marked (pm) are PM samples "
       "(docs/counters.md).</p>";
  if (!c.note.empty()) o += "<p class=note>" + E(c.note) + "</p>";
  // The run's means mix every phase: numbers only, the verdicts are per phase.
  o += "<table><tr><th>GPU</th><th class=l>host</th><th class=l>UUID</th><th>source</th><th "
       "class=l>ranks</th><th>interval</th><th>busy % (run)</th><th>compute %</th><th>memory "
       "%</th><th>sm_active %</th><th>occupancy %</th></tr>";
  for (const CounterGpu& g : c.gpus) {
    std::string ranks;
    for (uint32_t q : g.ranks) ranks += (ranks.empty() ? "" : " ") + std::to_string(q);
    o += "<tr><td>" + std::to_string(g.device) + "</td><td class=l>" + E(g.host) +
         "</td><td class=l>" + E(g.uuid_text) + "</td><td>" + E(g.source) + "</td><td class=l>" +
         ranks + (g.assumed ? " (assumed)" : "") + "</td><td>" +
         D(static_cast<double>(g.interval_ns)) + "</td><td>" + P(g.run.busy_pct) + "</td><td>" +
         P(g.run.compute_pct) +
         (g.run.compute_pipe.empty() ? "" : " (" + E(g.run.compute_pipe) + ")") + "</td><td>" +
         P(g.run.memory_pct) + "</td><td>" + P(g.run.sm_active_pct) + "</td><td>" +
         P(g.run.occupancy_pct) + "</td></tr>";
  }
  o += "</table>";
  // Plot ids: plot-counters-<NVML index>, or -<index>-<position> when several
  // hosts have a GPU of that index.
  constexpr size_t kMaxPlots = 16;
  if (c.gpus.size() > kMaxPlots)
    o += "<p class=muted>Plots of the first " + std::to_string(kMaxPlots) + " GPUs of " +
         std::to_string(c.gpus.size()) + ".</p>";
  for (size_t i = 0; i < c.gpus.size() && i < kMaxPlots; ++i) {
    size_t same = 0;
    for (const CounterGpu& g : c.gpus) same += g.device == c.gpus[i].device;
    const std::string id =
        std::to_string(c.gpus[i].device) + (same > 1 ? "-" + std::to_string(i) : "");
    std::string ranks;
    for (uint32_t q : c.gpus[i].ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(q);
    if (!ranks.empty()) ranks = (c.gpus[i].ranks.size() > 1 ? " (ranks " : " (rank ") + ranks + ")";
    o += "<h3>GPU " + std::to_string(c.gpus[i].device) + " on " + E(c.gpus[i].host) + ranks + ": " +
         E(c.gpus[i].source) + (c.gpus[i].sampled ? " (capture windows)" : "") + ", every " +
         FormatDuration(static_cast<double>(c.gpus[i].interval_ns)) + "</h3>" +
         CounterPlot(c.gpus[i], id);
  }
  o += "<h3>NVTX phases</h3><table id=counter-phases><tr><th class=l>phase</th><th>time (busiest "
       "rank)</th><th>instances</th><th>intervals</th>" +
       std::string(kVerdictHeads) + "</tr>";
  for (size_t i = 0; i < c.phases.size() && i < 40; ++i) {
    const CounterPhase& p = c.phases[i];
    o += "<tr><td class=l>" + E(p.name) + "</td><td>" + D(p.seconds * 1e9) + "</td><td>" +
         std::to_string(p.instances) + "</td><td>" + F("%.1f", p.intervals) +
         (p.sampled ? " (pm)" : "") + "</td>" + VerdictCells(p.verdict) + "</tr>";
  }
  o += "</table><h3>Kernels</h3><table id=counter-kernels><tr><th class=l>kernel</th><th>intervals "
       "&ge; 80 %</th>" +
       std::string(kVerdictHeads) + "</tr>";
  for (const CounterKernel& k : c.kernels) {
    o += "<tr><td class=l>" + E(k.name.substr(0, 120)) + "</td><td>" + std::to_string(k.intervals) +
         (k.sampled ? " (pm)" : "") + "</td>" + VerdictCells(k.verdict) + "</tr>";
  }
  return o + "</table></section>\n";
}

// The document head: title and inline CSS.
// A flame graph of host stack samples, drawn with nested boxes (no script):
// the outermost frames on top, each box as wide as its share of its parent's
// samples; boxes under half a percent of all samples are left out.
struct FlameNode {
  uint64_t n = 0;
  std::map<std::string, FlameNode> children;
};

std::string FlameColor(const std::string& frame) {
  uint32_t h = 2166136261u;
  for (unsigned char c : frame.substr(0, frame.find(" ("))) h = (h ^ c) * 16777619u;
  const bool native = frame.rfind("[native] ", 0) == 0;
  return native ? F("hsl(%u,35%%,72%%)", 200 + h % 40) : F("hsl(%u,80%%,65%%)", 10 + h % 45);
}

void FlameBoxes(const FlameNode& node, uint64_t total, int depth, std::string* o) {
  std::vector<std::pair<uint64_t, const std::string*>> order;
  for (const auto& [frame, child] : node.children) order.emplace_back(child.n, &frame);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : *a.second < *b.second;
  });
  *o += "<div class=fc>";
  for (const auto& [n, frame] : order) {
    if (n * 200 < total || depth > 64) break;
    const FlameNode& child = node.children.at(*frame);
    *o += "<div class=fn style='width:" +
          F("%.3f", 100.0 * static_cast<double>(n) / static_cast<double>(node.n)) +
          "%'><div class=fl style='background:" + FlameColor(*frame) + "' title='" + E(*frame) +
          ": " + std::to_string(n) + " samples (" + Pct(static_cast<double>(n), total) + ")'>" +
          E(*frame) + "</div>";
    FlameBoxes(child, total, depth + 1, o);
    *o += "</div>";
  }
  *o += "</div>";
}

// A frame as the flame graph merges it: a Python frame by function and file
// ("step (train.py)": its lines apart would split one function into many
// boxes), a native frame without an offset by its module.
std::string FlameKey(std::string_view frame) {
  if (const std::optional<PythonFrame> py = ParsePythonFrame(frame))
    return py->FunctionAndFileName() + ")";
  const size_t plus = frame.rfind("+0x");
  if (frame.rfind("[native] ", 0) == 0 && plus != std::string_view::npos &&
      frame.find(" (") == std::string_view::npos)
    return std::string(frame.substr(0, plus));
  return std::string(frame);
}

std::string FlameGraph(const std::map<std::string, uint64_t>& stacks) {
  FlameNode root;
  for (const auto& [stack, n] : stacks) {
    root.n += n;
    FlameNode* node = &root;
    size_t from = 0;
    while (from <= stack.size()) {
      size_t end = stack.find('\n', from);
      if (end == std::string::npos) end = stack.size();
      node = &node->children[FlameKey(std::string_view(stack).substr(from, end - from))];
      node->n += n;
      from = end + 1;
    }
  }
  std::string o = "<div class=flame>";
  FlameBoxes(root, root.n, 0, &o);
  return o + "</div>";
}

// Host stack samples (docs/host-sampling.md): what the application's threads
// ran while the GPU idled, and in the capture windows as a whole.
std::string HostSamplesSection(const Report& r) {
  if (r.idle.all_stacks.empty()) return "";
  uint64_t gap = 0, all = 0;
  for (const auto& [stack, n] : r.idle.gap_stacks) gap += n;
  for (const auto& [stack, n] : r.idle.all_stacks) all += n;
  std::string o =
      "<section id=host-samples><h2>Host stack samples: what the host ran</h2><p "
      "class=muted>Stacks of the application's threads, sampled on their CPU time in capture "
      "windows (a waiting thread is not sampled), every rank. Outermost frames on top, a Python "
      "function's lines merged; each box as wide as its share of its parent's samples (boxes "
      "under 0.5 % of all are left out); hover for counts. The findings name the lines.</p>";
  o += "<h3>While the GPU idled (" + std::to_string(gap) + " samples in GPU gaps)</h3>";
  o += gap > 0 ? FlameGraph(r.idle.gap_stacks) : "<p class=muted>none</p>";
  o += "<h3>All samples (" + std::to_string(all) + ")</h3>" + FlameGraph(r.idle.all_stacks);
  return o + "</section>\n";
}

std::string HtmlHead(const Report& r) {
  std::string o;
  o += "<!DOCTYPE html>\n<html lang=en><head><meta charset='utf-8'><title>AON report: " +
       E(r.job_id) +
       "</title>\n<style>body{font-family:sans-serif;margin:24px;max-width:1360px;color:#222}"
       "table{border-collapse:collapse;font-size:12px;margin:8px 0}td,th{border:1px solid "
       "#ccc;padding:3px 5px;white-space:nowrap;"
       "text-align:right}td.l,th.l{text-align:left;white-space:normal;max-width:560px;overflow-"
       "wrap:anywhere}th{background:#eef}h2{border-bottom:2px solid #446;margin-top:32px}"
       ".synthetic{background:#c00;color:#fff;padding:8px;font-weight:bold;font-size:18px}.muted{"
       "color:#777}"
       ".finding{border-left:5px solid #d62728;background:#fff6f6;padding:6px 12px;margin:8px 0}"
       ".gain{font-weight:bold;color:#a00}.cost{font-size:15px;background:#eef6ff;padding:6px "
       "10px}.note{background:#ffd;padding:4px 8px;margin:4px 0}"
       ".lost{border-left:5px solid #c60;background:#fff3e6;padding:4px 10px;margin:8px 0}"
       "code{font-size:12px}.flame{font-size:11px;border:1px solid #ccc;margin:6px 0}"
       ".fc{display:flex}.fn{min-width:0;overflow:hidden}.fl{white-space:nowrap;overflow:hidden;"
       "text-overflow:ellipsis;border:1px solid #fff;padding:1px 2px;height:15px}"
       "</style></head><body>\n";
  return o;
}

// Summary: cost statement, run facts, notes and the utilization heat strip.
std::string SummarySection(const Report& r) {
  std::string o;
  o += "<section id=summary><h1>AON post-mortem report</h1>\n";
  if (r.synthetic) {
    o += "<div class=synthetic>SYNTHETIC: the GPU activity in this timeline is FAKE (generated by "
         "AON's synthetic device, without a GPU).</div>\n";
  }
  // What profiling cost comes first (docs/always-on.md).
  if (!r.capture.statement.empty()) o += "<p class=cost>" + E(r.capture.statement) + "</p>\n";
  if (!r.loss.ranks.empty()) {
    // What was lost, per rank and kind, before any figure built on what was kept.
    o += "<div class=lost id=lost><p>" + E(r.loss.statement) +
         "</p><table><tr><th>rank</th><th class=l>records</th><th>kept</th><th>lost</th>"
         "<th>share lost</th><th class=l>why</th></tr>\n";
    for (const RankLoss& q : r.loss.ranks) {
      if (!q.collector_lost.empty()) {
        o += "<tr><td>" + std::to_string(q.rank) +
             "</td><td class=l>all kinds</td><td>-</td><td>-</td><td>-</td><td class=l>collector "
             "lost: " +
             E(q.collector_lost) + "</td></tr>\n";
      }
      if (q.kinds.empty() && q.dropped > 0) {
        o += "<tr><td>" + std::to_string(q.rank) + "</td><td class=l>all kinds</td><td>-</td><td>" +
             std::to_string(q.dropped) +
             "</td><td>-</td><td class=l>not said (older timeline)"
             "</td></tr>\n";
      }
      for (const KindLoss& k : q.kinds) {
        char share[32];
        std::snprintf(share, sizeof share, "%.3g %%", 100 * k.share());
        o += "<tr><td>" + std::to_string(q.rank) + "</td><td class=l>" + RecordKindName(k.kind) +
             "</td><td>" + std::to_string(k.kept) + "</td><td>" + std::to_string(k.dropped) +
             "</td><td>" + share + "</td><td class=l>" + E(k.why()) + "</td></tr>\n";
      }
    }
    o += "</table></div>\n";
  }
  uint32_t ok = 0;
  for (const RankInfo& i : r.ranks) ok += i.status == RankStatus::kOk;
  o += "<table><tr><th class=l>job</th><td class=l>" + E(r.job_id) +
       "</td></tr><tr><th class=l>timeline</th><td class=l>" + E(r.path) +
       "</td></tr><tr><th class=l>ranks</th><td class=l>" + std::to_string(r.world_size) + " (" +
       std::to_string(ok) + " ok)</td></tr><tr><th class=l>GPU</th><td class=l>" +
       E(GpuActivitySummary(r)) + "</td></tr><tr><th class=l>source</th><td class=l>" +
       E(r.source) + "</td></tr><tr><th class=l>steps</th><td class=l>" +
       std::to_string(r.steps.typical_count) + " (" + E(r.steps.method) +
       ")</td></tr><tr><th class=l>collectives</th><td class=l>" +
       std::to_string(r.comm.collectives.size()) + " (" + E(r.comm.source) +
       ")</td></tr><tr><th class=l>clock</th><td class=l>" +
       (r.clock_synchronized ? "synchronized" : "not synchronized across hosts") +
       (r.clock_note.empty() ? "" : ": " + E(r.clock_note)) +
       "</td></tr><tr><th class=l>records</th><td class=l>" + std::to_string(r.records) +
       "</td></tr></table>\n";
  for (const std::string& n : r.notes) o += "<div class=note>" + E(n) + "</div>\n";
  for (const std::string& p : r.problems)
    o += "<div class=note>merge problem: " + E(p) + "</div>\n";
  o += CaptureTable(r);
  o += "<h3>GPU utilization per rank over time</h3>" + HeatStrip(r) + "</section>\n";
  return o;
}

// Findings, by estimated time to gain.
std::string FindingsSection(const Report& r) {
  std::string o;
  o += "<section id=findings><h2>Findings, by estimated time to gain</h2>\n";
  if (r.findings.empty()) o += "<p>No finding above 0.2 % of the run.</p>";
  for (size_t i = 0; i < r.findings.size(); ++i) {
    const Finding& f = r.findings[i];
    o += "<div class=finding><b>" + std::to_string(i + 1) + ". " + E(f.action) +
         "</b><br><span class=gain>" +
         (f.gain_ns ? "gain ~" + D(static_cast<double>(f.gain_ns))
                    : std::string("gain not estimated")) +
         (f.gain_per_step_ns > 0 ? " (" + D(f.gain_per_step_ns) + " per step)" : "") +
         "</span> &middot; <code>" + E(f.kind) + "</code><br>evidence: " + E(f.evidence) +
         "</div>\n";
  }
  o += "</section>\n";
  return o;
}

// GPU time breakdown per rank, with the step time plot.
std::string BreakdownSection(const Report& r) {
  std::string o;
  o += "<section id=gpu-breakdown><h2>GPU time breakdown per rank</h2>"
       "<p class=muted>Unions over all streams, between each rank's first and last GPU operation; "
       "per-step values are "
       "means over "
       "steps.</p><table><tr><th>rank</th><th>span</th><th>busy</th><th>compute</"
       "th><th>communication</th>"
       "<th>copies</th><th>memsets</th><th>idle</th><th>exposed "
       "comm</th><th>overlap</th><th>steps</th><th>step mean</th>"
       "<th>step "
       "max</th><th>busy/step</th><th>compute/step</th><th>comm/step</th><th>idle/step</th></tr>\n";
  for (const RankBreakdown& b : r.breakdown) {
    const double span = static_cast<double>(b.span_ns);
    o += "<tr><td>" + std::to_string(b.rank) + "</td><td>" + D(span) + "</td><td>" +
         Pct(static_cast<double>(b.busy_ns), span) + "</td><td>" +
         Pct(static_cast<double>(b.compute_ns), span) + "</td><td>" +
         Pct(static_cast<double>(b.comm_ns), span) + "</td><td>" +
         Pct(static_cast<double>(b.copy_ns), span) + "</td><td>" +
         Pct(static_cast<double>(b.memset_ns), span) + "</td><td>" +
         Pct(static_cast<double>(b.idle_ns), span) + "</td><td>" +
         D(static_cast<double>(b.exposed_comm_ns)) + "</td><td>" +
         (b.comm_ns ? F("%.0f %%", 100 * b.overlap_fraction) : "-") + "</td><td>" +
         std::to_string(b.steps) + "</td><td>" + D(b.step_mean_ns) + "</td><td>" +
         D(b.step_max_ns) + "</td><td>" + D(b.step_busy_ns) + "</td><td>" + D(b.step_compute_ns) +
         "</td><td>" + D(b.step_comm_ns) + "</td><td>" + D(b.step_idle_ns) + "</td></tr>\n";
  }
  o += "</table><h3>Step time per rank</h3>" + StepPlot(r) + "</section>\n";
  return o;
}

// Top kernels: bars, table and totals by family.
std::string KernelsSection(const Report& r) {
  std::string o;
  o += "<section id=kernels><h2>Top kernels</h2>" + KernelBars(r) +
       "<table><tr><th class=l>kernel</th><th "
       "class=l>family</th><th>count</th><th>total</th><th>mean</th><th>stddev</th>"
       "<th>min</th><th>max</th><th class=l>launch configuration</th></tr>\n";
  for (size_t i = 0; i < r.kernels.size() && i < 30; ++i) {
    const KernelStats& k = r.kernels[i];
    o += "<tr><td class=l title=\"" + E(k.name) + "\"><code>" +
         E(k.name.size() > 120 ? k.name.substr(0, 117) + "..." : k.name) +
         "</code></td><td class=l>" + KernelFamilyName(k.family) + "</td><td>" +
         std::to_string(k.count) + "</td><td>" + D(static_cast<double>(k.total_ns)) + "</td><td>" +
         D(k.mean_ns) + "</td><td>" + D(k.stddev_ns) + "</td><td>" +
         D(static_cast<double>(k.min_ns)) + "</td><td>" + D(static_cast<double>(k.max_ns)) +
         "</td><td class=l><code>" + E(k.launch_config) + "</code></td></tr>\n";
  }
  std::map<std::string, uint64_t> families;
  for (const KernelStats& k : r.kernels) families[KernelFamilyName(k.family)] += k.total_ns;
  o += "</table><p>By family: ";
  for (const auto& [fam, ns] : families) o += E(fam) + " " + D(static_cast<double>(ns)) + "; ";
  o += "</p></section>\n";
  return o;
}

// Communication: collective groups, exposed communication, bandwidth plot.
std::string CommunicationSection(const Report& r) {
  std::string o;
  o += "<section id=communication><h2>Communication</h2><p>Source: " + E(r.comm.source) +
       ". Transfer time = median end minus the last rank's arrival (waiting excluded); bus "
       "bandwidth per NCCL's "
       "definitions.</p><table><tr><th "
       "class=l>collective</th><th>size</th><th>ranks</th><th>count</th><th>mean transfer</th>"
       "<th>algbw GB/s</th><th>busbw GB/s</th><th class=l>algorithm</th><th "
       "class=l>protocol</th></tr>\n";
  for (const CommGroup& g : r.comm.groups) {
    o += "<tr><td class=l>" + E(g.type) + "</td><td>" +
         (g.bytes ? E(FormatBytes(static_cast<double>(g.bytes))) : "?") + "</td><td>" +
         std::to_string(g.nranks) + "</td><td>" + std::to_string(g.count) + "</td><td>" +
         D(g.mean_transfer_ns) + "</td><td>" + (g.bytes ? F("%.2f", g.algbw_gbps) : "-") +
         "</td><td>" + (g.bytes ? F("%.2f", g.busbw_gbps) : "-") + "</td><td class=l>" + E(g.algo) +
         "</td><td class=l>" + E(g.proto) + "</td></tr>\n";
  }
  o += "</table><h3>Exposed "
       "communication</h3><table><tr><th>rank</th><th>communication</th><th>exposed</"
       "th><th>overlap</th>"
       "<th>waiting for late ranks</th></tr>";
  for (const RankBreakdown& b : r.breakdown) {
    o += "<tr><td>" + std::to_string(b.rank) + "</td><td>" + D(static_cast<double>(b.comm_ns)) +
         "</td><td>" + D(static_cast<double>(b.exposed_comm_ns)) + "</td><td>" +
         (b.comm_ns ? F("%.0f %%", 100 * b.overlap_fraction) : "-") + "</td><td>" +
         D(static_cast<double>(r.comm.stragglers[b.rank].waited_ns)) + "</td></tr>";
  }
  o += "</table><h3>Bus bandwidth vs message size</h3>" + BandwidthPlot(r) + "</section>\n";
  return o;
}

// Stragglers: per rank table and straggler matrix.
std::string StragglersSection(const Report& r) {
  std::string o;
  o += "<section id=stragglers><h2>Stragglers</h2>";
  if (!r.comm.caveat.empty()) o += "<div class=note>" + E(r.comm.caveat) + "</div>";
  o += "<table><tr><th>rank</th><th>collectives</th><th>arrived last</th><th>share</th><th>others "
       "lost waiting</th>"
       "<th>lateness vs 2nd-last</th><th>own waiting</th></tr>";
  for (const StragglerStats& s : r.comm.stragglers) {
    o += "<tr><td>" + std::to_string(s.rank) + "</td><td>" + std::to_string(s.collectives) +
         "</td><td>" + std::to_string(s.last_count) + "</td><td>" +
         (s.collectives ? F("%.0f %%", 100 * s.last_fraction) : "-") + "</td><td>" +
         D(static_cast<double>(s.caused_lost_ns)) + "</td><td>" +
         D(static_cast<double>(s.gain_ns)) + "</td><td>" + D(static_cast<double>(s.waited_ns)) +
         "</td></tr>";
  }
  o += "</table><h3>Straggler matrix</h3>" + StragglerMatrix(r) + "</section>\n";
  return o;
}

// Idle gaps: totals per cause and rank, and the longest gaps.
std::string IdleSection(const Report& r) {
  std::string o;
  o +=
      "<section id=idle><h2>Idle and launch-bound phases</h2><p class=muted>GPU gaps of at least " +
      D(static_cast<double>(r.idle.min_gap_ns)) +
      " (host launched late: of at least 1 us) and their CPU-side cause; totals over the whole run "
      "(number of gaps). Findings use the "
      "steady state "
      "(median per step x steps).</p><table><tr><th>rank</th>";
  for (GapCause c : kGapCauses) o += "<th>" + E(GapCauseName(c)) + "</th>";
  o += "</tr>";
  for (uint32_t q = 0; q < r.idle.cause_ns.size(); ++q) {
    o += "<tr><td>" + std::to_string(q) + "</td>";
    for (GapCause c : kGapCauses) {
      auto it = r.idle.cause_ns[q].find(c);
      auto jt = r.idle.cause_count[q].find(c);
      o += "<td>" +
           (it == r.idle.cause_ns[q].end()
                ? std::string("-")
                : D(static_cast<double>(it->second)) + " (" + std::to_string(jt->second) + ")") +
           "</td>";
    }
    o += "</tr>";
  }
  o += "</table><h3>Longest gaps</h3><table><tr><th>rank</th><th>start</th><th>length</th><th "
       "class=l>cause</th>"
       "<th class=l>detail</th><th class=l>host range</th></tr>";
  for (const Gap& g : r.idle.top_gaps) {
    o += "<tr><td>" + std::to_string(g.rank) + "</td><td>" +
         D(static_cast<double>(g.start_ns - r.start_ns)) + "</td><td>" +
         D(static_cast<double>(g.length())) + "</td><td class=l>" + E(GapCauseName(g.cause)) +
         "</td><td class=l>" + E(g.detail) + "</td><td class=l>" + E(g.nvtx) + "</td></tr>";
  }
  o += "</table></section>\n";
  return o;
}

// Load imbalance and memory transfers per rank.
std::string ImbalanceSection(const Report& r) {
  std::string o;
  o += "<section id=imbalance><h2>Load imbalance and memory "
       "transfers</h2><table><tr><th>rank</th><th>compute</th>"
       "<th>vs mean</th><th>step mean</th><th>copies</th><th>copied</th><th>pageable "
       "copies</th><th>pageable bytes</th>"
       "<th>pageable time</th><th>small copies (&lt;64 KiB)</th><th>small copy time</th></tr>";
  double mean = 0;
  int n = 0;
  for (const RankBreakdown& b : r.breakdown) {
    if (b.has_gpu) mean += static_cast<double>(b.compute_ns), ++n;
  }
  if (n) mean /= n;
  for (const RankBreakdown& b : r.breakdown) {
    const MemoryRank& m = r.memory[b.rank];
    o += "<tr><td>" + std::to_string(b.rank) + "</td><td>" + D(static_cast<double>(b.compute_ns)) +
         "</td><td>" + (mean > 0 ? F("%+.1f %%", 100 * (b.compute_ns - mean) / mean) : "-") +
         "</td><td>" + D(b.step_mean_ns) + "</td><td>" + std::to_string(m.copies) + "</td><td>" +
         E(FormatBytes(static_cast<double>(m.copy_bytes))) + "</td><td>" +
         std::to_string(m.pageable_count) + "</td><td>" +
         E(FormatBytes(static_cast<double>(m.pageable_bytes))) + "</td><td>" +
         D(static_cast<double>(m.pageable_ns)) + "</td><td>" + std::to_string(m.small_count) +
         "</td><td>" + D(static_cast<double>(m.small_ns)) + "</td></tr>";
  }
  o += "</table></section>\n";
  return o;
}

// NVTX attribution: GPU time under each host range.
std::string NvtxSection(const Report& r) {
  std::string o;
  o += "<section id=nvtx><h2>NVTX attribution</h2><p class=muted>GPU time launched from inside "
       "each range (by the "
       "launching thread); digit runs in names are folded to #.</p><table><tr><th "
       "class=l>range</th><th>count</th>"
       "<th>range time (all ranks)</th><th>GPU time under it</th><th class=l>per rank: range time "
       "/ GPU time</th></tr>";
  for (size_t i = 0; i < r.nvtx.size() && i < 40; ++i) {
    const NvtxStat& s = r.nvtx[i];
    std::string per;
    for (uint32_t q = 0; q < r.world_size && q < 16; ++q) {
      auto a = s.per_rank_range_ns.find(q);
      auto b = s.per_rank_gpu_ns.find(q);
      if (a == s.per_rank_range_ns.end()) continue;
      per += "r" + std::to_string(q) + ": " + D(static_cast<double>(a->second)) + " / " +
             D(b == s.per_rank_gpu_ns.end() ? 0.0 : static_cast<double>(b->second)) + "; ";
    }
    o += "<tr><td class=l>" + E(s.name) + "</td><td>" + std::to_string(s.count) + "</td><td>" +
         D(static_cast<double>(s.range_ns)) + "</td><td>" + D(static_cast<double>(s.gpu_ns)) +
         "</td><td class=l>" + per + "</td></tr>";
  }
  o += "</table></section>\n";
  return o;
}

}  // namespace

std::string RenderHtml(const Report& r) {
  std::string o;
  for (auto* section : {HtmlHead, SummarySection, FindingsSection, BreakdownSection, KernelsSection,
                        CommunicationSection, StragglersSection, IdleSection, HostSamplesSection,
                        ImbalanceSection, NvtxSection, TorchSection, XlaSection, CountersSection})
    o += section(r);
  o += "<p class=muted>Generated by aon-report. Self-contained: no scripts, no "
       "network.</p></body></html>\n";
  return o;
}

}  // namespace aon::report
