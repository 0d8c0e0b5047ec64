// The SPANK plugin on a real Slurm cluster started by each test (slurm_cluster.h):
// srun --aon on one node and across two network-namespace nodes, sbatch --aon, a
// bad option value, an unwritable output directory, a rank killed by SIGKILL, and
// a job of an unprivileged user whose files must all be that user's (0600/0700).
// Workload: aon-synthetic-app under srun --mpi=pmix; its AON_EXPECT lines are
// compared with the merged timeline read back with aon::TraceReader.
#include "slurm_cluster.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <regex>
#include <sstream>

#include "aon/format/clock_leaders.h"
#include "aon/export/export_filter.h"
#include "aon/format/records.h"
#include "aon/format/trace_file.h"
#include "process_runner.h"

namespace {
namespace fs = std::filesystem;
using aon::testing::ClusterOptions;
using aon::testing::ProcessResult;
using aon::testing::SlurmCluster;

const std::string kApp = AON_BUILD_BIN_DIR "/aon-synthetic-app";
const std::string kPlugin = AON_SPANK_PLUGIN;
const std::string kKillShim = AON_KILL_SHIM;
const char kTestUser[] = "aon-test-user";
const std::map<std::string, std::string> kMpiEnv = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                                                    {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};

using Counts = std::map<std::string, uint64_t>;

// "AON_EXPECT rank=R kernels=K ..." -> rank -> kind -> count.
std::map<int, Counts> Expectations(const std::string& out) {
  std::map<int, Counts> result;
  std::istringstream lines(out);
  std::string line;
  const std::regex pair(R"(([a-z_]+)=(\d+))");
  while (std::getline(lines, line)) {
    const size_t at = line.find("AON_EXPECT ");
    if (at == std::string::npos) continue;
    int rank = -1;
    Counts c;
    for (auto it = std::sregex_iterator(line.begin() + static_cast<long>(at), line.end(), pair);
         it != std::sregex_iterator(); ++it) {
      if ((*it)[1] == "rank")
        rank = std::stoi((*it)[2]);
      else
        c[(*it)[1]] = std::stoull((*it)[2]);
    }
    if (rank >= 0) result[rank] = c;
  }
  return result;
}

struct Timeline {
  std::map<int, Counts> counts;
  std::map<int, uint8_t> status;  // rank -> RankStatus
};

Timeline ReadTimeline(const std::string& path) {
  Timeline t;
  auto reader = aon::TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return t;
  aon::ForEachRecordType([&](auto sample) {
    using T = decltype(sample);
    auto records = (*reader)->template ReadAllMerged<T>();
    EXPECT_TRUE(records.ok()) << records.status().ToString();
    if (!records.ok()) return;
    for (const auto& r : *records)
      ++t.counts[static_cast<int>(r.rank)][aon::RecordKindName(aon::RecordTraits<T>::kKind)];
  });
  auto ranks = (*reader)->ReadAllOf<aon::RankSummary>(aon::RankSummarySchema(), "meta");
  EXPECT_TRUE(ranks.ok()) << ranks.status().ToString();
  if (ranks.ok())
    for (const aon::RankSummary& r : *ranks) t.status[static_cast<int>(r.rank)] = r.status;
  return t;
}

void ExpectRankMatches(const Timeline& t, int rank, const Counts& want,
                       aon::RankStatus status = aon::RankStatus::kOk) {
  ASSERT_FALSE(want.empty());
  EXPECT_GT(want.at("kernels"), 0u);
  for (const auto& [kind, n] : want) {
    auto it = t.counts.find(rank);
    const uint64_t got = it == t.counts.end() || !it->second.count(kind) ? 0 : it->second.at(kind);
    EXPECT_EQ(got, n) << "rank " << rank << " " << kind;
  }
  ASSERT_TRUE(t.status.count(rank)) << "rank " << rank << " not in /meta/ranks";
  EXPECT_EQ(t.status.at(rank), static_cast<uint8_t>(status)) << "rank " << rank;
}

// The merged timeline as an OTF2 archive (aon-export --format otf2), read back
// by otf2-print through tests/data/otf2/otf2_counts.py: no problem, the ranks
// on their hosts, and per rank and record kind as many ENTER / METRIC events as
// the timeline has records (every kind but external_correlation is exported).
void ExpectOtf2ArchiveMatches(const std::string& dir, const Timeline& t,
                              const std::string& ranks, const std::string& hosts) {
  if (!AON_HAVE_OTF2 || std::string(AON_OTF2_PRINT).empty()) {
    std::printf("OTF2 check skipped: libotf2 or otf2-print not installed\n");
    return;
  }
  const std::string command = std::string(AON_BUILD_BIN_DIR) + "/aon-export -q '" + dir +
                              "/timeline.h5' --format otf2 -o '" + dir + "/otf2' && python3 '" +
                              AON_SOURCE_DIR + "/tests/data/otf2/otf2_counts.py' '" + dir +
                              "/otf2/traces.otf2' '" + AON_OTF2_PRINT + "' 2>&1";
  FILE* p = popen(command.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::map<std::string, std::string> values;
  std::string all;
  char line[4096];
  while (std::fgets(line, sizeof(line), p) != nullptr) {
    std::string text(line);
    all += text;
    if (!text.empty() && text.back() == '\n') text.pop_back();
    const size_t tab = text.find('\t');
    if (tab != std::string::npos) values[text.substr(0, tab)] = text.substr(tab + 1);
  }
  ASSERT_EQ(pclose(p), 0) << command << "\n" << all;
  EXPECT_EQ(values["problems"], "0") << all;
  EXPECT_EQ(values["ranks"], ranks) << all;
  EXPECT_EQ(values["hosts"], hosts) << all;
  size_t checked = 0;
  for (const auto& [rank, counts] : t.counts) {
    for (const auto& [kind, n] : counts) {
      if (kind == aon::RecordKindName(aon::RecordKind::kExternalCorrelation)) continue;
      EXPECT_EQ(values["count/" + std::to_string(rank) + "/" + kind], std::to_string(n))
          << "rank " << rank << " " << kind;
      ++checked;
    }
  }
  EXPECT_GE(checked, t.counts.size() * 3);
}

// The job directory srun printed: "aon: step J.S profiled: DIR/timeline.h5, ...".
std::string ProfiledDir(const std::string& text) {
  std::smatch m;
  static const std::regex re(R"(aon: step \d+\.\d+ profiled: (\S+)/timeline\.h5,)");
  return std::regex_search(text, m, re) ? m[1].str() : "";
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

int CountLinesWith(const std::string& text, const std::string& needle) {
  std::istringstream lines(text);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) n += line.find(needle) != std::string::npos;
  return n;
}

// Checks the whole pipeline of a 4-or-whatever-rank srun --aon run.
void ExpectProfiledStep(const ProcessResult& r, size_t ranks, const std::string& logs) {
  ASSERT_EQ(r.exit_status, 0) << r.Describe() << logs;
  const std::string dir = ProfiledDir(r.err + r.out);
  ASSERT_FALSE(dir.empty()) << "srun should print where the trace is\n" << r.Describe();
  const auto expected = Expectations(r.out);
  ASSERT_EQ(expected.size(), ranks) << r.Describe();
  for (size_t rank = 0; rank < ranks; ++rank) {
    char name[32];
    std::snprintf(name, sizeof(name), "/rank-%05zu.h5", rank);
    EXPECT_TRUE(fs::exists(dir + name)) << dir + name;
  }
  const Timeline t = ReadTimeline(dir + "/timeline.h5");
  // The viewer files: the Perfetto trace always, trace.json while the run has
  // at most aon-merge's default --max-trace-records (a full-mode run's PM
  // samples alone can pass it on a slow machine).
  uint64_t records = 0;
  for (const auto& [rank, counts] : t.counts)
    for (const auto& [kind, n] : counts) records += n;
  EXPECT_TRUE(fs::exists(dir + "/trace.pftrace"));
  EXPECT_EQ(fs::exists(dir + "/trace.json"), records <= aon::merge::kDefaultMaxTraceRecords)
      << records << " records";
  EXPECT_EQ(t.status.size(), ranks);
  for (const auto& [rank, counts] : expected) ExpectRankMatches(t, rank, counts);
}

bool EnsureTestUser(std::string* error) {
  if (getpwnam(kTestUser) != nullptr) return true;
  return aon::testing::RunSetupCommand({"useradd", "-m", kTestUser}, "/tmp", error) ||
         getpwnam(kTestUser) != nullptr;  // another process may have just created it
}

class SlurmSingleNode : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kApp)) << kApp;
    ASSERT_EQ(geteuid(), 0u) << "the Slurm tests start slurmctld/slurmd and must run as root";
    std::string error;
    cluster_ = SlurmCluster::Start(Options(), &error);
    ASSERT_TRUE(cluster_) << error;
    work_ = cluster_->dir() + "/work";
    fs::create_directories(work_);
  }
  virtual ClusterOptions Options() {
    ClusterOptions o;
    o.plugstack_line = "optional " + kPlugin;
    return o;
  }
  // A directory the test user owns, for its jobs.
  std::string UserDir(const std::string& name, const std::string& app) {
    std::string error;
    EXPECT_TRUE(EnsureTestUser(&error)) << error;
    // The user's tasks run `app`; say so if it is out of reach.
    ProcessResult can =
        aon::testing::RunProcess({"runuser", "-u", kTestUser, "--", "test", "-x", app}, {}, work_);
    EXPECT_EQ(can.exit_status, 0) << kTestUser << " cannot run " << app;
    const std::string d = work_ + "/" + name;
    fs::create_directories(d);
    const passwd* pw = getpwnam(kTestUser);
    EXPECT_NE(pw, nullptr);
    if (pw != nullptr) {
      EXPECT_EQ(chown(d.c_str(), pw->pw_uid, pw->pw_gid), 0);
    }
    return d;
  }
  std::unique_ptr<SlurmCluster> cluster_;
  std::string work_;
};

// The job's user must reach the programs it runs (the application, srun's copy
// of the plugin, the agent, aon-merge, aon-report): wherever the build tree lies (CI clones it into a
// directory other users may not traverse), they are staged in a world-readable
// directory, and the plugin is pointed at them with agent= and bindir=, as a
// site installs them.
class SlurmUnprivileged : public SlurmSingleNode {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/aon-slurm-stage-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    stage_ = tmpl;
    fs::create_directories(stage_ + "/bin");
    fs::create_directories(stage_ + "/lib");
    const std::string bin = AON_BUILD_BIN_DIR;
    for (const char* program : {"aon-synthetic-app", "aon-merge", "aon-report"}) {
      if (fs::exists(bin + "/" + program)) fs::copy_file(bin + "/" + program, stage_ + "/bin/" + program);
    }
    fs::copy_file(AON_AGENT_LIBRARY, stage_ + "/lib/libaon_agent.so");
    fs::copy_file(kPlugin, stage_ + "/lib/aon.so");  // srun loads it as the user too
    for (const auto& e : fs::recursive_directory_iterator(stage_)) {
      fs::permissions(e.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                    fs::perms::others_read | fs::perms::others_exec);
    }
    fs::permissions(stage_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
    SlurmSingleNode::SetUp();
  }
  void TearDown() override { fs::remove_all(stage_); }
  ClusterOptions Options() override {
    ClusterOptions o;
    o.plugstack_line = "optional " + stage_ + "/lib/aon.so agent=" + stage_ +
                       "/lib/libaon_agent.so bindir=" + stage_ + "/bin";
    return o;
  }
  std::string App() const { return stage_ + "/bin/aon-synthetic-app"; }
  std::string stage_;
};

TEST_F(SlurmSingleNode, SrunAonFourTasksOnOneNode) {
  ProcessResult r = cluster_->Run(
      {"srun", "--aon", "--aon-mode=full", "--mpi=pmix", "-n", "4", kApp, "--iterations", "5"}, kMpiEnv, work_);
  ExpectProfiledStep(r, 4, cluster_->Logs());
}

// Without the plugin's flag: aon-run in front of srun (for clusters without the
// SPANK plugin) gives every task the agent through srun's environment.
TEST_F(SlurmSingleNode, AonRunInFrontOfSrunProfilesEveryTask) {
  const std::string job = work_ + "/aon-run-job";
  ProcessResult r = cluster_->Run({AON_BUILD_BIN_DIR "/aon-run", "-o", job, "--source", "synthetic",
                                   "--mode", "full", "srun", "--mpi=pmix", "-n", "3", kApp,
                                   "--iterations", "4"},
                                  kMpiEnv, work_);
  ASSERT_EQ(r.exit_status, 0) << r.Describe() << cluster_->Logs();
  const auto expected = Expectations(r.out);
  ASSERT_EQ(expected.size(), 3u) << r.Describe();
  for (int rank = 0; rank < 3; ++rank) {
    char name[32];
    std::snprintf(name, sizeof(name), "/rank-%05d.h5", rank);
    EXPECT_TRUE(fs::exists(job + name)) << job + name << "\n" << r.Describe();
  }
  const Timeline t = ReadTimeline(job + "/timeline.h5");
  EXPECT_EQ(t.status.size(), 3u);
  for (const auto& [rank, counts] : expected) ExpectRankMatches(t, rank, counts);
}

TEST_F(SlurmSingleNode, SbatchAonProfilesTheScriptsSrunStep) {
  const std::string script = work_ + "/job.sh";
  std::ofstream(script) << "#!/bin/sh\nsrun --mpi=pmix -n 2 " << kApp << " --iterations 4\n";
  ProcessResult r = cluster_->Run(
      {"sbatch", "--aon", "--aon-mode=full", "--wait", "-n", "2", "-o", work_ + "/job.out", script},
      kMpiEnv, work_);
  ASSERT_EQ(r.exit_status, 0) << r.Describe() << cluster_->Logs();
  std::ifstream in(work_ + "/job.out");
  std::stringstream out;
  out << in.rdbuf();
  ProcessResult as_step;  // the batch output holds the srun step's stdout and stderr
  as_step.exit_status = 0;
  as_step.out = out.str();
  ExpectProfiledStep(as_step, 2, cluster_->Logs());
}

TEST_F(SlurmSingleNode, BadOptionValueFailsSrunAndNamesIt) {
  for (const auto& [option, value] :
       std::vector<std::pair<std::string, std::string>>{{"--aon-kinds", "bogus"},
                                                        {"--aon", "fast"},
                                                        {"--aon-memory-cap", "12X"},
                                                        {"--aon-nccl", "maybe"}}) {
    ProcessResult r = cluster_->Run({"srun", option + "=" + value, "-n", "1", "true"}, {}, work_);
    EXPECT_NE(r.exit_status, 0) << option << "\n" << r.Describe();
    EXPECT_NE(r.err.find("aon: " + option + "=" + value), std::string::npos) << r.Describe();
  }
}

// --aon-nccl takes aon-run's five NCCL modes (on|off still accepted, on =
// default), and the tasks get what aon-run would give its ranks: AON_NCCL, and
// NCCL's profiler plugin = the agent unless off.
TEST_F(SlurmSingleNode, NcclOptionTakesAonRunsModes) {
  const std::string probe =
      "echo NCCL mode=${AON_NCCL:-unset} plugin=${NCCL_PROFILER_PLUGIN:-unset}";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"proxy", "NCCL mode=proxy plugin=/"},
      {"on", "NCCL mode=default plugin=/"},
      {"off", "NCCL mode=off plugin=unset\n"},
  };
  for (const auto& [value, want] : cases) {
    ProcessResult r = cluster_->Run(
        {"srun", "--aon", "--aon-nccl=" + value, "-n", "1", "sh", "-c", probe}, {}, work_);
    EXPECT_EQ(r.exit_status, 0) << r.Describe() << cluster_->Logs();
    EXPECT_TRUE(Contains(r.out, want)) << "--aon-nccl=" << value << "\n" << r.Describe();
    if (value != "off") {
      EXPECT_TRUE(Contains(r.out, "libaon_agent.so\n")) << r.Describe();
    }
  }
}

TEST_F(SlurmUnprivileged, UnwritableOutputDirectoryStillRunsTheJob) {
  const std::string user_dir = UserDir("user", App());
  const std::string locked = work_ + "/root-only";  // root's, 0755: the user cannot write
  fs::create_directories(locked);
  ProcessResult r = cluster_->Run({"srun", "--aon", "--aon-mode=full", "--aon-output=" + locked, "--mpi=pmix", "-n",
                                   "2", App(), "--iterations", "2"},
                                  kMpiEnv, user_dir, kTestUser);
  EXPECT_EQ(r.exit_status, 0) << r.Describe() << cluster_->Logs();
  EXPECT_EQ(CountLinesWith(r.err, "aon:"), 1) << "one clear message\n" << r.Describe();
  EXPECT_NE(r.err.find("aon: cannot create " + locked + "/aon-"), std::string::npos)
      << r.Describe();
  EXPECT_EQ(Expectations(r.out).size(), 2u) << "the job itself ran\n" << r.Describe();
  EXPECT_TRUE(fs::is_empty(locked));
  EXPECT_TRUE(fs::is_empty(user_dir)) << "no trace anywhere";
}

TEST_F(SlurmSingleNode, KilledRankKeepsItsTraceMarkedTruncated) {
  std::map<std::string, std::string> env = kMpiEnv;
  env["LD_PRELOAD"] = kKillShim;
  env["AON_TEST_KILL_RANK"] = "2";
  ProcessResult r = cluster_->Run(
      {"srun", "--aon", "--aon-mode=full", "--mpi=pmix", "-n", "4", kApp, "--iterations", "5"}, env, work_);
  EXPECT_NE(r.exit_status, 0) << "a task was killed\n" << r.Describe();
  EXPECT_NE(r.err.find("task 2: Killed"), std::string::npos) << r.Describe();
  const std::string dir = ProfiledDir(r.err);
  ASSERT_FALSE(dir.empty()) << "the killed step is still merged\n"
                            << r.Describe() << cluster_->Logs();
  // SIGKILL after its work: the node collector still had everything in the
  // rank's ring and finished its file, marked truncated.
  EXPECT_TRUE(fs::exists(dir + "/rank-00002.h5"));
  const auto expected = Expectations(r.out);
  const Timeline t = ReadTimeline(dir + "/timeline.h5");
  for (int rank : {0, 1, 2, 3}) {
    ASSERT_TRUE(expected.count(rank)) << r.Describe();
    ExpectRankMatches(t, rank, expected.at(rank),
                      rank == 2 ? aon::RankStatus::kTruncated : aon::RankStatus::kOk);
  }
}

TEST_F(SlurmUnprivileged, UnprivilegedUserOwnsEveryFile) {
  const std::string user_dir = UserDir("user", App());
  ProcessResult r =
      cluster_->Run({"srun", "--aon", "--aon-mode=full", "--mpi=pmix", "-n", "4", App(), "--iterations", "3"}, kMpiEnv,
                    user_dir, kTestUser);
  ExpectProfiledStep(r, 4, cluster_->Logs());
  const std::string dir = ProfiledDir(r.err);
  ASSERT_FALSE(dir.empty());
  const passwd* pw = getpwnam(kTestUser);
  ASSERT_NE(pw, nullptr);
  int files = 0;
  auto check = [&](const fs::path& p) {
    struct stat st {};
    ASSERT_EQ(lstat(p.c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_uid, pw->pw_uid) << p;
    EXPECT_EQ(st.st_gid, pw->pw_gid) << p;
    if (S_ISDIR(st.st_mode)) {
      EXPECT_EQ(st.st_mode & 07777, 0700u) << p;
    } else {
      EXPECT_TRUE(S_ISREG(st.st_mode)) << p;
      EXPECT_EQ(st.st_mode & 07777, 0600u) << p;
      ++files;
    }
  };
  check(dir);
  for (const auto& e : fs::recursive_directory_iterator(dir)) check(e.path());
  EXPECT_GE(files, 6)
      << "4 rank files, timeline.h5, trace.json (and report.html if aon-report is built)";
  EXPECT_EQ(cluster_->Logs().find("without profiling"), std::string::npos)
      << "slurmstepd's own directory check (as the user) must pass too\n"
      << cluster_->Logs();
  ProcessResult ls = aon::testing::RunProcess({"ls", "-laR", dir}, {}, work_);
  std::printf("job directory of %s (uid %u):\n%s", kTestUser, pw->pw_uid, ls.out.c_str());
}

class SlurmBadPlugstack : public SlurmSingleNode {
 protected:
  ClusterOptions Options() override {
    ClusterOptions o = SlurmSingleNode::Options();
    o.plugstack_line += " default=off colour=red";
    return o;
  }
};

TEST_F(SlurmBadPlugstack, UnknownKeyDisablesProfilingAndIsNamed) {
  ProcessResult plain = cluster_->Run({"srun", "-n", "1", "true"}, {}, work_);
  EXPECT_EQ(plain.exit_status, 0) << "an optional plugin's bad configuration must not fail jobs\n"
                                  << plain.Describe();
  EXPECT_EQ(plain.err.find("aon:"), std::string::npos) << "jobs without --aon hear nothing\n"
                                                       << plain.Describe();
  ProcessResult r = cluster_->Run({"srun", "--aon", "-n", "1", "true"}, {}, work_);
  EXPECT_NE(r.err.find("unknown plugstack.conf argument 'colour'"), std::string::npos)
      << r.Describe();
  EXPECT_TRUE(fs::is_empty(work_)) << "nothing profiled";
}

class SlurmTwoNodes : public SlurmSingleNode {
 protected:
  ClusterOptions Options() override {
    ClusterOptions o = SlurmSingleNode::Options();
    o.nodes = 2;
    o.network_namespaces = true;  // if they cannot be created, SetUp fails and says why
    return o;
  }
};

TEST_F(SlurmTwoNodes, SrunAonFourTasksAcrossTwoNodes) {
  std::map<std::string, std::string> env = kMpiEnv;
  env["OMPI_MCA_btl"] = "self,tcp";
  ProcessResult r = cluster_->Run(
      {"srun", "--aon", "--aon-mode=full", "--mpi=pmix", "-N", "2", "-n", "4", "--ntasks-per-node=2", "sh", "-c",
       "echo NODE $SLURMD_NODENAME $SLURM_PROCID; exec " + kApp + " --iterations 5"},
      env, work_, "", std::chrono::seconds(180));
  ExpectProfiledStep(r, 4, cluster_->Logs());
  EXPECT_EQ(CountLinesWith(r.out, "NODE n1 "), 2) << r.Describe();
  EXPECT_EQ(CountLinesWith(r.out, "NODE n2 "), 2) << r.Describe();
  const std::string dir = ProfiledDir(r.err + r.out);
  ExpectOtf2ArchiveMatches(dir, ReadTimeline(dir + "/timeline.h5"), "0,1,2,3", "n1,n2");
  // srun made its own allocation, which is gone when the step ends: merged here.
  EXPECT_FALSE(Contains(r.err, "merging on its")) << r.Describe();
}

// Budgeted capture across two nodes: the periodic windows (a fixed period) open
// on the same steps of all four ranks, and aon-ctl capture, run from outside the
// job on its shared job directory while the step runs, reaches both nodes'
// collectors and every rank captures the requested steps.
TEST_F(SlurmTwoNodes, WindowsAndOnDemandCaptureLandOnTheSameStepsOnBothNodes) {
  // 3000 steps of >= 4 ms: aon-ctl's request (3 s ahead of the step it sees)
  // still lands inside the job when aon-ctl starts up to ~9 s late (a loaded
  // machine), so whether the requested steps exist does not depend on timing.
  constexpr uint64_t kSteps = 3000;
  const std::string root = work_ + "/od";
  const std::string script =
      "srun --aon --aon-output=" + root + " --aon-capture-period=64 --mpi=pmix -N 2 -n 4 "
      "--ntasks-per-node=2 " + kApp + " --iterations " + std::to_string(kSteps) + " --host-us 4000 &\n"
      "pid=$!\n"
      "for i in $(seq 600); do\n"
      "  n=$(ls " + root + "/*/aon-steps-* 2>/dev/null | wc -l)\n"
      "  [ \"$n\" -ge 2 ] && break; sleep 0.1\n"
      "done\n"
      "job=$(dirname \"$(ls " + root + "/*/aon-steps-* | head -1)\")\n"
      AON_BUILD_BIN_DIR "/aon-ctl steps \"$job\"\n"
      AON_BUILD_BIN_DIR "/aon-ctl capture --steps 5 --lead 3 \"$job\"\n"
      "wait $pid\n";
  std::map<std::string, std::string> env = kMpiEnv;
  env["OMPI_MCA_btl"] = "self,tcp";
  ProcessResult r = cluster_->Run({"sh", "-c", script}, env, work_, "", std::chrono::seconds(240));
  ASSERT_EQ(r.exit_status, 0) << r.Describe() << cluster_->Logs();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(capture 1: steps (\d+)\.\.(\d+) \(nvtx\) requested on 2 node)")))
      << r.Describe();
  const uint64_t first = std::stoull(m[1]), last = std::stoull(m[2]);
  ASSERT_LT(last, kSteps) << "the step would end before the requested steps\n" << r.Describe();
  const std::string dir = ProfiledDir(r.err + r.out);
  ASSERT_FALSE(dir.empty()) << r.Describe();
  auto reader = aon::TraceReader::Open(dir + "/timeline.h5");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto steps = (*reader)->ReadAllMerged<aon::StepRecord>();
  ASSERT_TRUE(steps.ok());
  std::map<uint32_t, std::set<uint64_t>> periodic, on_demand, all;
  for (const auto& s : *steps) {
    all[s.rank].insert(s.record.step);
    if (!(s.record.flags & aon::kStepCaptured)) continue;
    (s.record.flags & aon::kStepOnDemand ? on_demand : periodic)[s.rank].insert(s.record.step);
  }
  ASSERT_EQ(all.size(), 4u);
  ASSERT_GE(periodic[0].size(), 3u * (kSteps / 64 - 1));
  for (uint32_t rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(all[rank].size(), kSteps) << "rank " << rank;
    EXPECT_EQ(periodic[rank], periodic[0]) << "rank " << rank;
    EXPECT_EQ(on_demand[rank], on_demand[0]) << "rank " << rank;
    // Every requested step captured: on demand, or by a periodic window that held it.
    for (uint64_t step = first; step <= last; ++step)
      EXPECT_TRUE(on_demand[rank].count(step) || periodic[rank].count(step))
          << "rank " << rank << " step " << step;
  }
  EXPECT_FALSE(on_demand[0].empty());
}

// Inside a two-node batch job the step is merged by one aon-merge process per
// node (an srun step of the same job), into shards the timeline joins.
TEST_F(SlurmTwoNodes, SbatchTwoNodeStepIsMergedOnBothNodes) {
  const std::string script = work_ + "/job.sh";
  std::ofstream(script) << "#!/bin/sh\nsrun --aon --aon-mode=full --mpi=pmix -N 2 -n 4 --ntasks-per-node=2 "
                        << kApp << " --iterations 4\n";
  std::map<std::string, std::string> env = kMpiEnv;
  env["OMPI_MCA_btl"] = "self,tcp";
  ProcessResult r = cluster_->Run({"sbatch", "--wait", "-N", "2", "-n", "4", "-o",
                                   work_ + "/job.out", script},
                                  env, work_, "", std::chrono::seconds(180));
  ASSERT_EQ(r.exit_status, 0) << r.Describe() << cluster_->Logs();
  std::ifstream in(work_ + "/job.out");
  std::stringstream out;
  out << in.rdbuf();
  ProcessResult as_step;
  as_step.exit_status = 0;
  as_step.out = out.str();
  ExpectProfiledStep(as_step, 4, cluster_->Logs());
  EXPECT_FALSE(Contains(as_step.out, "merging here with one process")) << as_step.out;
  const std::string dir = ProfiledDir(as_step.out);
  auto reader = aon::TraceReader::Open(dir + "/timeline.h5");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(*(*reader)->GetMetaInt("merge_processes"), 2) << as_step.out << cluster_->Logs();
  EXPECT_TRUE(fs::exists(dir + "/timeline.shards/shard-00001.h5")) << as_step.out;
}

// "rank offset bound status" per /meta/ranks row and "synced N" from aon-inspect --json.
std::string InspectClockColumns(const std::string& timeline, const std::string& cwd) {
  const std::string script =
      "import json,subprocess,sys\n"
      "d=json.loads(subprocess.run([sys.argv[1],'--json',sys.argv[2]],check=True,"
      "capture_output=True,text=True).stdout)\n"
      "md=d['metadata']\n"
      "md=dict(md) if isinstance(md,list) else md\n"
      "print('synced', int(md['clock_synchronized']))\n"
      "for r in d['ranks']: print('rank', r['rank'], r['clock_offset_ns'], "
      "r['clock_error_bound_ns'], r['status'])\n";
  ProcessResult r = aon::testing::RunProcess(
      {"python3", "-c", script, AON_BUILD_BIN_DIR "/aon-inspect", timeline}, {}, cwd);
  EXPECT_EQ(r.exit_status, 0) << r.Describe();
  return r.out;
}

// Node leaders on two nodes whose clocks really differ: n2's slurmd, and so
// every task it starts, runs in a time namespace whose CLOCK_MONOTONIC is 5 s
// ahead of n1's. Block distribution puts ranks 0,1 on n1 and 2,3 on n2. One
// rank per node measures (rank 0 is the reference; rank 2 pings rank 0 through
// the nodes' network namespaces), the other names its node leader and the same
// clock, and the merged timeline has every rank on rank 0's clock.
class SlurmTwoNodesTwoClocks : public SlurmTwoNodes {
 protected:
  static constexpr int64_t kAheadS = 5;
  ClusterOptions Options() override {
    ClusterOptions o = SlurmTwoNodes::Options();
    o.monotonic_offset_s = {0, static_cast<int>(kAheadS)};
    return o;
  }

  // Runs the 4-task step (2 per node, verbose agent logs) and reads the rank files.
  void RunStep() {
    std::map<std::string, std::string> env = kMpiEnv;
    env["OMPI_MCA_btl"] = "self,tcp";
    env["AON_VERBOSE"] = "1";
    r_ = cluster_->Run(
        {"srun", "--aon", "--aon-mode=full", "--mpi=pmix", "-N", "2", "-n", "4", "--ntasks-per-node=2", "sh", "-c",
         "echo NODE $SLURMD_NODENAME $SLURM_PROCID; exec " + kApp + " --iterations 5"},
        env, work_, "", std::chrono::seconds(180));
    ExpectProfiledStep(r_, 4, cluster_->Logs());
    if (HasFatalFailure()) return;
    ASSERT_EQ(CountLinesWith(r_.out, "NODE n1 "), 2) << r_.Describe();
    ASSERT_EQ(CountLinesWith(r_.out, "NODE n2 "), 2) << r_.Describe();
    dir_ = ProfiledDir(r_.err + r_.out);
    ASSERT_FALSE(dir_.empty());
    for (int rank = 0; rank < 4; ++rank) {
      char name[32];
      std::snprintf(name, sizeof(name), "/rank-%05d.h5", rank);
      auto reader = aon::TraceReader::Open(dir_ + name);
      ASSERT_TRUE(reader.ok()) << reader.status().ToString();
      auto m = (*reader)->ReadRankMetadata();
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      meta_.push_back(*m);
    }
  }
  ProcessResult r_;
  std::string dir_;
  std::vector<aon::RankMetadata> meta_;
};

TEST_F(SlurmTwoNodesTwoClocks, OneLeaderPerNodeMeasuresAndTheOthersFollowIt) {
  ASSERT_NO_FATAL_FAILURE(RunStep());
  const ProcessResult& r = r_;
  const std::vector<aon::RankMetadata>& meta = meta_;
  std::map<std::string, std::vector<int>> by_host;
  for (const aon::RankMetadata& m : meta) by_host[m.host].push_back(m.rank);
  ASSERT_EQ(by_host.size(), 2u) << "two nodes";
  std::set<std::string> node_clocks;
  for (const auto& [host, ranks] : by_host) {
    ASSERT_EQ(ranks.size(), 2u) << host;
    int leaders = 0;
    const aon::RankMetadata& leader = meta[static_cast<size_t>(ranks.front())];
    for (int rank : ranks) {
      const aon::RankMetadata& m = meta[static_cast<size_t>(rank)];
      if (m.clock_leader_rank == -1) {
        ++leaders;
        EXPECT_EQ(rank, ranks.front()) << host << ": the node's lowest rank leads";
        EXPECT_TRUE(m.clock_synchronized) << "rank " << rank << " measured\n" << r.Describe();
      } else {
        EXPECT_EQ(m.clock_leader_rank, ranks.front()) << "rank " << rank << " on " << host;
        EXPECT_FALSE(m.clock_id.empty());
        EXPECT_EQ(m.clock_id, leader.clock_id) << "rank " << rank << " reads its leader's clock";
        // Measured nothing: its log says whose measurement applies.
        EXPECT_TRUE(Contains(r.err, "rank " + std::to_string(rank) + ": clock: reads "))
            << r.Describe();
      }
    }
    EXPECT_EQ(leaders, 1) << host << ": exactly one rank measures";
    node_clocks.insert(leader.clock_id);
  }
  EXPECT_EQ(node_clocks.size(), 2u) << "n2 runs in its own time namespace";

  // Rank 0 is the reference; rank 1 reads that very clock; rank 2 measured n2's
  // clock 5 s ahead; rank 3 is unsynchronized in its own file (its leader's
  // model is only known at the leader's exit) and names rank 2.
  EXPECT_EQ(meta[0].clock_error_bound_ns, 0);
  EXPECT_EQ(meta[1].clock_leader_rank, 0);
  EXPECT_TRUE(meta[1].clock_synchronized);
  EXPECT_EQ(meta[1].clock_offset_ns, 0);
  EXPECT_EQ(meta[2].clock_leader_rank, -1);
  ASSERT_GE(meta[2].clock_error_bound_ns, 0);
  const int64_t truth = -kAheadS * 1'000'000'000LL;
  EXPECT_LE(std::llabs(meta[2].clock_offset_ns - truth), meta[2].clock_error_bound_ns)
      << "offset " << meta[2].clock_offset_ns << " bound " << meta[2].clock_error_bound_ns;
  // Far below the offset it corrects (not vacuous); its size on veth links
  // under load is measured in bench/RESULTS.md, "Clock synchronization".
  EXPECT_LT(meta[2].clock_error_bound_ns, 100'000'000) << "far below the " << kAheadS << " s offset";
  EXPECT_EQ(meta[3].clock_leader_rank, 2);
  EXPECT_FALSE(meta[3].clock_synchronized);

  // What the merge does with them (aon/format/clock_leaders.h)...
  std::vector<aon::RankMetadata> applied = meta;
  std::vector<aon::RankMetadata*> pointers;
  for (aon::RankMetadata& m : applied) pointers.push_back(&m);
  const std::vector<std::string> problems = aon::ApplyClockLeaders(pointers);
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_TRUE(applied[3].clock_synchronized);
  EXPECT_EQ(applied[3].clock_offset_ns, meta[2].clock_offset_ns);
  EXPECT_EQ(applied[3].clock_error_bound_ns, meta[2].clock_error_bound_ns);
}

// What aon-merge wrote for the same step: every rank on rank 0's clock, rank 3
// with rank 2's correction. Needs aon-merge to call aon::ApplyClockLeaders.
TEST_F(SlurmTwoNodesTwoClocks, MergedTimelineHasEveryRankSynchronized) {
  ASSERT_NO_FATAL_FAILURE(RunStep());
  std::vector<aon::RankMetadata> applied = meta_;
  std::vector<aon::RankMetadata*> pointers;
  for (aon::RankMetadata& m : applied) pointers.push_back(&m);
  ASSERT_TRUE(aon::ApplyClockLeaders(pointers).empty());
  const std::string columns = InspectClockColumns(dir_ + "/timeline.h5", work_);
  EXPECT_TRUE(Contains(columns, "synced 1\n")) << columns;
  for (int rank = 0; rank < 4; ++rank) {
    const aon::RankMetadata& m = applied[static_cast<size_t>(rank)];
    const std::string row = "rank " + std::to_string(rank) + " " +
                            std::to_string(m.clock_offset_ns) + " " +
                            std::to_string(m.clock_error_bound_ns) + " ok\n";
    EXPECT_TRUE(Contains(columns, row))
        << "want '" << row << "' in:\n"
        << columns << "(rank 3 follows rank 2: aon-merge must give it rank 2's correction with "
        << "aon::ApplyClockLeaders, format/include/aon/format/clock_leaders.h)";
  }
}

}  // namespace
