// Merge-then-report: what aon-run and srun --aon do once the job (step) has
// ended, decided here once for both.
//
//   anything to merge? rank-*.h5 or rank-*.h5.partial in the job directory
//        (not looked at when an attempt runs on every node: node-local files)
//        | no -> kNoRankFiles
//   aon-merge installed?  no -> kNoMergeProgram
//   merge attempts, in order, until one exits 0 (e.g. one process per node of
//        the job, then one process here); none did -> kMergeFailed
//   a timeline.h5 written and a report asked for -> aon-report, if installed
//
// The front end runs each program its own way (RunProgramFn: aon-run forwards
// signals to it, the SPANK plugin sends its stdout to stderr), hears about
// each step through MergeEventFn, and words the outcome for its user.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "aon/base/status.h"

namespace aon {

// Runs argv (argv[0] a path) and returns its exit status, 128 + N when signal
// N killed it; an error when it could not be run at all.
using RunProgramFn = std::function<StatusOr<int>(const std::vector<std::string>& argv)>;

struct MergeAttempt {
  std::vector<std::string> argv;
  bool on_every_node = false;  // runs where the rank files are, even node-local ones
};

struct MergePlan {
  std::string job_dir;
  std::string merge_program;   // aon-merge; must be executable before anything runs
  std::string report_program;  // aon-report; "" = no report
  std::vector<MergeAttempt> attempts;
};

struct MergeEvent {
  enum class Kind { kMergeStarting, kMergeFailed, kReportStarting };
  Kind kind;
  size_t attempt = 0;  // index in MergePlan::attempts
  const std::vector<std::string>* argv = nullptr;
  size_t rank_files = 0;
  Status error;         // kMergeFailed: the program could not run
  int exit_status = 0;  // kMergeFailed: its exit status otherwise
};
using MergeEventFn = std::function<void(const MergeEvent&)>;

enum class MergeResult { kMerged, kNoRankFiles, kNoMergeProgram, kMergeFailed };
enum class ReportResult { kNotAsked, kNoTimeline, kNotInstalled, kWritten, kFailed };

struct MergeOutcome {
  MergeResult merge = MergeResult::kMergeFailed;
  size_t rank_files = 0;      // finished and partial rank files seen here
  Status merge_error;         // the last attempt could not run
  int merge_exit_status = 0;  // else its exit status
  ReportResult report = ReportResult::kNotAsked;
  Status report_error;
  int report_exit_status = 0;
};

MergeOutcome MergeThenReport(const MergePlan& plan, const RunProgramFn& run,
                             const MergeEventFn& on_event = nullptr);

// Names of the rank trace files (rank-*.h5, with `partial` also
// rank-*.h5.partial) in `dir`, sorted.
std::vector<std::string> ListRankFiles(const std::string& dir, bool partial = false);

}  // namespace aon
