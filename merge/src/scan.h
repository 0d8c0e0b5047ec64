// Phase 1, scan: which rank files exist and which process reads each.
//
// Each process lists the job directory as it sees it; the lists are exchanged
// (ScanList, messages.h) and every file goes to one process that sees it,
// largest files first, to the least loaded: a node-local directory is read on
// its node and a shared one is spread evenly.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aon/merge/merge_comm.h"
#include "aon/base/status.h"
#include "messages.h"

namespace aon::merge {

// A rank file as the processes see it: its largest size seen, and the
// processes that see it (in process order).
struct SeenFile {
  uint64_t bytes = 0;
  std::vector<int> procs;
};
using SeenFiles = std::map<std::string, SeenFile>;  // by path

struct JobListing {
  SeenFiles finals;    // rank-*.h5
  SeenFiles partials;  // rank-*.h5.partial
  // Ranks whose collector part and own part the processes joined first (join.h),
  // and pairs that could not be joined: said in the merge's report.
  std::vector<std::string> joined, join_problems;
};

// The rank of "rank-<N>.h5" (partial = false) or "rank-<N>.h5.partial".
std::optional<uint32_t> RankFromFileName(std::string_view name, bool partial);
// "rank-00007.h5".
std::string RankFileName(uint32_t rank);

// This process's view of the job directory (listed = false with the error
// when it cannot be listed).
StatusOr<ScanList> ListJobDir(const std::string& dir);

// Collective: every process first joins the split ranks it sees (join.h), then
// lists the directory, and all lists are united. The first process's listing
// error is everyone's; NotFound when no process sees a rank file.
StatusOr<JobListing> ScanJob(MergeComm& comm, const std::string& job_dir);

// Gives each path to one process that sees it: largest first, each to the
// process with the fewest bytes so far (ties: the lowest process). Every
// process computes the same answer.
std::vector<int> AssignFiles(const std::vector<std::string>& paths, const SeenFiles& seen,
                             int procs);

}  // namespace aon::merge
