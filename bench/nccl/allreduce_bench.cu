// aon-bench-allreduce: NCCL all-reduce latency and bus bandwidth over message
// sizes, one MPI rank per GPU; run it with and without AON to get the cost of
// NCCL capture (bench/run_nccl_overhead.sh does, interleaving the runs).
//   aon-bench-allreduce [--min-bytes 8] [--max-bytes 268435456] [--ms 200]
// Rank 0 prints one line per size:
//   AON_BENCH bytes=<B> iters=<n> us=<time per all-reduce> algbw=<GB/s> busbw=<GB/s>
// busbw = algbw * 2 (n-1) / n (NCCL's definition for all-reduce).
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#define CHECK_CUDA(x)                                                                  \
  do {                                                                                 \
    cudaError_t e = (x);                                                               \
    if (e != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                    \
    }                                                                                  \
  } while (0)
#define CHECK_NCCL(x)                                                                  \
  do {                                                                                 \
    ncclResult_t r = (x);                                                              \
    if (r != ncclSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                    \
    }                                                                                  \
  } while (0)

int main(int argc, char** argv) {
  size_t min_bytes = 8, max_bytes = 256ull << 20;
  double target_ms = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--min-bytes")) min_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--max-bytes")) max_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--ms")) target_ms = std::atof(argv[i + 1]);
  }
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int ndev = 0;
  CHECK_CUDA(cudaGetDeviceCount(&ndev));
  CHECK_CUDA(cudaSetDevice(rank % ndev));
  ncclUniqueId id;
  if (rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, world, id, rank));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *send = nullptr, *recv = nullptr;
  CHECK_CUDA(cudaMalloc(&send, max_bytes));
  CHECK_CUDA(cudaMalloc(&recv, max_bytes));
  CHECK_CUDA(cudaMemset(send, 0, max_bytes));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));

  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const size_t count = bytes / sizeof(float) > 0 ? bytes / sizeof(float) : 1;
    // Warm up, then size the timed loop to about target_ms (same on all ranks).
    for (int i = 0; i < 5; ++i) CHECK_NCCL(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream));
    CHECK_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < 10; ++i) CHECK_NCCL(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream));
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float probe_ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&probe_ms, start, stop));
    int iters = static_cast<int>(target_ms / (probe_ms / 10.0 + 1e-6));
    iters = iters < 10 ? 10 : (iters > 20000 ? 20000 : iters);
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < iters; ++i) CHECK_NCCL(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream));
    CHECK_CUDA(cudaEventRecord(stop, stream));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    double us = ms * 1000.0 / iters;
    double max_us = 0;
    MPI_Allreduce(&us, &max_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double algbw = static_cast<double>(count * sizeof(float)) / (max_us * 1e3);  // GB/s
    double busbw = algbw * 2.0 * (world - 1) / world;
    if (rank == 0) {
      std::printf("AON_BENCH bytes=%zu iters=%d us=%.3f algbw=%.3f busbw=%.3f\n",
                  count * sizeof(float), iters, max_us, algbw, busbw);
      std::fflush(stdout);
    }
  }
  CHECK_NCCL(ncclCommFinalize(comm));
  CHECK_NCCL(ncclCommDestroy(comm));
  MPI_Finalize();
  return 0;
}
