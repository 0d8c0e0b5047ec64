// GPU counters end to end on machines without a GPU: aon-run, real mpirun, the
// node collector loading NVML for real (AON_NVML_LIBRARY) and the labeled FAKE
// NVML of tests/fakes/fake_nvml.cc, whose GPM metrics come from the synthetic
// GPU's kernels (each with the counter profile the synthetic app planted), the
// merge, the timeline. The real NVML path is checked on the GPU machine
// (tests/gpu/).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "aon/base/gpu_uuid.h"
#include "aon/format/records.h"
#include "aon/format/string_table.h"
#include "aon/format/trace_file.h"
#include "aon/format/trace_format.h"
#include "process_runner.h"
#include "skip_or_fail.h"

namespace {

namespace fs = std::filesystem;
using aon::testing::ProcessResult;
using aon::testing::RunProcess;
using Env = std::map<std::string, std::string>;

const std::string kBinDir = AON_BUILD_BIN_DIR;
const std::string kAonRun = kBinDir + "/aon-run";
const std::string kApp = kBinDir + "/aon-synthetic-app";
const std::string kReport = kBinDir + "/aon-report";
const std::string kFakeNvml = std::string(AON_BUILD_LIB_DIR) + "/libaon_fake_nvml.so";

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string Host() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

class CountersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const std::string& p : {kAonRun, kApp, kFakeNvml})
      if (!fs::exists(p)) AON_SKIP_OR_FAIL(<< p << " is not built");
    tmp_ = aon::testing::MakeScratchDir("aon-counters");
    ASSERT_FALSE(tmp_.empty());
    gpus_ = tmp_ + "/gpus";
    fs::create_directory(gpus_);
  }
  void TearDown() override { aon::testing::EndScratchDir(tmp_, HasFailure()); }
  // Two synthetic GPUs (ranks 0 and 1), NVML GPU 0 and 1, as the fake sees them.
  Env FakeEnv(const std::string& fail = "") const {
    Env env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
    env["AON_NVML_LIBRARY"] = kFakeNvml;
    env["AON_SYNTHETIC_GPU_DIR"] = gpus_;
    env["AON_FAKE_NVML_GPUS"] = Uuid(0) + "," + Uuid(1);
    if (!fail.empty()) env["AON_FAKE_NVML_FAIL"] = fail;
    return env;
  }
  static std::string Uuid(int rank) {
    return "SYNTHETIC-" + Host() + "-rank" + std::to_string(rank);
  }
  ProcessResult Run(const Env& env, std::vector<std::string> extra, const std::string& app_args) {
    std::vector<std::string> args = {kAonRun, "-o", tmp_ + "/job", "--source", "synthetic"};
    args.insert(args.end(), extra.begin(), extra.end());
    for (const char* a : {"mpirun", "-np", "2", "--oversubscribe"}) args.push_back(a);
    args.push_back(kApp);
    std::string word;
    for (char c : app_args + " ") {
      if (c != ' ') {
        word += c;
      } else if (!word.empty()) {
        args.push_back(word);
        word.clear();
      }
    }
    return RunProcess(args, env, tmp_);
  }
  std::vector<aon::Merged<aon::CounterRecord>> Counters() const {
    auto reader = aon::TraceReader::Open(tmp_ + "/job/timeline.h5");
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    if (!reader.ok()) return {};
    auto rows = (*reader)->ReadAllMerged<aon::CounterRecord>();
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? *rows : std::vector<aon::Merged<aon::CounterRecord>>{};
  }
  // Every note of every rank file, one per line.
  std::string Notes() const {
    std::string all;
    for (int rank = 0; rank < 2; ++rank) {
      char name[32];
      std::snprintf(name, sizeof(name), "/job/rank-%05d.h5", rank);
      auto file = aon::TraceReader::Open(tmp_ + name);
      EXPECT_TRUE(file.ok()) << file.status().ToString();
      if (!file.ok()) continue;
      auto meta = (*file)->ReadRankMetadata();
      EXPECT_TRUE(meta.ok());
      if (!meta.ok()) continue;
      for (const std::string& n : meta->notes)
        all += "rank " + std::to_string(rank) + ": " + n + "\n";
    }
    return all;
  }
  // Runs aon-report --json on the job's timeline, then `python` on its
  // "counters" object (`c`); its output, also printed for the log (the numbers
  // behind each verdict), lands in `out`. `python` may call idle(p): the
  // verdict docs/counters.md gives a phase the counters call GPU-idle (busy
  // < 50 %), from the trace's gaps inside it (its idle_by_cause_ns over at
  // least 5 ms traced): host-bound when host work, host synchronization or
  // synchronous copies hold more than half of that gap time, else launch-bound.
  void ReportCounters(const std::string& python, ProcessResult* out) const {
    const std::string json = tmp_ + "/report.json";
    ProcessResult rep = RunProcess(
        {kReport, "--json", json, "--no-html", "-q", tmp_ + "/job/timeline.h5"}, {}, tmp_);
    ASSERT_EQ(rep.exit_status, 0) << rep.Describe();
    *out = RunProcess(
        {"python3", "-c",
         "import json,sys\nc = json.load(open(sys.argv[1]))['counters']\n"
         "def idle(p):\n"
         "  g = p['idle_by_cause_ns']\n"
         "  host = max(g.get(k, 0) for k in ('host work outside CUDA calls',\n"
         "             'host synchronization', 'synchronous/pageable copy'))\n"
         "  held = p['traced_ns'] >= 5e6 and host > 0.5 * sum(g.values())\n"
         "  return 'host-bound' if held else 'launch-bound'\n" +
             python,
         json},
        {}, tmp_);
    ASSERT_EQ(out->exit_status, 0) << out->Describe();
    std::cout << out->out;
  }
  std::string tmp_, gpus_;
};

double Metric(const std::vector<aon::Merged<aon::CounterRecord>>& rows, size_t at,
              aon::CounterMetric metric) {
  // The rows of one sample interval of one GPU are adjacent after the sort by
  // start time only by chance: look them up by (interval, GPU, metric).
  const aon::CounterRecord& r = rows[at].record;
  for (const auto& m : rows) {
    if (m.record.start_ns == r.start_ns && m.record.gpu_uuid_hi == r.gpu_uuid_hi &&
        m.record.gpu_uuid_lo == r.gpu_uuid_lo && m.record.metric == static_cast<uint16_t>(metric))
      return m.record.value;
  }
  ADD_FAILURE() << "no " << static_cast<int>(metric) << " row for interval " << r.start_ns;
  return -1;
}

// Each planted phase (the synthetic app's --phases: compute-, memory- and
// launch-bound kernels) gets the figures its kernels imply, for both GPUs, in
// rows the collector wrote into the node's lowest rank's file.
TEST_F(CountersTest, EachPlantedPhaseGetsTheFiguresOfItsKernels) {
  // The node tier alone (PM samples in windows have tests of their own below).
  // --mode full: every kernel is in the timeline, so the activity each
  // interval should show follows from the kernels themselves.
  ProcessResult r =
      Run(FakeEnv(), {"--counters", "gpm", "--counters-interval", "50", "--mode", "full"},
          "--iterations 3 --phases 1500");
  ASSERT_EQ(r.exit_status, 0) << r.Describe();
  const auto rows = Counters();
  ASSERT_FALSE(rows.empty()) << Notes() << r.Describe();
  auto reader = aon::TraceReader::Open(tmp_ + "/job/timeline.h5");
  ASSERT_TRUE(reader.ok());
  auto nvtx = (*reader)->ReadAllMerged<aon::NvtxRecord>();
  ASSERT_TRUE(nvtx.ok());
  auto table = (*reader)->ReadStrings();
  ASSERT_TRUE(table.ok());
  auto kernels = (*reader)->ReadAllMerged<aon::KernelRecord>();
  ASSERT_TRUE(kernels.ok());
  // The % of [from, to) some kernel of `rank` ran: the fake's gpu_active
  // arithmetic, redone here from the timeline's kernel records.
  auto covered_pct = [&](uint32_t rank, uint64_t from, uint64_t to) {
    std::vector<std::pair<uint64_t, uint64_t>> busy;
    for (const auto& k : *kernels) {
      if (k.rank != rank) continue;
      const uint64_t s = std::max(k.record.start_ns, from), e = std::min(k.record.end_ns, to);
      if (e > s) busy.emplace_back(s, e);
    }
    std::sort(busy.begin(), busy.end());
    uint64_t covered = 0, reach = 0;
    for (const auto& [s, e] : busy) {
      const uint64_t start = std::max(s, reach);
      if (e > start) covered += e - start;
      reach = std::max(reach, e);
    }
    return 100.0 * static_cast<double>(covered) / static_cast<double>(to - from);
  };

  const std::string notes = Notes();
  EXPECT_TRUE(Contains(notes, "rank 0: counters: FAKE NVML")) << notes;
  EXPECT_TRUE(Contains(notes, "lacks nvlink_tx_mib_per_s")) << notes;
  // The node's rows are in the file of its lowest running rank (whichever that
  // was at each sample): one file per interval, and the intervals of each GPU
  // and metric follow each other without a gap across the handovers.
  std::map<std::pair<uint64_t, uint16_t>, std::vector<aon::CounterRecord>> series;
  for (const auto& m : rows) {
    EXPECT_EQ(m.record.source, static_cast<uint8_t>(aon::CounterSource::kSynthetic));
    EXPECT_LT(m.record.start_ns, m.record.end_ns);
    series[{m.record.gpu_uuid_lo, m.record.metric}].push_back(m.record);
  }
  EXPECT_EQ(series.size(), 2u * 11u) << "two GPUs, the 11 metrics the fake has";
  for (auto& [key, s] : series) {
    std::sort(s.begin(), s.end(),
              [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    for (size_t i = 1; i < s.size(); ++i)
      EXPECT_EQ(s[i].start_ns, s[i - 1].end_ns) << "metric " << key.second << " row " << i;
  }
  struct Want {
    double sm, dram, tensor;
    bool busy;
    double host_gap_us;  // between the 5 us kernels of a phase that is not busy
  };
  const std::map<std::string, Want> phases = {{"phase:compute", {95, 20, 85, true, 0}},
                                              {"phase:memory", {70, 92, 0, true, 0}},
                                              {"phase:launch", {40, 10, 0, false, 20}},
                                              {"phase:host", {40, 10, 0, false, 1000}}};
  for (int rank = 0; rank < 2; ++rank) {
    const aon::GpuUuid gpu = aon::GpuUuidFromText(Uuid(rank));
    for (const auto& n : *nvtx) {
      if (n.rank != static_cast<uint32_t>(rank)) continue;
      const std::string& name = table->Get(n.record.name_id);
      auto want = phases.find(name);
      if (want == phases.end()) continue;
      size_t inside = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        const aon::CounterRecord& c = rows[i].record;
        if (c.gpu_uuid_hi != gpu.hi || c.gpu_uuid_lo != gpu.lo ||
            c.metric != static_cast<uint16_t>(aon::CounterMetric::kGpuActive) ||
            c.start_ns < n.record.start_ns || c.end_ns > n.record.end_ns) {
          continue;
        }
        ++inside;
        EXPECT_EQ(c.device, static_cast<uint32_t>(rank));
        const double active = c.value;
        SCOPED_TRACE("rank " + std::to_string(rank) + " " + name + " interval " +
                     std::to_string(c.start_ns) + ", gpu active " + std::to_string(active));
        // What the metrics are, given the kernels' profile: exact arithmetic.
        EXPECT_NEAR(Metric(rows, i, aon::CounterMetric::kSmActive), want->second.sm * active / 100,
                    1e-6);
        EXPECT_NEAR(Metric(rows, i, aon::CounterMetric::kDramBandwidth),
                    want->second.dram * active / 100, 1e-6);
        EXPECT_NEAR(Metric(rows, i, aon::CounterMetric::kTensorActive),
                    want->second.tensor * active / 100, 1e-6);
        // The activity is the share of the interval the rank's kernels ran,
        // as the timeline holds them (ranks and collector of one host share
        // its clock; seen: within 0.0002 points, 100 ns of the 50 ms).
        // A kernel launched onto an idle GPU starts at its launch and its
        // activity row is written just after: a sample taken in between misses
        // at most that one 5 us kernel of the phases that are not busy.
        const double interval_ns = static_cast<double>(c.end_ns - c.start_ns);
        const double in_flight = want->second.busy ? 0 : 100.0 * 5000 / interval_ns;
        EXPECT_NEAR(active, covered_pct(static_cast<uint32_t>(rank), c.start_ns, c.end_ns),
                    0.01 + in_flight);
        // The phases that are not busy launch a 5 us kernel, then spend at
        // least 20 us (or 1 ms) on the host, whatever the machine's load: their
        // kernels start at least that far apart, so an interval holds at most
        // length / gap + 1 of them. (The GPU-bound phases keep the
        // device's queue 100 ms ahead of the host, so they are busy but for
        // the start of the phase and a host stalled longer than that: their
        // kernels, not a fixed figure, say how busy.)
        if (!want->second.busy) {
          const double length_us = static_cast<double>(c.end_ns - c.start_ns) / 1e3;
          EXPECT_LE(active,
                    100.0 * 5 * (length_us / want->second.host_gap_us + 1) / length_us + 1e-6);
        }
      }
      // 1500 ms at 50 ms: about 28 whole intervals inside the phase; the
      // collector runs at nice +5, so on a loaded machine fewer. Two at least,
      // so that the checks above ran.
      EXPECT_GE(inside, 2u) << "rank " << rank << " " << name;
    }
  }

  // aon-report's verdicts (docs/counters.md): each phase gets the one its
  // kernels' profile implies, from the rows of the GPU its ranks used (tied by
  // UUID through /meta/devices). The numbers: compute 85 % tensor >= 60 and
  // >= 20 % DRAM; memory 92 % DRAM with the busiest pipe fp32 = 70 x 0.6 = 42 %;
  // launch: the GPU busy <= 20 % of each interval (5 us kernels 20 us apart),
  // and still under 50 % with up to 100 ms of the previous phase's GPU work
  // inside the 700 ms range; its trace's gaps are the host issuing (no 100 us
  // without a CUDA call), so launch-bound, unless the machine is so loaded that
  // the host thread, taken off its CPU between launches for milliseconds, is
  // away from CUDA for most of the gap time: the trace cannot tell that from
  // host work, so the verdict is the one its gaps imply (idle(p); the rule
  // itself on known gaps: tests/unit/report/counters_test.cc). host: as idle
  // by the counters, its gaps 1 ms sleeps outside any CUDA call (longer when
  // loaded): host-bound.
  if (!fs::exists(kReport)) AON_SKIP_OR_FAIL(<< kReport << " is not built");
  ProcessResult py;
  ASSERT_NO_FATAL_FAILURE(ReportCounters(
      "print('gpus', len(c['gpus']), sorted(r for g in c['gpus'] for r in g['ranks']), "
      "c['synthetic'])\n"
      "for p in c['phases']:\n"
      "  print(p['name'], p['verdict'], p['busy_pct'], p['compute_pct'], p['compute_pipe'] or '-',"
      " p['memory_pct'], p['intervals'], idle(p) if p['busy_pct'] < 50 else '-', "
      "p['idle_by_cause_ns'])\n",
      &py));
  EXPECT_TRUE(Contains(py.out, "gpus 2 [0, 1] True\n")) << py.out;
  const std::map<std::string, std::string> verdicts = {{"phase:compute", "compute-bound"},
                                                       {"phase:memory", "memory-bound"},
                                                       {"phase:launch", "launch-bound"},
                                                       {"phase:host", "host-bound"}};
  for (const auto& [phase, verdict] : verdicts) {
    const size_t at = py.out.find("\n" + phase + " ");
    ASSERT_NE(at, std::string::npos) << phase << "\n" << py.out;
    std::istringstream line(py.out.substr(at + 1, py.out.find('\n', at + 1) - at - 1));
    std::string name, got, pipe, implied;
    double busy = -1, compute = -1, memory = -1, intervals = 0;
    line >> name >> got >> busy >> compute >> pipe >> memory >> intervals >> implied;
    SCOPED_TRACE(py.out);
    EXPECT_EQ(got, phase == "phase:launch" ? implied : verdict) << phase;
    EXPECT_GE(intervals, 2.0) << phase;
    if (verdict == "compute-bound") {
      EXPECT_EQ(pipe, "tensor");
      EXPECT_GE(compute, 60.0);
      EXPECT_GE(compute, memory);
    } else if (verdict == "memory-bound") {
      EXPECT_GE(memory, 60.0);
      EXPECT_TRUE(compute < 60.0 || compute < memory);
    } else {
      EXPECT_LT(busy, 50.0);
    }
  }
}

// With every kernel recorded (--mode full), each planted phase's kernel fills
// its GPU's busy time in the phase's sample intervals (examples/synthetic/
// synthetic_app.cc: one kernel name per phase), so aon-report judges each kernel
// from those intervals alone: the same verdicts as its phase.
TEST_F(CountersTest, EachPlantedKernelGetsTheVerdictOfItsProfile) {
  if (!fs::exists(kReport)) AON_SKIP_OR_FAIL(<< kReport << " is not built");
  ProcessResult r =
      Run(FakeEnv(),
          {"--mode", "full", "--no-report", "--counters", "gpm", "--counters-interval", "50"},
          "--iterations 3 --phases 1500");
  ASSERT_EQ(r.exit_status, 0) << r.Describe();
  ProcessResult py;
  ASSERT_NO_FATAL_FAILURE(
      ReportCounters("for k in c['kernels']:\n"
                     "  print(k['name'], k['verdict'], k['intervals'])\n",
                     &py));
  const std::map<std::string, std::string> verdicts = {
      {"synthetic_bf16_gemm_kernel", "compute-bound"},
      {"synthetic_elementwise_add_kernel", "memory-bound"},
      {"synthetic_tiny_kernel", "launch-bound"}};
  for (const auto& [kernel, verdict] : verdicts) {
    const size_t at = py.out.find(kernel + " ");
    ASSERT_NE(at, std::string::npos) << kernel << "\n" << py.out;
    std::istringstream line(py.out.substr(at, py.out.find('\n', at) - at));
    std::string name, got;
    uint64_t intervals = 0;
    line >> name >> got >> intervals;
    EXPECT_EQ(got, verdict) << py.out;
    EXPECT_GE(intervals, 2u) << py.out;
  }
}

// Whatever NVML says no to, the job runs, its trace is whole, and the rank
// file says what was missing and what a site can do.
TEST_F(CountersTest, RefusalsAreSaidAndTheJobGoesOn) {
  struct Case {
    std::string fail;
    std::string said;
    bool rows;
  };
  const Case cases[] = {
      {"init=9", "NVML did not start (Driver Not Loaded", false},
      {"gpm=unsupported", "no GPU Performance Monitoring on GPU 0 (" + Uuid(0) + "), GPU 1", false},
      {"sample=4", "NVreg_RestrictProfilingToAdminUsers=0", false},
      {"sample_after=4:19", "another tool holds the GPU's performance monitor", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fail);
    std::error_code ec;
    fs::remove_all(tmp_ + "/job", ec);
    ProcessResult r = Run(FakeEnv(c.fail), {"--counters", "gpm", "--counters-interval", "20"},
                          "--iterations 3 --phases 300");
    ASSERT_EQ(r.exit_status, 0) << r.Describe();
    const std::string notes = Notes();
    EXPECT_TRUE(Contains(notes, c.said)) << notes;
    const auto rows = Counters();
    if (c.rows) {
      // Three intervals per GPU before the monitor was taken, every metric the
      // fake has (11 of 13: no NVLink).
      EXPECT_EQ(rows.size(), 2u * 3u * 11u) << notes;
    } else {
      EXPECT_TRUE(rows.empty());
    }
  }
  // Switched off: NVML is not even loaded.
  std::error_code ec;
  fs::remove_all(tmp_ + "/job", ec);
  ProcessResult r = Run(FakeEnv(), {"--counters", "off"}, "--iterations 3");
  ASSERT_EQ(r.exit_status, 0) << r.Describe();
  EXPECT_TRUE(Counters().empty());
  EXPECT_FALSE(Contains(Notes(), "counters:")) << Notes();
}

// ---- Sampled counters in capture windows (the synthetic PM sampler) --------

struct Planted {
  double sm, dram, tensor;
};
const std::map<std::string, Planted> kPlantedKernels = {
    {"synthetic_bf16_gemm_kernel", {95, 20, 85}},
    {"synthetic_elementwise_add_kernel", {70, 92, 0}}};

// With every step captured (--mode full), the agents sample every 200 us of the
// run; a sample that lies inside one planted kernel holds exactly that kernel's
// profile (the synthetic sampler's rules, docs/counters.md), and aon-report
// judges each planted kernel and phase from the samples.
TEST_F(CountersTest, PmSamplesGiveEachKernelItsPlantedFigures) {
  ProcessResult r =
      Run(FakeEnv(), {"--mode", "full", "--no-report", "--counters-sample-interval", "200"},
          "--iterations 3 --phases 300");
  ASSERT_EQ(r.exit_status, 0) << r.Describe();
  const auto rows = Counters();
  auto reader = aon::TraceReader::Open(tmp_ + "/job/timeline.h5");
  ASSERT_TRUE(reader.ok());
  auto kernels = (*reader)->ReadAllMerged<aon::KernelRecord>();
  ASSERT_TRUE(kernels.ok());
  auto table = (*reader)->ReadStrings();
  ASSERT_TRUE(table.ok());
  const std::string notes = Notes();
  EXPECT_TRUE(Contains(notes, "SYNTHETIC PM samples")) << notes;

  // Per rank: its samples (one per interval, the five metrics) on its own GPU.
  std::map<uint32_t, std::map<uint64_t, std::map<uint16_t, aon::CounterRecord>>> samples;
  size_t gpm_rows = 0;
  for (const auto& m : rows) {
    if (m.record.source == static_cast<uint8_t>(aon::CounterSource::kSynthetic)) {
      ++gpm_rows;
      continue;
    }
    ASSERT_EQ(m.record.source, static_cast<uint8_t>(aon::CounterSource::kSyntheticPmSampling));
    const aon::GpuUuid own = aon::GpuUuidFromText(Uuid(static_cast<int>(m.rank)));
    EXPECT_EQ(m.record.gpu_uuid_hi, own.hi);
    EXPECT_EQ(m.record.gpu_uuid_lo, own.lo);
    EXPECT_EQ(m.record.end_ns - m.record.start_ns, 200000u);
    samples[m.rank][m.record.start_ns][m.record.metric] = m.record;
  }
  EXPECT_GT(gpm_rows, 0u) << "both tiers run together under --counters auto";
  ASSERT_EQ(samples.size(), 2u) << notes;
  for (const auto& [rank, by_start] : samples) {
    size_t checked = 0;
    for (const auto& k : *kernels) {
      if (k.rank != rank) continue;
      auto planted = kPlantedKernels.find(table->Get(k.record.name_id));
      if (planted == kPlantedKernels.end()) continue;
      const Planted& p = planted->second;
      for (auto it = by_start.lower_bound(k.record.start_ns);
           it != by_start.end() && it->first + 200000 <= k.record.end_ns; ++it) {
        const auto& v = it->second;
        ASSERT_EQ(v.size(), 5u) << "rank " << rank << " sample " << it->first;
        SCOPED_TRACE("rank " + std::to_string(rank) + " " + planted->first + " sample " +
                     std::to_string(it->first));
        EXPECT_DOUBLE_EQ(v.at(static_cast<uint16_t>(aon::CounterMetric::kGpuActive)).value, 100);
        EXPECT_NEAR(v.at(static_cast<uint16_t>(aon::CounterMetric::kSmActive)).value, p.sm, 1e-9);
        EXPECT_NEAR(v.at(static_cast<uint16_t>(aon::CounterMetric::kTensorActive)).value, p.tensor,
                    1e-9);
        EXPECT_NEAR(v.at(static_cast<uint16_t>(aon::CounterMetric::kDramBandwidth)).value, p.dram,
                    1e-9);
        EXPECT_NEAR(v.at(static_cast<uint16_t>(aon::CounterMetric::kSmIssueActive)).value,
                    p.sm - p.tensor, 1e-9);
        ++checked;
      }
    }
    // 300 ms phases of 2 ms kernels: hundreds of samples inside them.
    EXPECT_GE(checked, 100u) << "rank " << rank;
  }

  if (!fs::exists(kReport)) AON_SKIP_OR_FAIL(<< kReport << " is not built");
  ProcessResult py;
  ASSERT_NO_FATAL_FAILURE(
      ReportCounters("for k in c['kernels']:\n"
                     "  print('kernel', k['name'], k['verdict'], k['sampled'], k['intervals'])\n"
                     "for p in c['phases']:\n"
                     "  print('phase', p['name'], p['verdict'], p['sampled'], p['intervals'],"
                     " idle(p) if p['busy_pct'] < 50 else '-', p['idle_by_cause_ns'])\n",
                     &py));
  for (const auto& [what, verdict] : std::vector<std::pair<std::string, std::string>>{
           {"kernel synthetic_bf16_gemm_kernel", "compute-bound"},
           {"kernel synthetic_elementwise_add_kernel", "memory-bound"},
           {"kernel synthetic_tiny_kernel", "launch-bound"},
           {"phase phase:compute", "compute-bound"},
           {"phase phase:memory", "memory-bound"},
           {"phase phase:launch", "launch-bound"},
           {"phase phase:host", "host-bound"}}) {
    const size_t at = py.out.find(what + " ");
    ASSERT_NE(at, std::string::npos) << what << "\n" << py.out;
    std::istringstream line(py.out.substr(at, py.out.find('\n', at) - at));
    std::string kind, name, got, sampled, intervals, implied;
    line >> kind >> name >> got >> sampled >> intervals >> implied;
    // phase:launch: the verdict its trace's gaps imply (see
    // EachPlantedPhaseGetsTheFiguresOfItsKernels).
    EXPECT_EQ(got, what == "phase phase:launch" ? implied : verdict) << what << "\n" << py.out;
    EXPECT_EQ(sampled, "True") << what << " is judged from PM samples\n" << py.out;
  }
}

// In budgeted mode the agents sample only inside capture windows. The window
// opens after the boundary that starts its first step and closes during the
// boundary that starts the first step after it (a loaded machine can put a
// little time between the boundary's clock reading and the sampler's), so:
// every sample starts in a captured step or in the step right after one, and
// ends before the first uncaptured step from there on ends.
TEST_F(CountersTest, PmSamplesLieInsideCaptureWindows) {
  ProcessResult r = Run(FakeEnv(),
                        {"--capture-period", "4", "--capture-steps", "2", "--no-report",
                         "--counters-sample-interval", "100"},
                        "--iterations 24 --host-us 2000");
  ASSERT_EQ(r.exit_status, 0) << r.Describe();
  auto reader = aon::TraceReader::Open(tmp_ + "/job/timeline.h5");
  ASSERT_TRUE(reader.ok());
  auto steps = (*reader)->ReadAllMerged<aon::StepRecord>();
  ASSERT_TRUE(steps.ok());
  std::map<uint32_t, std::vector<aon::StepRecord>> by_rank;
  for (const auto& s : *steps) by_rank[s.rank].push_back(s.record);
  for (auto& [rank, v] : by_rank)
    std::sort(v.begin(), v.end(),
              [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  size_t pm = 0;
  std::set<uint32_t> ranks;
  for (const auto& m : Counters()) {
    if (m.record.source != static_cast<uint8_t>(aon::CounterSource::kSyntheticPmSampling)) continue;
    ++pm;
    ranks.insert(m.rank);
    const auto& v = by_rank[m.rank];
    auto in = std::find_if(v.begin(), v.end(), [&](const aon::StepRecord& s) {
      return s.start_ns <= m.record.start_ns && m.record.start_ns < s.end_ns;
    });
    ASSERT_NE(in, v.end()) << "sample at " << m.record.start_ns << " outside every step";
    const bool captured = in->flags & aon::kStepCaptured;
    const bool after_captured = in != v.begin() && (std::prev(in)->flags & aon::kStepCaptured);
    EXPECT_TRUE(captured || after_captured)
        << "sample at " << m.record.start_ns << " in step " << in->step
        << ", neither captured nor right after a captured one";
    auto next_uncaptured = std::find_if(
        in, v.end(), [](const aon::StepRecord& s) { return !(s.flags & aon::kStepCaptured); });
    if (next_uncaptured != v.end()) {
      EXPECT_LE(m.record.end_ns, next_uncaptured->end_ns);
    }
  }
  EXPECT_EQ(ranks.size(), 2u) << Notes();
  EXPECT_GT(pm, 0u);
}

// The refusals CUPTI gives (played by the synthetic sampler with
// AON_FAKE_PM_SAMPLING): the job runs, the node's GPM metrics are still read,
// and the rank files say what was refused and what a site can do.
TEST_F(CountersTest, PmSamplingRefusalsAreSaidAndGpmGoesOn) {
  struct Case {
    std::string fake, said;
    bool pm_rows;
  };
  const Case cases[] = {
      {"privileges", "NVreg_RestrictProfilingToAdminUsers=0", false},
      {"busy", "performance monitor is held by another tool", false},
      {"unsupported", "PM sampling is not supported on this GPU", false},
      {"fell-behind", "sampled GPU counters fell behind", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fake);
    std::error_code ec;
    fs::remove_all(tmp_ + "/job", ec);
    Env env = FakeEnv();
    env["AON_FAKE_PM_SAMPLING"] = c.fake;
    ProcessResult r = Run(env, {"--mode", "full", "--no-report", "--counters-interval", "20"},
                          "--iterations 3 --phases 100");
    ASSERT_EQ(r.exit_status, 0) << r.Describe();
    const std::string notes = Notes();
    EXPECT_TRUE(Contains(notes, c.said)) << notes;
    size_t pm = 0, gpm = 0;
    for (const auto& m : Counters())
      (m.record.source == static_cast<uint8_t>(aon::CounterSource::kSyntheticPmSampling) ? pm
                                                                                         : gpm)++;
    EXPECT_GT(gpm, 0u);
    EXPECT_EQ(pm > 0, c.pm_rows) << pm;
  }
}

}  // namespace
