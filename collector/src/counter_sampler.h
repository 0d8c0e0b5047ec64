#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "aon/format/records.h"
#include "gpm_counters.h"

namespace aon::collector {

// Samples the node's GPU counters on a thread of its own, every interval, so
// that an interval is one counters interval whatever the collector's loop is
// doing: a drain of a busy ring or a slow write (a starved collector, a slow
// disk) would otherwise hold the next sample back, and one long interval
// blurs the phases it spans into one figure. The loop takes the rows when it
// can (their times are their own) and files them with the rank that holds the
// node's counters then.
class CounterSampler {
 public:
  // Takes the first sample (the start of the first interval) now.
  CounterSampler(std::unique_ptr<GpmCounters> gpm, uint64_t interval_ns);
  ~CounterSampler();  // stops the thread; rows not taken are dropped
  CounterSampler(const CounterSampler&) = delete;
  CounterSampler& operator=(const CounterSampler&) = delete;

  // Rows and notes sampled since the last call, appended.
  void Take(std::vector<CounterRecord>* rows, std::vector<std::string>* notes);
  // Samples now (the interval up to a finishing rank's end), then Take.
  void SampleNowAndTake(std::vector<CounterRecord>* rows, std::vector<std::string>* notes);

  size_t active_gpus() const { return active_gpus_; }
  const std::string& library() const { return gpm_->library(); }

 private:
  void Run();
  void SampleLocked();  // mu_ held

  std::unique_ptr<GpmCounters> gpm_;
  const uint64_t interval_ns_;
  size_t active_gpus_ = 0;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<CounterRecord> rows_;
  std::vector<std::string> notes_;
  std::thread thread_;
};

}  // namespace aon::collector
