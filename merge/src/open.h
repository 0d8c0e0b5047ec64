// Phase 2, open: each process opens and validates the rank files it was given
// (scan.h) and tells every other process what it found (CandidateSummaries,
// messages.h), so that all of them hold the same candidates (candidate.h).
//
// Final files are opened first; then the .partial files of ranks that no
// readable final file gives (a killed collector's, readable up to its last
// flush). A .partial file of a rank a final file gives is not opened at all.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "aon/merge/merge_comm.h"
#include "aon/base/status.h"
#include "aon/format/string_table.h"
#include "aon/format/trace_file.h"
#include "candidate.h"
#include "scan.h"

namespace aon::merge {

struct OpenedJob {
  // Final files in path order, then .partial files in path order (opened or not).
  std::vector<Candidate> candidates;
  // Per candidate: its string table, read by the process that opened it (empty
  // elsewhere), kept until the strings are unified.
  std::vector<StringTable> strings;
};

// Opens and validates one rank file (the reader is closed again: an open HDF5
// file costs about 1 MB, and records are read much later, one rank at a time).
OpenResult OpenRankFile(const std::string& path, bool partial, StringTable* strings);

// How a process opens its files: in a child process (open.cc says why), which
// may take `timeout` per file; or in the process itself.
struct OpenSettings {
  bool in_child = true;
  std::chrono::seconds timeout{300};
  // Children opening at once (each a share of the files, in order): at most
  // one per 8 files.
  unsigned openers = 1;
};

// Collective.
StatusOr<OpenedJob> OpenJob(MergeComm& comm, const JobListing& listing,
                            const OpenSettings& how = {});

}  // namespace aon::merge
