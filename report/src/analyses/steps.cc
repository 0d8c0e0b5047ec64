// Steps: NVTX ranges named like steps ("step N", "iteration N", ...; the most
// frequent such name) when present, else the kernel whose occurrences are most
// regular (coefficient of variation of the gaps < 0.25), one step per occurrence.
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

namespace {

bool IsStepRangeName(const std::string& normalized) {
  const std::string s = Lower(normalized);
  return s == "step #" || s == "iteration #" || s == "iter #" || s == "step_#" ||
         s == "iteration_#" || s == "train step #" || s == "train_step #" || s == "profilerstep#";
}

}  // namespace

Steps DetectSteps(const Timeline& t) {
  Steps s;
  s.per_rank.resize(t.world_size);
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
    for (const auto& k : t.kernels) starts[{k.record.name_id, k.rank}].push_back(k.record.start_ns);
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
  if (s.method.empty()) s.method = "none";
  std::vector<double> counts;
  for (auto& v : s.per_rank) {
    std::sort(v.begin(), v.end(),
              [](const Interval& a, const Interval& b) { return a.start < b.start; });
    if (!v.empty()) counts.push_back(static_cast<double>(v.size()));
  }
  s.typical_count = static_cast<size_t>(Median(counts));
  return s;
}

const Analysis kStepsAnalysis = {"steps", "", "steps",
                                 [](const Timeline& t, Report* r) { r->steps = DetectSteps(t); }};

}  // namespace aon::report
