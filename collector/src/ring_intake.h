// What the node collector takes out of one rank's ring (aon/ipc/shm_ring.h), entry
// by entry: records into a RecordBatches, names into the rank's string table,
// and what the records say about the rank's progress (its latest record time,
// its steps, in flight mode the watch's triggers). One per rank; the collector
// writes the batches and the strings to the rank file (collector.cc).
//
// The producer is another process and is not trusted: Consumer::Drain checks
// each entry's size and type; what an entry says (a string id, a record's
// fields) is checked here before it sizes anything.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "aon/format/records.h"
#include "aon/ipc/record_batches.h"
#include "aon/ipc/shm_ring.h"
#include "flight_watch.h"

namespace aon::collector {

// The rank's steps as its StepRecords tell them (a StepRecord arrives when a
// step ends): the step that began next, when, and the length of the one that
// ended.
struct RankSteps {
  bool seen = false;
  uint64_t begun = 0;
  uint64_t begun_ns = 0;  // host CLOCK_MONOTONIC
  uint64_t step_ns = 0;
  // The shortest step ended since ResetFastestStep (aon-ctl's projection errs
  // towards later steps with it; capture_request.h).
  uint64_t fastest_ns = 0;
  StepSource source = StepSource::kNone;
};

class RingIntake {
 public:
  // Largest string id taken from a ring.
  static constexpr uint32_t kMaxStringId = 1u << 24;
  // How far a string id may run ahead of the names taken so far. The agent
  // sends each name once, in id order; a name the full ring had no room for is
  // sent again at exit (rank_agent/src/record_sink.h), so ids run ahead by the
  // names still waiting. An id further ahead would grow the table (and, when
  // the rank ends, fill it with placeholders) by up to kMaxStringId entries for
  // one 16-byte entry: it is not taken, and counted.
  static constexpr uint32_t kMaxIdLead = 1u << 16;

  // Takes one entry Consumer::Drain handed over: a string into the table, a
  // record appended to `into`. With a `watch` (flight mode), NVTX ranges and
  // NCCL operations are shown to it at `now_ns`; returns its trigger reason,
  // "" for none.
  std::string Take(const ring::Entry& e, RecordBatches& into, FlightWatch* watch, uint64_t now_ns);

  // The strings not written yet, in id order, up to the first id whose string
  // has not arrived; `final`: the rank is done, and an id that never arrived
  // (dropped from a full ring) gets a unique placeholder, so that ids stay dense.
  std::span<const std::string> Unwritten(bool final);
  // The first `count` strings Unwritten gave are in the file.
  void Written(size_t count) { written_ += count; }

  uint64_t records() const { return records_; }
  // Names not taken: an id too far ahead (kMaxIdLead) or past kMaxStringId.
  uint64_t refused_strings() const { return refused_strings_; }
  uint64_t last_record_ns() const { return last_record_ns_; }
  const RankSteps& steps() const { return steps_; }
  void ResetFastestStep() { steps_.fastest_ns = 0; }

 private:
  void TakeString(const ring::Entry& e);
  std::string Note(RecordKind kind, const RecordBatches& into, FlightWatch* watch, uint64_t now_ns);

  std::vector<std::string> strings_{std::string()};
  std::vector<uint8_t> have_{1};
  size_t written_ = 0;
  size_t taken_ = 1;  // ids whose name arrived (id 0, "", is always there)
  uint64_t refused_strings_ = 0;
  std::unordered_set<std::string> cut_strings_;  // names cut to kMaxStringBytes, kept unique
  uint64_t records_ = 0;
  uint64_t last_record_ns_ = 0;
  RankSteps steps_;
};

}  // namespace aon::collector
