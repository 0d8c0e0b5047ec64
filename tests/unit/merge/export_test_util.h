// Helpers of the export tests (Perfetto, OTF2): what a timeline holds per rank
// and record kind, in the "count/<rank>/<kind>" form their decoders print.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "aon/export/export_filter.h"
#include "aon/merge/inspect.h"
#include "aon/merge/merge.h"
#include "merge_test_util.h"

namespace aon::merge::testing_export {

// The timeline's records per rank and exported kind, as "count/<rank>/<kind>"
// (only the ranks in `only` when it is not empty).
inline std::map<std::string, std::string> TimelineCounts(const std::string& timeline,
                                                         const std::vector<uint32_t>& only = {}) {
  auto inspection = InspectFile(timeline);
  EXPECT_TRUE(inspection.ok()) << inspection.status().message();
  std::map<std::string, std::string> counts;
  if (!inspection.ok()) return counts;
  for (const auto& [rank, per_kind] : inspection->per_rank) {
    if (!only.empty() && std::find(only.begin(), only.end(), rank) == only.end()) continue;
    for (size_t k = 0; k < kTimelineKindCount; ++k) {
      if (!IsExportedKind(static_cast<RecordKind>(k)) || per_kind[k] == 0) continue;
      counts["count/" + std::to_string(rank) + "/" + RecordKindName(static_cast<RecordKind>(k))] =
          std::to_string(per_kind[k]);
    }
  }
  return counts;
}

// The "count/..." entries of a decoder's output.
inline std::map<std::string, std::string> CountsOnly(const std::map<std::string, std::string>& m) {
  std::map<std::string, std::string> counts;
  for (const auto& [k, v] : m) {
    if (k.rfind("count/", 0) == 0) counts[k] = v;
  }
  return counts;
}

// Merges the job in `dir`; returns the timeline's path.
inline std::string MergeJobIn(const std::string& dir) {
  MergeOptions options;
  options.job_dir = dir;
  MergeReport report;
  EXPECT_TRUE(MergeJob(options, &report).ok());
  return report.timeline_path;
}

// A random job of `ranks` ranks (random clock offsets) written to `dir` and merged.
inline std::string MergeRandomJobIn(const std::string& dir, int ranks, size_t max_records,
                                    uint64_t seed) {
  std::mt19937_64 rng(seed);
  testing::WriteJob(dir, testing::RandomJob(rng, ranks, max_records, true));
  return MergeJobIn(dir);
}

// Stacks as the host sampler writes them (docs/host-sampling.md): Python
// frames, native frames with and without a module, text of no known form
// (a line that would not read back the same), and an empty stack.
inline const std::vector<std::string>& PlantedHostStacks() {
  static const std::vector<std::string> stacks = {
      "<module> (/home/u/train.py:88)\nmain (/home/u/train.py:80)\n"
      "preprocess (/home/u/train.py:41)\n[native] _PyEval_EvalFrameDefault (libpython3.12.so.1.0)",
      "<module> (/home/u/train.py:88)\nmain (/home/u/train.py:80)\n[native] libfoo.so+0x1f2e",
      "[native] memcpy (libc.so.6)", "odd frame without a form\nf (x.py:007)\ng (y.py)", ""};
  return stacks;
}

// A one-rank job in `dir` whose host samples are `rounds` rounds of every
// PlantedHostStacks() stack, on one thread, in that order.
inline void WriteHostSampleJob(const std::string& dir, int rounds) {
  testing::RankTrace t;
  t.meta = testing::BasicMetadata(0, 1);
  std::vector<uint32_t> ids;
  for (const std::string& st : PlantedHostStacks()) ids.push_back(t.strings.Intern(st));
  const uint32_t thread = t.strings.Intern("python3");
  for (int i = 0; i < rounds; ++i) {
    for (size_t k = 0; k < ids.size(); ++k) {
      HostSampleRecord r{};
      r.start_ns = testing::kBaseNs + static_cast<uint64_t>(i) * 100 + k;
      r.tid = 4242;
      r.stack_id = ids[k];
      r.thread_name_id = thread;
      t.Get<HostSampleRecord>().push_back(r);
    }
  }
  testing::WriteJob(dir, {t});
}

}  // namespace aon::merge::testing_export
