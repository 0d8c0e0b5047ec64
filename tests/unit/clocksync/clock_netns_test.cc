// Clock sync between real "nodes" on one machine: each node is a process in its
// own network namespace (reached through a veth pair) and its own time
// namespace, whose CLOCK_MONOTONIC is shifted by a known offset (whole seconds,
// a sub-second one, a negative one). The reference clock is a PingServer in the
// root namespaces; each node runs the ping-pong client on its own clock. The
// true server-minus-client offset is minus the node's namespace offset, so
// every estimate is checked against ground truth the estimator never sees:
//   (a) direct veth links;
//   (b) through aon-delay-relay, 200 us +- 50 us per direction (uniform);
//   (c) (b) plus 50 ppm drift over a simulated 10-minute run.
// Each case prints a table: node, true offset, estimated, error, bound.
//
// Drift test hook (c): the kernel cannot make a namespace's clock run at
// another rate, so the client stamps with a scaled clock
//     C = n0 + (N + W - n0) * (1 + drift)
// (N: the node's real CLOCK_MONOTONIC, n0: a reference, W: a warp), and the
// server stamps R + W (R: the root's CLOCK_MONOTONIC). W jumps by 30 s before
// each measurement, on both sides alike, so 21 measurements taken in a few real
// seconds sit 30 s apart in simulated time, and the offset really drifts by
// 30 ms over the run. Truth at client time C is exact:
//     server - client = n0 + (C - n0) / (1 + drift) - node_offset - C.
//
// Needs root (unshare of network and time namespaces, veth links, `ip`); skips
// with the reason otherwise.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "aon/base/fd_io.h"
#include "aon/base/timebase.h"
#include "aon/clocksync/clock_estimator.h"
#include "aon/clocksync/ping_pong.h"
#include "skip_or_fail.h"

namespace aon::clocksync {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

int Sh(const std::string& cmd) {
  const int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// A command to a node process, and its reply.
struct NodeCmd {
  int32_t op;  // 0 quit, 1 ping, 2 read clock
  char address[16];
  uint16_t port;
  int32_t rounds;
  int64_t warp_ns;
  double drift;
  int64_t n0;
};

// A process in its own network + time namespace, serving NodeCmds from the
// test over pipes (it is forked before any thread of the test exists).
class Node {
 public:
  // offset_ns: how far the node's CLOCK_MONOTONIC is ahead of the root's.
  static std::unique_ptr<Node> Start(int index, int64_t offset_ns, std::string* error) {
    int to_node[2], from_node[2];
    if (pipe2(to_node, O_CLOEXEC) != 0 || pipe2(from_node, O_CLOEXEC) != 0) {
      *error = "pipe failed";
      return nullptr;
    }
    const pid_t pid = fork();
    if (pid < 0) {
      *error = "fork failed";
      return nullptr;
    }
    if (pid == 0) {
      close(to_node[1]);
      close(from_node[0]);
      ChildMain(to_node[0], from_node[1], offset_ns);
      _exit(0);
    }
    close(to_node[0]);
    close(from_node[1]);
    std::unique_ptr<Node> node(new Node(pid, to_node[1], from_node[0], offset_ns));
    char status[256] = {};
    if (!ReadFull(node->from_, status, sizeof(status)) || status[0] != 0) {
      *error = status[0] != 0 ? std::string(status + 1) : "node process died";
      return nullptr;
    }
    // The veth pair: host side in the root namespace, peer moved into the node's.
    const int tag = getpid() % 10000;
    const int net = 64 + getpid() % 128;  // 10.<net>.<index>.0/24, unlikely to collide
    node->host_if_ = "acs" + std::to_string(tag) + "h" + std::to_string(index);
    const std::string peer = "acs" + std::to_string(tag) + "n" + std::to_string(index);
    const std::string prefix = "10." + std::to_string(net) + "." + std::to_string(index) + ".";
    node->host_ip_ = prefix + "1";
    node->node_ip_ = prefix + "2";
    Sh("ip link del " + node->host_if_);
    const std::string in_node = "nsenter --net=/proc/" + std::to_string(pid) + "/ns/net ";
    const std::vector<std::string> steps = {
        "ip link add " + node->host_if_ + " type veth peer name " + peer,
        "ip link set " + peer + " netns " + std::to_string(pid),
        "ip addr add " + node->host_ip_ + "/24 dev " + node->host_if_,
        "ip link set " + node->host_if_ + " up",
        in_node + "ip link set lo up",
        in_node + "ip addr add " + node->node_ip_ + "/24 dev " + peer,
        in_node + "ip link set " + peer + " up",
    };
    for (const auto& s : steps) {
      if (Sh(s) != 0) {
        *error = "'" + s + "' failed";
        return nullptr;
      }
    }
    return node;
  }

  ~Node() {
    NodeCmd quit{};
    WriteFull(to_, &quit, sizeof(quit));
    close(to_);
    close(from_);
    int st = 0;
    waitpid(pid_, &st, 0);  // the namespace, and with it the veth pair, goes away
  }

  int64_t offset_ns() const { return offset_ns_; }
  const std::string& host_ip() const { return host_ip_; }
  pid_t pid() const { return pid_; }

  // The node's CLOCK_MONOTONIC, read in the node.
  uint64_t Now() {
    NodeCmd c{};
    c.op = 2;
    uint64_t now = 0;
    if (!WriteFull(to_, &c, sizeof(c)) || !ReadFull(from_, &now, sizeof(now))) return 0;
    return now;
  }

  // Ping from inside the node with its (optionally warped and scaled) clock.
  bool Ping(const std::string& address, uint16_t port, int rounds, std::vector<PingSample>* out,
            std::string* error, int64_t warp_ns = 0, double drift = 0.0, int64_t n0 = 0) {
    NodeCmd c{};
    c.op = 1;
    std::snprintf(c.address, sizeof(c.address), "%s", address.c_str());
    c.port = port;
    c.rounds = rounds;
    c.warp_ns = warp_ns;
    c.drift = drift;
    c.n0 = n0;
    int32_t ok = 0;
    uint32_t n = 0;
    if (!WriteFull(to_, &c, sizeof(c)) || !ReadFull(from_, &ok, sizeof(ok)) ||
        !ReadFull(from_, &n, sizeof(n))) {
      *error = "node process died";
      return false;
    }
    if (ok != 0) {
      error->assign(n, '\0');
      ReadFull(from_, error->data(), n);
      return false;
    }
    out->resize(n);
    return ReadFull(from_, out->data(), n * sizeof(PingSample));
  }

 private:
  Node(pid_t pid, int to, int from, int64_t offset_ns)
      : pid_(pid), to_(to), from_(from), offset_ns_(offset_ns) {}

  static void ChildMain(int in, int out, int64_t offset_ns) {
    char status[256] = {};
    auto fail = [&](const std::string& what) {
      status[0] = 1;
      std::snprintf(status + 1, sizeof(status) - 1, "%s: %s", what.c_str(), std::strerror(errno));
      WriteFull(out, status, sizeof(status));
      _exit(1);
    };
    if (unshare(CLONE_NEWNET | CLONE_NEWTIME) != 0) fail("unshare(CLONE_NEWNET | CLONE_NEWTIME)");
    // The new time namespace is for our children until someone enters it; its
    // offsets can be set until then (man 7 time_namespaces). Sub-second and
    // negative offsets: seconds floored, nanoseconds in [0, 1e9).
    int64_t secs = offset_ns / kSecond, nanos = offset_ns % kSecond;
    if (nanos < 0) {
      nanos += kSecond;
      secs -= 1;
    }
    char offsets[96];
    const int len = std::snprintf(offsets, sizeof(offsets), "monotonic %lld %lld\n",
                                  static_cast<long long>(secs), static_cast<long long>(nanos));
    const int ofd = open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
    if (ofd < 0 || write(ofd, offsets, static_cast<size_t>(len)) != len) {
      fail("writing /proc/self/timens_offsets");
    }
    close(ofd);
    const int tfd = open("/proc/self/ns/time_for_children", O_RDONLY | O_CLOEXEC);
    if (tfd < 0 || setns(tfd, CLONE_NEWTIME) != 0) fail("entering the new time namespace");
    close(tfd);
    WriteFull(out, status, sizeof(status));

    NodeCmd c{};
    while (ReadFull(in, &c, sizeof(c)) && c.op != 0) {
      if (c.op == 2) {
        const uint64_t now = TimebaseNowNs();
        WriteFull(out, &now, sizeof(now));
        continue;
      }
      const int64_t warp = c.warp_ns, n0 = c.n0;
      const double drift = c.drift;
      auto clock = [=]() -> uint64_t {
        const int64_t d = static_cast<int64_t>(TimebaseNowNs()) + warp - n0;
        return static_cast<uint64_t>(n0 + d + std::llround(static_cast<double>(d) * drift));
      };
      auto samples = aon::clocksync::Ping(c.address, c.port, c.rounds, clock);
      const int32_t ok = samples.ok() ? 0 : 1;
      WriteFull(out, &ok, sizeof(ok));
      if (samples.ok()) {
        const auto n = static_cast<uint32_t>(samples->size());
        WriteFull(out, &n, sizeof(n));
        WriteFull(out, samples->data(), n * sizeof(PingSample));
      } else {
        const std::string msg = samples.status().ToString();
        const auto n = static_cast<uint32_t>(msg.size());
        WriteFull(out, &n, sizeof(n));
        WriteFull(out, msg.data(), n);
      }
    }
  }

  pid_t pid_;
  int to_, from_;
  int64_t offset_ns_;
  std::string host_if_, host_ip_, node_ip_;
};

// aon-delay-relay in the root namespaces, forwarding to 127.0.0.1:target.
class Relay {
 public:
  static std::unique_ptr<Relay> Start(uint16_t target, double delay_us, double jitter_us,
                                      uint64_t seed, std::string* error) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return nullptr;
    const std::string bin = std::string(AON_BUILD_BIN_DIR) + "/aon-delay-relay";
    const std::vector<std::string> args = {bin,
                                           "0.0.0.0",
                                           "0",
                                           "127.0.0.1",
                                           std::to_string(target),
                                           "--delay-us",
                                           std::to_string(delay_us),
                                           "--jitter-us",
                                           std::to_string(jitter_us),
                                           "--seed",
                                           std::to_string(seed),
                                           "--seconds",
                                           "120"};
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      dup2(p[1], 1);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
    close(p[1]);
    FILE* f = fdopen(p[0], "r");
    unsigned port = 0;
    std::unique_ptr<Relay> r(new Relay(pid, f));
    if (f == nullptr || std::fscanf(f, "port=%u", &port) != 1) {
      *error = "aon-delay-relay (" + bin + ") did not start";
      return nullptr;
    }
    r->port_ = static_cast<uint16_t>(port);
    return r;
  }
  ~Relay() {
    kill(pid_, SIGTERM);
    int st = 0;
    waitpid(pid_, &st, 0);
    if (out_ != nullptr) std::fclose(out_);
  }
  uint16_t port() const { return port_; }

 private:
  Relay(pid_t pid, FILE* out) : pid_(pid), out_(out) {}
  pid_t pid_;
  FILE* out_;
  uint16_t port_ = 0;
};

struct NodeSpec {
  const char* name;
  int64_t offset_ns;  // node CLOCK_MONOTONIC - root CLOCK_MONOTONIC
};
constexpr NodeSpec kNodes[] = {
    {"node-a (+12 s)", 12 * kSecond},
    {"node-b (+0.35 s)", 350'000'000},
    {"node-c (-3.2 s)", -3'200'000'000},
};

struct Row {
  std::string node;
  int64_t truth, estimate, error;
  uint64_t bound, rtt;
};

void PrintTable(const std::string& title, const std::vector<Row>& rows) {
  std::printf("\n%s\n", title.c_str());
  std::printf(
      "| node | true offset (ns) | estimated (ns) | error (ns) | bound (ns) | min rtt (ns) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const auto& r : rows) {
    std::printf("| %s | %lld | %lld | %lld | %llu | %llu |\n", r.node.c_str(),
                static_cast<long long>(r.truth), static_cast<long long>(r.estimate),
                static_cast<long long>(r.error), static_cast<unsigned long long>(r.bound),
                static_cast<unsigned long long>(r.rtt));
  }
  std::fflush(stdout);
}

class ClockNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) AON_SKIP_OR_FAIL(<< "needs root: network + time namespaces and veth links");
    if (access("/proc/self/timens_offsets", F_OK) != 0) {
      AON_SKIP_OR_FAIL(
          << "time namespaces unavailable (no /proc/self/timens_offsets; Linux >= 5.6)");
    }
    if (Sh("ip -V") != 0 || Sh("nsenter --version") != 0) {
      AON_SKIP_OR_FAIL(<< "needs the ip (iproute2) and nsenter (util-linux) commands");
    }
    for (size_t i = 0; i < std::size(kNodes); ++i) {
      std::string error;
      auto node = Node::Start(static_cast<int>(i), kNodes[i].offset_ns, &error);
      if (node == nullptr) {
        nodes_.clear();
        AON_SKIP_OR_FAIL(<< "cannot make node " << i
                         << " (network + time namespace, veth): " << error);
      }
      // The namespace really shifted the clock: the node's reading, against ours
      // around it, is off by the offset (to within the pipe round trip).
      const uint64_t before = TimebaseNowNs();
      const uint64_t there = node->Now();
      const uint64_t after = TimebaseNowNs();
      const int64_t seen =
          static_cast<int64_t>(there) - static_cast<int64_t>(before / 2 + after / 2);
      ASSERT_LT(std::llabs(seen - kNodes[i].offset_ns), 50'000'000)
          << kNodes[i].name << ": CLOCK_MONOTONIC shifted by " << seen << " ns";
      nodes_.push_back(std::move(node));
    }
  }

  // Ping each node's way to `port` on its host-side veth address, min-RTT estimate.
  std::vector<Row> MeasureAll(uint16_t port, int rounds) {
    std::vector<Row> rows;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      std::vector<PingSample> samples;
      std::string error;
      EXPECT_TRUE(nodes_[i]->Ping(nodes_[i]->host_ip(), port, rounds, &samples, &error)) << error;
      auto m = EstimateOffset(samples);
      EXPECT_TRUE(m.ok()) << m.status().ToString();
      if (!m.ok()) continue;
      const int64_t truth = -nodes_[i]->offset_ns();
      rows.push_back(
          Row{kNodes[i].name, truth, m->offset_ns, m->offset_ns - truth, m->bound_ns, m->rtt_ns});
    }
    return rows;
  }

  std::vector<std::unique_ptr<Node>> nodes_;
};

TEST_F(ClockNetns, DirectVethLinks) {
  auto server = PingServer::Start("0.0.0.0", 0, [] { return TimebaseNowNs(); });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const auto rows = MeasureAll((*server)->port(), 300);
  ASSERT_EQ(rows.size(), nodes_.size());
  PrintTable("(a) direct veth links, 300 rounds", rows);
  for (const auto& r : rows) {
    // The guarantee: the true offset lies within the stated bound. How close the
    // estimate gets (the 1 us target; 0.3-0.4 us on an idle host's veth) depends
    // on the host's load and is measured by bench/clock_benchmark.cc
    // (bench/RESULTS.md, "Clock synchronization"), not asserted here.
    EXPECT_LE(static_cast<uint64_t>(std::llabs(r.error)), r.bound) << r.node;
    RecordProperty(r.node + " error_ns", std::to_string(r.error));
  }
}

TEST_F(ClockNetns, ThroughAJitteryRelay) {
  auto server = PingServer::Start("127.0.0.1", 0, [] { return TimebaseNowNs(); });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::string error;
  auto relay = Relay::Start((*server)->port(), 200, 50, 42, &error);
  ASSERT_NE(relay, nullptr) << error;
  // 2000 rounds keep the bound (and usually the error) small, but on a loaded
  // 2-core VM the relay's own wake-up latency (35-50 us per hop) can make even
  // the best exchange asymmetric by tens of us: a fresh clone's CI saw 13-14 us
  // errors within a 213 us bound. So the test asserts the guarantee (error
  // within the bound, the relay's delay really applied); the 10 us accuracy
  // target for jittery links is measured in bench/clock_benchmark.cc.
  const auto rows = MeasureAll(relay->port(), 2000);
  ASSERT_EQ(rows.size(), nodes_.size());
  PrintTable("(b) through aon-delay-relay, 200 us +- 50 us each way, 2000 rounds", rows);
  for (const auto& r : rows) {
    EXPECT_LE(static_cast<uint64_t>(std::llabs(r.error)), r.bound) << r.node;
    EXPECT_GE(r.rtt, 300'000u) << r.node << ": the relay's delay did not apply";
    RecordProperty(r.node + " error_ns", std::to_string(r.error));
  }
}

TEST_F(ClockNetns, FiftyPpmDriftOverASimulatedTenMinutesThroughTheRelay) {
  std::atomic<int64_t> warp{0};
  auto server = PingServer::Start("127.0.0.1", 0, [&] {
    return static_cast<uint64_t>(static_cast<int64_t>(TimebaseNowNs()) + warp.load());
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::string error;
  auto relay = Relay::Start((*server)->port(), 200, 50, 7, &error);
  ASSERT_NE(relay, nullptr) << error;

  std::vector<Row> rows;
  std::printf(
      "\n(c) 50 ppm drift, simulated 10 minutes (21 measurements 30 s apart, 300 rounds "
      "each) through the relay, 200 us +- 50 us\n");
  std::printf(
      "| node | drift | true offset at start (ns) | fitted drift | worst error (ns) | "
      "bound (ns) |\n|---|---:|---:|---:|---:|---:|\n");
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const double drift = i % 2 == 0 ? 50e-6 : -50e-6;
    const int64_t off = nodes_[i]->offset_ns();
    const int64_t n0 = static_cast<int64_t>(TimebaseNowNs()) + off;  // ~ the node's clock now
    std::vector<OffsetMeasurement> ms;
    for (int k = 0; k <= 20; ++k) {
      warp.store(k * 30 * kSecond);
      std::vector<PingSample> samples;
      ASSERT_TRUE(nodes_[i]->Ping(nodes_[i]->host_ip(), relay->port(), 300, &samples, &error,
                                  warp.load(), drift, n0))
          << error;
      auto m = EstimateOffset(samples);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      ms.push_back(*m);
    }
    auto model = FitClockModel(ms);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto truth = [&](uint64_t c) {
      const double since = static_cast<double>(static_cast<int64_t>(c) - n0);
      return n0 + static_cast<int64_t>(std::llround(since / (1.0 + drift))) - off -
             static_cast<int64_t>(c);
    };
    int64_t worst = 0;
    const uint64_t span = model->span_end_ns - model->span_begin_ns;
    EXPECT_GE(span, 600'000'000'000ull);
    for (int j = 0; j <= 200; ++j) {
      const uint64_t c = model->span_begin_ns + span / 200 * static_cast<uint64_t>(j);
      const int64_t err = model->OffsetAt(c) - truth(c);
      if (std::llabs(err) > std::llabs(worst)) worst = err;
      EXPECT_LE(static_cast<uint64_t>(std::llabs(err)), model->bound_ns)
          << kNodes[i].name << " at +" << static_cast<double>(c - model->span_begin_ns) / 1e9
          << " s";
    }
    // If the offset is within the bound at both ends of the span, the fitted
    // slope cannot be off by more than 2 * bound / span (about 0.4 ppm here, a
    // hundredth of the 50 ppm injected): the guarantee that follows from the
    // bound, whatever the load. The 10 us accuracy target is benchmarked.
    EXPECT_NEAR(model->drift, -drift / (1.0 + drift),
                2.0 * static_cast<double>(model->bound_ns) / static_cast<double>(span))
        << kNodes[i].name;
    std::printf("| %s | %+.0f ppm | %lld | %+.3f ppm | %lld | %llu |\n", kNodes[i].name,
                drift * 1e6, static_cast<long long>(truth(model->span_begin_ns)),
                model->drift * 1e6, static_cast<long long>(worst),
                static_cast<unsigned long long>(model->bound_ns));
    RecordProperty(std::string(kNodes[i].name) + " worst_error_ns", std::to_string(worst));
  }
  std::fflush(stdout);
}

}  // namespace
}  // namespace aon::clocksync
