// aon-bench-clock: clock synchronization start-up time and accuracy vs rounds
// (RESULTS.md, "Clock synchronization: start-up time and accuracy vs rounds").
//
//   aon-bench-clock [--relay PATH] [--trials N] [--nodes N] [--rounds LIST]
//
// 1. Start-up: N simulated nodes (default 64 client threads) ping one
//    PingServer whose clock is ahead by a known offset, `rounds` exchanges each,
//    and keep the minimum round trip; the time is from spawning the clients to
//    the last estimate (median and max of 5 repetitions). On loopback and
//    through aon-delay-relay (200 us +- 50 us each way).
// 2. Accuracy vs rounds (--rounds, default 1,2,4,8,16,32,300,2000): fresh
//    connections, |estimate - injected offset| and the reported bound (median
//    and max over --trials; at most 20 trials from 300 rounds up), whether every
//    error stayed within its bound, and how many trials met the accuracy target
//    (1 us on loopback, 10 us through the jittery relay: the targets the clock
//    tests in tests/unit/clocksync/ do not assert, since load decides them).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aon/clocksync/clock_estimator.h"
#include "aon/clocksync/ping_pong.h"
#include "aon/base/timebase.h"

namespace {

using aon::TimebaseNowNs;
using namespace aon::clocksync;

constexpr int64_t kInjected = 2'718'281'828;  // server clock - client clock

struct Relay {
  pid_t pid = -1;
  uint16_t port = 0;
  ~Relay() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  }
};

std::unique_ptr<Relay> StartRelay(const std::string& bin, uint16_t target) {
  int p[2];
  if (pipe(p) != 0) return nullptr;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    close(p[0]);
    const std::string t = std::to_string(target);
    execl(bin.c_str(), bin.c_str(), "127.0.0.1", "0", "127.0.0.1", t.c_str(), "--delay-us", "200",
          "--jitter-us", "50", "--seed", "1", "--seconds", "600", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(p[1]);
  auto r = std::make_unique<Relay>();
  r->pid = pid;
  FILE* f = fdopen(p[0], "r");
  unsigned port = 0;
  if (f == nullptr || std::fscanf(f, "port=%u", &port) != 1) return nullptr;
  std::fclose(f);
  r->port = static_cast<uint16_t>(port);
  return r;
}

template <typename T>
T Median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct StartupResult {
  double ms;
  int64_t worst_error;
  uint64_t worst_bound;
  int failures;
};

StartupResult Startup(uint16_t port, int nodes, int rounds) {
  std::vector<OffsetMeasurement> ms(static_cast<size_t>(nodes));
  std::vector<int> ok(static_cast<size_t>(nodes), 0);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < nodes; ++i) {
    threads.emplace_back([&, i] {
      auto s = Ping("127.0.0.1", port, rounds, [] { return TimebaseNowNs(); }, 10'000);
      if (!s.ok()) return;
      auto m = EstimateOffset(*s);
      if (!m.ok()) return;
      ms[static_cast<size_t>(i)] = *m;
      ok[static_cast<size_t>(i)] = 1;
    });
  }
  for (auto& t : threads) t.join();
  const auto t1 = std::chrono::steady_clock::now();
  StartupResult r{std::chrono::duration<double, std::milli>(t1 - t0).count(), 0, 0, 0};
  for (int i = 0; i < nodes; ++i) {
    if (!ok[static_cast<size_t>(i)]) {
      ++r.failures;
      continue;
    }
    const auto& m = ms[static_cast<size_t>(i)];
    r.worst_error = std::max<int64_t>(r.worst_error, std::llabs(m.offset_ns - kInjected));
    r.worst_bound = std::max(r.worst_bound, m.bound_ns);
    if (static_cast<uint64_t>(std::llabs(m.offset_ns - kInjected)) > m.bound_ns) ++r.failures;
  }
  return r;
}

void StartupTable(const char* link, uint16_t port, int nodes, const std::vector<int>& rounds) {
  for (int r : rounds) {
    std::vector<double> times;
    int64_t worst_error = 0;
    uint64_t worst_bound = 0;
    int failures = 0;
    for (int rep = 0; rep < 5; ++rep) {
      const auto s = Startup(port, nodes, r);
      times.push_back(s.ms);
      worst_error = std::max(worst_error, s.worst_error);
      worst_bound = std::max(worst_bound, s.worst_bound);
      failures += s.failures;
    }
    std::printf("| %s | %d | %d | %.1f | %.1f | %.2f | %.2f | %d |\n", link, nodes, r, Median(times),
                *std::max_element(times.begin(), times.end()), static_cast<double>(worst_error) / 1e3,
                static_cast<double>(worst_bound) / 1e3, failures);
    std::fflush(stdout);
  }
}

void AccuracyTable(const char* link, uint16_t port, int max_trials, const std::vector<int>& list,
                   int64_t target_ns) {
  for (int rounds : list) {
    const int trials = rounds >= 300 ? std::min(max_trials, 20) : max_trials;
    std::vector<int64_t> errors;
    std::vector<uint64_t> bounds;
    int violations = 0, failures = 0, within_target = 0;
    for (int t = 0; t < trials; ++t) {
      auto s = Ping("127.0.0.1", port, rounds, [] { return TimebaseNowNs(); });
      if (!s.ok()) {
        ++failures;
        continue;
      }
      auto m = EstimateOffset(*s);
      if (!m.ok()) {
        ++failures;
        continue;
      }
      const int64_t e = std::llabs(m->offset_ns - kInjected);
      errors.push_back(e);
      bounds.push_back(m->bound_ns);
      if (static_cast<uint64_t>(e) > m->bound_ns) ++violations;
      if (e <= target_ns) ++within_target;
    }
    if (errors.empty()) {
      std::printf("| %s | %d | all %d trials failed |\n", link, rounds, trials);
      continue;
    }
    std::printf("| %s | %d | %zu | %.2f | %.2f | %.2f | %.2f | %d | %d |\n", link, rounds,
                errors.size(),
                static_cast<double>(Median(errors)) / 1e3,
                static_cast<double>(*std::max_element(errors.begin(), errors.end())) / 1e3,
                static_cast<double>(Median(bounds)) / 1e3,
                static_cast<double>(*std::max_element(bounds.begin(), bounds.end())) / 1e3,
                violations + failures, within_target);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string relay_bin = AON_DELAY_RELAY;
  int trials = 100, nodes = 64;
  std::vector<int> rounds = {1, 2, 4, 8, 16, 32, 300, 2000};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--relay")) relay_bin = argv[i + 1];
    else if (!std::strcmp(argv[i], "--trials")) trials = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--nodes")) nodes = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rounds")) {
      rounds.clear();
      for (const char* p = argv[i + 1]; *p != '\0';) {
        char* end = nullptr;
        const long v = std::strtol(p, &end, 10);
        if (end == p || v < 1) break;
        rounds.push_back(static_cast<int>(v));
        p = *end == ',' ? end + 1 : end;
      }
    } else {
      std::fprintf(stderr,
                   "usage: aon-bench-clock [--relay PATH] [--trials N] [--nodes N] [--rounds LIST]\n");
      return 2;
    }
  }
  if (rounds.empty() || trials < 1 || nodes < 1) {
    std::fprintf(stderr, "aon-bench-clock: --rounds, --trials and --nodes need positive values\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  auto server = PingServer::Start("127.0.0.1", 0, [] { return TimebaseNowNs() + kInjected; });
  if (!server.ok()) {
    std::fprintf(stderr, "aon-bench-clock: %s\n", server.status().ToString().c_str());
    return 1;
  }
  auto relay = StartRelay(relay_bin, (*server)->port());
  if (relay == nullptr) {
    std::fprintf(stderr, "aon-bench-clock: cannot start %s\n", relay_bin.c_str());
    return 1;
  }
  std::printf("injected offset %lld ns; relay: 200 us +- 50 us (uniform) each way\n\n",
              static_cast<long long>(kInjected));
  std::printf("Start-up: %d clients at once, min-RTT each; 5 repetitions\n\n", nodes);
  std::printf("| link | nodes | rounds | median ms | max ms | worst error us | worst bound us | "
              "failures or bound violations |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
  StartupTable("loopback", (*server)->port(), nodes, {1, 4, 8, 16, 32});
  StartupTable("relay 200+-50 us", relay->port, nodes, {1, 4, 8, 16});
  std::printf("\nAccuracy vs rounds: %d fresh connections per row\n\n", trials);
  std::printf("| link | rounds | trials | median error us | max error us | median bound us | max "
              "bound us | failures or bound violations | within target (1 us loopback, 10 us relay) "
              "|\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  AccuracyTable("loopback", (*server)->port(), trials, rounds, 1'000);
  AccuracyTable("relay 200+-50 us", relay->port, trials, rounds, 10'000);
  return 0;
}
