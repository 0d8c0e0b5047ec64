// ApplyClockLeaders (aon/format/clock_leaders.h): followers get their node leader's
// clock correction only when the leader's file is there, measured for itself
// and names the same clock; every other case leaves the follower
// unsynchronized and says why, naming the rank.
#include "aon/format/clock_leaders.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace aon {
namespace {

constexpr const char* kNodeA = "aaaaaaaa-0000-0000-0000-000000000001/timens:4026531834";
constexpr const char* kNodeB = "bbbbbbbb-0000-0000-0000-000000000002/timens:4026531834";

RankMetadata Leader(int32_t rank, const char* clock, int64_t offset, int64_t bound) {
  RankMetadata m;
  m.rank = rank;
  m.clock_id = clock;
  m.clock_synchronized = true;
  m.clock_offset_ns = offset;
  m.clock_drift_ppm = 0.75;
  m.clock_reference_ns = 1'000'000 + static_cast<uint64_t>(rank);
  m.clock_error_bound_ns = bound;
  return m;
}

// A follower as the agent writes it for a leader other than rank 0.
RankMetadata Follower(int32_t rank, int32_t leader, const char* clock) {
  RankMetadata m;
  m.rank = rank;
  m.clock_id = clock;
  m.clock_leader_rank = leader;
  return m;
}

std::vector<RankMetadata*> Pointers(std::vector<RankMetadata>& ranks) {
  std::vector<RankMetadata*> p;
  for (RankMetadata& m : ranks) p.push_back(&m);
  return p;
}

void ExpectCopiedFrom(const RankMetadata& f, const RankMetadata& leader) {
  EXPECT_TRUE(f.clock_synchronized) << "rank " << f.rank;
  EXPECT_EQ(f.clock_offset_ns, leader.clock_offset_ns) << "rank " << f.rank;
  EXPECT_EQ(f.clock_drift_ppm, leader.clock_drift_ppm) << "rank " << f.rank;
  EXPECT_EQ(f.clock_reference_ns, leader.clock_reference_ns) << "rank " << f.rank;
  EXPECT_EQ(f.clock_error_bound_ns, leader.clock_error_bound_ns) << "rank " << f.rank;
  EXPECT_EQ(f.clock_leader_rank, leader.rank) << "the file still says who measured";
}

void ExpectUnsynchronized(const RankMetadata& f) {
  EXPECT_FALSE(f.clock_synchronized) << "rank " << f.rank;
  EXPECT_EQ(f.clock_offset_ns, 0) << "rank " << f.rank;
  EXPECT_EQ(f.clock_drift_ppm, 0.0) << "rank " << f.rank;
  EXPECT_EQ(f.clock_error_bound_ns, -1) << "rank " << f.rank;
}

// Two nodes of two ranks: rank 0 leads A (and is the reference), rank 2 leads B.
std::vector<RankMetadata> TwoNodes() {
  RankMetadata r1 = Follower(1, 0, kNodeA);
  r1.clock_synchronized = true;  // a follower of rank 0 reads the reference clock
  r1.clock_error_bound_ns = 0;
  return {Leader(0, kNodeA, 0, 0), r1, Leader(2, kNodeB, -7'000'123'456, 2'500),
          Follower(3, 2, kNodeB)};
}

TEST(ClockLeaders, FollowersGetTheirLeadersModelInAnyOrder) {
  const std::vector<RankMetadata> ranks = TwoNodes();
  const RankMetadata leader0 = ranks[0], leader2 = ranks[2];
  std::mt19937 rng(7);
  for (int round = 0; round < 6; ++round) {
    std::vector<RankMetadata> shuffled = TwoNodes();
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    const std::vector<std::string> problems = ApplyClockLeaders(Pointers(shuffled));
    EXPECT_TRUE(problems.empty()) << problems.front();
    for (const RankMetadata& m : shuffled) {
      if (m.rank == 1) ExpectCopiedFrom(m, leader0);
      if (m.rank == 3) ExpectCopiedFrom(m, leader2);
      if (m.rank == 0) {
        EXPECT_EQ(m.clock_offset_ns, 0);
      }
      if (m.rank == 2) {
        EXPECT_EQ(m.clock_offset_ns, leader2.clock_offset_ns) << "leaders untouched";
      }
    }
  }
}

TEST(ClockLeaders, ManyFollowersPerNode) {
  std::vector<RankMetadata> ranks;
  for (int node = 0; node < 8; ++node) {
    const std::string clock = "node-" + std::to_string(node) + "/timens:1";
    for (int local = 0; local < 8; ++local) {
      const int32_t rank = node * 8 + local;
      RankMetadata m =
          local == 0 ? Leader(rank, "", 1000 * node, 100 + node) : Follower(rank, node * 8, "");
      m.clock_id = clock;
      ranks.push_back(m);
    }
  }
  ranks[0].clock_offset_ns = 0;
  EXPECT_TRUE(ApplyClockLeaders(Pointers(ranks)).empty());
  for (const RankMetadata& m : ranks) {
    EXPECT_TRUE(m.clock_synchronized) << m.rank;
    EXPECT_EQ(m.clock_offset_ns, 1000 * (m.rank / 8)) << m.rank;
    EXPECT_EQ(m.clock_error_bound_ns, 100 + m.rank / 8) << m.rank;
  }
}

TEST(ClockLeaders, MissingLeaderLeavesTheFollowerUnsynchronizedAndSaysSo) {
  std::vector<RankMetadata> ranks = TwoNodes();
  ranks.erase(ranks.begin() + 2);  // rank 2's file is gone
  const auto problems = ApplyClockLeaders(Pointers(ranks));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "rank 3: clock leader rank 2 missing; not clock-synchronized");
  ExpectUnsynchronized(ranks[2]);
  EXPECT_TRUE(ranks[1].clock_synchronized) << "rank 1 still follows rank 0, which is there";
}

TEST(ClockLeaders, FollowerOfTheMissingRootKeepsItsOwnWord) {
  // Rank 0's file is lost, but rank 1 read rank 0's clock, which is the
  // timeline's reference whether or not rank 0's records survived.
  std::vector<RankMetadata> ranks = TwoNodes();
  ranks.erase(ranks.begin());
  RankMetadata unsure = Follower(5, 0, kNodeA);  // a follower that did not say so itself
  ranks.push_back(unsure);
  const auto problems = ApplyClockLeaders(Pointers(ranks));
  ASSERT_EQ(problems.size(), 1u) << problems.front();
  EXPECT_EQ(problems[0], "rank 5: clock leader rank 0 missing; not clock-synchronized");
  EXPECT_TRUE(ranks[0].clock_synchronized);
  EXPECT_EQ(ranks[0].clock_error_bound_ns, 0);
  ExpectUnsynchronized(ranks.back());
}

TEST(ClockLeaders, DifferentClockIsRefused) {
  std::vector<RankMetadata> ranks = TwoNodes();
  ranks[3].clock_id = kNodeA;  // says it reads node A's clock, follows node B's leader
  const auto problems = ApplyClockLeaders(Pointers(ranks));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("rank 3: clock id"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("clock leader rank 2"), std::string::npos) << problems[0];
  EXPECT_NE(problems[0].find("not clock-synchronized"), std::string::npos) << problems[0];
  ExpectUnsynchronized(ranks[3]);
}

TEST(ClockLeaders, EmptyClockIdsProveNothing) {
  std::vector<RankMetadata> ranks = TwoNodes();
  ranks[2].clock_id = "";
  ranks[3].clock_id = "";
  const auto problems = ApplyClockLeaders(Pointers(ranks));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("rank 3:"), std::string::npos);
  ExpectUnsynchronized(ranks[3]);
}

TEST(ClockLeaders, UnsynchronizedLeaderGivesNothing) {
  std::vector<RankMetadata> ranks = TwoNodes();
  ranks[2].clock_synchronized = false;
  ranks[2].clock_error_bound_ns = -1;
  ranks[2].clock_offset_ns = 0;
  const auto problems = ApplyClockLeaders(Pointers(ranks));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "rank 3: clock leader rank 2 is not clock-synchronized itself; not clock-synchronized");
  ExpectUnsynchronized(ranks[3]);
}

TEST(ClockLeaders, LeaderThatFollowsSomeoneElseIsNotALeader) {
  std::vector<RankMetadata> ranks = TwoNodes();
  ranks[2].clock_leader_rank = 0;  // a corrupt or hand-edited file: no chains
  const auto problems = ApplyClockLeaders(Pointers(ranks));
  ASSERT_EQ(problems.size(), 2u);
  // Rank 2 itself now follows rank 0 across clocks: refused too.
  EXPECT_NE(problems[0].find("rank 2: clock id"), std::string::npos) << problems[0];
  EXPECT_EQ(problems[1],
            "rank 3: clock leader rank 2 did not measure its clock itself (it follows rank 0); "
            "not clock-synchronized");
}

TEST(ClockLeaders, OlderFilesAndSelfMeasuredRanksAreLeftAlone) {
  std::vector<RankMetadata> ranks;
  RankMetadata old_unsynced;  // a 1.2 file: -1, "", unsynchronized
  old_unsynced.rank = 0;
  RankMetadata old_synced = Leader(1, "", -42, 17);
  old_synced.clock_leader_rank = 1;  // names itself: its own measurement
  ranks = {old_unsynced, old_synced};
  const std::vector<RankMetadata> before = ranks;
  EXPECT_TRUE(ApplyClockLeaders(Pointers(ranks)).empty());
  for (size_t i = 0; i < ranks.size(); ++i) {
    EXPECT_EQ(ranks[i].clock_synchronized, before[i].clock_synchronized);
    EXPECT_EQ(ranks[i].clock_offset_ns, before[i].clock_offset_ns);
    EXPECT_EQ(ranks[i].clock_error_bound_ns, before[i].clock_error_bound_ns);
  }
  EXPECT_TRUE(ApplyClockLeaders({}).empty());
}

TEST(ClockLeaders, DuplicateRankFilesPreferTheOneThatMeasured) {
  // rank-00002.h5 and rank-00002.pid123.h5: the merge may hand both over.
  std::vector<RankMetadata> ranks = TwoNodes();
  RankMetadata stray = Follower(2, 0, kNodeB);
  ranks.insert(ranks.begin(), stray);
  std::vector<RankMetadata*> p = Pointers(ranks);
  p.push_back(nullptr);  // tolerated
  const auto problems = ApplyClockLeaders(p);
  // The stray copy of rank 2 follows rank 0 across clocks: refused; rank 3
  // still gets the real rank 2's model.
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("rank 2: clock id"), std::string::npos) << problems[0];
  ExpectCopiedFrom(ranks[4], ranks[3]);
}

}  // namespace
}  // namespace aon
