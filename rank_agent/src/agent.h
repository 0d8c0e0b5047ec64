// The per-rank agent: one per process, created by whichever entry point the
// process reaches first (CUDA's InitializeInjection, NVTX's
// InitializeInjectionNvtx2, the synthetic device) and never destroyed, so late
// callbacks during process teardown always find valid state.
//
// Lifecycle:
//   Get() -> config + identity + ring; atexit and signal hooks installed; the
//   ring handed to the node collector (started if this is the node's first rank).
//   sources (CUPTI, NVTX, synthetic, NCCL, op ranges) receive context() and push
//   records into its sink.
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

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdarg>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent_notes.h"
#include "aon/base/secure_fs.h"
#include "aon/base/timebase.h"
#include "aon/clocksync/rank_sync.h"
#include "aon/config/agent_config.h"
#include "aon/config/rank_identity.h"
#include "aon/format/trace_format.h"
#include "capture_control.h"
#include "collector_link.h"
#include "host_sampler.h"
#include "record_sink.h"
#include "source_context.h"

namespace aon::agent {

class Agent final : public AgentNotes {
 public:
  // The process's agent (created on first call; thread-safe). Called only by
  // the entry points (entry_points.cc, capture_api.cc), which hand context()
  // to the source they start.
  static Agent& Get();

  // What the sources receive: config, rank, sink, capture control, notes.
  const SourceContext& context() const { return *context_; }

  void Note(const std::string& text) override;
  void LogV(const char* fmt, va_list ap) override;
  void SetSource(const std::string& source) override;
  void AddDevice(const DeviceInfo& device) override;
  void SetFlushHook(Hook hook) override { flush_hook_.store(hook); }
  void AddFinishHook(Hook hook) override;

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
  // After the collector died: the agent's own thread drains the ring into the
  // rank's own file while the job runs (what the collector would have done),
  // so that a long run after it loses only what a full ring drops.
  void TakeOver();
  void DrainOwnFile();
  void StopTakeOver();

  AgentConfig config_;
  // config_.output_dir held from the start (aon/base/secure_fs.h): the key is
  // read and the rank's own file written through it. Not held: nothing written.
  HeldDirectory job_dir_;
  bool config_ok_ = false;
  // The launcher (torchrun) loaded us too, but only its children are ranks.
  bool launcher_process_ = false;
  RankIdentity identity_;
  std::unique_ptr<RecordSink> sink_;
  // The node collector that drains the ring (null: degraded, written in-process).
  std::unique_ptr<CollectorLink> collector_;
  std::atomic<bool> collector_lost_{false};
  // When the collector was found gone (0: never): RankMetadata::collector_lost_ns.
  std::atomic<uint64_t> collector_lost_ns_{0};
  // The take-over (TakeOver): its thread, and the rank's own file it writes,
  // which WriteInProcess finishes. own_* are the thread's until it is joined.
  std::mutex takeover_mu_;
  std::condition_variable takeover_cv_;
  bool takeover_stop_ = false;  // guarded by takeover_mu_; also: too late to start
  std::thread takeover_;
  std::unique_ptr<TraceWriter> own_writer_;
  Status own_status_;
  RecordSink::Unwritten own_unwritten_;
  size_t own_strings_ = 0;  // names in the own file (RecordSink::AppendNewStrings)
  RealtimeAnchor anchor_;
  pid_t pid_ = 0;  // a forked child must not write its parent's rank file
  uint64_t start_ns_ = 0;

  std::mutex meta_mu_;  // guards notes_, source_, devices_, finish_hooks_
  std::vector<std::string> notes_;
  std::string source_ = "none";
  std::string capture_disabled_;  // RankMetadata::capture_disabled (set once, at start)
  std::vector<DeviceInfo> devices_;

  std::unique_ptr<clocksync::RankClockSync> clock_sync_;
  std::unique_ptr<CaptureControl> capture_;
  std::unique_ptr<SourceContext> context_;
  std::unique_ptr<HostSampler> sampler_;  // null: host sampling off
  std::atomic<Hook> flush_hook_{nullptr};
  std::vector<Hook> finish_hooks_;  // guarded by meta_mu_
  std::once_flag finish_once_;
};

}  // namespace aon::agent
