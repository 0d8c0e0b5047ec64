// Summary tables (aon/report/stats.h): one pass over a kind's records groups
// their durations by (name, rank); each group is then sorted once for its
// median.
#include "aon/report/stats.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "aon/base/json_writer.h"

namespace aon::report {
namespace {

constexpr std::array<std::string_view, 9> kNames = {"kernels", "memcpy", "memset", "sync", "api",
                                                     "nvtx",    "nccl",   "ops",    "steps"};

const char* Title(StatsReport r) {
  switch (r) {
    case StatsReport::kKernels:
      return "GPU kernels";
    case StatsReport::kMemcpy:
      return "GPU memory copies, by direction";
    case StatsReport::kMemset:
      return "GPU memory sets";
    case StatsReport::kSync:
      return "host waits on the GPU (synchronization), by what was waited for";
    case StatsReport::kApi:
      return "CUDA API calls";
    case StatsReport::kNvtx:
      return "NVTX ranges";
    case StatsReport::kNccl:
      return "NCCL operations";
    case StatsReport::kOps:
      return "framework operators, modules and user ranges";
    case StatsReport::kSteps:
      return "steps";
  }
  return "";
}

// Kinds CUPTI records, which the budgeted mode has only inside capture windows.
bool WindowedKind(StatsReport r) {
  return r != StatsReport::kNvtx && r != StatsReport::kNccl && r != StatsReport::kSteps;
}

struct Group {
  std::vector<uint64_t> durations;
  uint64_t bytes = 0;
};
using Groups = std::map<std::pair<std::string, int64_t>, Group>;

std::string Enum(std::span<const EnumValue> values, int64_t v) {
  const char* name = EnumValueName(values, v);
  return name != nullptr ? name : "kind " + std::to_string(v);
}

template <typename T, typename NameOf, typename Keep>
void Collect(const std::vector<Merged<T>>& records, bool per_rank, NameOf name_of, Keep keep,
             Groups* groups) {
  for (const Merged<T>& m : records) {
    const T& r = m.record;
    if (!keep(r) || r.end_ns < r.start_ns) continue;
    Group& g = (*groups)[{name_of(r), per_rank ? static_cast<int64_t>(m.rank) : -1}];
    g.durations.push_back(r.end_ns - r.start_ns);
    if constexpr (requires { r.bytes; }) g.bytes += r.bytes;
  }
}

std::string Coverage(const Timeline& t, StatsReport report) {
  if (!WindowedKind(report)) return "the whole run";
  uint64_t steps = 0, captured = 0;
  bool windowed = false;
  for (const RankInfo& r : t.ranks) {
    if (r.capture_mode != CaptureMode::kBudgeted && r.capture_mode != CaptureMode::kFlight)
      continue;
    if (r.captured_steps >= r.steps) continue;
    windowed = true;
    steps = std::max(steps, r.steps);
    captured = std::max(captured, r.captured_steps);
  }
  if (!windowed) return "the whole run";
  return "capture windows only: CUPTI recorded these in up to " + std::to_string(captured) +
         " of " + std::to_string(steps) +
         " steps per rank (budgeted mode); totals are of those steps, not of the run";
}

std::string Cell(double ns) { return FormatDuration(ns); }

// A name in the text table stays on its row: a line break or tab in it (a
// name is the traced program's) is shown as \n or \t.
std::string OneLine(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\n') {
      o += "\\n";
    } else if (c == '\t') {
      o += "\\t";
    } else {
      o += c;
    }
  }
  return o;
}

// CSV: a name with a comma, quote or line break is quoted, its quotes doubled.
std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

}  // namespace

std::span<const std::string_view> StatsReportNames() { return kNames; }

StatusOr<StatsReport> ParseStatsReport(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<StatsReport>(i);
  std::string all;
  for (std::string_view n : kNames) all += (all.empty() ? "" : ", ") + std::string(n);
  return InvalidArgument("no report '" + std::string(name) + "' (one of: " + all + ")");
}

StatsTable ComputeStats(const Timeline& t, StatsReport report, bool per_rank) {
  StatsTable table;
  table.report = report;
  table.title = Title(report);
  table.coverage = Coverage(t, report);
  Groups groups;
  auto name = [&](uint32_t id) { return t.strings.Get(id); };
  auto all = [](const auto&) { return true; };
  switch (report) {
    case StatsReport::kKernels:
      Collect(t.kernels, per_rank, [&](const KernelRecord& r) { return name(r.name_id); }, all,
              &groups);
      break;
    case StatsReport::kMemcpy:
      Collect(t.memcpys, per_rank,
              [](const MemcpyRecord& r) {
                return "[memcpy " + Enum(kCopyKindValues, r.copy_kind) + ", " +
                       Enum(kMemoryKindValues, r.src_kind) + " -> " +
                       Enum(kMemoryKindValues, r.dst_kind) + "]";
              },
              all, &groups);
      break;
    case StatsReport::kMemset:
      Collect(t.memsets, per_rank,
              [](const MemsetRecord& r) {
                return "[memset " + Enum(kMemoryKindValues, r.memory_kind) + "]";
              },
              all, &groups);
      break;
    case StatsReport::kSync:
      Collect(t.syncs, per_rank,
              [](const SyncRecord& r) { return "[sync " + Enum(kSyncTypeValues, r.sync_type) + "]"; },
              all, &groups);
      break;
    case StatsReport::kApi:
      Collect(t.apis, per_rank, [&](const ApiRecord& r) { return name(r.name_id); }, all,
              &groups);
      break;
    case StatsReport::kNvtx:
      Collect(t.nvtx, per_rank, [&](const NvtxRecord& r) { return name(r.name_id); },
              [](const NvtxRecord& r) { return r.type != 3; }, &groups);  // marks: no duration
      break;
    case StatsReport::kNccl:
      Collect(t.nccl, per_rank, [&](const NcclRecord& r) { return name(r.func_id); },
              [](const NcclRecord& r) { return r.event_type == 1 || r.event_type == 2; }, &groups);
      break;
    case StatsReport::kOps:
      Collect(t.ops, per_rank,
              [&](const OpRecord& r) {
                return name(r.name_id) + " [" + Enum(kOpKindValues, r.kind) + "]";
              },
              all, &groups);
      break;
    case StatsReport::kSteps:
      Collect(t.steps, per_rank,
              [](const StepRecord& r) {
                return std::string((r.flags & kStepCaptured) != 0 ? "step (in a capture window)"
                                                                  : "step");
              },
              all, &groups);
      break;
  }
  std::map<int64_t, uint64_t> total_of;  // per rank (-1: all)
  for (auto& [key, g] : groups) {
    StatsRow row;
    row.name = key.first;
    row.rank = key.second;
    std::vector<uint64_t>& d = g.durations;
    std::sort(d.begin(), d.end());
    row.count = d.size();
    row.min_ns = d.front();
    row.max_ns = d.back();
    long double sum = 0;
    for (uint64_t x : d) sum += x;
    row.total_ns = static_cast<uint64_t>(sum);
    row.mean_ns = static_cast<double>(sum / d.size());
    const size_t n = d.size();
    row.median_ns = n % 2 == 1 ? static_cast<double>(d[n / 2])
                               : (static_cast<double>(d[n / 2 - 1]) + static_cast<double>(d[n / 2])) / 2;
    long double ss = 0;
    for (uint64_t x : d) ss += (x - static_cast<long double>(row.mean_ns)) * (x - static_cast<long double>(row.mean_ns));
    row.stddev_ns = n > 1 ? static_cast<double>(std::sqrt(ss / (n - 1))) : 0.0;
    row.bytes = g.bytes;
    total_of[row.rank] += row.total_ns;
    table.rows.push_back(std::move(row));
  }
  for (StatsRow& r : table.rows) {
    const uint64_t total = total_of[r.rank];
    r.share = total > 0 ? static_cast<double>(r.total_ns) / static_cast<double>(total) : 0.0;
  }
  std::sort(table.rows.begin(), table.rows.end(), [](const StatsRow& a, const StatsRow& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.total_ns != b.total_ns) return a.total_ns > b.total_ns;
    return a.name < b.name;
  });
  return table;
}

std::string RenderStatsText(const StatsTable& table, size_t top) {
  std::string o = table.title + " (" + table.coverage + ")\n";
  if (table.rows.empty()) return o + "  no records of this kind in the timeline\n";
  const bool per_rank = table.rows.front().rank >= 0;
  const bool bytes = table.report == StatsReport::kMemcpy || table.report == StatsReport::kMemset;
  char line[512];
  std::snprintf(line, sizeof line, "%s%7s %10s %9s %10s %10s %10s %10s %10s%s  %s\n",
                per_rank ? " rank" : "", "time %", "total", "count", "mean", "median", "min",
                "max", "stddev", bytes ? "      bytes" : "", "name");
  o += line;
  size_t shown = 0;
  int64_t rank = -2;
  for (const StatsRow& r : table.rows) {
    if (r.rank != rank) {
      rank = r.rank;
      shown = 0;
    }
    if (top > 0 && shown++ >= top) continue;
    char rank_cell[16] = "";
    if (per_rank) std::snprintf(rank_cell, sizeof rank_cell, "%5lld", static_cast<long long>(r.rank));
    std::string bytes_cell;
    if (bytes) bytes_cell = " " + std::string(11 - std::min<size_t>(11, FormatBytes(r.bytes).size()), ' ') + FormatBytes(r.bytes);
    std::snprintf(line, sizeof line, "%s%6.1f%% %10s %9llu %10s %10s %10s %10s %10s%s  %s\n",
                  rank_cell, 100.0 * r.share, Cell(static_cast<double>(r.total_ns)).c_str(),
                  static_cast<unsigned long long>(r.count), Cell(r.mean_ns).c_str(),
                  Cell(r.median_ns).c_str(), Cell(static_cast<double>(r.min_ns)).c_str(),
                  Cell(static_cast<double>(r.max_ns)).c_str(), Cell(r.stddev_ns).c_str(),
                  bytes_cell.c_str(), OneLine(r.name).c_str());
    o += line;
  }
  if (top > 0) {
    size_t hidden = 0;
    std::map<int64_t, size_t> per;
    for (const StatsRow& r : table.rows) per[r.rank]++;
    for (const auto& [k, n] : per) hidden += n > top ? n - top : 0;
    if (hidden > 0) o += "  (" + std::to_string(hidden) + " more rows: --top 0 shows them all)\n";
  }
  return o;
}

std::string RenderStatsCsv(const StatsTable& table) {
  std::string o =
      "rank,time_pct,total_ns,count,mean_ns,median_ns,min_ns,max_ns,stddev_ns,bytes,name\n";
  char line[256];
  for (const StatsRow& r : table.rows) {
    std::snprintf(line, sizeof line, "%s,%.4f,%llu,%llu,%.1f,%.1f,%llu,%llu,%.1f,%llu,",
                  r.rank < 0 ? "all" : std::to_string(r.rank).c_str(), 100.0 * r.share,
                  static_cast<unsigned long long>(r.total_ns),
                  static_cast<unsigned long long>(r.count), r.mean_ns, r.median_ns,
                  static_cast<unsigned long long>(r.min_ns),
                  static_cast<unsigned long long>(r.max_ns), r.stddev_ns,
                  static_cast<unsigned long long>(r.bytes));
    o += line + CsvField(r.name) + "\n";
  }
  return o;
}

std::string RenderStatsJson(const StatsTable& table) {
  std::string o;
  JsonWriter w(&o);
  w.BeginObject();
  w.Key("report");
  w.String(kNames[static_cast<size_t>(table.report)]);
  w.Key("title");
  w.String(table.title);
  w.Key("coverage");
  w.String(table.coverage);
  w.Key("rows");
  w.BeginArray(JsonWriter::Layout::kOnePerLine);
  for (const StatsRow& r : table.rows) {
    w.BeginObject();
    w.Key("name");
    w.String(r.name);
    w.Key("rank");
    if (r.rank < 0) {
      w.Null();
    } else {
      w.Int(r.rank);
    }
    w.Key("time_share");
    w.Double(r.share, 6);
    w.Key("total_ns");
    w.Uint(r.total_ns);
    w.Key("count");
    w.Uint(r.count);
    w.Key("mean_ns");
    w.Double(r.mean_ns, 9);
    w.Key("median_ns");
    w.Double(r.median_ns, 9);
    w.Key("min_ns");
    w.Uint(r.min_ns);
    w.Key("max_ns");
    w.Uint(r.max_ns);
    w.Key("stddev_ns");
    w.Double(r.stddev_ns, 9);
    w.Key("bytes");
    w.Uint(r.bytes);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  o += '\n';
  return o;
}

}  // namespace aon::report
