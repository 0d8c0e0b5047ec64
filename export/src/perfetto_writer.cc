#include "perfetto_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "aon/base/json_writer.h"
#include "aon/format/host_stack.h"
#include "json_trace_writer.h"
#include "packet_file.h"
#include "proto_wire.h"

namespace aon::merge {

namespace {

// Field numbers of protos/perfetto/trace/perfetto_trace.proto.
namespace f {
constexpr uint32_t kTracePacket = 1;  // Trace.packet
// TracePacket
constexpr uint32_t kTimestamp = 8;
constexpr uint32_t kSequenceId = 10;  // trusted_packet_sequence_id
constexpr uint32_t kTrackEvent = 11;
constexpr uint32_t kInternedData = 12;
constexpr uint32_t kSequenceFlags = 13;
constexpr uint32_t kTrackDescriptor = 60;
// TrackDescriptor
constexpr uint32_t kUuid = 1;
constexpr uint32_t kName = 2;
constexpr uint32_t kProcess = 3;
constexpr uint32_t kThread = 4;
constexpr uint32_t kParentUuid = 5;
constexpr uint32_t kCounter = 8;
constexpr uint32_t kChildOrdering = 11;
constexpr uint32_t kSiblingOrderRank = 12;
// CounterDescriptor
constexpr uint32_t kUnitName = 6;
// ProcessDescriptor
constexpr uint32_t kPid = 1;
constexpr uint32_t kProcessName = 6;
// ThreadDescriptor
constexpr uint32_t kThreadPid = 1;
constexpr uint32_t kTid = 2;
constexpr uint32_t kThreadName = 5;
// TrackEvent
constexpr uint32_t kCategoryIids = 3;
constexpr uint32_t kDebugAnnotations = 4;
constexpr uint32_t kType = 9;
constexpr uint32_t kNameIid = 10;
constexpr uint32_t kTrackUuid = 11;
constexpr uint32_t kCounterValue = 30;
constexpr uint32_t kDoubleCounterValue = 44;
constexpr uint32_t kFlowIds = 47;
constexpr uint32_t kTerminatingFlowIds = 48;
constexpr uint32_t kCallstackIid = 56;
// DebugAnnotation
constexpr uint32_t kArgNameIid = 1;
constexpr uint32_t kUintValue = 3;
constexpr uint32_t kIntValue = 4;
constexpr uint32_t kDoubleValue = 5;
constexpr uint32_t kStringValue = 6;
constexpr uint32_t kArrayValues = 12;
// InternedData
constexpr uint32_t kEventCategories = 1;
constexpr uint32_t kEventNames = 2;
constexpr uint32_t kDebugAnnotationNames = 3;
constexpr uint32_t kFunctionNames = 5;
constexpr uint32_t kFrames = 6;
constexpr uint32_t kCallstacks = 7;
constexpr uint32_t kMappingPaths = 17;
constexpr uint32_t kSourcePaths = 18;
constexpr uint32_t kMappings = 19;
// Frame
constexpr uint32_t kFunctionNameId = 2;
constexpr uint32_t kMappingId = 3;
constexpr uint32_t kSourcePathIid = 5;
constexpr uint32_t kLineNumber = 6;
constexpr uint32_t kFrameKind = 7;
// Callstack
constexpr uint32_t kFrameIds = 2;
// Mapping
constexpr uint32_t kPathStringIds = 7;
// EventName / EventCategory / DebugAnnotationName
constexpr uint32_t kIid = 1;
constexpr uint32_t kInternedName = 2;
}  // namespace f

constexpr uint32_t kSequence = 1;
constexpr uint64_t kSeqIncrementalStateCleared = 1;
constexpr uint64_t kSeqNeedsIncrementalState = 2;
constexpr int kSliceBegin = 1, kSliceEnd = 2, kInstant = 3, kCounterEvent = 4;
constexpr uint64_t kChildOrderingExplicit = 3;
// Plain bytes per compressed chunk at most (see OpenFile).
constexpr uint64_t kChunkBytes = 256 << 10;

std::string PartNumber(size_t part) {
  char digits[24];
  std::snprintf(digits, sizeof(digits), "%05zu", part);
  return digits;
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix.data(), suffix.size()) == 0;
}

constexpr std::string_view kSuffix = ".pftrace";

}  // namespace

std::string PerfettoPartPath(const std::string& path, size_t part) {
  if (part == 0) return path;
  if (EndsWith(path, kSuffix)) {
    return path.substr(0, path.size() - kSuffix.size()) + "." + PartNumber(part) +
           std::string(kSuffix);
  }
  return path + "." + PartNumber(part);
}

std::string PerfettoIndexPath(const std::string& path) {
  if (EndsWith(path, kSuffix)) return path.substr(0, path.size() - kSuffix.size()) + ".index.json";
  return path + ".index.json";
}

PerfettoWriter::PerfettoWriter(std::string path, uint64_t max_file_bytes, int level,
                               unsigned threads)
    : path_(std::move(path)),
      max_file_bytes_(std::max(max_file_bytes, kMinPerfettoFileBytes)),
      level_(level),
      threads_(threads) {
  names_.field = f::kEventNames;
  categories_.field = f::kEventCategories;
  arg_names_.field = f::kDebugAnnotationNames;
  function_names_.field = f::kFunctionNames;
  source_paths_.field = f::kSourcePaths;
  mapping_paths_.field = f::kMappingPaths;
}

PerfettoWriter::~PerfettoWriter() = default;

uint32_t PerfettoWriter::AddTrack(TrackEntry entry) {
  entry.uuid = next_uuid_++;
  tracks_.push_back(std::move(entry));
  described_.push_back(0);
  return static_cast<uint32_t>(tracks_.size() - 1);
}

void PerfettoWriter::OnProcess(const trace::ProcessInfo& process) {
  TrackEntry e;
  e.process = true;
  e.pid = process.pid;
  e.name = process.name;
  process_[process.pid] = AddTrack(std::move(e));
}

void PerfettoWriter::OnTrack(uint32_t id, const trace::TrackInfo& track) {
  TrackEntry e;
  e.pid = track.pid;
  e.tid = track.tid;
  e.kind = track.kind;
  e.name = track.name;
  e.unit = track.unit;
  if (track.kind != trace::TrackKind::kThread) {
    auto p = process_.find(track.pid);
    if (p != process_.end()) e.parent_uuid = tracks_[p->second].uuid;
  }
  if (track.sort_index >= 0) e.order = track.sort_index - trace::kFirstNamedTid;
  if (id >= by_id_.size()) by_id_.resize(id + 1, 0);
  by_id_[id] = AddTrack(std::move(e));
}

// Async slices of a process on "NVTX start/end" lanes: the first lane free at
// `start` (slices come in start order), else a new one.
uint32_t PerfettoWriter::LaneFor(uint32_t pid, uint64_t start, uint64_t end) {
  std::vector<Lane>& lanes = lanes_[pid];
  for (Lane& lane : lanes) {
    if (lane.busy_until <= start) {
      lane.busy_until = end;
      return lane.track;
    }
  }
  TrackEntry e;
  e.pid = pid;
  e.name = "NVTX start/end";
  e.order = int64_t{1} << 30;  // after the process's other rows
  auto p = process_.find(pid);
  if (p != process_.end()) e.parent_uuid = tracks_[p->second].uuid;
  const uint32_t track = AddTrack(std::move(e));
  lanes.push_back(Lane{track, end});
  return track;
}

void PerfettoWriter::ResetSequence() {
  for (Interned* t :
       {&names_, &categories_, &arg_names_, &function_names_, &source_paths_, &mapping_paths_}) {
    t->ids.clear();
    t->recent.fill({});
  }
  frames_.clear();
  callstacks_.clear();
  mappings_.clear();
  name_iids_.assign(name_iids_.size(), 0);
  interned_count_ = 0;
  clear_pending_ = true;
}

Status PerfettoWriter::OpenFile() {
  const std::string path = PerfettoPartPath(path_, files_.size());
  // Chunks of at most an eighth of a file keep the size bound close (and
  // within Perfetto's 512 KB per compressed packet).
  const size_t chunk = std::clamp<uint64_t>(max_file_bytes_ / 8, 4 << 10, kChunkBytes);
  AON_ASSIGN_OR_RETURN(file_, PacketFile::Create(path, level_, chunk, threads_));
  current_ = PerfettoFileInfo{};
  current_.path = path;
  std::fill(described_.begin(), described_.end(), 0);
  ResetSequence();
  return Status::Ok();
}

Status PerfettoWriter::CloseFile() {
  AON_ASSIGN_OR_RETURN(current_.bytes, file_->Commit());
  file_.reset();
  files_.push_back(current_);
  return Status::Ok();
}

uint64_t PerfettoWriter::Intern(Interned& table, std::string_view s) {
  Interned::Recent& r =
      table.recent[(reinterpret_cast<uintptr_t>(s.data()) >> 3) % table.recent.size()];
  if (r.at == s.data() && r.text != nullptr && *r.text == s) return r.iid;
  auto it = table.ids.find(s);
  if (it == table.ids.end()) {
    it = table.ids.emplace(std::string(s), table.ids.size() + 1).first;
    ++interned_count_;
    proto::Writer w(&interned_);
    w.BeginMessage(table.field);
    w.Varint(f::kIid, it->second);
    w.Bytes(f::kInternedName, s);
    w.EndMessage();
  }
  r = {s.data(), &it->first, it->second};
  return it->second;
}

uint64_t PerfettoWriter::InternName(const trace::Slice& s) {
  if (s.name_id == 0) return Intern(names_, s.name);
  if (s.name_id >= name_iids_.size()) name_iids_.resize(size_t{s.name_id} + 1, 0);
  uint64_t& iid = name_iids_[s.name_id];
  if (iid == 0) iid = Intern(names_, s.name);
  return iid;
}

namespace {

// Frame.kind
constexpr uint64_t kFrameNative = 1, kFrameInterpreted = 3;

}  // namespace

uint64_t PerfettoWriter::InternMapping(std::string_view path) {
  auto it = mappings_.find(path);
  if (it != mappings_.end()) return it->second;
  const uint64_t iid = mappings_.size() + 1;
  mappings_.emplace(std::string(path), iid);
  const uint64_t path_iid = Intern(mapping_paths_, path);
  ++interned_count_;
  proto::Writer w(&interned_);
  w.BeginMessage(f::kMappings);
  w.Varint(f::kIid, iid);
  w.Varint(f::kPathStringIds, path_iid);
  w.EndMessage();
  return iid;
}

uint64_t PerfettoWriter::InternFrame(std::string_view frame) {
  auto it = frames_.find(frame);
  if (it != frames_.end()) return it->second;
  HostFrame p = SplitHostFrame(frame);
  // ("[unknown module]" names the mapping of a native frame without one.)
  if (p.module == "[unknown module]") {
    p = HostFrame{};
    p.function = frame;
  }
  // Every frame has a mapping (trace processor files frames under one): a
  // native frame its module's, Python frames "[python]", others "[unknown]".
  const uint64_t mapping =
      InternMapping(p.kind == HostFrame::kNative
                        ? (p.module.empty() ? std::string_view("[unknown module]") : p.module)
                    : p.kind == HostFrame::kPython ? std::string_view("[python]")
                                                   : std::string_view("[unknown]"));
  const uint64_t function = Intern(function_names_, p.function);
  const uint64_t file = p.kind == HostFrame::kPython ? Intern(source_paths_, p.file) : 0;
  const uint64_t iid = frames_.size() + 1;
  frames_.emplace(std::string(frame), iid);
  ++interned_count_;
  proto::Writer w(&interned_);
  w.BeginMessage(f::kFrames);
  w.Varint(f::kIid, iid);
  w.Varint(f::kFunctionNameId, function);
  w.Varint(f::kMappingId, mapping);
  if (file != 0) w.Varint(f::kSourcePathIid, file);
  if (p.line != 0) w.Varint(f::kLineNumber, p.line);
  if (p.kind != HostFrame::kOther)
    w.Varint(f::kFrameKind, p.kind == HostFrame::kPython ? kFrameInterpreted : kFrameNative);
  w.EndMessage();
  return iid;
}

uint64_t PerfettoWriter::InternCallstack(std::string_view stack) {
  auto it = callstacks_.find(stack);
  if (it != callstacks_.end()) return it->second;
  std::vector<uint64_t> frames;  // outermost first, as Callstack.frame_ids wants them
  ForEachHostFrame(stack, [&](std::string_view frame) { frames.push_back(InternFrame(frame)); });
  const uint64_t iid = callstacks_.size() + 1;
  callstacks_.emplace(std::string(stack), iid);
  ++interned_count_;
  proto::Writer w(&interned_);
  w.BeginMessage(f::kCallstacks);
  w.Varint(f::kIid, iid);
  for (uint64_t frame : frames) w.Varint(f::kFrameIds, frame);
  w.EndMessage();
  return iid;
}

void PerfettoWriter::Describe(uint32_t track) {
  if (described_[track]) return;
  const TrackEntry& t = tracks_[track];
  if (t.parent_uuid != 0 || t.kind == trace::TrackKind::kThread) {
    auto p = process_.find(t.pid);
    if (p != process_.end()) Describe(p->second);
  }
  described_[track] = 1;
  std::string body;
  proto::Writer d(&body);
  d.Varint(f::kUuid, t.uuid);
  if (t.process) {
    d.BeginMessage(f::kProcess);
    d.Int(f::kPid, t.pid);
    d.Bytes(f::kProcessName, t.name);
    d.EndMessage();
    d.Varint(f::kChildOrdering, kChildOrderingExplicit);
  } else if (t.kind == trace::TrackKind::kThread) {
    d.BeginMessage(f::kThread);
    d.Int(f::kThreadPid, t.pid);
    d.Int(f::kTid, t.tid);
    d.Bytes(f::kThreadName, t.name);
    d.EndMessage();
  } else {
    if (t.parent_uuid != 0) d.Varint(f::kParentUuid, t.parent_uuid);
    d.Bytes(f::kName, t.name);
    if (t.kind == trace::TrackKind::kCounter) {
      d.BeginMessage(f::kCounter);
      if (!t.unit.empty()) d.Bytes(f::kUnitName, t.unit);
      d.EndMessage();
    }
    if (t.order >= 0) d.Int(f::kSiblingOrderRank, std::min<int64_t>(t.order, INT32_MAX));
  }
  proto::Writer w(&unit_);
  w.BeginMessage(f::kTracePacket);
  w.Varint(f::kSequenceId, kSequence);
  if (clear_pending_) {
    w.Varint(f::kSequenceFlags, kSeqIncrementalStateCleared | kSeqNeedsIncrementalState);
    clear_pending_ = false;
  }
  w.Bytes(f::kTrackDescriptor, body);
  w.EndMessage();
}

// A TrackEvent packet, written straight into the unit: the interned strings it
// introduces go in the same packet, after the event (a decoder reads a
// packet's interned data before its event, wherever it is in the packet).
void PerfettoWriter::EncodeBegin(uint32_t track, const trace::Slice& s, int type) {
  interned_.clear();
  proto::Writer w(&unit_);
  w.BeginMessage(f::kTracePacket);
  w.Varint(f::kTimestamp, s.start_ns);
  w.Varint(f::kSequenceId, kSequence);
  w.Varint(f::kSequenceFlags,
           kSeqNeedsIncrementalState | (clear_pending_ ? kSeqIncrementalStateCleared : 0));
  clear_pending_ = false;
  w.BeginMessage(f::kTrackEvent);
  w.Varint(f::kType, static_cast<uint64_t>(type));
  w.Varint(f::kTrackUuid, tracks_[track].uuid);
  if (!s.category.empty()) w.Varint(f::kCategoryIids, Intern(categories_, s.category));
  w.Varint(f::kNameIid, InternName(s));
  for (const trace::Arg& a : s.args) {
    w.BeginMessage(f::kDebugAnnotations);
    w.Varint(f::kArgNameIid, Intern(arg_names_, a.key));
    if (const auto* u = std::get_if<uint64_t>(&a.value)) {
      w.Varint(f::kUintValue, *u);
    } else if (const auto* i = std::get_if<int64_t>(&a.value)) {
      w.Int(f::kIntValue, *i);
    } else if (const auto* d = std::get_if<double>(&a.value)) {
      w.Double(f::kDoubleValue, *d);
    } else if (const auto* str = std::get_if<std::string_view>(&a.value)) {
      w.Bytes(f::kStringValue, *str);
    } else if (const auto* v = std::get_if<trace::Dim3>(&a.value)) {
      for (int32_t x : {v->x, v->y, v->z}) {
        w.BeginMessage(f::kArrayValues);
        w.Int(f::kIntValue, x);
        w.EndMessage();
      }
    }
    w.EndMessage();
  }
  if (!s.callstack.empty()) w.Varint(f::kCallstackIid, InternCallstack(s.callstack));
  if (s.flow_begin != 0) w.Fixed64(f::kFlowIds, s.flow_begin);
  if (s.flow_chain != 0) w.Fixed64(f::kFlowIds, s.flow_chain);
  if (s.flow_end != 0) w.Fixed64(f::kTerminatingFlowIds, s.flow_end);
  w.EndMessage();
  if (!interned_.empty()) w.Bytes(f::kInternedData, interned_);
  w.EndMessage();
}

void PerfettoWriter::EncodeEnd(uint32_t track, uint64_t ts) {
  proto::Writer w(&unit_);
  w.BeginMessage(f::kTracePacket);
  w.Varint(f::kTimestamp, ts);
  w.Varint(f::kSequenceId, kSequence);
  w.BeginMessage(f::kTrackEvent);
  w.Varint(f::kType, kSliceEnd);
  w.Varint(f::kTrackUuid, tracks_[track].uuid);
  w.EndMessage();
  w.EndMessage();
}

template <typename F>
void PerfettoWriter::WriteUnit(uint64_t ts, F&& encode) {
  if (!status_.ok()) return;
  if (file_ == nullptr) {
    if (status_ = OpenFile(); !status_.ok()) return;
  }
  if (interned_count_ > kMaxInterned) ResetSequence();
  unit_.clear();
  encode();
  if (current_.events > 0 && !file_->Fits(unit_.size(), max_file_bytes_)) {
    // Full: this event starts the next file, encoded afresh for its new sequence.
    if (status_ = CloseFile(); !status_.ok()) return;
    if (status_ = OpenFile(); !status_.ok()) return;
    unit_.clear();
    encode();
  }
  if (status_ = file_->Write(unit_); !status_.ok()) return;
  if (current_.events == 0) current_.first_ns = ts;
  current_.first_ns = std::min(current_.first_ns, ts);
  current_.last_ns = std::max(current_.last_ns, ts);
  ++current_.events;
  ++events_;
}

void PerfettoWriter::OnSlice(const trace::Slice& s) {
  uint32_t track = by_id_[s.track];
  if (s.shape == trace::SliceShape::kAsync)
    track = LaneFor(tracks_[track].pid, s.start_ns, s.end_ns);
  WriteUnit(s.start_ns, [&] {
    Describe(track);
    if (s.shape == trace::SliceShape::kInstant) {
      EncodeBegin(track, s, kInstant);
      return;
    }
    EncodeBegin(track, s, kSliceBegin);
    EncodeEnd(track, s.end_ns);
  });
}

void PerfettoWriter::OnCounter(const trace::CounterSample& c) {
  const uint32_t track = by_id_[c.track];
  WriteUnit(c.ts, [&] {
    Describe(track);
    proto::Writer w(&unit_);
    w.BeginMessage(f::kTracePacket);
    w.Varint(f::kTimestamp, c.ts);
    w.Varint(f::kSequenceId, kSequence);
    w.BeginMessage(f::kTrackEvent);
    w.Varint(f::kType, kCounterEvent);
    w.Varint(f::kTrackUuid, tracks_[track].uuid);
    if (const auto* d = std::get_if<double>(&c.value)) {
      w.Double(f::kDoubleCounterValue, *d);
    } else {
      w.Int(f::kCounterValue, static_cast<int64_t>(std::get<uint64_t>(c.value)));
    }
    w.EndMessage();
    w.EndMessage();
  });
}

Status PerfettoWriter::Finish(const TraceMetadata& metadata) {
  if (status_.ok() && file_ == nullptr) status_ = OpenFile();
  if (status_.ok()) status_ = CloseFile();
  AON_RETURN_IF_ERROR(status_);
  // Parts of an older export that had more files.
  for (size_t part = files_.size();; ++part) {
    const std::string stale = PerfettoPartPath(path_, part);
    if (unlink(stale.c_str()) != 0) {
      if (errno == ENOENT) break;
      return Internal("cannot remove '" + stale + "': " + std::strerror(errno));
    }
  }
  std::string text;
  JsonWriter json(&text);
  json.BeginObject();
  json.Key("format");
  json.String(
      "perfetto protobuf trace (perfetto.protos.Trace), its packets in zlib-compressed chunks "
      "(TracePacket.compressed_packets)");
  json.Key("max_file_bytes");
  json.Uint(max_file_bytes_);
  json.Key("events");
  json.Uint(events_);
  json.Key("files");
  json.BeginArray(JsonWriter::Layout::kOnePerLine);
  for (const PerfettoFileInfo& file : files_) {
    json.BeginObject();
    json.Key("file");
    const size_t slash = file.path.rfind('/');
    json.String(slash == std::string::npos ? file.path : file.path.substr(slash + 1));
    json.Key("bytes");
    json.Uint(file.bytes);
    json.Key("events");
    json.Uint(file.events);
    json.Key("first_ns");
    json.Uint(file.first_ns);
    json.Key("last_ns");
    json.Uint(file.last_ns);
    json.EndObject();
  }
  json.EndArray();
  json.Key("metadata");
  WriteTraceMetadata(json, metadata);
  json.EndObject();
  json.Newline();
  return WriteFileAtomically(PerfettoIndexPath(path_), text);
}

}  // namespace aon::merge
