// A one-line progress bar on stderr, drawn by process 0 when stderr is a
// terminal. Work is counted in records: each kind is read once (first pass) and
// exchanged + written once (its rounds).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

namespace aon::merge {

class Progress {
 public:
  Progress(bool enabled, uint64_t total_records);
  ~Progress() { Finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `fraction_of_kind` of a kind of `kind_records` (over all processes) is done,
  // after `done_before_kind` units of earlier kinds (2 per record).
  void Set(std::string_view kind, std::string_view phase, uint64_t done_before_kind,
           double fraction_of_kind, uint64_t kind_records);
  void Finish();

 private:
  bool on_;
  uint64_t total_;
  std::chrono::steady_clock::time_point t0_;
  std::chrono::steady_clock::time_point last_{};
  bool drawn_ = false;
};

}  // namespace aon::merge
