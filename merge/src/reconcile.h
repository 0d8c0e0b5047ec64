// Which candidate gives each rank, and what is wrong with the others: the
// merge's rules about bad input, as one pure function (no I/O, no processes),
// so that every process decides the same from the same candidates.
//
// The rules:
//  - Expected ranks are 0..world_size-1, world_size the largest any readable
//    file implies (its rank + 1, or the world_size its metadata says, unless
//    implausible: > kMaxWorldSize). With no readable file, the ranks the bad final files
//    claim size the table, so that they can be reported.
//  - Readable files claim their rank (by metadata) in candidate order: final
//    files by path, then .partial files by path. A later final file of a taken
//    rank is a duplicate (skipped); a later .partial file is superseded.
//  - A file whose name says another rank than its metadata is merged as its
//    metadata's rank, with a problem line.
//  - A final file of a process that ended without finishing (metadata
//    truncated), and a salvaged .partial file, make the rank truncated.
//  - An unreadable file (corrupt, truncated, unsupported) describes a rank no
//    readable file gives; otherwise it is only named in a problem line.
//  - A .partial file that is not merged (not opened, superseded, unreadable)
//    is "incomplete (rank still running or crashed before writing)".
//  - Every rank left without a file is missing.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aon/merge/merge_types.h"
#include "candidate.h"

namespace aon::merge {

// A world_size (or rank) beyond this is treated as corrupt metadata rather than
// a reason to allocate a row per rank. 2^18 = 262,144 ranks, 2.6x the largest
// GPU jobs reported (about 100,000 GPUs); raise it when jobs grow. Each
// expected rank costs the merge about 1 KB and 20 us even without a file (a
// row, its message, its problem line): one rank file claiming 2^22 ranks,
// the bound before, made aon-merge take 105 s and 3.4 GB (found by fuzzing
// the merge of a rank file, docs/fuzzing.md); 2^18 ranks take 5 s.
inline constexpr int64_t kMaxWorldSize = int64_t{1} << 18;

inline constexpr const char* kIncompleteNote =
    "incomplete (rank still running or crashed before writing)";

// The ranks readable candidates give by their metadata: a .partial file of one
// of them is not opened.
std::set<uint32_t> RanksOfReadableFiles(std::span<const Candidate> candidates);

struct Reconciliation {
  uint32_t world_size = 0;
  // One per expected rank: status, path, message, host, source, dropped. A
  // merged .partial file's message is left for when its last record is known.
  std::vector<RankOutcome> ranks;
  // Per rank: the candidate whose records are merged, if any.
  std::vector<std::optional<size_t>> merged_from;
  // Every problem found so far, in report order: the candidates' open problems,
  // then the decisions above, then the missing ranks.
  std::vector<std::string> problems;

  bool nothing_to_merge() const;
};

// candidates: final files first, then .partial files (OpenedJob's order).
// job_dir names the directory in "missing" messages.
Reconciliation Reconcile(std::string_view job_dir, std::span<const Candidate> candidates);

}  // namespace aon::merge
