// The agent's connection to its node's collector (protocol:
// ipc/include/aon/ipc/collector_protocol.h).
//
// Connect() finds the job's collector on this node or starts one: the
// aon-collector binary is spawned detached (its own process group in the
// job's session, reaped at once through a double fork) and races for the socket name with any collector
// another rank started at the same time; whichever binds serves everybody.
// Then the ring's memfd and the rank's identity are handed over.
#pragma once

#include <memory>
#include <string>

#include "aon/base/secure_fs.h"
#include "aon/base/status.h"
#include "aon/config/agent_config.h"
#include "aon/format/trace_format.h"
#include "aon/ipc/collector_protocol.h"

namespace aon::agent {

class CollectorLink {
 public:
  // Path of aon-collector: AON_COLLECTOR, else ../bin/aon-collector beside
  // this library. "" when none is found.
  static std::string FindCollector(const AgentConfig& config);

  // Connects (starting a collector if none answers within a few ms) and
  // registers the ring. The answer names the rank file the collector writes.
  // `job_dir` is config.output_dir held open: the collector key is read there.
  static StatusOr<std::unique_ptr<CollectorLink>> Connect(const AgentConfig& config,
                                                          const HeldDirectory& job_dir,
                                                          const std::string& collector_path,
                                                          const RankMetadata& hello, int ring_fd);
  ~CollectorLink();

  const std::string& rank_file() const { return rank_file_; }
  // Said once by the agent when not empty: the job's collector name was held by
  // another user and its key was renewed to reach a collector of its own.
  const std::string& note() const { return note_; }
  int fd() const { return fd_; }

  // Sends the final metadata and waits up to timeout_ms for the collector to
  // have written and closed the rank file. Returns its path.
  // The rank file's path; an error's code tells a collector that is gone from
  // one that did not answer in time (kTimedOut: it may still finish the file).
  CollectorOr<std::string> Finish(const RankMetadata& final_metadata, int timeout_ms);

 private:
  explicit CollectorLink(int fd) : fd_(fd) {}
  int fd_ = -1;
  std::string rank_file_;
  std::string note_;
};

}  // namespace aon::agent
