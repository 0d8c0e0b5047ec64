// The trace-event model (trace_events.h) as an OTF2 archive (the Open Trace
// Format 2 of Score-P, Vampir and Scalasca), written with Debian's libotf2.
//
// What becomes what (export/README.md, "OTF2 archive", has the table):
//   system tree   "AON job" > one node per host;
//   location      a rank is a PROCESS location group on its host; each GPU of
//   groups        a rank an ACCELERATOR group created by it;
//   locations     OS threads, NCCL communicator rows and the other made-up rows
//                 (sync, NCCL API / channels / proxy, Steps): CPU_THREAD in the
//                 rank's group; GPU streams: ACCELERATOR_STREAM in their GPU's
//                 group; counters: a METRIC location each; NVTX start/end ranges,
//                 which may overlap anything, go on "NVTX ranges lane k" rows of
//                 their rank (the first lane free at their start);
//   regions       one per (name, record kind, role); the region's description is
//                 the record kind (kernel, memcpy, memset, sync, cuda_runtime,
//                 cuda_driver, nvtx:<domain>, nccl, steps, ops, ...);
//   slices        Enter + Leave on their location, args as OTF2 attributes;
//                 instants (NVTX marks) as an Enter and a Leave at one time;
//   collectives   an NCCL collective also gets MpiCollectiveBegin/End inside its
//                 region, on a communicator per NCCL comm hash whose group is
//                 the locations that ran it (members ordered by rank);
//   counters      Metric events of a one-member metric class per counter row;
//   host samples  (a slice with a callstack) also a CallingContextSample just
//                 before their Enter, on a calling-context tree whose nodes
//                 are their frames: a region per function (Python: with its
//                 file, the node with a source code location of its line;
//                 native and other frames: the frame's text), one interrupt
//                 generator "AON host sampler" (per-thread CPU time);
//   clock         timer resolution 1 GHz (ns on the timeline clock), global
//                 offset = the first event, trace length = the last - the first.
// OTF2 needs Enter/Leave properly nested per location: a slice that starts
// inside another of its row and ends after it goes on an "<row> (overlapping k)"
// location beside it (counted in `overlap_rows`); times are never changed.
// Flows have no OTF2 form: correlation ids stay attributes.
//
// Memory is bounded: the builder runs in passes over groups of ranks
// (BeginPass/EndPass close a pass's event writers), and OTF2's chunks come
// from a pool of `memory_bytes` (a writer asking past it is flushed to its file
// first); a pass holds at most one chunk per location beyond the pool.
// Definitions (strings, regions, locations, communicators) are kept until
// Finish writes them; they grow with distinct names, not with events.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "aon/base/status.h"
#include "trace_events.h"

struct OTF2_Archive_struct;
struct OTF2_EvtWriter_struct;
struct OTF2_AttributeList_struct;

namespace aon::merge {

struct Otf2WriterLimits {
  uint64_t chunk_bytes = 256 << 10;   // OTF2's event chunk (256 KiB..16 MiB)
  uint64_t memory_bytes = 128 << 20;  // the chunk pool
};

struct Otf2WriterCounts {
  uint64_t events = 0;       // OTF2 events written (Enter, Leave, collective, metric)
  uint64_t slices = 0;       // slices and instants (an Enter + Leave each)
  uint64_t collectives = 0;  // NCCL collectives with collective events
  // Collectives written as plain regions: they overlapped another collective of
  // their row (on an overlap row, or nested), where OTF2's collective events
  // would not be on a member of the communicator or would nest.
  uint64_t collectives_as_regions = 0;
  uint64_t metrics = 0;       // counter samples
  uint64_t samples = 0;       // calling-context samples (host samples with a stack)
  uint64_t overlap_rows = 0;  // locations added for slices that do not nest
  uint64_t locations = 0;
  uint64_t peak_pool_bytes = 0;  // OTF2's chunks at most, event and definition buffers
};

class Otf2Writer final : public trace::TraceSink {
 public:
  // The archive is written into the directory `dir` (made if missing); its
  // anchor is <dir>/traces.otf2. Messages name the archive `name` (`dir` if
  // empty): the exporter passes its held directory as /proc/self/fd/N.
  Otf2Writer(std::string dir, Otf2WriterLimits limits, std::string name = {});
  ~Otf2Writer() override;

  Status Open();
  // The builder's track ids restart with each pass.
  void BeginPass();
  Status EndPass();

  void OnProcess(const trace::ProcessInfo& process) override;
  void OnTrack(uint32_t id, const trace::TrackInfo& track) override;
  void OnSlice(const trace::Slice& slice) override;
  void OnCounter(const trace::CounterSample& sample) override;

  // Writes the definitions (clock from `t0` when there are no events) and the
  // archive properties ("AON::<KEY>" = value), closes the archive.
  Status Finish(uint64_t t0, const std::vector<std::pair<std::string, std::string>>& properties);

  const Otf2WriterCounts& counts() const { return counts_; }

 private:
  struct OpenSlice {
    uint64_t end = 0;
    uint32_t region = 0;
    bool collective = false;
    uint8_t op = 0;
    uint32_t comm = 0;
    uint32_t root = 0;
    uint64_t bytes = 0;
  };
  struct Location {
    uint32_t name = 0;  // string ref
    uint8_t type = 0;   // OTF2_LocationType
    uint32_t group = 0;
    uint32_t pid = 0;
    uint64_t events = 0;
    OTF2_EvtWriter_struct* writer = nullptr;
    std::vector<OpenSlice> stack;
    bool counter = false;
    bool overlap = false;           // an "(overlapping k)" row
    uint32_t description = 0;       // counters: the record kind
    uint32_t unit = 0;              // counters: the unit's string ("" none)
    std::vector<uint32_t> sampled;  // the last calling-context sample's path, root first
  };
  struct Region {
    uint32_t name = 0, description = 0;
    uint8_t role = 0, paradigm = 0;
    uint32_t file = UINT32_MAX;  // string ref; UINT32_MAX: none
  };
  struct Context {  // a node of the calling-context tree
    uint32_t region = 0;
    uint32_t location = UINT32_MAX;  // source code location; UINT32_MAX: none
    uint32_t parent = UINT32_MAX;    // UINT32_MAX: a root
  };
  struct LocationGroup {
    uint32_t name = 0;
    uint8_t type = 0;
    uint32_t node = 0;
    uint32_t creator = UINT32_MAX;
  };
  struct Comm {
    uint32_t id = 0;
    uint32_t name = 0;
    // (rank in the communicator, or INT32_MAX when unknown; job rank) -> location:
    // the group's order, which a collective's root refers to.
    std::map<std::pair<int32_t, uint32_t>, uint32_t> members;
  };
  struct Lane {
    uint32_t location = 0;
    uint64_t busy_until = 0;
  };
  struct Pool;

  uint32_t Str(std::string_view s);
  uint32_t RegionOf(std::string_view name, std::string_view category, uint8_t role,
                    uint8_t paradigm, std::string_view file = {});
  // The calling context of a host sample's stack (its leaf's id, the path
  // root first in `path`), made as needed.
  uint32_t ContextOf(std::string_view stack, std::vector<uint32_t>* path);
  void Sample(uint32_t location, uint64_t ts, std::string_view stack);
  uint32_t AttributeOf(std::string_view key, uint8_t type);
  uint32_t NodeOf(const std::string& host);
  uint32_t ProcessGroup(uint32_t pid);
  uint32_t AddLocation(uint32_t pid, std::string_view name, uint8_t type, uint32_t group);
  uint32_t LaneFor(uint32_t pid, uint64_t start, uint64_t end);
  uint32_t OverlapLane(uint32_t location, uint64_t start, uint64_t end);
  OTF2_EvtWriter_struct* Writer(uint32_t location);
  void Pop(uint32_t location, uint64_t until);
  void Fail(const std::string& what, int code);
  uint64_t DefChunkBytes() const;
  void Seen(uint64_t ts);

  std::string dir_;
  std::string name_;
  Otf2WriterLimits limits_;
  Status status_;
  OTF2_Archive_struct* archive_ = nullptr;
  OTF2_AttributeList_struct* attributes_ = nullptr;
  std::unique_ptr<Pool> pool_;

  std::unordered_map<std::string, uint32_t> strings_;
  std::vector<const std::string*> string_order_;
  std::unordered_map<std::string, uint32_t> regions_by_key_;
  std::vector<Region> regions_;
  std::map<std::pair<uint32_t, std::string>, uint32_t> contexts_by_key_;  // (parent, frame)
  std::vector<Context> contexts_;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> code_locations_by_key_;  // (file, line)
  std::vector<std::pair<uint32_t, uint32_t>> code_locations_;                // file, line
  std::map<std::pair<std::string, uint8_t>, uint32_t> attributes_by_key_;
  std::vector<std::pair<uint32_t, uint8_t>> attribute_defs_;  // name, OTF2_Type
  std::map<std::string, uint32_t> nodes_;                     // host -> node (0 is the job)
  std::vector<std::pair<uint32_t, uint32_t>> node_defs_;      // name, class
  std::vector<LocationGroup> groups_;
  std::map<uint32_t, uint32_t> process_groups_;                        // pid -> group
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> gpu_groups_;       // (pid, device) -> group
  std::map<uint32_t, std::pair<std::string, std::string>> processes_;  // pid -> name, host
  std::vector<Location> locations_;
  std::map<uint64_t, Comm> comms_;  // by comm hash
  struct MetricClass {              // and its one member
    uint32_t name = 0, description = 0, unit = 0;
    uint8_t type = 0;  // OTF2_Type
  };
  std::vector<MetricClass> metric_classes_;
  std::map<std::pair<uint32_t, uint8_t>, uint32_t> metric_class_of_;  // (location, type)

  // Per pass.
  std::vector<uint32_t> by_id_;  // builder's track id -> location
  std::map<uint32_t, std::vector<Lane>> lanes_;
  std::map<uint32_t, std::vector<uint32_t>> overlap_lanes_;  // location -> its overlap rows
  std::vector<uint32_t> pass_locations_;
  std::vector<std::string_view> added_;  // argument keys of the slice being written

  uint64_t first_ts_ = UINT64_MAX, last_ts_ = 0;
  Otf2WriterCounts counts_;
};

}  // namespace aon::merge
