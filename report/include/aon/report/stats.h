// Summary tables of a merged timeline, as `nsys stats` gives them: per name
// (kernel, copy direction, CUDA call, NVTX range, NCCL function, operator,
// step), the time it took, its share of the table's time, count, mean, median,
// min, max and standard deviation, over the job or per rank; as a text table,
// CSV or JSON (aon-stats).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aon/base/status.h"
#include "aon/report/report.h"

namespace aon::report {

enum class StatsReport : uint8_t { kKernels, kMemcpy, kMemset, kSync, kApi, kNvtx, kNccl, kOps, kSteps };
// "kernels", "memcpy", ...: the names aon-stats --report takes.
std::span<const std::string_view> StatsReportNames();
StatusOr<StatsReport> ParseStatsReport(std::string_view name);

struct StatsRow {
  std::string name;
  int64_t rank = -1;  // -1: every rank
  uint64_t count = 0;
  uint64_t total_ns = 0, min_ns = 0, max_ns = 0;
  double mean_ns = 0, median_ns = 0, stddev_ns = 0;  // stddev: of the sample (n - 1)
  double share = 0;    // of the table's total time (per rank: of that rank's)
  uint64_t bytes = 0;  // copies and memsets; 0 elsewhere
};

struct StatsTable {
  StatsReport report = StatsReport::kKernels;
  std::string title;  // "GPU kernels", ...
  // What the rows cover: the whole run, or (budgeted mode, CUPTI kinds) the
  // steps inside capture windows only, said with their number.
  std::string coverage;
  std::vector<StatsRow> rows;  // by total time, longest first (per rank: by rank first)
};

// Durations are end - start of each record of the report's kind (NVTX marks,
// which have none, are left out; NCCL: collectives and point-to-point
// operations, not their channels, API calls or proxy rows).
StatsTable ComputeStats(const Timeline& t, StatsReport report, bool per_rank);

std::string RenderStatsText(const StatsTable& table, size_t top);  // top 0: every row
std::string RenderStatsCsv(const StatsTable& table);
std::string RenderStatsJson(const StatsTable& table);

}  // namespace aon::report
