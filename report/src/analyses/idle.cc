// Idle gaps: GPU gaps >= 10 us per rank and their host-side cause (a blocking
// sync call that returned in the gap, a synchronous or pageable copy, a launch
// issued after the GPU ran dry: by a thread busy issuing CUDA calls, or by one
// that ran other code first; or other), each with the innermost host NVTX range.
// Shorter gaps down to 1 us count when the host launched late: that is where
// launch overhead goes with many tiny kernels.
#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analyses/analysis.h"
#include "aon/format/host_stack.h"

namespace aon::report {

const char* GapCauseName(GapCause c) {
  switch (c) {
    case GapCause::kHostSync:
      return "host synchronization";
    case GapCause::kSyncCopy:
      return "synchronous/pageable copy";
    case GapCause::kHostLate:
      return "host launched late";
    case GapCause::kHostWork:
      return "host work outside CUDA calls";
    case GapCause::kCompile:
      return "host compiling";
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
  const char* name = EnumValueName(kCopyKindValues, k);  // records.h
  return name != nullptr ? std::string(name) : "kind " + std::to_string(k);
}

}  // namespace

uint64_t IdleAnalysis::Steady(uint32_t rank, GapCause cause,
                              const std::string& exclude_range) const {
  const size_t nsteps = rank < steps.size() ? steps[rank] : 0;
  const double scale = rank < run_scale.size() ? run_scale[rank] : 1.0;
  std::vector<uint64_t> per_step(nsteps, 0);
  uint64_t whole = 0;
  const std::vector<double>* factor = rank < window_factor.size() ? &window_factor[rank] : nullptr;
  for (const Slice& s : slices) {
    if (s.rank != rank || s.cause != cause) continue;
    if (!exclude_range.empty() && range_names[s.range] == exclude_range) continue;
    whole += s.ns;
    if (s.step >= 0 && static_cast<size_t>(s.step) < nsteps) {
      const auto step = static_cast<size_t>(s.step);
      const double f = factor != nullptr && step < factor->size() ? (*factor)[step] : 1.0;
      per_step[step] += static_cast<uint64_t>(static_cast<double>(s.ns) * f);
    }
  }
  if (nsteps == 0) return whole;
  // Window edges miss a gap at the window's edge: the median comes from the
  // other steps (a rank that has only edges has none marked).
  if (rank < edge.size() && edge[rank].size() == nsteps) {
    std::vector<uint64_t> observed;
    for (size_t i = 0; i < nsteps; ++i)
      if (!edge[rank][i]) observed.push_back(per_step[i]);
    if (!observed.empty() && observed.size() < nsteps) {
      // A gap seen in one captured step alone may be a one-off (a window's
      // own start, a collection, a page fault): it is not a per-step pattern
      // to carry to every step of the run. Fewer than two captured steps with
      // this cause: what the windows saw, corrected for their cost, and no
      // more. Edges count here: a gap inside an edge step is seen whole (only
      // one across the window's boundary is missed), and a run with one
      // window of three steps has one step that is not an edge.
      if (std::count_if(per_step.begin(), per_step.end(), [](uint64_t v) { return v > 0; }) < 2) {
        uint64_t seen = 0;
        for (uint64_t v : per_step) seen += v;
        return seen;
      }
      const double per = static_cast<double>(SteadyTotal(observed)) / observed.size();
      return static_cast<uint64_t>(per * static_cast<double>(nsteps) * scale);
    }
  }
  return static_cast<uint64_t>(SteadyTotal(std::move(per_step)) * scale);
}

namespace {

// A host-late gap is host work, not launch overhead, when its launching thread
// ran at least this long without any CUDA call before the launch: issuing one
// launch (the framework's dispatch and the driver call) takes microseconds to
// tens of microseconds, so a call-free stretch of 100 us or more is other code
// (or a wait outside CUDA). A thread that issues slowly even back to back needs
// a stretch of kHostWorkIssueFactor x its own issue time.
constexpr uint64_t kHostWorkMinNs = 100'000;
constexpr uint64_t kHostWorkIssueFactor = 20;
// Spacings of a thread's calls below this are back-to-back issuing (its issue time).
constexpr uint64_t kBackToBackNs = 100'000;
// A gap shorter than the analysis' min_gap_ns still counts down to this length
// when the GPU waited on a launch issued after it ran dry (host launched late):
// eager code launching kernels of a few microseconds, each after ~10 us of
// dispatch, leaves gaps of a few microseconds each, and they add up to the launch
// overhead. Shorter than 1 us is the device's own kernel-to-kernel turnaround,
// which even a CUDA graph pays; a short gap of any other cause (work queued in
// time, waiting on a dependency) is that turnaround too.
constexpr uint64_t kHostLateMinGapNs = 1'000;

// One thread's CUDA API calls, by start, with the latest end up to each.
struct ThreadCalls {
  std::vector<std::pair<uint64_t, uint64_t>> calls;  // (start, end)
  std::vector<uint64_t> end_by;                      // max end of calls[0..i]
  uint64_t issue_ns = 0;  // median spacing of back-to-back calls (0: none)

  // The longest stretch of [from, to) in which this thread was in no call.
  uint64_t LongestSilence(uint64_t from, uint64_t to) const {
    size_t i = static_cast<size_t>(
        std::lower_bound(calls.begin(), calls.end(), std::make_pair(from, uint64_t{0})) -
        calls.begin());
    uint64_t cursor = i > 0 ? std::max(from, end_by[i - 1]) : from;
    uint64_t longest = 0;
    for (; i < calls.size() && calls[i].first < to; ++i) {
      if (calls[i].first > cursor) longest = std::max(longest, calls[i].first - cursor);
      cursor = std::max(cursor, calls[i].second);
    }
    return std::max(longest, to > cursor ? to - cursor : 0);
  }
};

// Per rank: the host calls that explain a gap (blocking ones sorted by end).
struct HostCalls {
  std::vector<std::unordered_map<uint32_t, const ApiRecord*>> by_corr;
  std::vector<std::vector<std::pair<const ApiRecord*, bool>>> blocking;  // (call, is sync copy)
  std::vector<ApiRecord> sync_as_api;  // what blocking points to for SyncRecords
  std::vector<std::unordered_map<uint32_t, ThreadCalls>> by_thread;
};

// Sorts each thread's calls and measures its issue time.
void IndexThreadCalls(std::unordered_map<uint32_t, ThreadCalls>* threads) {
  for (auto& [tid, tc] : *threads) {
    std::sort(tc.calls.begin(), tc.calls.end());
    tc.end_by.resize(tc.calls.size());
    std::vector<uint64_t> spacings;
    for (size_t i = 0; i < tc.calls.size(); ++i) {
      tc.end_by[i] = std::max(i > 0 ? tc.end_by[i - 1] : 0, tc.calls[i].second);
      if (i > 0 && tc.calls[i].first - tc.calls[i - 1].first < kBackToBackNs)
        spacings.push_back(tc.calls[i].first - tc.calls[i - 1].first);
    }
    if (!spacings.empty()) {
      std::nth_element(spacings.begin(), spacings.begin() + spacings.size() / 2, spacings.end());
      tc.issue_ns = spacings[spacings.size() / 2];
    }
  }
}

// The GPU operations of each rank: kernels, copies, memsets.
std::vector<std::vector<GpuOp>> CollectGpuOps(const Timeline& t, uint32_t n) {
  std::vector<std::vector<GpuOp>> ops(n);
  for (const auto& k : t.kernels)
    ops[k.rank].push_back({k.record.start_ns, k.record.end_ns, k.record.correlation_id, nullptr});
  for (const auto& k : t.memcpys)
    ops[k.rank].push_back({k.record.start_ns, k.record.end_ns, k.record.correlation_id, &k.record});
  for (const auto& k : t.memsets)
    ops[k.rank].push_back({k.record.start_ns, k.record.end_ns, k.record.correlation_id, nullptr});
  return ops;
}

// Fills `calls` with each rank's host calls (blocking points into its sync_as_api).
void CollectHostCalls(const Timeline& t, uint32_t n, HostCalls* calls) {
  // Per rank: API records by correlation, sync/sync-copy calls sorted by end.
  auto& by_corr = calls->by_corr;
  auto& blocking = calls->blocking;
  by_corr.resize(n);
  blocking.resize(n);
  std::unordered_map<uint32_t, int> kind_of_name;  // 0 other, 1 sync, 2 sync copy
  calls->by_thread.resize(n);
  for (const auto& m : t.apis) {
    if (m.record.correlation_id) by_corr[m.rank][m.record.correlation_id] = &m.record;
    calls->by_thread[m.rank][m.record.thread_id].calls.emplace_back(m.record.start_ns,
                                                                    m.record.end_ns);
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
  std::vector<ApiRecord>& sync_as_api = calls->sync_as_api;
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
  for (auto& threads : calls->by_thread) IndexThreadCalls(&threads);
}

// The host push/pop ranges of each rank, leaving out NCCL's.
std::vector<std::vector<const Merged<NvtxRecord>*>> CollectRanges(const Timeline& t, uint32_t n) {
  std::vector<std::vector<const Merged<NvtxRecord>*>> ranges(n);
  for (const auto& m : t.nvtx) {
    if (m.record.type != static_cast<uint8_t>(NvtxType::kPushPop)) continue;
    if (t.strings.Get(m.record.domain_id) == "NCCL") continue;
    ranges[m.rank].push_back(&m);
  }
  return ranges;
}

// Sets a gap's cause and detail from its rank's blocking calls, the operation
// ending it and the calls of the thread that launched it (null: unknown).
void ClassifyGap(const Timeline& t, const std::vector<std::pair<const ApiRecord*, bool>>& b,
                 const GpuOp& next, const ApiRecord* launch, const ThreadCalls* thread, Gap* g) {
  static const char* kSyncTypes[] = {"", "cudaEventSynchronize", "cudaStreamWaitEvent",
                                     "cudaStreamSynchronize", "cudaDeviceSynchronize"};
  // 1. A blocking call that returned inside the gap: it drained the GPU's queue.
  auto it = std::lower_bound(b.begin(), b.end(), g->start_ns,
                             [](const auto& x, uint64_t tt) { return x.first->end_ns < tt; });
  const ApiRecord* sync = nullptr;
  const ApiRecord* late_sync = nullptr;  // a sync (not a copy) called after the GPU ran dry
  bool sync_copy = false;
  for (; it != b.end() && it->first->end_ns <= g->end_ns; ++it) {
    if (it->first->start_ns <= g->start_ns) {
      sync = it->first;
      sync_copy = it->second;
      break;
    }
    if (late_sync == nullptr && !it->second) late_sync = it->first;
  }
  // 1b. The thread issued calls up to a sync that found the queue already
  // drained, then ran code outside CUDA before its next launch: the program's
  // order is still launch, wait for the GPU, work with nothing queued (.item()
  // then logging), whether or not the wait blocked. Whether it did depends on
  // how fast the host issued the step, and a capture window slows that
  // (CUPTI's cost per call): the same line of code must get the same cause in
  // and out of windows. Host work that comes before the sync is host work.
  if (sync == nullptr && late_sync != nullptr && launch != nullptr && thread != nullptr &&
      launch->start_ns > late_sync->end_ns) {
    const uint64_t enough = std::max(kHostWorkMinNs, kHostWorkIssueFactor * thread->issue_ns);
    if (thread->LongestSilence(g->start_ns, late_sync->start_ns) < enough &&
        thread->LongestSilence(late_sync->end_ns, launch->start_ns) >= enough) {
      sync = late_sync;
    }
  }
  const bool next_is_sync_copy =
      next.copy != nullptr &&
      (next.copy->src_kind == 1 || next.copy->dst_kind == 1 || (next.copy->flags & 1) == 0);
  if (sync != nullptr && !sync_copy) {
    g->cause = GapCause::kHostSync;
    g->detail = sync->name_id
                    ? t.strings.Get(sync->name_id)
                    : (sync->callback_id < 5 ? kSyncTypes[sync->callback_id] : "synchronize");
  } else if (next_is_sync_copy || sync_copy) {
    g->cause = GapCause::kSyncCopy;
    if (next.copy != nullptr) {
      const MemcpyRecord& c = *next.copy;
      g->detail = (launch ? t.strings.Get(launch->name_id) : std::string("memcpy")) + " " +
                  CopyKindName(c.copy_kind) + " " + FormatBytes(static_cast<double>(c.bytes)) +
                  (c.src_kind == 1 || c.dst_kind == 1 ? " pageable" : "") +
                  ((c.flags & 1) ? "" : " synchronous");
    } else {
      g->detail = t.strings.Get(sync->name_id);
    }
  } else if (launch != nullptr && launch->start_ns > g->start_ns) {
    const uint64_t silence =
        thread != nullptr ? thread->LongestSilence(g->start_ns, launch->start_ns) : 0;
    const uint64_t issue = thread != nullptr ? thread->issue_ns : 0;
    if (silence >= std::max(kHostWorkMinNs, kHostWorkIssueFactor * issue)) {
      g->cause = GapCause::kHostWork;
      g->detail = "the launching thread ran " + FormatDuration(static_cast<double>(silence)) +
                  " without a CUDA call before the next launch (" + t.strings.Get(launch->name_id) +
                  ")";
    } else {
      g->cause = GapCause::kHostLate;
      g->detail = "next launch (" + t.strings.Get(launch->name_id) + ") issued " +
                  FormatDuration(static_cast<double>(launch->start_ns - g->start_ns)) +
                  " after the GPU ran dry";
    }
  } else if (launch == nullptr && t.apis.empty()) {
    g->cause = GapCause::kHostLate;  // no API records: assume the host did not feed the GPU
    g->detail = "no CUDA API records to tell (assumed host-side)";
  } else {
    g->cause = GapCause::kOther;
    g->detail =
        launch ? "work was queued in time; waiting on a dependency" : "no launching call recorded";
  }
}

// The median step of rank `r` outside capture windows (0: none, or no windows).
uint64_t OutsideStepNs(const Steps* steps, uint32_t r) {
  if (steps == nullptr || !steps->windowed || r >= steps->per_rank.size()) return 0;
  const std::vector<Interval>& captured = steps->GpuSteps(r);
  std::vector<uint64_t> outside;
  size_t c = 0;
  for (const Interval& s : steps->per_rank[r]) {
    while (c < captured.size() && captured[c].start < s.start) ++c;
    if (c < captured.size() && captured[c].start == s.start) continue;  // a captured step
    outside.push_back(s.end - s.start);
  }
  if (outside.empty()) return 0;
  std::nth_element(outside.begin(), outside.begin() + outside.size() / 2, outside.end());
  return outside[outside.size() / 2];
}

// IdleAnalysis::window_factor of one rank, from its slices: per captured step,
// the share of its gap time left once AON's cost in it is taken off, capped at
// `outside_ns`. AON's cost in a step is its excess over `outside_ns`, plus the
// host catching up on the cost of the window's earlier steps (its lead-in:
// CUPTI attaching, observers switched on): when the program's host waits on
// the GPU, a host that enters a step late lets the GPU run dry and then waits
// less, so the step comes out SHORTER than an uncaptured one, and that
// shortfall (up to the excess not yet caught up on) is AON's, not the
// program's; it is the gap the step began with (the GPU ran dry before the
// late host marked it), so no more than that gap is taken. A host-bound step
// cannot wait less: it is not shorter, and its gaps stay whole. A window starts
// where a captured step does not begin as the one before it ends.
std::vector<double> WindowFactors(std::span<const IdleAnalysis::Slice> rank_slices,
                                  const std::vector<Interval>& windows, uint64_t outside_ns) {
  std::vector<double> factor(windows.size(), 1.0);
  if (outside_ns == 0) return factor;
  std::vector<uint64_t> idle(windows.size(), 0), carried(windows.size(), 0);
  for (const IdleAnalysis::Slice& s : rank_slices) {
    if (s.step >= 0 && static_cast<size_t>(s.step) < idle.size()) {
      idle[static_cast<size_t>(s.step)] += s.ns;
      if (s.carried) carried[static_cast<size_t>(s.step)] += s.ns;
    }
  }
  uint64_t owed = 0;  // the window's excess so far that the host has not caught up on
  for (size_t i = 0; i < windows.size(); ++i) {
    if (i == 0 || windows[i - 1].end != windows[i].start) owed = 0;
    const uint64_t length = windows[i].end - windows[i].start;
    const uint64_t excess = length > outside_ns ? length - outside_ns : 0;
    const uint64_t catch_up = std::min(owed, length < outside_ns ? outside_ns - length : 0);
    owed = owed - catch_up + excess;
    if (idle[i] == 0) continue;
    const uint64_t aon = excess + std::min(catch_up, carried[i]);
    const uint64_t left = std::min(idle[i] > aon ? idle[i] - aon : 0, outside_ns);
    factor[i] = static_cast<double>(left) / static_cast<double>(idle[i]);
  }
  return factor;
}

// The host samples of each rank, by time, and what each stack is named by.
class GapSamples {
 public:
  GapSamples(const Timeline& t, IdleAnalysis* a) : t_(t), by_rank_(t.world_size) {
    std::unordered_map<uint32_t, uint64_t> stacks;
    for (const Merged<HostSampleRecord>& m : t.host_samples) {
      if (m.rank < by_rank_.size()) by_rank_[m.rank].push_back(&m.record);
      ++stacks[m.record.stack_id];
    }
    for (const auto& [id, n] : stacks) a->all_stacks[t.strings.Get(id)] += n;
    for (auto& v : by_rank_) {
      std::sort(v.begin(), v.end(), [](const HostSampleRecord* x, const HostSampleRecord* y) {
        return x->start_ns < y->start_ns;
      });
    }
  }
  // Counts the samples of rank `r` inside gap `g` under its cause.
  void Add(const Gap& g, uint32_t r, IdleAnalysis* a) {
    if (r >= by_rank_.size() || by_rank_[r].empty()) return;
    const auto& v = by_rank_[r];
    auto it =
        std::lower_bound(v.begin(), v.end(), g.start_ns,
                         [](const HostSampleRecord* s, uint64_t at) { return s->start_ns < at; });
    IdleAnalysis::SampledFrames* out = nullptr;
    for (; it != v.end() && (*it)->start_ns < g.end_ns; ++it) {
      if (out == nullptr) out = &a->cause_samples[r][g.cause];
      const std::string& frame = Frame((*it)->stack_id);
      ++out->samples;
      ++out->frames[frame];
      ++out->threads[frame][t_.strings.Get((*it)->thread_name_id)];
      ++a->gap_stacks[t_.strings.Get((*it)->stack_id)];
    }
  }

 private:
  const std::string& Frame(uint32_t stack_id) {
    auto [it, added] = frames_.try_emplace(stack_id);
    if (added) it->second = InnermostHostFrame(t_.strings.Get(stack_id));
    return it->second;
  }
  const Timeline& t_;
  std::vector<std::vector<const HostSampleRecord*>> by_rank_;
  std::unordered_map<uint32_t, std::string> frames_;
};

// Adds a classified gap of rank `r` to the totals and slices of `a`.
void RecordGap(const Gap& g, uint32_t r, const std::vector<Interval>* windows, int32_t step,
               std::unordered_map<std::string, uint32_t>* range_index, IdleAnalysis* a) {
  a->cause_ns[r][g.cause] += g.length();
  ++a->cause_count[r][g.cause];
  a->cause_nvtx_ns[r][g.cause][g.nvtx] += g.length();
  IdleAnalysis::Slice slice{r, g.cause, -1, 0, g.length()};
  slice.start_ns = g.start_ns;
  if (!g.nvtx.empty()) {
    auto [it2, added] = range_index->emplace(g.nvtx, static_cast<uint32_t>(a->range_names.size()));
    if (added) a->range_names.push_back(g.nvtx);
    slice.range = it2->second;
  }
  if (windows) {
    slice.step = step;
    if (slice.step >= 0) {
      const Interval& w = (*windows)[static_cast<size_t>(slice.step)];
      slice.start_ns = std::max(g.start_ns, w.start);
      slice.ns = std::min(g.end_ns, w.end) - slice.start_ns;
      slice.carried = g.start_ns <= w.start;
    }
  }
  a->slices.push_back(slice);
}

}  // namespace

IdleAnalysis AnalyzeIdle(const Timeline& t, const Steps* steps, uint64_t min_gap_ns,
                         const CompileAnalysis* compile) {
  IdleAnalysis a;
  a.min_gap_ns = min_gap_ns;
  const uint32_t n = t.world_size;
  a.steps.assign(n, 0);
  a.run_scale.assign(n, 1.0);
  a.window_factor.resize(n);
  a.outside_step_ns.assign(n, 0);
  a.edge.assign(n, {});
  // In a budgeted job the GPU was traced only in capture windows: the time
  // between windows is not idle, it was not looked at.
  const bool windowed = steps != nullptr && steps->windowed;
  std::unordered_map<std::string, uint32_t> range_index;
  a.cause_ns.resize(n);
  a.cause_count.resize(n);
  a.cause_nvtx_ns.resize(n);
  a.cause_samples.resize(n);
  GapSamples samples(t, &a);
  std::vector<std::vector<GpuOp>> ops = CollectGpuOps(t, n);
  HostCalls calls;
  CollectHostCalls(t, n, &calls);
  const auto& by_corr = calls.by_corr;
  const auto& blocking = calls.blocking;
  std::vector<std::vector<const Merged<NvtxRecord>*>> ranges = CollectRanges(t, n);

  std::vector<Gap> all;
  for (uint32_t r = 0; r < n; ++r) {
    auto& v = ops[r];
    std::sort(v.begin(), v.end(), [](const GpuOp& x, const GpuOp& y) { return x.start < y.start; });
    const std::vector<Interval>* windows = StepWindows(steps, r);
    if (windows) a.steps[r] = windows->size();
    a.run_scale[r] = RunScale(steps, r);
    if (windowed && windows == nullptr) continue;
    RangeSweep sweep(t, ranges[r]);
    const size_t first_slice = a.slices.size();  // this rank's slices follow
    uint64_t busy_end = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const uint64_t examined = std::min(min_gap_ns, kHostLateMinGapNs);
      if (i > 0 && v[i].start > busy_end && v[i].start - busy_end >= examined) {
        const bool short_gap = v[i].start - busy_end < min_gap_ns;
        Gap g;
        g.rank = r;
        g.start_ns = busy_end;
        g.end_ns = v[i].start;
        const ApiRecord* launch = nullptr;
        if (auto it = by_corr[r].find(v[i].correlation); it != by_corr[r].end())
          launch = it->second;
        const ThreadCalls* thread = nullptr;
        if (launch != nullptr) {
          auto th = calls.by_thread[r].find(launch->thread_id);
          if (th != calls.by_thread[r].end()) thread = &th->second;
        }
        ClassifyGap(t, blocking[r], v[i], launch, thread, &g);
        if (const CompileRank* c = compile ? compile->Of(r) : nullptr;
            c != nullptr && c->Covers(g.start_ns, g.end_ns)) {
          g.cause = GapCause::kCompile;  // whatever the launch looked like: the host compiled
          g.detail = "the host was compiling for most of it";
        }
        if (short_gap && g.cause != GapCause::kHostLate) {
          busy_end = std::max(busy_end, v[i].end);
          continue;
        }
        const uint32_t tid = launch ? launch->thread_id : 0;
        const uint64_t mid = g.start_ns + (g.end_ns - g.start_ns) / 2;
        const int32_t step = windows ? StepOf(*windows, mid) : -1;
        if (windowed && step < 0) {
          busy_end = std::max(busy_end, v[i].end);
          continue;
        }
        g.nvtx = sweep.InnermostAt(mid, tid);
        RecordGap(g, r, windows, step, &range_index, &a);
        samples.Add(g, r, &a);
        if (!short_gap) all.push_back(std::move(g));  // the longest are listed
      }
      busy_end = std::max(busy_end, v[i].end);
    }
    if (windowed) {
      if (r < steps->edge.size()) a.edge[r] = steps->edge[r];
      a.outside_step_ns[r] = OutsideStepNs(steps, r);
      a.window_factor[r] =
          WindowFactors(std::span(a.slices).subspan(first_slice), *windows, a.outside_step_ns[r]);
    }
  }
  std::sort(all.begin(), all.end(),
            [](const Gap& x, const Gap& y) { return x.length() > y.length(); });
  if (all.size() > 20) all.resize(20);
  a.top_gaps = std::move(all);
  return a;
}

const Analysis kIdleAnalysis = {"idle", "steps,compile", "idle", [](const Timeline& t, Report* r) {
                                  r->idle = AnalyzeIdle(t, &r->steps, 10000, &r->compile);
                                }};

}  // namespace aon::report
