// aon-bench-launch: the per-launch cost of a profiler, on the worst case for
// it: back-to-back launches of an empty kernel on one stream.
//
//   aon-bench-launch [--launches 100000] [--reps 5] [--warmup 10000] [--device 0]
//
// After --warmup launches (and a synchronize), runs --reps repetitions of
// --launches launches; each repetition is timed from the first launch to the
// end of a stream synchronize after the last (wall clock, CLOCK_MONOTONIC), so
// work a profiler adds on the GPU side counts as well as the host side. Prints
// per repetition
//   LAUNCH_REP rep=<i> ns_per_launch=<wall/launches> host_ns_per_launch=<issue time/launches>
// and at the end the medians over the repetitions:
//   LAUNCH ns_per_launch=<median> launches=<n> reps=<r> launches_per_s=<1e9/median>
//          host_ns_per_launch=<median>
// (one line). Exit status 1 on any CUDA error.
#include <cuda_runtime.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

__global__ void EmptyKernel() {}

bool Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "FAIL %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

double NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

long ArgValue(int argc, char** argv, int& i) {
  if (i + 1 >= argc) {
    std::fprintf(stderr, "FAIL %s needs a value\n", argv[i]);
    std::exit(2);
  }
  char* end = nullptr;
  long v = std::strtol(argv[++i], &end, 10);
  if (end == argv[i] || *end != '\0' || v < 0) {
    std::fprintf(stderr, "FAIL bad value for %s: %s\n", argv[i - 1], argv[i]);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  long launches = 100000, reps = 5, warmup = 10000, device = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--launches")) launches = ArgValue(argc, argv, i);
    else if (!std::strcmp(argv[i], "--reps")) reps = ArgValue(argc, argv, i);
    else if (!std::strcmp(argv[i], "--warmup")) warmup = ArgValue(argc, argv, i);
    else if (!std::strcmp(argv[i], "--device")) device = ArgValue(argc, argv, i);
    else {
      std::fprintf(stderr,
                   "usage: %s [--launches N] [--reps R] [--warmup W] [--device D]\n", argv[0]);
      return 2;
    }
  }
  if (launches < 1 || reps < 1) {
    std::fprintf(stderr, "FAIL --launches and --reps must be >= 1\n");
    return 2;
  }
  if (!Check(cudaSetDevice(static_cast<int>(device)), "cudaSetDevice")) return 1;
  cudaStream_t stream;
  if (!Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) return 1;

  for (long i = 0; i < warmup; ++i) EmptyKernel<<<1, 1, 0, stream>>>();
  if (!Check(cudaGetLastError(), "warm-up launch") ||
      !Check(cudaStreamSynchronize(stream), "warm-up synchronize"))
    return 1;

  std::vector<double> wall, host;
  for (long r = 0; r < reps; ++r) {
    double t0 = NowNs();
    for (long i = 0; i < launches; ++i) EmptyKernel<<<1, 1, 0, stream>>>();
    double t1 = NowNs();
    if (!Check(cudaStreamSynchronize(stream), "synchronize")) return 1;
    double t2 = NowNs();
    if (!Check(cudaGetLastError(), "launch")) return 1;
    wall.push_back((t2 - t0) / static_cast<double>(launches));
    host.push_back((t1 - t0) / static_cast<double>(launches));
    std::printf("LAUNCH_REP rep=%ld ns_per_launch=%.1f host_ns_per_launch=%.1f\n", r, wall.back(),
                host.back());
  }
  double med = Median(wall);
  std::printf("LAUNCH ns_per_launch=%.1f launches=%ld reps=%ld launches_per_s=%.0f "
              "host_ns_per_launch=%.1f\n",
              med, launches, reps, 1e9 / med, Median(host));
  std::fflush(stdout);
  Check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return 0;
}
