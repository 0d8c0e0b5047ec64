// Rank clock synchronization inside the agent, through the job's PMIx.
//
// Rank 0's clock is the job's reference. Rank 0 runs a ping server and
// publishes its addresses (PMIx_Put GLOBAL + Commit); every other rank fetches
// them with a PMIx_Get of rank 0's key (a direct fetch, no fence: a fence from
// our thread could cross-match MPI's own, notes/pmix-clocksync.md), then
// measures its offset to rank 0 by ping-pong at start, every few seconds while
// it runs, and at exit, and fits offset + drift (clock_estimator.h). PMIx_Init
// happens once, on the thread that created the agent; it is reference counted,
// so MPI's own init/finalize are unaffected, and it is never finalized here.
//
// Without a PMIx launcher (torchrun, a plain program) nothing is measured: the
// ranks say they are unsynchronized (ranks on one host still share
// CLOCK_MONOTONIC, which the merge notes).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "aon/clock_estimator.h"
#include "aon/ping_pong.h"

namespace aon::clocksync {

struct SyncResult {
  bool synchronized = false;
  // reference clock = local + offset_ns + drift * (local - reference_ns)
  int64_t offset_ns = 0;
  double drift = 0.0;
  uint64_t reference_ns = 0;
  int64_t bound_ns = -1;  // -1: unknown
  size_t measurements = 0;
  std::string note;  // why unsynchronized, or how it was measured
};

class RankClockSync {
 public:
  // Starts the rendezvous (PMIx calls on this thread) and the measuring thread.
  // Never fails: a failure becomes an unsynchronized result with a note.
  static std::unique_ptr<RankClockSync> Start(int period_ms = 5000, int rounds = 64);
  ~RankClockSync();

  // Takes a last measurement (best effort), releases our PMIx reference (the
  // server counts a client that never finalizes as a process that exited
  // improperly; by exit MPI has finalized its own), and returns the model.
  SyncResult Finish();

 private:
  RankClockSync() = default;
  void Run();
  void Measure(int timeout_ms);
  SyncResult Model();

  int rounds_ = 64;
  int period_ms_ = 5000;
  uint32_t rank_ = 0;
  bool is_root_ = false;
  bool pmix_initialized_ = false;
  std::string failure_;
  std::unique_ptr<PingServer> server_;
  std::string root_endpoints_;  // "ip,ip,...:port"
  std::string nspace_;
  std::mutex mu_;
  std::vector<OffsetMeasurement> measurements_;
  std::string last_error_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> fetch_done_{false};  // the first fetch + measurement ended (either way)
  std::thread thread_;
};

}  // namespace aon::clocksync
