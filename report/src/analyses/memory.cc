// Memory transfers: per rank, pageable copies (count, bytes, time), large
// pinned host<->device copies (their rate) and copies smaller than 64 KiB.
#include <cstdint>

#include "analyses/analysis.h"

namespace aon::report {

std::vector<MemoryRank> AnalyzeMemory(const Timeline& t) {
  std::vector<MemoryRank> out(t.world_size);
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
