// Timeline -> Chrome trace-event JSON, streamed kind by kind from the timeline
// file. Events need not be in time order: both viewers sort on load.
#include "aon/merge/chrome_trace.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "aon/json_writer.h"
#include "aon/records.h"
#include "aon/string_table.h"
#include "aon/trace_file.h"
#include "aon/trace_format.h"
#include "output_file.h"
#include "timeline_meta.h"

namespace aon::merge {

namespace {

// Synthetic track ids start above any Linux thread id (pid_max <= 2^22).
constexpr int64_t kFirstTrackTid = int64_t{1} << 30;
constexpr uint64_t kChunkRecords = 1 << 16;
constexpr size_t kFlushBytes = 1 << 20;

// Event names from the enum tables of the record schemas (records.h).
const char* MemcpyName(uint8_t copy_kind) {
  static const auto kLabels = EnumLabels(kCopyKindValues, "Memcpy ", "Memcpy");
  return kLabels[copy_kind].c_str();
}

const char* SyncName(uint32_t sync_type) {
  static const auto kLabels = EnumLabels(kSyncTypeValues, "Sync: ", "Sync");
  return sync_type < kLabels.size() ? kLabels[sync_type].c_str() : "Sync";
}

const char* NcclTypeName(uint8_t type) {
  static const auto kLabels = EnumLabels(kNcclEventTypeValues, "", "unknown");
  return kLabels[type].c_str();
}

// Just the columns the flow pass needs; the reader matches members by name.
struct RankCorrelation {
  uint32_t rank;
  uint32_t correlation_id;
  uint64_t start_ns;
  uint64_t end_ns;
};

TableSchema RankCorrelationSchema(const std::string& table) {
  return TableSchema{
      table,
      sizeof(RankCorrelation),
      {Field{"rank", offsetof(RankCorrelation, rank), FieldType::kU32},
       Field{"correlation_id", offsetof(RankCorrelation, correlation_id), FieldType::kU32},
       Field{"start_ns", offsetof(RankCorrelation, start_ns), FieldType::kU64},
       Field{"end_ns", offsetof(RankCorrelation, end_ns), FieldType::kU64}}};
}

// The columns that place a stream on its device (for sync records).
struct RankStreamDevice {
  uint32_t rank;
  uint32_t stream_id;
  uint32_t device_id;
};

TableSchema RankStreamDeviceSchema(const std::string& table) {
  return TableSchema{table,
                     sizeof(RankStreamDevice),
                     {Field{"rank", offsetof(RankStreamDevice, rank), FieldType::kU32},
                      Field{"stream_id", offsetof(RankStreamDevice, stream_id), FieldType::kU32},
                      Field{"device_id", offsetof(RankStreamDevice, device_id), FieldType::kU32}}};
}

uint64_t FlowKey(uint32_t rank, uint32_t correlation_id) {
  return (uint64_t{rank} << 32) | correlation_id;
}

// What an export keeps, resolved against the timeline: ranks as a bitmap, the
// window on the timeline clock ([start, end), open sides at 0 / UINT64_MAX).
class Selection {
 public:
  Selection(const ExportFilter& filter, uint64_t t0, size_t world)
      : filter_(filter),
        start_(filter.start.Resolve(t0, 0)),
        end_(filter.end.Resolve(t0, UINT64_MAX)),
        all_ranks_(filter.ranks.empty()) {
    if (!all_ranks_) {
      ranks_.resize(world);
      for (size_t r = 0; r < world; ++r) ranks_[r] = filter.KeepsRank(static_cast<uint32_t>(r));
    }
  }
  bool Rank(uint32_t rank) const {
    if (all_ranks_) return true;
    return rank < ranks_.size() ? ranks_[rank] != 0 : filter_.KeepsRank(rank);
  }
  // Overlaps the window: start < END and end >= START (a mark: START <= t < END).
  bool Keep(uint32_t rank, uint64_t start, uint64_t end) const {
    return start < end_ && std::max(start, end) >= start_ && Rank(rank);
  }
  // Tables are sorted by start: nothing after a record starting at or after END.
  bool PastWindow(uint64_t start) const { return start >= end_; }
  bool Kind(RecordKind kind) const { return filter_.KeepsKind(kind); }
  uint64_t start() const { return start_; }
  uint64_t end() const { return end_; }

 private:
  const ExportFilter& filter_;
  uint64_t start_, end_;
  bool all_ranks_;
  std::vector<char> ranks_;
};

// Calls f(const Merged<T>&) for every record of the timeline's T table that
// `keep(m)` accepts, reading a bounded chunk at a time, up to the first record
// that starts at or after `stop_ns` (the table is sorted by start). f returns
// false to stop with `stopped` as the status.
template <typename T, typename Keep, typename F>
Status ForEachMerged(const TraceReader& reader, uint64_t stop_ns, Keep&& keep, F&& f,
                     const Status& stopped = Status::Ok()) {
  AON_ASSIGN_OR_RETURN(uint64_t n, reader.TableSize(MergedSchemaOf<T>()));
  std::vector<Merged<T>> chunk(static_cast<size_t>(std::min(n, kChunkRecords)));
  for (uint64_t first = 0; first < n; first += kChunkRecords) {
    const uint64_t count = std::min(kChunkRecords, n - first);
    AON_RETURN_IF_ERROR(reader.ReadTable(MergedSchemaOf<T>(), first, count, chunk.data()));
    for (uint64_t i = 0; i < count; ++i) {
      if (StartOf(chunk[i].record) >= stop_ns) return Status::Ok();
      if (!keep(chunk[i])) continue;
      if (!f(chunk[i])) return stopped;
    }
  }
  return Status::Ok();
}

Status CollectKeys(const TraceReader& reader, const std::string& table, const Selection& sel,
                   std::vector<uint64_t>* keys) {
  const TableSchema schema = RankCorrelationSchema(table);
  AON_ASSIGN_OR_RETURN(uint64_t n, reader.TableSize(schema));
  std::vector<RankCorrelation> chunk(static_cast<size_t>(std::min(n, kChunkRecords)));
  for (uint64_t first = 0; first < n; first += kChunkRecords) {
    const uint64_t count = std::min(kChunkRecords, n - first);
    AON_RETURN_IF_ERROR(reader.ReadTable(schema, first, count, chunk.data()));
    for (uint64_t i = 0; i < count; ++i) {
      const RankCorrelation& c = chunk[i];
      if (sel.PastWindow(c.start_ns)) return Status::Ok();
      if (c.correlation_id != 0 && sel.Keep(c.rank, c.start_ns, c.end_ns))
        keys->push_back(FlowKey(c.rank, c.correlation_id));
    }
  }
  return Status::Ok();
}

void SortUnique(std::vector<uint64_t>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

// The trace's events through the one JSON writer: an event is an object in the
// traceEvents array (one per line); its args object is opened by the first Arg*.
class TraceJsonWriter {
 public:
  TraceJsonWriter(AtomicTextFile* file, const StringTable* strings, uint64_t t0)
      : file_(file), strings_(strings), t0_(t0), json_(&buf_) {}

  const std::string& Str(uint32_t id) const { return strings_->Get(id); }
  JsonWriter& json() { return json_; }

  // {"ph":..,"name":..,"cat":..,"pid":..,"tid":..  (closed by End()).
  void Begin(char ph, std::string_view name, std::string_view cat, uint32_t pid, int64_t tid) {
    ++events_;
    json_.BeginObject();
    json_.Key("ph");
    json_.String(std::string_view(&ph, 1));
    json_.Key("name");
    json_.String(name);
    if (!cat.empty()) {
      json_.Key("cat");
      json_.String(cat);
    }
    json_.Key("pid");
    json_.Uint(pid);
    json_.Key("tid");
    json_.Int(tid);
    args_open_ = false;
  }
  void Ts(uint64_t t) {
    json_.Key("ts");
    Micros(t >= t0_ ? t - t0_ : t0_ - t, t < t0_);
  }
  void Dur(uint64_t start, uint64_t end) {
    json_.Key("dur");
    Micros(end > start ? end - start : 0, false);
  }
  void ArgU(std::string_view key, uint64_t v) {
    ArgKey(key);
    json_.Uint(v);
  }
  void ArgI(std::string_view key, int64_t v) {
    ArgKey(key);
    json_.Int(v);
  }
  void ArgS(std::string_view key, std::string_view v) {
    ArgKey(key);
    json_.String(v);
  }
  void ArgD(std::string_view key, double v) {
    ArgKey(key);
    json_.Double(v, 6);
  }
  void ArgDim3(std::string_view key, int32_t x, int32_t y, int32_t z) {
    ArgKey(key);
    json_.BeginArray();
    json_.Int(x);
    json_.Int(y);
    json_.Int(z);
    json_.EndArray();
  }
  void End() {
    if (args_open_) json_.EndObject();
    json_.EndObject();
    if (buf_.size() >= kFlushBytes) Flush();
  }

  void Metadata(std::string_view what, uint32_t pid, int64_t tid, std::string_view name) {
    Begin('M', what, "", pid, tid);
    ArgS("name", name);
    End();
  }
  void SortIndex(std::string_view what, uint32_t pid, int64_t tid, int64_t index) {
    Begin('M', what, "", pid, tid);
    ArgI("sort_index", index);
    End();
  }

  void Flush() {
    file_->Write(buf_);
    buf_.clear();
  }
  uint64_t events() const { return events_; }

 private:
  void ArgKey(std::string_view key) {
    if (!args_open_) {
      json_.Key("args");
      json_.BeginObject();
      args_open_ = true;
    }
    json_.Key(key);
  }
  // Exact decimal microseconds from nanoseconds: no floating-point rounding.
  void Micros(uint64_t ns, bool negative) { json_.FixedPoint(ns, 3, negative); }

  AtomicTextFile* file_;
  const StringTable* strings_;
  uint64_t t0_;
  std::string buf_;
  JsonWriter json_;
  uint64_t events_ = 0;
  bool args_open_ = false;
};

class Exporter {
 public:
  Exporter(const TraceReader& reader, TraceJsonWriter& out, std::vector<RankSummary> ranks,
           const Selection& sel, bool filtered, uint64_t max_records)
      : reader_(reader),
        out_(out),
        ranks_(std::move(ranks)),
        sel_(sel),
        filtered_(filtered),
        max_records_(max_records) {}

  Status Run(ChromeTraceStats* stats) {
    AON_RETURN_IF_ERROR(CollectFlows());
    if (filtered_ && sel_.Kind(RecordKind::kSync)) AON_RETURN_IF_ERROR(CollectStreamDevices());
    AON_RETURN_IF_ERROR(Each<KernelRecord>([&](const auto& m) { Kernel(m); }));
    AON_RETURN_IF_ERROR(Each<MemcpyRecord>([&](const auto& m) { Memcpy(m); }));
    AON_RETURN_IF_ERROR(Each<MemsetRecord>([&](const auto& m) { Memset(m); }));
    AON_RETURN_IF_ERROR(Each<SyncRecord>([&](const auto& m) { Sync(m); }));
    AON_RETURN_IF_ERROR(Each<ApiRecord>([&](const auto& m) { Api(m); }));
    AON_RETURN_IF_ERROR(Each<NvtxRecord>([&](const auto& m) { Nvtx(m); }));
    AON_RETURN_IF_ERROR(Each<NcclRecord>([&](const auto& m) { Nccl(m); }));
    AON_RETURN_IF_ERROR(Each<StepRecord>([&](const auto& m) { Step(m); }));
    AON_RETURN_IF_ERROR(Each<CounterRecord>([&](const auto& m) { Counter(m); }));
    // Kinds without a writer of their own: one slice per record, every field an
    // argument, from the kind's field table (common/include/aon/records.h).
    Status generic;
    ForEachRecordType([&](auto tag) {
      using T = decltype(tag);
      if constexpr (!kHasWriter<T>) {
        if (generic.ok() && IsExportedKind(RecordTraits<T>::kKind)) {
          generic = Each<T>([&](const auto& m) { Generic(m); });
        }
      }
    });
    AON_RETURN_IF_ERROR(generic);
    if (stats != nullptr) {
      stats->flows = flows_;
      stats->records = records_;
    }
    return Status::Ok();
  }

  bool over_limit() const { return over_limit_; }
  uint64_t records() const { return records_; }

 private:
  template <typename T>
  static constexpr bool kHasWriter =
      std::is_same_v<T, KernelRecord> || std::is_same_v<T, MemcpyRecord> ||
      std::is_same_v<T, MemsetRecord> || std::is_same_v<T, SyncRecord> ||
      std::is_same_v<T, ApiRecord> || std::is_same_v<T, NvtxRecord> ||
      std::is_same_v<T, NcclRecord> || std::is_same_v<T, StepRecord> ||
      std::is_same_v<T, CounterRecord> ||
      std::is_same_v<T, ExternalCorrelationRecord>;  // not a slice: flows use it

  // A record of a kind with no writer of its own: a slice on the rank's track
  // named after the kind; its fields as arguments by role (strings resolved,
  // enum values and flag bits named, times left to the slice itself).
  template <typename T>
  void Generic(const Merged<T>& m) {
    const char* kind = RecordTraits<T>::kName;
    const int64_t tid = NamedTrack(m.rank, kind);
    out_.Begin('X', kind, kind, m.rank, tid);
    out_.Ts(StartOf(m.record));
    out_.Dur(StartOf(m.record), std::max(StartOf(m.record), EndOf(m.record)));
    for (const Field& f : TableTraits<T>::kFields) {
      if (f.role == FieldRole::kPadding || f.role == FieldRole::kStart ||
          f.role == FieldRole::kEnd) {
        continue;
      }
      uint64_t raw = 0;
      std::memcpy(&raw, reinterpret_cast<const char*>(&m.record) + f.offset, f.size);
      const bool is_signed = f.type == FieldType::kI32 || f.type == FieldType::kI64;
      const int64_t value = f.type == FieldType::kI32 ? static_cast<int32_t>(raw)
                                                      : static_cast<int64_t>(raw);
      if (f.role == FieldRole::kStringId) {
        out_.ArgS(f.name, out_.Str(static_cast<uint32_t>(raw)));
      } else if (f.role == FieldRole::kEnum && EnumValueName(f, value) != nullptr) {
        out_.ArgS(f.name, EnumValueName(f, value));
      } else if (f.role == FieldRole::kFlags) {
        std::string names;
        for (const EnumValue& bit : f.values) {
          if ((raw & static_cast<uint64_t>(bit.value)) == 0) continue;
          names += (names.empty() ? "" : ",") + std::string(bit.name);
        }
        out_.ArgS(f.name, names);
      } else if (f.type == FieldType::kF64) {
        double d = 0;
        std::memcpy(&d, &raw, sizeof d);
        out_.ArgS(f.name, std::to_string(d));
      } else if (is_signed) {
        out_.ArgI(f.name, value);
      } else {
        out_.ArgU(f.name, raw);
      }
    }
    out_.End();
  }

  // The application's steps on a "Steps" track per rank; captured steps say so
  // in their name, so a viewer shows each capture window.
  void Step(const Merged<StepRecord>& m) {
    const StepRecord& r = m.record;
    const int64_t tid = NamedTrack(m.rank, "Steps");
    const bool captured = (r.flags & kStepCaptured) != 0;
    std::string name = "step " + std::to_string(r.step);
    if (captured) name += " (captured)";
    out_.Begin('X', name, RecordTraits<StepRecord>::kName, m.rank, tid);
    out_.Ts(r.start_ns);
    out_.Dur(r.start_ns, r.end_ns);
    out_.ArgU("step", r.step);
    const char* source = EnumValueName(kStepSourceValues, r.source);
    out_.ArgS("source", source != nullptr ? source : "?");
    if (r.window != 0) {
      out_.ArgU("window", r.window);
      out_.ArgU("window_first_step", r.window_first_step);
    }
    if (captured) out_.ArgS("capture", (r.flags & kStepOnDemand) ? "on demand" : "window");
    if (r.flags & kStepWindowTail) out_.ArgS("capture", "window tail (CUPTI switching off)");
    if (r.period != 0) out_.ArgU("period", r.period);
    out_.End();
  }

  // GPU counters as counter tracks ("C" events) of the rank whose file holds
  // them: one track per GPU and metric, the interval's average from its start
  // (viewers draw a step function).
  void Counter(const Merged<CounterRecord>& m) {
    const CounterRecord& r = m.record;
    const char* metric = EnumValueName(kCounterMetricValues, r.metric);
    const std::string name = "GPU " + std::to_string(r.device) + " " + (metric ? metric : "?");
    out_.Begin('C', name, RecordTraits<CounterRecord>::kName, m.rank, 0);
    out_.Ts(r.start_ns);
    out_.ArgD("value", r.value);
    out_.End();
  }

  // Exports the selected records of T; stops (over_limit_) past max_records_.
  template <typename T, typename F>
  Status Each(F&& export_one) {
    if (!sel_.Kind(RecordTraits<T>::kKind)) return Status::Ok();
    return ForEachMerged<T>(
        reader_, sel_.end(),
        [&](const Merged<T>& m) { return sel_.Keep(m.rank, m.record.start_ns, m.record.end_ns); },
        [&](const Merged<T>& m) {
          if (max_records_ != 0 && records_ >= max_records_) {
            over_limit_ = true;
            ++records_;
            return false;
          }
          ++records_;
          export_one(m);
          return true;
        },
        Unavailable("more than " + std::to_string(max_records_) + " records selected"));
  }

  // An API call gets an arrow to its GPU work only when both ends are in the
  // export: a dangling flow end clutters viewers and bloats the file.
  Status CollectFlows() {
    if (!sel_.Kind(RecordKind::kApi)) return Status::Ok();
    std::vector<uint64_t> api, gpu;
    AON_RETURN_IF_ERROR(CollectKeys(reader_, RecordKindName(RecordKind::kApi), sel_, &api));
    for (RecordKind k : {RecordKind::kKernel, RecordKind::kMemcpy, RecordKind::kMemset}) {
      if (!sel_.Kind(k)) continue;
      AON_RETURN_IF_ERROR(CollectKeys(reader_, RecordKindName(k), sel_, &gpu));
    }
    SortUnique(&api);
    SortUnique(&gpu);
    std::set_intersection(api.begin(), api.end(), gpu.begin(), gpu.end(),
                          std::back_inserter(linked_));
    return Status::Ok();
  }

  // A filtered export may not hold the first GPU record of a stream, which the
  // full export takes the stream's device from (Sync): read those columns of the
  // whole timeline, in the order the full export meets them.
  Status CollectStreamDevices() {
    for (RecordKind k : {RecordKind::kKernel, RecordKind::kMemcpy, RecordKind::kMemset}) {
      const TableSchema schema = RankStreamDeviceSchema(RecordKindName(k));
      AON_ASSIGN_OR_RETURN(uint64_t n, reader_.TableSize(schema));
      std::vector<RankStreamDevice> chunk(static_cast<size_t>(std::min(n, kChunkRecords)));
      for (uint64_t first = 0; first < n; first += kChunkRecords) {
        const uint64_t count = std::min(kChunkRecords, n - first);
        AON_RETURN_IF_ERROR(reader_.ReadTable(schema, first, count, chunk.data()));
        for (uint64_t i = 0; i < count; ++i) {
          if (!sel_.Rank(chunk[i].rank)) continue;
          stream_device_.emplace(std::make_pair(chunk[i].rank, chunk[i].stream_id),
                                 chunk[i].device_id);
        }
      }
    }
    return Status::Ok();
  }
  bool Linked(uint32_t rank, uint32_t correlation_id) const {
    return correlation_id != 0 &&
           std::binary_search(linked_.begin(), linked_.end(), FlowKey(rank, correlation_id));
  }
  void Flow(char ph, uint32_t rank, int64_t tid, uint64_t ts, uint32_t correlation_id) {
    out_.Begin(ph, "launch", "flow", rank, tid);
    out_.json().Key("id");
    out_.json().Uint(FlowKey(rank, correlation_id));
    if (ph == 'f') {
      out_.json().Key("bp");
      out_.json().String("e");
    } else {
      ++flows_;
    }
    out_.Ts(ts);
    out_.End();
  }

  int64_t NewTrack(uint32_t rank, const std::string& name) {
    const int64_t tid = next_track_tid_++;
    out_.Metadata("thread_name", rank, tid, name);
    out_.SortIndex("thread_sort_index", rank, tid, tid);
    return tid;
  }
  int64_t GpuTrack(uint32_t rank, uint32_t device, uint32_t stream) {
    auto key = std::make_tuple(rank, device, stream);
    auto it = gpu_tracks_.find(key);
    if (it != gpu_tracks_.end()) return it->second;
    std::string name = device == UINT32_MAX
                           ? "GPU stream " + std::to_string(stream)
                           : "GPU " + std::to_string(device) + " stream " + std::to_string(stream);
    stream_device_.emplace(std::make_pair(rank, stream), device);
    return gpu_tracks_.emplace(key, NewTrack(rank, name)).first->second;
  }
  int64_t NamedTrack(uint32_t rank, const std::string& name) {
    auto key = std::make_pair(rank, name);
    auto it = named_tracks_.find(key);
    if (it != named_tracks_.end()) return it->second;
    return named_tracks_.emplace(key, NewTrack(rank, name)).first->second;
  }
  int64_t CpuThread(uint32_t rank, uint32_t tid) {
    if (cpu_threads_.insert(std::make_pair(rank, tid)).second) {
      const bool main = rank < ranks_.size() && ranks_[rank].pid == static_cast<int64_t>(tid);
      out_.Metadata("thread_name", rank, tid,
                    (main ? "main thread " : "thread ") + std::to_string(tid));
    }
    return tid;
  }

  void Kernel(const Merged<KernelRecord>& m) {
    const KernelRecord& r = m.record;
    const int64_t tid = GpuTrack(m.rank, r.device_id, r.stream_id);
    const std::string& name = out_.Str(r.name_id);
    out_.Begin('X', name.empty() ? "kernel" : name, "kernel", m.rank, tid);
    out_.Ts(r.start_ns);
    out_.Dur(r.start_ns, r.end_ns);
    out_.ArgU("correlation_id", r.correlation_id);
    out_.ArgU("device", r.device_id);
    out_.ArgU("context", r.context_id);
    out_.ArgU("stream", r.stream_id);
    out_.ArgDim3("grid", r.grid_x, r.grid_y, r.grid_z);
    out_.ArgDim3("block", r.block_x, r.block_y, r.block_z);
    out_.ArgU("registers_per_thread", r.registers_per_thread);
    out_.ArgU("static_shared_bytes", r.static_shared_bytes);
    out_.ArgU("dynamic_shared_bytes", r.dynamic_shared_bytes);
    if (r.graph_id != 0 || r.graph_node_id != 0) {
      out_.ArgU("graph_id", r.graph_id);
      out_.ArgU("graph_node_id", r.graph_node_id);
    }
    out_.End();
    if (Linked(m.rank, r.correlation_id)) Flow('f', m.rank, tid, r.start_ns, r.correlation_id);
  }

  void Memcpy(const Merged<MemcpyRecord>& m) {
    const MemcpyRecord& r = m.record;
    const int64_t tid = GpuTrack(m.rank, r.device_id, r.stream_id);
    out_.Begin('X', MemcpyName(r.copy_kind), "memcpy", m.rank, tid);
    out_.Ts(r.start_ns);
    out_.Dur(r.start_ns, r.end_ns);
    out_.ArgU("bytes", r.bytes);
    out_.ArgU("copy_kind", r.copy_kind);
    out_.ArgU("src_kind", r.src_kind);
    out_.ArgU("dst_kind", r.dst_kind);
    out_.ArgU("src_device", r.src_device_id);
    out_.ArgU("dst_device", r.dst_device_id);
    out_.ArgU("async", r.flags & 1u);
    out_.ArgU("correlation_id", r.correlation_id);
    out_.ArgU("device", r.device_id);
    out_.ArgU("context", r.context_id);
    out_.ArgU("stream", r.stream_id);
    out_.End();
    if (Linked(m.rank, r.correlation_id)) Flow('f', m.rank, tid, r.start_ns, r.correlation_id);
  }

  void Memset(const Merged<MemsetRecord>& m) {
    const MemsetRecord& r = m.record;
    const int64_t tid = GpuTrack(m.rank, r.device_id, r.stream_id);
    out_.Begin('X', "Memset", "memset", m.rank, tid);
    out_.Ts(r.start_ns);
    out_.Dur(r.start_ns, r.end_ns);
    out_.ArgU("bytes", r.bytes);
    out_.ArgU("value", r.value);
    out_.ArgU("memory_kind", r.memory_kind);
    out_.ArgU("async", r.flags & 1u);
    out_.ArgU("correlation_id", r.correlation_id);
    out_.ArgU("device", r.device_id);
    out_.ArgU("context", r.context_id);
    out_.ArgU("stream", r.stream_id);
    out_.End();
    if (Linked(m.rank, r.correlation_id)) Flow('f', m.rank, tid, r.start_ns, r.correlation_id);
  }

  void Sync(const Merged<SyncRecord>& m) {
    const SyncRecord& r = m.record;
    int64_t tid = 0;
    if (r.stream_id == UINT32_MAX) {
      tid = NamedTrack(m.rank, "sync");
    } else {
      // Sync records carry no device: use the one this stream's work ran on.
      auto it = stream_device_.find(std::make_pair(m.rank, r.stream_id));
      tid = GpuTrack(m.rank, it != stream_device_.end() ? it->second : UINT32_MAX, r.stream_id);
    }
    out_.Begin('X', SyncName(r.sync_type), "sync", m.rank, tid);
    out_.Ts(r.start_ns);
    out_.Dur(r.start_ns, r.end_ns);
    out_.ArgU("sync_type", r.sync_type);
    out_.ArgU("event_id", r.event_id);
    if (r.stream_id != UINT32_MAX) out_.ArgU("stream", r.stream_id);
    out_.ArgU("context", r.context_id);
    out_.ArgU("correlation_id", r.correlation_id);
    out_.End();
  }

  void Api(const Merged<ApiRecord>& m) {
    const ApiRecord& r = m.record;
    const int64_t tid = CpuThread(m.rank, r.thread_id);
    const std::string& name = out_.Str(r.name_id);
    const bool driver = r.domain == static_cast<uint8_t>(ApiDomain::kDriver);
    out_.Begin('X', name.empty() ? "cuda api" : name, driver ? "cuda_driver" : "cuda_runtime",
               m.rank, tid);
    out_.Ts(r.start_ns);
    out_.Dur(r.start_ns, r.end_ns);
    out_.ArgU("correlation_id", r.correlation_id);
    out_.ArgU("callback_id", r.callback_id);
    out_.ArgI("return_value", r.return_value);
    out_.ArgS("domain", driver ? "driver" : "runtime");
    out_.End();
    if (Linked(m.rank, r.correlation_id)) Flow('s', m.rank, tid, r.start_ns, r.correlation_id);
  }

  void Nvtx(const Merged<NvtxRecord>& m) {
    const NvtxRecord& r = m.record;
    const int64_t tid = CpuThread(m.rank, r.thread_id);
    const std::string& domain = out_.Str(r.domain_id);
    const std::string cat = "nvtx:" + (domain.empty() ? std::string("default") : domain);
    const std::string& name = out_.Str(r.name_id);
    const std::string_view shown = name.empty() ? std::string_view("nvtx range") : name;
    auto args = [&] {
      out_.ArgU("category", r.category);
      char color[16];
      std::snprintf(color, sizeof(color), "#%08x", r.color);
      if (r.color != 0) out_.ArgS("color", color);
      out_.ArgU("depth", r.depth);
      out_.ArgS("domain", domain.empty() ? "default" : domain);
    };
    if (r.type == static_cast<uint8_t>(NvtxType::kMark)) {
      out_.Begin('i', name.empty() ? "nvtx mark" : shown, cat, m.rank, tid);
      out_.json().Key("s");
      out_.json().String("t");
      out_.Ts(r.start_ns);
      args();
      out_.End();
    } else if (r.type == static_cast<uint8_t>(NvtxType::kStartEnd)) {
      // Start/end ranges may cross threads and overlap: async slices.
      const uint64_t id = ++async_ids_;
      out_.Begin('b', shown, cat, m.rank, tid);
      out_.json().Key("id");
      out_.json().Uint(id);
      out_.Ts(r.start_ns);
      args();
      out_.End();
      out_.Begin('e', shown, cat, m.rank, tid);
      out_.json().Key("id");
      out_.json().Uint(id);
      out_.Ts(std::max(r.start_ns, r.end_ns));
      out_.End();
    } else {
      out_.Begin('X', shown, cat, m.rank, tid);
      out_.Ts(r.start_ns);
      out_.Dur(r.start_ns, r.end_ns);
      args();
      out_.End();
    }
  }

  void Nccl(const Merged<NcclRecord>& m) {
    const NcclRecord& r = m.record;
    // One track per communicator for operations (they overlap only across
    // communicators), one per channel for per-channel GPU work.
    char hash[24];
    std::snprintf(hash, sizeof(hash), "0x%016" PRIx64, r.comm_hash);
    const bool channel = r.event_type == static_cast<uint8_t>(NcclEventType::kKernelCh);
    const bool comm = r.event_type == static_cast<uint8_t>(NcclEventType::kComm);
    if (r.event_type >= static_cast<uint8_t>(NcclEventType::kGroupApi) &&
        r.event_type <= static_cast<uint8_t>(NcclEventType::kP2pApi)) {
      NcclApiCall(m, hash);
      return;
    }
    if (r.event_type == static_cast<uint8_t>(NcclEventType::kProxyOp) ||
        r.event_type == static_cast<uint8_t>(NcclEventType::kProxyStep)) {
      NcclProxy(m, hash);
      return;
    }
    std::string track = channel ? "NCCL channel " + std::to_string(r.channel_id)
                                : std::string("NCCL comm ") + (hash + 14);  // last 4 hex digits
    const int64_t tid = NamedTrack(m.rank, track);
    const std::string& func = out_.Str(r.func_id);
    std::string name = comm ? "communicator " + (func.empty() ? std::string(hash) : func)
                            : (func.empty() ? std::string("NCCL") : func);
    out_.Begin('X', name, "nccl", m.rank, tid);
    out_.Ts(r.start_ns);
    out_.Dur(r.start_ns, r.end_ns);
    out_.ArgS("comm_hash", hash);
    out_.ArgS("event_type", NcclTypeName(r.event_type));
    if (comm) {
      out_.ArgI("comm_rank", r.comm_rank);
      out_.ArgI("comm_nranks", r.comm_nranks);
      out_.ArgI("comm_nnodes", r.comm_nnodes);
      out_.End();
      return;
    }
    out_.ArgU("seq_number", r.seq_number);
    out_.ArgS("func", func);
    if (channel) {
      out_.ArgI("channel_id", r.channel_id);
      out_.End();
      return;
    }
    out_.ArgU("count", r.count);
    out_.ArgU("bytes", r.bytes);
    out_.ArgS("algo", out_.Str(r.algo_id));
    out_.ArgS("proto", out_.Str(r.proto_id));
    out_.ArgS("datatype", out_.Str(r.datatype_id));
    out_.ArgI("root", r.root);
    out_.ArgI("peer", r.peer);
    out_.ArgU("n_channels", r.n_channels);
    out_.ArgU("n_warps", r.n_warps);
    out_.ArgU("stream", r.stream_id);
    out_.ArgU("correlation_id", r.correlation_id);
    out_.ArgU("gpu_timing", r.gpu_timing);
    if (r.graph_replay != 0) out_.ArgU("graph_replay", r.graph_replay);
    // When the GPU started it, relative to the host call: the rank's wait to get going.
    if (r.gpu_start_ns != 0) {
      out_.ArgI("gpu_start_after_call_ns",
                static_cast<int64_t>(r.gpu_start_ns) - static_cast<int64_t>(r.start_ns));
    }
    out_.End();
  }

  // The user's NCCL calls: one "NCCL API" track per rank (a group encloses its
  // calls, so they nest as slices).
  void NcclApiCall(const Merged<NcclRecord>& m, const char* hash) {
    const NcclRecord& r = m.record;
    const int64_t tid = NamedTrack(m.rank, "NCCL API");
    const bool group = r.event_type == static_cast<uint8_t>(NcclEventType::kGroupApi);
    const std::string& func = out_.Str(r.func_id);
    const std::string name =
        group ? std::string("ncclGroup") : "nccl" + (func.empty() ? std::string("?") : func);
    out_.Begin('X', name, "nccl", m.rank, tid);
    out_.Ts(r.start_ns);
    out_.Dur(r.start_ns, r.end_ns);
    out_.ArgS("comm_hash", hash);
    out_.ArgS("event_type", NcclTypeName(r.event_type));
    out_.ArgU("graph_captured", (r.n_warps & kNcclApiGraphCaptured) ? 1 : 0);
    if (group) {
      out_.ArgU("group_depth", r.count);
    } else {
      out_.ArgS("func", func);
      out_.ArgU("count", r.count);
      out_.ArgU("bytes", r.bytes);
      out_.ArgS("datatype", out_.Str(r.datatype_id));
      if (r.root >= 0) out_.ArgI("root", r.root);
    }
    out_.End();
  }

  // Network proxy progress: one track per rank and channel.
  void NcclProxy(const Merged<NcclRecord>& m, const char* hash) {
    const NcclRecord& r = m.record;
    const bool step = r.event_type == static_cast<uint8_t>(NcclEventType::kProxyStep);
    const int64_t tid = NamedTrack(m.rank, "NCCL proxy channel " + std::to_string(r.channel_id));
    const bool send = (r.n_warps & kNcclProxySend) != 0;
    const std::string& func = out_.Str(r.func_id);
    std::string name = std::string(send ? "send" : "recv") + (step ? " step " : " ") +
                       (step ? std::to_string(r.count) : (func.empty() ? "proxy" : func));
    out_.Begin('X', name, "nccl", m.rank, tid);
    out_.Ts(r.start_ns);
    out_.Dur(r.start_ns, r.end_ns);
    out_.ArgS("comm_hash", hash);
    out_.ArgS("event_type", NcclTypeName(r.event_type));
    out_.ArgU("seq_number", r.seq_number);
    out_.ArgS("func", func);
    out_.ArgI("channel_id", r.channel_id);
    out_.ArgI("peer", r.peer);
    out_.ArgS("direction", send ? "send" : "recv");
    out_.ArgU(step ? "step" : "steps", r.count);
    out_.ArgU(step ? "bytes" : "step_bytes", r.bytes);
    out_.End();
  }

  const TraceReader& reader_;
  TraceJsonWriter& out_;
  std::vector<RankSummary> ranks_;  // indexed by rank
  const Selection& sel_;
  bool filtered_;
  uint64_t max_records_;
  uint64_t records_ = 0;
  bool over_limit_ = false;
  std::vector<uint64_t> linked_;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, int64_t> gpu_tracks_;
  std::map<std::pair<uint32_t, std::string>, int64_t> named_tracks_;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> stream_device_;
  std::set<std::pair<uint32_t, uint32_t>> cpu_threads_;
  int64_t next_track_tid_ = kFirstTrackTid;
  uint64_t async_ids_ = 0;
  uint64_t flows_ = 0;
};

}  // namespace

Status ExportChromeTrace(const std::string& timeline_path, const std::string& json_path,
                         ChromeTraceStats* stats) {
  return ExportChromeTrace(timeline_path, json_path, ChromeExportOptions{}, stats);
}

Status ExportChromeTrace(const std::string& timeline_path, const std::string& json_path,
                         const ChromeExportOptions& options, ChromeTraceStats* stats) {
  if (stats != nullptr) *stats = ChromeTraceStats{};
  const ExportFilter& filter = options.filter;
  AON_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(timeline_path));
  if (reader->kind() != FileKind::kTimeline) {
    return InvalidArgument("'" + timeline_path + "' is a rank trace, not a merged timeline");
  }
  AON_ASSIGN_OR_RETURN(StringTable strings, reader->ReadStrings());
  AON_ASSIGN_OR_RETURN(int64_t t0, reader->GetMetaInt("start_ns"));
  AON_ASSIGN_OR_RETURN(std::vector<RankSummary> rows,
                       reader->ReadAllOf<RankSummary>(RankSummarySchema(), "meta"));
  const std::set<uint32_t> synthetic = SyntheticRanks(*reader);
  // Rows are written in rank order, one per rank; index them by rank anyway.
  std::vector<RankSummary> by_rank;
  for (const RankSummary& row : rows) {
    if (row.rank >= by_rank.size()) by_rank.resize(row.rank + 1, RankSummary{});
    by_rank[row.rank] = row;
  }
  const Selection sel(filter, static_cast<uint64_t>(t0), by_rank.size());
  auto over_limit = [&](uint64_t records, bool exact) {
    if (stats != nullptr) {
      stats->over_limit = true;
      stats->records = records;
    }
    return Unavailable("'" + json_path + "' not written: " + (exact ? "" : "more than ") +
                       std::to_string(exact ? records : options.max_records) +
                       " records selected (" + filter.Describe() + "), the limit is " +
                       std::to_string(options.max_records));
  };
  // Without a window or ranks the count is known before reading any record.
  if (options.max_records != 0 && !filter.HasWindow() && filter.ranks.empty()) {
    uint64_t total = 0;
    for (size_t k = 0; k < kTimelineKindCount; ++k) {
      const auto kind = static_cast<RecordKind>(k);
      if (!sel.Kind(kind)) continue;
      AON_ASSIGN_OR_RETURN(uint64_t n,
                           reader->TableSize(RankCorrelationSchema(RecordKindName(kind))));
      total += n;
    }
    if (total > options.max_records) return over_limit(total, true);
  }

  AON_ASSIGN_OR_RETURN(auto file, AtomicTextFile::Create(json_path));
  TraceJsonWriter out(file.get(), &strings, static_cast<uint64_t>(t0));
  JsonWriter& json = out.json();
  json.BeginObject();
  json.Key("traceEvents");
  json.BeginArray(JsonWriter::Layout::kOnePerLine);
  for (const RankSummary& row : rows) {
    if (row.status != static_cast<uint8_t>(RankStatus::kOk)) continue;
    if (!sel.Rank(row.rank)) continue;
    std::string name = "rank " + std::to_string(row.rank);
    if (!strings.Get(row.host_id).empty()) name += " @ " + strings.Get(row.host_id);
    if (synthetic.count(row.rank) > 0) name += " [SYNTHETIC]";
    out.Metadata("process_name", row.rank, 0, name);
    out.SortIndex("process_sort_index", row.rank, 0, row.rank);
  }
  Exporter exporter(*reader, out, std::move(by_rank), sel, !filter.empty(), options.max_records);
  if (Status s = exporter.Run(stats); !s.ok()) {
    // The .partial file is removed when `file` goes.
    if (exporter.over_limit()) return over_limit(exporter.records(), false);
    return s.WithContext("exporting '" + timeline_path + "'");
  }

  json.EndArray();
  // displayTimeUnit after the events: some older Perfetto builds read it from the
  // start of the file and then took ts as nanoseconds.
  json.Key("displayTimeUnit");
  json.String("ns");
  json.Key("metadata");
  json.BeginObject();
  auto add = [&](const char* key, const std::string& value) {
    json.Key(key);
    json.String(value);
  };
  add("generator", "aon-merge");
  add("timeline", timeline_path);
  add("job_id", MetaStringOr(*reader, "job_id"));
  add("source", MetaStringOr(*reader, "source"));
  add("clock_note", MetaStringOr(*reader, "clock_note"));
  add("start_ns", std::to_string(t0));
  add("time_origin", "ts 0 = start_ns on the timeline clock; ts and dur in microseconds");
  add("records", std::to_string(exporter.records()));
  if (!filter.empty()) {
    // What was selected; records overlapping the window are whole, not clipped.
    add("filter", filter.Describe());
    if (filter.HasWindow()) {
      add("window", filter.WindowText());
      add("window_start_ns", std::to_string(sel.start()));
      add("window_end_ns", sel.end() == UINT64_MAX ? std::string() : std::to_string(sel.end()));
    }
    if (!filter.ranks.empty()) add("ranks", filter.RanksText());
    if (!filter.kinds.empty()) add("kinds", filter.KindsText());
  }
  json.EndObject();
  json.EndObject();
  json.Newline();
  out.Flush();
  if (stats != nullptr) stats->events = out.events();
  return file->Commit();
}

}  // namespace aon::merge
