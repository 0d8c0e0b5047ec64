// What the agent hands each source of records (CUPTI, the PM sampler, NVTX,
// NCCL, the synthetic device, operator ranges) when the entry point that starts
// it runs (entry_points.cc, capture_api.cc) or, for operator ranges, when the
// agent is made: the configuration, the rank, the record sink, the capture
// control and the notes. A source keeps it in a BoundContext and never reaches
// for the agent itself, so no source includes agent.h (tests/repo/layering_test.py).
#pragma once

#include <atomic>
#include <string>

#include "agent_notes.h"
#include "aon/config/agent_config.h"
#include "aon/config/rank_identity.h"
#include "aon/format/trace_format.h"
#include "capture_control.h"
#include "record_sink.h"

namespace aon::agent {

class SourceContext {
 public:
  // `records`: false where nothing may be recorded (a bad configuration, or
  // the job launcher's own process, torchrun's).
  SourceContext(const AgentConfig& config, const RankIdentity& identity, RecordSink& sink,
                CaptureControl& capture, AgentNotes& notes, bool records, bool recording)
      : config_(config),
        identity_(identity),
        sink_(sink),
        capture_(capture),
        notes_(notes),
        records_(records),
        recording_(recording) {}

  const AgentConfig& config() const { return config_; }
  const RankIdentity& identity() const { return identity_; }
  RecordSink& sink() const { return sink_; }
  // Steps and capture windows: sources of steps call capture().OnBoundary; the
  // GPU source binds itself with capture().Start.
  CaptureControl& capture() const { return capture_; }
  AgentNotes& notes() const { return notes_; }
  // False in a launcher process: no source may start there.
  bool recording() const { return recording_; }
  // False where nothing may be recorded: a bad configuration disabled capture.
  bool records() const { return records_; }
  bool enabled(RecordKind k) const { return records_ && config_.enabled(k); }

 private:
  const AgentConfig& config_;
  const RankIdentity& identity_;
  RecordSink& sink_;
  CaptureControl& capture_;
  AgentNotes& notes_;
  const bool records_;
  const bool recording_;
};

// A source's hold on its context: bound once by its start (from then on every
// callback of that source may use it), read lock-free from any thread.
class BoundContext {
 public:
  void Bind(const SourceContext& context) { context_.store(&context, std::memory_order_release); }
  bool bound() const { return context_.load(std::memory_order_acquire) != nullptr; }
  // Only once bound.
  const SourceContext* operator->() const { return context_.load(std::memory_order_acquire); }
  const SourceContext& operator*() const { return *context_.load(std::memory_order_acquire); }

 private:
  std::atomic<const SourceContext*> context_{nullptr};
};

}  // namespace aon::agent
