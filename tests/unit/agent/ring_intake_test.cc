// What the node collector takes out of a rank's ring, entry by entry
// (collector/src/ring_intake.h): names by id with placeholders for the
// ones a full ring lost, names sent again later, ids a producer makes up,
// the latest record time and the steps.
#include "ring_intake.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace aon::collector {
namespace {

// A string entry as Consumer::Drain hands it over: u32 id, then the bytes.
class StringEntry {
 public:
  StringEntry(uint32_t id, const std::string& s) : bytes_(4 + s.size()) {
    std::memcpy(bytes_.data(), &id, 4);
    std::memcpy(bytes_.data() + 4, s.data(), s.size());
  }
  ring::Entry entry() const {
    return ring::Entry{static_cast<uint16_t>(ring::EntryType::kString), bytes_.data(),
                       static_cast<uint32_t>(bytes_.size())};
  }

 private:
  std::vector<uint8_t> bytes_;
};

template <typename T>
ring::Entry RecordEntry(const T& r) {
  return ring::Entry{ring::RecordEntryType(RecordTraits<T>::kKind),
                     reinterpret_cast<const uint8_t*>(&r), static_cast<uint32_t>(sizeof(T))};
}

std::vector<std::string> Strings(std::span<const std::string> s) { return {s.begin(), s.end()}; }

class RingIntakeTest : public ::testing::Test {
 protected:
  std::string Take(const ring::Entry& e, FlightWatch* watch = nullptr) {
    return in.Take(e, batches, watch, 0);
  }
  void TakeString(uint32_t id, const std::string& s) { Take(StringEntry(id, s).entry()); }

  RingIntake in;
  RecordBatches batches;
};

TEST_F(RingIntakeTest, NamesArriveByIdAndLostOnesGetPlaceholdersAtTheEnd) {
  TakeString(1, "gemm");
  TakeString(3, "relu");  // 2 was dropped: ring full
  EXPECT_EQ(Strings(in.Unwritten(false)), (std::vector<std::string>{"", "gemm"}))
      << "written only up to the first name not arrived";
  in.Written(2);
  TakeString(2, "sent again at exit");
  TakeString(5, "softmax");
  EXPECT_EQ(Strings(in.Unwritten(true)),
            (std::vector<std::string>{"sent again at exit", "relu", "<name 4 lost: ring full>",
                                      "softmax"}));
  EXPECT_EQ(in.refused_strings(), 0u);
}

// Found by tests/fuzz/ring_fuzz.cc: one 16-byte string entry with id 2^24 - 1
// made the collector allocate 16 M strings (512 MiB), and a finished rank's
// table would have held as many placeholders.
TEST_F(RingIntakeTest, AnIdFarAheadOfTheNamesReceivedSizesNothing) {
  TakeString(1, "gemm");
  TakeString(RingIntake::kMaxStringId - 1, "made up");
  TakeString(2 + RingIntake::kMaxIdLead, "too far");
  EXPECT_EQ(in.refused_strings(), 2u);
  EXPECT_EQ(Strings(in.Unwritten(true)), (std::vector<std::string>{"", "gemm"}));
}

TEST_F(RingIntakeTest, IdsAheadByLessThanTheLeadAreTaken) {
  // The names received so far: "" and 1. An id just inside the lead is taken
  // (the names before it may still come: sent again at exit).
  TakeString(1, "gemm");
  const uint32_t far = 2 + RingIntake::kMaxIdLead - 1;
  TakeString(far, "far");
  EXPECT_EQ(in.refused_strings(), 0u);
  const std::vector<std::string> all = Strings(in.Unwritten(true));
  ASSERT_EQ(all.size(), far + 1);
  EXPECT_EQ(all.back(), "far");
  EXPECT_EQ(all[2], "<name 2 lost: ring full>");
}

TEST_F(RingIntakeTest, RecordsGoToTheBatchAndMoveTheLatestTime) {
  KernelRecord k{};
  k.start_ns = 100;
  k.end_ns = 250;
  ApiRecord a{};
  a.end_ns = 200;
  EXPECT_EQ(Take(RecordEntry(k)), "");
  EXPECT_EQ(Take(RecordEntry(a)), "");
  EXPECT_EQ(in.records(), 2u);
  EXPECT_EQ(batches.Of<KernelRecord>().size(), 1u);
  EXPECT_EQ(batches.Of<ApiRecord>().size(), 1u);
  EXPECT_EQ(in.last_record_ns(), 250u);
}

TEST_F(RingIntakeTest, StepsTellTheStepThatBeganNext) {
  StepRecord s{};
  s.start_ns = 1000;
  s.end_ns = 1600;
  s.step = 41;
  s.source = static_cast<uint8_t>(StepSource::kNvtx);
  Take(RecordEntry(s));
  EXPECT_TRUE(in.steps().seen);
  EXPECT_EQ(in.steps().begun, 42u);
  EXPECT_EQ(in.steps().begun_ns, 1600u);
  EXPECT_EQ(in.steps().step_ns, 600u);
  EXPECT_EQ(in.steps().source, StepSource::kNvtx);
}

TEST_F(RingIntakeTest, AFlightWatchSeesNamedStepRanges) {
  FlightWatch watch({.nccl_stall_s = 0, .step_range = "step", .step_factor = 3});
  TakeString(1, "train step");
  std::string reason;
  for (uint64_t i = 0; i <= FlightWatch::kMinSteps; ++i) {
    NvtxRecord n{};
    n.start_ns = i * 1'000'000'000;
    n.end_ns = n.start_ns + (i == FlightWatch::kMinSteps ? 50'000'000 : 1'000'000);
    n.name_id = 1;
    n.type = static_cast<uint8_t>(NvtxType::kPushPop);
    reason = Take(RecordEntry(n), &watch);
  }
  EXPECT_NE(reason.find("step-time spike: 'train step'"), std::string::npos) << reason;
}

}  // namespace
}  // namespace aon::collector
