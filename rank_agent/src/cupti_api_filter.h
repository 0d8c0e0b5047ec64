// Which CUDA API calls the agent records (CUPTI RUNTIME / DRIVER activity).
// Header-only and free of AON types so that the CUPTI floor benchmark
// (bench/launch/cupti_floor.cc) enables exactly what the agent enables.
#pragma once

#include <cupti.h>

#include <cstring>
#include <initializer_list>
#include <vector>

namespace aon::agent {

// `name` is `n` or `n_<version suffix>` (CUPTI's callback names, "cudaMalloc_v3020").
inline bool IsApiName(const char* name, const char* n) {
  const size_t len = std::strlen(n);
  return std::strncmp(name, n, len) == 0 && (name[len] == '\0' || name[len] == '_');
}

// Runtime calls that carry no timing information and are called constantly by
// frameworks (device/stream queries, error polling): not recorded.
inline bool IsNoisyRuntimeApi(const char* name) {
  static const char* const kNoisy[] = {"cudaGetDevice",
                                       "cudaSetDevice",
                                       "cudaGetLastError",
                                       "cudaPeekAtLastError",
                                       "cudaGetDeviceCount",
                                       "cudaGetDeviceProperties",
                                       "cudaDeviceGetAttribute",
                                       "cudaStreamIsCapturing",
                                       "cudaStreamGetCaptureInfo",
                                       "cudaPointerGetAttributes",
                                       "cudaFuncGetAttributes",
                                       "cudaGetFuncBySymbol",
                                       "cudaDriverGetVersion",
                                       "cudaRuntimeGetVersion",
                                       "cudaStreamQuery",
                                       "cudaEventQuery",
                                       "cudaGetDriverEntryPoint",
                                       "cudaThreadExchangeStreamCaptureMode",
                                       "cudaStreamGetPriority",
                                       "cudaStreamGetFlags",
                                       "cudaDeviceGetStreamPriorityRange",
                                       "cudaGetExportTable",
                                       "cudaGetErrorString",
                                       "cudaGetErrorName",
                                       "cudaDeviceCanAccessPeer",
                                       "cudaStreamGetId",
                                       "cudaStreamGetDevice",
                                       "cudaCtxResetPersistingL2Cache",
                                       "cudaGetDriverEntryPointByVersion",
                                       "cudaDeviceGetPCIBusId",
                                       "cudaDeviceGetByPCIBusId"};
  for (const char* n : kNoisy) {
    if (IsApiName(name, n)) return true;
  }
  return false;
}

inline bool HasAnyPrefix(const char* name, std::initializer_list<const char*> prefixes) {
  for (const char* p : prefixes) {
    if (std::strncmp(name, p, std::strlen(p)) == 0) return true;
  }
  return false;
}

// Runtime and driver calls that put work on the GPU: launches, graph launches,
// copies, memsets (the calls a framework op's launches are tied through).
inline bool PutsWorkOnGpu(const char* name) {
  return HasAnyPrefix(name, {"cudaLaunch", "cudaGraphLaunch", "cudaMemcpy", "cudaMemset",
                             "cuLaunch", "cuGraphLaunch", "cuMemcpy", "cuMemset"});
}

// Driver calls worth a record: those that put work on the GPU or wait for it.
// Libraries such as NCCL and cuBLAS launch through the driver directly; the
// rest of the driver API mirrors runtime calls that are recorded already.
inline bool IsTracedDriverApi(const char* name) {
  return PutsWorkOnGpu(name) || HasAnyPrefix(name, {"cuStreamSynchronize", "cuCtxSynchronize",
                                                    "cuEventSynchronize", "cuStreamWaitEvent"});
}

// Turns on CUPTI's DRIVER activity for the calls IsTracedDriverApi names and
// off for every other driver call; returns the calls turned on (`*kind_on`:
// whether the DRIVER kind itself was). The kind must be enabled first:
// measured on an H100 (CUDA 13's CUPTI, tests/gpu/driver_probe.cu),
// cuptiActivityEnableDriverApi(cbid, 1) alone records nothing, whatever way
// the program reached the call (linked, dlsym, cuGetProcAddress before or
// while attached), in the first attach of a running process and after a
// detach alike; with CUPTI_ACTIVITY_KIND_DRIVER on, every way is recorded,
// with its external correlations. (Enabling the kind resets the per-call
// settings: it comes first, the per-call switches after it.)
inline std::vector<CUpti_CallbackId> EnableTracedDriverApis(bool* kind_on) {
  std::vector<CUpti_CallbackId> traced;
  *kind_on = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER) == CUPTI_SUCCESS;
  for (CUpti_CallbackId cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name) != CUPTI_SUCCESS || !name)
      continue;
    const bool want = IsTracedDriverApi(name);
    if (cuptiActivityEnableDriverApi(cbid, want ? 1 : 0) == CUPTI_SUCCESS && want) {
      traced.push_back(cbid);
    }
  }
  return traced;
}

}  // namespace aon::agent
