// The analyses behind aon-report: plain functions over a loaded Timeline.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <set>
#include <tuple>
#include <unordered_map>

#include "aon/report/report.h"

namespace aon::report {

// ---- Interval helpers ---------------------------------------------------------------

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

// ---- Kernel families ----------------------------------------------------------------

const char* KernelFamilyName(KernelFamily f) {
  switch (f) {
    case KernelFamily::kGemm:
      return "GEMM";
    case KernelFamily::kAttention:
      return "attention";
    case KernelFamily::kElementwise:
      return "elementwise";
    case KernelFamily::kReduction:
      return "reduction";
    case KernelFamily::kNccl:
      return "NCCL";
    case KernelFamily::kCopy:
      return "copy";
    case KernelFamily::kOther:
      return "other";
  }
  return "other";
}

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool Has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }
bool IsNcclKernelName(const std::string& name) { return name.rfind("nccl", 0) == 0; }

}  // namespace

KernelFamily ClassifyKernel(const std::string& name) {
  if (IsNcclKernelName(name)) return KernelFamily::kNccl;
  const std::string s = Lower(name);
  if (Has(s, "flash") || Has(s, "attention") || Has(s, "fmha") || Has(s, "sdpa") || Has(s, "attn"))
    return KernelFamily::kAttention;
  if (Has(s, "gemm") || Has(s, "gemv") || Has(s, "cutlass") || Has(s, "cublas") ||
      Has(s, "matmul") || Has(s, "xmma") || Has(s, "wgmma") || Has(s, "sm90_") || Has(s, "sm80_") ||
      Has(s, "conv"))
    return KernelFamily::kGemm;
  if (Has(s, "reduce") || Has(s, "softmax") || Has(s, "norm") || Has(s, "reduction") ||
      Has(s, "_sum") || Has(s, "argmax") || Has(s, "cross_entropy") || Has(s, "nll_loss"))
    return KernelFamily::kReduction;
  if (Has(s, "memcpy") || Has(s, "copy") || Has(s, "cat_") || Has(s, "transpose"))
    return KernelFamily::kCopy;
  if (Has(s, "elementwise") || Has(s, "vectorized") || Has(s, "unrolled") || Has(s, "pointwise") ||
      Has(s, "activation") || Has(s, "relu") || Has(s, "gelu") || Has(s, "fill") ||
      Has(s, "adam") || Has(s, "foreach") || Has(s, "mul") || Has(s, "add"))
    return KernelFamily::kElementwise;
  return KernelFamily::kOther;
}

// ---- Steps --------------------------------------------------------------------------

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

template <typename F>
void ForEachGpuOp(const Timeline& t, F&& f) {
  for (const auto& k : t.kernels)
    f(k.rank, k.record.start_ns, k.record.end_ns, k.record.correlation_id);
  for (const auto& k : t.memcpys)
    f(k.rank, k.record.start_ns, k.record.end_ns, k.record.correlation_id);
  for (const auto& k : t.memsets)
    f(k.rank, k.record.start_ns, k.record.end_ns, k.record.correlation_id);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
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

// ---- GPU breakdown ------------------------------------------------------------------

namespace {

struct RankUnions {
  std::vector<Interval> compute, comm, copy, memset, all;
};

std::vector<RankUnions> BuildUnions(const Timeline& t) {
  std::vector<RankUnions> u(t.world_size);
  std::unordered_map<uint32_t, bool> is_nccl;
  for (const auto& k : t.kernels) {
    auto it = is_nccl.find(k.record.name_id);
    if (it == is_nccl.end())
      it = is_nccl.emplace(k.record.name_id, IsNcclKernelName(t.strings.Get(k.record.name_id)))
               .first;
    (it->second ? u[k.rank].comm : u[k.rank].compute)
        .push_back({k.record.start_ns, k.record.end_ns});
  }
  for (const auto& m : t.memcpys) u[m.rank].copy.push_back({m.record.start_ns, m.record.end_ns});
  for (const auto& m : t.memsets) u[m.rank].memset.push_back({m.record.start_ns, m.record.end_ns});
  for (RankUnions& r : u) {
    r.all = r.compute;
    r.all.insert(r.all.end(), r.comm.begin(), r.comm.end());
    r.all.insert(r.all.end(), r.copy.begin(), r.copy.end());
    r.all.insert(r.all.end(), r.memset.begin(), r.memset.end());
    r.compute = Union(std::move(r.compute));
    r.comm = Union(std::move(r.comm));
    r.copy = Union(std::move(r.copy));
    r.memset = Union(std::move(r.memset));
    r.all = Union(std::move(r.all));
  }
  return u;
}

}  // namespace

std::vector<RankBreakdown> ComputeBreakdown(const Timeline& t, const Steps& steps) {
  const std::vector<RankUnions> u = BuildUnions(t);
  std::vector<RankBreakdown> out(t.world_size);
  for (uint32_t r = 0; r < t.world_size; ++r) {
    RankBreakdown& b = out[r];
    b.rank = r;
    const RankUnions& ru = u[r];
    if (ru.all.empty()) continue;
    b.has_gpu = true;
    b.span_ns = ru.all.back().end - ru.all.front().start;
    b.busy_ns = TotalLength(ru.all);
    b.idle_ns = b.span_ns - b.busy_ns;
    b.compute_ns = TotalLength(ru.compute);
    b.comm_ns = TotalLength(ru.comm);
    b.copy_ns = TotalLength(ru.copy);
    b.memset_ns = TotalLength(ru.memset);
    b.exposed_comm_ns = b.comm_ns - IntersectionLength(ru.comm, ru.compute);
    b.overlap_fraction = b.comm_ns ? 1.0 - static_cast<double>(b.exposed_comm_ns) / b.comm_ns : 0.0;
    if (r < steps.per_rank.size() && !steps.per_rank[r].empty()) {
      const auto& st = steps.per_rank[r];
      b.steps = st.size();
      std::vector<double> d;
      double busy = 0, compute = 0, comm = 0;
      for (const Interval& w : st) {
        b.step_ns.push_back(w.end - w.start);
        d.push_back(static_cast<double>(w.end - w.start));
        busy += LengthWithin(ru.all, w);
        compute += LengthWithin(ru.compute, w);
        comm += LengthWithin(ru.comm, w);
      }
      b.step_mean_ns = std::accumulate(d.begin(), d.end(), 0.0) / d.size();
      b.step_median_ns = Median(d);
      b.step_max_ns = *std::max_element(d.begin(), d.end());
      b.step_busy_ns = busy / st.size();
      b.step_compute_ns = compute / st.size();
      b.step_comm_ns = comm / st.size();
      b.step_idle_ns = b.step_mean_ns - b.step_busy_ns;
    }
  }
  return out;
}

std::vector<std::vector<Interval>> GpuBusyUnions(const Timeline& t) {
  std::vector<RankUnions> u = BuildUnions(t);
  std::vector<std::vector<Interval>> out;
  for (RankUnions& r : u) out.push_back(std::move(r.all));
  return out;
}

// ---- Top kernels --------------------------------------------------------------------

std::vector<KernelStats> TopKernels(const Timeline& t) {
  struct Acc {
    uint64_t count = 0, total = 0, min = UINT64_MAX, max = 0;
    double sumsq = 0;
    std::map<uint32_t, uint64_t> per_rank;
    std::map<std::string, uint64_t> configs;
  };
  std::unordered_map<uint32_t, Acc> acc;
  for (const auto& m : t.kernels) {
    const KernelRecord& k = m.record;
    const uint64_t d = k.end_ns > k.start_ns ? k.end_ns - k.start_ns : 0;
    Acc& a = acc[k.name_id];
    ++a.count;
    a.total += d;
    a.sumsq += static_cast<double>(d) * d;
    a.min = std::min(a.min, d);
    a.max = std::max(a.max, d);
    a.per_rank[m.rank] += d;
    if (a.configs.size() < 64) {
      std::string cfg = "grid(" + std::to_string(k.grid_x) + "," + std::to_string(k.grid_y) + "," +
                        std::to_string(k.grid_z) + ") block(" + std::to_string(k.block_x) + "," +
                        std::to_string(k.block_y) + "," + std::to_string(k.block_z) + ")";
      if (k.registers_per_thread) cfg += " regs " + std::to_string(k.registers_per_thread);
      const uint32_t smem = k.static_shared_bytes + k.dynamic_shared_bytes;
      if (smem) cfg += " smem " + std::to_string(smem);
      ++a.configs[cfg];
    }
  }
  std::vector<KernelStats> out;
  for (auto& [id, a] : acc) {
    KernelStats s;
    s.name = t.strings.Get(id);
    if (s.name.empty()) s.name = "(unnamed kernel)";
    s.family = ClassifyKernel(s.name);
    s.count = a.count;
    s.total_ns = a.total;
    s.min_ns = a.min;
    s.max_ns = a.max;
    s.mean_ns = static_cast<double>(a.total) / a.count;
    s.stddev_ns = std::sqrt(std::max(0.0, a.sumsq / a.count - s.mean_ns * s.mean_ns));
    s.per_rank_ns = std::move(a.per_rank);
    uint64_t best = 0;
    for (const auto& [cfg, n] : a.configs) {
      if (n > best) best = n, s.launch_config = cfg;
    }
    if (a.configs.size() > 1)
      s.launch_config += " (+" + std::to_string(a.configs.size() - 1) + " more)";
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const KernelStats& a, const KernelStats& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return out;
}

// ---- Communication ------------------------------------------------------------------

double BusBandwidthFactor(const std::string& type, uint32_t n) {
  if (n == 0) return 1;
  const std::string s = Lower(type);
  if (s == "allreduce") return 2.0 * (n - 1) / n;
  if (s == "allgather" || s == "reducescatter" || s == "alltoall")
    return static_cast<double>(n - 1) / n;
  return 1.0;  // broadcast, reduce, send/recv
}

namespace {

// "ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)" -> type AllReduce, algo RING, proto LL.
void ParseNcclKernelName(const std::string& full, std::string* type, std::string* algo,
                         std::string* proto) {
  std::string name = full.substr(0, full.find('('));
  for (const char* prefix : {"ncclDevKernel_", "ncclKernel_", "nccl"}) {
    if (name.rfind(prefix, 0) == 0) {
      name = name.substr(std::string(prefix).size());
      break;
    }
  }
  std::vector<std::string> parts;
  for (size_t pos = 0; pos <= name.size();) {
    size_t u = name.find('_', pos);
    if (u == std::string::npos) u = name.size();
    parts.push_back(name.substr(pos, u - pos));
    pos = u + 1;
  }
  *type = parts.empty() || parts[0].empty() ? "unknown" : parts[0];
  for (const std::string& p : parts) {
    if (p == "RING" || p == "TREE" || p == "NVLS" || p == "NVLSTREE" || p == "PAT" ||
        p == "COLLNET")
      *algo = p;
    if (p == "LL" || p == "LL128" || p == "SIMPLE") *proto = p;
  }
}

void Finish(Collective* c) {
  uint64_t first = UINT64_MAX, last = 0, second = 0;
  size_t last_i = 0;
  for (size_t i = 0; i < c->arrival_ns.size(); ++i) {
    const uint64_t a = c->arrival_ns[i];
    first = std::min(first, a);
    if (a >= last) {
      second = last;
      last = a;
      last_i = i;
    } else if (a > second) {
      second = a;
    }
  }
  c->first_arrival_ns = first;
  c->last_arrival_ns = last;
  c->skew_ns = last - first;
  c->last_rank = c->ranks[last_i];
  c->straggle_ns = c->arrival_ns.size() > 1 ? last - second : 0;
  c->lost_ns = 0;
  for (uint64_t a : c->arrival_ns) c->lost_ns += last - a;
  std::vector<double> ends(c->end_ns.begin(), c->end_ns.end());
  const double end = Median(ends);
  c->transfer_ns =
      end > static_cast<double>(last) ? static_cast<uint64_t>(end - static_cast<double>(last)) : 0;
}

}  // namespace

uint64_t SteadyTotal(std::vector<uint64_t> per_step) {
  if (per_step.empty()) return 0;
  std::sort(per_step.begin(), per_step.end());
  const size_t n = per_step.size(), m = n / 2;
  const double median = n % 2 ? static_cast<double>(per_step[m])
                              : (static_cast<double>(per_step[m - 1]) + per_step[m]) / 2;
  return static_cast<uint64_t>(median * static_cast<double>(n));
}

namespace {

// Index of the window in `windows` (sorted by start) holding `at`, or -1.
int32_t StepOf(const std::vector<Interval>& windows, uint64_t at) {
  auto it = std::upper_bound(windows.begin(), windows.end(), at,
                             [](uint64_t tt, const Interval& w) { return tt < w.start; });
  if (it == windows.begin()) return -1;
  --it;
  return at < it->end ? static_cast<int32_t>(it - windows.begin()) : -1;
}

}  // namespace

Communication AnalyzeCommunication(const Timeline& t, const Steps* steps) {
  Communication c;
  c.stragglers.resize(t.world_size);
  for (uint32_t r = 0; r < t.world_size; ++r) c.stragglers[r].rank = r;
  std::set<uint32_t> ok_ranks;
  for (const RankInfo& r : t.ranks) {
    if (r.status == RankStatus::kOk) ok_ranks.insert(r.rank);
  }

  bool have_coll = false;
  for (const auto& m : t.nccl)
    have_coll |= m.record.event_type == static_cast<uint8_t>(NcclEventType::kColl);
  if (have_coll) {
    c.source = "NCCL records";
    // (comm, seq_number, graph_replay): replays of a graph-captured collective
    // share its sequence number and are numbered by graph_replay.
    using Key = std::tuple<uint64_t, uint64_t, uint32_t>;
    std::map<Key, Collective> by_key;
    std::map<Key, uint64_t> first_seen;
    for (const auto& m : t.nccl) {
      const NcclRecord& n = m.record;
      if (n.event_type != static_cast<uint8_t>(NcclEventType::kColl)) continue;
      const Key key{n.comm_hash, n.seq_number, n.graph_replay};
      Collective& col = by_key[key];
      if (col.ranks.empty()) {
        col.type = t.strings.Get(n.func_id);
        col.bytes = n.bytes;
        col.algo = t.strings.Get(n.algo_id);
        col.proto = t.strings.Get(n.proto_id);
        first_seen[key] = n.start_ns;
      }
      if (std::find(col.ranks.begin(), col.ranks.end(), m.rank) != col.ranks.end()) continue;
      col.ranks.push_back(m.rank);
      col.arrival_ns.push_back(n.start_ns);
      col.end_ns.push_back(n.end_ns);
    }
    // Communicator size = most ranks any of its collectives has.
    std::map<uint64_t, size_t> comm_size;
    for (const auto& [key, col] : by_key)
      comm_size[std::get<0>(key)] = std::max(comm_size[std::get<0>(key)], col.ranks.size());
    for (auto& [key, col] : by_key) {
      if (col.ranks.size() < 2 || col.ranks.size() < comm_size[std::get<0>(key)])
        continue;  // not seen on all ranks
      Finish(&col);
      c.collectives.push_back(std::move(col));
    }
  } else {
    // Kernel-order fallback: the k-th NCCL kernel of one name on each rank.
    std::map<uint32_t, std::vector<std::vector<const Merged<KernelRecord>*>>> by_name;
    for (const auto& m : t.kernels) {
      const std::string& name = t.strings.Get(m.record.name_id);
      if (!IsNcclKernelName(name)) continue;
      auto& per_rank = by_name[m.record.name_id];
      if (per_rank.size() < t.world_size) per_rank.resize(t.world_size);
      per_rank[m.rank].push_back(&m);
    }
    if (!by_name.empty()) c.source = "NCCL kernels (matched across ranks by order)";
    for (auto& [name_id, per_rank] : by_name) {
      std::vector<uint32_t> ranks;
      size_t k_max = SIZE_MAX;
      for (uint32_t r = 0; r < per_rank.size(); ++r) {
        if (per_rank[r].empty()) continue;
        ranks.push_back(r);
        k_max = std::min(k_max, per_rank[r].size());
      }
      if (ranks.size() < 2) continue;
      std::string type, algo, proto;
      ParseNcclKernelName(t.strings.Get(name_id), &type, &algo, &proto);
      for (size_t k = 0; k < k_max; ++k) {
        Collective col;
        col.type = type;
        col.algo = algo;
        col.proto = proto;
        for (uint32_t r : ranks) {
          col.ranks.push_back(r);
          col.arrival_ns.push_back(per_rank[r][k]->record.start_ns);
          col.end_ns.push_back(per_rank[r][k]->record.end_ns);
        }
        Finish(&col);
        c.collectives.push_back(std::move(col));
      }
    }
  }
  if (c.source.empty()) c.source = "none";
  std::sort(c.collectives.begin(), c.collectives.end(),
            [](const Collective& a, const Collective& b) {
              return a.first_arrival_ns < b.first_arrival_ns;
            });

  // Clock caveat.
  if (!t.clock_synchronized && t.HostCount() > 1) {
    c.skew_trustworthy = false;
    c.caveat = "ranks run on " + std::to_string(t.HostCount()) +
               " hosts whose clocks are not synchronized: arrival skews between ranks on different "
               "hosts are "
               "not trustworthy (computed over all ranks anyway)";
  }

  // Stragglers: waiting intervals, by (last rank, waiting rank, step of the last rank).
  std::map<std::tuple<uint32_t, uint32_t, int32_t>, std::vector<Interval>> lost_iv;
  std::map<std::pair<uint32_t, int32_t>, std::vector<Interval>> gain_iv;
  std::vector<std::vector<Interval>> wait_iv(t.world_size);
  auto windows_of = [&](uint32_t r) -> const std::vector<Interval>* {
    return steps != nullptr && r < steps->per_rank.size() && !steps->per_rank[r].empty()
               ? &steps->per_rank[r]
               : nullptr;
  };
  for (const Collective& col : c.collectives) {
    const uint32_t last_rank = col.last_rank;
    const std::vector<Interval>* windows = windows_of(last_rank);
    const int32_t step = windows ? StepOf(*windows, col.last_arrival_ns) : -1;
    for (size_t i = 0; i < col.ranks.size(); ++i) {
      ++c.stragglers[col.ranks[i]].collectives;
      if (col.arrival_ns[i] < col.last_arrival_ns) {
        const Interval w{col.arrival_ns[i], col.last_arrival_ns};
        wait_iv[col.ranks[i]].push_back(w);
        lost_iv[{last_rank, col.ranks[i], step}].push_back(w);
      }
    }
    ++c.stragglers[last_rank].last_count;
    if (col.straggle_ns > 0)
      gain_iv[{last_rank, step}].push_back(
          {col.last_arrival_ns - col.straggle_ns, col.last_arrival_ns});
  }
  std::vector<std::vector<uint64_t>> lost_steps(t.world_size), gain_steps(t.world_size);
  for (uint32_t r = 0; r < t.world_size; ++r) {
    if (const auto* w = windows_of(r))
      lost_steps[r].assign(w->size(), 0), gain_steps[r].assign(w->size(), 0);
  }
  for (auto& [key, v] : lost_iv) {
    const auto [last_rank, waiter, step] = key;
    const uint64_t len = TotalLength(Union(std::move(v)));
    c.stragglers[last_rank].caused_lost_ns += len;
    if (step >= 0) lost_steps[last_rank][static_cast<size_t>(step)] += len;
  }
  for (auto& [key, v] : gain_iv) {
    const uint64_t len = TotalLength(Union(std::move(v)));
    c.stragglers[key.first].gain_ns += len;
    if (key.second >= 0) gain_steps[key.first][static_cast<size_t>(key.second)] += len;
  }
  for (uint32_t r = 0; r < t.world_size; ++r) {
    StragglerStats& s = c.stragglers[r];
    s.waited_ns = TotalLength(Union(std::move(wait_iv[r])));
    s.last_fraction = s.collectives ? static_cast<double>(s.last_count) / s.collectives : 0;
    s.steady_lost_ns = windows_of(r) ? SteadyTotal(lost_steps[r]) : s.caused_lost_ns;
    s.steady_gain_ns = windows_of(r) ? SteadyTotal(gain_steps[r]) : s.gain_ns;
  }

  // Groups per (type, bytes, nranks).
  std::map<std::tuple<std::string, uint64_t, uint32_t>, std::vector<const Collective*>> groups;
  for (const Collective& col : c.collectives) {
    groups[{col.type, col.bytes, static_cast<uint32_t>(col.ranks.size())}].push_back(&col);
  }
  for (const auto& [key, v] : groups) {
    CommGroup g;
    g.type = std::get<0>(key);
    g.bytes = std::get<1>(key);
    g.nranks = std::get<2>(key);
    g.count = v.size();
    std::map<std::string, int> algos;
    double sum = 0;
    for (const Collective* col : v) {
      sum += static_cast<double>(col->transfer_ns);
      ++algos[col->algo + (col->proto.empty() ? "" : "/" + col->proto)];
    }
    g.mean_transfer_ns = sum / v.size();
    int best = 0;
    for (const auto& [a, n] : algos) {
      if (n > best) {
        best = n;
        const size_t slash = a.find('/');
        g.algo = a.substr(0, slash);
        g.proto = slash == std::string::npos ? "" : a.substr(slash + 1);
      }
    }
    if (g.bytes > 0 && g.mean_transfer_ns > 0) {
      g.algbw_gbps = static_cast<double>(g.bytes) / g.mean_transfer_ns;  // bytes/ns == GB/s
      g.busbw_gbps = g.algbw_gbps * BusBandwidthFactor(g.type, g.nranks);
    }
    c.groups.push_back(g);
  }
  return c;
}

// ---- Idle gaps ----------------------------------------------------------------------

const char* GapCauseName(GapCause c) {
  switch (c) {
    case GapCause::kHostSync:
      return "host synchronization";
    case GapCause::kSyncCopy:
      return "synchronous/pageable copy";
    case GapCause::kHostLate:
      return "host launched late";
    case GapCause::kOther:
      return "other (dependency, unknown)";
  }
  return "other";
}

namespace {

bool IsSyncApi(const std::string& n) {
  return n.find("Synchronize") != std::string::npos || n == "cuStreamSynchronize" ||
         n == "cuCtxSynchronize" || n == "cuEventSynchronize" || n == "cudaStreamWaitEvent";
}
bool IsSyncCopyApi(const std::string& n) {
  return (n.rfind("cudaMemcpy", 0) == 0 || n.rfind("cuMemcpy", 0) == 0) &&
         n.find("Async") == std::string::npos;
}

struct GpuOp {
  uint64_t start, end;
  uint32_t correlation;
  const MemcpyRecord* copy;  // non-null for copies
};

// Innermost non-NCCL push/pop range open at increasing times on one rank (any thread,
// preferring the launching thread): a sweep over the ranges sorted by start.
class RangeSweep {
 public:
  RangeSweep(const Timeline& t, const std::vector<const Merged<NvtxRecord>*>& ranges)
      : t_(t), ranges_(ranges) {}
  // `at` must not decrease between calls.
  std::string InnermostAt(uint64_t at, uint32_t tid) {
    while (next_ < ranges_.size() && ranges_[next_]->record.start_ns <= at)
      open_.push_back(ranges_[next_++]);
    std::erase_if(open_, [at](const Merged<NvtxRecord>* m) { return m->record.end_ns <= at; });
    const Merged<NvtxRecord>* best = nullptr;
    int best_score = -1;
    for (const Merged<NvtxRecord>* m : open_) {
      const int score = (m->record.thread_id == tid ? 1000 : 0) + m->record.depth;
      if (score > best_score) best = m, best_score = score;
    }
    return best ? NormalizeRangeName(t_.strings.Get(best->record.name_id)) : std::string();
  }

 private:
  const Timeline& t_;
  const std::vector<const Merged<NvtxRecord>*>& ranges_;
  size_t next_ = 0;
  std::vector<const Merged<NvtxRecord>*> open_;
};

std::string CopyKindName(uint8_t k) {
  switch (k) {
    case 1:
      return "HtoD";
    case 2:
      return "DtoH";
    case 8:
      return "DtoD";
    case 10:
      return "PtoP";
    default:
      return "kind " + std::to_string(k);
  }
}

}  // namespace

uint64_t IdleAnalysis::Steady(uint32_t rank, GapCause cause,
                              const std::string& exclude_range) const {
  const size_t nsteps = rank < steps.size() ? steps[rank] : 0;
  std::vector<uint64_t> per_step(nsteps, 0);
  uint64_t whole = 0;
  for (const Slice& s : slices) {
    if (s.rank != rank || s.cause != cause) continue;
    if (!exclude_range.empty() && range_names[s.range] == exclude_range) continue;
    whole += s.ns;
    if (s.step >= 0 && static_cast<size_t>(s.step) < nsteps)
      per_step[static_cast<size_t>(s.step)] += s.ns;
  }
  return nsteps ? SteadyTotal(std::move(per_step)) : whole;
}

IdleAnalysis AnalyzeIdle(const Timeline& t, const Steps* steps, uint64_t min_gap_ns) {
  IdleAnalysis a;
  a.min_gap_ns = min_gap_ns;
  const uint32_t n = t.world_size;
  a.steps.assign(n, 0);
  std::unordered_map<std::string, uint32_t> range_index;
  a.cause_ns.resize(n);
  a.cause_count.resize(n);
  a.cause_nvtx_ns.resize(n);
  std::vector<std::vector<GpuOp>> ops(n);
  for (const auto& k : t.kernels)
    ops[k.rank].push_back({k.record.start_ns, k.record.end_ns, k.record.correlation_id, nullptr});
  for (const auto& k : t.memcpys)
    ops[k.rank].push_back({k.record.start_ns, k.record.end_ns, k.record.correlation_id, &k.record});
  for (const auto& k : t.memsets)
    ops[k.rank].push_back({k.record.start_ns, k.record.end_ns, k.record.correlation_id, nullptr});
  // Per rank: API records by correlation, sync/sync-copy calls sorted by end.
  std::vector<std::unordered_map<uint32_t, const ApiRecord*>> by_corr(n);
  std::vector<std::vector<std::pair<const ApiRecord*, bool>>> blocking(n);  // (call, is sync copy)
  std::unordered_map<uint32_t, int> kind_of_name;  // 0 other, 1 sync, 2 sync copy
  for (const auto& m : t.apis) {
    if (m.record.correlation_id) by_corr[m.rank][m.record.correlation_id] = &m.record;
    auto it = kind_of_name.find(m.record.name_id);
    if (it == kind_of_name.end()) {
      const std::string& name = t.strings.Get(m.record.name_id);
      it = kind_of_name.emplace(m.record.name_id, IsSyncApi(name)       ? 1
                                                  : IsSyncCopyApi(name) ? 2
                                                                        : 0)
               .first;
    }
    if (it->second) blocking[m.rank].push_back({&m.record, it->second == 2});
  }
  // SyncRecords (CUPTI's synchronization activity) count like sync calls.
  std::vector<ApiRecord> sync_as_api;
  sync_as_api.reserve(t.syncs.size());
  std::vector<uint32_t> sync_rank;
  for (const auto& s : t.syncs) {
    ApiRecord r{};
    r.start_ns = s.record.start_ns;
    r.end_ns = s.record.end_ns;
    r.name_id = 0;
    r.callback_id = s.record.sync_type;
    sync_as_api.push_back(r);
    sync_rank.push_back(s.rank);
  }
  for (size_t i = 0; i < sync_as_api.size(); ++i)
    blocking[sync_rank[i]].push_back({&sync_as_api[i], false});
  for (auto& v : blocking) {
    std::sort(v.begin(), v.end(),
              [](const auto& x, const auto& y) { return x.first->end_ns < y.first->end_ns; });
  }
  std::vector<std::vector<const Merged<NvtxRecord>*>> ranges(n);
  for (const auto& m : t.nvtx) {
    if (m.record.type != static_cast<uint8_t>(NvtxType::kPushPop)) continue;
    if (t.strings.Get(m.record.domain_id) == "NCCL") continue;
    ranges[m.rank].push_back(&m);
  }
  static const char* kSyncTypes[] = {"", "cudaEventSynchronize", "cudaStreamWaitEvent",
                                     "cudaStreamSynchronize", "cudaDeviceSynchronize"};

  std::vector<Gap> all;
  for (uint32_t r = 0; r < n; ++r) {
    auto& v = ops[r];
    std::sort(v.begin(), v.end(), [](const GpuOp& x, const GpuOp& y) { return x.start < y.start; });
    const std::vector<Interval>* windows =
        steps != nullptr && r < steps->per_rank.size() && !steps->per_rank[r].empty()
            ? &steps->per_rank[r]
            : nullptr;
    if (windows) a.steps[r] = windows->size();
    RangeSweep sweep(t, ranges[r]);
    uint64_t busy_end = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0 && v[i].start > busy_end && v[i].start - busy_end >= min_gap_ns) {
        Gap g;
        g.rank = r;
        g.start_ns = busy_end;
        g.end_ns = v[i].start;
        const ApiRecord* launch = nullptr;
        if (auto it = by_corr[r].find(v[i].correlation); it != by_corr[r].end())
          launch = it->second;
        // 1. A blocking call that returned inside the gap: it drained the GPU's queue.
        const auto& b = blocking[r];
        auto it = std::lower_bound(b.begin(), b.end(), g.start_ns,
                                   [](const auto& x, uint64_t tt) { return x.first->end_ns < tt; });
        const ApiRecord* sync = nullptr;
        bool sync_copy = false;
        for (; it != b.end() && it->first->end_ns <= g.end_ns; ++it) {
          if (it->first->start_ns <= g.start_ns) {
            sync = it->first;
            sync_copy = it->second;
            break;
          }
        }
        const bool next_is_sync_copy =
            v[i].copy != nullptr &&
            (v[i].copy->src_kind == 1 || v[i].copy->dst_kind == 1 || (v[i].copy->flags & 1) == 0);
        if (sync != nullptr && !sync_copy) {
          g.cause = GapCause::kHostSync;
          g.detail = sync->name_id
                         ? t.strings.Get(sync->name_id)
                         : (sync->callback_id < 5 ? kSyncTypes[sync->callback_id] : "synchronize");
        } else if (next_is_sync_copy || sync_copy) {
          g.cause = GapCause::kSyncCopy;
          if (v[i].copy != nullptr) {
            const MemcpyRecord& c = *v[i].copy;
            g.detail = (launch ? t.strings.Get(launch->name_id) : std::string("memcpy")) + " " +
                       CopyKindName(c.copy_kind) + " " + FormatBytes(static_cast<double>(c.bytes)) +
                       (c.src_kind == 1 || c.dst_kind == 1 ? " pageable" : "") +
                       ((c.flags & 1) ? "" : " synchronous");
          } else {
            g.detail = t.strings.Get(sync->name_id);
          }
        } else if (launch != nullptr && launch->start_ns > g.start_ns) {
          g.cause = GapCause::kHostLate;
          g.detail = "next launch (" + t.strings.Get(launch->name_id) + ") issued " +
                     FormatDuration(static_cast<double>(launch->start_ns - g.start_ns)) +
                     " after the GPU ran dry";
        } else if (launch == nullptr && t.apis.empty()) {
          g.cause = GapCause::kHostLate;  // no API records: assume the host did not feed the GPU
          g.detail = "no CUDA API records to tell (assumed host-side)";
        } else {
          g.cause = GapCause::kOther;
          g.detail = launch ? "work was queued in time; waiting on a dependency"
                            : "no launching call recorded";
        }
        const uint32_t tid = launch ? launch->thread_id : 0;
        const uint64_t mid = g.start_ns + (g.end_ns - g.start_ns) / 2;
        g.nvtx = sweep.InnermostAt(mid, tid);
        a.cause_ns[r][g.cause] += g.length();
        ++a.cause_count[r][g.cause];
        a.cause_nvtx_ns[r][g.cause][g.nvtx] += g.length();
        IdleAnalysis::Slice slice{r, g.cause, -1, 0, g.length()};
        if (!g.nvtx.empty()) {
          auto [it2, added] =
              range_index.emplace(g.nvtx, static_cast<uint32_t>(a.range_names.size()));
          if (added) a.range_names.push_back(g.nvtx);
          slice.range = it2->second;
        }
        if (windows) {
          slice.step = StepOf(*windows, mid);
          if (slice.step >= 0) {
            const Interval& w = (*windows)[static_cast<size_t>(slice.step)];
            slice.ns = std::min(g.end_ns, w.end) - std::max(g.start_ns, w.start);
          }
        }
        a.slices.push_back(slice);
        all.push_back(std::move(g));
      }
      busy_end = std::max(busy_end, v[i].end);
    }
  }
  std::sort(all.begin(), all.end(),
            [](const Gap& x, const Gap& y) { return x.length() > y.length(); });
  if (all.size() > 20) all.resize(20);
  a.top_gaps = std::move(all);
  return a;
}

// ---- Memory -------------------------------------------------------------------------

std::vector<MemoryRank> AnalyzeMemory(const Timeline& t) {
  std::vector<MemoryRank> out(t.world_size);
  for (const auto& m : t.memcpys) {
    MemoryRank& r = out[m.rank];
    const uint64_t d =
        m.record.end_ns > m.record.start_ns ? m.record.end_ns - m.record.start_ns : 0;
    ++r.copies;
    r.copy_bytes += m.record.bytes;
    r.copy_ns += d;
    if (m.record.src_kind == 1 || m.record.dst_kind == 1) {
      ++r.pageable_count;
      r.pageable_bytes += m.record.bytes;
      r.pageable_ns += d;
    }
    if (m.record.bytes < 64 * 1024) {
      ++r.small_count;
      r.small_ns += d;
    }
  }
  return out;
}

// ---- NVTX attribution ---------------------------------------------------------------

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
  for (const auto& m : t.nvtx) {
    if (m.record.type == static_cast<uint8_t>(NvtxType::kMark)) continue;
    const uint32_t i = index_of(m.record);
    NvtxStat& s = stats[i];
    const uint64_t d =
        m.record.end_ns > m.record.start_ns ? m.record.end_ns - m.record.start_ns : 0;
    ++s.count;
    s.range_ns += d;
    s.per_rank_range_ns[m.rank] += d;
    ++s.per_rank_count[m.rank];
    if (m.record.type != static_cast<uint8_t>(NvtxType::kPushPop)) continue;
    events[m.rank].push_back({m.record.start_ns, 1, m.record.thread_id, i, 0, false});
    events[m.rank].push_back({m.record.end_ns, 0, m.record.thread_id, i, 0, false});
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

}  // namespace aon::report
