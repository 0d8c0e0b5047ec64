// RecordSink: where the agent's producers put records. A shared-memory ring
// (ipc/include/aon/ipc/shm_ring.h) that the node collector drains; in degraded
// mode (no collector) the agent drains it itself at exit.
//
// Producers: CUPTI's buffer-completion thread, NCCL's threads, application
// threads (NVTX, the synthetic device) and the exit path. A push is lock-free,
// allocation-free and syscall-free; a full ring drops the record and counts it
// per kind in the ring header, where the collector reads the counts.
//
// Memory budget (AON_MEMORY_CAP, hard): the ring takes the largest power of two
// <= half the cap; the rest pays for CUPTI's host buffers (ReserveExternal) and
// the agent's own string table. Nothing here can exceed the cap.
//
// Strings are interned here (under a mutex: new names are rare) and sent
// through the ring once, before the first record that uses them. A string the
// ring had no room for is sent again at exit (ResendDroppedStrings).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "aon/base/status.h"
#include "aon/format/records.h"
#include "aon/format/string_table.h"
#include "aon/format/trace_file.h"
#include "aon/ipc/shm_ring.h"

namespace aon::agent {

// Set in a child forked from this process (pthread_atfork, record_sink.cc):
// the ring it inherited is the parent's, and a forked child (a DataLoader
// worker, a compile worker) is not this rank. Its records, strings and drops
// go nowhere and are not counted: they would land in the parent's rank file as
// the parent's (seen: a child's kernels and steps counted as the rank's).
extern std::atomic<bool> g_sink_in_forked_child;

class RecordSink {
 public:
  // Never fails: without shared memory (error in *why) every record is
  // dropped and counted.
  RecordSink(uint64_t cap_bytes, int32_t pid, int32_t rank, std::string* why);

  template <typename T>
  void Push(const T& record) {
    if (g_sink_in_forked_child.load(std::memory_order_relaxed)) return;
    if (closed_.load(std::memory_order_acquire) || !producer_.attached()) {
      CountDropped(RecordTraits<T>::kKind, 1);
      return;
    }
    producer_.Push(record);
  }

  // CUPTI's buffer pool and other memory that counts against the cap. False
  // if that would exceed it.
  bool ReserveExternal(uint64_t bytes);
  void ReleaseExternal(uint64_t bytes) {
    external_used_.fetch_sub(bytes, std::memory_order_relaxed);
  }

  // Interns a string and sends it to the ring if new. Returns 0 ("") and
  // counts a drop of `kind` when the cap leaves no room for it.
  uint32_t Intern(std::string_view s, RecordKind kind);

  void CountDropped(RecordKind kind, uint64_t n);
  std::array<uint64_t, kRecordKindCount> Dropped() const;

  // After Close() every Push is dropped and counted (the trace is being closed).
  void Close() { closed_.store(true, std::memory_order_release); }
  // Sends again the strings that found the ring full. Returns how many are still unsent.
  size_t ResendDroppedStrings();
  // Marks the producer finished in the ring header.
  void MarkFinished();

  const ring::Region& region() const { return region_; }
  uint64_t ring_bytes() const { return region_.ring_bytes(); }

  // What the degraded mode could not write: room refused (a full disk, a
  // quota), per kind, and the first refusal.
  struct Unwritten {
    std::array<uint64_t, kRecordKindCount> records{};
    std::string why;
  };
  // Degraded mode (no collector, or after it died): drains what the ring holds
  // now into `writer` (the rank's own file), in batches. One caller at a time,
  // and only when no collector drains the ring. Bounded memory (one batch per
  // kind). Each batch is written only once the file has room for it and for
  // the names (TraceWriter::Reserve): a batch refused is counted in
  // *unwritten, and the file stays whole.
  Status DrainTo(TraceWriter& writer, Unwritten* unwritten);
  // Then, instead of TraceWriter::WriteStrings: the names interned since the
  // last call (*written of them are in the file already), so that the file
  // is readable, names included, after every flush.
  Status AppendNewStrings(TraceWriter& writer, size_t* written);

 private:
  ring::Region region_;
  ring::Producer producer_;
  uint64_t external_cap_ = 0;
  std::atomic<uint64_t> external_used_{0};
  std::atomic<bool> closed_{false};
  std::array<std::atomic<uint64_t>, kRecordKindCount> local_dropped_{};  // no ring

  std::mutex strings_mu_;
  StringTable strings_;
  std::vector<uint32_t> unsent_strings_;
};

}  // namespace aon::agent
