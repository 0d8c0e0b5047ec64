// Rank clock synchronization inside the agent, through the job's PMIx.
//
// Rank 0's clock is the job's reference. Rank 0 runs a ping server and
// publishes its addresses (PMIx_Put GLOBAL + Commit). Only one rank per node
// measures against it: the node leader, the lowest rank of the node's PMIx
// local peers (PMIX_LOCAL_PEERS of our own namespace; rank 0 leads its node).
// Each node leader publishes its clock id (timebase.h: boot id + time
// namespace); every other rank of the node fetches it and, when it is its own
// clock id too, measures nothing: it reads the leader's CLOCK_MONOTONIC, so its
// file names the leader (clock_leader_rank) and the merge gives it the
// leader's correction (aon/format/clock_leaders.h). A rank whose clock differs from
// its leader's (another time namespace) or whose leader cannot be found
// measures for itself, like a leader.
//
// Measuring: fetch rank 0's endpoint with a PMIx_Get of rank 0's key (a direct
// fetch, no fence: a fence from our thread could cross-match MPI's own,
// docs/clock-sync.md), then ping-pong at start, every few seconds while
// it runs, and at exit, and fit offset + drift (clock_estimator.h); the server
// answers all node leaders concurrently. PMIx_Init happens once, on the thread
// that created the agent; it is reference counted, so MPI's own init/finalize
// are unaffected. Only our own namespace's job data is used (PMIX_LOCAL_PEERS,
// PMIX_LOCAL_RANK, PMIX_HOSTNAME): Slurm 22.05 answers NOT_FOUND for a peer's
// PMIX_NODEID, so node ids are never compared.
//
// Without a PMIx launcher (torchrun, a plain program) nothing is measured: the
// ranks say they are unsynchronized (ranks on one host still share
// CLOCK_MONOTONIC, which the merge notes).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "aon/clocksync/clock_estimator.h"
#include "aon/base/linear_clock.h"
#include "aon/clocksync/ping_pong.h"

namespace aon::clocksync {

// The model onto rank 0's clock (aon/base/linear_clock.h; bound_ns -1: unknown), and
// how it was obtained.
struct SyncResult : LinearClock {
  bool synchronized = false;
  size_t measurements = 0;
  // >= 0: this rank measured nothing; it reads the clock of that rank (its
  // node leader), whose measurement applies to it. Followers of rank 0 are
  // synchronized (offset 0, bound 0: the reference clock itself); followers of
  // another leader are not, until the merge applies the leader's model.
  int32_t leader_rank = -1;
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
  // Fetches `key` of `rank` (no fence), asking again while it is not there yet,
  // until `limit` has passed or Finish stops us.
  std::string Fetch(uint32_t rank, const char* key, std::chrono::seconds limit, std::string* error);
  void Measure(int timeout_ms);
  SyncResult Model();

  int rounds_ = 64;
  int period_ms_ = 5000;
  uint32_t rank_ = 0;
  bool is_root_ = false;
  int64_t node_leader_ = -1;  // the rank elected for our node; -1: unknown
  std::string clock_id_;      // TimebaseClockId()
  std::string host_;          // PMIX_HOSTNAME, for notes
  bool pmix_initialized_ = false;
  std::string failure_;
  std::unique_ptr<PingServer> server_;
  std::string root_endpoints_;  // "ip,ip,...:port"
  std::string nspace_;
  std::mutex mu_;
  std::vector<OffsetMeasurement> measurements_;
  std::string last_error_;
  std::string role_note_;             // why this rank measures although it is not a leader
  std::atomic<int32_t> follows_{-1};  // set once the leader's clock id matched ours
  std::atomic<bool> stop_{false};
  std::atomic<bool> fetch_done_{false};  // the first fetch + measurement ended (either way)
  std::thread thread_;
};

}  // namespace aon::clocksync
