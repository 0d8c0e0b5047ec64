// Merge-then-report (aon/config/merge_report.h) with real programs: small
// shell scripts stand in for aon-merge and aon-report, write what they were
// asked into a log and exit as each test wants; the runner is a plain
// fork/exec, as a front end's would be.
#include "aon/config/merge_report.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace aon {
namespace {

namespace fs = std::filesystem;

StatusOr<int> RunStandIn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) {
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return ErrnoStatus("waitpid", errno);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

class MergeThenReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "aon-merge-report-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    job_ = dir_ + "/job";
    fs::create_directories(job_);
    log_ = dir_ + "/log";
    plan_.job_dir = job_;
    plan_.merge_program = dir_ + "/bin/aon-merge";
    plan_.report_program = dir_ + "/bin/aon-report";
    plan_.attempts = {{{plan_.merge_program, job_}, false}};
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A program that logs "<name> <args>" and runs `body` (sh).
  void Program(const std::string& name, const std::string& body) {
    fs::create_directories(dir_ + "/bin");
    const std::string path = dir_ + "/bin/" + name;
    std::ofstream(path) << "#!/bin/sh\necho \"" << name << " $*\" >> " << log_ << "\n"
                        << body << "\n";
    fs::permissions(path, fs::perms::owner_all);
  }
  void Touch(const std::string& name) { std::ofstream(job_ + "/" + name) << "x"; }
  std::string Log() {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string dir_, job_, log_;
  MergePlan plan_;
};

TEST_F(MergeThenReportTest, MergesThenReports) {
  Touch("rank-00000.h5");
  Touch("rank-00001.h5");
  Program("aon-merge", "touch \"$1/timeline.h5\"");
  Program("aon-report", "exit 0");
  std::vector<MergeEvent::Kind> events;
  MergeOutcome out =
      MergeThenReport(plan_, RunStandIn, [&](const MergeEvent& e) { events.push_back(e.kind); });
  EXPECT_EQ(out.merge, MergeResult::kMerged);
  EXPECT_EQ(out.rank_files, 2u);
  EXPECT_EQ(out.report, ReportResult::kWritten);
  EXPECT_EQ(Log(), "aon-merge " + job_ + "\naon-report " + job_ + "\n");
  EXPECT_EQ(events, (std::vector<MergeEvent::Kind>{MergeEvent::Kind::kMergeStarting,
                                                   MergeEvent::Kind::kReportStarting}));
}

TEST_F(MergeThenReportTest, NothingToMergeRunsNothing) {
  Program("aon-merge", "exit 0");
  MergeOutcome out = MergeThenReport(plan_, RunStandIn);
  EXPECT_EQ(out.merge, MergeResult::kNoRankFiles);
  EXPECT_EQ(out.report, ReportResult::kNotAsked);
  EXPECT_EQ(Log(), "");
}

TEST_F(MergeThenReportTest, PartialFilesAreSomethingToMerge) {
  Touch("rank-00000.h5.partial");  // a killed collector's: aon-merge salvages it
  Program("aon-merge", "touch \"$1/timeline.h5\"");
  MergeOutcome out = MergeThenReport(plan_, RunStandIn);
  EXPECT_EQ(out.merge, MergeResult::kMerged);
  EXPECT_EQ(out.rank_files, 1u);
  EXPECT_EQ(out.report, ReportResult::kNotInstalled);
}

TEST_F(MergeThenReportTest, AMergeOnEveryNodeRunsWithoutLocalFiles) {
  Program("aon-merge", "touch \"$1/timeline.h5\"");
  plan_.attempts[0].on_every_node = true;
  MergeOutcome out = MergeThenReport(plan_, RunStandIn);
  EXPECT_EQ(out.merge, MergeResult::kMerged);
  EXPECT_EQ(out.rank_files, 0u);
}

TEST_F(MergeThenReportTest, MissingMergeProgram) {
  Touch("rank-00000.h5");
  MergeOutcome out = MergeThenReport(plan_, RunStandIn);
  EXPECT_EQ(out.merge, MergeResult::kNoMergeProgram);
  EXPECT_EQ(out.report, ReportResult::kNotAsked);
}

TEST_F(MergeThenReportTest, FallsBackToTheNextAttempt) {
  Touch("rank-00000.h5");
  Program("aon-merge", "[ \"$1\" = --everywhere ] && exit 3\ntouch \"$2/timeline.h5\"");
  Program("aon-report", "exit 0");
  plan_.attempts = {{{plan_.merge_program, "--everywhere", job_}, true},
                    {{plan_.merge_program, "-q", job_}, false}};
  std::vector<std::pair<size_t, int>> failed;
  MergeOutcome out = MergeThenReport(plan_, RunStandIn, [&](const MergeEvent& e) {
    if (e.kind == MergeEvent::Kind::kMergeFailed) failed.emplace_back(e.attempt, e.exit_status);
  });
  EXPECT_EQ(out.merge, MergeResult::kMerged);
  EXPECT_EQ(failed, (std::vector<std::pair<size_t, int>>{{0, 3}}));
  EXPECT_EQ(Log(), "aon-merge --everywhere " + job_ + "\naon-merge -q " + job_ + "\naon-report " +
                       job_ + "\n");
}

TEST_F(MergeThenReportTest, FailedMergeStillReportsAWrittenTimeline) {
  Touch("rank-00000.h5");
  Program("aon-merge", "touch \"$1/timeline.h5\"\nexit 1");  // the export failed
  Program("aon-report", "exit 4");
  MergeOutcome out = MergeThenReport(plan_, RunStandIn);
  EXPECT_EQ(out.merge, MergeResult::kMergeFailed);
  EXPECT_EQ(out.merge_exit_status, 1);
  EXPECT_TRUE(out.merge_error.ok());
  EXPECT_EQ(out.report, ReportResult::kFailed);
  EXPECT_EQ(out.report_exit_status, 4);
}

TEST_F(MergeThenReportTest, NoTimelineNoReport) {
  Touch("rank-00000.h5");
  Program("aon-merge", "exit 1");
  Program("aon-report", "exit 0");
  MergeOutcome out = MergeThenReport(plan_, RunStandIn);
  EXPECT_EQ(out.merge, MergeResult::kMergeFailed);
  EXPECT_EQ(out.report, ReportResult::kNoTimeline);
  EXPECT_EQ(Log(), "aon-merge " + job_ + "\n");
}

TEST_F(MergeThenReportTest, ReportNotAskedFor) {
  Touch("rank-00000.h5");
  Program("aon-merge", "touch \"$1/timeline.h5\"");
  Program("aon-report", "exit 0");
  plan_.report_program.clear();
  MergeOutcome out = MergeThenReport(plan_, RunStandIn);
  EXPECT_EQ(out.merge, MergeResult::kMerged);
  EXPECT_EQ(out.report, ReportResult::kNotAsked);
  EXPECT_EQ(Log(), "aon-merge " + job_ + "\n");
}

TEST_F(MergeThenReportTest, AProgramThatCannotRunIsAnError) {
  Touch("rank-00000.h5");
  Program("aon-merge", "exit 0");
  MergeOutcome out = MergeThenReport(plan_, [](const std::vector<std::string>& argv) {
    return StatusOr<int>(NotFound("cannot run " + argv[0]));
  });
  EXPECT_EQ(out.merge, MergeResult::kMergeFailed);
  EXPECT_EQ(out.merge_error.code(), StatusCode::kNotFound);
}

TEST_F(MergeThenReportTest, ListRankFilesFinishedAndPartial) {
  Touch("rank-00002.h5");
  Touch("rank-00000.h5");
  Touch("rank-00001.h5.partial");
  Touch("timeline.h5");
  EXPECT_EQ(ListRankFiles(job_), (std::vector<std::string>{"rank-00000.h5", "rank-00002.h5"}));
  EXPECT_EQ(ListRankFiles(job_, true),
            (std::vector<std::string>{"rank-00000.h5", "rank-00001.h5.partial", "rank-00002.h5"}));
}

}  // namespace
}  // namespace aon
