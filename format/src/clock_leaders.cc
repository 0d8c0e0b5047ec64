#include "aon/format/clock_leaders.h"

#include <map>

namespace aon {
namespace {

bool MeasuredItself(const RankMetadata& m) {
  return m.clock_leader_rank < 0 || m.clock_leader_rank == m.rank;
}

void ClearClock(RankMetadata& m) {
  m.clock_synchronized = false;
  m.set_clock(LinearClock{});
}

}  // namespace

std::vector<std::string> ApplyClockLeaders(std::span<RankMetadata* const> ranks) {
  // Leaders are looked up before any follower is edited, so the order of
  // `ranks` never matters (a follower is never anyone's leader anyway).
  std::map<int32_t, const RankMetadata*> by_rank;
  for (const RankMetadata* m : ranks) {
    if (m == nullptr) continue;
    auto [it, inserted] = by_rank.emplace(m->rank, m);
    if (!inserted && !MeasuredItself(*it->second) && MeasuredItself(*m)) it->second = m;
  }
  std::map<int32_t, RankMetadata> leaders;  // copies: a leader listed twice may be edited below
  for (const auto& [rank, m] : by_rank) {
    if (MeasuredItself(*m)) leaders.emplace(rank, *m);
  }

  std::vector<std::string> problems;
  for (RankMetadata* m : ranks) {
    if (m == nullptr || MeasuredItself(*m)) continue;
    const std::string self = "rank " + std::to_string(m->rank);
    const std::string leader_name = "clock leader rank " + std::to_string(m->clock_leader_rank);
    auto fail = [&](const std::string& why) {
      ClearClock(*m);
      problems.push_back(self + ": " + why + "; not clock-synchronized");
    };
    auto it = leaders.find(m->clock_leader_rank);
    if (it == leaders.end() && m->clock_leader_rank == 0 && by_rank.count(0) == 0 &&
        m->clock_synchronized && m->clock_error_bound_ns >= 0) {
      // Rank 0's file is lost, but this rank checked at run time that it reads
      // rank 0's clock, which stays the timeline's reference: its word stands.
      continue;
    }
    if (it == leaders.end()) {
      fail(by_rank.count(m->clock_leader_rank) != 0
               ? leader_name + " did not measure its clock itself (it follows rank " +
                     std::to_string(by_rank.at(m->clock_leader_rank)->clock_leader_rank) + ")"
               : leader_name + " missing");
      continue;
    }
    const RankMetadata& leader = it->second;
    if (m->clock_id.empty() || m->clock_id != leader.clock_id) {
      fail("clock id '" + m->clock_id + "' differs from " + leader_name + "'s '" + leader.clock_id +
           "'");
      continue;
    }
    if (!leader.clock_synchronized || leader.clock_error_bound_ns < 0) {
      fail(leader_name + " is not clock-synchronized itself");
      continue;
    }
    m->clock_synchronized = true;
    m->set_clock(leader.clock());
  }
  return problems;
}

}  // namespace aon
