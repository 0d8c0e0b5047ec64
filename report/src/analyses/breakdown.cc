// GPU breakdown: per rank, unions over all streams of compute kernels, NCCL
// kernels, copies and memsets; span, busy, idle, exposed communication, and the
// same per step.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <unordered_map>
#include <utility>

#include "analyses/analysis.h"

namespace aon::report {

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

// The parts of union `u` inside the sorted, disjoint `windows`.
std::vector<Interval> Clip(const std::vector<Interval>& u, const std::vector<Interval>& windows) {
  std::vector<Interval> out;
  size_t i = 0;
  for (const Interval& w : windows) {
    while (i < u.size() && u[i].end <= w.start) ++i;
    for (size_t j = i; j < u.size() && u[j].start < w.end; ++j) {
      const uint64_t s = std::max(u[j].start, w.start), e = std::min(u[j].end, w.end);
      if (s < e) out.push_back({s, e});
    }
  }
  return out;
}

}  // namespace

std::vector<RankBreakdown> ComputeBreakdown(const Timeline& t, const Steps& steps) {
  std::vector<RankUnions> u = BuildUnions(t);
  std::vector<RankBreakdown> out(t.world_size);
  for (uint32_t r = 0; r < t.world_size; ++r) {
    RankBreakdown& b = out[r];
    b.rank = r;
    RankUnions& ru = u[r];
    // Capture windows: the GPU was looked at only during the captured steps, so
    // the span is their total length and every union is clipped to them.
    const bool windowed = steps.windowed;
    if (windowed) {
      const auto& w = steps.GpuSteps(r);
      for (auto* v : {&ru.compute, &ru.comm, &ru.copy, &ru.memset, &ru.all}) *v = Clip(*v, w);
    }
    if (ru.all.empty()) continue;
    b.has_gpu = true;
    b.span_ns =
        windowed ? TotalLength(steps.GpuSteps(r)) : ru.all.back().end - ru.all.front().start;
    b.busy_ns = TotalLength(ru.all);
    b.idle_ns = b.span_ns - b.busy_ns;
    b.compute_ns = TotalLength(ru.compute);
    b.comm_ns = TotalLength(ru.comm);
    b.copy_ns = TotalLength(ru.copy);
    b.memset_ns = TotalLength(ru.memset);
    b.exposed_comm_ns = b.comm_ns - IntersectionLength(ru.comm, ru.compute);
    b.overlap_fraction = b.comm_ns ? 1.0 - static_cast<double>(b.exposed_comm_ns) / b.comm_ns : 0.0;
    if (windowed) {
      b.run_scale = RunScale(&steps, r);
      auto scale = [&](uint64_t v) {
        return static_cast<uint64_t>(static_cast<double>(v) * b.run_scale);
      };
      for (uint64_t* v : {&b.span_ns, &b.busy_ns, &b.compute_ns, &b.comm_ns, &b.copy_ns,
                          &b.memset_ns, &b.exposed_comm_ns})
        *v = scale(*v);
      b.idle_ns = b.span_ns > b.busy_ns ? b.span_ns - b.busy_ns : 0;
    }
    // Step times from every step; GPU time per step from the steps whose GPU
    // activity the timeline holds (the captured ones in a budgeted job, less
    // their windows' edges: Steps::edge), against those steps' own mean length.
    if (r < steps.per_rank.size() && !steps.per_rank[r].empty()) {
      const auto& st = steps.per_rank[r];
      b.steps = st.size();
      std::vector<double> d;
      for (const Interval& w : st) {
        b.step_ns.push_back(w.end - w.start);
        d.push_back(static_cast<double>(w.end - w.start));
      }
      b.step_mean_ns = std::accumulate(d.begin(), d.end(), 0.0) / d.size();
      b.step_median_ns = Median(d);
      b.step_max_ns = *std::max_element(d.begin(), d.end());
      const auto& gpu_steps = steps.GpuSteps(r);
      double busy = 0, compute = 0, comm = 0, length = 0, counted = 0;
      for (size_t i = 0; i < gpu_steps.size(); ++i) {
        if (!steps.Whole(r, i)) continue;  // a window's edge: work across it is not seen
        const Interval& w = gpu_steps[i];
        ++counted;
        length += static_cast<double>(w.end - w.start);
        busy += LengthWithin(ru.all, w);
        compute += LengthWithin(ru.compute, w);
        comm += LengthWithin(ru.comm, w);
      }
      if (counted > 0) {
        const double n = counted;
        b.step_busy_ns = busy / n;
        b.step_compute_ns = compute / n;
        b.step_comm_ns = comm / n;
        b.step_idle_ns = std::max(0.0, length / n - b.step_busy_ns);
      }
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

const Analysis kBreakdownAnalysis = {
    "breakdown", "steps", "breakdown",
    [](const Timeline& t, Report* r) { r->breakdown = ComputeBreakdown(t, r->steps); }};

}  // namespace aon::report
