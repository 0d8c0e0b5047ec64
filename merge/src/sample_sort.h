// The arithmetic of the merge's sample sort (records.cc), pure.
//
// The time axis is cut into P x R slabs at quantiles of sampled start times;
// process p owns slabs [p * R, (p + 1) * R), and in round j every process sends
// each record of slab p * R + j to p. R (rounds) grows with the data so that a
// round fits the memory budget.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace aon::merge {

// Rounds for a kind: a round holds about (a process's share) x 3 records of
// record_bytes: what it sends, what it receives, the sorted output batch. The
// share is the larger of the most rows one process reads and an even split.
inline uint64_t SortRounds(uint64_t max_local_rows, uint64_t total_rows, uint64_t procs,
                           uint64_t record_bytes, uint64_t budget_bytes) {
  const uint64_t share_bytes =
      std::max(max_local_rows, (total_rows + procs - 1) / procs) * record_bytes * 3;
  const uint64_t budget = std::max<uint64_t>(budget_bytes, 1);
  return std::max<uint64_t>(1, (share_bytes + budget - 1) / budget);
}

// The slab boundaries: slab s = [bounds[s-1], bounds[s]); slabs - 1 values, cut
// at quantiles of the samples (all UINT64_MAX without samples).
inline std::vector<uint64_t> SlabBounds(std::vector<uint64_t> samples, uint64_t slabs) {
  std::sort(samples.begin(), samples.end());
  std::vector<uint64_t> bounds;
  for (uint64_t s = 1; s < slabs; ++s) {
    bounds.push_back(samples.empty()
                         ? UINT64_MAX
                         : samples[std::min(samples.size() - 1, s * samples.size() / slabs)]);
  }
  return bounds;
}

inline uint64_t SlabOf(const std::vector<uint64_t>& bounds, uint64_t start) {
  return static_cast<uint64_t>(std::upper_bound(bounds.begin(), bounds.end(), start) -
                               bounds.begin());
}

// Does a block of records with starts in [min_start, max_start] hold any start
// of round `round`'s slabs?
inline bool BlockInRound(const std::vector<uint64_t>& bounds, uint64_t min_start,
                         uint64_t max_start, uint64_t rounds, uint64_t round) {
  const uint64_t lo = SlabOf(bounds, min_start), hi = SlabOf(bounds, max_start);
  if (hi - lo + 1 >= rounds) return true;
  for (uint64_t s = lo; s <= hi; ++s) {
    if (s % rounds == round) return true;
  }
  return false;
}

}  // namespace aon::merge
