// NCCL record post-processing (see nccl_resolve.h): the agent's former
// FinalizeNcclRecords, on tables read back from a rank file.
#include "aon/nccl_resolve.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace aon {
namespace {

bool IsOperation(const NcclRecord& r) {
  return r.event_type == static_cast<uint8_t>(NcclEventType::kColl) ||
         r.event_type == static_cast<uint8_t>(NcclEventType::kP2p);
}

constexpr uint8_t kTimingNone = static_cast<uint8_t>(NcclGpuTiming::kNone);
constexpr uint8_t kTimingRaw = static_cast<uint8_t>(NcclGpuTiming::kRaw);
constexpr uint8_t kTimingKernel = static_cast<uint8_t>(NcclGpuTiming::kKernel);

}  // namespace

bool NcclRecordsNeedResolution(std::span<const NcclRecord> nccl) {
  return std::any_of(nccl.begin(), nccl.end(), [](const NcclRecord& r) {
    return r.gpu_timing == kTimingRaw || (IsOperation(r) && r.correlation_id == 0);
  });
}

NcclResolveResult ResolveNcclRecords(std::span<NcclRecord> nccl,
                                     std::span<const ExternalCorrelationRecord> ext,
                                     std::span<const KernelRecord> kernels,
                                     std::span<const ApiRecord> apis, RealtimeAnchorNs anchor) {
  NcclResolveResult result;

  // NCCL's launches: external id -> CUPTI correlation id (the last one wins, as
  // in the agent).
  std::unordered_map<uint64_t, uint32_t> corr_of_external;
  for (const ExternalCorrelationRecord& e : ext) {
    if (e.external_kind == kNcclExternalCorrelationKind) {
      corr_of_external[e.external_id] = e.correlation_id;
    }
  }
  std::unordered_set<uint32_t> launch_corr;  // correlation ids of NCCL launches
  launch_corr.reserve(corr_of_external.size());
  for (const auto& [external, corr] : corr_of_external) launch_corr.insert(corr);

  // NCCL's launches in time order: (host time of the launch call, its CUPTI
  // correlation id). Fallback for an operation no launch claimed on its thread
  // (seen for ~1 % of send/recv operations on H200): the nearest launch.
  std::vector<std::pair<uint64_t, uint32_t>> launches;
  if (!launch_corr.empty()) {
    for (const ApiRecord& a : apis) {
      if (launch_corr.count(a.correlation_id)) launches.emplace_back(a.start_ns, a.correlation_id);
    }
    std::sort(launches.begin(), launches.end());
  }

  // Pass 1: the correlation id of every operation.
  for (NcclRecord& r : nccl) {
    if (!IsOperation(r)) continue;
    if (r.correlation_id != 0) {
      ++result.already_resolved;
      continue;
    }
    auto c = r.external_id != 0 ? corr_of_external.find(r.external_id) : corr_of_external.end();
    if (c != corr_of_external.end()) {
      r.correlation_id = c->second;
      ++result.by_external_id;
      continue;
    }
    // The NCCL launch nearest in time (NCCL may also report an operation just
    // after its launch, e.g. the last one of a run).
    auto next =
        std::lower_bound(launches.begin(), launches.end(), std::make_pair(r.start_ns, uint32_t{0}));
    auto best = next;
    if (next == launches.end() || (next != launches.begin() && r.start_ns - std::prev(next)->first <
                                                                   next->first - r.start_ns)) {
      best = next == launches.begin() ? launches.end() : std::prev(next);
    }
    if (best == launches.end()) {
      ++result.unresolved;
      continue;
    }
    r.correlation_id = best->second;
    ++result.by_time;
  }

  // The kernels of those correlation ids only (the first record of an id wins,
  // as in the agent).
  std::unordered_set<uint32_t> wanted;
  for (const NcclRecord& r : nccl) {
    if (IsOperation(r) && r.correlation_id != 0) wanted.insert(r.correlation_id);
  }
  struct KernelAt {
    uint64_t start;
    uint64_t end;
    uint32_t stream;
  };
  std::unordered_map<uint32_t, KernelAt> kernel_of_corr;
  kernel_of_corr.reserve(wanted.size());
  if (!wanted.empty()) {
    for (const KernelRecord& k : kernels) {
      if (wanted.count(k.correlation_id)) {
        kernel_of_corr.emplace(k.correlation_id, KernelAt{k.start_ns, k.end_ns, k.stream_id});
      }
    }
  }
  std::unordered_set<uint32_t>().swap(wanted);

  // Pass 2: each operation's kernel. Per kernel, the earliest first-channel
  // start of the operations it ran: that one starts with the kernel; later
  // operations of a fused launch (a send/recv group) start when their peer is
  // ready.
  std::unordered_map<uint32_t, int64_t> offset_of_kernel;
  for (NcclRecord& r : nccl) {
    if (!IsOperation(r) || r.correlation_id == 0) continue;
    auto k = kernel_of_corr.find(r.correlation_id);
    if (k == kernel_of_corr.end()) {
      ++result.without_kernel;
      continue;
    }
    r.stream_id = k->second.stream;
    if (r.gpu_timing == kTimingNone) {
      // No channel timing: the operation's GPU span is its kernel's (shared by
      // the operations of one launch, e.g. a send/recv group).
      r.gpu_start_ns = k->second.start;
      r.end_ns = std::max(k->second.end, r.start_ns);
      r.gpu_timing = kTimingKernel;
    }
    if (r.gpu_timing == kTimingRaw && r.gpu_start_ns != 0) {
      const int64_t offset =
          static_cast<int64_t>(k->second.start) - static_cast<int64_t>(r.gpu_start_ns);
      auto [it, inserted] = offset_of_kernel.emplace(r.correlation_id, offset);
      if (!inserted) it->second = std::max(it->second, offset);
    }
  }

  // Calibration: median over kernels; spread of the middle 80 % (the
  // channel-vs-kernel start jitter).
  std::vector<int64_t> offsets;
  offsets.reserve(offset_of_kernel.size());
  for (const auto& [corr, offset] : offset_of_kernel) offsets.push_back(offset);
  NcclGpuClockCalibration& cal = result.calibration;
  if (!offsets.empty()) {
    std::sort(offsets.begin(), offsets.end());
    cal.offset_ns = offsets[offsets.size() / 2];
    cal.pairs = static_cast<int64_t>(offsets.size());
    const size_t lo = offsets.size() / 10, hi = offsets.size() - 1 - offsets.size() / 10;
    cal.spread_ns = offsets[hi] - offsets[lo];
    result.channel_timing = NcclGpuTiming::kCalibrated;
  } else {
    // No pairs (CUPTI not capturing): %globaltimer tracks CLOCK_REALTIME on
    // current drivers; convert through the rank's realtime anchor.
    cal.offset_ns =
        static_cast<int64_t>(anchor.clock_ns) - static_cast<int64_t>(anchor.realtime_ns);
    result.channel_timing = NcclGpuTiming::kAssumed;
  }

  auto convert = [&](uint64_t t) {
    return t == 0 ? 0 : static_cast<uint64_t>(static_cast<int64_t>(t) + cal.offset_ns);
  };
  for (NcclRecord& r : nccl) {
    if (r.gpu_timing != kTimingRaw) continue;
    ++result.raw_converted;
    if (r.event_type == static_cast<uint8_t>(NcclEventType::kKernelCh)) {
      r.start_ns = convert(r.start_ns);
    } else {
      r.gpu_start_ns = convert(r.gpu_start_ns);
    }
    r.end_ns = convert(r.end_ns);
    r.gpu_timing = static_cast<uint8_t>(result.channel_timing);
  }
  if (result.raw_converted > 0 && result.channel_timing == NcclGpuTiming::kAssumed) {
    result.note =
        "NCCL: GPU channel times could not be calibrated against CUPTI (no correlated kernels); "
        "%globaltimer was taken as CLOCK_REALTIME";
  }
  return result;
}

}  // namespace aon
