// Collectives, bus bandwidth and stragglers: NCCL coll records matched across
// ranks by (comm_hash, seq_number, graph_replay), or else the k-th NCCL kernel of
// one name on each rank; per collective the skew, the last rank and the others'
// waiting; per rank the waiting it caused (unions, steady state per step).
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "analyses/analysis.h"

namespace aon::report {

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

// Collectives from NCCL coll records, those seen on every rank of their communicator.
void MatchCollRecords(const Timeline& t, Communication* c) {
  c->source = "NCCL records";
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
    c->collectives.push_back(std::move(col));
  }
}

// Collectives from NCCL kernels when there are no coll records.
void MatchKernelsByOrder(const Timeline& t, Communication* c) {
  // Kernel-order fallback: the k-th NCCL kernel of one name on each rank.
  std::map<uint32_t, std::vector<std::vector<const Merged<KernelRecord>*>>> by_name;
  for (const auto& m : t.kernels) {
    const std::string& name = t.strings.Get(m.record.name_id);
    if (!IsNcclKernelName(name)) continue;
    auto& per_rank = by_name[m.record.name_id];
    if (per_rank.size() < t.world_size) per_rank.resize(t.world_size);
    per_rank[m.rank].push_back(&m);
  }
  if (!by_name.empty()) c->source = "NCCL kernels (matched across ranks by order)";
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
      c->collectives.push_back(std::move(col));
    }
  }
}

// Per rank: how often it arrived last, the waiting it caused and its own waiting.
void ComputeStragglers(const Timeline& t, const Steps* steps, Communication* c) {
  // Stragglers: waiting intervals, by (last rank, waiting rank, step of the last rank).
  std::map<std::tuple<uint32_t, uint32_t, int32_t>, std::vector<Interval>> lost_iv;
  std::map<std::pair<uint32_t, int32_t>, std::vector<Interval>> gain_iv;
  std::vector<std::vector<Interval>> wait_iv(t.world_size);
  // NCCL operation records are continuous (every step); NCCL kernels only exist
  // in capture windows.
  const bool gpu_only = c->source != "NCCL records";
  auto windows_of = [&](uint32_t r) { return StepWindows(steps, r, gpu_only); };
  for (const Collective& col : c->collectives) {
    const uint32_t last_rank = col.last_rank;
    const std::vector<Interval>* windows = windows_of(last_rank);
    const int32_t step = windows ? StepOf(*windows, col.last_arrival_ns) : -1;
    for (size_t i = 0; i < col.ranks.size(); ++i) {
      ++c->stragglers[col.ranks[i]].collectives;
      if (col.arrival_ns[i] < col.last_arrival_ns) {
        const Interval w{col.arrival_ns[i], col.last_arrival_ns};
        wait_iv[col.ranks[i]].push_back(w);
        lost_iv[{last_rank, col.ranks[i], step}].push_back(w);
      }
    }
    ++c->stragglers[last_rank].last_count;
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
    c->stragglers[last_rank].caused_lost_ns += len;
    if (step >= 0) lost_steps[last_rank][static_cast<size_t>(step)] += len;
  }
  for (auto& [key, v] : gain_iv) {
    const uint64_t len = TotalLength(Union(std::move(v)));
    c->stragglers[key.first].gain_ns += len;
    if (key.second >= 0) gain_steps[key.first][static_cast<size_t>(key.second)] += len;
  }
  for (uint32_t r = 0; r < t.world_size; ++r) {
    StragglerStats& s = c->stragglers[r];
    s.waited_ns = TotalLength(Union(std::move(wait_iv[r])));
    s.last_fraction = s.collectives ? static_cast<double>(s.last_count) / s.collectives : 0;
    const double scale = RunScale(steps, r, gpu_only);
    s.steady_lost_ns = windows_of(r) ? static_cast<uint64_t>(SteadyTotal(lost_steps[r]) * scale)
                                     : s.caused_lost_ns;
    s.steady_gain_ns =
        windows_of(r) ? static_cast<uint64_t>(SteadyTotal(gain_steps[r]) * scale) : s.gain_ns;
  }
}

// Per group of like collectives: mean transfer time, usual algorithm, bandwidths.
void BuildGroups(Communication* c) {
  // Groups per (type, bytes, nranks).
  std::map<std::tuple<std::string, uint64_t, uint32_t>, std::vector<const Collective*>> groups;
  for (const Collective& col : c->collectives) {
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
    c->groups.push_back(g);
  }
}

}  // namespace

Communication AnalyzeCommunication(const Timeline& t, const Steps* steps) {
  Communication c;
  c.stragglers.resize(t.world_size);
  for (uint32_t r = 0; r < t.world_size; ++r) c.stragglers[r].rank = r;
  std::set<uint32_t> ok_ranks;
  for (const RankInfo& r : t.ranks) {
    if (RankMerged(r.status)) ok_ranks.insert(r.rank);
  }

  bool have_coll = false;
  for (const auto& m : t.nccl)
    have_coll |= m.record.event_type == static_cast<uint8_t>(NcclEventType::kColl);
  if (have_coll) {
    MatchCollRecords(t, &c);
  } else {
    MatchKernelsByOrder(t, &c);
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

  ComputeStragglers(t, steps, &c);
  BuildGroups(&c);
  return c;
}

const Analysis kCommunicationAnalysis = {
    "communication", "steps", "comm",
    [](const Timeline& t, Report* r) { r->comm = AnalyzeCommunication(t, &r->steps); }};

}  // namespace aon::report
