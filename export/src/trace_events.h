// The trace-event model every viewer export writes: one description of what a
// viewer shows, built once from the timeline (trace_builder.h) or from the
// overview's bins (overview.cc), and one writer per file format behind
// TraceSink: JSON (json_trace_writer.h: trace.json, overview.json) and Perfetto
// protobuf (perfetto_writer.h) and OTF2 (otf2_writer.h).
//
//   Process   one per rank ("rank R @ host"), described before its tracks.
//   Track     a row of events inside a process, described once before its first
//             event and referred to by the id the builder gave it (0, 1, 2, ...):
//               kThread   an OS thread (tid = its thread id): CUDA API calls, NVTX;
//               kNamed    a row the profiler makes up (a GPU stream, an NCCL
//                         communicator, Steps): tid >= kFirstNamedTid, sort_index
//                         orders it among its process's rows;
//               kCounter  values over time (GPU metrics, the overview's busy
//                         fractions); `series` names the value.
//             Its role says what the row is to formats that model it (OTF2
//             location types): an OS thread, one GPU stream of `device`, one NCCL
//             communicator's operations, or another made-up row.
//   Slice     a named interval on a track with a category and arguments:
//               kComplete  nests with the other complete slices of its track;
//               kAsync     may overlap anything (NVTX start/end ranges), with an
//                          id unique in the export;
//               kInstant   a point in time (NVTX marks).
//             Flows: flow_begin starts an arrow that ends at the slice whose
//             flow_end has the same id (a CUDA API call -> its kernel, memcpy or
//             memset); flow_chain links every slice carrying that id in time order
//             (the ranks' instances of one NCCL collective). Ids are unique per
//             export; 0 = none. A collective operation also says so in
//             `collective` (communicator, operation, root, bytes), for formats
//             with collective events (OTF2).
//             A host stack sample is an instant whose `callstack` holds its
//             frames (Perfetto interns them as a callstack of the event).
//   Counter   a value of a counter track from `ts` on (viewers draw steps).
//
// Events come in start order from trace_builder (so a sink may split its output
// by time); strings are views valid only during the call: a sink copies what it
// keeps. Times are ns on the timeline clock.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>

namespace aon::merge::trace {

// Made-up tracks' tids start above any Linux thread id (pid_max <= 2^22).
inline constexpr int64_t kFirstNamedTid = int64_t{1} << 30;

struct ProcessInfo {
  uint32_t pid = 0;  // the rank
  std::string name;
  int64_t sort_index = 0;
  std::string host;  // "" unknown
};

enum class TrackKind : uint8_t { kThread, kNamed, kCounter };
enum class TrackRole : uint8_t { kOther, kCpuThread, kGpuStream, kCommunicator };

struct TrackInfo {
  uint32_t pid = 0;
  int64_t tid = 0;  // kThread: the OS thread id; kNamed: >= kFirstNamedTid; kCounter: 0
  TrackKind kind = TrackKind::kNamed;
  std::string name;
  int64_t sort_index = -1;  // kNamed: position among the process's rows; -1 none
  std::string category;     // kCounter: category of its samples ("" none)
  std::string series;       // kCounter: what the value is ("value", "fraction")
  std::string unit;         // kCounter: the value's unit ("%", "MiB/s"); "" none
  TrackRole role = TrackRole::kOther;
  uint32_t device = UINT32_MAX;  // kGpuStream: the GPU; UINT32_MAX unknown
};

struct Dim3 {
  int32_t x = 0, y = 0, z = 0;
};
using ArgValue = std::variant<uint64_t, int64_t, double, std::string_view, Dim3>;
struct Arg {
  std::string_view key;
  ArgValue value;
};

enum class SliceShape : uint8_t { kComplete, kAsync, kInstant };

// An NCCL collective operation (on a kCommunicator track).
struct Collective {
  uint64_t comm_hash = 0;
  std::string_view func;  // "AllReduce", "Broadcast", ...
  int32_t root = -1;      // rank in the communicator; -1 none
  uint64_t bytes = 0;
  int32_t comm_rank = -1;  // this rank's rank in the communicator; -1 unknown
};

struct Slice {
  uint32_t track = 0;
  SliceShape shape = SliceShape::kComplete;
  std::string_view name;
  // The timeline's string id that `name` is, when it is one (a sink may intern
  // names by it instead of by their text); 0: none.
  uint32_t name_id = 0;
  std::string_view category;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;    // >= start_ns; kInstant: = start_ns
  uint64_t async_id = 0;  // kAsync
  uint64_t flow_begin = 0;
  uint64_t flow_end = 0;
  uint64_t flow_chain = 0;
  const Collective* collective = nullptr;
  std::span<const Arg> args;
  // A host sample's stack (aon/format/host_stack.h: one frame per line,
  // outermost first), for formats that have callstacks (Perfetto); "" none.
  std::string_view callstack;
};

struct CounterSample {
  uint32_t track = 0;
  uint64_t ts = 0;
  std::variant<double, uint64_t> value;
};

// A writer of one format. Calls come in this order: every Process before the
// tracks of its pid, each Track before its first event.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void OnProcess(const ProcessInfo& process) = 0;
  virtual void OnTrack(uint32_t id, const TrackInfo& track) = 0;
  virtual void OnSlice(const Slice& slice) = 0;
  virtual void OnCounter(const CounterSample& sample) = 0;
};

}  // namespace aon::merge::trace
