// The node collector with real processes: a child loads libaon_agent.so, which
// starts aon-collector and hands it its ring; the tests kill the child or the
// collector with SIGKILL at a moment they choose, fill the disk, and run the
// flight recorder, then read the files that are left. With a second user
// (`nobody`, root needed): a squatter on the job's socket name gets nothing and
// stalls nothing, a guessed name is not the job's, and a collector takes rings
// only from its own user.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agent_child_fixture.h"
#include "aon/format/metadata_wire.h"
#include "aon/ipc/collector_protocol.h"
#include "aon/ipc/shm_ring.h"
#include "aon/merge/merge.h"
#include "skip_or_fail.h"

namespace aon {

const std::string kChildProgram = std::string(AON_BUILD_BIN_DIR) + "/../tests-bin/agent_test_child";

// Reads of a .partial file the collector still writes need HDF5's file lock
// off. libhdf5 reads HDF5_USE_FILE_LOCKING once, when this process first opens
// a file (whichever test does that first), so it is set before any test runs.
const int kNoHdf5FileLocks = setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1);

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
  // Stops the child (SIGSTOP) and reads every progress line it had written:
  // the exact number of marks in the ring when it stopped, give or take the
  // batch of up to 100 it was making (reported only when whole): the last
  // line read, 0 when there was none. Nothing when the child had ended.
  std::optional<long> StopAndDrain() {
    kill(pid, SIGSTOP);
    int st = 0;
    if (waitpid(pid, &st, WUNTRACED) != pid || !WIFSTOPPED(st)) return std::nullopt;
    const int fd = fileno(out);
    const int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    long last = 0;
    char line[64];
    while (fgets(line, sizeof(line), out) != nullptr) last = std::atol(line);
    clearerr(out);
    fcntl(fd, F_SETFL, flags);
    return last;
  }
  int Wait() {
    int st = 0;
    waitpid(pid, &st, 0);
    if (out) fclose(out);
    out = nullptr;
    return st;
  }
};

// True once `pid` is gone or a zombie (its parent may not reap it), within 20 s.
bool WaitUntilDead(pid_t pid) {
  const std::string stat = "/proc/" + std::to_string(pid) + "/stat";
  for (int i = 0; i < 2000; ++i) {
    std::FILE* f = std::fopen(stat.c_str(), "r");
    if (f == nullptr) return true;
    char line[512] = {};
    const bool got = std::fgets(line, sizeof(line), f) != nullptr;
    std::fclose(f);
    const char* paren = got ? std::strrchr(line, ')') : nullptr;
    if (paren != nullptr && paren[1] == ' ' && paren[2] == 'Z') return true;
    usleep(10000);
  }
  return false;
}

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

// ---- another user on the node ----------------------------------------------------
//
// `nobody` stands for the second, unprivileged user (as in
// tests/slurm/secure_fs_test.cc): the test (root) forks, and the child drops to
// nobody for good before it touches a socket.

struct OtherUser {
  uid_t uid = 0;
  gid_t gid = 0;
};

std::optional<OtherUser> Nobody() {
  if (geteuid() != 0) return std::nullopt;
  const passwd* pw = getpwnam("nobody");
  if (pw == nullptr || pw->pw_uid == 0) return std::nullopt;
  return OtherUser{pw->pw_uid, pw->pw_gid};
}

// In a forked child: become `user`, or _exit.
void BecomeOrDie(const OtherUser& user) {
  if (setgroups(0, nullptr) != 0 || setresgid(user.gid, user.gid, user.gid) != 0 ||
      setresuid(user.uid, user.uid, user.uid) != 0 || geteuid() != user.uid)
    _exit(90);
}

// Another user's process holding an abstract name (binds it before the job
// starts, as the attacker did) and counting what reaches it: bytes,
// and descriptors passed with SCM_RIGHTS (a rank's ring). A descriptor that
// arrives is used as the attacker used it: a huge ring tail is written.
class Squatter {
 public:
  Squatter(const OtherUser& user, const std::string& name) {
    int ready[2], stop[2], result[2];
    EXPECT_EQ(pipe(ready), 0);
    EXPECT_EQ(pipe(stop), 0);
    EXPECT_EQ(pipe(result), 0);
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      close(stop[1]);
      close(result[0]);
      BecomeOrDie(user);
      const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
      sockaddr_un addr;
      const socklen_t len = CollectorAddress(name, &addr);
      const char ok =
          fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0 && listen(fd, 16) == 0
              ? 1
              : 0;
      (void)!write(ready[1], &ok, 1);
      long counts[2] = {0, 0};  // bytes, descriptors
      std::vector<int> clients;
      while (ok) {
        std::vector<pollfd> fds = {{stop[0], POLLIN, 0}, {fd, POLLIN, 0}};
        for (int c : clients) fds.push_back({c, POLLIN, 0});
        if (poll(fds.data(), fds.size(), -1) < 0) break;
        if (fds[0].revents != 0) break;  // the test is done
        if (fds[1].revents & POLLIN) {
          const int c = accept(fd, nullptr, nullptr);
          if (c >= 0) clients.push_back(c);
        }
        for (size_t i = 2; i < fds.size(); ++i) {
          if ((fds[i].revents & (POLLIN | POLLHUP)) == 0) continue;
          char buf[65536];
          alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
          iovec iov{buf, sizeof(buf)};
          msghdr mh{};
          mh.msg_iov = &iov;
          mh.msg_iovlen = 1;
          mh.msg_control = control;
          mh.msg_controllen = sizeof(control);
          const ssize_t n = recvmsg(fds[i].fd, &mh, MSG_DONTWAIT);
          if (n <= 0) {
            if (n == 0) {
              close(fds[i].fd);
              clients.erase(std::find(clients.begin(), clients.end(), fds[i].fd));
            }
            break;  // the list changed: poll again
          }
          counts[0] += n;
          for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_type != SCM_RIGHTS) continue;
            int ring;
            std::memcpy(&ring, CMSG_DATA(c), sizeof(int));
            ++counts[1];
            struct stat st {};
            void* p = fstat(ring, &st) == 0 ? mmap(nullptr, static_cast<size_t>(st.st_size),
                                                   PROT_READ | PROT_WRITE, MAP_SHARED, ring, 0)
                                            : MAP_FAILED;
            if (p != MAP_FAILED) {
              static_cast<ring::RingHeader*>(p)->tail.store(~uint64_t{0} >> 1);
            }
          }
          (void)!send(fds[i].fd, "OK /dev/null\n", 13, MSG_NOSIGNAL);
        }
      }
      (void)!write(result[1], counts, sizeof(counts));
      _exit(0);
    }
    close(ready[1]);
    close(stop[0]);
    close(result[1]);
    char ok = 0;
    bound_ = read(ready[0], &ok, 1) == 1 && ok == 1;
    close(ready[0]);
    stop_ = stop[1];
    result_ = result[0];
  }
  ~Squatter() { Stop(); }
  bool bound() const { return bound_; }
  // Ends it; what reached it: {bytes, descriptors}.
  std::pair<long, long> Stop() {
    if (pid_ <= 0) return last_;
    // A byte, not EOF: another squatter forked later holds a copy of this pipe.
    (void)!write(stop_, "x", 1);
    close(stop_);
    long counts[2] = {-1, -1};
    if (read(result_, counts, sizeof(counts)) != static_cast<ssize_t>(sizeof(counts)))
      counts[0] = counts[1] = -1;
    close(result_);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    last_ = {counts[0], counts[1]};
    return last_;
  }

 private:
  pid_t pid_ = -1;
  bool bound_ = false;
  int stop_ = -1;
  int result_ = -1;
  std::pair<long, long> last_{-1, -1};
};

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
  // The job's collector as this test's user finds it: the key is in the job
  // directory (the first agent made it).
  CollectorEndpoint Endpoint() const {
    auto found = JobCollector("collector-test", dir_);
    EXPECT_TRUE(found.ok()) << found.error().message();
    return found.ok() ? *found : CollectorEndpoint{"no key in " + dir_, geteuid()};
  }
  std::string SocketName() const { return Endpoint().name; }
  // The job's collector, once it serves the child's rank (its .partial is
  // there); *made: the child's last progress. -1: none within 20 s.
  pid_t CollectorServing(RunningChild& c, long* made) {
    const std::string partial_path = dir_ + "/rank-00000.h5.partial";
    std::vector<pid_t> collectors;
    const auto t0 = std::chrono::steady_clock::now();
    while ((collectors.empty() || !fs::exists(partial_path)) &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
      const long p = c.ReadProgress();
      if (p <= 0) return -1;
      *made = p;
      collectors = PidsOf(SocketName());
    }
    return collectors.size() == 1 ? collectors[0] : -1;
  }
  void TearDown() override {
    // No collector of this test may outlive it (its command line names the directory).
    for (pid_t p : PidsOf(dir_)) kill(p, SIGKILL);
    unlink(err_path_.c_str());
    AgentTest::TearDown();
  }
};

// After the collector of a rank died: the merge joins what it flushed
// (`partial`, `before` marks) and what the rank wrote itself (`own`, `after`)
// into rank-00000.h5, every mark once, the two inputs kept as *.joined; the
// timeline's rank row is flagged and says what was joined.
// The file rank 0 wrote itself after its collector died (rank-00000.pid<N>.h5),
// or "" when there is none.
std::string RanksOwnFile(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("rank-00000.pid") && name.ends_with(".h5")) return e.path().string();
  }
  return "";
}

// The NVTX marks in the collector's .partial and in the rank's own file; a
// file that does not open counts as a failure and as no marks.
std::pair<uint64_t, uint64_t> MarksInBothParts(const std::string& partial,
                                               const std::string& own) {
  std::pair<uint64_t, uint64_t> n{0, 0};
  auto p = TraceReader::Open(partial);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (p.ok()) n.first = CountNvtx(**p);
  auto o = TraceReader::Open(own);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  if (o.ok()) n.second = CountNvtx(**o);
  return n;
}

// `made`: every mark the rank made. Each is in the joined file once, or
// counted dropped (a ring that filled): the collector frees ring space only
// once what it read is in its file, so the rank reads again whatever the
// collector read and never wrote, and the merge keeps once what both parts hold.
void ExpectTheMergeJoinsBothParts(const std::string& dir, const std::string& partial,
                                  const std::string& own, uint64_t made) {
  merge::MergeOptions options;
  options.job_dir = dir;
  merge::MergeReport report;
  const Status merged = merge::MergeJob(options, &report);
  ASSERT_TRUE(merged.ok()) << merged.ToString();
  EXPECT_FALSE(fs::exists(partial));
  EXPECT_FALSE(fs::exists(own));
  EXPECT_TRUE(fs::exists(partial + ".joined"));
  EXPECT_TRUE(fs::exists(own + ".joined"));
  auto joined = TraceReader::Open(dir + "/rank-00000.h5");
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  auto marks = (*joined)->ReadAll<NvtxRecord>();
  ASSERT_TRUE(marks.ok());
  std::set<uint64_t> times;
  for (const NvtxRecord& n : *marks) times.insert(n.start_ns);
  EXPECT_EQ(times.size(), marks->size()) << "a mark in both parts";
  auto meta = (*joined)->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  const uint64_t dropped = meta->dropped[static_cast<size_t>(RecordKind::kNvtx)];
  EXPECT_EQ(marks->size() + dropped, made)
      << marks->size() << " marks joined, " << dropped << " counted dropped" << Notes(*meta);
  EXPECT_TRUE(HasNote(*meta, "aon-merge joined rank-00000.h5.partial")) << Notes(*meta);
  auto timeline = TraceReader::Open(dir + "/timeline.h5");
  ASSERT_TRUE(timeline.ok()) << timeline.status().ToString();
  auto rows = (*timeline)->ReadAllOf<RankSummary>(RankSummarySchema(), "meta");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].flags & kRankCollectorLost, kRankCollectorLost);
  ASSERT_EQ(report.ranks.size(), 1u);
  EXPECT_NE(report.ranks[0].message.find("aon-merge joined"), std::string::npos)
      << report.ranks[0].message;
}

TEST_F(CollectorTest, KilledRankKeepsEverythingThatReachedItsRing) {
  RunningChild c = Start("marks-forever");
  long acknowledged = 0;
  while (acknowledged < 20000) {
    long p = c.ReadProgress();
    ASSERT_GT(p, 0) << "child ended early: " << ReadAll(c.err_path);
    acknowledged = p;
  }
  // Lines the child wrote since are in the pipe: stop it and read them all,
  // so that `acknowledged` is what it had reported when it was killed.
  const std::optional<long> drained = c.StopAndDrain();
  ASSERT_TRUE(drained) << "child ended early: " << ReadAll(c.err_path);
  acknowledged = std::max(acknowledged, *drained);
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
  // The child marks until the stop file exists (however late the collector's
  // first append comes on a loaded machine).
  const std::string stop_file = dir_ + "/stop";
  // A ring of 2 MiB (half the cap, as a power of two: record_sink.cc), so that
  // the marks made after the collector died are more than the ring holds.
  RunningChild c = Start("marks-until-stopped", {{"STOP_FILE", stop_file}, {"AON_MEMORY_CAP", "8M"}});
  const uint64_t ring_marks = (uint64_t{2} << 20) / ring::EntryBytes(sizeof(NvtxRecord));
  // Until the collector has appended records once (its first flush, due after
  // 1 s; later on a loaded machine: the collector runs at nice +5). The file is
  // flushed after every append, so a read between appends sees the last one;
  // HDF5's lock on a file open for writing would refuse the read
  // (kNoHdf5FileLocks).
  const std::string partial_path = dir_ + "/rank-00000.h5.partial";
  long seen = 0;
  bool appended = false;
  auto t0 = std::chrono::steady_clock::now();
  while (!appended && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    long p = c.ReadProgress();
    ASSERT_GT(p, 0) << ReadAll(c.err_path);
    seen = p;
    if (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1100)) continue;
    auto file = TraceReader::Open(partial_path);
    appended = file.ok() && CountNvtx(**file) > 0;
  }
  ASSERT_TRUE(appended) << "the collector never appended to " << partial_path
                        << ReadAll(c.err_path);
  std::vector<pid_t> collectors = PidsOf(SocketName());
  ASSERT_EQ(collectors.size(), 1u) << "one collector per job and node";
  // The marks made before the collector dies bound what it can have written:
  // the child stopped, its reports read to the last, the collector killed.
  const std::optional<long> drained = c.StopAndDrain();
  ASSERT_TRUE(drained) << ReadAll(c.err_path);
  seen = std::max(seen, *drained);
  kill(collectors[0], SIGKILL);
  ASSERT_TRUE(WaitUntilDead(collectors[0])) << "the collector outlived SIGKILL";
  kill(c.pid, SIGCONT);
  // The app runs on without its collector: four rings' worth of marks, then
  // it ends.
  const long resumed_at = seen;
  const long more = static_cast<long>(4 * ring_marks);
  long p = seen;
  while (p >= 0 && p < resumed_at + more) p = c.ReadProgress();
  EXPECT_GE(p, resumed_at + more) << "the app did not go on: " << ReadAll(c.err_path);
  std::FILE* stop = std::fopen(stop_file.c_str(), "w");
  ASSERT_NE(stop, nullptr);
  std::fclose(stop);
  long made = p;
  for (long q; (q = c.ReadProgress()) > 0;) made = q;
  int st = c.Wait();
  ASSERT_TRUE(WIFEXITED(st)) << st << ReadAll(c.err_path);
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
  const std::string own = RanksOwnFile(dir_);
  ASSERT_FALSE(own.empty()) << ReadAll(c.err_path);
  auto opened = TraceReader::Open(own);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto& r = *opened;
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_TRUE(HasNote(*meta, "collector exited")) << ReadAll(c.err_path) << Notes(*meta);
  EXPECT_GT(meta->collector_lost_ns, 0u);
  // More than its ring holds: the rank drained it into its own file while it
  // ran (at exit alone it could keep one ring's worth).
  EXPECT_GT(CountNvtx(*r), ring_marks);
  EXPECT_NE(ReadAll(c.err_path).find("collector exited"), std::string::npos);
  ExpectTheMergeJoinsBothParts(dir_, partial_path, own, static_cast<uint64_t>(made));
}

// The collector killed before its first flush: its .partial holds the rank's
// metadata and no record; the merge still joins it with the rank's own file.
TEST_F(CollectorTest, CollectorKilledBeforeItsFirstFlushIsJoinedToo) {
  const std::string stop_file = dir_ + "/stop";
  RunningChild c = Start("marks-until-stopped", {{"STOP_FILE", stop_file}});
  const std::string partial_path = dir_ + "/rank-00000.h5.partial";
  long made = 0;
  const pid_t collector = CollectorServing(c, &made);
  ASSERT_GT(collector, 0) << ReadAll(c.err_path);
  kill(collector, SIGKILL);
  ASSERT_TRUE(WaitUntilDead(collector)) << "the collector outlived SIGKILL";
  std::FILE* stop = std::fopen(stop_file.c_str(), "w");
  ASSERT_NE(stop, nullptr);
  std::fclose(stop);
  for (long q; (q = c.ReadProgress()) > 0;) made = q;
  int st = c.Wait();
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << ReadAll(c.err_path);
  const std::string own = RanksOwnFile(dir_);
  ASSERT_FALSE(own.empty()) << ReadAll(c.err_path);
  const auto [before, after] = MarksInBothParts(partial_path, own);
  EXPECT_GT(after, 0u);
  ExpectTheMergeJoinsBothParts(dir_, partial_path, own, static_cast<uint64_t>(made));
}

// The collector killed, then the rank too (SIGKILL: an out-of-memory kill can
// take both) after it took the ring over: its own file is a .partial, flushed
// every second while it ran. The merge joins the two .partials: every mark
// once, more than one ring could hold (the take-over's flushes), none beyond
// what the rank made, and the rank is truncated, saying so.
TEST_F(CollectorTest, ARankKilledAfterItsCollectorDiedIsJoinedUpToItsLastFlush) {
  const std::string stop_file = dir_ + "/stop";
  RunningChild c = Start("marks-until-stopped", {{"STOP_FILE", stop_file}, {"AON_MEMORY_CAP", "8M"}});
  const uint64_t ring_marks = (uint64_t{2} << 20) / ring::EntryBytes(sizeof(NvtxRecord));
  long made = 0;
  const pid_t collector = CollectorServing(c, &made);
  ASSERT_GT(collector, 0) << ReadAll(c.err_path);
  kill(collector, SIGKILL);
  ASSERT_TRUE(WaitUntilDead(collector)) << "the collector outlived SIGKILL";
  // Four rings' worth of marks and at least two take-over flushes, then the
  // own .partial holds more than a ring.
  const std::string own_partial =
      dir_ + "/rank-00000.pid" + std::to_string(c.pid) + ".h5.partial";
  const long resumed_at = made;
  const auto killed_at = std::chrono::steady_clock::now();
  while (made < resumed_at + static_cast<long>(4 * ring_marks) ||
         std::chrono::steady_clock::now() - killed_at < std::chrono::milliseconds(2500)) {
    const long p = c.ReadProgress();
    ASSERT_GT(p, 0) << "the app did not go on: " << ReadAll(c.err_path);
    made = p;
  }
  bool flushed = false;
  while (!flushed && std::chrono::steady_clock::now() - killed_at < std::chrono::seconds(30)) {
    auto own = TraceReader::Open(own_partial);
    flushed = own.ok() && CountNvtx(**own) > ring_marks;
    if (!flushed) made = std::max(made, c.ReadProgress());
  }
  ASSERT_TRUE(flushed) << own_partial << " never held more than a ring" << ReadAll(c.err_path);
  const std::optional<long> drained = c.StopAndDrain();
  ASSERT_TRUE(drained) << ReadAll(c.err_path);
  made = std::max(made, *drained);
  kill(c.pid, SIGKILL);
  const int st = c.Wait();
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << st;
  {
    auto o = TraceReader::Open(own_partial);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    auto meta = (*o)->ReadRankMetadata();
    ASSERT_TRUE(meta.ok()) << meta.status().ToString();
    EXPECT_GT(meta->collector_lost_ns, 0u);
  }
  merge::MergeOptions options;
  options.job_dir = dir_;
  merge::MergeReport report;
  const Status merged = merge::MergeJob(options, &report);
  ASSERT_TRUE(merged.ok()) << merged.ToString();
  std::string problems;
  for (const std::string& p : report.problems) problems += "\n  " + p;
  EXPECT_TRUE(fs::exists(own_partial + ".joined")) << problems;
  ASSERT_EQ(report.ranks.size(), 1u);
  EXPECT_EQ(report.ranks[0].status, RankStatus::kTruncated) << report.ranks[0].message;
  EXPECT_NE(report.ranks[0].message.find("the rank ended without finishing it"), std::string::npos)
      << report.ranks[0].message;
  auto joined = TraceReader::Open(dir_ + "/rank-00000.h5");
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  auto marks = (*joined)->ReadAll<NvtxRecord>();
  ASSERT_TRUE(marks.ok());
  std::set<uint64_t> times;
  for (const NvtxRecord& n : *marks) times.insert(n.start_ns);
  EXPECT_EQ(times.size(), marks->size()) << "a mark in both parts";
  EXPECT_GT(marks->size(), ring_marks);
  EXPECT_LE(marks->size(), static_cast<uint64_t>(made));
}

// #34 item 8, a third point: the collector killed while the rank finishes. It
// is stopped (SIGSTOP) once it serves the rank, the rank stops marking and
// goes to exit, where it sends FINISH and waits for its file; the collector
// is killed during that wait (or, on a machine so loaded that the rank is not
// there yet, just before). Either way the rank learns that the collector died
// (not a time-out: collector_lost_ns is set only then), writes the rest
// itself and exits 0, and the merge joins both parts, each mark once, none
// beyond what the rank made.
TEST_F(CollectorTest, CollectorKilledWhileTheRankFinishesIsJoinedToo) {
  const std::string stop_file = dir_ + "/stop";
  RunningChild c = Start("marks-until-stopped", {{"STOP_FILE", stop_file}});
  const std::string partial_path = dir_ + "/rank-00000.h5.partial";
  long made = 0;
  const pid_t collector = CollectorServing(c, &made);
  ASSERT_GT(collector, 0) << ReadAll(c.err_path);
  ASSERT_EQ(kill(collector, SIGSTOP), 0);
  std::FILE* stop = std::fopen(stop_file.c_str(), "w");
  ASSERT_NE(stop, nullptr);
  std::fclose(stop);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  kill(collector, SIGKILL);
  ASSERT_TRUE(WaitUntilDead(collector)) << "the collector outlived SIGKILL";
  for (long p; (p = c.ReadProgress()) > 0;) made = p;
  int st = c.Wait();
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << ReadAll(c.err_path);
  const std::string own = RanksOwnFile(dir_);
  ASSERT_FALSE(own.empty()) << ReadAll(c.err_path);
  const auto [before, after] = MarksInBothParts(partial_path, own);
  {
    auto o = TraceReader::Open(own);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    auto meta = (*o)->ReadRankMetadata();
    ASSERT_TRUE(meta.ok());
    EXPECT_GT(meta->collector_lost_ns, 0u) << "the rank waited out its time-out instead"
                                           << Notes(*meta);
  }
  EXPECT_GT(after, 0u);
  ExpectTheMergeJoinsBothParts(dir_, partial_path, own, static_cast<uint64_t>(made));
}

// #34 item 2: the job directory renamed away while the job runs and a link to
// a directory of someone else's choosing put at its path. The collector and the
// rank hold the directory they started with: the rank's file lands there,
// whole (every mark the rank made), and nothing reaches the other directory.
// With AON_COLLECTOR=off the rank writes its own file, through its own hold.
TEST_F(CollectorTest, AJobDirectorySwappedWhileTheJobRunsKeepsItsFiles) {
  const std::string job = dir_;
  for (const bool with_collector : {true, false}) {
    SCOPED_TRACE(with_collector ? "collector" : "AON_COLLECTOR=off");
    const std::string moved = job + (with_collector ? ".moved" : ".moved-off");
    const std::string elsewhere = job + (with_collector ? ".elsewhere" : ".elsewhere-off");
    const std::string stop_file = job + ".stop";
    fs::remove_all(job);
    fs::remove(stop_file);
    std::map<std::string, std::string> env = {{"STOP_FILE", stop_file}};
    if (!with_collector) env["AON_COLLECTOR"] = "off";
    RunningChild c = Start("marks-until-stopped", env);
    long made = 0;
    auto t0 = std::chrono::steady_clock::now();
    // Served (the collector's .partial is there), or a few thousand marks in.
    while ((with_collector ? !fs::exists(job + "/rank-00000.h5.partial") : made < 5000) &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
      made = c.ReadProgress();
      ASSERT_GT(made, 0) << ReadAll(c.err_path);
    }
    ASSERT_EQ(std::rename(job.c_str(), moved.c_str()), 0);
    fs::create_directory(elsewhere);
    fs::create_directory_symlink(elsewhere, job);
    std::FILE* stop = std::fopen(stop_file.c_str(), "w");
    ASSERT_NE(stop, nullptr);
    std::fclose(stop);
    for (long p; (p = c.ReadProgress()) > 0;) made = p;
    int st = c.Wait();
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << ReadAll(c.err_path);
    EXPECT_TRUE(fs::is_empty(elsewhere)) << "a file followed the swapped path";
    auto r = TraceReader::Open(moved + "/rank-00000.h5");
    ASSERT_TRUE(r.ok()) << r.status().ToString() << ReadAll(c.err_path);
    EXPECT_EQ(CountNvtx(**r), static_cast<uint64_t>(made));
    auto meta = (*r)->ReadRankMetadata();
    ASSERT_TRUE(meta.ok());
    EXPECT_EQ(meta->truncated, 0) << Notes(*meta);
    fs::remove(job);
    fs::remove_all(moved);
    fs::remove_all(elsewhere);
    fs::remove(stop_file);
  }
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
  if (geteuid() != 0) AON_SKIP_OR_FAIL(<< "mounting a small tmpfs needs root");
  const std::string disk = dir_ + "/small";
  fs::create_directory(disk);
  if (mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=256k") != 0) {
    AON_SKIP_OR_FAIL(<< "cannot mount a tmpfs here: " << strerror(errno));
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
  auto idle = CallCollector(Endpoint(), CollectorRequest::Quiesce(), 20000);
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
  std::vector<std::pair<uint64_t, uint64_t>> steps;  // (start, duration)
  for (const NvtxRecord& n : *nvtx) {
    if (strings->Get(n.name_id) != "train step") continue;
    steps.emplace_back(n.start_ns, n.end_ns - n.start_ns);
  }
  std::sort(steps.begin(), steps.end());
  ASSERT_GE(steps.size(), 21u) << "the 20 steps before the spike and the spike";
  uint64_t longest = 0;
  for (const auto& [start, d] : steps) longest = std::max(longest, d);
  EXPECT_GE(longest, 40'000'000u);
  // Persisted: the window up to and including the step whose end triggered
  // the last dump, nothing after it. That step is the planted spike, unless
  // the machine's load stretched a later 2 ms step past the spike factor: then
  // that one triggered a dump of its own, and the last dump's note names its
  // duration. Either way the last persisted step is the last trigger.
  std::string last_spike;
  for (const std::string& n : meta->notes)
    if (n.find("step-time spike") != std::string::npos) last_spike = n;
  char took[64];
  std::snprintf(took, sizeof(took), "took %.3f ms,",
                static_cast<double>(steps.back().second) / 1e6);
  EXPECT_NE(last_spike.find(took), std::string::npos)
      << "the last persisted step (" << took << ") did not trigger the last dump: " << last_spike;
  // The steps after it had no trigger of their own and stayed in memory.
  if (steps.size() < 31) {
    EXPECT_TRUE(HasNote(*meta, "were not persisted"));
  }
}

TEST_F(CollectorTest, FlightRecorderDumpsOnRequestAndWhenARankDies) {
  RunningChild c = Start("marks-forever", {{"AON_MODE", "flight"}, {"AON_WINDOW", "60"}});
  for (long p = 0; p < 5000;) p = c.ReadProgress();
  auto answer = CallCollector(Endpoint(), CollectorRequest::Trigger("operator asked"), 10000);
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

// The attack: another user binds the job's socket name (as it could,
// from /proc/net/unix, once a collector of the job held it and exited). The
// agent checks who listens before it sends anything: the squatter gets no byte
// and no ring. The rank then renews the job's key (a name the squatter cannot
// know until the job's collector holds it), starts its collector under it and
// says so once; the application runs to its end and its file is the
// collector's, as without a squatter.
TEST_F(CollectorTest, AnotherUsersSquatterGetsNothingAndTheJobTakesANewName) {
  const auto nobody = Nobody();
  if (!nobody) AON_SKIP_OR_FAIL(<< "needs root and a 'nobody' user (a second user)");
  // The name is the real one (the test, root, can read the key; the squatter
  // could not: see the next test).
  auto endpoint = JobCollector("collector-test", dir_, KeyMode::kCreate);
  ASSERT_TRUE(endpoint.ok()) << endpoint.error().message();
  Squatter squatter(*nobody, endpoint->name);
  ASSERT_TRUE(squatter.bound());
  RunningChild c = Start("nvtx");
  const int st = c.Wait();
  ASSERT_TRUE(WIFEXITED(st)) << st;
  EXPECT_EQ(WEXITSTATUS(st), 0) << ReadAll(c.err_path);
  const auto [bytes, rings] = squatter.Stop();
  EXPECT_EQ(bytes, 0) << "a byte reached another user's socket";
  EXPECT_EQ(rings, 0) << "a ring reached another user's socket";
  const std::string uid = "held by uid " + std::to_string(nobody->uid);
  const std::string err = ReadAll(c.err_path);
  EXPECT_NE(err.find(uid), std::string::npos) << err;
  EXPECT_EQ(err.find(uid), err.rfind(uid)) << "said more than once: " << err;
  auto renewed = JobCollector("collector-test", dir_, KeyMode::kRead);
  ASSERT_TRUE(renewed.ok()) << renewed.error().message();
  EXPECT_NE(renewed->name, endpoint->name) << "the key was not renewed";
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  EXPECT_TRUE(HasNote(*meta, uid)) << Notes(*meta);
  EXPECT_TRUE(HasNote(*meta, "collector key was renewed")) << Notes(*meta);
  EXPECT_TRUE(HasNote(*meta, "collector pid")) << "not written by a collector: " << Notes(*meta);
  EXPECT_FALSE(HasNote(*meta, "writes its trace itself")) << Notes(*meta);
  EXPECT_EQ(meta->truncated, 0);
  EXPECT_GT(CountNvtx(*r), 0u) << "the rank's records were lost";
}

// What another user can compute (the uid and the hash of job id and directory)
// is not the name: without the key in the job directory, which only the job's
// user can read, a squatter holds a name nobody uses and the job is profiled
// through its own collector as usual.
TEST_F(CollectorTest, AGuessedNameHeldByAnotherUserDoesNotStopTheCollector) {
  const auto nobody = Nobody();
  if (!nobody) AON_SKIP_OR_FAIL(<< "needs root and a 'nobody' user (a second user)");
  const std::string key(kCollectorKeyChars, '0');
  const std::string real_shape = CollectorSocketName(geteuid(), "collector-test", dir_, key);
  // The old name had no key; a guess at the key is as good as any other.
  Squatter without_key(*nobody, real_shape.substr(0, real_shape.size() - key.size() - 1));
  Squatter guessed_key(*nobody, real_shape);
  ASSERT_TRUE(without_key.bound());
  ASSERT_TRUE(guessed_key.bound());
  RunningChild c = Start("nvtx");
  const int st = c.Wait();
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << ReadAll(c.err_path);
  EXPECT_EQ(without_key.Stop(), std::make_pair(0L, 0L));
  EXPECT_EQ(guessed_key.Stop(), std::make_pair(0L, 0L));
  auto r = OpenRank0();
  ASSERT_TRUE(r);
  auto meta = r->ReadRankMetadata();
  ASSERT_TRUE(meta.ok());
  bool by_collector = false;
  for (const std::string& n : meta->notes) by_collector |= n.starts_with("collector pid");
  EXPECT_TRUE(by_collector) << "not written by the node collector: " << Notes(*meta)
                            << ReadAll(c.err_path);
  EXPECT_FALSE(HasNote(*meta, "held by uid")) << Notes(*meta);
}

// The collector's side: it takes a ring (HELLO) only from its own user, and
// control requests from its own user or root (slurmstepd). Here the collector
// runs as the other user and root knocks.
TEST_F(CollectorTest, ACollectorTakesRingsOnlyFromItsOwnUserAndControlFromRoot) {
  const auto nobody = Nobody();
  if (!nobody) AON_SKIP_OR_FAIL(<< "needs root and a 'nobody' user (a second user)");
  const std::string job_dir = dir_ + "/nobody-job";
  fs::create_directory(job_dir);
  ASSERT_EQ(chown(job_dir.c_str(), nobody->uid, nobody->gid), 0);
  chmod(dir_.c_str(), 0711);  // nobody may enter its own job directory below
  const std::string name =
      CollectorSocketName(nobody->uid, "nobody-job", job_dir, std::string(kCollectorKeyChars, 'e'));
  const std::string collector = std::string(AON_BUILD_BIN_DIR) + "/aon-collector";
  const pid_t pid = fork();
  if (pid == 0) {
    BecomeOrDie(*nobody);
    execl(collector.c_str(), collector.c_str(), "--socket-name", name.c_str(), "--output-dir",
          job_dir.c_str(), "--idle-exit-ms", "30000", nullptr);
    _exit(127);
  }
  const CollectorEndpoint endpoint{name, nobody->uid};
  auto connected = ConnectToCollector(endpoint);
  // Up to 30 s: how fast the collector starts is not under test here.
  for (int i = 0; i < 3000 && connected.code() == CollectorErrc::kNoCollector; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    connected = ConnectToCollector(endpoint);
  }
  ASSERT_TRUE(connected.ok()) << connected.error().message();
  // Root's ring: refused, and said why.
  auto region = ring::Region::Create(4096, getpid(), 0);
  ASSERT_TRUE(region.ok());
  RankMetadata hello;
  hello.rank = 0;
  ASSERT_TRUE(
      SendRequest(*connected, CollectorRequest::Hello(EncodeRankMetadata(hello)), region->fd())
          .ok());
  auto refused = ReceiveReply(*connected, CollectorVerb::kHello, 10000);
  close(*connected);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), CollectorErrc::kRefused);
  EXPECT_NE(refused.error().message().find("only from this collector's user"), std::string::npos)
      << refused.error().message();
  EXPECT_FALSE(fs::exists(job_dir + "/rank-00000.h5.partial")) << "a file was made for root's ring";
  // Root's QUIESCE (what slurmstepd sends): answered, and the collector ends.
  auto idle = CallCollector(endpoint, CollectorRequest::Quiesce(), 20000);
  EXPECT_TRUE(idle.ok()) << idle.error().message();
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  chmod(dir_.c_str(), 0700);
}

}  // namespace
}  // namespace aon
