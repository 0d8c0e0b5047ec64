// No impossible numbers, for every rule, on random timelines: a gain is never
// more than the run; a per-step gain never more than a step (with capture
// windows: than the median step outside them, which is what a step costs
// without AON); a phase never lasts longer than the run. The timelines mix
// what the rules look at (steps with and without capture windows and their
// cost, late and dense launches, host work, syncs, pageable copies, NVTX
// phases on several threads at once, XLA compile ranges, collectives of
// several ranks, GPU counters), with sizes drawn at random.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "aon/report/report.h"
#include "timeline_builder.h"

namespace aon::report {
namespace {

using testing::kMs;
using testing::kUs;
using testing::TempDir;
using testing::TimelineBuilder;

constexpr char kGpu[] = "GPU-6a1b0c2d-0000-4000-8000-0000000000";

struct Drawn {
  TimelineBuilder b;
  uint64_t first = UINT64_MAX, last = 0;  // the run: every record
  // per rank: step lengths, and whether each was captured
  std::vector<std::vector<std::pair<uint64_t, bool>>> steps;
  bool windowed = false;
  void Saw(uint64_t from, uint64_t to) { first = std::min(first, from), last = std::max(last, to); }
};

class Draw {
 public:
  explicit Draw(uint32_t seed) : rng_(seed) {}
  uint64_t Between(uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }

 private:
  std::mt19937 rng_;
};

uint64_t Between(Draw& d, uint64_t lo, uint64_t hi) { return d.Between(lo, std::max(lo, hi)); }

// One rank's work in [at, at + length): kernels launched by thread 1, with
// back-to-back issuing, host-work silences, syncs and pageable copies, under
// NVTX phases ("forward" on thread 1, "prefetch" on threads 2-4 at once).
uint64_t Work(Draw& d, Drawn* out, uint32_t rank, uint64_t at, uint64_t length) {
  TimelineBuilder& b = out->b;
  uint64_t host = at + Between(d, 0, length / 4), gpu_free = at;
  const uint64_t end = at + length;
  b.Nvtx(rank, "forward", host, std::max(host + kUs, end - Between(d, 0, length / 4)), 1, 0);
  for (uint32_t tid = 2; tid <= 4 && d.Chance(0.5); ++tid) {
    const uint64_t from = at + Between(d, 0, length / 2);
    b.Nvtx(rank, "prefetch", from, std::min(end, from + Between(d, kUs, length)), tid, 0);
  }
  const int kernels = static_cast<int>(Between(d, 1, 25));
  for (int k = 0; k < kernels && host < end; ++k) {
    if (d.Chance(0.15)) host += Between(d, 100 * kUs, length / 3);  // host work
    if (host >= end) break;
    const uint64_t start = std::max(host + 5 * kUs, gpu_free);
    const uint64_t dur = Between(d, 5 * kUs, length / 8 + 5 * kUs);
    if (d.Chance(0.1)) {
      const bool pageable = d.Chance(0.5);
      const uint32_t corr =
          b.Memcpy(rank, start, start + dur, Between(d, 4096, 64 << 20), 1, pageable, !pageable);
      b.Api(rank, "cudaMemcpyAsync", host, host + 3 * kUs, 1, corr);
    } else {
      b.Kernel(rank, d.Chance(0.5) ? "elementwise_kernel" : "sm90_gemm", start, start + dur, 1,
               static_cast<int64_t>(host));
    }
    gpu_free = start + dur;
    out->Saw(host, gpu_free);
    host += Between(d, 3 * kUs, 60 * kUs);
    if (d.Chance(0.1)) {  // the host waits for the GPU
      b.Api(rank, "cudaStreamSynchronize", host, std::max(host, gpu_free) + kUs, 1);
      host = std::max(host, gpu_free) + kUs;
    }
  }
  return std::max(gpu_free, host);
}

Drawn DrawTimeline(uint32_t seed) {
  Draw d(seed);
  Drawn out;
  TimelineBuilder& b = out.b;
  const uint32_t ranks = static_cast<uint32_t>(Between(d, 1, 3));
  const uint64_t nsteps = d.Chance(0.15) ? 0 : Between(d, 3, 70);
  out.windowed = nsteps > 0 && d.Chance(0.5);
  const uint64_t period = d.Chance(0.5) ? 8 : 16;
  out.steps.resize(ranks);
  for (uint32_t r = 0; r < ranks; ++r) {
    b.Rank(r, "node1", RankStatus::kOk, "", r);
    b.Device(r, r, kGpu + std::to_string(10 + r));
    if (out.windowed) b.ranks[r].capture_mode = static_cast<uint8_t>(CaptureMode::kBudgeted);
  }
  const uint64_t base_step = Between(d, 2 * kMs, 20 * kMs);
  const double window_cost = 1.0 + static_cast<double>(Between(d, 0, 200)) / 100.0;
  uint64_t at = kMs;
  for (uint64_t s = 0; s < std::max<uint64_t>(nsteps, 1); ++s) {
    const bool captured = !out.windowed || s == kFirstWindowStep || (s % period) < 3;
    const uint64_t length =
        static_cast<uint64_t>(static_cast<double>(base_step + Between(d, 0, base_step / 2)) *
                              (out.windowed && captured ? window_cost : 1.0));
    const uint64_t step_len = nsteps > 0 ? length : 40 * base_step;
    // XLA compiling at a step's start, on two threads at once.
    const uint64_t compile = d.Chance(0.1) ? Between(d, kMs, step_len / 2) : 0;
    for (uint32_t r = 0; r < ranks; ++r) {
      if (nsteps > 0) {
        b.Step(r, s, at, at + step_len, captured ? kStepCaptured : 0, StepSource::kApi);
        out.steps[r].emplace_back(step_len, captured);
      }
      out.Saw(at, at + step_len);
      if (compile > 0) {
        b.Nvtx(r, "XlaCompile:#module=jit_step#", at, at + compile, 7, 0, "TSL");
        b.Nvtx(r, "XlaPass:#name=fusion,module=jit_step#", at + compile / 4, at + compile, 8, 0,
               "TSL");
      }
      if (!captured) continue;  // a budgeted job has no GPU records there
      const uint64_t done = Work(d, &out, r, at + compile, step_len - compile);
      if (ranks > 1) {  // one all-reduce a step, arriving at random
        const uint64_t arrive = std::min(at + step_len - kUs, done + Between(d, 0, base_step / 4));
        b.Coll(r, "AllReduce", 0xabc, s, arrive, at + step_len, 1 << 20);
        out.Saw(arrive, at + step_len);
      }
    }
    at += step_len;
  }
  // Counters over the run, one GPU per rank, of random character.
  for (uint32_t r = 0; r < ranks; ++r) {
    const std::string uuid = kGpu + std::to_string(10 + r);
    const uint64_t interval = Between(d, 50 * kMs, 200 * kMs);
    for (uint64_t t = out.first; t + interval <= at; t += interval) {
      b.Counter(r, uuid, r, CounterMetric::kGpuActive, t, t + interval, Between(d, 0, 100));
      b.Counter(r, uuid, r, CounterMetric::kTensorActive, t, t + interval, Between(d, 0, 90));
      b.Counter(r, uuid, r, CounterMetric::kDramBandwidth, t, t + interval, Between(d, 0, 95));
    }
  }
  return out;
}

// The most a step costs without AON, over the ranks: the median uncaptured
// step of a windowed job (its captured steps ran slower because of AON); the
// longest step otherwise.
double StepBound(const Drawn& j) {
  double bound = 0;
  for (const auto& rank : j.steps) {
    std::vector<uint64_t> outside, all;
    for (const auto& [length, captured] : rank) {
      all.push_back(length);
      if (!captured) outside.push_back(length);
    }
    if (j.windowed && !outside.empty()) {
      std::sort(outside.begin(), outside.end());
      bound = std::max(bound, static_cast<double>(outside[outside.size() / 2]));
    } else if (!all.empty()) {
      bound = std::max(bound, static_cast<double>(*std::max_element(all.begin(), all.end())));
    }
  }
  return bound;
}

TEST(FindingBounds, NoRuleStatesAnImpossibleNumber) {
  TempDir dir;
  std::map<std::string, int> fired;
  constexpr uint32_t kTimelines = 250;
  for (uint32_t seed = 1; seed <= kTimelines; ++seed) {
    Drawn j = DrawTimeline(seed);
    const Timeline t = j.b.WriteAndLoad(dir.File("t" + std::to_string(seed) + ".h5"));
    const Report r = Analyze(t);
    const double run = static_cast<double>(j.last - j.first);
    const double step = StepBound(j);
    SCOPED_TRACE("seed " + std::to_string(seed) + ", run " + FormatDuration(run) +
                 (j.windowed ? ", windowed" : ""));
    for (const Finding& f : r.findings) {
      ++fired[f.kind];
      EXPECT_LE(static_cast<double>(f.gain_ns), run * 1.001) << f.kind << ": " << f.evidence;
      if (step > 0) {
        EXPECT_LE(f.gain_per_step_ns, step * 1.001) << f.kind << ": " << f.evidence;
      }
      if (auto it = f.numbers.find("seconds"); it != f.numbers.end()) {
        EXPECT_LE(it->second * 1e9, run * 1.001) << f.kind << ": " << f.action;
      }
    }
    for (const CounterPhase& p : r.counters.phases) {
      EXPECT_LE(p.seconds * 1e9, run * 1.001) << "phase " << p.name;
    }
    for (const NvtxStat& n : r.nvtx) {
      for (const auto& [rank, ns] : n.per_rank_range_ns) {
        EXPECT_LE(static_cast<double>(ns), run * 1.001) << "range " << n.name;
      }
    }
    for (const CompileRank& c : r.compile.ranks) EXPECT_LE(static_cast<double>(c.ns), run * 1.001);
    std::filesystem::remove(dir.File("t" + std::to_string(seed) + ".h5"));
  }
  // The timelines exercise the rules: each of these fired on some of them.
  for (const char* kind : {"host-work", "launch-bound", "idle-host-sync", "pageable-copies",
                           "phase-bottleneck", "compilation", "straggler"}) {
    EXPECT_GT(fired[kind], 0) << kind << " never fired";
  }
}

}  // namespace
}  // namespace aon::report
