// RecordStore: the agent's in-process record memory, under a hard byte cap.
//
// Producers: CUPTI's buffer-completion thread, application threads (NVTX, the
// synthetic device) and the exit path. Each kind has its own vector and lock, so
// producers of different kinds never contend; a push is a lock + append. When
// the cap would be exceeded the record is dropped and counted per kind: memory
// is never exceeded and nothing is lost silently.
//
// This is the first capture stage (issue #2). The always-on stage (#3) replaces
// it with lock-free shared-memory rings drained by a node collector; the
// interface (Push / drop counts / Drain to a writer) stays.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <deque>
#include <tuple>
#include <vector>

#include "aon/records.h"
#include "aon/status.h"
#include "aon/string_table.h"
#include "aon/trace_file.h"

namespace aon::agent {

class RecordStore {
 public:
  explicit RecordStore(uint64_t cap_bytes) : cap_bytes_(cap_bytes) {}

  // Reserves bytes that live outside the store but count against the cap
  // (CUPTI's buffer pool). False if that would exceed the cap.
  bool ReserveExternal(uint64_t bytes) { return Charge(bytes); }
  void ReleaseExternal(uint64_t bytes) { used_bytes_.fetch_sub(bytes, std::memory_order_relaxed); }

  template <typename T>
  void Push(const T& record) {
    constexpr auto kind = static_cast<size_t>(RecordTraits<T>::kKind);
    if (closed_.load(std::memory_order_acquire) || !Charge(sizeof(T))) {
      dropped_[kind].fetch_add(1, std::memory_order_relaxed);
      return;
    }
    auto& slot = std::get<Slot<T>>(slots_);
    std::lock_guard<std::mutex> lock(slot.mu);
    // A deque grows in small blocks, so what is charged is what is held (a
    // vector's doubling would overshoot the cap by up to 2x).
    slot.records.push_back(record);
  }

  // Interns a string; strings count against the cap too. Returns 0 ("") and
  // counts a drop in `kind` when over the cap.
  uint32_t Intern(std::string_view s, RecordKind kind);

  void CountDropped(RecordKind kind, uint64_t n) {
    dropped_[static_cast<size_t>(kind)].fetch_add(n, std::memory_order_relaxed);
  }
  std::array<uint64_t, kRecordKindCount> Dropped() const;

  // After Close() every Push is dropped and counted: the file is being written.
  void Close() { closed_.store(true, std::memory_order_release); }

  // Writes every kind (sorted by start time) and the string table.
  Status WriteTo(TraceWriter& writer);

  // Calls f(T&) for every stored record of type T, under that kind's lock
  // (post-processing at write time, such as resolving NCCL correlations).
  template <typename T, typename F>
  void ForEach(F&& f) {
    auto& slot = std::get<Slot<T>>(slots_);
    std::lock_guard<std::mutex> lock(slot.mu);
    for (T& r : slot.records) f(r);
  }


 private:
  template <typename T>
  struct Slot {
    std::mutex mu;
    std::deque<T> records;
  };

  bool Charge(uint64_t bytes) {
    uint64_t used = used_bytes_.load(std::memory_order_relaxed);
    do {
      if (used + bytes > cap_bytes_) return false;
    } while (!used_bytes_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }

  const uint64_t cap_bytes_;
  std::atomic<uint64_t> used_bytes_{0};
  std::atomic<bool> closed_{false};
  std::array<std::atomic<uint64_t>, kRecordKindCount> dropped_{};
  std::tuple<Slot<KernelRecord>, Slot<MemcpyRecord>, Slot<MemsetRecord>, Slot<SyncRecord>,
             Slot<ApiRecord>, Slot<NvtxRecord>, Slot<NcclRecord>, Slot<ExternalCorrelationRecord>>
      slots_;
  std::mutex strings_mu_;
  StringTable strings_;
};

}  // namespace aon::agent
