// Memory transfers: per rank, pageable copies (count, bytes, time), large
// pinned host<->device copies (their rate), copies smaller than 64 KiB and the
// PCIe link of the GPU the pageable copies went to.
#include <cstdint>
#include <map>
#include <utility>

#include "analyses/analysis.h"

namespace aon::report {

double PcieLinkRate(uint32_t gen, uint32_t width) {
  // Transfer rate per lane (GT/s) and line code: 8b/10b for generations 1-2,
  // 128b/130b for 3-5, FLIT mode (242 payload bytes of 256) for 6.
  static constexpr double kGts[] = {0, 2.5, 5, 8, 16, 32, 64};
  if (gen == 0 || gen > 6 || width == 0 || width > 32) return 0;
  const double code = gen <= 2 ? 0.8 : gen <= 5 ? 128.0 / 130.0 : 242.0 / 256.0;
  // A 256-byte payload travels with about 24 bytes of header, sequence number,
  // CRC and framing.
  constexpr double kPayload = 256.0 / 280.0;
  return kGts[gen] * width / 8.0 * code * kPayload;  // GB/s = bytes per ns
}

std::vector<MemoryRank> AnalyzeMemory(const Timeline& t) {
  std::vector<MemoryRank> out(t.world_size);
  std::map<std::pair<uint32_t, uint32_t>, const DeviceInfo*> device;  // (rank, id)
  for (const auto& d : t.devices) device[{d.rank, d.record.device_id}] = &d.record;
  for (const auto& m : t.memcpys) {
    MemoryRank& r = out[m.rank];
    const uint64_t d =
        m.record.end_ns > m.record.start_ns ? m.record.end_ns - m.record.start_ns : 0;
    ++r.copies;
    r.copy_bytes += m.record.bytes;
    r.copy_ns += d;
    if (m.record.src_kind == 1 || m.record.dst_kind == 1) {
      ++r.pageable_count;
      r.pageable_bytes += m.record.bytes;
      r.pageable_ns += d;
      if (m.record.bytes >= (1u << 20)) {
        r.pageable_large_bytes += m.record.bytes;
        r.pageable_large_ns += d;
      }
      auto it = device.find({m.rank, m.record.device_id});
      if (r.link_bytes_per_ns == 0 && it != device.end()) {
        r.pcie_gen = it->second->pcie_gen;
        r.pcie_width = it->second->pcie_width;
        r.link_bytes_per_ns = PcieLinkRate(r.pcie_gen, r.pcie_width);
      }
    }
    const bool host_device = m.record.copy_kind == 1 || m.record.copy_kind == 2;
    const bool pinned = m.record.src_kind == 2 || m.record.dst_kind == 2;
    if (host_device && pinned && m.record.bytes >= (1u << 20) && d > 0) {
      r.pinned_bytes += m.record.bytes;
      r.pinned_ns += d;
    }
    if (m.record.bytes < 64 * 1024) {
      ++r.small_count;
      r.small_ns += d;
    }
  }
  return out;
}

const Analysis kMemoryAnalysis = {
    "memory", "", "memory", [](const Timeline& t, Report* r) { r->memory = AnalyzeMemory(t); }};

}  // namespace aon::report
