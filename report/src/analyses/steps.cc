// Steps: AON's step records (format 1.5, every step of every rank whatever was
// captured; the capture windows are the steps flagged captured) when present,
// else NVTX ranges named like steps ("step N", "iteration N", ...; the most
// frequent such name), else the kernel whose occurrences are most regular
// (coefficient of variation of the gaps < 0.25), one step per occurrence.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <utility>

#include "analyses/analysis.h"

namespace aon::report {

std::string NormalizeRangeName(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size();) {
    if (std::isdigit(static_cast<unsigned char>(name[i]))) {
      while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
      out += '#';
    } else {
      out += name[i++];
    }
  }
  return out;
}

bool IsStepRangeName(const std::string& normalized) {
  const std::string s = Lower(normalized);
  return s == "step #" || s == "iteration #" || s == "iter #" || s == "step_#" ||
         s == "iteration_#" || s == "train step #" || s == "train_step #" || s == "profilerstep#";
}

namespace {

// 0. AON's own step markers. A budgeted job's GPU records exist only inside
// windows: `captured` then holds the captured steps and `windowed` is set.
// Each rank's steps are those of the source that marked its last step: a more
// preferred source takes over for good, so steps of another source came before
// it (one-second time slots while a program loaded its model, say). Those are
// start-up, not steps: left out of step times and per-step GPU figures, and
// counted in `method`.
bool FromStepRecords(const Timeline& t, Steps* s) {
  if (t.steps.empty()) return false;
  std::vector<int> last_source(t.world_size, -1);
  std::vector<uint64_t> last_start(t.world_size, 0);
  for (const auto& m : t.steps) {
    if (m.rank >= t.world_size) continue;
    if (last_source[m.rank] < 0 || m.record.start_ns >= last_start[m.rank]) {
      last_source[m.rank] = m.record.source;
      last_start[m.rank] = m.record.start_ns;
    }
  }
  std::map<std::string, size_t> sources, earlier;
  bool all_captured = true;
  s->captured.assign(t.world_size, {});
  for (const auto& m : t.steps) {
    if (m.rank >= t.world_size || m.record.end_ns <= m.record.start_ns) continue;
    const char* source = EnumValueName(kStepSourceValues, m.record.source);
    if (m.record.source != last_source[m.rank]) {
      ++earlier[source ? source : "unknown"];
      continue;
    }
    const Interval w{m.record.start_ns, m.record.end_ns};
    s->per_rank[m.rank].push_back(w);
    if (m.record.flags & kStepCaptured) {
      s->captured[m.rank].push_back(w);
    } else {
      all_captured = false;
    }
    ++sources[source ? source : "unknown"];
  }
  std::string names;
  for (const auto& [name, count] : sources) names += (names.empty() ? "" : ", ") + name;
  std::string before;
  for (const auto& [name, count] : earlier) {
    before += (before.empty() ? "" : ", ") + std::to_string(count) + " " + name;
  }
  s->method = "AON step markers (" + names + ")";
  if (!before.empty()) s->method += "; start-up left out: " + before + " steps before them";
  s->windowed = !all_captured;
  return true;
}

// Steps::edge: a captured step is a window's edge when the step before it on
// its rank was not captured (a lead-in; or it is the rank's first step of a
// windowed job), or the step after it was not (or it is the rank's last step);
// none are where every captured step is one.
void MarkWindowEdges(Steps* s) {
  s->edge.assign(s->captured.size(), {});
  if (!s->windowed) return;
  for (size_t r = 0; r < s->captured.size(); ++r) {
    const std::vector<Interval>& all = r < s->per_rank.size() ? s->per_rank[r] : s->captured[r];
    const std::vector<Interval>& cap = s->captured[r];
    std::vector<bool>& edge = s->edge[r];
    std::vector<bool> lead(cap.size(), true);
    edge.assign(cap.size(), true);
    size_t j = 0, longer = 0;  // j: index in `all` of cap[i]; windows of 2+ steps
    for (size_t i = 0; i < cap.size(); ++i) {
      while (j < all.size() && all[j].start < cap[i].start) ++j;
      const bool after_captured = i > 0 && j > 0 && all[j - 1].start == cap[i - 1].start;
      const bool before_captured =
          i + 1 < cap.size() && j + 1 < all.size() && all[j + 1].start == cap[i + 1].start;
      lead[i] = !after_captured;
      longer += lead[i] && before_captured;
      edge[i] = !(after_captured && before_captured);
    }
    // Windows of two steps (AON_CAPTURE_STEPS=2) have no whole step: when most
    // windows of several steps have none, only lead-ins are left out (their
    // last steps, the better half); with windows of one step only, every step
    // counts.
    const auto whole = static_cast<size_t>(std::count(edge.begin(), edge.end(), false));
    if (2 * whole < longer) edge = lead;
    if (std::all_of(edge.begin(), edge.end(), [](bool b) { return b; }))
      edge.assign(cap.size(), false);
  }
}

}  // namespace

bool Steps::Whole(uint32_t rank, size_t i) const {
  return rank >= edge.size() || i >= edge[rank].size() || !edge[rank][i];
}

const std::vector<Interval>& Steps::GpuSteps(uint32_t rank) const {
  static const std::vector<Interval> kNone;
  const auto& v = windowed ? captured : per_rank;
  return rank < v.size() ? v[rank] : kNone;
}

Steps DetectSteps(const Timeline& t) {
  Steps s;
  s.per_rank.resize(t.world_size);
  if (FromStepRecords(t, &s)) {
    // done: AON's markers win over anything guessed from the records
  } else {
    // 1. NVTX ranges named like steps (outermost such name per rank).
    std::map<std::string, size_t> step_names;
    for (const auto& m : t.nvtx) {
      if (m.record.type == static_cast<uint8_t>(NvtxType::kMark)) continue;
      const std::string n = NormalizeRangeName(t.strings.Get(m.record.name_id));
      if (IsStepRangeName(n)) ++step_names[n];
    }
    if (!step_names.empty()) {
      std::string best;
      size_t best_count = 0;
      for (const auto& [name, count] : step_names) {
        if (count > best_count) best = name, best_count = count;
      }
      for (const auto& m : t.nvtx) {
        if (m.record.type == static_cast<uint8_t>(NvtxType::kMark)) continue;
        if (NormalizeRangeName(t.strings.Get(m.record.name_id)) != best) continue;
        if (m.record.end_ns > m.record.start_ns)
          s.per_rank[m.rank].push_back({m.record.start_ns, m.record.end_ns});
      }
      s.method = "NVTX ranges \"" + best + "\"";
    } else {
      // 2. The kernel that repeats most regularly: smallest coefficient of variation of
      // the gaps between its occurrences (a kernel launched once per step is regular,
      // one launched several times per step is not). Decided on the whole timeline.
      std::map<std::pair<uint32_t, uint32_t>, std::vector<uint64_t>> starts;  // (name, rank)
      for (const auto& k : t.kernels)
        starts[{k.record.name_id, k.rank}].push_back(k.record.start_ns);
      std::map<uint32_t, std::vector<double>> cvs;
      for (const auto& [key, v] : starts) {
        if (v.size() < 3) continue;
        std::vector<double> gaps;
        for (size_t i = 1; i < v.size(); ++i) gaps.push_back(static_cast<double>(v[i] - v[i - 1]));
        const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / gaps.size();
        double var = 0;
        for (double g : gaps) var += (g - mean) * (g - mean);
        var /= gaps.size();
        cvs[key.first].push_back(mean > 0 ? std::sqrt(var) / mean : 1e9);
      }
      uint32_t best = 0;
      bool found = false;
      double best_cv = 0.25;  // above this nothing looks periodic
      for (const auto& [name, v] : cvs) {
        const double cv = Median(v);
        if (cv < best_cv) best = name, best_cv = cv, found = true;
      }
      if (found) {
        {
          for (uint32_t r = 0; r < t.world_size; ++r) {
            auto it = starts.find({best, r});
            if (it == starts.end()) continue;
            const std::vector<uint64_t>& v = it->second;
            for (size_t i = 0; i + 1 < v.size(); ++i) s.per_rank[r].push_back({v[i], v[i + 1]});
          }
          s.method = "repeating kernel " + t.strings.Get(best).substr(0, 60);
        }
      }
    }
  }
  if (s.method.empty()) s.method = "none";
  std::vector<double> counts;
  auto by_start = [](const Interval& a, const Interval& b) { return a.start < b.start; };
  for (auto& v : s.per_rank) {
    std::sort(v.begin(), v.end(), by_start);
    if (!v.empty()) counts.push_back(static_cast<double>(v.size()));
  }
  if (!s.windowed) s.captured = s.per_rank;
  for (auto& v : s.captured) std::sort(v.begin(), v.end(), by_start);
  MarkWindowEdges(&s);
  s.typical_count = static_cast<size_t>(Median(counts));
  return s;
}

const Analysis kStepsAnalysis = {"steps", "", "steps",
                                 [](const Timeline& t, Report* r) { r->steps = DetectSteps(t); }};

}  // namespace aon::report
