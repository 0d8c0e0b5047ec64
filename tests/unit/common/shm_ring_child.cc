// Child process of shm_ring_test: the other side of a ring shared across a
// real process boundary. The parent passes the ring's memfd (FD_CLOEXEC
// cleared) by number on argv:
//   shm_ring_child consume <fd> <threads>        drain until the producer finishes,
//                                                check everything drained
//   shm_ring_child produce <fd> <threads> <n>    n items from each of <threads>
//                                                threads, then mark the ring finished
// and prints one result line on stdout, "ok ..." or "error <why>", that the
// parent compares with its own side (see shm_ring_test.cc).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "aon/ipc/shm_ring.h"
#include "shm_ring_test_util.h"

namespace {

using aon::ring::Consumer;
using aon::ring::Producer;
using aon::ring::Region;
using namespace aon::ring::ringtest;

int Fail(const std::string& why) {
  std::printf("error %s\n", why.c_str());
  return 1;
}

int Consume(Region& region, uint32_t threads) {
  Consumer c(region);
  Checker check(threads);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    const bool finished = c.ProducerFinished();
    auto r = c.Drain(check);
    if (!r.ok()) return Fail(r.status().ToString());
    if (!check.error.empty()) return Fail(check.error);
    if (finished && !r->pending && c.Backlog() == 0) break;
    if (r->entries == 0) std::this_thread::yield();
    if (std::chrono::steady_clock::now() > deadline) return Fail("timed out");
  }
  std::string line = "ok kernels=" + std::to_string(check.kernels) +
                     " strings=" + std::to_string(check.strings) + " dropped_kernels=" +
                     std::to_string(c.Dropped(static_cast<size_t>(aon::RecordKind::kKernel))) +
                     " dropped_strings=" + std::to_string(c.Dropped(aon::ring::kStringDropSlot)) +
                     " threads=";
  for (uint32_t t = 0; t < threads; ++t) {
    line += (t ? "," : "") + std::to_string(check.received(t).size()) + ":" +
            std::to_string(Digest(check.received(t)));
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

int Produce(Region& region, uint32_t threads, uint32_t n) {
  Producer p(region);
  std::vector<ProducerLog> logs(threads);
  std::vector<std::thread> workers;
  for (uint32_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] { logs[t] = ProduceItems(p, t, n, [] { return true; }); });
  }
  for (auto& w : workers) w.join();
  region.header()->producer_state.store(1, std::memory_order_release);
  uint64_t kernels = 0, kernels_ok = 0, strings = 0, strings_ok = 0;
  std::string per_thread;
  for (uint32_t t = 0; t < threads; ++t) {
    kernels += logs[t].kernels;
    kernels_ok += logs[t].kernels_ok;
    strings += logs[t].strings;
    strings_ok += logs[t].strings_ok;
    per_thread += (t ? "," : "") + std::to_string(logs[t].accepted.size()) + ":" +
                  std::to_string(Digest(logs[t].accepted));
  }
  std::printf("ok kernels=%llu kernels_ok=%llu strings=%llu strings_ok=%llu threads=%s\n",
              static_cast<unsigned long long>(kernels), static_cast<unsigned long long>(kernels_ok),
              static_cast<unsigned long long>(strings), static_cast<unsigned long long>(strings_ok),
              per_thread.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return Fail("usage: shm_ring_child consume|produce <fd> <threads> [<n>]");
  const std::string mode = argv[1];
  const int fd = std::atoi(argv[2]);
  const auto threads = static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10));
  auto region = Region::Attach(fd);
  if (!region.ok()) return Fail(region.status().ToString());
  if (mode == "consume") return Consume(*region, threads);
  if (mode == "produce" && argc == 5) {
    return Produce(*region, threads, static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 10)));
  }
  return Fail("bad arguments");
}
