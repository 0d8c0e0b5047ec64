// The part of NVML's C interface AON uses (GPU Performance Monitoring), declared
// here so the build needs neither nvml.h nor libnvidia-ml: the collector loads
// the driver's libnvidia-ml.so.1 at run time (gpm_counters.cc), and the labeled
// fake of tests/fakes/fake_nvml.cc implements the same functions for CI.
//
// The layouts and numbers are NVML's published ABI (nvml.h of the CUDA toolkit
// and the NVML API reference, "GPM" group); docs/counters.md lists what each
// metric means. Only what is declared here is relied on.
#pragma once

#include <cstdint>

extern "C" {

using AonNvmlReturn = int;  // nvmlReturn_t
inline constexpr AonNvmlReturn kNvmlSuccess = 0;
inline constexpr AonNvmlReturn kNvmlErrorUninitialized = 1;
inline constexpr AonNvmlReturn kNvmlErrorNotSupported = 3;
inline constexpr AonNvmlReturn kNvmlErrorNoPermission = 4;
inline constexpr AonNvmlReturn kNvmlErrorDriverNotLoaded = 9;
inline constexpr AonNvmlReturn kNvmlErrorGpuIsLost = 15;
inline constexpr AonNvmlReturn kNvmlErrorInUse = 19;

struct AonNvmlDeviceSt;
using AonNvmlDevice = AonNvmlDeviceSt*;  // nvmlDevice_t
struct AonNvmlGpmSampleSt;
using AonNvmlGpmSample = AonNvmlGpmSampleSt*;  // nvmlGpmSample_t

inline constexpr unsigned kNvmlDeviceUuidBufferSize = 80;  // NVML_DEVICE_UUID_BUFFER_SIZE
inline constexpr unsigned kNvmlGpmSupportVersion = 1;      // NVML_GPM_SUPPORT_VERSION
inline constexpr unsigned kNvmlGpmMetricsGetVersion = 1;   // NVML_GPM_METRICS_GET_VERSION

// nvmlGpmMetricId_t values AON reads.
inline constexpr unsigned kGpmGraphicsUtil = 1;
inline constexpr unsigned kGpmSmUtil = 2;
inline constexpr unsigned kGpmSmOccupancy = 3;
inline constexpr unsigned kGpmIntegerUtil = 4;
inline constexpr unsigned kGpmAnyTensorUtil = 5;
inline constexpr unsigned kGpmDramBwUtil = 10;
inline constexpr unsigned kGpmFp64Util = 11;
inline constexpr unsigned kGpmFp32Util = 12;
inline constexpr unsigned kGpmFp16Util = 13;
inline constexpr unsigned kGpmPcieTxPerSec = 20;
inline constexpr unsigned kGpmPcieRxPerSec = 21;
inline constexpr unsigned kGpmNvlinkTotalRxPerSec = 60;
inline constexpr unsigned kGpmNvlinkTotalTxPerSec = 61;

struct AonNvmlGpmSupport {  // nvmlGpmSupport_t
  unsigned version;
  unsigned is_supported_device;
};

struct AonNvmlGpmMetric {     // nvmlGpmMetric_t
  unsigned metric_id;         // in
  AonNvmlReturn nvml_return;  // out: this metric's status
  double value;               // out: valid when nvml_return is success
  const char* short_name;     // out (may be null)
  const char* long_name;
  const char* unit;
};
static_assert(sizeof(AonNvmlGpmMetric) == 40);

// nvmlGpmMetricsGet_t with room for kMaxMetrics requests: NVML reads
// num_metrics entries (its own array is longer; the caller's need not be).
inline constexpr unsigned kAonGpmMaxMetrics = 16;
struct AonNvmlGpmMetricsGet {
  unsigned version;
  unsigned num_metrics;
  AonNvmlGpmSample sample1;
  AonNvmlGpmSample sample2;
  AonNvmlGpmMetric metrics[kAonGpmMaxMetrics];
};

// The functions, by the names the library exports.
using AonNvmlInitFn = AonNvmlReturn (*)();                     // nvmlInit_v2
using AonNvmlShutdownFn = AonNvmlReturn (*)();                 // nvmlShutdown
using AonNvmlErrorStringFn = const char* (*)(AonNvmlReturn);   // nvmlErrorString
using AonNvmlDeviceGetCountFn = AonNvmlReturn (*)(unsigned*);  // nvmlDeviceGetCount_v2
using AonNvmlDeviceGetHandleByIndexFn = AonNvmlReturn (*)(unsigned, AonNvmlDevice*);  // _v2
using AonNvmlDeviceGetUuidFn = AonNvmlReturn (*)(AonNvmlDevice, char*,
                                                 unsigned);  // nvmlDeviceGetUUID
using AonNvmlGpmQueryDeviceSupportFn = AonNvmlReturn (*)(AonNvmlDevice, AonNvmlGpmSupport*);
using AonNvmlGpmSampleAllocFn = AonNvmlReturn (*)(AonNvmlGpmSample*);
using AonNvmlGpmSampleFreeFn = AonNvmlReturn (*)(AonNvmlGpmSample);
using AonNvmlGpmSampleGetFn = AonNvmlReturn (*)(AonNvmlDevice, AonNvmlGpmSample);
using AonNvmlGpmMetricsGetFn = AonNvmlReturn (*)(AonNvmlGpmMetricsGet*);

}  // extern "C"
