// Helpers of the merge tests: random jobs, a straightforward reference merge to
// compare aon::merge against, and running python3 / the real programs.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "aon/format/records.h"
#include "aon/format/string_table.h"
#include "aon/format/trace_file.h"
#include "aon/merge/merge.h"
#include "aon/merge/merge_exports.h"
#include "trace_test_util.h"

namespace aon::testing {

// The field of `schema` named `name`, or nullptr.
inline const Field* FindField(const TableSchema& schema, std::string_view name) {
  for (const Field& f : schema.fields) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

constexpr uint64_t kBaseNs = 1'000'000'000'000;  // far from 0: negative offsets never clamp

struct RandomTraceOptions {
  size_t max_records = 100;  // per kind; each kind gets a random count in [0, max]
  bool random_offset = false;
  bool force_empty = false;
};

inline const std::vector<std::string>& SharedNames() {
  static const std::vector<std::string> names = {"void gemm<float>(float const*, float*)",
                                                 "relu_kernel",
                                                 "allreduce_ring",
                                                 "cudaLaunchKernel",
                                                 "cudaMemcpyAsync",
                                                 "forward",
                                                 "backward",
                                                 "optimizer.step",
                                                 "ncclDevKernel_AllReduce",
                                                 "Ring",
                                                 "Simple",
                                                 "float32",
                                                 "AllReduce",
                                                 "NVIDIA H200",
                                                 "GPU-0000"};
  return names;
}

// A rank with random records of every kind. String-id fields point into the
// rank's own table, which lists the shared names in a rank-specific order (so
// the same text has different ids in different ranks) plus names of its own.
// Start times fall in a narrow window, so equal starts within and across ranks
// are common; records are not sorted.
inline RankTrace RandomRankTrace(std::mt19937_64& rng, int rank, int world,
                                 const RandomTraceOptions& options) {
  RankTrace t;
  t.meta = BasicMetadata(rank, world);
  if (options.random_offset) {
    t.meta.clock_offset_ns = static_cast<int64_t>(rng() % 2'000'001) - 1'000'000;
  }
  std::vector<std::string> names = SharedNames();
  std::shuffle(names.begin(), names.end(), rng);
  names.push_back("only_on_rank_" + std::to_string(rank));
  for (const std::string& n : names) t.strings.Intern(n);
  const uint64_t n_strings = t.strings.size();
  for (size_t k = 0; k < kRecordKindCount; ++k) t.meta.dropped[k] = rng() % 3;

  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    const size_t n = options.force_empty ? 0 : rng() % (options.max_records + 1);
    const uint64_t spread = std::max<uint64_t>(1, n / 3);
    const TableSchema& schema = RecordTraits<T>::Schema();
    const Field* start = FindField(schema, "start_ns");
    const Field* end = FindField(schema, "end_ns");
    auto& v = t.Get<T>();
    for (size_t i = 0; i < n; ++i) {
      T r = RandomRecord<T>(rng);
      for (const Field& f : schema.fields) {
        if (IsStringField(f.name)) SetField(&r, f, rng() % n_strings);
      }
      if (start != nullptr) {
        const uint64_t s = kBaseNs + rng() % spread;
        SetField(&r, *start, s);
        if (end != nullptr) SetField(&r, *end, s + rng() % 5000);  // instants have none
      }
      if constexpr (std::is_same_v<T, NcclRecord>) {
        // As an agent that resolved at exit wrote them: no raw GPU times, every
        // operation tied to a kernel (the merge leaves such records as they are).
        if (r.gpu_timing == static_cast<uint8_t>(NcclGpuTiming::kRaw)) {
          r.gpu_timing = static_cast<uint8_t>(NcclGpuTiming::kCalibrated);
        }
        if (r.correlation_id == 0) r.correlation_id = 1;
        // ... and no CUDA-graph bookkeeping rows (event types 6-8, records.h):
        // the merge consumes those, a resolved file has none.
        if (r.event_type >= 6 &&  // format 1.3 bookkeeping rows: records.h
            r.event_type <= 8) {
          r.event_type = 4;  // unused by AON: copied as it is
        }
      }
      v.push_back(r);
    }
  });
  for (uint32_t d = 0; d < 2; ++d) {
    t.meta.devices.push_back(
        DeviceInfo{d, t.strings.Intern("GPU-" + std::to_string(rank) + "-" + std::to_string(d)),
                   t.strings.Intern("NVIDIA H200"), 132, 150ull << 30, 9, 0, 5, 16});
  }
  return t;
}

inline KernelRecord MakeKernel(uint64_t start, uint32_t correlation = 0, uint32_t name_id = 0) {
  KernelRecord k{};
  k.start_ns = start;
  k.end_ns = start + 10;
  k.correlation_id = correlation;
  k.name_id = name_id;
  return k;
}

inline uint64_t StartField(const TableSchema& schema, const void* r) {
  const Field* f = FindField(schema, "start_ns");
  return f == nullptr ? 0 : GetField(r, *f);
}

// A record of the reference merge: string fields replaced by their text.
template <typename T>
struct RefRecord {
  uint32_t rank;
  T record;  // string fields zeroed, timestamps shifted
  std::vector<std::string> strings;
};

// Concatenate every rank (in rank order), shift clocks, replace strings by
// value, stable sort by (start, rank): the merge's contract, computed the
// simplest way.
template <typename T>
std::vector<RefRecord<T>> ReferenceMerge(const std::map<uint32_t, const RankTrace*>& ranks) {
  const TableSchema& schema = RecordTraits<T>::Schema();
  std::vector<RefRecord<T>> all;
  for (const auto& [rank, trace] : ranks) {
    for (const T& r : trace->template Get<T>()) {
      RefRecord<T> x{rank, r, {}};
      for (const Field& f : schema.fields) {
        if (IsStringField(f.name)) {
          x.strings.push_back(trace->strings.Get(static_cast<uint32_t>(GetField(&r, f))));
          SetField(&x.record, f, 0);
        } else if (std::string_view(f.name) == "start_ns" || std::string_view(f.name) == "end_ns") {
          SetField(&x.record, f,
                   GetField(&r, f) + static_cast<uint64_t>(trace->meta.clock_offset_ns));
        } else if (std::string_view(f.name) == "gpu_start_ns" && GetField(&r, f) != 0) {
          // NCCL's GPU start is a time too (0 = none, kept as is).
          SetField(&x.record, f,
                   GetField(&r, f) + static_cast<uint64_t>(trace->meta.clock_offset_ns));
        }
      }
      all.push_back(std::move(x));
    }
  }
  std::stable_sort(all.begin(), all.end(), [&](const RefRecord<T>& a, const RefRecord<T>& b) {
    const uint64_t sa = StartField(schema, &a.record), sb = StartField(schema, &b.record);
    return sa != sb ? sa < sb : a.rank < b.rank;
  });
  return all;
}

// Checks the timeline's T table against the reference, record by record.
template <typename T>
void ExpectMatchesReference(const TraceReader& timeline, const StringTable& strings,
                            const std::vector<RefRecord<T>>& ref) {
  SCOPED_TRACE(std::string("kind ") + RecordKindName(RecordTraits<T>::kKind));
  auto got = timeline.template ReadAllMerged<T>();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), ref.size());
  const TableSchema& schema = RecordTraits<T>::Schema();
  for (size_t i = 0; i < ref.size(); ++i) {
    const Merged<T>& m = (*got)[i];
    ASSERT_EQ(m.rank, ref[i].rank) << "record " << i;
    T copy = m.record;
    size_t s = 0;
    for (const Field& f : schema.fields) {
      if (!IsStringField(f.name)) continue;
      ASSERT_EQ(strings.Get(static_cast<uint32_t>(GetField(&copy, f))), ref[i].strings[s++])
          << "record " << i << " field " << f.name;
      SetField(&copy, f, 0);
    }
    ASSERT_TRUE(FieldsEqual(schema, &ref[i].record, &copy)) << "record " << i;
  }
}

// ---- Processes ------------------------------------------------------------------

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `command` through the shell with stdout/stderr captured in files of `dir`.
inline CommandResult RunCommand(const TempDir& dir, const std::string& command) {
  static int n = 0;
  const std::string out = dir.File("cmd" + std::to_string(n) + ".out");
  const std::string err = dir.File("cmd" + std::to_string(n++) + ".err");
  const int status = std::system((command + " >" + out + " 2>" + err).c_str());
  CommandResult r;
  r.exit_code = (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

// Runs a python3 script (text) on `args`; parses "key<TAB>value" lines of its
// output into a map. A script failure (invalid JSON, ...) fails the test.
inline std::map<std::string, std::string> RunPython(const TempDir& dir, const std::string& script,
                                                    const std::vector<std::string>& args) {
  static int n = 0;
  const std::string path = dir.File("check" + std::to_string(n++) + ".py");
  std::ofstream(path) << script;
  std::string command = "python3 " + path;
  for (const std::string& a : args) command += " '" + a + "'";
  CommandResult r = RunCommand(dir, command);
  EXPECT_EQ(r.exit_code, 0) << "python3 failed:\n" << r.err;
  std::map<std::string, std::string> values;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) values[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return values;
}

// Flattens a JSON document into "a/b/0/c<TAB><json value>" lines: the strict
// parse is the validity check, the lines let tests look up any field.
inline constexpr const char* kFlattenJson = R"PY(
import json, sys
def walk(path, v):
    if isinstance(v, dict):
        for k, x in v.items():
            walk(path + [str(k)], x)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            walk(path + [str(i)], x)
    else:
        key = "/".join(path).encode("unicode_escape").decode("ascii")
        print(key + "\t" + json.dumps(v))
with open(sys.argv[1], encoding="utf-8") as f:
    walk([], json.load(f))
)PY";

inline std::map<std::string, std::string> FlattenJsonFile(const TempDir& dir,
                                                          const std::string& path) {
  return RunPython(dir, kFlattenJson, {path});
}

// Writes a job directory: one rank file per entry of `traces` (rank from metadata).
// `ranks` random ranks (RandomRankTrace) of one job: up to max_records per
// kind, random clock offsets or not, every empty_every-th rank (from rank 0)
// without records (0: none).
inline std::vector<RankTrace> RandomJob(std::mt19937_64& rng, int ranks, size_t max_records,
                                        bool offsets = false, int empty_every = 0) {
  std::vector<RankTrace> traces;
  for (int r = 0; r < ranks; ++r) {
    RandomTraceOptions o;
    o.max_records = max_records;
    o.random_offset = offsets;
    o.force_empty = empty_every > 0 && r % empty_every == 0;
    traces.push_back(RandomRankTrace(rng, r, ranks, o));
  }
  return traces;
}

inline void WriteJob(const std::string& dir, const std::vector<RankTrace>& traces) {
  for (const RankTrace& t : traces) {
    AON_ASSERT_OK(WriteRankTrace(RankPath(dir, t.meta.rank), t));
  }
}

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// True if one of the merge's problem lines contains both a and b.
inline bool AnyProblemContains(const merge::MergeReport& report, const std::string& a,
                               const std::string& b = "") {
  for (const std::string& p : report.problems) {
    if (Contains(p, a) && Contains(p, b)) return true;
  }
  return false;
}

// What aon-merge does (merge/tools/aon_merge_main.cc): the exports' paths
// checked, the merge, then the exports made from its timeline.
inline Status MergeAndExport(const merge::MergeOptions& options, merge::MergeExportOptions exports,
                             merge::MergeReport* report) {
  if (Status s = merge::ResolveMergeExports(options, &exports); !s.ok()) return s;
  if (Status s = merge::MergeJob(options, report); !s.ok()) return s;
  return merge::WriteMergeExports(exports, report);
}

inline std::string Problems(const merge::MergeReport& report) {
  std::string s;
  for (const std::string& p : report.problems) s += "  " + p + "\n";
  return s;
}

}  // namespace aon::testing
