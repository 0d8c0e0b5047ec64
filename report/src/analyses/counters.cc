// GPU counters (docs/counters.md): "why is it slow" from the node collector's
// GPM rows and the agents' PM samples in capture windows (two tiers, each GPU's
// kept apart). Per GPU and tier, the run's means (weighted by interval length)
// and the series; per NVTX phase, the rows of its ranks' GPUs weighted by their
// overlap with each instance of the range, from PM samples when they cover it
// (>= kMinCounterIntervals of them), else from GPM; per kernel, the sample
// intervals where one kernel name fills >= 80 % of its rank's GPU-busy time, PM
// samples first. The verdict rules are JudgeCounters(), here and nowhere else.
//
// A rank's GPUs: the UUIDs of its /meta/devices rows (when it lists several,
// those its kernels ran on); a rank without device rows is tied to the GPU of
// its host whose NVML index is its local rank, and that tie is said to be
// assumed.
#include <algorithm>
#include <array>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "analyses/analysis.h"

namespace aon::report {

void CounterMeans::Add(uint16_t metric, double value, double weight_ns) {
  if (metric == 0 || metric >= kMetrics || !(weight_ns > 0) || !std::isfinite(value)) return;
  sum[metric] += value * weight_ns;
  weight[metric] += weight_ns;
}

bool CounterMeans::Has(CounterMetric m) const {
  const int i = static_cast<int>(m);
  return i > 0 && i < kMetrics && weight[i] > 0;
}

double CounterMeans::Mean(CounterMetric m) const {
  return Has(m) ? sum[static_cast<int>(m)] / weight[static_cast<int>(m)] : -1;
}

namespace {

std::string Pct(double v) {
  if (v < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %%", v);
  return buf;
}

}  // namespace

// The verdict rules (docs/counters.md, "Verdicts"):
//   busy = gpu_active_pct (sm_active_pct when the GPU lacks it);
//   busy < 50                                -> launch-bound (the GPU is not fed);
//   compute = max(tensor, fp16, fp32, fp64 active), memory = dram_bandwidth,
//   each while busy (its mean / busy, at most 100: the pipes are idle whenever
//   the GPU is, so a phase busy 62 % of its time at 55 % tensor ran its tensor
//   cores 89 % of the time it ran at all):
//   compute >= 60 and compute >= memory      -> compute-bound;
//   else memory >= 60                        -> memory-bound;
//   else                                     -> latency-bound (busy, neither near peak).
const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kUnknown:
      return "unknown";
    case Verdict::kTooShort:
      return "too short";
    case Verdict::kLaunchBound:
      return "launch-bound";
    case Verdict::kComputeBound:
      return "compute-bound";
    case Verdict::kMemoryBound:
      return "memory-bound";
    case Verdict::kLatencyBound:
      return "latency-bound";
    case Verdict::kHostBound:
      return "host-bound";
  }
  return "unknown";
}

CounterVerdict JudgeCounters(const CounterMeans& m) {
  CounterVerdict v;
  v.sm_active_pct = m.Mean(CounterMetric::kSmActive);
  v.occupancy_pct = m.Mean(CounterMetric::kSmOccupancy);
  v.memory_pct = m.Mean(CounterMetric::kDramBandwidth);
  if (m.Has(CounterMetric::kGpuActive)) {
    v.busy_pct = m.Mean(CounterMetric::kGpuActive);
    v.busy_metric = "gpu_active";
  } else if (m.Has(CounterMetric::kSmActive)) {
    v.busy_pct = v.sm_active_pct;
    v.busy_metric = "sm_active";
  }
  static constexpr std::pair<CounterMetric, const char*> kPipes[] = {
      {CounterMetric::kTensorActive, "tensor"},
      {CounterMetric::kFp16Active, "fp16"},
      {CounterMetric::kFp32Active, "fp32"},
      {CounterMetric::kFp64Active, "fp64"},
      {CounterMetric::kSmIssueActive, "issue"}};
  for (const auto& [metric, pipe] : kPipes) {
    if (m.Has(metric) && m.Mean(metric) > v.compute_pct) {
      v.compute_pct = m.Mean(metric);
      v.compute_pipe = pipe;
    }
  }
  v.why = "busy " + Pct(v.busy_pct) + (v.busy_metric.empty() ? "" : " (" + v.busy_metric + ")") +
          ", compute " + Pct(v.compute_pct) +
          (v.compute_pipe.empty() ? "" : " (" + v.compute_pipe + ")") + ", memory " +
          Pct(v.memory_pct) + ", sm_active " + Pct(v.sm_active_pct) + ", occupancy " +
          Pct(v.occupancy_pct);
  // The pipes while busy (above).
  const double share = std::clamp(v.busy_pct / 100.0, 0.01, 1.0);
  const double compute_busy = std::min(100.0, v.compute_pct / share);
  const double memory_busy = std::min(100.0, v.memory_pct / share);
  if (v.busy_pct >= kLaunchBoundBusyPct && share < 0.995 && v.compute_pct >= 0 &&
      v.memory_pct >= 0) {
    v.why += "; while busy: compute " + Pct(compute_busy) + ", memory " + Pct(memory_busy);
  }
  if (v.busy_pct < 0) {
    v.verdict = Verdict::kUnknown;
    v.why = "no gpu_active_pct or sm_active_pct rows";
  } else if (v.busy_pct < kLaunchBoundBusyPct) {
    v.verdict = Verdict::kLaunchBound;
    v.action =
        "GPU not fed: use CUDA graphs, fewer and larger kernels, move host work off the "
        "critical path";
  } else if (v.compute_pct < 0 || v.memory_pct < 0) {
    v.verdict = Verdict::kUnknown;
    v.why += " (no pipe or DRAM metrics to tell compute from memory)";
  } else if (compute_busy >= kBoundPct && compute_busy >= memory_busy) {
    v.verdict = Verdict::kComputeBound;
    v.action = v.compute_pipe == "tensor"
                   ? "the tensor cores are near peak: gains must come from doing less work "
                     "(algorithmic savings)"
                   : "use lower precision on the tensor cores (TF32/BF16/FP16) if the math "
                     "allows; if this is the precision you need, it is near peak: algorithmic "
                     "savings";
  } else if (memory_busy >= kBoundPct) {
    v.verdict = Verdict::kMemoryBound;
    v.action = "fuse kernels, use lower precision, improve data layout and reuse";
  } else {
    v.verdict = Verdict::kLatencyBound;
    v.action =
        "neither compute nor memory near peak while busy: more work per launch, more "
        "parallelism/occupancy, overlap independent work";
  }
  return v;
}

namespace {

// One sample interval of one GPU: its rows.
struct Sample {
  uint64_t start = 0, end = 0;
  std::vector<std::pair<uint16_t, double>> values;  // (metric, value)
  bool has_busy = false;                            // holds the GPU's busy metric
};

struct GpuRows {
  std::vector<Sample> samples;  // by start
  uint64_t max_len = 0;
};

std::string HexUuid(GpuUuid u) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64, u.hi, u.lo);
  return buf;
}

bool SampledSource(uint8_t source) {
  return source == static_cast<uint8_t>(CounterSource::kPmSampling) ||
         source == static_cast<uint8_t>(CounterSource::kSyntheticPmSampling);
}

// The GPUs with rows (one entry per GPU and tier), sorted by host and device,
// and their samples.
void CollectGpus(const Timeline& t, CounterAnalysis* a, std::vector<GpuRows>* rows) {
  std::map<std::tuple<uint64_t, uint64_t, bool>, size_t> index;
  std::vector<CounterGpu> gpus;
  for (const auto& m : t.counters) {
    const CounterRecord& c = m.record;
    if (c.end_ns <= c.start_ns) continue;
    const bool sampled = SampledSource(c.source);
    auto [it, added] = index.try_emplace({c.gpu_uuid_hi, c.gpu_uuid_lo, sampled}, gpus.size());
    if (added) {
      CounterGpu g;
      g.sampled = sampled;
      g.device = c.device;
      g.uuid = {c.gpu_uuid_hi, c.gpu_uuid_lo};
      g.host = m.rank < t.ranks.size() ? t.ranks[m.rank].host : "";
      const char* source = EnumValueName(kCounterSourceValues, c.source);
      g.source = source ? source : "unknown";
      gpus.push_back(std::move(g));
    }
    CounterGpu& g = gpus[it->second];
    g.means.Add(c.metric, c.value, static_cast<double>(c.end_ns - c.start_ns));
    g.series[c.metric].push_back({c.start_ns, c.end_ns, c.value});
    a->synthetic |= c.source == static_cast<uint8_t>(CounterSource::kSynthetic) ||
                    c.source == static_cast<uint8_t>(CounterSource::kSyntheticPmSampling);
  }
  std::map<std::pair<uint64_t, uint64_t>, std::string> uuid_text;
  for (const auto& d : t.devices) {
    const GpuUuid u = GpuUuidFromText(t.strings.Get(d.record.uuid_id));
    uuid_text[{u.hi, u.lo}] = t.strings.Get(d.record.uuid_id);
  }
  std::sort(gpus.begin(), gpus.end(), [](const CounterGpu& x, const CounterGpu& y) {
    if (x.host != y.host) return x.host < y.host;
    return x.device != y.device ? x.device < y.device : x.sampled < y.sampled;
  });
  rows->assign(gpus.size(), {});
  for (size_t i = 0; i < gpus.size(); ++i) {
    CounterGpu& g = gpus[i];
    auto text = uuid_text.find({g.uuid.hi, g.uuid.lo});
    g.uuid_text = text != uuid_text.end() ? text->second : HexUuid(g.uuid);
    const uint16_t busy =
        static_cast<uint16_t>(g.means.Has(CounterMetric::kGpuActive) ? CounterMetric::kGpuActive
                                                                     : CounterMetric::kSmActive);
    std::map<std::pair<uint64_t, uint64_t>, Sample> by_interval;
    for (auto& [metric, points] : g.series) {
      std::sort(points.begin(), points.end(), [](const CounterPoint& x, const CounterPoint& y) {
        return x.start_ns < y.start_ns;
      });
      for (const CounterPoint& p : points) {
        Sample& s = by_interval[{p.start_ns, p.end_ns}];
        s.start = p.start_ns, s.end = p.end_ns;
        s.values.push_back({metric, p.value});
        s.has_busy |= metric == busy;
      }
    }
    std::vector<double> lengths;
    for (auto& [key, s] : by_interval) {
      (*rows)[i].max_len = std::max((*rows)[i].max_len, s.end - s.start);
      if (s.has_busy) lengths.push_back(static_cast<double>(s.end - s.start));
      (*rows)[i].samples.push_back(std::move(s));
    }
    g.interval_ns = static_cast<uint64_t>(Median(lengths));
    g.run = JudgeCounters(g.means);
  }
  a->gpus = std::move(gpus);
}

// Per rank, the indexes of its GPUs in a->gpus (see the file's comment).
std::vector<std::vector<size_t>> TieRanks(const Timeline& t, CounterAnalysis* a) {
  std::vector<std::vector<size_t>> tied(t.world_size);
  std::multimap<std::pair<uint64_t, uint64_t>, size_t> by_uuid;  // both tiers of a GPU
  for (size_t i = 0; i < a->gpus.size(); ++i)
    by_uuid.insert({{a->gpus[i].uuid.hi, a->gpus[i].uuid.lo}, i});
  std::vector<std::vector<const DeviceInfo*>> devices(t.world_size);
  for (const auto& d : t.devices)
    if (d.rank < t.world_size) devices[d.rank].push_back(&d.record);
  std::vector<std::set<uint32_t>> used(t.world_size);  // CUDA ordinals its kernels ran on
  for (const auto& k : t.kernels)
    if (k.rank < t.world_size) used[k.rank].insert(k.record.device_id);
  std::string assumed;
  for (uint32_t r = 0; r < t.world_size; ++r) {
    if (devices[r].empty()) {
      // No device rows: the GPU of its host whose NVML index is its local rank.
      for (size_t i = 0; i < a->gpus.size(); ++i) {
        CounterGpu& g = a->gpus[i];
        if (g.host != t.ranks[r].host || g.device != t.ranks[r].local_rank) continue;
        tied[r].push_back(i);
        g.assumed = true;
        assumed += (assumed.empty() ? "" : ", ") + std::to_string(r);
      }
      continue;
    }
    std::vector<const DeviceInfo*> mine = devices[r];
    if (mine.size() > 1) {
      std::vector<const DeviceInfo*> ran;
      for (const DeviceInfo* d : mine)
        if (used[r].count(d->device_id)) ran.push_back(d);
      if (!ran.empty()) mine = ran;
    }
    for (const DeviceInfo* d : mine) {
      const GpuUuid u = GpuUuidFromText(t.strings.Get(d->uuid_id));
      auto [from, to] = by_uuid.equal_range({u.hi, u.lo});
      for (auto it = from; it != to; ++it)
        if (std::find(tied[r].begin(), tied[r].end(), it->second) == tied[r].end())
          tied[r].push_back(it->second);
    }
  }
  for (size_t r = 0; r < tied.size(); ++r)
    for (size_t i : tied[r]) a->gpus[i].ranks.push_back(static_cast<uint32_t>(r));
  if (!assumed.empty()) {
    a->note = "rank(s) " + assumed +
              " list no GPU (/meta/devices): tied to the GPU whose NVML index is their local "
              "rank (assumed)";
  }
  return tied;
}

// Adds to `means` the samples of `rows` overlapping [start, end), each weighted by
// its overlap; returns the overlap in sample intervals (of the busy metric).
double AddOverlap(const GpuRows& rows, uint64_t start, uint64_t end, CounterMeans* means) {
  const uint64_t from = start > rows.max_len ? start - rows.max_len : 0;
  auto it = std::lower_bound(rows.samples.begin(), rows.samples.end(), from,
                             [](const Sample& s, uint64_t at) { return s.start < at; });
  double intervals = 0;
  for (; it != rows.samples.end() && it->start < end; ++it) {
    const uint64_t lo = std::max(it->start, start), hi = std::min(it->end, end);
    if (hi <= lo) continue;
    const double overlap = static_cast<double>(hi - lo);
    for (const auto& [metric, value] : it->values) means->Add(metric, value, overlap);
    if (it->has_busy) intervals += overlap / static_cast<double>(it->end - it->start);
  }
  return intervals;
}

std::string TooShort(double intervals, uint64_t interval_ns) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.2f sample intervals of %s overlap it; a verdict needs %.0f",
                intervals, FormatDuration(static_cast<double>(interval_ns)).c_str(),
                kMinCounterIntervals);
  return buf;
}

// A sample interval is an average over all of it: one a phase fills only in
// part also speaks for what ran beside it (a copy phase's DRAM traffic in the
// interval where a launch-bound phase begins). A phase is judged from the
// intervals it fills (>= kPhaseFill of each) when it has enough of them;
// only a phase that fills none is judged from its partial ones, weighted by
// what it covers, and then only when it covers most of them on average.
constexpr double kPhaseFill = 0.9;
constexpr double kBlendedMinCover = 0.5;

struct PhaseSamples {
  CounterMeans filled, all;  // intervals it fills (whole weight); all, by coverage
  double filled_n = 0;       // intervals it fills
  double all_n = 0;          // the fractions it covers, summed
  size_t touched = 0;        // intervals it overlaps at all
};

// Adds the samples of `rows` that the phase's `spans` (sorted, disjoint)
// overlap, each once with the fraction of it they cover.
void AddPhaseSamples(const GpuRows& rows, const std::vector<Interval>& spans, PhaseSamples* out) {
  if (spans.empty() || rows.samples.empty()) return;
  const uint64_t from = spans.front().start > rows.max_len ? spans.front().start - rows.max_len : 0;
  auto it = std::lower_bound(rows.samples.begin(), rows.samples.end(), from,
                             [](const Sample& s, uint64_t at) { return s.start < at; });
  auto span = spans.begin();
  for (; it != rows.samples.end() && it->start < spans.back().end; ++it) {
    while (span != spans.end() && span->end <= it->start) ++span;
    uint64_t covered = 0;
    for (auto s = span; s != spans.end() && s->start < it->end; ++s)
      covered += std::min(s->end, it->end) - std::max(s->start, it->start);
    if (covered == 0) continue;
    const double len = static_cast<double>(it->end - it->start);
    const double fill = static_cast<double>(covered) / len;
    for (const auto& [metric, value] : it->values) {
      out->all.Add(metric, value, static_cast<double>(covered));
      if (fill >= kPhaseFill) out->filled.Add(metric, value, len);
    }
    if (!it->has_busy) continue;
    out->all_n += fill;
    ++out->touched;
    if (fill >= kPhaseFill) out->filled_n += 1;
  }
}

// The NVTX domain NCCL names its API calls' ranges with.
constexpr std::string_view kNcclNvtxDomain = "NCCL";

// `span` less the parts inside `cut` (sorted, disjoint).
std::vector<Interval> Without(Interval span, const std::vector<Interval>* cut) {
  std::vector<Interval> out;
  if (cut == nullptr) return {span};
  auto it = std::lower_bound(cut->begin(), cut->end(), span.start,
                             [](const Interval& i, uint64_t at) { return i.end <= at; });
  uint64_t from = span.start;
  for (; it != cut->end() && it->start < span.end; ++it) {
    if (it->start > from) out.push_back({from, it->start});
    from = std::max(from, it->end);
  }
  if (from < span.end) out.push_back({from, span.end});
  return out;
}

// `a` within `b` (both sorted, disjoint).
std::vector<Interval> Intersect(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    const uint64_t lo = std::max(a[i].start, b[j].start), hi = std::min(a[i].end, b[j].end);
    if (hi > lo) out.push_back({lo, hi});
    (a[i].end < b[j].end ? i : j)++;
  }
  return out;
}

// The counters cannot call a phase launch-bound (the GPU mostly idle) where the
// trace shows its GPU busy: kernel, copy and memset records are exact, so a
// phase whose traced time (the parts inside the rank's records: with capture
// windows, inside captured steps; at least kCrossCheckMinNs) has the GPU busy
// kTraceBusy or more of it while the counters say under 50 % has samples that
// do not match it (a sampling or clock fault): no verdict, and why.
constexpr double kTraceBusy = 0.8;
constexpr uint64_t kCrossCheckMinNs = 5'000'000;

void CrossCheck(const std::vector<std::vector<Interval>>& busy, const Steps* steps,
                CounterPhase* p) {
  if (p->verdict.verdict != Verdict::kLaunchBound) return;
  uint64_t traced = 0, busy_ns = 0;
  for (const auto& [rank, spans] : p->spans) {
    if (rank >= busy.size() || busy[rank].empty()) continue;
    std::vector<Interval> seen =
        steps != nullptr && steps->windowed
            ? Union(steps->GpuSteps(rank))
            : std::vector<Interval>{{busy[rank].front().start, busy[rank].back().end}};
    const std::vector<Interval> looked = Intersect(spans, seen);
    traced += TotalLength(looked);
    busy_ns += IntersectionLength(busy[rank], looked);
  }
  if (traced < kCrossCheckMinNs) return;
  const double share = static_cast<double>(busy_ns) / static_cast<double>(traced);
  if (share < kTraceBusy) return;
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "the counters say busy %.1f %% but the trace has the GPU busy %.0f %% of the "
                "phase's %s traced time: the samples do not match it, no verdict",
                p->verdict.busy_pct, share * 100,
                FormatDuration(static_cast<double>(traced)).c_str());
  p->verdict = CounterVerdict{};
  p->verdict.verdict = Verdict::kUnknown;
  p->verdict.why = buf;
}

// Why a launch-bound phase's GPU idles, from the trace (IdleAnalysis' gaps,
// classified by what the host did: docs/counters.md, "Verdicts"): the counters
// say the GPU is not fed, not why, and the actions differ. Over the phase's
// traced time (inside captured steps with capture windows, kCrossCheckMinNs at
// least), when one cause that is not launch overhead holds more than half of
// the gap time there (host work outside CUDA calls, host synchronization,
// synchronous copies), the phase is host-bound with that cause's action: CUDA
// graphs do nothing for a host that computes or waits. Otherwise it stays
// launch-bound; either way `why` gives the shares.
constexpr double kCauseMajority = 0.5;

const char* HostBoundAction(GapCause c) {
  switch (c) {
    case GapCause::kHostWork:
      return "GPU idle while the host runs code outside CUDA calls (input pipeline, Python "
             "work, logging): load and transform data in DataLoader workers (num_workers > 0, "
             "pin_memory, prefetching), move that work off the critical path; CUDA graphs do "
             "not help";
    case GapCause::kHostSync:
      return "GPU idle while the host waits on it: remove synchronization from the loop "
             "(.item(), .cpu(), cudaStreamSynchronize), read values every N steps";
    case GapCause::kSyncCopy:
      return "GPU idle around synchronous or pageable copies: pin host memory and copy "
             "asynchronously (pin_memory=True, non_blocking=True)";
    default:
      return "";
  }
}

void AttributeIdle(const IdleAnalysis& idle, const Steps* steps,
                   const std::vector<std::vector<const IdleAnalysis::Slice*>>& slices,
                   CounterPhase* p) {
  if (p->verdict.verdict != Verdict::kLaunchBound) return;
  for (const auto& [rank, spans] : p->spans) {
    if (rank >= slices.size()) continue;
    if (steps != nullptr && steps->windowed) {
      p->traced_ns += IntersectionLength(Union(steps->GpuSteps(rank)), spans);
    } else if (rank < idle.steps.size()) {
      p->traced_ns += TotalLength(spans);
    }
    for (const IdleAnalysis::Slice* s : slices[rank]) {
      const uint64_t in = LengthWithin(spans, {s->start_ns, s->start_ns + s->ns});
      if (in > 0) p->idle_ns[s->cause] += in;
    }
  }
  if (p->traced_ns < kCrossCheckMinNs) return;
  uint64_t gaps = 0, top_ns = 0;
  GapCause top = GapCause::kOther;
  for (const auto& [cause, ns] : p->idle_ns) {
    gaps += ns;
    if (ns > top_ns) top = cause, top_ns = ns;
  }
  if (gaps == 0) return;
  std::string shares;
  for (GapCause c : kGapCauses) {
    auto it = p->idle_ns.find(c);
    if (it == p->idle_ns.end() || it->second == 0) continue;
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s%s %.0f %%", shares.empty() ? "" : ", ", GapCauseName(c),
                  100.0 * static_cast<double>(it->second) / static_cast<double>(gaps));
    shares += buf;
  }
  char head[160];
  std::snprintf(head, sizeof head, "; the trace has its GPU idle %.0f %% of %s traced: ",
                100.0 * static_cast<double>(gaps) / static_cast<double>(p->traced_ns),
                FormatDuration(static_cast<double>(p->traced_ns)).c_str());
  p->verdict.why += head + shares;
  const char* action = HostBoundAction(top);
  if (*action == '\0' || static_cast<double>(top_ns) <= kCauseMajority * static_cast<double>(gaps))
    return;
  p->verdict.verdict = Verdict::kHostBound;
  p->verdict.action = action;
}

// A phase is the program's work: its ranges' time while the host compiled is
// compilation's (CompileAnalysis), left out of its seconds and its counters,
// and compile ranges are not phases.
void JudgePhases(const Timeline& t, const std::vector<std::vector<size_t>>& tied,
                 const std::vector<GpuRows>& rows, const CompileAnalysis* compile,
                 const Steps* steps, const IdleAnalysis* idle, CounterAnalysis* a) {
  const std::vector<std::vector<Interval>> busy = GpuBusyUnions(t);
  std::vector<std::vector<const IdleAnalysis::Slice*>> slices(t.world_size);
  if (idle != nullptr) {
    for (const IdleAnalysis::Slice& s : idle->slices)
      if (s.rank < slices.size()) slices[s.rank].push_back(&s);
  }
  std::map<std::string, size_t> index;
  // per phase and rank: its ranges, whose union is the phase's wall time there
  // (ranges of one name on several threads at once count once)
  std::vector<std::map<uint32_t, std::vector<Interval>>> per_rank;
  std::vector<bool> has_gpu;
  uint64_t interval_ns = 0;
  for (const CounterGpu& g : a->gpus)
    if (!g.sampled) interval_ns = std::max(interval_ns, g.interval_ns);
  for (const auto& m : t.nvtx) {
    const NvtxRecord& n = m.record;
    if (n.type == static_cast<uint8_t>(NvtxType::kMark) || n.end_ns <= n.start_ns) continue;
    std::string name = NormalizeRangeName(t.strings.Get(n.name_id));
    if (IsStepRangeName(name)) continue;
    const std::string& domain = t.strings.Get(n.domain_id);
    // NCCL's own ranges are its API calls (the communication analysis has
    // them): a communicator's set-up or teardown leaving the GPU idle is not a
    // phase of the program to judge.
    if (domain == kNcclNvtxDomain) continue;
    if (!CompileFramework(domain, t.strings.Get(n.name_id)).empty()) continue;
    const CompileRank* compiling = compile != nullptr ? compile->Of(m.rank) : nullptr;
    const std::vector<Interval> pieces =
        Without({n.start_ns, n.end_ns}, compiling ? &compiling->spans : nullptr);
    if (pieces.empty()) continue;  // compiling throughout
    if (!domain.empty()) name = domain + ":" + name;
    auto [it, added] = index.try_emplace(name, a->phases.size());
    if (added) {
      a->phases.push_back({});
      a->phases.back().name = name;
      per_rank.emplace_back();
      has_gpu.push_back(false);
    }
    CounterPhase& p = a->phases[it->second];
    ++p.instances;
    auto& spans = per_rank[it->second][m.rank];
    spans.insert(spans.end(), pieces.begin(), pieces.end());
    if (m.rank >= tied.size()) continue;
    if (!tied[m.rank].empty()) has_gpu[it->second] = true;
  }
  for (size_t i = 0; i < a->phases.size(); ++i) {
    CounterPhase& p = a->phases[i];
    PhaseSamples tiers[2];  // the node's GPM metrics, PM samples
    for (auto& [rank, spans] : per_rank[i]) {
      std::vector<Interval>& u = p.spans[rank] = Union(std::move(spans));
      p.seconds = std::max(p.seconds, TotalLength(u) / 1e9);
      if (rank >= tied.size()) continue;
      for (size_t g : tied[rank]) AddPhaseSamples(rows[g], u, &tiers[a->gpus[g].sampled ? 1 : 0]);
    }
    // Per tier: the intervals it fills, else (none filled) its partial ones
    // when it covers most of them; PM samples first when they suffice.
    bool blended = false;
    double cover = 0;
    auto pick = [&](const PhaseSamples& tier, bool sampled) {
      if (tier.filled_n + 1e-9 >= kMinCounterIntervals) {
        p.means = tier.filled;
        p.intervals = tier.filled_n;
      } else if (tier.filled_n == 0 && tier.all_n + 1e-9 >= kMinCounterIntervals &&
                 tier.all_n >= kBlendedMinCover * static_cast<double>(tier.touched)) {
        p.means = tier.all;
        p.intervals = tier.all_n;
        blended = true;
        cover = tier.all_n / static_cast<double>(tier.touched);
      } else {
        return false;
      }
      p.sampled = sampled;
      return true;
    };
    const bool judged = pick(tiers[1], true) || pick(tiers[0], false);
    if (!judged) p.intervals = std::max(tiers[0].filled_n, tiers[1].filled_n);
    if (!has_gpu[i]) {
      p.verdict.verdict = Verdict::kUnknown;
      p.verdict.why = "no counter rows of its ranks' GPUs";
    } else if (!judged) {
      p.verdict.verdict = Verdict::kTooShort;
      const PhaseSamples& gpm = tiers[0];
      p.verdict.why =
          gpm.touched > 0 && gpm.all_n + 1e-9 >= kMinCounterIntervals
              ? "shares its counter intervals with other work (it fills " +
                    std::to_string(static_cast<int>(gpm.filled_n)) + " of the " +
                    std::to_string(gpm.touched) + " it overlaps, " +
                    std::to_string(
                        static_cast<int>(100 * gpm.all_n / static_cast<double>(gpm.touched))) +
                    " % of each on average): a verdict needs intervals it fills"
              : "too short for the counters' interval: " + TooShort(gpm.all_n, interval_ns);
    } else {
      p.verdict = JudgeCounters(p.means);
      if (blended) {
        char note[200];
        std::snprintf(note, sizeof note,
                      " (no counter interval lies inside it: these figures blend it with what "
                      "ran beside it, %.0f %% its own)",
                      100 * cover);
        p.verdict.why += note;
      }
      CrossCheck(busy, steps, &p);
    }
    if (idle != nullptr) AttributeIdle(*idle, steps, slices, &p);
  }
  std::stable_sort(
      a->phases.begin(), a->phases.end(),
      [](const CounterPhase& x, const CounterPhase& y) { return x.seconds > y.seconds; });
}

// The kernel dominance rule: a sample interval of a rank's (single) GPU speaks
// for a kernel name when that name's kernels cover >= 80 % of the rank's GPU-busy
// time in it; only intervals the rank's records fully cover count (with capture
// windows: inside its captured steps).
void JudgeKernels(const Timeline& t, const std::vector<std::vector<size_t>>& tied,
                  const std::vector<GpuRows>& rows, const std::vector<KernelStats>& top,
                  const Steps* steps, CounterAnalysis* a) {
  if (t.kernels.empty()) return;
  struct Dominated {
    CounterMeans means;
    uint64_t intervals = 0;
  };
  // By name id, per tier ([0] GPM, [1] PM samples): never mixed, PM samples
  // judge a kernel when they give it enough intervals.
  std::map<uint32_t, std::array<Dominated, 2>> by_kernel;
  const auto busy = GpuBusyUnions(t);
  std::vector<std::vector<const KernelRecord*>> kernels(t.world_size);
  std::vector<uint64_t> longest(t.world_size, 0);
  for (const auto& k : t.kernels) {
    if (k.rank >= t.world_size || k.record.end_ns <= k.record.start_ns) continue;
    kernels[k.rank].push_back(&k.record);
    longest[k.rank] = std::max(longest[k.rank], k.record.end_ns - k.record.start_ns);
  }
  for (uint32_t r = 0; r < t.world_size; ++r) {
    if (r >= tied.size() || kernels[r].empty()) continue;
    // A rank of exactly one GPU (its kernels and busy time are that GPU's); of
    // that GPU's tiers, PM samples first.
    std::set<std::pair<uint64_t, uint64_t>> uuids;
    for (size_t g : tied[r]) uuids.insert({a->gpus[g].uuid.hi, a->gpus[g].uuid.lo});
    if (uuids.size() != 1) continue;
    std::vector<size_t> sampled, node;
    for (size_t g : tied[r]) (a->gpus[g].sampled ? sampled : node).push_back(g);
    const std::vector<size_t>& gpu = sampled.empty() ? node : sampled;
    if (gpu.size() != 1) continue;
    const size_t tier = sampled.empty() ? 0 : 1;
    auto& ks = kernels[r];
    std::sort(ks.begin(), ks.end(), [](const KernelRecord* x, const KernelRecord* y) {
      return x->start_ns < y->start_ns;
    });
    std::vector<Interval> covered;
    const bool windowed = steps != nullptr && steps->windowed;
    if (windowed) covered = Union(steps->GpuSteps(r));
    for (const Sample& s : rows[gpu[0]].samples) {
      const Interval w{s.start, s.end};
      if (windowed && LengthWithin(covered, w) < s.end - s.start) continue;
      const uint64_t gpu_busy = r < busy.size() ? LengthWithin(busy[r], w) : 0;
      if (gpu_busy == 0) continue;
      std::map<uint32_t, std::vector<Interval>> by_name;
      const uint64_t from = s.start > longest[r] ? s.start - longest[r] : 0;
      auto it =
          std::lower_bound(ks.begin(), ks.end(), from,
                           [](const KernelRecord* k, uint64_t at) { return k->start_ns < at; });
      for (; it != ks.end() && (*it)->start_ns < s.end; ++it) {
        const uint64_t lo = std::max((*it)->start_ns, s.start), hi = std::min((*it)->end_ns, s.end);
        if (hi > lo) by_name[(*it)->name_id].push_back({lo, hi});
      }
      for (auto& [name, v] : by_name) {
        const uint64_t mine = TotalLength(Union(std::move(v)));
        if (static_cast<double>(mine) < kKernelDominance * static_cast<double>(gpu_busy)) continue;
        Dominated& d = by_kernel[name][tier];
        ++d.intervals;
        for (const auto& [metric, value] : s.values)
          d.means.Add(metric, value, static_cast<double>(s.end - s.start));
        break;  // >= 80 %: no other name can be
      }
    }
  }
  std::map<std::string, const std::array<Dominated, 2>*> by_name;
  for (const auto& [id, d] : by_kernel) by_name[t.strings.Get(id)] = &d;
  for (size_t i = 0; i < top.size() && i < 10; ++i) {
    CounterKernel k;
    k.name = top[i].name;
    auto it = by_name.find(k.name);
    const Dominated* d = nullptr;
    if (it != by_name.end()) {
      const auto& tiers = *it->second;
      k.sampled = tiers[1].intervals >= kMinCounterIntervals;
      d = &tiers[k.sampled ? 1 : 0];
      k.intervals = d->intervals;
    }
    if (k.intervals >= kMinCounterIntervals) {
      k.verdict = JudgeCounters(d->means);
    } else {
      k.verdict.verdict = Verdict::kUnknown;
      k.verdict.why = "it fills >= 80 % of its GPU's busy time in " + std::to_string(k.intervals) +
                      " sample interval(s), a verdict needs 2: per-kernel figures come from PM "
                      "samples in capture windows (--counters auto; kernels longer than "
                      "--counters-sample-interval)";
    }
    a->kernels.push_back(std::move(k));
  }
}

// Each module's verdict over its kernels' executions on its ranks' GPU (one GPU
// per rank, as for kernels): PM samples where they give enough intervals, else
// the node's GPM metrics.
void JudgeModules(const std::vector<std::vector<size_t>>& tied, const std::vector<GpuRows>& rows,
                  const CounterAnalysis& a, std::vector<TorchModule>* modules) {
  for (TorchModule& m : *modules) {
    std::array<CounterMeans, 2> means;  // [0] GPM, [1] PM samples
    std::array<double, 2> intervals = {0, 0};
    std::array<uint64_t, 2> interval_ns = {0, 0};
    for (const auto& [rank, spans] : m.spans) {
      if (rank >= tied.size()) continue;
      std::set<std::pair<uint64_t, uint64_t>> uuids;
      for (size_t g : tied[rank]) uuids.insert({a.gpus[g].uuid.hi, a.gpus[g].uuid.lo});
      if (uuids.size() != 1) continue;
      for (size_t g : tied[rank]) {
        const int tier = a.gpus[g].sampled ? 1 : 0;
        interval_ns[tier] = std::max(interval_ns[tier], a.gpus[g].interval_ns);
        for (const Interval& s : spans)
          intervals[tier] += AddOverlap(rows[g], s.start, s.end, &means[tier]);
      }
    }
    const int tier = intervals[1] >= kMinCounterIntervals ? 1 : 0;
    m.sampled = tier == 1;
    if (intervals[tier] < kMinCounterIntervals) {
      m.verdict = CounterVerdict{};
      m.verdict.verdict = Verdict::kUnknown;
      m.verdict.why = TooShort(std::max(intervals[0], intervals[1]),
                               interval_ns[1] != 0 ? interval_ns[1] : interval_ns[0]) +
                      ": a module's verdict comes from PM samples in capture windows";
      continue;
    }
    m.verdict = JudgeCounters(means[tier]);
  }
}

}  // namespace

CounterAnalysis AnalyzeCounters(const Timeline& t, const std::vector<KernelStats>& kernels,
                                const Steps* steps, std::vector<TorchModule>* modules,
                                const CompileAnalysis* compile, const IdleAnalysis* idle,
                                std::vector<TorchModule>* xla_modules) {
  CounterAnalysis a;
  if (t.counters.empty()) {
    a.note =
        "no GPU counters in this timeline (aon-run --counters auto|gpm on GPUs with NVML GPM, "
        "Hopper or newer; docs/counters.md)";
    return a;
  }
  a.present = true;
  std::vector<GpuRows> rows;
  CollectGpus(t, &a, &rows);
  const auto tied = TieRanks(t, &a);
  JudgePhases(t, tied, rows, compile, steps, idle, &a);
  JudgeKernels(t, tied, rows, kernels, steps, &a);
  if (modules != nullptr) JudgeModules(tied, rows, a, modules);
  if (xla_modules != nullptr) JudgeModules(tied, rows, a, xla_modules);
  return a;
}

const Analysis kCountersAnalysis = {
    "counters", "steps,kernels,torch,xla,compile,idle",
    "counters, torch.modules[].verdict, xla.modules[].verdict", [](const Timeline& t, Report* r) {
      r->counters = AnalyzeCounters(t, r->kernels, &r->steps, &r->torch.modules, &r->compile,
                                    &r->idle, &r->xla.modules);
    }};

}  // namespace aon::report
