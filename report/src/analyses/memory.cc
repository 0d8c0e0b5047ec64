// Memory transfers: per rank, pageable copies (count, bytes, time), large
// pinned host<->device copies (their rate), copies smaller than 64 KiB, the
// PCIe link of the GPU the pageable copies went to, and what pinning would save.
#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

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

namespace {

// The time pinning would save of one pageable copy of `bytes` that took `ns`
// (MemoryRank::pinning_saves_ns): at `ns_per_byte` (> 0: a measured or link
// rate) for copies of 1 MiB or more, else half of it.
double CopySaves(uint64_t bytes, uint64_t ns, double ns_per_byte) {
  if (ns_per_byte > 0 && bytes >= (1u << 20))
    return std::max(0.0, static_cast<double>(ns) - static_cast<double>(bytes) * ns_per_byte);
  return static_cast<double>(ns) / 2.0;
}

// MemoryRank::pinning_saves_ns of every rank, once the totals are known.
void PinningSaves(const Timeline& t, const Steps* steps, std::vector<MemoryRank>* out) {
  std::vector<std::vector<uint64_t>> per_step(out->size());
  std::vector<double> whole(out->size(), 0.0);
  for (uint32_t q = 0; q < out->size(); ++q) {
    if (const std::vector<Interval>* w = StepWindows(steps, q)) per_step[q].assign(w->size(), 0);
  }
  for (const auto& m : t.memcpys) {
    if (m.rank >= out->size() || !(m.record.src_kind == 1 || m.record.dst_kind == 1)) continue;
    const MemoryRank& r = (*out)[m.rank];
    const double ns_per_byte =
        r.pinned_ns > 0 && r.pinned_bytes > 0
            ? static_cast<double>(r.pinned_ns) / static_cast<double>(r.pinned_bytes)
        : r.link_bytes_per_ns > 0 ? 1.0 / r.link_bytes_per_ns
                                  : 0.0;
    const uint64_t d = m.record.end_ns > m.record.start_ns ? m.record.end_ns - m.record.start_ns : 0;
    const double saves = CopySaves(m.record.bytes, d, ns_per_byte);
    whole[m.rank] += saves;
    if (const std::vector<Interval>* w = StepWindows(steps, m.rank)) {
      const int32_t i = StepOf(*w, m.record.start_ns);
      if (i >= 0) per_step[m.rank][static_cast<size_t>(i)] += static_cast<uint64_t>(saves);
    }
  }
  for (uint32_t q = 0; q < out->size(); ++q) {
    MemoryRank& r = (*out)[q];
    // Steady, as the idle gaps are (IdleAnalysis::Steady): the median over the
    // rank's captured steps but its windows' edges (Steps::edge) x the steps it
    // ran. A mean of the captured steps would let an odd one weigh: the last,
    // which ran from the last step mark until the process ended and copied
    // nothing, cut the figure by a seventh in a 40-step job with 7 captured.
    std::vector<uint64_t> observed;
    for (size_t i = 0; i < per_step[q].size(); ++i)
      if (steps->Whole(q, i)) observed.push_back(per_step[q][i]);
    if (observed.empty() || whole[q] == 0) {
      r.pinning_saves_ns = static_cast<uint64_t>(whole[q]);
      continue;
    }
    std::sort(observed.begin(), observed.end());
    const size_t n = observed.size(), mid = n / 2;
    double each_step = n % 2 ? static_cast<double>(observed[mid])
                            : (static_cast<double>(observed[mid - 1]) + observed[mid]) / 2;
    // Copies in fewer than half of the steps (every k-th step): the median is
    // 0, the mean says what they cost a step.
    if (each_step == 0) {
      double sum = 0;
      for (uint64_t v : observed) sum += static_cast<double>(v);
      each_step = sum / static_cast<double>(n);
    }
    const size_t ran = q < steps->per_rank.size() ? steps->per_rank[q].size() : n;
    r.pinning_saves_ns = static_cast<uint64_t>(each_step * static_cast<double>(ran));
  }
}

}  // namespace

std::vector<MemoryRank> AnalyzeMemory(const Timeline& t, const Steps* steps) {
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
  PinningSaves(t, steps, &out);
  return out;
}

const Analysis kMemoryAnalysis = {"memory", "steps", "memory", [](const Timeline& t, Report* r) {
                                    r->memory = AnalyzeMemory(t, &r->steps);
                                  }};

}  // namespace aon::report
