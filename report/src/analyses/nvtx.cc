// NVTX attribution: the GPU time under each range. A GPU operation belongs to
// every push/pop range open on the thread that launched it (the CUDA API record
// with its correlation id) at the launch; without one, to the ranges open on any
// thread of the rank at its start.
#include <algorithm>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analyses/analysis.h"

namespace aon::report {

namespace {

template <typename F>
void ForEachGpuOp(const Timeline& t, F&& f) {
  for (const auto& k : t.kernels)
    f(k.rank, k.record.start_ns, k.record.end_ns, k.record.correlation_id);
  for (const auto& k : t.memcpys)
    f(k.rank, k.record.start_ns, k.record.end_ns, k.record.correlation_id);
  for (const auto& k : t.memsets)
    f(k.rank, k.record.start_ns, k.record.end_ns, k.record.correlation_id);
}

}  // namespace

std::vector<NvtxStat> AttributeNvtx(const Timeline& t) {
  const uint32_t n = t.world_size;
  // Range names.
  std::unordered_map<uint64_t, uint32_t> name_index;  // (domain<<32|name) -> stat index
  std::vector<NvtxStat> stats;
  auto index_of = [&](const NvtxRecord& r) {
    const uint64_t key = (static_cast<uint64_t>(r.domain_id) << 32) | r.name_id;
    auto it = name_index.find(key);
    if (it != name_index.end()) return it->second;
    std::string name = NormalizeRangeName(t.strings.Get(r.name_id));
    const std::string& domain = t.strings.Get(r.domain_id);
    if (!domain.empty()) name = domain + ":" + name;
    for (uint32_t i = 0; i < stats.size(); ++i) {
      if (stats[i].name == name) return name_index[key] = i;
    }
    stats.push_back({});
    stats.back().name = name;
    return name_index[key] = static_cast<uint32_t>(stats.size() - 1);
  };
  struct Event {
    uint64_t time;
    int kind;  // 0 range end, 1 range start, 2 query (ends sort before starts at equal times)
    uint32_t tid;
    uint32_t stat;      // range
    uint64_t duration;  // query: GPU time
    bool any_thread;    // query: no launching thread known
  };
  std::vector<std::vector<Event>> events(n);
  // Per range name and rank: its ranges, whose union is its wall time there
  // (ranges of one name on several threads at once count once).
  std::vector<std::map<uint32_t, std::vector<Interval>>> spans;
  for (const auto& m : t.nvtx) {
    if (m.record.type == static_cast<uint8_t>(NvtxType::kMark)) continue;
    const uint32_t i = index_of(m.record);
    NvtxStat& s = stats[i];
    if (spans.size() < stats.size()) spans.resize(stats.size());
    if (m.record.end_ns > m.record.start_ns)
      spans[i][m.rank].push_back({m.record.start_ns, m.record.end_ns});
    ++s.count;
    ++s.per_rank_count[m.rank];
    if (m.record.type != static_cast<uint8_t>(NvtxType::kPushPop)) continue;
    events[m.rank].push_back({m.record.start_ns, 1, m.record.thread_id, i, 0, false});
    events[m.rank].push_back({m.record.end_ns, 0, m.record.thread_id, i, 0, false});
  }
  for (size_t i = 0; i < spans.size(); ++i) {
    for (auto& [rank, v] : spans[i]) {
      const uint64_t wall = TotalLength(Union(std::move(v)));
      stats[i].per_rank_range_ns[rank] = wall;
      stats[i].range_ns += wall;
    }
  }
  if (stats.empty()) return stats;
  std::vector<std::unordered_map<uint32_t, const ApiRecord*>> by_corr(n);
  for (const auto& m : t.apis) {
    if (m.record.correlation_id) by_corr[m.rank][m.record.correlation_id] = &m.record;
  }
  auto query = [&](uint32_t rank, uint64_t start, uint64_t end, uint32_t corr) {
    const uint64_t d = end > start ? end - start : 0;
    auto it = by_corr[rank].find(corr);
    if (it != by_corr[rank].end()) {
      events[rank].push_back({it->second->start_ns, 2, it->second->thread_id, 0, d, false});
    } else {
      events[rank].push_back({start, 2, 0, 0, d, true});
    }
  };
  ForEachGpuOp(t, query);
  for (uint32_t r = 0; r < n; ++r) {
    auto& ev = events[r];
    std::sort(ev.begin(), ev.end(), [](const Event& a, const Event& b) {
      return a.time != b.time ? a.time < b.time : a.kind < b.kind;
    });
    std::vector<std::pair<uint32_t, uint32_t>> open;  // (tid, stat)
    std::vector<uint32_t> seen;
    for (const Event& e : ev) {
      if (e.kind == 1) {
        open.push_back({e.tid, e.stat});
      } else if (e.kind == 0) {
        for (size_t i = open.size(); i-- > 0;) {
          if (open[i] == std::make_pair(e.tid, e.stat)) {
            open.erase(open.begin() + static_cast<long>(i));
            break;
          }
        }
      } else {
        seen.clear();
        for (const auto& [tid, stat] : open) {
          if (!e.any_thread && tid != e.tid) continue;
          if (std::find(seen.begin(), seen.end(), stat) != seen.end()) continue;
          seen.push_back(stat);
          stats[stat].gpu_ns += e.duration;
          stats[stat].per_rank_gpu_ns[r] += e.duration;
        }
      }
    }
  }
  std::sort(stats.begin(), stats.end(), [](const NvtxStat& a, const NvtxStat& b) {
    return a.gpu_ns != b.gpu_ns ? a.gpu_ns > b.gpu_ns : a.range_ns > b.range_ns;
  });
  return stats;
}

const Analysis kNvtxAnalysis = {"nvtx", "", "nvtx",
                                [](const Timeline& t, Report* r) { r->nvtx = AttributeNvtx(t); }};

}  // namespace aon::report
