// Utilization heat strip: per rank, the fraction of each of Report::kHeatBins
// equal bins of the GPU activity window [start_ns, end_ns) (first to last GPU
// operation over all ranks) during which the rank's GPU was busy.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "analyses/analysis.h"

namespace aon::report {

namespace {

void HeatStrip(const Timeline& t, Report* r) {
  const std::vector<std::vector<Interval>> busy = GpuBusyUnions(t);
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& u : busy) {
    if (u.empty()) continue;
    lo = std::min(lo, u.front().start);
    hi = std::max(hi, u.back().end);
  }
  if (hi <= lo) return;
  r->start_ns = lo;
  r->end_ns = hi;
  const double width = static_cast<double>(hi - lo) / Report::kHeatBins;
  for (const auto& u : busy) {
    std::vector<float> row(Report::kHeatBins, 0.0f);
    for (int b = 0; b < Report::kHeatBins && !u.empty(); ++b) {
      const Interval w{lo + static_cast<uint64_t>(b * width),
                       lo + static_cast<uint64_t>((b + 1) * width)};
      if (w.end > w.start)
        row[b] = static_cast<float>(LengthWithin(u, w)) / static_cast<float>(w.end - w.start);
    }
    r->heat.push_back(std::move(row));
  }
}

}  // namespace

const Analysis kHeatAnalysis = {"heat", "", "start_ns, end_ns, heat", HeatStrip};

}  // namespace aon::report
