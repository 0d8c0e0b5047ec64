// The sample sort's arithmetic (merge/src/sample_sort.h): rounds, slab
// boundaries at sample quantiles, and which blocks a round re-reads.
#include "sample_sort.h"

#include <gtest/gtest.h>

#include <vector>

namespace aon::merge {
namespace {

TEST(SampleSort, RoundsKeepAProcessShareTimesThreeWithinTheBudget) {
  // 1000 rows of 64 bytes on 2 processes: share 500 (even split) x 64 x 3 = 96000 bytes.
  EXPECT_EQ(SortRounds(400, 1000, 2, 64, 96000), 1u);
  EXPECT_EQ(SortRounds(400, 1000, 2, 64, 95999), 2u);
  EXPECT_EQ(SortRounds(400, 1000, 2, 64, 32000), 3u);
  // One process reading more than an even share sets the share.
  EXPECT_EQ(SortRounds(900, 1000, 2, 64, 96000), 2u);  // 900 x 192 = 172800
  EXPECT_EQ(SortRounds(0, 0, 4, 64, 1), 1u) << "no rows: one round";
  EXPECT_EQ(SortRounds(10, 10, 1, 8, 0), 240u) << "a zero budget counts as one byte";
}

TEST(SampleSort, SlabBoundsAreSampleQuantiles) {
  EXPECT_EQ(SlabBounds({40, 10, 30, 20}, 2), (std::vector<uint64_t>{30}));
  EXPECT_EQ(SlabBounds({40, 10, 30, 20}, 4), (std::vector<uint64_t>{20, 30, 40}));
  EXPECT_EQ(SlabBounds({5}, 3), (std::vector<uint64_t>{5, 5}));
  EXPECT_EQ(SlabBounds({}, 3), (std::vector<uint64_t>{UINT64_MAX, UINT64_MAX}));
  EXPECT_TRUE(SlabBounds({1, 2, 3}, 1).empty());
}

TEST(SampleSort, SlabOfCountsTheBoundsAtOrBelow) {
  const std::vector<uint64_t> bounds = {20, 30, 30, 40};
  EXPECT_EQ(SlabOf(bounds, 0), 0u);
  EXPECT_EQ(SlabOf(bounds, 19), 0u);
  EXPECT_EQ(SlabOf(bounds, 20), 1u);
  EXPECT_EQ(SlabOf(bounds, 30), 3u) << "equal bounds leave an empty slab";
  EXPECT_EQ(SlabOf(bounds, UINT64_MAX), 4u);
  EXPECT_EQ(SlabOf({}, 7), 0u);
}

TEST(SampleSort, BlockInRoundWhenItsSlabsMeetTheRound) {
  // 2 processes x 3 rounds: slabs 0..5, round j = slabs j and 3 + j.
  const std::vector<uint64_t> bounds = {10, 20, 30, 40, 50};
  EXPECT_TRUE(BlockInRound(bounds, 0, 9, 3, 0));  // slab 0
  EXPECT_FALSE(BlockInRound(bounds, 0, 9, 3, 1));
  EXPECT_TRUE(BlockInRound(bounds, 35, 45, 3, 0));  // slabs 3, 4
  EXPECT_TRUE(BlockInRound(bounds, 35, 45, 3, 1));
  EXPECT_FALSE(BlockInRound(bounds, 35, 45, 3, 2));
  for (uint64_t round = 0; round < 3; ++round) {
    EXPECT_TRUE(BlockInRound(bounds, 5, 25, 3, round)) << "three slabs meet every round";
  }
}

}  // namespace
}  // namespace aon::merge
