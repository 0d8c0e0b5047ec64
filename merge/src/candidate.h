// A candidate: one rank-*.h5 or rank-*.h5.partial file of the job directory,
// and what opening it found. Every merge process holds every candidate: the
// process that opened a file tells the others what it found (OpenResult
// travels as a CandidateSummary, messages.h), so that every process takes the
// same decisions about ranks (reconcile.h). Readers and string tables are not
// here: only the process that opened a file has them (open.h).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aon/format/records.h"
#include "aon/format/trace_format.h"

namespace aon::merge {

// What opening and validating a rank file found.
struct OpenResult {
  RankStatus status = RankStatus::kOk;
  std::string reason;  // why not ok; names the file
  bool meta_read = false;
  RankMetadata meta;  // valid when meta_read
  std::array<bool, kRecordKindCount> has_table{};
  std::array<uint64_t, kRecordKindCount> table_rows{};
  // Found while opening, not fatal (a missing table, no string table yet);
  // reported in candidate order before any decision about ranks.
  std::vector<std::string> open_problems;
  // What a finished file lacks that it should hold (a table): the rank is
  // then merged as damaged, this its message ("" when whole).
  std::string damage;
};

struct Candidate {
  std::string path;
  bool partial = false;  // a .partial file: salvaged only for a rank no final file gives
  std::optional<uint32_t> name_rank;  // from the file name
  int opened_by = -1;                 // the process that opened it; -1: not opened
  OpenResult found;

  bool opened() const { return opened_by >= 0; }
  bool ok() const { return opened() && found.status == RankStatus::kOk; }
  // The rank the file says it holds: its metadata's, else its name's.
  std::optional<uint32_t> claimed_rank() const {
    if (found.meta_read && found.meta.rank >= 0) return static_cast<uint32_t>(found.meta.rank);
    return name_rank;
  }
};

// The merged ranks, in rank order, with the candidate each is merged from.
using MergedRanks = std::vector<std::pair<uint32_t, Candidate*>>;

}  // namespace aon::merge
