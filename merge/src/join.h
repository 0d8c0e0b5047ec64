// Phase 0, join: one rank, one record stream, whatever died (#34).
//
// When a rank's node collector dies while the rank runs, the collector's
// rank-N.h5.partial keeps what it flushed, and the rank writes what its ring
// still held, and everything after, into a file of its own (rank-N.pidP.h5,
// RankMetadata::collector_lost_ns set). JoinSplitRanks writes the two as one
// rank file under the name the collector would have given it (the .partial's
// name less ".partial"): the collector's records first, then the rank's, its
// metadata the rank's with a note that says where each part came from and what
// lies between them unrecorded. The two inputs are kept, renamed with
// ".joined" appended (no longer rank files the merge lists). Records cannot be
// in both: the rank's file begins where the collector stopped reading its ring.
#pragma once

#include <string>
#include <vector>

namespace aon::merge {

struct JoinResult {
  std::vector<std::string> joined;    // one line per rank file written, what it joined
  std::vector<std::string> problems;  // pairs that could not be joined, and why
};

// Joins every such pair in `dir` (as this process sees it). Safe to call from
// several merge processes over one shared directory: a pair is joined by the
// process that creates its output first, the others leave it alone.
JoinResult JoinSplitRanks(const std::string& dir);

}  // namespace aon::merge
