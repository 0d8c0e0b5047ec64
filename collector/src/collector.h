// aon-collector: one per job per node. Drains the shared-memory ring of every
// rank of its node and appends the records to the per-rank HDF5 files; the
// ranks never write files themselves (unless degraded). See
// ipc/include/aon/ipc/collector_protocol.h for the protocol and
// ipc/include/aon/ipc/shm_ring.h for the ring.
//
// One thread, one poll() loop:
//   every drain period (20 ms): each ring is drained into memory;
//   every flush interval (full mode, 1 s): each rank's new records, new strings
//     and progress metadata are appended to rank-NNNNN.h5.partial and flushed,
//     so a kill of the collector leaves a readable file up to the last flush;
//   FINISH from a rank: last drain, final metadata, file renamed to its final
//     name, DONE answered (the rank exits only then);
//   a connection closed without FINISH (the rank died, even by SIGKILL): last
//     drain of what reached its ring, file finished marked truncated;
//   flight mode: drained records are kept as a time window per rank (bounded
//     by the window length and the rank's memory cap) and appended only when a
//     trigger fires: SIGUSR1, a TRIGGER message (aon-collector --trigger), a
//     rank dying, an NCCL stall or a step-time spike (flight_watch.h).
// It exits when no rank is left (after a short linger), or on QUIESCE.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "aon/base/status.h"
#include "aon/config/agent_config.h"
#include "flight_watch.h"

namespace aon::collector {

struct CollectorOptions {
  std::string socket_name;
  std::string output_dir;
  CaptureMode mode = CaptureMode::kFull;  // budgeted and full are the same here; flight
  double window_s = 60;
  int64_t flush_ms = 1000;
  int64_t drain_ms = 20;
  // CPU bound, in cores: over a flush interval above it, the collector drains
  // less often (up to 25x; rings then fill and drop, counted); below half of
  // it, it speeds up again.
  double cpu_budget = 0.5;
  int64_t linger_ms = 2000;      // after the last rank left (flight: 5000)
  int64_t idle_exit_ms = 60000;  // no rank ever connected
  FlightWatchOptions flight;
  // GPU counters (gpm_counters.h): auto and gpm sample NVML GPM every
  // counters_interval_ms, off never loads NVML.
  CounterMode counters = CounterMode::kAuto;
  int64_t counters_interval_ms = 100;
  bool verbose = false;
};

// Binds the abstract socket `socket_name` and listens. Unavailable when another
// collector already holds the name (that one serves the job).
StatusOr<int> BindListener(const std::string& socket_name);

// Serves ranks on `listen_fd` until none is left (after a short linger) or a
// QUIESCE. Returns the process exit code.
int RunCollector(const CollectorOptions& options, int listen_fd);

}  // namespace aon::collector
