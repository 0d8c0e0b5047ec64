// A synthetic NVTX load for bench/memory_under_load.sh: emits NVTX records at a
// target rate from N threads for T seconds, then prints what it achieved. Run
// with NVTX_INJECTION64_PATH=<build>/lib/libaon_agent.so every call becomes an
// AON record (the agent starts its node collector at the first call); without
// it the NVTX calls are no-ops, which is the baseline.
//
// Each thread emits rate/N records per second, paced in 1 ms slices: at every
// slice it emits what the schedule says is due by the slice's end, then sleeps
// until the next slice (a thread that fell behind does not sleep until it has
// caught up). Records alternate between a mark (nvtxMarkA: one record) and a
// push/pop range (nvtxRangePushA + nvtxRangePop: one record), with names from a
// set of 16, so the agent's string table stays small and most of the cost is
// the per-record path.
//
// Usage: aon-bench-agent-load [--rate RECORDS_PER_S] [--threads N] [--seconds T]
// (defaults 1000000, 1, 10). Prints one line of key=value pairs; the memory
// figures are read from /proc/self/status after the agent's own exit handler
// has run (this program's handler is registered before the agent loads, so it
// runs after the agent's).
#include <nvtx3/nvToolsExt.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

const char* const kNames[16] = {
    "step",          "forward",        "backward",        "optimizer.step",
    "aten::linear",  "aten::layer_norm", "aten::gelu",    "aten::dropout",
    "aten::add",     "aten::mul",      "aten::embedding", "aten::copy_",
    "LinearBackward0", "GeluBackward0", "AddBackward0",   "DDP.reducer.allreduce"};

struct ThreadResult {
  uint64_t records = 0;
  double max_lag_ms = 0;  // furthest behind schedule at a slice's start
};

void Emit(uint64_t i) {
  const char* name = kNames[(i >> 1) & 15];
  if ((i & 1) == 0) {
    nvtxMarkA(name);
  } else {
    nvtxRangePushA(name);
    nvtxRangePop();
  }
}

void Run(double rate, Clock::time_point start, Clock::time_point stop, ThreadResult* out) {
  uint64_t emitted = 0;
  for (int64_t slice = 0;; ++slice) {
    const Clock::time_point slice_start = start + std::chrono::milliseconds(slice);
    const Clock::time_point slice_end = slice_start + std::chrono::milliseconds(1);
    Clock::time_point now = Clock::now();
    if (now >= stop) break;
    if (now < slice_start) {
      std::this_thread::sleep_until(slice_start);
    } else {
      out->max_lag_ms = std::max(
          out->max_lag_ms, std::chrono::duration<double, std::milli>(now - slice_start).count());
    }
    const Clock::time_point end = std::min(slice_end, stop);
    const auto due = static_cast<uint64_t>(
        rate * std::chrono::duration<double>(end - start).count());
    while (emitted < due) Emit(emitted++);
  }
  out->records = emitted;
}

std::string StatusField(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return "?";
  char line[256];
  std::string value = "?";
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, key, n) == 0 && line[n] == ':') {
      long kb = std::strtol(line + n + 1, nullptr, 10);
      value = std::to_string(kb);
      break;
    }
  }
  std::fclose(f);
  return value;
}

void PrintMemoryAtExit() {
  std::printf("exit_VmHWM_kB=%s exit_VmRSS_kB=%s RssAnon_kB=%s RssFile_kB=%s RssShmem_kB=%s\n",
              StatusField("VmHWM").c_str(), StatusField("VmRSS").c_str(),
              StatusField("RssAnon").c_str(), StatusField("RssFile").c_str(),
              StatusField("RssShmem").c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  double rate = 1e6;
  int threads = 1;
  double seconds = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--rate") {
      rate = std::atof(argv[i + 1]);
    } else if (a == "--threads") {
      threads = std::max(1, std::atoi(argv[i + 1]));
    } else if (a == "--seconds") {
      seconds = std::atof(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--rate RECORDS_PER_S] [--threads N] [--seconds T]\n", argv[0]);
      return 2;
    }
  }
  // Before the agent loads (at the first NVTX call): runs after the agent's
  // exit handler, so the high-water mark includes the agent's exit work.
  std::atexit(PrintMemoryAtExit);
  // Loads the agent (and starts its collector) outside the timed part.
  nvtxMarkA("aon-bench-agent-load: start");

  std::vector<ThreadResult> results(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(20);
  const Clock::time_point stop =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back(Run, rate / threads, start, stop, &results[static_cast<size_t>(t)]);
  }
  for (std::thread& t : pool) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  uint64_t records = 0;
  double max_lag = 0;
  for (const ThreadResult& r : results) {
    records += r.records;
    max_lag = std::max(max_lag, r.max_lag_ms);
  }
  const double achieved = static_cast<double>(records) / elapsed;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                     static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  std::printf(
      "threads=%d target_rate=%.0f seconds=%.3f records=%llu achieved_rate=%.0f "
      "achieved_fraction=%.4f max_lag_ms=%.2f cpu_s=%.3f run_VmHWM_kB=%s\n",
      threads, rate, elapsed, static_cast<unsigned long long>(records), achieved, achieved / rate,
      max_lag, cpu, StatusField("VmHWM").c_str());
  std::fflush(stdout);
  return 0;
}
