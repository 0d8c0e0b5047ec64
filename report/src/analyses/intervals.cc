// Helpers shared by the analyses: unions of intervals, medians, steps.
#include <algorithm>
#include <cctype>

#include "analyses/analysis.h"

namespace aon::report {

std::vector<Interval> Union(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.end <= i.start) continue;
    if (!out.empty() && i.start <= out.back().end) {
      out.back().end = std::max(out.back().end, i.end);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

uint64_t TotalLength(const std::vector<Interval>& u) {
  uint64_t sum = 0;
  for (const Interval& i : u) sum += i.end - i.start;
  return sum;
}

uint64_t IntersectionLength(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  uint64_t sum = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const uint64_t lo = std::max(a[i].start, b[j].start);
    const uint64_t hi = std::min(a[i].end, b[j].end);
    if (hi > lo) sum += hi - lo;
    if (a[i].end < b[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return sum;
}

uint64_t LengthWithin(const std::vector<Interval>& u, Interval w) {
  auto it = std::lower_bound(u.begin(), u.end(), w.start,
                             [](const Interval& i, uint64_t t) { return i.end <= t; });
  uint64_t sum = 0;
  for (; it != u.end() && it->start < w.end; ++it) {
    const uint64_t lo = std::max(it->start, w.start), hi = std::min(it->end, w.end);
    if (hi > lo) sum += hi - lo;
  }
  return sum;
}
uint64_t SteadyTotal(std::vector<uint64_t> per_step) {
  if (per_step.empty()) return 0;
  std::sort(per_step.begin(), per_step.end());
  const size_t n = per_step.size(), m = n / 2;
  const double median = n % 2 ? static_cast<double>(per_step[m])
                              : (static_cast<double>(per_step[m - 1]) + per_step[m]) / 2;
  return static_cast<uint64_t>(median * static_cast<double>(n));
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool IsNcclKernelName(const std::string& name) { return name.rfind("nccl", 0) == 0; }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// Index of the window in `windows` (sorted by start) holding `at`, or -1.
int32_t StepOf(const std::vector<Interval>& windows, uint64_t at) {
  auto it = std::upper_bound(windows.begin(), windows.end(), at,
                             [](uint64_t tt, const Interval& w) { return tt < w.start; });
  if (it == windows.begin()) return -1;
  --it;
  return at < it->end ? static_cast<int32_t>(it - windows.begin()) : -1;
}

const std::vector<Interval>* StepWindows(const Steps* steps, uint32_t rank, bool gpu) {
  if (steps == nullptr) return nullptr;
  const std::vector<Interval>& v =
      gpu ? steps->GpuSteps(rank)
          : (rank < steps->per_rank.size() ? steps->per_rank[rank] : steps->GpuSteps(rank));
  return v.empty() ? nullptr : &v;
}

double RunScale(const Steps* steps, uint32_t rank, bool gpu) {
  const std::vector<Interval>* seen = StepWindows(steps, rank, gpu);
  if (seen == nullptr || rank >= steps->per_rank.size()) return 1.0;
  const size_t all = steps->per_rank[rank].size();
  return all > seen->size() ? static_cast<double>(all) / seen->size() : 1.0;
}

std::vector<std::pair<std::string, uint64_t>> TopKernels(
    const StringTable& strings, const std::map<uint32_t, uint64_t>& by_name, size_t n) {
  std::vector<std::pair<std::string, uint64_t>> v;
  for (const auto& [id, ns] : by_name) v.push_back({strings.Get(id), ns});
  std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) {
    return x.second != y.second ? x.second > y.second : x.first < y.first;
  });
  if (v.size() > n) v.resize(n);
  return v;
}

}  // namespace aon::report
