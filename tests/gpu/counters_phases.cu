// Three NVTX phases planted for the GPU counters' verdicts (docs/counters.md),
// run under aon-run on a real GPU by tests/gpu/run_gpu_checks.sh and checked by
// tests/gpu/check_counters.py:
//   phase:compute  large bf16 GEMMs through cuBLAS (tensor cores): compute-bound
//   phase:memory   a streaming elementwise add over 3 x 2 GiB: memory-bound
//   phase:launch   1-thread kernels, the host issuing (a 20 us spin) between
//                  them: launch-bound (launch overhead)
//   phase:host     1-thread kernels with 1 ms of host work away from CUDA (a
//                  sleep) between them: host-bound
// Each phase runs for --seconds S (default 3) of wall time and ends with the
// device idle. Prints one line per phase: kernels launched and seconds.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

#define CHECK(x)                                                                        \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "counters_phases: %s: %s\n", #x, cudaGetErrorString(e_));    \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

__global__ void FillKernel(__nv_bfloat16* p, size_t n, float v) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] = __float2bfloat16(v);
}

__global__ void StreamAddKernel(const float4* a, const float4* b, float4* c, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float4 x = a[i], y = b[i];
    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

__global__ void TinyKernel(int* p) { p[0] += 1; }

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = std::atof(argv[++i]);
  }
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));

  // phase:compute: C = A x B, 8192^3 in bf16 with fp32 accumulation.
  const int n = 8192;
  __nv_bfloat16 *A, *B, *C;
  CHECK(cudaMalloc(&A, sizeof(__nv_bfloat16) * n * n));
  CHECK(cudaMalloc(&B, sizeof(__nv_bfloat16) * n * n));
  CHECK(cudaMalloc(&C, sizeof(__nv_bfloat16) * n * n));
  FillKernel<<<sms * 8, 256, 0, stream>>>(A, size_t(n) * n, 0.01f);
  FillKernel<<<sms * 8, 256, 0, stream>>>(B, size_t(n) * n, 0.02f);
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) return std::fprintf(stderr, "no cuBLAS\n"), 1;
  cublasSetStream(blas, stream);
  const float alpha = 1, beta = 0;
  // phase:memory: 2 GiB per array.
  const size_t words = (size_t(2) << 30) / sizeof(float4);
  float4 *x, *y, *z;
  CHECK(cudaMalloc(&x, words * sizeof(float4)));
  CHECK(cudaMalloc(&y, words * sizeof(float4)));
  CHECK(cudaMalloc(&z, words * sizeof(float4)));
  CHECK(cudaMemsetAsync(x, 0, words * sizeof(float4), stream));
  CHECK(cudaMemsetAsync(y, 0, words * sizeof(float4), stream));
  int* counter;
  CHECK(cudaMalloc(&counter, sizeof(int)));
  CHECK(cudaStreamSynchronize(stream));

  // host_gap_us > 0: a launch, then that long on the host, spinning (issuing
  // work, as a framework's dispatcher is between launches) or asleep (work
  // away from CUDA, as an input pipeline's).
  auto run = [&](const char* name, auto&& one, int host_gap_us, bool spin) {
    nvtxRangePushA(name);
    const auto begin = Clock::now();
    long launched = 0;
    while (Seconds(begin, Clock::now()) < seconds) {
      one();
      ++launched;
      if (host_gap_us > 0 && spin) {
        for (const auto until = Clock::now() + std::chrono::microseconds(host_gap_us);
             Clock::now() < until;) {
        }
      } else if (host_gap_us > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(host_gap_us));
      } else if (launched % 4 == 0) {
        CHECK(cudaStreamSynchronize(stream));  // a short queue keeps the phase's end sharp
      }
    }
    CHECK(cudaStreamSynchronize(stream));
    nvtxRangePop();
    std::printf("counters_phases: %s kernels=%ld seconds=%.2f\n", name, launched,
                Seconds(begin, Clock::now()));
  };
  run("phase:compute", [&] {
    cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, A, CUDA_R_16BF, n, B, CUDA_R_16BF, n,
                 &beta, C, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }, 0, false);
  run("phase:memory", [&] { StreamAddKernel<<<sms * 8, 256, 0, stream>>>(x, y, z, words); }, 0,
      false);
  run("phase:launch", [&] { TinyKernel<<<1, 1, 0, stream>>>(counter); }, 20, true);
  run("phase:host", [&] { TinyKernel<<<1, 1, 0, stream>>>(counter); }, 1000, false);
  CHECK(cudaGetLastError());
  cublasDestroy(blas);
  std::printf("counters_phases: done\n");
  return 0;
}
