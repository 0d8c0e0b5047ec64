// FAKE NVML, for tests only: libaon_fake_nvml.so implements the NVML functions
// the collector's GPM counters use (collector/src/nvml_abi.h), so CI,
// which has no GPU and no driver, runs the collector's real loading, sampling
// and error paths (AON_NVML_LIBRARY=<this library>). The collector sees the
// exported `aonFakeNvml` and labels every row it reads here "synthetic".
//
// Its GPUs are the labeled synthetic GPUs of examples/synthetic: each
// synthetic device appends the kernels it runs, with their counter profile
// (rank_agent/include/aon/synthetic_device.h: set_kernel_profile), to
// $AON_SYNTHETIC_GPU_DIR/<uuid>.activity; a GPM metric between two samples is
// computed from the kernels that overlap the interval, as the hardware's
// cumulative counters would give it:
//   gpu_active = % of the interval with any kernel running (union of kernels)
//   sm_active = sum over kernels of overlap x sm% / interval (at most 100)
//   tensor, dram = the same with the kernels' tensor% and dram%
//   sm_occupancy = sm_active / 2; fp32 = (sm_active - tensor) x 0.6, at least 0
//   fp16, fp64, int: 0; pcie tx/rx: 0; NVLink: not supported (a PCIe card).
//
// Environment:
//   AON_FAKE_NVML_GPUS    comma-separated UUIDs, in NVML index order
//   AON_SYNTHETIC_GPU_DIR where the synthetic devices' activity files are
//   AON_FAKE_NVML_FAIL    comma-separated failures to play:
//     init=<code>             nvmlInit_v2 returns it
//     gpm=unsupported         no GPU supports GPM
//     sample=<code>           every nvmlGpmSampleGet returns it
//     sample_after=<n>:<code> the first n samples of each GPU succeed, then <code>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "aon/base/timebase.h"
#include "nvml_abi.h"

namespace {

struct Activity {
  uint64_t start_ns, end_ns;
  double sm_pct, dram_pct, tensor_pct;
};
static_assert(sizeof(Activity) == 40);

struct Config {
  std::vector<std::string> uuids;
  std::string dir;
  int init_code = 0;
  bool gpm_unsupported = false;
  int sample_code = 0;
  long sample_after = -1;
  int sample_after_code = 0;
};

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    if (comma > pos) out.push_back(s.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

const Config& Cfg() {
  static const Config config = [] {
    Config c;
    if (const char* g = std::getenv("AON_FAKE_NVML_GPUS")) c.uuids = Split(g);
    if (const char* d = std::getenv("AON_SYNTHETIC_GPU_DIR")) c.dir = d;
    if (const char* f = std::getenv("AON_FAKE_NVML_FAIL")) {
      for (const std::string& item : Split(f)) {
        const size_t eq = item.find('=');
        const std::string key = item.substr(0, eq),
                          value = eq == std::string::npos ? "" : item.substr(eq + 1);
        if (key == "init") c.init_code = std::atoi(value.c_str());
        if (key == "gpm") c.gpm_unsupported = value == "unsupported";
        if (key == "sample") c.sample_code = std::atoi(value.c_str());
        if (key == "sample_after") {
          const size_t colon = value.find(':');
          c.sample_after = std::atol(value.substr(0, colon).c_str());
          c.sample_after_code = std::atoi(value.substr(colon + 1).c_str());
        }
      }
    }
    return c;
  }();
  return config;
}

}  // namespace

struct AonNvmlDeviceSt {
  unsigned index;
  long samples_taken;
};
struct AonNvmlGpmSampleSt {
  unsigned device;
  uint64_t t_ns;
};

namespace {

std::mutex g_mu;
std::vector<AonNvmlDeviceSt> g_devices;
bool g_initialized = false;

std::vector<Activity> ReadActivity(const std::string& uuid) {
  std::vector<Activity> out;
  if (Cfg().dir.empty()) return out;
  FILE* f = std::fopen((Cfg().dir + "/" + uuid + ".activity").c_str(), "rb");
  if (f == nullptr) return out;  // no kernel yet: an idle GPU
  Activity a;
  while (std::fread(&a, sizeof(a), 1, f) == 1) out.push_back(a);
  std::fclose(f);
  return out;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) extern const char aonFakeNvml[] =
    "AON fake NVML (tests only): counters of the synthetic GPU, not of a real one";

__attribute__((visibility("default"))) AonNvmlReturn nvmlInit_v2() {
  if (Cfg().init_code != 0) return Cfg().init_code;
  std::lock_guard<std::mutex> lock(g_mu);
  g_devices.clear();
  for (unsigned i = 0; i < Cfg().uuids.size(); ++i) g_devices.push_back({i, 0});
  g_initialized = true;
  return kNvmlSuccess;
}

__attribute__((visibility("default"))) AonNvmlReturn nvmlShutdown() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_initialized = false;
  return kNvmlSuccess;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(AonNvmlReturn code) {
  switch (code) {
    case kNvmlSuccess:
      return "Success";
    case kNvmlErrorUninitialized:
      return "Uninitialized";
    case kNvmlErrorNotSupported:
      return "Not Supported";
    case kNvmlErrorNoPermission:
      return "Insufficient Permissions";
    case kNvmlErrorDriverNotLoaded:
      return "Driver Not Loaded";
    case kNvmlErrorGpuIsLost:
      return "GPU is lost";
    case kNvmlErrorInUse:
      return "In use by another client";
    default:
      return "Unknown Error";
  }
}

__attribute__((visibility("default"))) AonNvmlReturn nvmlDeviceGetCount_v2(unsigned* count) {
  if (!g_initialized) return kNvmlErrorUninitialized;
  *count = static_cast<unsigned>(g_devices.size());
  return kNvmlSuccess;
}

__attribute__((visibility("default"))) AonNvmlReturn nvmlDeviceGetHandleByIndex_v2(
    unsigned index, AonNvmlDevice* device) {
  if (!g_initialized) return kNvmlErrorUninitialized;
  if (index >= g_devices.size()) return 2;  // invalid argument
  *device = &g_devices[index];
  return kNvmlSuccess;
}

__attribute__((visibility("default"))) AonNvmlReturn nvmlDeviceGetUUID(AonNvmlDevice device,
                                                                       char* uuid,
                                                                       unsigned length) {
  const std::string& u = Cfg().uuids.at(device->index);
  if (u.size() + 1 > length) return 7;  // insufficient size
  std::memcpy(uuid, u.c_str(), u.size() + 1);
  return kNvmlSuccess;
}

__attribute__((visibility("default"))) AonNvmlReturn nvmlGpmQueryDeviceSupport(
    AonNvmlDevice, AonNvmlGpmSupport* support) {
  if (support->version != kNvmlGpmSupportVersion) return 2;
  support->is_supported_device = Cfg().gpm_unsupported ? 0 : 1;
  return kNvmlSuccess;
}

__attribute__((visibility("default"))) AonNvmlReturn nvmlGpmSampleAlloc(AonNvmlGpmSample* sample) {
  *sample = new AonNvmlGpmSampleSt{0, 0};
  return kNvmlSuccess;
}

__attribute__((visibility("default"))) AonNvmlReturn nvmlGpmSampleFree(AonNvmlGpmSample sample) {
  delete sample;
  return kNvmlSuccess;
}

__attribute__((visibility("default"))) AonNvmlReturn nvmlGpmSampleGet(AonNvmlDevice device,
                                                                      AonNvmlGpmSample sample) {
  if (Cfg().sample_code != 0) return Cfg().sample_code;
  if (Cfg().sample_after >= 0 && device->samples_taken >= Cfg().sample_after)
    return Cfg().sample_after_code;
  ++device->samples_taken;
  sample->device = device->index;
  sample->t_ns = aon::TimebaseNowNs();  // the records' clock, as the collector reads it
  return kNvmlSuccess;
}

__attribute__((visibility("default"))) AonNvmlReturn nvmlGpmMetricsGet(AonNvmlGpmMetricsGet* get) {
  if (get->version != kNvmlGpmMetricsGetVersion) return 2;
  const AonNvmlGpmSampleSt& a = *get->sample1;
  const AonNvmlGpmSampleSt& b = *get->sample2;
  if (a.device != b.device || b.t_ns <= a.t_ns) return 2;
  const uint64_t t1 = a.t_ns, t2 = b.t_ns;
  const double len = static_cast<double>(t2 - t1);
  double sm = 0, dram = 0, tensor = 0;
  std::vector<std::pair<uint64_t, uint64_t>> busy;
  for (const Activity& k : ReadActivity(Cfg().uuids.at(a.device))) {
    const uint64_t s = std::max(k.start_ns, t1), e = std::min(k.end_ns, t2);
    if (e <= s) continue;
    const double o = static_cast<double>(e - s);
    sm += o * k.sm_pct;
    dram += o * k.dram_pct;
    tensor += o * k.tensor_pct;
    busy.emplace_back(s, e);
  }
  std::sort(busy.begin(), busy.end());
  uint64_t covered = 0, reach = 0;
  for (const auto& [s, e] : busy) {
    const uint64_t from = std::max(s, reach);
    if (e > from) covered += e - from;
    reach = std::max(reach, e);
  }
  const double sm_active = std::min(100.0, sm / len);
  const double tensor_active = std::min(100.0, tensor / len);
  for (unsigned i = 0; i < get->num_metrics; ++i) {
    AonNvmlGpmMetric& m = get->metrics[i];
    m.nvml_return = kNvmlSuccess;
    m.short_name = m.long_name = m.unit = nullptr;
    switch (m.metric_id) {
      case kGpmGraphicsUtil:
        m.value = 100.0 * static_cast<double>(covered) / len;
        break;
      case kGpmSmUtil:
        m.value = sm_active;
        break;
      case kGpmSmOccupancy:
        m.value = sm_active / 2;
        break;
      case kGpmAnyTensorUtil:
        m.value = tensor_active;
        break;
      case kGpmDramBwUtil:
        m.value = std::min(100.0, dram / len);
        break;
      case kGpmFp32Util:
        m.value = std::max(0.0, sm_active - tensor_active) * 0.6;
        break;
      case kGpmFp16Util:
      case kGpmFp64Util:
      case kGpmIntegerUtil:
      case kGpmPcieTxPerSec:
      case kGpmPcieRxPerSec:
        m.value = 0;
        break;
      default:
        m.nvml_return = kNvmlErrorNotSupported;
        break;
    }
  }
  return kNvmlSuccess;
}

}  // extern "C"
