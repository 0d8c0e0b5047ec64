#include "otf2_writer.h"

#include <otf2/otf2.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "aon/export/otf2_limits.h"
#include "aon/format/host_stack.h"

namespace aon::merge {

// OTF2's chunks: a pool of budget/chunk chunks. A writer that holds a chunk and
// asks for another past the budget gets none, which makes OTF2 flush that
// writer's chunks to its file and free them (OTF2_MemoryFreeAll) before it asks
// again; a writer's first chunk is always given.
struct Otf2Writer::Pool {
  uint64_t budget_bytes = 0;
  uint64_t in_use = 0;  // bytes
  uint64_t peak = 0;

  uint64_t event_chunk = 0, def_chunk = 0;
  uint64_t ChunkOf(OTF2_FileType type) const {
    return type == OTF2_FILETYPE_EVENTS ? event_chunk : def_chunk;
  }

  static void* Allocate(void* user, OTF2_FileType type, OTF2_LocationRef, void** per_buffer,
                        uint64_t size) {
    auto* pool = static_cast<Pool*>(user);
    auto* chunks = static_cast<std::vector<void*>*>(*per_buffer);
    (void)type;
    if (chunks == nullptr) {
      chunks = new std::vector<void*>;
      *per_buffer = chunks;
    }
    if (!chunks->empty() && pool->in_use + size > pool->budget_bytes) return nullptr;
    void* p = std::malloc(size);
    if (p == nullptr) return nullptr;
    chunks->push_back(p);
    pool->in_use += size;
    pool->peak = std::max(pool->peak, pool->in_use);
    return p;
  }
  static void FreeAll(void* user, OTF2_FileType type, OTF2_LocationRef, void** per_buffer,
                      bool final) {
    auto* pool = static_cast<Pool*>(user);
    auto* chunks = static_cast<std::vector<void*>*>(*per_buffer);
    if (chunks == nullptr) return;
    for (void* p : *chunks) std::free(p);
    pool->in_use -= chunks->size() * pool->ChunkOf(type);
    chunks->clear();
    if (final) {
      delete chunks;
      *per_buffer = nullptr;
    }
  }
};

namespace {

OTF2_FlushType PreFlush(void*, OTF2_FileType, OTF2_LocationRef, void*, bool) { return OTF2_FLUSH; }

// libotf2 reports errors through one process-wide callback; the message of the
// last one is kept for the Status that names the archive.
thread_local std::string last_otf2_error;
thread_local bool otf2_error_seen = false;
OTF2_ErrorCode OnOtf2Error(void*, const char*, uint64_t, const char* function, OTF2_ErrorCode code,
                           const char* format, va_list va) {
  otf2_error_seen = true;
  char text[512];
  std::vsnprintf(text, sizeof(text), format != nullptr ? format : "", va);
  last_otf2_error = std::string(OTF2_Error_GetName(code)) + " in " +
                    (function != nullptr ? function : "?") + ": " + text;
  return code;
}

// Region role and paradigm of a slice by its record kind.
std::pair<uint8_t, uint8_t> RoleOf(std::string_view category, const trace::Collective* coll) {
  if (coll != nullptr) {
    const std::string_view f = coll->func;
    const uint8_t role =
        f == "Broadcast" ? OTF2_REGION_ROLE_COLL_ONE2ALL
        : f == "Reduce"  ? OTF2_REGION_ROLE_COLL_ALL2ONE
        : f == "AllReduce" || f == "AllGather" || f == "ReduceScatter" || f == "AllToAll"
            ? OTF2_REGION_ROLE_COLL_ALL2ALL
            : OTF2_REGION_ROLE_COLL_OTHER;
    return {role, OTF2_PARADIGM_CUDA};
  }
  if (category == "kernel") return {OTF2_REGION_ROLE_FUNCTION, OTF2_PARADIGM_CUDA};
  if (category == "memcpy") return {OTF2_REGION_ROLE_DATA_TRANSFER, OTF2_PARADIGM_CUDA};
  if (category == "memset") return {OTF2_REGION_ROLE_FUNCTION, OTF2_PARADIGM_CUDA};
  if (category == "sync") return {OTF2_REGION_ROLE_TASK_WAIT, OTF2_PARADIGM_CUDA};
  if (category == "cuda_runtime" || category == "cuda_driver") {
    return {OTF2_REGION_ROLE_WRAPPER, OTF2_PARADIGM_CUDA};
  }
  if (category == "nccl") return {OTF2_REGION_ROLE_FUNCTION, OTF2_PARADIGM_CUDA};
  // NVTX ranges, compilation's among them ("compile:XLA", "compile:torch.compile").
  if (category.starts_with("nvtx:") || category.starts_with("compile:") || category == "steps") {
    return {OTF2_REGION_ROLE_CODE, OTF2_PARADIGM_USER};
  }
  if (category == "ops") return {OTF2_REGION_ROLE_FUNCTION, OTF2_PARADIGM_USER};
  return {OTF2_REGION_ROLE_ARTIFICIAL, OTF2_PARADIGM_MEASUREMENT_SYSTEM};
}

uint8_t CollectiveOpOf(std::string_view f) {
  if (f == "AllReduce") return OTF2_COLLECTIVE_OP_ALLREDUCE;
  if (f == "Broadcast") return OTF2_COLLECTIVE_OP_BCAST;
  if (f == "Reduce") return OTF2_COLLECTIVE_OP_REDUCE;
  if (f == "AllGather") return OTF2_COLLECTIVE_OP_ALLGATHER;
  if (f == "ReduceScatter") return OTF2_COLLECTIVE_OP_REDUCE_SCATTER_BLOCK;
  if (f == "AllToAll") return OTF2_COLLECTIVE_OP_ALLTOALL;
  return OTF2_COLLECTIVE_OP_BARRIER;  // NCCL has no other collective; unknown names
}

}  // namespace

Otf2Writer::Otf2Writer(std::string dir, Otf2WriterLimits limits, std::string name)
    : dir_(std::move(dir)),
      name_(name.empty() ? dir_ : std::move(name)),
      limits_(limits),
      pool_(std::make_unique<Pool>()) {
  static_assert(kOtf2MinChunkBytes == OTF2_CHUNK_SIZE_MIN);
  static_assert(kOtf2MaxChunkBytes == OTF2_CHUNK_SIZE_MAX);
  limits_.chunk_bytes =
      std::clamp<uint64_t>(limits_.chunk_bytes, kOtf2MinChunkBytes, kOtf2MaxChunkBytes);
  pool_->event_chunk = limits_.chunk_bytes;
  pool_->def_chunk = DefChunkBytes();
  pool_->budget_bytes = std::max(limits_.memory_bytes, limits_.chunk_bytes);
  node_defs_.emplace_back(Str("AON job"), Str("machine"));
}

// Definitions chunks: 4 event chunks, within OTF2's maximum.
uint64_t Otf2Writer::DefChunkBytes() const {
  return std::min<uint64_t>(4 * limits_.chunk_bytes, OTF2_CHUNK_SIZE_MAX);
}

Otf2Writer::~Otf2Writer() {
  if (attributes_ != nullptr) OTF2_AttributeList_Delete(attributes_);
  if (archive_ != nullptr) OTF2_Archive_Close(archive_);
}

void Otf2Writer::Fail(const std::string& what, int code) {
  if (!status_.ok()) return;
  std::string detail =
      last_otf2_error.empty()
          ? std::string(OTF2_Error_GetDescription(static_cast<OTF2_ErrorCode>(code)))
          : last_otf2_error;
  status_ = Internal("writing the OTF2 archive '" + name_ + "': " + what + ": " + detail);
}

Status Otf2Writer::Open() {
  OTF2_Error_RegisterCallback(OnOtf2Error, nullptr);
  last_otf2_error.clear();
  otf2_error_seen = false;
  archive_ = OTF2_Archive_Open(dir_.c_str(), "traces", OTF2_FILEMODE_WRITE, limits_.chunk_bytes,
                               DefChunkBytes(), OTF2_SUBSTRATE_POSIX, OTF2_COMPRESSION_NONE);
  if (archive_ == nullptr) {
    Fail("OTF2_Archive_Open", OTF2_ERROR_FILE_CAN_NOT_OPEN);
    return status_;
  }
  static const OTF2_FlushCallbacks kFlush = {PreFlush, nullptr};
  static const OTF2_MemoryCallbacks kMemory = {Pool::Allocate, Pool::FreeAll};
  OTF2_ErrorCode e = OTF2_Archive_SetFlushCallbacks(archive_, &kFlush, nullptr);
  if (e == OTF2_SUCCESS) e = OTF2_Archive_SetMemoryCallbacks(archive_, &kMemory, pool_.get());
  if (e == OTF2_SUCCESS) e = OTF2_Archive_SetSerialCollectiveCallbacks(archive_);
  if (e == OTF2_SUCCESS) e = OTF2_Archive_SetCreator(archive_, kOtf2Creator);
  if (e == OTF2_SUCCESS) e = OTF2_Archive_OpenEvtFiles(archive_);
  if (e != OTF2_SUCCESS) Fail("setting up the archive", e);
  attributes_ = OTF2_AttributeList_New();
  return status_;
}

uint32_t Otf2Writer::Str(std::string_view s) {
  auto [it, added] = strings_.try_emplace(std::string(s), static_cast<uint32_t>(strings_.size()));
  if (added) string_order_.push_back(&it->first);
  return it->second;
}

uint32_t Otf2Writer::RegionOf(std::string_view name, std::string_view category, uint8_t role,
                              uint8_t paradigm, std::string_view file) {
  std::string key;
  key.reserve(name.size() + category.size() + file.size() + 4);
  key.append(category).push_back('\0');
  key.push_back(static_cast<char>(role));
  key.append(name);
  if (!file.empty()) key.append(1, '\0').append(file);
  auto it = regions_by_key_.find(key);
  if (it != regions_by_key_.end()) return it->second;
  const auto id = static_cast<uint32_t>(regions_.size());
  regions_.push_back(
      Region{Str(name), Str(category), role, paradigm, file.empty() ? UINT32_MAX : Str(file)});
  regions_by_key_.emplace(std::move(key), id);
  return id;
}

uint32_t Otf2Writer::ContextOf(std::string_view stack, std::vector<uint32_t>* path) {
  path->clear();
  uint32_t parent = UINT32_MAX;
  ForEachHostFrame(stack, [&](std::string_view frame) {
    auto key = std::make_pair(parent, std::string(frame));
    auto it = contexts_by_key_.find(key);
    if (it == contexts_by_key_.end()) {
      const HostFrame f = SplitHostFrame(frame);
      Context c;
      c.parent = parent;
      if (f.kind == HostFrame::kPython) {
        c.region = RegionOf(f.function, "host_frame", OTF2_REGION_ROLE_FUNCTION,
                            OTF2_PARADIGM_SAMPLING, f.file);
        auto where = std::make_pair(Str(f.file), f.line);
        auto cl = code_locations_by_key_.find(where);
        if (cl == code_locations_by_key_.end()) {
          cl = code_locations_by_key_.emplace(where, static_cast<uint32_t>(code_locations_.size()))
                   .first;
          code_locations_.push_back(where);
        }
        c.location = cl->second;
      } else {
        c.region = RegionOf(frame, "host_frame", OTF2_REGION_ROLE_FUNCTION, OTF2_PARADIGM_SAMPLING);
      }
      it = contexts_by_key_.emplace(std::move(key), static_cast<uint32_t>(contexts_.size())).first;
      contexts_.push_back(c);
    }
    parent = it->second;
    path->push_back(parent);
  });
  return parent;
}

// OTF2's unwind distance (OTF2_GlobalDefWriter.h, CallingContext): with the
// previous sample's path on this location, the frames newly entered since
// (the current path past the common prefix) plus the one that made progress.
void Otf2Writer::Sample(uint32_t location, uint64_t ts, std::string_view stack) {
  Location& l = locations_[location];
  std::vector<uint32_t> path;
  const uint32_t leaf = ContextOf(stack, &path);
  size_t common = 0;
  while (common < path.size() && common < l.sampled.size() && path[common] == l.sampled[common])
    ++common;
  const auto entered = static_cast<uint32_t>(path.size() - common);
  OTF2_EvtWriter* w = Writer(location);
  if (w == nullptr) return;
  const OTF2_ErrorCode e =
      OTF2_EvtWriter_CallingContextSample(w, nullptr, ts, leaf, entered + 1, 0);
  ++counts_.events;
  ++counts_.samples;
  Seen(ts);
  l.sampled = std::move(path);
  if (e != OTF2_SUCCESS) Fail("writing a CallingContextSample event", e);
}

uint32_t Otf2Writer::AttributeOf(std::string_view key, uint8_t type) {
  auto k = std::make_pair(std::string(key), type);
  auto it = attributes_by_key_.find(k);
  if (it != attributes_by_key_.end()) return it->second;
  const auto id = static_cast<uint32_t>(attribute_defs_.size());
  attribute_defs_.emplace_back(Str(key), type);
  attributes_by_key_.emplace(std::move(k), id);
  return id;
}

uint32_t Otf2Writer::NodeOf(const std::string& host) {
  auto it = nodes_.find(host);
  if (it != nodes_.end()) return it->second;
  const auto id = static_cast<uint32_t>(node_defs_.size());
  node_defs_.emplace_back(Str(host.empty() ? "unknown host" : host), Str("node"));
  nodes_.emplace(host, id);
  return id;
}

uint32_t Otf2Writer::ProcessGroup(uint32_t pid) {
  auto it = process_groups_.find(pid);
  if (it != process_groups_.end()) return it->second;
  auto p = processes_.find(pid);
  const std::string name = p != processes_.end() ? p->second.first : "rank " + std::to_string(pid);
  const std::string host = p != processes_.end() ? p->second.second : std::string();
  const auto id = static_cast<uint32_t>(groups_.size());
  groups_.push_back(
      LocationGroup{Str(name), OTF2_LOCATION_GROUP_TYPE_PROCESS, NodeOf(host), UINT32_MAX});
  process_groups_.emplace(pid, id);
  return id;
}

uint32_t Otf2Writer::AddLocation(uint32_t pid, std::string_view name, uint8_t type,
                                 uint32_t group) {
  const auto id = static_cast<uint32_t>(locations_.size());
  Location l;
  l.name = Str(name);
  l.type = type;
  l.group = group;
  l.pid = pid;
  locations_.push_back(std::move(l));
  pass_locations_.push_back(id);
  return id;
}

void Otf2Writer::BeginPass() {
  by_id_.clear();
  lanes_.clear();
  overlap_lanes_.clear();
  pass_locations_.clear();
}

Status Otf2Writer::EndPass() {
  for (uint32_t loc : pass_locations_) {
    Location& l = locations_[loc];
    Pop(loc, UINT64_MAX);
    // A row whose only slices went to lanes still gets its (empty) event file:
    // readers open one per defined location.
    Writer(loc);
    if (l.writer != nullptr) {
      uint64_t n = 0;
      if (OTF2_EvtWriter_GetNumberOfEvents(l.writer, &n) == OTF2_SUCCESS) l.events = n;
      const OTF2_ErrorCode e = OTF2_Archive_CloseEvtWriter(archive_, l.writer);
      if (e != OTF2_SUCCESS) Fail("closing the events of a location", e);
      l.writer = nullptr;
    }
  }
  BeginPass();
  // An error libotf2 met inside a call that still returned (a flush to a file
  // that failed) fails the export too.
  if (otf2_error_seen) Fail("writing the events", OTF2_ERROR_FILE_INTERACTION);
  return status_;
}

void Otf2Writer::OnProcess(const trace::ProcessInfo& process) {
  processes_[process.pid] = {process.name, process.host};
  ProcessGroup(process.pid);  // the ranks' groups in the builder's (rank) order
}

void Otf2Writer::OnTrack(uint32_t id, const trace::TrackInfo& track) {
  if (by_id_.size() <= id) by_id_.resize(id + 1, UINT32_MAX);
  const uint32_t process = ProcessGroup(track.pid);
  uint32_t loc = 0;
  if (track.role == trace::TrackRole::kGpuStream) {
    auto key = std::make_pair(track.pid, track.device);
    auto it = gpu_groups_.find(key);
    if (it == gpu_groups_.end()) {
      const std::string gpu =
          track.device == UINT32_MAX ? std::string("GPU ?") : "GPU " + std::to_string(track.device);
      const auto group = static_cast<uint32_t>(groups_.size());
      groups_.push_back(LocationGroup{Str(processes_[track.pid].first + " " + gpu),
                                      OTF2_LOCATION_GROUP_TYPE_ACCELERATOR, groups_[process].node,
                                      process});
      it = gpu_groups_.emplace(key, group).first;
    }
    loc = AddLocation(track.pid, track.name, OTF2_LOCATION_TYPE_ACCELERATOR_STREAM, it->second);
  } else if (track.kind == trace::TrackKind::kCounter) {
    loc = AddLocation(track.pid, track.name, OTF2_LOCATION_TYPE_METRIC, process);
    locations_[loc].counter = true;
    locations_[loc].description = Str(track.category);
    locations_[loc].unit = Str(track.unit);
  } else {
    loc = AddLocation(track.pid, track.name, OTF2_LOCATION_TYPE_CPU_THREAD, process);
  }
  by_id_[id] = loc;
}

uint32_t Otf2Writer::LaneFor(uint32_t pid, uint64_t start, uint64_t end) {
  std::vector<Lane>& lanes = lanes_[pid];
  for (Lane& lane : lanes) {
    if (lane.busy_until <= start) {
      lane.busy_until = std::max(start, end);
      return lane.location;
    }
  }
  const std::string name = "NVTX ranges lane " + std::to_string(lanes.size() + 1);
  const uint32_t loc = AddLocation(pid, name, OTF2_LOCATION_TYPE_CPU_THREAD, ProcessGroup(pid));
  lanes.push_back(Lane{loc, std::max(start, end)});
  return loc;
}

// A slice that starts inside an open slice of its row and ends after it cannot
// nest there: it goes on the first "<row> (overlapping k)" row of the same
// location group where it nests, a new one when none.
uint32_t Otf2Writer::OverlapLane(uint32_t location, uint64_t start, uint64_t end) {
  std::vector<uint32_t>& lanes = overlap_lanes_[location];
  for (uint32_t lane : lanes) {
    Pop(lane, start);
    const auto& stack = locations_[lane].stack;
    if (stack.empty() || end <= stack.back().end) return lane;
  }
  const Location& base = locations_[location];
  const std::string name =
      *string_order_[base.name] + " (overlapping " + std::to_string(lanes.size() + 1) + ")";
  const uint32_t lane = AddLocation(base.pid, name, base.type, base.group);
  locations_[lane].overlap = true;
  overlap_lanes_[location].push_back(lane);
  ++counts_.overlap_rows;
  return lane;
}

OTF2_EvtWriter* Otf2Writer::Writer(uint32_t location) {
  Location& l = locations_[location];
  if (l.writer == nullptr && status_.ok()) {
    l.writer = OTF2_Archive_GetEvtWriter(archive_, location);
    if (l.writer == nullptr) Fail("opening the events of a location", OTF2_ERROR_MEM_ALLOC_FAILED);
  }
  return l.writer;
}

void Otf2Writer::Seen(uint64_t ts) {
  first_ts_ = std::min(first_ts_, ts);
  last_ts_ = std::max(last_ts_, ts);
}

// Leaves every open slice of `location` that ended at or before `until`.
void Otf2Writer::Pop(uint32_t location, uint64_t until) {
  Location& l = locations_[location];
  while (!l.stack.empty() && l.stack.back().end <= until) {
    const OpenSlice o = l.stack.back();
    l.stack.pop_back();
    OTF2_EvtWriter* w = Writer(location);
    if (w == nullptr) return;
    OTF2_ErrorCode e = OTF2_SUCCESS;
    if (o.collective) {
      e = OTF2_EvtWriter_MpiCollectiveEnd(w, nullptr, o.end, o.op, o.comm, o.root, o.bytes,
                                          o.bytes);
      ++counts_.events;
    }
    if (e == OTF2_SUCCESS) e = OTF2_EvtWriter_Leave(w, nullptr, o.end, o.region);
    ++counts_.events;
    Seen(o.end);
    if (e != OTF2_SUCCESS) Fail("writing a Leave event", e);
  }
}

void Otf2Writer::OnSlice(const trace::Slice& s) {
  if (!status_.ok() || s.track >= by_id_.size()) return;
  uint32_t loc = by_id_[s.track];
  const uint32_t pid = locations_[loc].pid;
  if (s.shape == trace::SliceShape::kAsync) loc = LaneFor(pid, s.start_ns, s.end_ns);
  const uint64_t end = s.shape == trace::SliceShape::kInstant ? s.start_ns : s.end_ns;
  Pop(loc, s.start_ns);
  if (!locations_[loc].stack.empty() && end > locations_[loc].stack.back().end) {
    loc = OverlapLane(loc, s.start_ns, end);
  }
  Location& l = locations_[loc];
  const auto [role, paradigm] = RoleOf(s.category, s.collective);
  OpenSlice o;
  o.end = std::max(s.start_ns, end);
  o.region = RegionOf(s.name, s.category, role, paradigm);

  OTF2_AttributeList_RemoveAllAttributes(attributes_);
  added_.clear();
  for (const trace::Arg& a : s.args) {
    // A key given twice (a later value refining an earlier one): the first is kept.
    if (std::find(added_.begin(), added_.end(), a.key) != added_.end()) continue;
    added_.push_back(a.key);
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, uint64_t>) {
            OTF2_AttributeList_AddUint64(attributes_, AttributeOf(a.key, OTF2_TYPE_UINT64), v);
          } else if constexpr (std::is_same_v<V, int64_t>) {
            OTF2_AttributeList_AddInt64(attributes_, AttributeOf(a.key, OTF2_TYPE_INT64), v);
          } else if constexpr (std::is_same_v<V, double>) {
            OTF2_AttributeList_AddDouble(attributes_, AttributeOf(a.key, OTF2_TYPE_DOUBLE), v);
          } else if constexpr (std::is_same_v<V, std::string_view>) {
            OTF2_AttributeList_AddStringRef(attributes_, AttributeOf(a.key, OTF2_TYPE_STRING),
                                            Str(v));
          } else {
            const std::string dim =
                std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z);
            OTF2_AttributeList_AddStringRef(attributes_, AttributeOf(a.key, OTF2_TYPE_STRING),
                                            Str(dim));
          }
        },
        a.value);
  }
  if (!s.callstack.empty()) Sample(loc, s.start_ns, s.callstack);
  OTF2_EvtWriter* w = Writer(loc);
  if (w == nullptr) return;
  OTF2_ErrorCode e = OTF2_EvtWriter_Enter(w, attributes_, s.start_ns, o.region);
  ++counts_.events;
  ++counts_.slices;
  Seen(s.start_ns);
  bool open_collective = false;
  for (const OpenSlice& outer : l.stack) open_collective |= outer.collective;
  if (s.collective != nullptr && (l.overlap || open_collective)) {
    ++counts_.collectives_as_regions;
  } else if (e == OTF2_SUCCESS && s.collective != nullptr) {
    Comm& comm = comms_[s.collective->comm_hash];
    if (comm.members.empty()) {
      comm.id = static_cast<uint32_t>(comms_.size() - 1);
      char name[48];
      std::snprintf(name, sizeof(name), "NCCL communicator 0x%016llx",
                    static_cast<unsigned long long>(s.collective->comm_hash));
      comm.name = Str(name);
    }
    const int32_t comm_rank = s.collective->comm_rank >= 0 ? s.collective->comm_rank : INT32_MAX;
    comm.members.emplace(std::make_pair(comm_rank, pid), loc);
    o.collective = true;
    o.op = CollectiveOpOf(s.collective->func);
    o.comm = comm.id;
    o.root = s.collective->root >= 0 ? static_cast<uint32_t>(s.collective->root)
                                     : OTF2_COLLECTIVE_ROOT_NONE;
    o.bytes = s.collective->bytes;
    e = OTF2_EvtWriter_MpiCollectiveBegin(w, nullptr, s.start_ns);
    ++counts_.events;
    ++counts_.collectives;
  }
  if (e != OTF2_SUCCESS) Fail("writing an Enter event", e);
  l.stack.push_back(o);
}

void Otf2Writer::OnCounter(const trace::CounterSample& sample) {
  if (!status_.ok() || sample.track >= by_id_.size()) return;
  const uint32_t loc = by_id_[sample.track];
  Location& l = locations_[loc];
  if (!l.counter) return;
  OTF2_Type type = OTF2_TYPE_DOUBLE;
  OTF2_MetricValue value;
  if (const double* d = std::get_if<double>(&sample.value)) {
    value.floating_point = *d;
  } else {
    type = OTF2_TYPE_UINT64;
    value.unsigned_int = std::get<uint64_t>(sample.value);
  }
  auto key = std::make_pair(loc, static_cast<uint8_t>(type));
  auto it = metric_class_of_.find(key);
  if (it == metric_class_of_.end()) {
    const auto id = static_cast<uint32_t>(metric_classes_.size());
    metric_classes_.push_back(
        MetricClass{l.name, l.description, l.unit, static_cast<uint8_t>(type)});
    it = metric_class_of_.emplace(key, id).first;
  }
  OTF2_EvtWriter* w = Writer(loc);
  if (w == nullptr) return;
  const OTF2_ErrorCode e =
      OTF2_EvtWriter_Metric(w, nullptr, sample.ts, it->second, 1, &type, &value);
  ++counts_.events;
  ++counts_.metrics;
  Seen(sample.ts);
  if (e != OTF2_SUCCESS) Fail("writing a Metric event", e);
}

Status Otf2Writer::Finish(uint64_t t0,
                          const std::vector<std::pair<std::string, std::string>>& properties) {
  if (archive_ == nullptr) return status_.ok() ? Internal("OTF2 archive not open") : status_;
  if (!pass_locations_.empty()) AON_RETURN_IF_ERROR(EndPass());
  AON_RETURN_IF_ERROR(status_);
  OTF2_ErrorCode e = OTF2_Archive_CloseEvtFiles(archive_);
  if (e != OTF2_SUCCESS) Fail("closing the event files", e);
  // Every location gets its (empty) local definitions file.
  if (e == OTF2_SUCCESS) e = OTF2_Archive_OpenDefFiles(archive_);
  for (uint64_t loc = 0; e == OTF2_SUCCESS && loc < locations_.size(); ++loc) {
    OTF2_DefWriter* d = OTF2_Archive_GetDefWriter(archive_, loc);
    e = d == nullptr ? OTF2_ERROR_MEM_ALLOC_FAILED : OTF2_Archive_CloseDefWriter(archive_, d);
  }
  if (e == OTF2_SUCCESS) e = OTF2_Archive_CloseDefFiles(archive_);
  if (e != OTF2_SUCCESS) Fail("writing the local definitions", e);
  AON_RETURN_IF_ERROR(status_);

  // Names used only by the definitions below.
  std::vector<uint32_t> comm_locations;  // the COMM_LOCATIONS group: location ids
  std::map<uint32_t, uint32_t> comm_location_index;
  for (auto& [hash, comm] : comms_) {
    for (const auto& [order, loc] : comm.members) {
      if (comm_location_index.emplace(loc, 0).second) comm_locations.push_back(loc);
    }
  }
  std::sort(comm_locations.begin(), comm_locations.end());
  for (size_t i = 0; i < comm_locations.size(); ++i) {
    comm_location_index[comm_locations[i]] = static_cast<uint32_t>(i);
  }
  const uint32_t nccl_locations_name = Str("NCCL communicator rows");
  const uint32_t sampler_name = Str("AON host sampler (thread CPU time)");
  const uint32_t empty = Str("");

  OTF2_GlobalDefWriter* g = OTF2_Archive_GetGlobalDefWriter(archive_);
  if (g == nullptr) {
    Fail("opening the global definitions", OTF2_ERROR_MEM_ALLOC_FAILED);
    return status_;
  }
  const bool any = first_ts_ <= last_ts_;
  const uint64_t offset = any ? first_ts_ : t0;
  const uint64_t length = any ? last_ts_ - first_ts_ : 0;
  e = OTF2_GlobalDefWriter_WriteClockProperties(g, 1'000'000'000, offset, length,
                                                OTF2_UNDEFINED_TIMESTAMP);
  for (size_t i = 0; e == OTF2_SUCCESS && i < string_order_.size(); ++i) {
    e = OTF2_GlobalDefWriter_WriteString(g, static_cast<uint32_t>(i), string_order_[i]->c_str());
  }
  for (size_t i = 0; e == OTF2_SUCCESS && i < attribute_defs_.size(); ++i) {
    e = OTF2_GlobalDefWriter_WriteAttribute(g, static_cast<uint32_t>(i), attribute_defs_[i].first,
                                            empty, attribute_defs_[i].second);
  }
  for (size_t i = 0; e == OTF2_SUCCESS && i < node_defs_.size(); ++i) {
    e = OTF2_GlobalDefWriter_WriteSystemTreeNode(g, static_cast<uint32_t>(i), node_defs_[i].first,
                                                 node_defs_[i].second,
                                                 i == 0 ? OTF2_UNDEFINED_SYSTEM_TREE_NODE : 0);
  }
  for (size_t i = 0; e == OTF2_SUCCESS && i < groups_.size(); ++i) {
    const LocationGroup& lg = groups_[i];
    e = OTF2_GlobalDefWriter_WriteLocationGroup(
        g, static_cast<uint32_t>(i), lg.name, lg.type, lg.node,
        lg.creator == UINT32_MAX ? OTF2_UNDEFINED_LOCATION_GROUP : lg.creator);
  }
  for (size_t i = 0; e == OTF2_SUCCESS && i < locations_.size(); ++i) {
    const Location& l = locations_[i];
    e = OTF2_GlobalDefWriter_WriteLocation(g, i, l.name, l.type, l.events, l.group);
  }
  for (size_t i = 0; e == OTF2_SUCCESS && i < regions_.size(); ++i) {
    const Region& r = regions_[i];
    e = OTF2_GlobalDefWriter_WriteRegion(g, static_cast<uint32_t>(i), r.name, r.name, r.description,
                                         r.role, r.paradigm, OTF2_REGION_FLAG_NONE,
                                         r.file == UINT32_MAX ? empty : r.file, 0, 0);
  }
  for (size_t i = 0; e == OTF2_SUCCESS && i < code_locations_.size(); ++i) {
    e = OTF2_GlobalDefWriter_WriteSourceCodeLocation(
        g, static_cast<uint32_t>(i), code_locations_[i].first, code_locations_[i].second);
  }
  for (size_t i = 0; e == OTF2_SUCCESS && i < contexts_.size(); ++i) {
    const Context& c = contexts_[i];
    e = OTF2_GlobalDefWriter_WriteCallingContext(
        g, static_cast<uint32_t>(i), c.region,
        c.location == UINT32_MAX ? OTF2_UNDEFINED_SOURCE_CODE_LOCATION : c.location,
        c.parent == UINT32_MAX ? OTF2_UNDEFINED_CALLING_CONTEXT : c.parent);
  }
  if (e == OTF2_SUCCESS && !contexts_.empty()) {
    // Samples come every period of a thread's own CPU time (docs/host-sampling.md),
    // at the rate the job chose: a count of CPU nanoseconds, its period not
    // recorded in the timeline.
    e = OTF2_GlobalDefWriter_WriteInterruptGenerator(
        g, 0, sampler_name, OTF2_INTERRUPT_GENERATOR_MODE_COUNT, OTF2_BASE_DECIMAL, 0, 0);
  }
  if (e == OTF2_SUCCESS && !comms_.empty()) {
    std::vector<uint64_t> members(comm_locations.begin(), comm_locations.end());
    e = OTF2_GlobalDefWriter_WriteGroup(g, 0, nccl_locations_name, OTF2_GROUP_TYPE_COMM_LOCATIONS,
                                        OTF2_PARADIGM_CUDA, OTF2_GROUP_FLAG_NONE,
                                        static_cast<uint32_t>(members.size()), members.data());
    std::vector<const Comm*> by_id(comms_.size());  // definitions in id order
    for (const auto& [hash, comm] : comms_) by_id[comm.id] = &comm;
    uint32_t group = 1;
    for (const Comm* c : by_id) {
      if (e != OTF2_SUCCESS) break;
      const Comm& comm = *c;
      std::vector<uint64_t> ranks;  // indices into the COMM_LOCATIONS group, by rank
      for (const auto& [order, loc] : comm.members) ranks.push_back(comm_location_index[loc]);
      e = OTF2_GlobalDefWriter_WriteGroup(g, group, comm.name, OTF2_GROUP_TYPE_COMM_GROUP,
                                          OTF2_PARADIGM_CUDA, OTF2_GROUP_FLAG_NONE,
                                          static_cast<uint32_t>(ranks.size()), ranks.data());
      if (e == OTF2_SUCCESS) {
        e = OTF2_GlobalDefWriter_WriteComm(g, comm.id, comm.name, group, OTF2_UNDEFINED_COMM,
                                           OTF2_COMM_FLAG_NONE);
      }
      ++group;
    }
  }
  // One member per class: a counter row with samples of one value type.
  for (size_t i = 0; e == OTF2_SUCCESS && i < metric_classes_.size(); ++i) {
    const MetricClass& c = metric_classes_[i];
    e = OTF2_GlobalDefWriter_WriteMetricMember(g, static_cast<uint32_t>(i), c.name, c.description,
                                               OTF2_METRIC_TYPE_OTHER, OTF2_METRIC_ABSOLUTE_POINT,
                                               c.type, OTF2_BASE_DECIMAL, 0, c.unit);
    const OTF2_MetricMemberRef member = static_cast<uint32_t>(i);
    if (e == OTF2_SUCCESS) {
      e = OTF2_GlobalDefWriter_WriteMetricClass(g, static_cast<uint32_t>(i), 1, &member,
                                                OTF2_METRIC_ASYNCHRONOUS,
                                                OTF2_RECORDER_KIND_ABSTRACT);
    }
  }
  if (e != OTF2_SUCCESS) Fail("writing the global definitions", e);
  if (e == OTF2_SUCCESS) {
    e = OTF2_Archive_CloseGlobalDefWriter(archive_, g);
    if (e != OTF2_SUCCESS) Fail("closing the global definitions", e);
  }
  for (const auto& [key, value] : properties) {
    if (e != OTF2_SUCCESS) break;
    std::string name = "AON::" + key;
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) {
      return std::isalnum(c) ? std::toupper(c) : c == ':' ? ':' : '_';
    });
    e = OTF2_Archive_SetProperty(archive_, name.c_str(), value.c_str(), true);
    if (e != OTF2_SUCCESS) Fail("setting property AON::" + key, e);
  }
  counts_.locations = locations_.size();
  counts_.peak_pool_bytes = pool_->peak;
  e = OTF2_Archive_Close(archive_);
  archive_ = nullptr;
  if (e != OTF2_SUCCESS || otf2_error_seen) Fail("closing the archive", e);
  return status_;
}

}  // namespace aon::merge
