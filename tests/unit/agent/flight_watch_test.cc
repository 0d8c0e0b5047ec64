// Flight-recorder triggers derived from a rank's records (collector/src/
// flight_watch.h): NCCL stalls and step-time spikes, each firing once per episode.
#include "flight_watch.h"

#include <gtest/gtest.h>

namespace aon::collector {
namespace {

constexpr uint64_t kS = 1'000'000'000ull;

NvtxRecord Range(uint64_t start, uint64_t duration) {
  NvtxRecord r{};
  r.start_ns = start;
  r.end_ns = start + duration;
  r.type = static_cast<uint8_t>(NvtxType::kPushPop);
  return r;
}

TEST(FlightWatch, NcclStallFiresOnceAfterProgressStopsAndRearmsOnProgress) {
  FlightWatch w({.nccl_stall_s = 5, .step_range = "", .step_factor = 3});
  EXPECT_EQ(w.Check(100 * kS), "") << "no NCCL seen yet: silence is not a stall";
  w.OnNccl(100 * kS);
  EXPECT_EQ(w.Check(104 * kS), "");
  const std::string reason = w.Check(106 * kS);
  EXPECT_NE(reason.find("no NCCL progress for 6.0 s"), std::string::npos) << reason;
  EXPECT_EQ(w.Check(120 * kS), "") << "one dump per stall";
  w.OnNccl(121 * kS);
  EXPECT_EQ(w.Check(125 * kS), "");
  EXPECT_NE(w.Check(127 * kS), "") << "a new stall after progress fires again";
}

TEST(FlightWatch, NcclStallCheckCanBeTurnedOff) {
  FlightWatch w({.nccl_stall_s = 0, .step_range = "", .step_factor = 3});
  w.OnNccl(1 * kS);
  EXPECT_EQ(w.Check(1000 * kS), "");
}

TEST(FlightWatch, StepSpikeNeedsHistoryAndTheFactor) {
  FlightWatch w({.nccl_stall_s = 0, .step_range = "step", .step_factor = 3});
  // Fewer than kMinSteps steps: even a huge one is not judged.
  for (size_t i = 0; i + 1 < FlightWatch::kMinSteps; ++i) {
    EXPECT_EQ(w.OnNvtxRange(Range(i * kS, i == 3 ? 100'000'000 : 2'000'000), "train step"), "");
  }
  EXPECT_EQ(w.OnNvtxRange(Range(10 * kS, 2'000'000), "train step"), "");
  // 2.9x the median: not a spike; 3.5x: a spike, named with its numbers.
  EXPECT_EQ(w.OnNvtxRange(Range(11 * kS, 5'800'000), "train step"), "");
  const std::string reason = w.OnNvtxRange(Range(12 * kS, 7'000'000), "train step");
  EXPECT_NE(reason.find("step-time spike: 'train step' took 7.000 ms"), std::string::npos) << reason;
  EXPECT_NE(reason.find("3.5x the median 2.000 ms"), std::string::npos) << reason;
}

TEST(FlightWatch, OnlyRangesNamedAsStepsCount) {
  FlightWatch w({.nccl_stall_s = 0, .step_range = "step", .step_factor = 3});
  for (int i = 0; i < 20; ++i) w.OnNvtxRange(Range(i * kS, 1'000'000), "step");
  EXPECT_EQ(w.OnNvtxRange(Range(30 * kS, 50'000'000), "data loading"), "");
  NvtxRecord mark = Range(31 * kS, 0);
  mark.type = static_cast<uint8_t>(NvtxType::kMark);
  EXPECT_EQ(w.OnNvtxRange(mark, "step"), "");
  EXPECT_NE(w.OnNvtxRange(Range(32 * kS, 50'000'000), "step 21"), "");
}

}  // namespace
}  // namespace aon::collector
