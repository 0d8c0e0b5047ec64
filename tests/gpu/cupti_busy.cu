// GPU check: another tool already holds CUPTI's single subscriber slot (as
// Nsight Systems or torch.profiler would). AON must leave the application
// running untouched and say in the trace why GPU activity is missing.
// Build: nvcc -o cupti_busy cupti_busy.cu -lcupti
#include <cuda_runtime.h>
#include <cupti.h>

#include <cstdio>

__global__ void busy_kernel(int* x) { x[threadIdx.x] += 1; }

static void CUPTIAPI Callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

int main() {
  CUpti_SubscriberHandle sub;
  // Subscribe before CUDA initializes: AON's injection runs inside cuInit, later.
  CUptiResult r = cuptiSubscribe(&sub, Callback, nullptr);
  if (r != CUPTI_SUCCESS) {
    std::printf("cupti_busy: could not take CUPTI first (%d)\n", static_cast<int>(r));
    return 2;
  }
  int* d = nullptr;
  if (cudaMalloc(&d, 32 * sizeof(int)) != cudaSuccess) return 3;
  cudaMemset(d, 0, 32 * sizeof(int));
  for (int i = 0; i < 10; ++i) busy_kernel<<<1, 32>>>(d);
  int h[32];
  cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
  cudaFree(d);
  cuptiUnsubscribe(sub);
  std::printf("cupti_busy: app result %d (expect 10)\n", h[0]);
  return h[0] == 10 ? 0 : 4;
}
