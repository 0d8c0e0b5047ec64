// GPU probe: which driver-API kernel launches CUPTI traces in a capture window
// that attaches mid-run, the way AON's budgeted mode does (attach, record,
// cuptiFinalize, attach again). Checked without AON. cuBLAS, cuDNN and
// Triton launch their kernels through cuLaunchKernel / cuLaunchKernelEx that
// they reach in different ways; a launch CUPTI does not trace has no API record
// and no external-correlation record, so its kernel cannot be tied to the
// framework operator that issued it.
//
// Launch paths (one kernel each, named kA..kE; kR is a runtime <<<>>> launch
// between them):
//   A  cuLaunchKernel linked against libcuda
//   B  dlsym(dlopen("libcuda.so.1"), "cuLaunchKernel")     fetched before any attach
//   C  cuGetProcAddress("cuLaunchKernel")                  fetched before any attach
//   D  cudaGetDriverEntryPoint("cuLaunchKernel")           fetched before any attach
//   E  cuGetProcAddress("cuLaunchKernel")                  fetched while attached (window 1)
// Windows: 1 and 2 enable the launch calls one by one (cuptiActivityEnableDriverApi),
// 3 enables CUPTI_ACTIVITY_KIND_DRIVER, 4 one by one again. Between windows
// CUPTI is detached with cuptiFinalize.
// Prints one line per window and path: kernel records, whether the launch
// call's API record and an external-correlation record share its correlation
// id, and the correlation ids in launch order.
// Build: nvcc -O2 -arch=sm_90 -o driver_probe driver_probe.cu -lcupti -lcuda -ldl
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#define CK(x)                                                                                      \
  do {                                                                                             \
    auto rc_ = (x);                                                                                \
    if (rc_ != 0) {                                                                                \
      std::fprintf(stderr, "driver_probe: %s failed (%d) at line %d\n", #x, static_cast<int>(rc_), \
                   __LINE__);                                                                      \
      std::exit(2);                                                                                \
    }                                                                                              \
  } while (0)

extern "C" __global__ void kA(int* x) { x[0] += 1; }
extern "C" __global__ void kB(int* x) { x[1] += 1; }
extern "C" __global__ void kC(int* x) { x[2] += 1; }
extern "C" __global__ void kD(int* x) { x[3] += 1; }
extern "C" __global__ void kE(int* x) { x[4] += 1; }
extern "C" __global__ void kR(int* x) { x[5] += 1; }

namespace {

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);

std::mutex g_mu;
std::map<uint32_t, std::string> g_kernel_by_corr;  // correlation id -> kernel name
std::vector<std::pair<uint32_t, std::string>> g_kernels;
std::map<uint32_t, std::string> g_api_by_corr;  // correlation id -> "driver:<cbid>" / "runtime"
std::set<uint32_t> g_external;                  // correlation ids with an external record

void CUPTIAPI Requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 8 << 20;
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI Completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        g_kernels.emplace_back(k->correlationId, k->name ? k->name : "?");
        break;
      }
      case CUPTI_ACTIVITY_KIND_DRIVER:
      case CUPTI_ACTIVITY_KIND_RUNTIME: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
        g_api_by_corr[a->correlationId] =
            (rec->kind == CUPTI_ACTIVITY_KIND_DRIVER ? "driver:" : "runtime:") +
            std::to_string(a->cbid);
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
        g_external.insert(e->correlationId);
        break;
      }
      default:
        break;
    }
  }
  free(buffer);
}

CUpti_SubscriberHandle g_sub = nullptr;

void Attach(bool driver_kind) {
  CK(cuptiSubscribe(&g_sub, [](void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {},
                    nullptr));
  CK(cuptiActivityRegisterCallbacks(Requested, Completed));
  CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
  CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION));
  if (driver_kind) {
    CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
    return;
  }
  for (CUpti_CallbackId cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name) != CUPTI_SUCCESS || !name)
      continue;
    if (std::strncmp(name, "cuLaunch", 8) == 0) cuptiActivityEnableDriverApi(cbid, 1);
  }
}

void Detach() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  cuptiUnsubscribe(g_sub);
  g_sub = nullptr;
  CK(cuptiFinalize());
}

}  // namespace

int main() {
  int* x = nullptr;
  CK(cudaMalloc(&x, 64));
  CK(cudaMemset(x, 0, 64));
  CUfunction f[5];
  const void* syms[5] = {reinterpret_cast<const void*>(kA), reinterpret_cast<const void*>(kB),
                         reinterpret_cast<const void*>(kC), reinterpret_cast<const void*>(kD),
                         reinterpret_cast<const void*>(kE)};
  for (int i = 0; i < 5; ++i) CK(cudaGetFuncBySymbol(&f[i], syms[i]));
  LaunchFn paths[5] = {};
  paths[0] = &cuLaunchKernel;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) lib = dlopen("libcuda.so.1", RTLD_NOW);
  paths[1] = reinterpret_cast<LaunchFn>(dlsym(lib, "cuLaunchKernel"));
  void* p = nullptr;
  CUdriverProcAddressQueryResult q{};
  CK(cuGetProcAddress("cuLaunchKernel", &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
  paths[2] = reinterpret_cast<LaunchFn>(p);
  cudaDriverEntryPointQueryResult rq{};
  CK(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &p, 12000, cudaEnableDefault, &rq));
  paths[3] = reinterpret_cast<LaunchFn>(p);
  std::printf("pointers: linked %p dlsym %p getproc %p runtime %p\n",
              reinterpret_cast<void*>(paths[0]), reinterpret_cast<void*>(paths[1]),
              reinterpret_cast<void*>(paths[2]), reinterpret_cast<void*>(paths[3]));
  const char* kPath[5] = {"A linked", "B dlsym", "C getproc-before", "D runtime-entry",
                          "E getproc-attached"};
  const char* kWindow[5] = {"", "1 one-by-one", "2 one-by-one after finalize", "3 DRIVER kind",
                            "4 one-by-one after DRIVER"};
  void* args[] = {&x};
  bool ok_any = false;
  for (int w = 1; w <= 4; ++w) {
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_kernels.clear();
      g_api_by_corr.clear();
      g_external.clear();
    }
    Attach(w == 3);
    if (w == 1) {
      CK(cuGetProcAddress("cuLaunchKernel", &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q));
      paths[4] = reinterpret_cast<LaunchFn>(p);
      std::printf("pointer fetched while attached: %p\n", p);
    }
    CK(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1000 + w));
    for (int i = 0; i < 5; ++i) {
      kR<<<1, 1>>>(x);
      CK(paths[i](f[i], 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
    }
    kR<<<1, 1>>>(x);
    uint64_t popped = 0;
    CK(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped));
    CK(cudaDeviceSynchronize());
    Detach();
    std::lock_guard<std::mutex> lock(g_mu);
    std::string order;
    for (const auto& [corr, name] : g_kernels) order += name + "=" + std::to_string(corr) + " ";
    std::printf("window %s: kernels in record order: %s\n", kWindow[w], order.c_str());
    for (int i = 0; i < 5; ++i) {
      const std::string want = std::string("k") + static_cast<char>('A' + i);
      int n = 0;
      uint32_t corr = 0;
      for (const auto& [c, name] : g_kernels) {
        if (name == want) {
          ++n;
          corr = c;
        }
      }
      const auto api = g_api_by_corr.find(corr);
      const bool traced = n == 1 && api != g_api_by_corr.end();
      const bool external = n == 1 && g_external.count(corr) > 0;
      ok_any = ok_any || traced;
      std::printf("FACT window=%s path=%s kernels=%d api=%s external=%s\n", kWindow[w], kPath[i],
                  n, traced ? api->second.c_str() : "none", external ? "yes" : "no");
    }
  }
  std::printf("driver_probe: %s\n", ok_any ? "DONE" : "NOTHING TRACED");
  return 0;
}
