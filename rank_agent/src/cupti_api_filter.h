// Which CUDA API calls the agent records (CUPTI RUNTIME / DRIVER activity).
// Header-only and free of AON types so that the CUPTI floor benchmark
// (bench/launch/cupti_floor.cc) enables exactly what the agent enables.
#pragma once

#include <cstring>

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

// Driver calls worth a record: those that put work on the GPU or wait for it.
// Libraries such as NCCL and cuBLAS launch through the driver directly; the
// rest of the driver API mirrors runtime calls that are recorded already.
inline bool IsTracedDriverApi(const char* name) {
  static const char* const kPrefixes[] = {
      "cuLaunch",           "cuGraphLaunch",       "cuMemcpy",
      "cuMemset",           "cuStreamSynchronize", "cuCtxSynchronize",
      "cuEventSynchronize", "cuStreamWaitEvent"};
  for (const char* p : kPrefixes) {
    if (std::strncmp(name, p, std::strlen(p)) == 0) return true;
  }
  return false;
}

}  // namespace aon::agent
