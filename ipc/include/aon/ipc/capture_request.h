// On-demand capture windows (docs/always-on.md, "On demand"): files in the job
// directory, so that one command reaches every rank on every node through the
// directory the nodes share, with no network connection of its own.
//
//   aon-steps-<host>        each node's collector, about once a second while
//                           steps advance: the latest step its ranks began, of
//                           which source, and how long a step takes;
//   aon-capture-request     aon-ctl capture: capture `steps` steps from step
//                           `first_step` of `source`; `seq` tells a new request
//                           from one already served.
//   aon-trigger-request     aon-ctl trigger: a flight-mode job's collectors dump
//                           their windows, with the request's reason; `seq` as above;
//   aon-trigger-answer-<host> each node's collector, once it has served a
//                           trigger request: the request's seq and what it did.
//
// Each collector reads the request (at most about a second late), and hands it
// to its ranks through their rings' headers (shm_ring.h); each rank's agent
// opens the window at that step number, which is the same step on every rank.
// aon-ctl chooses first_step past the step every node will have reached by the
// time every collector has read the request. Both files are the job user's own
// (secure_fs.h: written atomically, read only when owned by the user and not a
// link).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "aon/base/status.h"
#include "aon/format/records.h"

namespace aon {

inline constexpr char kCaptureRequestFile[] = "aon-capture-request";
inline constexpr char kNodeStepsPrefix[] = "aon-steps-";
inline constexpr char kTriggerRequestFile[] = "aon-trigger-request";
inline constexpr char kTriggerAnswerPrefix[] = "aon-trigger-answer-";
inline constexpr size_t kControlFileMaxBytes = 4096;

struct CaptureRequest {
  uint64_t seq = 0;         // increases with every request of a job
  uint64_t first_step = 0;  // the window's first step, numbered by `source`
  uint32_t steps = 0;       // 1 .. kMaxOnDemandSteps
  StepSource source = StepSource::kNone;
};
inline constexpr uint32_t kMaxOnDemandSteps = 10000;

struct NodeSteps {
  std::string host;
  uint64_t step = 0;  // latest step begun by any rank of the node
  StepSource source = StepSource::kNone;
  // The shortest step the node's ranks ended since the last publication (0:
  // unknown): projecting with it errs towards later steps, so a request is
  // not late when the steps speed up (a loaded node freed, a slow phase over).
  uint64_t step_ns = 0;
  uint64_t at_realtime_ns = 0;  // when that step began (CLOCK_REALTIME)
  uint32_t ranks = 0;           // ranks of the node that reported steps
};

// A flight-recorder dump asked for by hand (aon-ctl trigger).
struct TriggerRequest {
  uint64_t seq = 0;
  std::string reason;  // one line, printable, at most kMaxTriggerReason bytes
};
inline constexpr size_t kMaxTriggerReason = 200;

// A node collector's answer to a TriggerRequest.
struct TriggerAnswer {
  std::string host;
  uint64_t seq = 0;     // the request's
  bool dumped = false;  // false: not a flight-mode job (nothing to dump)
  std::string what;     // what it did, one line
};

// The reason as a request carries it: control characters become spaces,
// longer text is cut at kMaxTriggerReason bytes.
std::string CleanTriggerReason(std::string_view reason);

std::string FormatCaptureRequest(const CaptureRequest& r);
// Errors name `path`.
StatusOr<CaptureRequest> ParseCaptureRequest(std::string_view text, const std::string& path);
std::string FormatNodeSteps(const NodeSteps& n);
StatusOr<NodeSteps> ParseNodeSteps(std::string_view text, const std::string& path);
std::string FormatTriggerRequest(const TriggerRequest& r);
StatusOr<TriggerRequest> ParseTriggerRequest(std::string_view text, const std::string& path);
std::string FormatTriggerAnswer(const TriggerAnswer& a);
StatusOr<TriggerAnswer> ParseTriggerAnswer(std::string_view text, const std::string& path);
// A host name as a file name part ('/' and NUL made '_', "" -> "node").
std::string HostFilePart(std::string_view host);

// The first step of an on-demand window: for each node, the step it will have
// begun `lead_ns` after `now_realtime_ns` (its latest step, plus the steps of its
// step length since), the largest over the nodes, plus one.
uint64_t ChooseFirstStep(const std::vector<NodeSteps>& nodes, uint64_t now_realtime_ns,
                         uint64_t lead_ns);

// "nvtx" -> StepSource::kNvtx ("" or unknown: kNone).
StepSource StepSourceFromName(std::string_view name);

}  // namespace aon
