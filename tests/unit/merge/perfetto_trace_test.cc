// The Perfetto protobuf export (aon/export/perfetto_trace.h): every file it
// writes is decoded by protoc against Perfetto's published schema
// (tests/data/perfetto/perfetto_trace.proto), and the decoded events, counted per
// rank and record kind, must be exactly the timeline's records.
#include "aon/export/perfetto_trace.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "aon/merge/inspect.h"
#include "aon/merge/merge.h"
#include "export_test_util.h"
#include "merge_test_util.h"
#include "skip_or_fail.h"

namespace aon::merge {
namespace {

using testing::RankTrace;
using testing::TempDir;
using testing_export::CountsOnly;
using testing_export::TimelineCounts;

const std::string kProtoDir = std::string(AON_SOURCE_DIR) + "/tests/data/perfetto";

// Reads protoc's text output of Trace messages (one file per argument, in
// order): checks that each file stands alone (interning cleared by its first
// packet, every track described before use, begins and ends balanced, no field
// protoc did not know) and counts the events per (pid, record kind).
constexpr const char* kCountDecoded = R"PY(
import collections, sys
KINDS = {"kernel": "kernels", "memcpy": "memcpy", "memset": "memset", "sync": "sync",
         "cuda_runtime": "api", "cuda_driver": "api", "nccl": "nccl", "steps": "steps",
         "ops": "ops", "host_samples": "host_samples"}
def parse(text):
    root = []; stack = [root]
    for line in text.splitlines():
        line = line.strip()
        if not line: continue
        if line == "}": stack.pop(); continue
        if line.endswith(" {"):
            m = []; stack[-1].append((line[:-2], m)); stack.append(m); continue
        k, v = line.split(": ", 1)
        stack[-1].append((k, v))
    return root
def all_of(m, k): return [v for kk, v in m if kk == k]
def one(m, k, default=None):
    v = all_of(m, k)
    return v[0] if v else default
def unquote(q):
    """protoc's text form of a string (C escapes, octal for other bytes) -> bytes"""
    s = q[1:-1]; out = bytearray(); i = 0
    while i < len(s):
        if s[i] != "\\": out += s[i].encode("utf-8"); i += 1; continue
        n = s[i + 1]
        if n in "01234567":
            j = i + 1
            while j < len(s) and j < i + 4 and s[j] in "01234567": j += 1
            out.append(int(s[i + 1:j], 8)); i = j; continue
        out += {"n": b"\n", "t": b"\t", "r": b"\r"}.get(n, n.encode("utf-8")); i += 2
    return bytes(out)
named = collections.Counter()
counts = collections.Counter(); flows_out = collections.Counter(); flows_in = collections.Counter()
problems = collections.Counter(); pids = set(); events_per_file = []
stacks_read = collections.Counter(); frame_kinds = collections.Counter(); counter_units = {}
for path in sys.argv[1:]:
    text = open(path, encoding="utf-8", errors="replace").read()
    for line in text.splitlines():
        if line.strip().split(":")[0].split(" ")[0].isdigit(): problems["unknown_field"] += 1
    cats = {}; pid_of = {}; parent = {}; open_slices = collections.Counter(); events = 0
    packets = parse(text)
    for i, (key, p) in enumerate(packets):
        if key != "packet": problems["not_a_packet"] += 1; continue
        flags = int(one(p, "sequence_flags", "0"))
        if i == 0 and not flags & 1: problems["first_packet_not_cleared"] += 1
        if flags & 1:
            cats = {}; names = {}; arg_names = {}; strs = collections.defaultdict(dict)
            maps = {}; frames = {}; stacks = {}
        for d in all_of(p, "interned_data"):
            for c in all_of(d, "event_categories"): cats[one(c, "iid")] = one(c, "name").strip('"')
            for c in all_of(d, "event_names"): names[one(c, "iid")] = unquote(one(c, "name"))
            for c in all_of(d, "debug_annotation_names"): arg_names[one(c, "iid")] = unquote(one(c, "name"))
            for t in ("function_names", "source_paths", "mapping_paths"):
                for c in all_of(d, t): strs[t][one(c, "iid")] = unquote(one(c, "str"))
            for c in all_of(d, "mappings"): maps[one(c, "iid")] = strs["mapping_paths"][one(c, "path_string_ids")]
            for c in all_of(d, "frames"):
                frames[one(c, "iid")] = c; frame_kinds[one(c, "kind", "KIND_UNKNOWN")] += 1
            for c in all_of(d, "callstacks"): stacks[one(c, "iid")] = all_of(c, "frame_ids")
        td = one(p, "track_descriptor")
        if td is not None:
            uuid = one(td, "uuid"); proc = one(td, "process"); thr = one(td, "thread")
            if proc is not None: pid_of[uuid] = int(one(proc, "pid")); pids.add(pid_of[uuid])
            elif thr is not None: pid_of[uuid] = int(one(thr, "pid"))
            else: parent[uuid] = one(td, "parent_uuid")
            ctr = one(td, "counter")
            if ctr is not None:
                name = unquote(one(td, "name", '""')).decode("utf-8", "replace")
                unit = unquote(one(ctr, "unit_name", '""')).decode("utf-8", "replace")
                counter_units[name] = unit
                want = "%" if name.endswith("_pct") else "MiB/s" if name.endswith("_mib_per_s") else ""
                if unit != want: problems["counter_unit_wrong"] += 1
        te = one(p, "track_event")
        if te is None: continue
        track = one(te, "track_uuid"); t = one(te, "type")
        if track in parent: track = parent[track]
        if track not in pid_of: problems["undescribed_track"] += 1; continue
        pid = pid_of[track]
        if t == "TYPE_SLICE_END": open_slices[one(te, "track_uuid")] -= 1; continue
        if t == "TYPE_SLICE_BEGIN": open_slices[one(te, "track_uuid")] += 1
        if one(p, "timestamp") is None: problems["no_timestamp"] += 1
        events += 1
        if t == "TYPE_COUNTER": counts[(pid, "counters")] += 1; continue
        cat = cats.get(one(te, "category_iids"))
        if cat is None: problems["unknown_category"] += 1; continue
        kind = "nvtx" if cat.startswith(("nvtx:", "compile:")) else KINDS.get(cat, "?" + cat)
        counts[(pid, kind)] += 1
        if kind == "host_samples":
            # The callstack must read back as the stack argument, frame for frame.
            want = None
            for a in all_of(te, "debug_annotations"):
                if arg_names.get(one(a, "name_iid")) == b"stack": want = unquote(one(a, "string_value", '""'))
            cs = one(te, "callstack_iid")
            if want == b"":
                if cs is not None: problems["callstack_for_empty_stack"] += 1
            elif cs is None or cs not in stacks: problems["host_sample_without_callstack"] += 1
            else:
                text = []
                for fid in stacks[cs]:
                    fr = frames.get(fid)
                    if fr is None or maps.get(one(fr, "mapping_id")) is None: problems["bad_frame"] += 1; continue
                    fn = strs["function_names"][one(fr, "function_name_id")]
                    k = one(fr, "kind", "KIND_UNKNOWN")
                    if k == "KIND_INTERPRETED":
                        line = one(fr, "line_number")
                        fn = fn + b" (" + strs["source_paths"][one(fr, "source_path_iid")] + (b":" + line.encode() if line else b"") + b")"
                    elif k == "KIND_NATIVE":
                        m = maps[one(fr, "mapping_id")]
                        fn = b"[native] " + fn + (b" (" + m + b")" if m != b"[unknown module]" else b"")
                    text.append(fn)
                if b"\n".join(text) == want: stacks_read["equal"] += 1
                else: problems["callstack_differs"] += 1
            if want == b"": stacks_read["empty"] += 1
        if kind in ("kernels", "api", "ops"):
            name = names.get(one(te, "name_iid"))
            if name is None: problems["unknown_name"] += 1
            else: named[(pid, kind, name.hex())] += 1
        for f in all_of(te, "flow_ids"): flows_out[f] += 1
        for f in all_of(te, "terminating_flow_ids"): flows_in[f] += 1
    problems["unbalanced_tracks"] += sum(1 for v in open_slices.values() if v != 0)
    events_per_file.append(events)
for (pid, kind), n in sorted(counts.items()): print("count/%d/%s\t%d" % (pid, kind, n))
for (pid, kind, name), n in sorted(named.items()): print("name/%d/%s/%s\t%d" % (pid, kind, name, n))
for k, n in sorted(problems.items()): print("problem/%s\t%d" % (k, n))
print("problems\t%d" % sum(problems.values()))
print("callstacks_equal\t%d" % stacks_read["equal"])
print("callstacks_empty\t%d" % stacks_read["empty"])
for k, n in sorted(frame_kinds.items()): print("frame_kinds/%s\t%d" % (k, n))
for k, u in sorted(counter_units.items()): print("counter_unit/%s\t%s" % (k, u))
print("pids\t" + ",".join(str(p) for p in sorted(pids)))
print("events_per_file\t" + ",".join(str(e) for e in events_per_file))
print("flows_linked\t%d" % sum(1 for f in flows_out if flows_in[f] > 0))
print("flow_chains_of_3\t%d" % sum(1 for f, n in flows_out.items() if n == 3 and flows_in[f] == 0))
)PY";

// Decodes every file with protoc (failing the test on any protoc error) and
// counts what they hold (kCountDecoded).
std::map<std::string, std::string> DecodeAndCount(const TempDir& dir,
                                                  const std::vector<std::string>& files) {
  std::vector<std::string> texts;
  for (const std::string& file : files) {
    // In a subshell: RunCommand redirects the command's own output.
    const std::string raw = file + ".pb", text = file + ".txt";
    // Compressed packets inflated in place, as trace_processor does; each
    // stays under Perfetto's 512 KB, and nothing is left uncompressed.
    const std::map<std::string, std::string> framing =
        testing::RunPython(dir, testing::ReadFile(kProtoDir + "/inflate_packets.py"), {file, raw});
    EXPECT_GT(std::stoull(framing.count("compressed") ? framing.at("compressed") : "0"), 0u)
        << file;
    EXPECT_LT(std::stoull(framing.count("largest") ? framing.at("largest") : "0"), 512u * 1000)
        << file;
    EXPECT_EQ(framing.count("plain") ? framing.at("plain") : "", "0") << file;
    const testing::CommandResult r = testing::RunCommand(
        dir, "('" + std::string(AON_PROTOC) + "' --decode=perfetto.protos.Trace -I '" + kProtoDir +
                 "' '" + kProtoDir + "/perfetto_trace.proto' < '" + raw + "' > '" + text + "')");
    EXPECT_EQ(r.exit_code, 0) << file << ": " << r.err;
    EXPECT_EQ(r.err, "") << file;
    texts.push_back(text);
  }
  return testing::RunPython(dir, kCountDecoded, texts);
}

uint64_t FileSize(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return static_cast<uint64_t>(st.st_size);
}

std::vector<std::string> Paths(const std::vector<PerfettoFileInfo>& files) {
  std::vector<std::string> paths;
  for (const PerfettoFileInfo& f : files) paths.push_back(f.path);
  return paths;
}

// The "name/..." entries of a decoder's output.
std::map<std::string, std::string> NamesOnly(const std::map<std::string, std::string>& m) {
  std::map<std::string, std::string> names;
  for (const auto& [k, v] : m) {
    if (k.rfind("name/", 0) == 0) names[k] = v;
  }
  return names;
}

std::string Hex(const std::string& s) {
  static const char* kDigits = "0123456789abcdef";
  std::string h;
  for (unsigned char c : s) {
    h += kDigits[c >> 4];
    h += kDigits[c & 15];
  }
  return h;
}

// What NamesOnly must find for MergeRandomJobIn(dir, ranks, max_records, seed):
// the same random ranks again, each kernel, CUDA call and operator counted by
// (rank, kind, name), with the names the export gives unnamed ones.
std::map<std::string, std::string> ExpectedNames(int ranks, size_t max_records, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::map<std::string, uint64_t> n;
  for (const testing::RankTrace& t : testing::RandomJob(rng, ranks, max_records, true)) {
    const std::string at = "name/" + std::to_string(t.meta.rank) + "/";
    auto add = [&](const char* kind, uint32_t id, const char* unnamed) {
      const std::string& name = t.strings.Get(id);
      ++n[at + kind + "/" + Hex(name.empty() ? unnamed : name)];
    };
    for (const KernelRecord& r : t.Get<KernelRecord>()) add("kernels", r.name_id, "kernel");
    for (const ApiRecord& r : t.Get<ApiRecord>()) add("api", r.name_id, "cuda api");
    for (const OpRecord& r : t.Get<OpRecord>()) add("ops", r.name_id, "op");
  }
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : n) out[k] = std::to_string(v);
  return out;
}

class PerfettoTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(AON_PROTOC).empty()) {
      AON_SKIP_OR_FAIL(<< "protoc is not installed (scripts/install-deps.sh --test installs "
                          "protobuf-compiler)");
    }
  }
  // A random job of `ranks` ranks, merged; returns the timeline's path.
  std::string MergeRandomJob(int ranks, size_t max_records, uint64_t seed) {
    return testing_export::MergeRandomJobIn(dir_.path(), ranks, max_records, seed);
  }
  TempDir dir_;
};

TEST_F(PerfettoTrace, DecodesAndHoldsEveryRecordOfEveryRankAndKind) {
  const std::string timeline = MergeRandomJob(4, 300, 5);
  PerfettoTraceStats stats;
  AON_ASSERT_OK(ExportPerfettoTrace(timeline, dir_.File("t.pftrace"), {}, &stats));
  ASSERT_EQ(stats.files.size(), 1u);
  EXPECT_EQ(stats.files[0].path, dir_.File("t.pftrace"));
  EXPECT_EQ(stats.index_path, dir_.File("t.index.json"));

  auto decoded = DecodeAndCount(dir_, Paths(stats.files));
  EXPECT_EQ(decoded["problems"], "0");
  EXPECT_EQ(decoded["pids"], "0,1,2,3");
  const auto expected = TimelineCounts(timeline);
  EXPECT_GE(expected.size(), 4u * 9u);  // every exported kind on every rank
  EXPECT_EQ(CountsOnly(decoded), expected);
  // Every kernel, call and operator carries its own name (interned by string id).
  const auto names = ExpectedNames(4, 300, 5);
  EXPECT_FALSE(names.empty());
  EXPECT_EQ(NamesOnly(decoded), names);
  uint64_t records = 0;
  for (const auto& [k, v] : expected) records += std::stoull(v);
  EXPECT_EQ(stats.records, records);
  EXPECT_EQ(stats.events, records);
  EXPECT_EQ(decoded["events_per_file"], std::to_string(records));
  EXPECT_EQ(stats.files[0].bytes, FileSize(stats.files[0].path));
  // Every host sample with a stack carries it as a callstack that reads back
  // as the same frames (no "callstack_differs" problem above).
  uint64_t samples = 0;
  for (const auto& [k, v] : expected) {
    if (k.size() > 13 && k.compare(k.size() - 13, 13, "/host_samples") == 0)
      samples += std::stoull(v);
  }
  EXPECT_GT(std::stoull(decoded["callstacks_equal"]), 0u);
  EXPECT_EQ(std::stoull(decoded["callstacks_equal"]) + std::stoull(decoded["callstacks_empty"]),
            samples);
}

// Host samples as the sampler writes their stacks (docs/host-sampling.md):
// Python frames, native frames with and without a module, text of no known
// form. Each sample's callstack reads back as its stack, frame for frame; its
// frames are interned once per file, by kind.
TEST_F(PerfettoTrace, HostSamplesCarryTheirStacksAsCallstacks) {
  const std::vector<std::string>& stacks = testing_export::PlantedHostStacks();
  const int rounds = 7;
  testing_export::WriteHostSampleJob(dir_.path(), rounds);
  const std::string timeline = testing_export::MergeJobIn(dir_.path());
  PerfettoTraceStats stats;
  AON_ASSERT_OK(ExportPerfettoTrace(timeline, dir_.File("t.pftrace"), {}, &stats));
  auto decoded = DecodeAndCount(dir_, Paths(stats.files));
  EXPECT_EQ(decoded["problems"], "0");
  EXPECT_EQ(decoded["count/0/host_samples"], std::to_string(rounds * stacks.size()));
  EXPECT_EQ(decoded["callstacks_equal"], std::to_string(rounds * (stacks.size() - 1)));
  EXPECT_EQ(decoded["callstacks_empty"], std::to_string(rounds));
  // Distinct frames: 4 Python ("g (y.py)" one without a line; <module> and
  // main shared by two stacks), 3 native, 2 as text: "odd frame ..." and
  // "f (x.py:007)" (its line would not read back the same).
  EXPECT_EQ(decoded["frame_kinds/KIND_INTERPRETED"], "4");
  EXPECT_EQ(decoded["frame_kinds/KIND_NATIVE"], "3");
  EXPECT_EQ(decoded["frame_kinds/KIND_UNKNOWN"], "2");
}

// Counter tracks carry their metric's unit (CounterDescriptor.unit_name):
// percents for the "_pct" metrics, MiB/s for the link rates.
TEST_F(PerfettoTrace, CounterTracksSayTheirUnit) {
  testing::RankTrace t;
  t.meta = testing::BasicMetadata(0, 1);
  for (uint16_t metric : {uint16_t{2}, uint16_t{10}}) {  // sm_active_pct, pcie_tx_mib_per_s
    for (uint64_t i = 0; i < 5; ++i) {
      CounterRecord c{};
      c.start_ns = testing::kBaseNs + i * 1000;
      c.end_ns = c.start_ns + 1000;
      c.value = 42.0 + static_cast<double>(i);
      c.metric = metric;
      c.source = static_cast<uint8_t>(CounterSource::kGpm);
      t.Get<CounterRecord>().push_back(c);
    }
  }
  testing::WriteJob(dir_.path(), {t});
  const std::string timeline = testing_export::MergeJobIn(dir_.path());
  PerfettoTraceStats stats;
  AON_ASSERT_OK(ExportPerfettoTrace(timeline, dir_.File("t.pftrace"), {}, &stats));
  auto decoded = DecodeAndCount(dir_, Paths(stats.files));
  EXPECT_EQ(decoded["problems"], "0");
  EXPECT_EQ(decoded["count/0/counters"], "10");
  EXPECT_EQ(decoded["counter_unit/GPU 0 sm_active_pct"], "%");
  EXPECT_EQ(decoded["counter_unit/GPU 0 pcie_tx_mib_per_s"], "MiB/s");
}

TEST_F(PerfettoTrace, CorruptRankIsLeftOutAndEveryOtherRankCounted) {
  std::mt19937_64 rng(8);
  testing::WriteJob(dir_.path(), testing::RandomJob(rng, 3, 200));
  {
    std::ofstream out(testing::RankPath(dir_.path(), 1), std::ios::binary | std::ios::trunc);
    out << "this is not an HDF5 file";
  }
  MergeOptions options;
  options.job_dir = dir_.path();
  MergeReport report;
  AON_ASSERT_OK(MergeJob(options, &report));
  ASSERT_EQ(report.ranks[1].status, RankStatus::kCorrupt);

  PerfettoTraceStats stats;
  AON_ASSERT_OK(ExportPerfettoTrace(report.timeline_path, dir_.File("trace.pftrace"), {}, &stats));
  auto decoded = DecodeAndCount(dir_, Paths(stats.files));
  EXPECT_EQ(decoded["problems"], "0");
  EXPECT_EQ(decoded["pids"], "0,2");
  const auto expected = TimelineCounts(report.timeline_path);
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(CountsOnly(decoded), expected);
}

// A small limit splits the trace by time; every file is under it and decodes on
// its own; the counts over all files stay exact; the index lists the files.
TEST_F(PerfettoTrace, SplitsByTimeUnderASmallLimitWithExactCounts) {
  const std::string timeline = MergeRandomJob(4, 400, 11);
  PerfettoExportOptions options;
  options.max_file_bytes = 64 << 10;
  options.threads = 3;
  const std::string path = dir_.File("trace.pftrace");
  PerfettoTraceStats stats;
  AON_ASSERT_OK(ExportPerfettoTrace(timeline, path, options, &stats));
  ASSERT_GE(stats.files.size(), 4u);
  std::printf("split: %zu files of at most %llu bytes\n", stats.files.size(),
              static_cast<unsigned long long>(options.max_file_bytes));
  uint64_t events = 0;
  for (size_t i = 0; i < stats.files.size(); ++i) {
    const PerfettoFileInfo& f = stats.files[i];
    EXPECT_EQ(f.path, PerfettoPartPath(path, i));
    EXPECT_EQ(f.bytes, FileSize(f.path)) << f.path;
    EXPECT_LE(f.bytes, options.max_file_bytes) << f.path;
    EXPECT_GT(f.events, 0u) << f.path;
    EXPECT_LE(f.first_ns, f.last_ns) << f.path;
    if (i > 0) {
      EXPECT_LE(stats.files[i - 1].last_ns, f.first_ns) << f.path;  // by time
    }
    events += f.events;
  }
  EXPECT_EQ(PerfettoPartPath(path, 2), dir_.File("trace.00002.pftrace"));
  EXPECT_EQ(events, stats.events);

  auto decoded = DecodeAndCount(dir_, Paths(stats.files));
  EXPECT_EQ(decoded["problems"], "0");
  EXPECT_EQ(CountsOnly(decoded), TimelineCounts(timeline));
  // Names stay right across files (each file interns afresh).
  EXPECT_EQ(NamesOnly(decoded), ExpectedNames(4, 400, 11));
  std::string per_file;
  for (const PerfettoFileInfo& f : stats.files) {
    per_file += (per_file.empty() ? "" : ",") + std::to_string(f.events);
  }
  EXPECT_EQ(decoded["events_per_file"], per_file);

  auto index = testing::FlattenJsonFile(dir_, dir_.File("trace.index.json"));
  EXPECT_EQ(index["events"], std::to_string(stats.events));
  EXPECT_EQ(index["max_file_bytes"], std::to_string(options.max_file_bytes));
  for (size_t i = 0; i < stats.files.size(); ++i) {
    const std::string at = "files/" + std::to_string(i) + "/";
    const std::string name = stats.files[i].path.substr(dir_.path().size() + 1);
    EXPECT_EQ(index[at + "file"], "\"" + name + "\"");
    EXPECT_EQ(index[at + "bytes"], std::to_string(stats.files[i].bytes));
    EXPECT_EQ(index[at + "first_ns"], std::to_string(stats.files[i].first_ns));
  }
  EXPECT_EQ(index.count("files/" + std::to_string(stats.files.size()) + "/file"), 0u);

  // Where files split depends on the trace alone, not on how fast the
  // compressing threads kept up, nor on how many there were: exported again
  // with one, every file is the same, byte for byte.
  {
    options.threads = 1;
    auto bytes = [](const std::string& file) {
      std::ifstream in(file, std::ios::binary);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    std::vector<std::string> first;
    for (const PerfettoFileInfo& f : stats.files) first.push_back(bytes(f.path));
    PerfettoTraceStats again;
    AON_ASSERT_OK(ExportPerfettoTrace(timeline, path, options, &again));
    ASSERT_EQ(again.files.size(), first.size());
    for (size_t i = 0; i < first.size(); ++i)
      EXPECT_TRUE(bytes(again.files[i].path) == first[i]) << again.files[i].path;
  }

  // Exported again in fewer files: the older parts beyond them are removed.
  const size_t before = stats.files.size();
  options.max_file_bytes = 1 << 30;
  AON_ASSERT_OK(ExportPerfettoTrace(timeline, path, options, &stats));
  ASSERT_EQ(stats.files.size(), 1u);
  for (size_t i = 1; i < before; ++i) {
    struct stat st {};
    EXPECT_NE(stat(PerfettoPartPath(path, i).c_str(), &st), 0) << PerfettoPartPath(path, i);
  }
  EXPECT_EQ(CountsOnly(DecodeAndCount(dir_, Paths(stats.files))), TimelineCounts(timeline));
}

// An API call's flow ends at its kernel; one collective's instances on three
// ranks (communicator, sequence number) are chained.
TEST_F(PerfettoTrace, FlowsLinkLaunchesToKernelsAndOneCollectiveAcrossRanks) {
  constexpr uint64_t kBase = 1'000'000'000;
  std::vector<RankTrace> traces;
  for (int r = 0; r < 3; ++r) {
    RankTrace t;
    t.meta = testing::BasicMetadata(r, 3);
    const uint32_t name = t.strings.Intern("cudaLaunchKernel");
    const uint32_t func = t.strings.Intern("AllReduce");
    ApiRecord api{};
    api.start_ns = kBase + 100;
    api.end_ns = kBase + 200;
    api.correlation_id = 7;
    api.name_id = name;
    t.Get<ApiRecord>().push_back(api);
    t.Get<KernelRecord>().push_back(testing::MakeKernel(kBase + 300, 7));
    NcclRecord coll{};
    coll.event_type = static_cast<uint8_t>(NcclEventType::kColl);
    coll.start_ns = kBase + 400 + 10 * r;
    coll.end_ns = kBase + 900;
    coll.comm_hash = 0xabcdef;
    coll.seq_number = 5;
    coll.func_id = func;
    coll.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kCalibrated);
    t.Get<NcclRecord>().push_back(coll);
    traces.push_back(std::move(t));
  }
  testing::WriteJob(dir_.path(), traces);
  MergeOptions options;
  options.job_dir = dir_.path();
  MergeReport report;
  AON_ASSERT_OK(MergeJob(options, &report));
  PerfettoTraceStats stats;
  AON_ASSERT_OK(ExportPerfettoTrace(report.timeline_path, dir_.File("trace.pftrace"), {}, &stats));
  EXPECT_EQ(stats.flows, 3u);
  auto decoded = DecodeAndCount(dir_, Paths(stats.files));
  EXPECT_EQ(decoded["problems"], "0");
  EXPECT_EQ(decoded["flows_linked"], "3");      // one launch -> kernel arrow per rank
  EXPECT_EQ(decoded["flow_chains_of_3"], "1");  // the collective, through its 3 instances
}

// aon-merge writes the Perfetto trace by default (with trace.json while small);
// aon-export --format perfetto writes a part of the run under its own name.
TEST_F(PerfettoTrace, MergeWritesItByDefaultAndExportSelectsRanks) {
  std::mt19937_64 rng(23);
  testing::WriteJob(dir_.path(), testing::RandomJob(rng, 3, 100));
  const std::string bin = AON_BUILD_BIN_DIR;
  auto merged = testing::RunCommand(dir_, bin + "/aon-merge '" + dir_.path() + "'");
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_TRUE(testing::Contains(merged.out, "perfetto trace: " + dir_.File("trace.pftrace") +
                                                " (index " + dir_.File("trace.index.json") + ")"))
      << merged.out;
  const std::string timeline = dir_.File("timeline.h5");
  EXPECT_EQ(CountsOnly(DecodeAndCount(dir_, {dir_.File("trace.pftrace")})),
            TimelineCounts(timeline));
  EXPECT_GT(FileSize(dir_.File("trace.json")), 0u);

  auto exported =
      testing::RunCommand(dir_, bin + "/aon-export '" + timeline + "' --format perfetto --ranks 1");
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  const std::string part = dir_.File("trace-ranks1.pftrace");
  auto decoded = DecodeAndCount(dir_, {part});
  EXPECT_EQ(decoded["pids"], "1");
  EXPECT_EQ(CountsOnly(decoded), TimelineCounts(timeline, {1}));
  EXPECT_GT(FileSize(dir_.File("trace-ranks1.index.json")), 0u);

  auto bad = testing::RunCommand(dir_, bin + "/aon-export '" + timeline + "' --format xml");
  EXPECT_EQ(bad.exit_code, 2);
}

}  // namespace
}  // namespace aon::merge
