// aon-delay-relay: a user-space TCP relay that delays every chunk it forwards
// by base +- jitter, for clock-sync tests and benchmarks where tc netem is not
// available. It listens, connects each accepted client to the target, and
// forwards bytes both ways; each chunk read is released at
//     max(arrival + delay, release of the previous chunk in that direction)
// so order is preserved per direction (like a link with a queue). Delays are
// drawn per chunk and per direction from a seeded generator (uniform in
// [base - jitter, base + jitter], or normal with sd = jitter, clipped at 0);
// --asym-us adds to the client->server direction only.
//
//   aon-delay-relay LISTEN_ADDR LISTEN_PORT TARGET_ADDR TARGET_PORT
//       [--delay-us 200] [--jitter-us 50] [--dist uniform|normal] [--asym-us 0]
//       [--seed 1] [--seconds 600] [--spin-us 20]
//
// Prints "port=<p>" once listening, serves any number of connections (two
// threads each), and exits after --seconds or on SIGTERM/SIGINT. Timing: a
// thread sleeps (1 ns timer slack) until --spin-us before a release and spins
// the rest, so releases are late by scheduler noise only, never early.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "aon/base/fd_io.h"

namespace {

using aon::WriteFull;

struct Options {
  std::string listen_addr, target_addr;
  uint16_t listen_port = 0, target_port = 0;
  double delay_us = 200, jitter_us = 50, asym_us = 0, spin_us = 20;
  bool normal = false;
  uint64_t seed = 1;
  int seconds = 600;
};

std::atomic<bool> g_stop{false};

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

timespec ToTimespec(uint64_t ns) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1000000000ull);
  ts.tv_nsec = static_cast<long>(ns % 1000000000ull);
  return ts;
}

struct Chunk {
  uint64_t release_ns;
  std::vector<uint8_t> bytes;
};

// One direction of one connection: src -> (delay) -> dst.
void Pump(int src, int dst, double base_us, const Options& o, uint64_t seed) {
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uni(base_us - o.jitter_us, base_us + o.jitter_us);
  std::normal_distribution<double> nor(base_us, o.jitter_us);
  auto draw_ns = [&]() -> uint64_t {
    const double us = o.normal ? nor(rng) : uni(rng);
    return us <= 0 ? 0 : static_cast<uint64_t>(us * 1000.0);
  };
  const uint64_t spin_ns = static_cast<uint64_t>(o.spin_us * 1000.0);
  std::deque<Chunk> queue;
  uint64_t last_release = 0;
  bool src_open = true;
  uint8_t buf[65536];
  while (!g_stop.load(std::memory_order_relaxed)) {
    uint64_t now = NowNs();
    while (!queue.empty() && queue.front().release_ns <= now) {
      if (!WriteFull(dst, queue.front().bytes.data(), queue.front().bytes.size())) {
        src_open = false;
        queue.clear();
        break;
      }
      queue.pop_front();
      now = NowNs();
    }
    if (!src_open && queue.empty()) break;
    bool readable = false;
    if (!queue.empty() && queue.front().release_ns <= now + spin_ns) {
      // Spin the last stretch, still picking up new input (it only queues behind).
      pollfd pfd{src, POLLIN, 0};
      readable = src_open && poll(&pfd, 1, 0) > 0;
    } else {
      // Sleep until the next release (less the spin), or for new input.
      timespec ts =
          ToTimespec(queue.empty() ? 100'000'000ull : queue.front().release_ns - spin_ns - now);
      pollfd pfd{src, static_cast<short>(src_open ? POLLIN : 0), 0};
      readable = ppoll(&pfd, src_open ? 1 : 0, &ts, nullptr) > 0;
    }
    if (!readable) continue;
    const ssize_t got = read(src, buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      src_open = false;
      continue;
    }
    const uint64_t arrival = NowNs();
    last_release = std::max(arrival + draw_ns(), last_release);
    queue.push_back(Chunk{last_release, std::vector<uint8_t>(buf, buf + got)});
  }
  // Propagate the close: the peer sees EOF once everything before it arrived.
  shutdown(dst, SHUT_WR);
}

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int ConnectTarget(const Options& o) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(o.target_port);
  inet_pton(AF_INET, o.target_addr.c_str(), &sa.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  NoDelay(fd);
  return fd;
}

void Connection(int client, const Options& o, uint64_t index) {
  const int server = ConnectTarget(o);
  if (server < 0) {
    std::fprintf(stderr, "aon-delay-relay: cannot connect to %s:%u: %s\n", o.target_addr.c_str(),
                 o.target_port, std::strerror(errno));
    close(client);
    return;
  }
  NoDelay(client);
  std::thread up(
      [&] { Pump(client, server, o.delay_us + o.asym_us, o, o.seed * 1000003 + 2 * index); });
  Pump(server, client, o.delay_us, o, o.seed * 1000003 + 2 * index + 1);
  up.join();
  close(server);
  close(client);
}

int Usage() {
  std::fprintf(stderr,
               "usage: aon-delay-relay LISTEN_ADDR LISTEN_PORT TARGET_ADDR TARGET_PORT "
               "[--delay-us US] [--jitter-us US] [--dist uniform|normal] [--asym-us US] "
               "[--seed N] [--seconds S] [--spin-us US]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) return Usage();
  Options o;
  o.listen_addr = argv[1];
  o.listen_port = static_cast<uint16_t>(std::atoi(argv[2]));
  o.target_addr = argv[3];
  o.target_port = static_cast<uint16_t>(std::atoi(argv[4]));
  for (int i = 5; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return Usage();
    const char* v = argv[++i];
    if (a == "--delay-us")
      o.delay_us = std::atof(v);
    else if (a == "--jitter-us")
      o.jitter_us = std::atof(v);
    else if (a == "--asym-us")
      o.asym_us = std::atof(v);
    else if (a == "--spin-us")
      o.spin_us = std::atof(v);
    else if (a == "--seed")
      o.seed = std::strtoull(v, nullptr, 10);
    else if (a == "--seconds")
      o.seconds = std::atoi(v);
    else if (a == "--dist") {
      if (std::string(v) == "normal")
        o.normal = true;
      else if (std::string(v) != "uniform")
        return Usage();
    } else {
      return Usage();
    }
  }
  sockaddr_in tsa{};
  if (inet_pton(AF_INET, o.target_addr.c_str(), &tsa.sin_addr) != 1) return Usage();

  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop.store(true); };
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in la{};
  la.sin_family = AF_INET;
  la.sin_port = htons(o.listen_port);
  if (inet_pton(AF_INET, o.listen_addr.c_str(), &la.sin_addr) != 1) return Usage();
  if (bind(lfd, reinterpret_cast<sockaddr*>(&la), sizeof(la)) != 0 || listen(lfd, 256) != 0) {
    std::fprintf(stderr, "aon-delay-relay: cannot listen on %s:%u: %s\n", o.listen_addr.c_str(),
                 o.listen_port, std::strerror(errno));
    return 1;
  }
  socklen_t len = sizeof(la);
  getsockname(lfd, reinterpret_cast<sockaddr*>(&la), &len);
  std::printf("port=%u\n", ntohs(la.sin_port));
  std::fflush(stdout);

  const uint64_t deadline = NowNs() + static_cast<uint64_t>(o.seconds) * 1000000000ull;
  uint64_t index = 0;
  while (!g_stop.load() && NowNs() < deadline) {
    pollfd pfd{lfd, POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    const int c = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    std::thread(Connection, c, std::cref(o), index++).detach();
  }
  close(lfd);
  return 0;  // detached connections end with the process
}
