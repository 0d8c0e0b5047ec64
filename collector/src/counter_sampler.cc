#include "counter_sampler.h"

#include <chrono>
#include <utility>

#include "aon/base/timebase.h"

namespace aon::collector {

CounterSampler::CounterSampler(std::unique_ptr<GpmCounters> gpm, uint64_t interval_ns)
    : gpm_(std::move(gpm)), interval_ns_(interval_ns) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    SampleLocked();
    active_gpus_ = gpm_->active_gpus();
  }
  thread_ = std::thread([this] { Run(); });
}

CounterSampler::~CounterSampler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void CounterSampler::SampleLocked() { gpm_->Sample(TimebaseNowNs(), &rows_, &notes_); }

void CounterSampler::Run() {
  // Deadlines on a fixed grid: a late wake-up shortens the next wait instead
  // of shifting every later sample.
  auto next = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    next += std::chrono::nanoseconds(interval_ns_);
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // behind by more than an interval: start again from now
    if (wake_.wait_until(lock, next, [this] { return stop_; })) break;
    SampleLocked();
  }
}

void CounterSampler::Take(std::vector<CounterRecord>* rows, std::vector<std::string>* notes) {
  std::lock_guard<std::mutex> lock(mu_);
  rows->insert(rows->end(), rows_.begin(), rows_.end());
  rows_.clear();
  for (std::string& n : notes_) notes->push_back(std::move(n));
  notes_.clear();
}

void CounterSampler::SampleNowAndTake(std::vector<CounterRecord>* rows,
                                      std::vector<std::string>* notes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    SampleLocked();
  }
  Take(rows, notes);
}

}  // namespace aon::collector
