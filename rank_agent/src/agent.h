// The per-rank agent: one per process, created by whichever entry point the
// process reaches first (CUDA's InitializeInjection, NVTX's
// InitializeInjectionNvtx2, the synthetic device) and never destroyed, so late
// callbacks during process teardown always find valid state.
//
// Lifecycle:
//   Get() -> config + identity + ring; atexit and signal hooks installed; the
//   ring handed to the node collector (started if this is the node's first rank).
//   sources (CUPTI, NVTX, synthetic, NCCL) push records into sink().
//   The collector appends them to <AON_OUTPUT_DIR>/rank-NNNNN.h5 every flush
//   interval, and finishes the file when this process ends, even by SIGKILL.
//   Finish(reason) exactly once: stop sources, flush CUPTI, hand the final
//   metadata to the collector and wait until it closed the file; without a
//   collector (degraded), write the file from here. Triggered by exit() (atexit),
//   or SIGTERM/SIGINT/SIGHUP when the application left them at their default
//   (the handler only wakes the agent's thread; that thread writes, then
//   re-raises the signal with its default action).
// Every failure is reported once on stderr with the "[aon]" prefix and recorded
// in the file's notes; the application is never stopped by the agent.
#pragma once

#include <atomic>
#include <sys/types.h>

#include <cstdarg>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "aon/config/agent_config.h"
#include "aon/config/rank_identity.h"
#include "aon/clocksync/rank_sync.h"
#include "aon/base/timebase.h"
#include "aon/format/trace_format.h"
#include "capture_control.h"
#include "collector_link.h"
#include "record_sink.h"

namespace aon::agent {

class Agent {
 public:
  // The process's agent (created on first call; thread-safe).
  static Agent& Get();

  const AgentConfig& config() const { return config_; }
  const RankIdentity& identity() const { return identity_; }
  RecordSink& sink() { return *sink_; }
  // Steps and capture windows (budgeted mode): sources of steps call
  // capture().OnBoundary; the GPU source binds itself with capture().Start.
  CaptureControl& capture() { return *capture_; }
  // False in a launcher process (torchrun's own): no source may start there.
  bool recording() const { return !launcher_process_; }
  bool enabled(RecordKind k) const { return config_ok_ && !launcher_process_ && config_.enabled(k); }

  // A degradation, said once: printed with the [aon] prefix and kept for the file.
  void Note(const std::string& text);
  void Log(const char* fmt, ...) __attribute__((format(printf, 2, 3)));  // only with AON_VERBOSE
  void SetSource(const std::string& source);
  void AddDevice(const DeviceInfo& device);

  // Hooks a source registers so Finish can stop/flush it before writing.
  using FlushHook = void (*)();
  void SetFlushHook(FlushHook hook) { flush_hook_.store(hook); }

  // Stops capture and writes the rank file, once; later calls return at once.
  void Finish(const char* reason);

  // The collector's socket (-1: none), watched by the agent's thread.
  int collector_fd() const { return collector_ ? collector_->fd() : -1; }
  void OnCollectorLost();

 private:
  Agent();
  void InstallExitHooks();
  void ConnectCollector();
  RankMetadata BaseMetadata() const;
  void WriteInProcess(const RankMetadata& m);
  std::string RankFilePath() const;

  AgentConfig config_;
  bool config_ok_ = false;
  // The launcher (torchrun) loaded us too, but only its children are ranks.
  bool launcher_process_ = false;
  RankIdentity identity_;
  std::unique_ptr<RecordSink> sink_;
  // The node collector that drains the ring (null: degraded, written in-process).
  std::unique_ptr<CollectorLink> collector_;
  std::atomic<bool> collector_lost_{false};
  RealtimeAnchor anchor_;
  pid_t pid_ = 0;  // a forked child must not write its parent's rank file
  uint64_t start_ns_ = 0;

  std::mutex meta_mu_;  // guards notes_, source_, devices_
  std::vector<std::string> notes_;
  std::string source_ = "none";
  std::vector<DeviceInfo> devices_;

  std::unique_ptr<clocksync::RankClockSync> clock_sync_;
  std::unique_ptr<CaptureControl> capture_;
  std::atomic<FlushHook> flush_hook_{nullptr};
  std::once_flag finish_once_;
};

}  // namespace aon::agent
