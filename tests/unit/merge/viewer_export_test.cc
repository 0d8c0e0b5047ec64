// Viewer exports: --window / --ranks / --kinds (aon-merge, aon-export and the
// library), the max-records guard, and overview.json (bounded size, exact busy
// fractions). JSON is parsed with python3's strict json module.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "aon/export/chrome_trace.h"
#include "aon/export/export_filter.h"
#include "aon/export/overview.h"
#include "aon/merge/merge.h"
#include "merge_test_util.h"

namespace aon::merge {
namespace {

using testing::RankTrace;
using testing::RunCommand;
using testing::TempDir;

namespace fs = std::filesystem;

const std::string kMerge = AON_BUILD_BIN_DIR "/aon-merge";
const std::string kExport = AON_BUILD_BIN_DIR "/aon-export";
constexpr uint64_t kBase = testing::kBaseNs;
constexpr uint64_t kSecond = 1'000'000'000;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string Value(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? "<absent>" : it->second;
}

// Events of a trace per (kind, pid), with flows and process names.
constexpr const char* kCountTrace = R"PY(
import collections, json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    d = json.load(f)
kinds = {"kernel": "kernels", "memcpy": "memcpy", "memset": "memset", "sync": "sync",
         "cuda_runtime": "api", "cuda_driver": "api", "nccl": "nccl", "steps": "steps",
         "counters": "counters", "ops": "ops",
         "host_samples": "host_samples"}
c = collections.Counter()
procs = set()
flows = {"s": set(), "f": set()}
names = collections.Counter()
for e in d["traceEvents"]:
    ph = e["ph"]
    if ph == "M":
        if e["name"] == "process_name": procs.add(e["pid"])
        continue
    if ph in "sf":
        flows[ph].add((e["pid"], e["id"]))
        continue
    if ph == "e": continue
    cat = e.get("cat", "")
    k = "nvtx" if cat.startswith(("nvtx:", "compile:")) else kinds.get(cat, "?" + cat)
    c["%s/%d" % (k, e["pid"])] += 1
    c["total"] += 1
    if k == "kernels": names[e["name"]] += 1
for k, v in sorted(c.items()): print("count/%s\t%d" % (k, v))
for k, v in sorted(names.items()): print("name/%s\t%d" % (k, v))
print("procs\t" + ",".join(str(p) for p in sorted(procs)))
print("flows\t%d" % len(flows["s"] & flows["f"]))
print("flows_unmatched\t%d" % len(flows["s"] ^ flows["f"]))
for k, v in d.get("metadata", {}).items(): print("md/%s\t%s" % (k, v))
)PY";

// Counter samples, slices and metadata of an overview.
constexpr const char* kReadOverview = R"PY(
import collections, json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    d = json.load(f)
n = collections.Counter()
for e in d["traceEvents"]:
    ph = e["ph"]
    if ph == "C":
        (series, value), = e["args"].items()
        print("C/%d/%s/%.3f\t%s" % (e["pid"], e["name"], e["ts"], json.dumps(value)))
        n["nC/%d/%s" % (e["pid"], e["name"])] += 1
    elif ph in "Xbe":
        n["%s/%d/%s" % (ph, e["pid"], e["name"])] += 1
        if ph == "X": print("Xdur/%d/%s\t%.3f" % (e["pid"], e["name"], e["dur"]))
    elif ph == "M" and e["name"] == "process_name":
        print("proc/%d\t%s" % (e["pid"], e["args"]["name"]))
for k, v in sorted(n.items()): print(k + "\t" + str(v))
for k, v in d["metadata"].items(): print("md/%s\t%s" % (k, v))
)PY";

// A rank whose records of every exported kind are spread over `spread_ns` from
// kBase, lasting up to `max_dur_ns`; other fields random, strings valid.
RankTrace SpreadTrace(std::mt19937_64& rng, int rank, int world, size_t per_kind,
                      uint64_t spread_ns, uint64_t max_dur_ns) {
  RankTrace t;
  t.meta = testing::BasicMetadata(rank, world);
  for (const std::string& n : testing::SharedNames()) t.strings.Intern(n);
  const uint64_t n_strings = t.strings.size();
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    if constexpr (!kJoinTable<T>) {
      const TableSchema& schema = RecordTraits<T>::Schema();
      for (size_t i = 0; i < per_kind; ++i) {
        T r = testing::RandomRecord<T>(rng);
        for (const Field& f : schema.fields) {
          if (testing::IsStringField(f.name)) testing::SetField(&r, f, rng() % n_strings);
        }
        r.start_ns = kBase + rng() % spread_ns;
        if constexpr (requires { r.end_ns; }) r.end_ns = r.start_ns + rng() % max_dur_ns;
        if constexpr (requires { r.correlation_id; }) {
          r.correlation_id = static_cast<uint32_t>(rng() % 200);  // shared by API and GPU work
        }
        if constexpr (std::is_same_v<T, NcclRecord>) {
          r.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kCalibrated);
          r.gpu_start_ns = 0;
          if (r.correlation_id == 0) r.correlation_id = 1;
          // A resolved file has no CUDA-graph bookkeeping rows (event types 6-8).
          if (r.event_type >= 6 &&  // format 1.3 bookkeeping rows: records.h
              r.event_type <= 8) {
            r.event_type = 4;
          }
        }
        if constexpr (std::is_same_v<T, NvtxRecord>) {
          r.type = static_cast<uint8_t>(1 + rng() % 3);
          if (r.type == static_cast<uint8_t>(NvtxType::kMark)) r.end_ns = r.start_ns;
        }
        t.Get<T>().push_back(r);
      }
    }
  });
  return t;
}

// What an export of `traces` with `filter` must hold: "count/<kind>/<rank>" and
// "count/total", the keys of kCountTrace.
std::map<std::string, std::string> ExpectedCounts(const std::vector<RankTrace>& traces,
                                                  const ExportFilter& filter, uint64_t t0) {
  const uint64_t ws = filter.start.Resolve(t0, 0), we = filter.end.Resolve(t0, UINT64_MAX);
  std::map<std::string, uint64_t> c;
  for (const RankTrace& t : traces) {
    const auto rank = static_cast<uint32_t>(t.meta.rank);
    ForEachRecordType([&](auto tag) {
      using T = decltype(tag);
      if constexpr (!kJoinTable<T>) {
        const RecordKind kind = RecordTraits<T>::kKind;
        if (!filter.KeepsKind(kind) || !filter.KeepsRank(rank)) return;
        for (const T& r : t.Get<T>()) {
          uint64_t end = r.start_ns;  // instants (host samples) have no end
          if constexpr (requires { r.end_ns; }) end = std::max(end, r.end_ns);
          if (r.start_ns < we && end >= ws) {
            ++c[std::string("count/") + RecordKindName(kind) + "/" + std::to_string(rank)];
            ++c["count/total"];
          }
        }
      }
    });
  }
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : c) out[k] = std::to_string(v);
  return out;
}

std::map<std::string, std::string> OnlyCounts(const std::map<std::string, std::string>& m) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : m) {
    if (k.starts_with("count/")) out[k] = v;
  }
  return out;
}

ExportFilter Filter(const std::string& window, const std::string& ranks, const std::string& kinds) {
  ExportFilter f;
  if (!window.empty()) {
    EXPECT_TRUE(ParseWindow(window, &f).ok()) << window;
  }
  if (!ranks.empty()) {
    EXPECT_TRUE(ParseRankList(ranks, &f).ok()) << ranks;
  }
  if (!kinds.empty()) {
    EXPECT_TRUE(ParseKindList(kinds, &f).ok()) << kinds;
  }
  return f;
}

// A 4-rank job spread over 10 s; merged without the Chrome JSON.
struct SpreadJob {
  std::vector<RankTrace> traces;
  std::string timeline;
  uint64_t t0 = 0;
};

SpreadJob MakeSpreadJob(const TempDir& dir, uint64_t seed, bool merge = true) {
  SpreadJob job;
  std::mt19937_64 rng(seed);
  for (int r = 0; r < 4; ++r) {
    job.traces.push_back(SpreadTrace(rng, r, 4, 150, 10 * kSecond, 1500'000'000));
  }
  // Records on the edges of the window 2:5 (kBase is the earliest start: t0).
  RankTrace& t = job.traces[0];
  auto kernel = [&](const char* name, uint64_t start, uint64_t end) {
    KernelRecord k = testing::MakeKernel(start, 0, t.strings.Intern(name));
    k.end_ns = end;
    t.Get<KernelRecord>().push_back(k);
  };
  kernel("edge_t0", kBase, kBase + 1);
  kernel("edge_ends_at_start", kBase + kSecond, kBase + 2 * kSecond);              // kept
  kernel("edge_ends_before_start", kBase + kSecond, kBase + 2 * kSecond - 1);      // not
  kernel("edge_starts_at_start", kBase + 2 * kSecond, kBase + 2 * kSecond);        // kept
  kernel("edge_starts_before_end", kBase + 5 * kSecond - 1, kBase + 9 * kSecond);  // kept
  kernel("edge_starts_at_end", kBase + 5 * kSecond, kBase + 5 * kSecond + 10);     // not
  kernel("edge_spans_window", kBase + kSecond, kBase + 9 * kSecond);               // kept
  testing::WriteJob(dir.path(), job.traces);
  if (merge) {
    MergeOptions o;
    o.job_dir = dir.path();
    MergeReport report;
    EXPECT_TRUE(MergeJob(o, &report).ok());
    job.timeline = report.timeline_path;
    job.t0 = report.start_ns;
    EXPECT_EQ(job.t0, kBase);
  }
  return job;
}

// ---- Parsing -------------------------------------------------------------------

TEST(ExportFilterParse, WindowRanksKinds) {
  ExportFilter f;
  AON_ASSERT_OK(ParseWindow("10:20", &f));
  EXPECT_TRUE(f.start.set && !f.start.absolute);
  EXPECT_EQ(f.start.ns, 10 * kSecond);
  EXPECT_EQ(f.end.ns, 20 * kSecond);
  EXPECT_EQ(f.Label(), "10s-20s");
  AON_ASSERT_OK(ParseWindow(":5", &f));
  EXPECT_FALSE(f.start.set);
  EXPECT_EQ(f.end.ns, 5 * kSecond);
  EXPECT_EQ(f.Label(), "start-5s");
  AON_ASSERT_OK(ParseWindow("30s:", &f));
  EXPECT_EQ(f.Label(), "30s-end");
  EXPECT_EQ(f.end.Resolve(7, UINT64_MAX), UINT64_MAX);
  EXPECT_EQ(f.start.Resolve(7, 0), 7 + 30 * kSecond);
  AON_ASSERT_OK(ParseWindow("1.5:2.000000001", &f));
  EXPECT_EQ(f.start.ns, 1'500'000'000u);
  EXPECT_EQ(f.end.ns, 2'000'000'001u);
  EXPECT_EQ(f.WindowText(), "1.5s:2.000000001s");
  AON_ASSERT_OK(ParseWindow("1000ns:2000ns", &f));
  EXPECT_TRUE(f.start.absolute && f.end.absolute);
  EXPECT_EQ(f.start.Resolve(kBase, 0), 1000u);
  EXPECT_EQ(f.Label(), "1000ns-2000ns");

  AON_ASSERT_OK(ParseRankList("12-15,0-3,8,2,4", &f));
  EXPECT_EQ(f.RanksText(), "0-4,8,12-15");
  EXPECT_TRUE(f.KeepsRank(4));
  EXPECT_FALSE(f.KeepsRank(5));
  EXPECT_TRUE(f.KeepsRank(15));
  AON_ASSERT_OK(ParseKindList("nccl,kernels,nccl", &f));
  EXPECT_EQ(f.KindsText(), "kernels,nccl");
  EXPECT_TRUE(f.KeepsKind(RecordKind::kNccl));
  EXPECT_FALSE(f.KeepsKind(RecordKind::kApi));
  EXPECT_EQ(f.Label(), "1000ns-2000ns_ranks0-4,8,12-15_kernels,nccl");
  EXPECT_EQ(FilteredTracePath("/d", f),
            "/d/trace-1000ns-2000ns_ranks0-4,8,12-15_kernels,nccl.json");
  EXPECT_EQ(FilteredTracePath("/d", ExportFilter{}), "/d/trace.json");
}

TEST(ExportFilterParse, BadValuesNameTheOptionAndTheValue) {
  struct Case {
    Status (*parse)(std::string_view, ExportFilter*);
    const char* option;
    const char* value;
  };
  const Case cases[] = {
      {ParseWindow, "--window", "10:abc"},
      {ParseWindow, "--window", "10"},
      {ParseWindow, "--window", ":"},
      {ParseWindow, "--window", "5:3"},
      {ParseWindow, "--window", "5:5"},
      {ParseWindow, "--window", "-1:3"},
      {ParseWindow, "--window", "1:2:3"},
      {ParseWindow, "--window", "1ns:2"},
      {ParseWindow, "--window", "1.5ns:"},
      {ParseWindow, "--window", "0.0000000001:"},
      {ParseWindow, "--window", "99999999999999999999:"},
      {ParseRankList, "--ranks", ""},
      {ParseRankList, "--ranks", "3-1"},
      {ParseRankList, "--ranks", "a"},
      {ParseRankList, "--ranks", "1,,2"},
      {ParseRankList, "--ranks", "0-"},
      {ParseRankList, "--ranks", "4294967296"},
      {ParseKindList, "--kinds", "kernels,foo"},
      {ParseKindList, "--kinds", "external_correlation"},
      {ParseKindList, "--kinds", ""},
  };
  for (const Case& c : cases) {
    ExportFilter f;
    AON_ASSERT_OK(ParseWindow("1:2", &f));
    const ExportFilter before = f;
    Status s = c.parse(c.value, &f);
    EXPECT_FALSE(s.ok()) << c.option << " " << c.value;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(s.message(), std::string(c.option) + " '" + c.value + "'")) << s.message();
    EXPECT_EQ(f.WindowText(), before.WindowText()) << "unchanged on error";
  }
}

// ---- Filtered exports --------------------------------------------------------------

TEST(ViewerExport, FiltersSelectExactlyTheOverlappingRecords) {
  TempDir dir;
  SpreadJob job = MakeSpreadJob(dir, 61);
  const struct {
    const char* window;
    const char* ranks;
    const char* kinds;
  } cases[] = {
      {"2:5", "", ""},
      {":3", "", ""},
      {"7.5:", "", ""},
      {"", "1,3", ""},
      {"", "", "kernels,api"},
      {"", "", "nvtx"},
      {"2:5", "0-1", "kernels,memcpy,api,nccl"},
      {"2000000000ns:", "2", "sync,memset"},
      {"100:200", "", ""},  // nothing
      {"", "7", ""},        // no such rank
  };
  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string("window '") + c.window + "' ranks '" + c.ranks + "' kinds '" +
                 c.kinds + "'");
    ExportFilter f = Filter(c.window, c.ranks, c.kinds);
    if (std::string(c.window).ends_with("ns:")) {
      // Absolute: 2 s after kBase.
      f.start.ns = kBase + 2 * kSecond;
    }
    const std::string json = dir.File("f" + std::to_string(n++) + ".json");
    ChromeExportOptions options;
    options.filter = f;
    ChromeTraceStats stats;
    AON_ASSERT_OK(ExportChromeTrace(job.timeline, json, options, &stats));
    auto got = testing::RunPython(dir, kCountTrace, {json});
    const auto want = ExpectedCounts(job.traces, f, job.t0);
    EXPECT_EQ(OnlyCounts(got), want);
    EXPECT_EQ(stats.records, want.count("count/total") ? std::stoull(want.at("count/total")) : 0);
    EXPECT_EQ(Value(got, "md/records"), std::to_string(stats.records));
    EXPECT_EQ(Value(got, "flows_unmatched"), "0");
    if (n == 1) {
      EXPECT_GT(std::stoull(Value(got, "flows")), 0u) << "flows between kept records remain";
    }
    if (!f.KeepsKind(RecordKind::kApi) || !f.KeepsKind(RecordKind::kKernel)) {
      EXPECT_EQ(Value(got, "flows"), "0");
    }
    std::string procs;
    for (int r = 0; r < 4; ++r) {
      if (f.KeepsRank(r)) procs += (procs.empty() ? "" : ",") + std::to_string(r);
    }
    EXPECT_EQ(Value(got, "procs"), procs);
    if (std::string(c.window) == "2:5" && f.KeepsRank(0)) {
      EXPECT_EQ(Value(got, "name/edge_ends_at_start"), "1");
      EXPECT_EQ(Value(got, "name/edge_starts_at_start"), "1");
      EXPECT_EQ(Value(got, "name/edge_starts_before_end"), "1");
      EXPECT_EQ(Value(got, "name/edge_spans_window"), "1");
      EXPECT_EQ(Value(got, "name/edge_ends_before_start"), "<absent>");
      EXPECT_EQ(Value(got, "name/edge_starts_at_end"), "<absent>");
      EXPECT_EQ(Value(got, "name/edge_t0"), "<absent>");
      EXPECT_EQ(Value(got, "md/window"), "2s:5s");
      EXPECT_EQ(Value(got, "md/window_start_ns"), std::to_string(kBase + 2 * kSecond));
    }
  }
}

TEST(ViewerExport, UnfilteredExportIsTheMergesTrace) {
  TempDir dir;
  MakeSpreadJob(dir, 62, /*merge=*/false);
  auto r = RunCommand(dir, kMerge + " -q " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(dir.File("trace.json")));
  ASSERT_TRUE(fs::exists(dir.File("overview.json")));
  r = RunCommand(dir, kExport + " -q " + dir.File("timeline.h5") + " -o " + dir.File("again.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(testing::ReadFile(dir.File("trace.json")) ==
              testing::ReadFile(dir.File("again.json")))
      << "aon-export without a filter writes what aon-merge wrote";
}

TEST(ViewerExport, MergeAndExportCliWriteNamedWindowedTraces) {
  TempDir dir;
  SpreadJob job = MakeSpreadJob(dir, 63, /*merge=*/false);
  auto r = RunCommand(dir, kMerge + " --window 2:5 " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string windowed = dir.File("trace-2s-5s.json");
  EXPECT_TRUE(Contains(r.out, windowed)) << r.out;
  EXPECT_TRUE(Contains(r.out, dir.File("overview.json"))) << r.out;
  ASSERT_TRUE(fs::exists(windowed));
  EXPECT_FALSE(fs::exists(dir.File("trace.json"))) << "the windowed trace is not trace.json";
  auto got = testing::RunPython(dir, kCountTrace, {windowed});
  EXPECT_EQ(OnlyCounts(got), ExpectedCounts(job.traces, Filter("2:5", "", ""), kBase));

  // aon-export on the timeline: default name next to it, every filter.
  r = RunCommand(dir, kExport + " " + dir.File("timeline.h5") +
                          " --window 2:5 --ranks 0,2 --kinds api,kernels");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string named = dir.File("trace-2s-5s_ranks0,2_kernels,api.json");
  EXPECT_TRUE(Contains(r.out, named)) << r.out;
  got = testing::RunPython(dir, kCountTrace, {named});
  EXPECT_EQ(OnlyCounts(got),
            ExpectedCounts(job.traces, Filter("2:5", "0,2", "kernels,api"), kBase));
  EXPECT_EQ(Value(got, "md/filter"), "window 2s:5s, ranks 0,2, kinds kernels,api");

  // --chrome / -o choose the path; an overview from aon-export.
  r = RunCommand(dir, kExport + " " + dir.File("timeline.h5") + " --ranks 3 -o " +
                          dir.File("r3.json") + " --overview " + dir.File("ov.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  got = testing::RunPython(dir, kCountTrace, {dir.File("r3.json")});
  EXPECT_EQ(OnlyCounts(got), ExpectedCounts(job.traces, Filter("", "3", ""), kBase));
  EXPECT_TRUE(fs::exists(dir.File("ov.json")));
  r = RunCommand(dir, kExport + " " + dir.File("timeline.h5") + " --no-trace --overview " +
                          dir.File("ov2.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadFile(dir.File("ov.json")), testing::ReadFile(dir.File("ov2.json")));
  // Nothing selected: written, with a warning.
  r = RunCommand(dir, kExport + " " + dir.File("timeline.h5") + " --window 100:200");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.err, "no records")) << r.err;
  EXPECT_TRUE(fs::exists(dir.File("trace-100s-200s.json")));
}

TEST(ViewerExport, BadValuesExitTwoNamingTheOptionAndWriteNothing) {
  TempDir dir;
  MakeSpreadJob(dir, 64, /*merge=*/false);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--window", "10:abc"}, {"--window", "20:10"}, {"--window", ":"},
      {"--ranks", "3-1"},     {"--ranks", "x"},      {"--kinds", "kernels,bogus"}};
  for (const auto& [option, value] : bad) {
    auto r = RunCommand(dir, kMerge + " " + option + " '" + value + "' " + dir.path());
    EXPECT_EQ(r.exit_code, 2) << option << " " << value;
    EXPECT_TRUE(Contains(r.err, option + " '" + value + "'")) << r.err;
    for (const auto& e : fs::directory_iterator(dir.path())) {
      const std::string name = e.path().filename().string();
      EXPECT_TRUE(name.starts_with("rank-") || name.starts_with("cmd")) << "written: " << name;
    }
  }
  auto r = RunCommand(dir, kMerge + " -q " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& [option, value] : bad) {
    r = RunCommand(dir,
                   kExport + " " + dir.File("timeline.h5") + " " + option + " '" + value + "'");
    EXPECT_EQ(r.exit_code, 2) << option << " " << value;
    EXPECT_TRUE(Contains(r.err, option + " '" + value + "'")) << r.err;
  }
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_FALSE(e.path().filename().string().starts_with("trace-")) << e.path();
  }
  r = RunCommand(dir, kMerge + " --max-trace-records abc " + dir.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "--max-trace-records")) << r.err;
  r = RunCommand(dir, kExport + " " + dir.File("nope.h5"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, dir.File("nope.h5"))) << r.err;
  r = RunCommand(dir, kExport + " " + dir.File("timeline.h5") + " --no-trace");
  EXPECT_EQ(r.exit_code, 2) << "nothing to write";
}

// ---- The max-records guard ---------------------------------------------------------

TEST(ViewerExport, MaxTraceRecordsGuard) {
  TempDir dir;
  SpreadJob job = MakeSpreadJob(dir, 65, /*merge=*/false);
  uint64_t total = 0;
  for (const auto& [k, v] : ExpectedCounts(job.traces, ExportFilter{}, kBase)) {
    if (k == "count/total") total = std::stoull(v);
  }
  ASSERT_GT(total, 1000u);

  // Library: over the limit -> no trace, a reason naming aon-export and --window.
  MergeOptions o;
  o.job_dir = dir.path();
  MergeExportOptions exports;
  exports.max_trace_records = total - 1;
  MergeReport report;
  AON_ASSERT_OK(testing::MergeAndExport(o, exports, &report));
  EXPECT_EQ(report.chrome_path, "");
  EXPECT_FALSE(fs::exists(dir.File("trace.json")));
  EXPECT_TRUE(fs::exists(dir.File("overview.json"))) << "the overview is always written";
  EXPECT_EQ(report.overview_path, dir.File("overview.json"));
  EXPECT_TRUE(Contains(report.chrome_not_written, std::to_string(total) + " records"))
      << report.chrome_not_written;
  EXPECT_TRUE(Contains(report.chrome_not_written, "aon-export " + report.timeline_path))
      << report.chrome_not_written;
  EXPECT_TRUE(Contains(report.chrome_not_written, "--window")) << report.chrome_not_written;
  EXPECT_TRUE(Contains(FormatMergeSummary(report), "chrome trace: not written"));
  // Exactly at the limit: written.
  exports.max_trace_records = total;
  AON_ASSERT_OK(testing::MergeAndExport(o, exports, &report));
  EXPECT_EQ(report.chrome_path, dir.File("trace.json"));
  EXPECT_EQ(report.chrome_records, total);
  EXPECT_EQ(report.chrome_not_written, "");
  fs::remove(dir.File("trace.json"));

  // CLI: exit 0, a note on stderr (also with -q), no trace, the overview.
  auto r = RunCommand(dir, kMerge + " -q --max-trace-records 1000 " + dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.err, "note:")) << r.err;
  EXPECT_TRUE(Contains(r.err, "--window START:END")) << r.err;
  EXPECT_FALSE(fs::exists(dir.File("trace.json")));
  // A window that fits is written under the same limit (stopped while streaming
  // otherwise).
  r = RunCommand(dir, kMerge + " -q --max-trace-records 1000 --window 0:0.5 " + dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir.File("trace-0s-0.5s.json"))) << r.err;
  r = RunCommand(dir, kExport + " --max-trace-records 10 --ranks 1 " + dir.File("timeline.h5"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "more than 10 records")) << r.err;
  EXPECT_TRUE(Contains(r.err, "--window")) << r.err;
  EXPECT_FALSE(fs::exists(dir.File("trace-ranks1.json")));
  r = RunCommand(dir, kExport + " --max-trace-records 0 " + dir.File("timeline.h5"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir.File("trace.json")));
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_FALSE(e.path().string().ends_with(".partial")) << e.path();
  }
}

TEST(ViewerExport, UnwritableOverviewIsAnErrorButTheTraceIsStillWritten) {
  TempDir dir;
  MakeSpreadJob(dir, 66, /*merge=*/false);
  MergeOptions o;
  o.job_dir = dir.path();
  MergeExportOptions e;
  e.overview_path = dir.File("no/such/dir/overview.json");
  MergeReport report;
  Status s = testing::MergeAndExport(o, e, &report);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), e.overview_path)) << s.message();
  EXPECT_EQ(report.chrome_path, dir.File("trace.json"));
  EXPECT_TRUE(fs::exists(dir.File("trace.json")));
  e.overview_path = dir.File("timeline.h5");
  s = testing::MergeAndExport(o, e, &report);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.message(), "--overview")) << s.message();
}

// ---- Overview ------------------------------------------------------------------

// Rank 0 has hand-placed GPU / NCCL / NVTX work; rank 1 one API call that sets
// the run to 2000 us, hence 2000 bins of 1 us (kW).
TEST(Overview, BusyFractionsAndSlicesAreExact) {
  constexpr uint64_t kW = 1000;
  TempDir dir;
  RankTrace r0, r1;
  r0.meta = testing::BasicMetadata(0, 2);
  r1.meta = testing::BasicMetadata(1, 2);
  auto at = [](double bins) { return kBase + static_cast<uint64_t>(bins * kW); };
  auto kernel = [&](double a, double b, uint32_t stream) {
    KernelRecord k = testing::MakeKernel(at(a));
    k.end_ns = at(b);
    k.stream_id = stream;
    r0.Get<KernelRecord>().push_back(k);
  };
  kernel(10, 10.5, 1);  // bin 10: half
  kernel(20, 20.5, 1);  // bin 20: with the memcpy, 0.75
  kernel(50, 50.2, 1);  // bin 50: two overlapping kernels, union 0.3
  kernel(50.1, 50.3, 2);
  MemcpyRecord m{};
  m.start_ns = at(20.25);
  m.end_ns = at(20.75);
  r0.Get<MemcpyRecord>().push_back(m);
  MemsetRecord s{};
  s.start_ns = at(30.5);  // bins 30, 31, 32: 0.5, 1, 0.5
  s.end_ns = at(32.5);
  r0.Get<MemsetRecord>().push_back(s);
  NcclRecord coll{};
  coll.start_ns = at(40.25);
  coll.end_ns = at(40.75);
  coll.event_type = static_cast<uint8_t>(NcclEventType::kColl);
  coll.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kCalibrated);
  coll.correlation_id = 1;
  NcclRecord channel = coll;  // parts of the operation: not counted again
  channel.event_type = static_cast<uint8_t>(NcclEventType::kKernelCh);
  channel.start_ns = at(40.8);
  channel.end_ns = at(40.9);
  NcclRecord comm = coll;  // the communicator's life: not busy
  comm.event_type = static_cast<uint8_t>(NcclEventType::kComm);
  comm.start_ns = at(1);
  comm.end_ns = at(1999);
  r0.Get<NcclRecord>() = {comm, coll, channel};
  auto nvtx = [&](const char* name, double a, double b, uint16_t depth, NvtxType type) {
    NvtxRecord n{};
    n.start_ns = at(a);
    n.end_ns = at(b);
    n.depth = depth;
    n.type = static_cast<uint8_t>(type);
    n.thread_id = 1000;  // the main thread (pid)
    n.name_id = r0.strings.Intern(name);
    r0.Get<NvtxRecord>().push_back(n);
  };
  nvtx("step", 100, 105, 0, NvtxType::kPushPop);     // kept: 5 bins
  nvtx("inner", 101, 104, 1, NvtxType::kPushPop);    // nested: not
  nvtx("short", 200, 200.5, 0, NvtxType::kPushPop);  // shorter than a bin: not
  nvtx("phase", 300, 700, 0, NvtxType::kStartEnd);   // kept, async
  nvtx("mark", 800, 800, 0, NvtxType::kMark);        // not
  ApiRecord api{};
  api.start_ns = at(0);
  api.end_ns = at(2000);
  r1.Get<ApiRecord>().push_back(api);
  testing::WriteJob(dir.path(), {r0, r1});
  MergeOptions o;
  o.job_dir = dir.path();
  MergeExportOptions overview_only;
  overview_only.write_chrome = false;
  MergeReport report;
  AON_ASSERT_OK(testing::MergeAndExport(o, overview_only, &report));
  ASSERT_EQ(report.overview_path, dir.File("overview.json"));

  auto v = testing::RunPython(dir, kReadOverview, {report.overview_path});
  EXPECT_EQ(Value(v, "md/bin_ns"), "1000");
  EXPECT_EQ(Value(v, "md/bins"), "2000");
  EXPECT_EQ(Value(v, "md/kind"), "overview");
  EXPECT_EQ(Value(v, "proc/0"), "rank 0 @ node0");
  const std::map<std::string, std::string> gpu = {
      {"0.000", "0"},  {"10.000", "0.5"}, {"11.000", "0"}, {"20.000", "0.75"},
      {"21.000", "0"}, {"30.000", "0.5"}, {"31.000", "1"}, {"32.000", "0.5"},
      {"33.000", "0"}, {"50.000", "0.3"}, {"51.000", "0"}};
  for (const auto& [ts, value] : gpu) {
    EXPECT_EQ(Value(v, "C/0/GPU busy/" + ts), value) << ts;
  }
  EXPECT_EQ(Value(v, "nC/0/GPU busy"), std::to_string(gpu.size())) << "a sample per change";
  EXPECT_EQ(Value(v, "C/0/NCCL busy/40.000"), "0.5");
  EXPECT_EQ(Value(v, "C/0/NCCL busy/41.000"), "0");
  EXPECT_EQ(Value(v, "nC/0/NCCL busy"), "3");
  EXPECT_EQ(Value(v, "C/0/kernels/10.000"), "1");
  EXPECT_EQ(Value(v, "C/0/kernels/20.000"), "1");
  EXPECT_EQ(Value(v, "C/0/kernels/50.000"), "2");
  EXPECT_EQ(Value(v, "C/0/kernels/51.000"), "0");
  EXPECT_EQ(Value(v, "nC/1/GPU busy"), "1") << "an idle rank: one 0 sample";
  EXPECT_EQ(Value(v, "X/0/step"), "1");
  EXPECT_EQ(Value(v, "Xdur/0/step"), "5.000");
  EXPECT_EQ(Value(v, "b/0/phase"), "1");
  EXPECT_EQ(Value(v, "e/0/phase"), "1");
  EXPECT_EQ(Value(v, "X/0/inner"), "<absent>");
  EXPECT_EQ(Value(v, "X/0/short"), "<absent>");
  EXPECT_EQ(Value(v, "md/nvtx_ranges"), "2");
  EXPECT_EQ(Value(v, "md/nvtx_ranges_omitted"), "0");
}

// One rank with `kernels` kernels (and a tenth as many long NVTX ranges) over
// 100 s, split in two ranks.
uint64_t OverviewSize(const TempDir& dir, size_t records, OverviewStats* stats) {
  std::mt19937_64 rng(records);
  std::vector<RankTrace> traces;
  for (int rank = 0; rank < 2; ++rank) {
    RankTrace t;
    t.meta = testing::BasicMetadata(rank, 2);
    const size_t n = records / 2;
    auto& k = t.Get<KernelRecord>();
    auto& nv = t.Get<NvtxRecord>();
    k.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (i % 10 == 9) {
        NvtxRecord r{};
        r.start_ns = kBase + rng() % (98 * kSecond);
        r.end_ns = r.start_ns + kSecond / 10 + rng() % kSecond;  // longer than a bin (50 ms)
        r.type = static_cast<uint8_t>(NvtxType::kPushPop);
        r.thread_id = static_cast<uint32_t>(rng() % 64);
        nv.push_back(r);
        continue;
      }
      KernelRecord r = testing::MakeKernel(kBase + rng() % (99 * kSecond));
      r.end_ns = r.start_ns + rng() % 20'000'000;
      k.push_back(r);
    }
    // Both runs span exactly 100 s.
    k.push_back(testing::MakeKernel(kBase));
    k.push_back(testing::MakeKernel(kBase + 100 * kSecond - 10));
    traces.push_back(std::move(t));
  }
  testing::WriteJob(dir.path(), traces);
  MergeOptions o;
  o.job_dir = dir.path();
  MergeReport report;
  EXPECT_TRUE(MergeJob(o, &report).ok());
  const std::string path = dir.File("overview.json");
  EXPECT_TRUE(WriteOverview(report.timeline_path, path, {}, stats).ok());
  auto v = testing::RunPython(dir, kReadOverview, {path});  // valid JSON
  EXPECT_EQ(Value(v, "md/bins"), std::to_string(stats->bins));
  return fs::file_size(path);
}

TEST(Overview, SizeIsBoundedIndependentOfRecords) {
  TempDir small_dir, big_dir;
  OverviewStats small, big;
  const uint64_t small_size = OverviewSize(small_dir, 10'000, &small);
  const uint64_t big_size = OverviewSize(big_dir, 1'000'000, &big);
  EXPECT_EQ(small.bins, 2000u);
  EXPECT_EQ(big.bins, 2000u);
  EXPECT_EQ(big.bin_ns, 50'000'000u);
  EXPECT_GT(big.nvtx_ranges_omitted, 0u) << "NVTX slices are capped";
  EXPECT_LE(big.nvtx_ranges, 2u * 2 * 2000);
  // 3 counters x 2001 samples and 4000 slices per rank, < 150 bytes each.
  const uint64_t bound = 2 * (3 * 2001 + 4000) * 150;
  EXPECT_LE(small_size, bound);
  EXPECT_LE(big_size, bound);
  EXPECT_LE(big_size, 3 * small_size) << "small " << small_size << " big " << big_size;
  std::printf("overview sizes: 10k records %llu bytes, 1M records %llu bytes\n",
              static_cast<unsigned long long>(small_size),
              static_cast<unsigned long long>(big_size));
}

TEST(Overview, BinsShrinkForLargeJobsAndEmptyTimelinesWork) {
  TempDir dir;
  std::vector<RankTrace> traces;
  for (int r = 0; r < 3; ++r) {
    RankTrace t;
    t.meta = testing::BasicMetadata(r, 3);
    // The run: exactly 2 s (the last kernel ends at kBase + 2 s).
    t.Get<KernelRecord>().push_back(testing::MakeKernel(kBase + r * kSecond - (r == 2 ? 10 : 0)));
    traces.push_back(std::move(t));
  }
  testing::WriteJob(dir.path(), traces);
  MergeOptions o;
  o.job_dir = dir.path();
  MergeReport report;
  AON_ASSERT_OK(MergeJob(o, &report));
  OverviewOptions small;
  small.max_total_bins = 300;  // 3 ranks: 100 bins each
  OverviewStats stats;
  AON_ASSERT_OK(WriteOverview(report.timeline_path, dir.File("o.json"), small, &stats));
  EXPECT_LE(stats.bins, 100u);
  EXPECT_EQ(stats.bin_ns, 20'000'000u);  // 2 s / 100 = 20 ms
  EXPECT_EQ(stats.ranks, 3u);
  testing::RunPython(dir, kReadOverview, {dir.File("o.json")});

  // A rank file is refused, naming it.
  Status s = WriteOverview(testing::RankPath(dir.path(), 0), dir.File("x.json"));
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), testing::RankPath(dir.path(), 0))) << s.message();
}

}  // namespace
}  // namespace aon::merge
