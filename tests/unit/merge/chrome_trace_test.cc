// The Chrome trace-event JSON: parsed with Python's strict json module, then
// checked against what the merged job holds.
#include "aon/export/chrome_trace.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "aon/merge/merge.h"
#include "merge_test_util.h"

namespace aon::merge {
namespace {

using testing::MakeKernel;
using testing::RankTrace;
using testing::TempDir;

// Counts what a trace holds, by phase and category; checks each event's shape.
constexpr const char* kCheckTrace = R"PY(
import collections, json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    d = json.load(f)
ev = d["traceEvents"]
c = collections.Counter()
bad = []
procs, threads = {}, []
flows = {"s": set(), "f": set()}
async_balance = collections.Counter()
kernel_ts = []
for e in ev:
    ph = e.get("ph")
    if not isinstance(ph, str) or not isinstance(e.get("pid"), int) or not isinstance(e.get("tid"), int) or not isinstance(e.get("name"), str):
        bad.append(e); continue
    if ph == "M":
        c["M_" + e["name"]] += 1
        if e["name"] == "process_name": procs[e["pid"]] = e["args"]["name"]
        if e["name"] == "thread_name": threads.append(e["args"]["name"])
        continue
    if not isinstance(e.get("ts"), (int, float)) or e["ts"] < 0: bad.append(e)
    cat = e.get("cat", "").split(":")[0]
    c["ph_" + ph] += 1
    if ph == "X":
        if not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0: bad.append(e)
        c["X_" + cat] += 1
        if cat == "kernel": kernel_ts.append("%s:%s" % (repr(e["ts"]), repr(e["dur"])))
    if ph == "i": c["i_" + cat] += 1
    if ph in "sf": flows[ph].add((e["pid"], e["id"]))
    if ph == "b": async_balance[(e["pid"], e["cat"], e["name"], e["id"])] += 1
    if ph == "e": async_balance[(e["pid"], e["cat"], e["name"], e["id"])] -= 1
    if ph == "i" and e.get("s") != "t": bad.append(e)
for k, v in sorted(c.items()): print(k + "\t" + str(v))
print("bad\t%d" % len(bad))
if bad: print("first_bad\t" + json.dumps(bad[0]))
print("process_name_pids\t" + ",".join(str(p) for p in sorted(procs)))
print("process_names\t" + "|".join(procs[p] for p in sorted(procs)))
print("synthetic_labels\t%d" % sum(1 for n in procs.values() if n.endswith(" [SYNTHETIC]")))
print("thread_names\t" + "|".join(sorted(set(threads))))
print("flows_matched\t%d" % len(flows["s"] & flows["f"]))
print("flows_unmatched\t%d" % len(flows["s"] ^ flows["f"]))
print("async_unbalanced\t%d" % sum(1 for v in async_balance.values() if v != 0))
print("kernel_ts_dur\t" + ",".join(sorted(kernel_ts)))
print("display_time_unit\t" + str(d.get("displayTimeUnit")))
print("metadata_job_id\t" + str(d.get("metadata", {}).get("job_id")))
kernel_names = [e["name"] for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"]
print("kernel_names_with_fffd\t%d" % sum(1 for n in kernel_names if "\ufffd" in n))
if len(sys.argv) > 2:
    with open(sys.argv[2]) as f:
        expected = [bytes.fromhex(l.strip()).decode("utf-8") for l in f if l.strip()]
    found = set(kernel_names)
    print("expected_names_found\t%d" % sum(1 for n in expected if n in found))
)PY";

uint64_t Count(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : std::stoull(it->second);
}

std::string Value(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? "<absent>" : it->second;
}

TEST(MergeChromeTrace, LoadsAndHoldsEveryRecord) {
  TempDir dir;
  std::mt19937_64 rng(41);
  std::vector<RankTrace> traces;
  for (int r = 0; r < 4; ++r) {
    testing::RandomTraceOptions o;
    o.max_records = 400;
    o.random_offset = true;
    traces.push_back(testing::RandomRankTrace(rng, r, 4, o));
  }
  testing::WriteJob(dir.path(), traces);
  MergeOptions options;
  options.job_dir = dir.path();
  MergeReport report;
  AON_ASSERT_OK(testing::MergeAndExport(options, {}, &report));

  auto c = testing::RunPython(dir, kCheckTrace, {report.chrome_path});
  EXPECT_EQ(Value(c, "bad"), "0") << Value(c, "first_bad");
  EXPECT_EQ(Value(c, "process_name_pids"), "0,1,2,3");
  EXPECT_EQ(Count(c, "M_process_sort_index"), 4u);
  EXPECT_EQ(Value(c, "synthetic_labels"), "0");
  EXPECT_EQ(Value(c, "display_time_unit"), "ns");
  EXPECT_EQ(Value(c, "metadata_job_id"), "job-42");

  uint64_t marks = 0, start_end = 0, push_pop = 0;
  for (const RankTrace& t : traces) {
    for (const NvtxRecord& n : t.Get<NvtxRecord>()) {
      if (n.type == 3) {
        ++marks;
      } else if (n.type == 2) {
        ++start_end;
      } else {
        ++push_pop;
      }
    }
  }
  const auto k = [&](RecordKind kind) { return report.records[static_cast<size_t>(kind)]; };
  EXPECT_EQ(Count(c, "X_kernel"), k(RecordKind::kKernel));
  EXPECT_EQ(Count(c, "X_memcpy"), k(RecordKind::kMemcpy));
  EXPECT_EQ(Count(c, "X_memset"), k(RecordKind::kMemset));
  EXPECT_EQ(Count(c, "X_sync"), k(RecordKind::kSync));
  EXPECT_EQ(Count(c, "X_cuda_runtime") + Count(c, "X_cuda_driver"), k(RecordKind::kApi));
  EXPECT_EQ(Count(c, "X_nccl"), k(RecordKind::kNccl));
  EXPECT_EQ(Count(c, "X_nvtx"), push_pop);
  // Instants: NVTX marks, and host stack samples on their threads' rows.
  EXPECT_EQ(Count(c, "i_nvtx"), marks);
  EXPECT_EQ(Count(c, "i_host_samples"), k(RecordKind::kHostSamples));
  EXPECT_EQ(Count(c, "ph_i"), marks + k(RecordKind::kHostSamples));
  EXPECT_EQ(Count(c, "ph_b"), start_end);
  EXPECT_EQ(Count(c, "ph_e"), start_end);
  EXPECT_EQ(Value(c, "async_unbalanced"), "0");
  EXPECT_EQ(Value(c, "flows_unmatched"), "0");
}

TEST(MergeChromeTrace, TimesAreExactMicrosecondsFromTheEarliestStart) {
  TempDir dir;
  RankTrace r0;
  r0.meta = testing::BasicMetadata(0, 1);
  r0.meta.clock_offset_ns = 5;
  KernelRecord a{}, b{};
  a.start_ns = 1'000'000'000'000;
  a.end_ns = a.start_ns + 1001;
  b.start_ns = a.start_ns + 1'234'567;
  b.end_ns = b.start_ns + 999'999'999;
  r0.Get<KernelRecord>() = {b, a};
  ApiRecord api{};
  api.start_ns = a.start_ns - 2500;  // the earliest record: ts 0
  api.end_ns = a.start_ns;
  r0.Get<ApiRecord>() = {api};
  testing::WriteJob(dir.path(), {r0});
  MergeOptions options;
  options.job_dir = dir.path();
  MergeReport report;
  AON_ASSERT_OK(testing::MergeAndExport(options, {}, &report));
  auto c = testing::RunPython(dir, kCheckTrace, {report.chrome_path});
  EXPECT_EQ(Value(c, "kernel_ts_dur"), "1237.067:999999.999,2.5:1.001");
}

TEST(MergeChromeTrace, FlowsLinkApiCallsToTheirGpuWork) {
  TempDir dir;
  RankTrace r0;
  r0.meta = testing::BasicMetadata(0, 2);
  RankTrace r1 = r0;
  r1.meta = testing::BasicMetadata(1, 2);
  uint64_t expected = 0;
  for (RankTrace* t : {&r0, &r1}) {
    for (uint32_t corr = 1; corr <= 30; ++corr) {
      ApiRecord api{};
      api.start_ns = 1000 * corr;
      api.end_ns = api.start_ns + 100;
      api.correlation_id = corr;
      api.thread_id = 4242;
      t->Get<ApiRecord>().push_back(api);
      if (corr % 3 == 0) {
        t->Get<KernelRecord>().push_back(MakeKernel(1000 * corr + 200, corr));
        ++expected;
      } else if (corr % 3 == 1) {
        MemcpyRecord m{};
        m.start_ns = 1000 * corr + 500;
        m.end_ns = m.start_ns + 10;
        m.correlation_id = corr;
        m.copy_kind = 1;
        t->Get<MemcpyRecord>().push_back(m);
        ++expected;
      }  // corr % 3 == 2: an API call without GPU work (cudaStreamSynchronize, ...)
    }
    // GPU work whose API call was not captured.
    KernelRecord orphan = MakeKernel(99, 777);
    t->Get<KernelRecord>().push_back(orphan);
  }
  testing::WriteJob(dir.path(), {r0, r1});
  ChromeTraceStats stats;
  MergeOptions options;
  options.job_dir = dir.path();
  MergeReport report;
  AON_ASSERT_OK(MergeJob(options, &report));
  const std::string json = dir.File("custom.json");
  AON_ASSERT_OK(ExportChromeTrace(report.timeline_path, json, &stats));
  EXPECT_EQ(stats.flows, expected);
  auto c = testing::RunPython(dir, kCheckTrace, {json});
  EXPECT_EQ(Value(c, "bad"), "0") << Value(c, "first_bad");
  EXPECT_EQ(Count(c, "flows_matched"), expected);
  EXPECT_EQ(Value(c, "flows_unmatched"), "0");
  EXPECT_EQ(Count(c, "ph_s"), expected);
  EXPECT_EQ(Count(c, "ph_f"), expected);
}

TEST(MergeChromeTrace, TracksAndLabels) {
  TempDir dir;
  RankTrace r0;
  r0.meta = testing::BasicMetadata(0, 2);
  r0.meta.host = "host \"a\"";
  RankTrace r1;
  r1.meta = testing::BasicMetadata(1, 2);
  r1.meta.source = "synthetic";
  for (RankTrace* t : {&r0, &r1}) {
    KernelRecord k = MakeKernel(1);
    k.device_id = 1;
    k.stream_id = 7;
    t->Get<KernelRecord>().push_back(k);
    SyncRecord on_stream{}, no_stream{};
    on_stream.start_ns = 5;
    on_stream.stream_id = 7;
    on_stream.sync_type = 3;
    no_stream.start_ns = 6;
    no_stream.stream_id = UINT32_MAX;
    no_stream.sync_type = 4;
    t->Get<SyncRecord>() = {on_stream, no_stream};
    NcclRecord n{};
    n.start_ns = 7;
    n.func_id = t->strings.Intern("AllReduce");
    t->Get<NcclRecord>().push_back(n);
    ApiRecord main_thread{};
    main_thread.start_ns = 8;
    main_thread.thread_id = static_cast<uint32_t>(t->meta.pid);
    t->Get<ApiRecord>().push_back(main_thread);
  }
  testing::WriteJob(dir.path(), {r0, r1});
  MergeOptions options;
  options.job_dir = dir.path();
  MergeReport report;
  AON_ASSERT_OK(testing::MergeAndExport(options, {}, &report));
  auto c = testing::RunPython(dir, kCheckTrace, {report.chrome_path});
  EXPECT_EQ(Value(c, "bad"), "0") << Value(c, "first_bad");
  EXPECT_EQ(Value(c, "process_names"), "rank 0 @ host \"a\"|rank 1 @ node0 [SYNTHETIC]");
  EXPECT_EQ(Value(c, "synthetic_labels"), "1");
  EXPECT_EQ(Value(c, "thread_names"),
            "GPU 1 stream 7|NCCL comm 0000|main thread 1000|main thread 1001|sync");
  EXPECT_EQ(Count(c, "X_sync"), 4u);
}

// Framework operators: nested slices named by the operator on the OS thread's
// track, around that thread's CUDA calls; names remapped and times shifted like
// every other kind's (each rank's table lists the names in its own order).
constexpr const char* kOpsEvents = R"PY(
import json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    d = json.load(f)
threads = {}
for e in d["traceEvents"]:
    if e["ph"] == "M" and e["name"] == "thread_name": threads[(e["pid"], e["tid"])] = e["args"]["name"]
for e in d["traceEvents"]:
    if e.get("cat") not in ("ops", "cuda_runtime"): continue
    a = e.get("args", {})
    print("%s/%d/%s\t%s %s ts=%.3f dur=%.3f kind=%s op=%s parent=%s seq=%s fwd=%s" % (
        e["cat"], e["pid"], e["name"], e["ph"], threads.get((e["pid"], e["tid"]), "?"), e["ts"],
        e["dur"], a.get("kind"), a.get("op_id"), a.get("parent_id"), a.get("sequence_nr"),
        a.get("forward_thread")))
)PY";

TEST(MergeChromeTrace, OpsNestOnTheirThreadAroundTheirCudaCalls) {
  TempDir dir;
  std::vector<RankTrace> ranks(2);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    RankTrace& t = ranks[rank];
    t.meta = testing::BasicMetadata(rank, 2);
    t.meta.clock_offset_ns = rank == 0 ? 0 : 5000;  // rank 1's clock is 5 us behind
    // Names interned in a different order on each rank.
    if (rank == 1) t.strings.Intern("cudaLaunchKernel");
    const uint32_t module = t.strings.Intern("encoder.layers.3.self_attn");
    const uint32_t addmm = t.strings.Intern("aten::addmm");
    const uint32_t backward = t.strings.Intern("AddmmBackward0");
    const uint32_t launch = t.strings.Intern("cudaLaunchKernel");
    const uint32_t main_tid = static_cast<uint32_t>(t.meta.pid);
    auto op = [&](uint64_t start, uint64_t end, uint64_t id, uint64_t parent, int64_t seq,
                  uint32_t name, uint32_t tid, OpKind kind, uint32_t forward) {
      OpRecord r{};
      r.start_ns = 1'000'000 + start;
      r.end_ns = 1'000'000 + end;
      r.op_id = id;
      r.parent_id = parent;
      r.sequence_nr = seq;
      r.name_id = name;
      r.thread_id = tid;
      r.framework_thread = tid == main_tid ? 1 : 2;
      r.forward_thread = forward;
      r.kind = static_cast<uint8_t>(kind);
      t.Get<OpRecord>().push_back(r);
    };
    op(1000, 9000, 1, 0, -1, module, main_tid, OpKind::kModule, 0);
    op(2000, 8000, 2, 1, 41, addmm, main_tid, OpKind::kOperator, 0);
    op(20000, 26000, 1025, 0, 41, backward, 4321, OpKind::kBackward, 1);
    ApiRecord a{};
    a.start_ns = 1'000'000 + 3000;
    a.end_ns = 1'000'000 + 5000;
    a.thread_id = main_tid;
    a.name_id = launch;
    a.domain = static_cast<uint8_t>(ApiDomain::kRuntime);
    t.Get<ApiRecord>().push_back(a);
  }
  testing::WriteJob(dir.path(), ranks);
  MergeOptions options;
  options.job_dir = dir.path();
  MergeReport report;
  AON_ASSERT_OK(testing::MergeAndExport(options, {}, &report));
  EXPECT_EQ(report.records[static_cast<size_t>(RecordKind::kOps)], 6u);

  auto c = testing::RunPython(dir, kOpsEvents, {report.chrome_path});
  // Times are relative to the timeline's start (rank 0's first record).
  EXPECT_EQ(Value(c, "ops/0/encoder.layers.3.self_attn"),
            "X main thread 1000 ts=0.000 dur=8.000 kind=module op=1 parent=0 seq=-1 fwd=None");
  EXPECT_EQ(Value(c, "ops/0/aten::addmm"),
            "X main thread 1000 ts=1.000 dur=6.000 kind=operator op=2 parent=1 seq=41 fwd=None");
  EXPECT_EQ(Value(c, "cuda_runtime/0/cudaLaunchKernel"),
            "X main thread 1000 ts=2.000 dur=2.000 kind=None op=None parent=None seq=None "
            "fwd=None");
  EXPECT_EQ(Value(c, "ops/0/AddmmBackward0"),
            "X thread 4321 ts=19.000 dur=6.000 kind=backward op=1025 parent=0 seq=41 fwd=1");
  EXPECT_EQ(Value(c, "ops/1/encoder.layers.3.self_attn"),
            "X main thread 1001 ts=5.000 dur=8.000 kind=module op=1 parent=0 seq=-1 fwd=None");
  EXPECT_EQ(Value(c, "ops/1/AddmmBackward0"),
            "X thread 4321 ts=24.000 dur=6.000 kind=backward op=1025 parent=0 seq=41 fwd=1");
}

TEST(MergeChromeTrace, HostileNamesStayValidJson) {
  TempDir dir;
  RankTrace r0;
  r0.meta = testing::BasicMetadata(0, 1);
  const std::vector<std::string> valid = {
      "quote\"d",     "back\\slash", "new\nline\ttab\rcr", std::string("ctl\x01\x1f\x7f", 6),
      "ünï ✓ 日本 🚀", "</script>",   "{\"json\": [1]}",    std::string(5000, 'k')};
  const std::vector<std::string> invalid_utf8 = {"bad\xff byte", "cut \xe2\x82",
                                                 "\xc0\xaf overlong", "surrogate \xed\xa0\x80"};
  uint64_t t = 1;
  for (const std::string& name : valid)
    r0.Get<KernelRecord>().push_back(MakeKernel(t++, 0, r0.strings.Intern(name)));
  for (const std::string& name : invalid_utf8)
    r0.Get<KernelRecord>().push_back(MakeKernel(t++, 0, r0.strings.Intern(name)));
  NvtxRecord n{};
  n.start_ns = 1;
  n.domain_id = r0.strings.Intern("dom\"ain\\");
  n.name_id = r0.strings.Intern("range\n\"x\"");
  n.type = 2;
  r0.Get<NvtxRecord>().push_back(n);
  testing::WriteJob(dir.path(), {r0});
  MergeOptions options;
  options.job_dir = dir.path();
  MergeReport report;
  AON_ASSERT_OK(testing::MergeAndExport(options, {}, &report));

  const std::string expected = dir.File("expected.hex");
  {
    std::ofstream out(expected);
    for (const std::string& name : valid) {
      for (unsigned char ch : name) {
        char hex[3];
        std::snprintf(hex, sizeof(hex), "%02x", ch);
        out << hex;
      }
      out << "\n";
    }
  }
  auto c = testing::RunPython(dir, kCheckTrace, {report.chrome_path, expected});
  EXPECT_EQ(Value(c, "bad"), "0") << Value(c, "first_bad");
  EXPECT_EQ(Count(c, "X_kernel"), valid.size() + invalid_utf8.size());
  EXPECT_EQ(Count(c, "expected_names_found"), valid.size());
  EXPECT_EQ(Count(c, "kernel_names_with_fffd"), invalid_utf8.size());
  EXPECT_EQ(Count(c, "ph_b"), 1u);
  EXPECT_EQ(Value(c, "async_unbalanced"), "0");
}

// The escaper's own test moved with it to base/: tests/unit/common/json_writer_test.cc.

TEST(MergeChromeTrace, RankFileIsRefused) {
  TempDir dir;
  RankTrace r0;
  r0.meta = testing::BasicMetadata(0, 1);
  testing::WriteJob(dir.path(), {r0});
  Status s = ExportChromeTrace(testing::RankPath(dir.path(), 0), dir.File("x.json"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(testing::RankPath(dir.path(), 0)), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(dir.File("x.json")));
  EXPECT_FALSE(std::filesystem::exists(dir.File("x.json.partial")));
}

}  // namespace
}  // namespace aon::merge
