// The node collector with real processes: a child loads libaon_agent.so, which
// starts aon-collector and hands it its ring; the tests kill the child or the
// collector with SIGKILL at a moment they choose, fill the disk, and run the
// flight recorder, then read the files that are left.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "agent_child_fixture.h"
#include "aon/collector_protocol.h"

namespace aon {

const std::string kChildProgram = std::string(AON_BUILD_BIN_DIR) + "/../tests-bin/agent_test_child";

namespace {

// A child with the agent injected whose stdout we read line by line.
struct RunningChild {
  pid_t pid = -1;
  FILE* out = nullptr;
  std::string err_path;

  // Last progress number printed by the child (marks in the ring), -1 at EOF.
  long ReadProgress() {
    char line[64];
    if (fgets(line, sizeof(line), out) == nullptr) return -1;
    return std::atol(line);
  }
  int Wait() {
    int st = 0;
    waitpid(pid, &st, 0);
    if (out) fclose(out);
    out = nullptr;
    return st;
  }
};

std::string ReadAll(const std::string& path) {
  std::string s;
  if (FILE* f = fopen(path.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
    fclose(f);
  }
  return s;
}

bool WaitForFile(const std::string& path, std::chrono::seconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (access(path.c_str(), F_OK) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::vector<pid_t> PidsOf(const std::string& needle) {
  std::vector<pid_t> pids;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = ReadAll(e.path().string() + "/cmdline");
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(needle) != std::string::npos && cmd.find("aon-collector") != std::string::npos) {
      pids.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  return pids;
}

uint64_t CountNvtx(TraceReader& r) {
  auto n = r.TableSize(RecordTraits<NvtxRecord>::Schema());
  return n.ok() ? *n : 0;
}

bool HasNote(const RankMetadata& m, const std::string& text) {
  for (const std::string& n : m.notes) {
    if (n.find(text) != std::string::npos) return true;
  }
  return false;
}

std::string Notes(const RankMetadata& m) {
  std::string s = "notes:";
  for (const std::string& n : m.notes) s += "\n  " + n;
  return s;
}

class CollectorTest : public AgentTest {
 protected:
  RunningChild Start(const std::string& mode, const std::map<std::string, std::string>& env = {}) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    RunningChild c;
    c.err_path = err_path_;
    pid_t pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      int e = open(c.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (e >= 0) dup2(e, 2);
      close(fds[0]);
      setenv("NVTX_INJECTION64_PATH", kAgent.c_str(), 1);
      setenv("CUDA_INJECTION64_PATH", kAgent.c_str(), 1);
      setenv("AON_OUTPUT_DIR", dir_.c_str(), 1);
      setenv("AON_JOB_ID", "collector-test", 1);
      for (const char* v : {"OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK", "PMIX_RANK"})
        unsetenv(v);
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      execl(kChildProgram.c_str(), kChildProgram.c_str(), mode.c_str(), nullptr);
      _exit(127);
    }
    close(fds[1]);
    c.pid = pid;
    c.out = fdopen(fds[0], "r");
    return c;
  }
  void SetUp() override {
    AgentTest::SetUp();
    // Outside the job directory, which one test fills up.
    err_path_ = dir_ + ".stderr";
  }
  std::string err_path_;
  std::string SocketName() const { return CollectorSocketName(geteuid(), "collector-test", dir_); }
  void TearDown() override {
    // No collector of this test may outlive it.
    for (pid_t p : PidsOf(SocketName())) kill(p, SIGKILL);
    unlink(err_path_.c_str());
    AgentTest::TearDown();
  }
};

TEST_F(CollectorTest, KilledRankKeepsEverythingThatReachedItsRing) {
  RunningChild c = Start("marks-forever");
  long acknowledged = 0;
  while (acknowledged < 20000) {
    long p = c.ReadProgress();
    ASSERT_GT(p, 0) << "child ended early: " << ReadAll(c.err_path);
    acknowledged = p;
  }
  kill(c.pid, SIGKILL);
  int st = c.Wait();
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  // The collector sees the connection close and finishes the file.
  ASSERT_TRUE(WaitForFile(dir_ + "/rank-00000.h5", std::chrono::seconds(20)))
      << ReadAll(c.err_path);
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ(meta->truncated, 1);
  EXPECT_GT(meta->last_record_ns, meta->start_ns);
  EXPECT_NE(meta->end_reason.find("without finishing"), std::string::npos) << meta->end_reason;
  // Every mark that had returned before the kill is on disk (the child may
  // have made up to 100 more that it had not reported yet).
  const uint64_t on_disk = CountNvtx(*r);
  EXPECT_GE(on_disk, static_cast<uint64_t>(acknowledged));
  EXPECT_LE(on_disk, static_cast<uint64_t>(acknowledged) + 100);
  EXPECT_EQ(meta->dropped[static_cast<size_t>(RecordKind::kNvtx)], 0u);
  auto strings = r->ReadStrings();
  ASSERT_TRUE(strings.ok());
  auto marks = r->ReadAll<NvtxRecord>();
  ASSERT_TRUE(marks.ok());
  EXPECT_EQ(strings->Get(marks->front().name_id), "tick");
}

TEST_F(CollectorTest, KilledCollectorLeavesAReadableFileAndTheAppRuns) {
  RunningChild c = Start("marks-for-3s");
  // Past one flush interval (1 s), so the collector has appended once.
  long seen = 0;
  auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1600)) {
    long p = c.ReadProgress();
    ASSERT_GT(p, 0) << ReadAll(c.err_path);
    seen = p;
  }
  std::vector<pid_t> collectors = PidsOf(SocketName());
  ASSERT_EQ(collectors.size(), 1u) << "one collector per job and node";
  kill(collectors[0], SIGKILL);
  while (c.ReadProgress() > 0) {
  }
  int st = c.Wait();
  ASSERT_TRUE(WIFEXITED(st)) << st;
  EXPECT_EQ(WEXITSTATUS(st), 0) << ReadAll(c.err_path);
  // What the collector flushed is readable in the file it left...
  auto partial = TraceReader::Open(dir_ + "/rank-00000.h5.partial");
  ASSERT_TRUE(partial.ok()) << partial.status().ToString();
  EXPECT_GT(CountNvtx(**partial), 0u);
  EXPECT_LE(CountNvtx(**partial), static_cast<uint64_t>(seen) + 100);
  auto pmeta = (*partial)->ReadRankMetadata();
  ASSERT_TRUE(pmeta.ok());
  EXPECT_EQ(pmeta->truncated, 1);
  // ...and the rank wrote the rest itself, beside it, saying why.
  std::string own;
  for (const auto& e : fs::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("rank-00000.pid") && name.ends_with(".h5")) own = e.path().string();
  }
  ASSERT_FALSE(own.empty()) << ReadAll(c.err_path);
  auto opened = TraceReader::Open(own);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto& r = *opened;
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_TRUE(HasNote(*meta, "collector exited")) << ReadAll(c.err_path) << Notes(*meta);
  EXPECT_GT(CountNvtx(*r), 0u);
  EXPECT_NE(ReadAll(c.err_path).find("collector exited"), std::string::npos);
}

TEST_F(CollectorTest, OneCollectorServesEveryRankOfTheNode) {
  std::vector<RunningChild> kids;
  for (int rank = 0; rank < 4; ++rank) {
    kids.push_back(Start("marks-for-3s", {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
                                          {"OMPI_COMM_WORLD_SIZE", "4"},
                                          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank)},
                                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
  }
  std::vector<long> last(kids.size(), 0);
  for (size_t i = 0; i < kids.size(); ++i) {
    for (long p; (p = kids[i].ReadProgress()) > 0;) last[i] = p;
  }
  std::string collector_note;
  for (size_t i = 0; i < kids.size(); ++i) {
    int st = kids[i].Wait();
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << ReadAll(kids[i].err_path);
  }
  for (int rank = 0; rank < 4; ++rank) {
    char name[32];
    snprintf(name, sizeof(name), "/rank-%05d.h5", rank);
    auto r = TraceReader::Open(dir_ + name);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto meta = (*r)->ReadRankMetadata();
    ASSERT_TRUE(meta.ok());
    EXPECT_EQ(meta->truncated, 0);
    EXPECT_EQ(CountNvtx(**r), 300000u) << "rank " << rank;
    std::string note;
    for (const std::string& n : meta->notes) {
      if (n.starts_with("collector pid")) note = n.substr(0, n.find(','));
    }
    ASSERT_FALSE(note.empty()) << Notes(*meta);
    if (collector_note.empty()) collector_note = note;
    EXPECT_EQ(note, collector_note) << "rank " << rank << " was served by another collector";
  }
}

TEST_F(CollectorTest, FullDiskLeavesTheAppRunningAndCountsWhatWasLost) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  const std::string disk = dir_ + "/small";
  fs::create_directory(disk);
  if (mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=256k") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << strerror(errno);
  }
  const std::string saved = dir_;
  dir_ = disk + "/job";
  RunningChild c = Start("marks-for-3s");
  long last = 0;
  for (long p; (p = c.ReadProgress()) > 0;) last = p;
  int st = c.Wait();
  std::string err = ReadAll(c.err_path);
  dir_ = saved;
  umount2(disk.c_str(), MNT_DETACH);
  ASSERT_TRUE(WIFEXITED(st)) << st;
  EXPECT_EQ(WEXITSTATUS(st), 0) << err;
  EXPECT_EQ(last, 300000);
  // The loss is reported where the user sees it, naming the cause.
  EXPECT_NE(err.find("records could not be written"), std::string::npos) << err;
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
}

TEST_F(CollectorTest, FlightRecorderWritesTheWindowWhenAStepSpikes) {
  RunningChild c = Start("steps-with-spike", {{"AON_MODE", "flight"}, {"AON_WINDOW", "60"}});
  int st = c.Wait();
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << ReadAll(c.err_path);
  // The rank is gone; the collector holds its file for a late trigger: end it.
  auto idle = CallCollector(SocketName(), CollectorRequest::Quiesce(), 20000);
  ASSERT_TRUE(idle.ok()) << idle.status().ToString();  // answered IDLE
  EXPECT_EQ(*idle, "");
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_TRUE(HasNote(*meta, "step-time spike")) << ReadAll(c.err_path);
  auto nvtx = r->ReadAll<NvtxRecord>();
  ASSERT_TRUE(nvtx.ok());
  auto strings = r->ReadStrings();
  ASSERT_TRUE(strings.ok());
  int steps = 0;
  uint64_t longest = 0;
  for (const NvtxRecord& n : *nvtx) {
    if (strings->Get(n.name_id) != "train step") continue;
    ++steps;
    longest = std::max(longest, n.end_ns - n.start_ns);
  }
  // Persisted: the window up to and including the spike; the 10 steps after
  // it had no trigger of their own and stayed in memory.
  EXPECT_GE(steps, 21);
  EXPECT_LT(steps, 31);
  EXPECT_GE(longest, 40'000'000u);
  EXPECT_TRUE(HasNote(*meta, "were not persisted"));
}

TEST_F(CollectorTest, FlightRecorderDumpsOnRequestAndWhenARankDies) {
  RunningChild c = Start("marks-forever", {{"AON_MODE", "flight"}, {"AON_WINDOW", "60"}});
  for (long p = 0; p < 5000;) p = c.ReadProgress();
  auto answer = CallCollector(SocketName(), CollectorRequest::Trigger("operator asked"), 10000);
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();  // answered OK
  EXPECT_EQ(*answer, "dumped");
  long acknowledged = 0;
  while (acknowledged < 15000) acknowledged = c.ReadProgress();
  kill(c.pid, SIGKILL);
  c.Wait();
  ASSERT_TRUE(WaitForFile(dir_ + "/rank-00000.h5", std::chrono::seconds(20)));
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_TRUE(HasNote(*meta, "operator asked"));
  EXPECT_TRUE(HasNote(*meta, "ended without finishing"));
  EXPECT_EQ(meta->truncated, 1);
  // Both dumps together: everything up to the kill (60 s window, nothing expired).
  EXPECT_GE(CountNvtx(*r), static_cast<uint64_t>(acknowledged));
}

}  // namespace
}  // namespace aon
