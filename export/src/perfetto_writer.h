// The trace-event model (trace_events.h) as Perfetto's protobuf trace format,
// compressed and split by time into files of a bounded size, with an index.
// ui.perfetto.dev and trace_processor open each file.
//
// A file is one perfetto.protos.Trace message whose packets are compressed in
// chunks (packet_file.h: TracePacket.compressed_packets, each a zlib stream of
// TracePackets, as Perfetto's tracing service writes them). Inflated, the
// TracePackets (Trace field 1) are all on one packet sequence
// (trusted_packet_sequence_id 1); field numbers are those of
// protos/perfetto/trace/perfetto_trace.proto (a copy is in tests/data/perfetto/):
//   TrackDescriptor packets, each before the first event on its track in that
//     file: a process per rank (pid = rank), a thread track per OS thread (pid,
//     tid), a named track (parent = the process) per GPU stream / NCCL
//     communicator / ..., a counter track per counter, and "NVTX start/end"
//     lanes: async slices go on the first lane of their process that is free
//     at their start (events come in start order, so this packs them).
//   TrackEvent packets: SLICE_BEGIN + SLICE_END per slice, INSTANT, COUNTER
//     (double_counter_value or counter_value); names, categories and argument
//     names interned (InternedData in the packet that first uses them); args as
//     DebugAnnotations; flows as flow_ids / terminating_flow_ids. A host
//     sample's INSTANT carries callstack_iid: its stack as an interned Callstack
//     of Frames (Python frames KIND_INTERPRETED with function, source file and
//     line; native ones KIND_NATIVE with a Mapping named by their module), so
//     Perfetto draws a flame graph of the samples a selection holds.
//   Interning is per file: the first packet of a file sets
//   SEQ_INCREMENTAL_STATE_CLEARED, so each file stands alone; the tables are also
//   cleared after kMaxInterned strings, which bounds memory when names are
//   unique (step numbers).
// Splitting: a file is closed before the event that could take it over
// max_file_bytes (the bound: the exact compressed size of the chunks begun so
// far plus the worst case for the chunk the event would end in; it depends on
// the input alone, PacketFile::Fits), and the event opens the
// next one. A slice's begin and end stay in one file, so a file holds the
// events that *start* in its time range. Files: `path`, then path with
// ".00001", ".00002", ... before ".pftrace" (or after `path` when it has
// another name); the index (PerfettoIndexPath) lists them with their time
// ranges and is written last. A file is written as <file>.partial and renamed.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "aon/base/status.h"
#include "aon/export/perfetto_files.h"
#include "json_trace_writer.h"
#include "output_file.h"
#include "trace_events.h"

namespace aon::merge {

class PacketFile;

class PerfettoWriter final : public trace::TraceSink {
 public:
  using MetaValue = TraceMetadata::value_type::second_type;

  // `level`: the compression level (1 fast .. 9 small); `threads`: compressing
  // threads beside the encoding one.
  PerfettoWriter(std::string path, uint64_t max_file_bytes, int level, unsigned threads);
  ~PerfettoWriter() override;

  void OnProcess(const trace::ProcessInfo& process) override;
  void OnTrack(uint32_t id, const trace::TrackInfo& track) override;
  void OnSlice(const trace::Slice& slice) override;
  void OnCounter(const trace::CounterSample& sample) override;

  // Closes the last file (an export without events still gets one file), writes
  // the index with `metadata` and removes parts of an older, longer export.
  // Returns the first error met (the message names the file).
  Status Finish(const TraceMetadata& metadata);

  const std::vector<PerfettoFileInfo>& files() const { return files_; }
  uint64_t events() const { return events_; }

  static constexpr size_t kMaxInterned = 1 << 16;

 private:
  struct TrackEntry {
    uint64_t uuid = 0;
    uint64_t parent_uuid = 0;  // 0: none (processes, threads)
    uint32_t pid = 0;
    int64_t tid = 0;
    trace::TrackKind kind = trace::TrackKind::kNamed;
    bool process = false;
    std::string name;
    std::string unit;    // counters: CounterDescriptor.unit_name; "" none
    int64_t order = -1;  // sibling_order_rank; -1 none
  };
  struct Lane {
    uint32_t track = 0;  // index in tracks_
    uint64_t busy_until = 0;
  };
  struct StringHash {
    using is_transparent = void;  // look names up without copying them
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Interned {
    std::unordered_map<std::string, uint64_t, StringHash, std::equal_to<>> ids;
    uint32_t field = 0;  // InternedData field
    // The last strings looked up, by where the caller's text was: most names,
    // categories and argument keys are the same few texts at the same
    // addresses, so a lookup is a compare instead of a hash. A hit still
    // compares the text (an address may hold another text later).
    struct Recent {
      const char* at = nullptr;
      const std::string* text = nullptr;  // the key in ids (node keys stay put)
      uint64_t iid = 0;
    };
    std::array<Recent, 64> recent{};
  };

  uint32_t AddTrack(TrackEntry entry);
  uint32_t LaneFor(uint32_t pid, uint64_t start, uint64_t end);
  // Encodes one unit (descriptors it needs + its packets) with `encode` and
  // writes it, opening the next file first when it would not fit.
  template <typename F>
  void WriteUnit(uint64_t ts, F&& encode);
  Status OpenFile();
  Status CloseFile();
  void ResetSequence();

  void Describe(uint32_t track);
  uint64_t Intern(Interned& table, std::string_view s);
  uint64_t InternName(const trace::Slice& s);
  // A host sample's stack as an interned Callstack (its frames, their
  // function names, source files and mappings interned with it); the iid.
  uint64_t InternCallstack(std::string_view stack);
  uint64_t InternFrame(std::string_view frame);
  uint64_t InternMapping(std::string_view path);
  void EncodeBegin(uint32_t track, const trace::Slice& s, int type);
  void EncodeEnd(uint32_t track, uint64_t ts);

  std::string path_;
  uint64_t max_file_bytes_;
  int level_;
  unsigned threads_;
  Status status_;

  std::vector<TrackEntry> tracks_;
  std::vector<uint32_t> by_id_;           // builder's track id -> index in tracks_
  std::map<uint32_t, uint32_t> process_;  // pid -> index in tracks_
  std::map<uint32_t, std::vector<Lane>> lanes_;
  uint64_t next_uuid_ = 1;

  // Per file.
  std::unique_ptr<PacketFile> file_;
  std::vector<char> described_;  // by index in tracks_
  Interned names_, categories_, arg_names_;
  Interned function_names_, source_paths_, mapping_paths_;
  using IidMap = std::unordered_map<std::string, uint64_t, StringHash, std::equal_to<>>;
  IidMap frames_, callstacks_, mappings_;
  // Slice names by timeline string id (Slice::name_id): their iid in names_'
  // numbering, 0 not yet interned in this file. Saves hashing long kernel
  // names for every slice.
  std::vector<uint64_t> name_iids_;
  size_t interned_count_ = 0;
  bool clear_pending_ = true;
  PerfettoFileInfo current_;

  std::string unit_, interned_;
  std::vector<PerfettoFileInfo> files_;
  uint64_t events_ = 0;
};

}  // namespace aon::merge
