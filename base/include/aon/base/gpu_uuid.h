// A GPU's UUID as the two 64-bit halves counter rows carry (records.h,
// CounterRecord): how rank files' /meta/devices (UUID text) and the node
// collector's GPU counters (NVML's UUID text) find each other.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace aon {

struct GpuUuid {
  uint64_t hi = 0, lo = 0;
  bool operator==(const GpuUuid&) const = default;
};

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (NVML, CUPTI; hex digits, dashes
// anywhere after "GPU-"): its 16 bytes, big-endian. Any other text (MIG
// instances' "MIG-...", the synthetic GPU's "SYNTHETIC-<host>-rank<N>") maps to
// a 128-bit hash of the whole text, so equal texts still match.
GpuUuid GpuUuidFromText(std::string_view text);

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" of a UUID's 16 bytes (CUDA's CUuuid).
std::string GpuUuidText(const unsigned char bytes[16]);

}  // namespace aon
