// Timeline -> trace events (trace_builder.h): one exporter per record kind with a
// mapping of its own, `Generic` for the others; the tables are merged by start.
#include "trace_builder.h"

#include <algorithm>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>

#include "aon/format/framework_ranges.h"
#include "aon/format/host_stack.h"
#include "aon/format/records.h"
#include "timeline_meta.h"

namespace aon::merge {

namespace {

using trace::Arg;
using trace::SliceShape;
using trace::TrackInfo;
using trace::TrackKind;

constexpr uint64_t kChunkRecords = 1 << 16;
// Chunks of the merged tables: ten tables are open at once.
constexpr uint64_t kCursorChunkRecords = 1 << 12;

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

// API -> GPU flows: rank and correlation id (below 2^63).
uint64_t FlowKey(uint32_t rank, uint32_t correlation_id) {
  return (uint64_t{rank} << 32) | correlation_id;
}

// One NCCL collective's instances on every rank: (communicator, sequence number)
// mixed (splitmix64's finalizer) into ids with the top bit set, apart from FlowKey.
uint64_t CollectiveFlowId(uint64_t comm_hash, uint64_t seq_number) {
  uint64_t z = comm_hash ^ (seq_number * 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return z | (uint64_t{1} << 63);
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

 private:
  const ExportFilter& filter_;
  uint64_t start_, end_;
  bool all_ranks_;
  std::vector<char> ranks_;
};

// Every row of T's table, in order, to `visit` until it returns false. Whole
// rows: a table read in its own layout goes through the direct chunk path
// (libdeflate, on the reader's threads), where reading only some columns made
// HDF5 inflate (zlib) and convert every chunk itself, several times slower.
template <typename T, typename Visit>
Status ScanRows(const TraceReader& reader, Visit&& visit) {
  const TableSchema& schema = MergedSchemaOf<T>();
  AON_ASSIGN_OR_RETURN(uint64_t n, reader.TableSize(schema));
  std::vector<Merged<T>> chunk(static_cast<size_t>(std::min(n, kChunkRecords)));
  for (uint64_t first = 0; first < n; first += kChunkRecords) {
    const uint64_t count = std::min(kChunkRecords, n - first);
    AON_RETURN_IF_ERROR(reader.ReadTable(schema, first, count, chunk.data()));
    for (uint64_t i = 0; i < count; ++i) {
      if (!visit(chunk[i])) return Status::Ok();
    }
  }
  return Status::Ok();
}

// The flow keys of T's records that the selection keeps.
template <typename T>
Status CollectKeys(const TraceReader& reader, const Selection& sel, std::vector<uint64_t>* keys) {
  return ScanRows<T>(reader, [&](const Merged<T>& m) {
    if (sel.PastWindow(StartOf(m.record))) return false;
    if (m.record.correlation_id != 0 && sel.Keep(m.rank, StartOf(m.record), EndOf(m.record)))
      keys->push_back(FlowKey(m.rank, m.record.correlation_id));
    return true;
  });
}

void SortUnique(std::vector<uint64_t>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

// A slice's arguments, collected before the slice goes to the sink. Views must
// outlive the call: computed strings go to Keep().
class ArgList {
 public:
  void U(std::string_view key, uint64_t v) { args_.push_back(Arg{key, v}); }
  void I(std::string_view key, int64_t v) { args_.push_back(Arg{key, v}); }
  void S(std::string_view key, std::string_view v) { args_.push_back(Arg{key, v}); }
  void D(std::string_view key, double v) { args_.push_back(Arg{key, v}); }
  void Dim(std::string_view key, int32_t x, int32_t y, int32_t z) {
    args_.push_back(Arg{key, trace::Dim3{x, y, z}});
  }
  // A string that lives until Clear() (a deque: references stay valid).
  std::string_view Keep(std::string s) { return kept_.emplace_back(std::move(s)); }
  void Clear() {
    args_.clear();
    kept_.clear();
  }
  std::span<const Arg> span() const { return args_; }

 private:
  std::vector<Arg> args_;
  std::deque<std::string> kept_;
};

// The order of made-up tracks inside a process.
enum class TrackClass : int64_t { kGpu, kSync, kNccl, kNcclApi, kNcclProxy, kSteps, kOther };

// The fields a kind's own exporter below takes care of itself: shown under its own
// argument names, folded into the slice's name, track, times or flows, or left out on
// purpose. Every other field of the kind's table (records.h) becomes an argument by its
// role (Builder::FieldArgs), so a field added to a record kind reaches the Chrome JSON,
// Perfetto and OTF2 exports without an edit here. Kinds without an exporter of their own
// show every field that way (Builder::Generic).
template <typename T>
std::span<const std::string_view> HandledFields() {
  using std::string_view_literals::operator""sv;
  if constexpr (std::is_same_v<T, KernelRecord>) {
    static constexpr std::string_view kFields[] = {"start_ns"sv,
                                                   "end_ns"sv,
                                                   "graph_node_id"sv,
                                                   "correlation_id"sv,
                                                   "device_id"sv,
                                                   "context_id"sv,
                                                   "stream_id"sv,
                                                   "name_id"sv,
                                                   "graph_id"sv,
                                                   "grid_x"sv,
                                                   "grid_y"sv,
                                                   "grid_z"sv,
                                                   "block_x"sv,
                                                   "block_y"sv,
                                                   "block_z"sv,
                                                   "registers_per_thread"sv,
                                                   "static_shared_bytes"sv,
                                                   "dynamic_shared_bytes"sv};
    return kFields;
  } else if constexpr (std::is_same_v<T, MemcpyRecord>) {
    static constexpr std::string_view kFields[] = {
        "start_ns"sv,   "end_ns"sv,    "bytes"sv,         "correlation_id"sv, "device_id"sv,
        "context_id"sv, "stream_id"sv, "src_device_id"sv, "dst_device_id"sv,  "copy_kind"sv,
        "src_kind"sv,   "dst_kind"sv,  "flags"sv};
    return kFields;
  } else if constexpr (std::is_same_v<T, MemsetRecord>) {
    static constexpr std::string_view kFields[] = {
        "start_ns"sv,   "end_ns"sv,    "bytes"sv, "correlation_id"sv, "device_id"sv,
        "context_id"sv, "stream_id"sv, "value"sv, "memory_kind"sv,    "flags"sv};
    return kFields;
  } else if constexpr (std::is_same_v<T, SyncRecord>) {
    static constexpr std::string_view kFields[] = {
        "start_ns"sv,  "end_ns"sv,   "correlation_id"sv, "context_id"sv,
        "stream_id"sv, "event_id"sv, "sync_type"sv};
    return kFields;
  } else if constexpr (std::is_same_v<T, ApiRecord>) {
    static constexpr std::string_view kFields[] = {
        "start_ns"sv,  "end_ns"sv,       "correlation_id"sv, "callback_id"sv,
        "thread_id"sv, "return_value"sv, "name_id"sv,        "domain"sv};
    return kFields;
  } else if constexpr (std::is_same_v<T, NvtxRecord>) {
    static constexpr std::string_view kFields[] = {"start_ns"sv,  "end_ns"sv,  "thread_id"sv,
                                                   "domain_id"sv, "name_id"sv, "category"sv,
                                                   "color"sv,     "depth"sv,   "type"sv};
    return kFields;
  } else if constexpr (std::is_same_v<T, NcclRecord>) {
    // external_id is left out: it ties the record to its ExternalCorrelation row, which the
    // merge has already resolved (nccl_resolve.cc).
    static constexpr std::string_view kFields[] = {
        "start_ns"sv,    "end_ns"sv,      "gpu_start_ns"sv, "comm_hash"sv,      "seq_number"sv,
        "count"sv,       "bytes"sv,       "external_id"sv,  "correlation_id"sv, "func_id"sv,
        "algo_id"sv,     "proto_id"sv,    "datatype_id"sv,  "root"sv,           "peer"sv,
        "n_channels"sv,  "n_warps"sv,     "stream_id"sv,    "channel_id"sv,     "comm_rank"sv,
        "comm_nranks"sv, "comm_nnodes"sv, "graph_replay"sv, "event_type"sv,     "gpu_timing"sv};
    return kFields;
  } else if constexpr (std::is_same_v<T, StepRecord>) {
    static constexpr std::string_view kFields[] = {
        "start_ns"sv, "end_ns"sv, "step"sv,   "window_first_step"sv,
        "window"sv,   "period"sv, "source"sv, "flags"sv};
    return kFields;
  } else if constexpr (std::is_same_v<T, CounterRecord>) {
    // A counter sample has a value and a track, no arguments: the GPU's UUID names the
    // device the track is for.
    static constexpr std::string_view kFields[] = {"start_ns"sv,    "end_ns"sv,      "value"sv,
                                                   "gpu_uuid_hi"sv, "gpu_uuid_lo"sv, "device"sv,
                                                   "metric"sv,      "source"sv};
    return kFields;
  } else if constexpr (std::is_same_v<T, HostSampleRecord>) {
    static constexpr std::string_view kFields[] = {"start_ns"sv, "tid"sv, "stack_id"sv,
                                                   "thread_name_id"sv};
    return kFields;
  } else if constexpr (std::is_same_v<T, OpRecord>) {
    static constexpr std::string_view kFields[] = {
        "start_ns"sv,       "end_ns"sv,  "op_id"sv,     "parent_id"sv,
        "sequence_nr"sv,    "name_id"sv, "thread_id"sv, "framework_thread"sv,
        "forward_thread"sv, "kind"sv};
    return kFields;
  } else {
    return {};
  }
}

class Builder;

// The tables' next chunks, read on a thread of its own while the builder works
// through the current ones: reading (HDF5, inflating, unshuffling) was a third
// of an export's time on the thread that also builds and encodes every event.
// Once cursors have started, this thread makes every HDF5 call (the library is
// built serial: one caller at a time) until the ReadAhead is destroyed, which
// drops what is queued and waits for the read under way.
class ReadAhead {
 public:
  struct Job {
    std::function<Status()> read;
    bool done = false;  // under the ReadAhead's lock
    Status status;
  };
  ReadAhead() = default;
  ~ReadAhead() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      queue_.clear();
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // Queues `job` (alive until Wait returns or the ReadAhead is gone). Without
  // a thread (the system refused one) it reads at once.
  void Start(Job* job) {
    job->done = false;
    if (!started_) {
      started_ = true;
      try {
        thread_ = std::thread([this] { Loop(); });
      } catch (const std::exception&) {
      }
    }
    if (!thread_.joinable()) {
      job->status = job->read();
      job->done = true;
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(job);
    }
    cv_.notify_all();
  }
  Status Wait(Job* job) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return job->done; });
    return job->status;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped
      Job* job = queue_.front();
      queue_.pop_front();
      lock.unlock();
      Status status;
      try {
        status = job->read();
      } catch (const std::exception& e) {  // out of memory
        status = Internal(std::string("reading the timeline: ") + e.what());
      }
      lock.lock();
      job->status = std::move(status);
      job->done = true;
      cv_.notify_all();
    }
  }

  std::thread thread_;
  bool started_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> queue_;  // under mu_
  bool stop_ = false;       // under mu_
};

// One table read in chunks, in start order, skipping what the selection drops.
class Cursor {
 public:
  virtual ~Cursor() = default;
  // The table's size (on the calling thread, before any cursor has started).
  virtual Status Open() = 0;
  // The first chunk read and the next one asked for.
  virtual Status Start() = 0;
  virtual bool done() const = 0;
  virtual uint64_t start() const = 0;
  virtual void Emit(Builder& builder) = 0;
  virtual Status Advance() = 0;
};

template <typename T>
class TableCursor final : public Cursor {
 public:
  TableCursor(const TraceReader& reader, const Selection& sel, ReadAhead& ahead)
      : reader_(reader), sel_(sel), ahead_(ahead) {}

  Status Open() override {
    AON_ASSIGN_OR_RETURN(n_, reader_.TableSize(MergedSchemaOf<T>()));
    return Status::Ok();
  }
  Status Start() override {
    Ask(0);
    return Settle();
  }
  bool done() const override { return done_; }
  uint64_t start() const override { return StartOf(current().record); }
  void Emit(Builder& builder) override;
  Status Advance() override {
    ++next_;
    return Settle();
  }

 private:
  const Merged<T>& current() const { return chunk_[static_cast<size_t>(next_ - first_)]; }
  // Asks for the chunk at row `first` into ahead_chunk_ (none past the end).
  void Ask(uint64_t first) {
    ahead_first_ = first;
    if (first >= n_) return;
    ahead_chunk_.resize(static_cast<size_t>(std::min(kCursorChunkRecords, n_ - first)));
    job_.read = [this, first] {
      return reader_.ReadTable(MergedSchemaOf<T>(), first, ahead_chunk_.size(),
                               ahead_chunk_.data());
    };
    ahead_.Start(&job_);
  }
  // Moves to the next kept record, or done at the table's or the window's end.
  Status Settle() {
    for (;; ++next_) {
      if (next_ >= n_) {
        done_ = true;
        return Status::Ok();
      }
      if (next_ >= first_ + chunk_.size()) {
        // Chunks are read in order: the one asked for is this one.
        AON_RETURN_IF_ERROR(ahead_.Wait(&job_));
        first_ = ahead_first_;
        chunk_.swap(ahead_chunk_);
        Ask(first_ + chunk_.size());
      }
      const Merged<T>& m = current();
      if (sel_.PastWindow(StartOf(m.record))) {
        done_ = true;
        return Status::Ok();
      }
      if (sel_.Keep(m.rank, StartOf(m.record), EndOf(m.record))) return Status::Ok();
    }
  }

  const TraceReader& reader_;
  const Selection& sel_;
  ReadAhead& ahead_;
  uint64_t n_ = 0, first_ = 0, next_ = 0, ahead_first_ = 0;
  bool done_ = false;
  std::vector<Merged<T>> chunk_, ahead_chunk_;
  ReadAhead::Job job_;
};

class Builder {
 public:
  Builder(const TraceReader& reader, const TimelineView& timeline, const Selection& sel,
          const TraceBuildOptions& options, trace::TraceSink* sink)
      : reader_(reader), timeline_(timeline), sel_(sel), options_(options), out_(*sink) {
    for (const RankSummary& row : timeline.ranks) {
      if (row.rank >= ranks_.size()) ranks_.resize(row.rank + 1, RankSummary{});
      ranks_[row.rank] = row;
    }
  }

  Status Run(TraceBuildStats* stats) {
    for (const RankSummary& row : timeline_.ranks) {
      if (row.status != static_cast<uint8_t>(RankStatus::kOk)) continue;
      if (!sel_.Rank(row.rank)) continue;
      out_.OnProcess(trace::ProcessInfo{row.rank, timeline_.ProcessName(row), row.rank,
                                        timeline_.strings.Get(row.host_id)});
    }
    if (options_.flows == FlowLinks::kBothEndsKept) AON_RETURN_IF_ERROR(CollectFlows());
    if (sel_.Kind(RecordKind::kSync)) AON_RETURN_IF_ERROR(CollectStreamDevices());

    // Every exported kind's table, merged by start (ties: kind order). The
    // ReadAhead is declared after the cursors whose chunks it fills, so it is
    // destroyed first: its thread stops before their buffers go.
    std::vector<std::unique_ptr<Cursor>> cursors;
    ReadAhead ahead;
    ForEachRecordType([&](auto tag) {
      using T = decltype(tag);
      const RecordKind kind = RecordTraits<T>::kKind;
      if (IsExportedKind(kind) && sel_.Kind(kind)) {
        cursors.push_back(std::make_unique<TableCursor<T>>(reader_, sel_, ahead));
      }
    });
    for (auto& c : cursors) AON_RETURN_IF_ERROR(c->Open());
    for (auto& c : cursors) AON_RETURN_IF_ERROR(c->Start());
    for (;;) {
      Cursor* next = nullptr;
      for (auto& c : cursors) {
        if (!c->done() && (next == nullptr || c->start() < next->start())) next = c.get();
      }
      if (next == nullptr) break;
      if (options_.max_records != 0 && records_ >= options_.max_records) {
        ++records_;
        if (stats != nullptr) *stats = TraceBuildStats{records_, flows_, true};
        return Unavailable("more than " + std::to_string(options_.max_records) +
                           " records selected");
      }
      ++records_;
      next->Emit(*this);
      AON_RETURN_IF_ERROR(next->Advance());
    }
    if (stats != nullptr) *stats = TraceBuildStats{records_, flows_, false};
    return Status::Ok();
  }

  template <typename T>
  void Export(const Merged<T>& m) {
    args_.Clear();
    FieldArgs(m);  // the fields its exporter does not take (none today)
    if constexpr (std::is_same_v<T, KernelRecord>) {
      Kernel(m);
    } else if constexpr (std::is_same_v<T, MemcpyRecord>) {
      Memcpy(m);
    } else if constexpr (std::is_same_v<T, MemsetRecord>) {
      Memset(m);
    } else if constexpr (std::is_same_v<T, SyncRecord>) {
      Sync(m);
    } else if constexpr (std::is_same_v<T, ApiRecord>) {
      Api(m);
    } else if constexpr (std::is_same_v<T, NvtxRecord>) {
      Nvtx(m);
    } else if constexpr (std::is_same_v<T, NcclRecord>) {
      Nccl(m);
    } else if constexpr (std::is_same_v<T, StepRecord>) {
      Step(m);
    } else if constexpr (std::is_same_v<T, CounterRecord>) {
      Counter(m);
    } else if constexpr (std::is_same_v<T, OpRecord>) {
      Op(m);
    } else if constexpr (std::is_same_v<T, HostSampleRecord>) {
      HostSample(m);
    } else {
      Generic(m);
    }
  }

 private:
  const std::string& Str(uint32_t id) const { return timeline_.strings.Get(id); }
  // Str(id) as the name of the slice emitted next (Slice::name_id), when it is
  // not empty (an empty one is replaced by a fixed name).
  const std::string& Named(uint32_t id) {
    const std::string& s = Str(id);
    name_id_ = s.empty() ? 0 : id;
    return s;
  }

  void Emit(uint32_t track, SliceShape shape, std::string_view name, std::string_view category,
            uint64_t start, uint64_t end, uint64_t flow_begin = 0, uint64_t flow_end = 0,
            uint64_t flow_chain = 0, uint64_t async_id = 0) {
    trace::Slice s;
    s.track = track;
    s.shape = shape;
    s.name = name;
    s.name_id = name_id_;
    name_id_ = 0;
    s.category = category;
    s.start_ns = start;
    s.end_ns = shape == SliceShape::kInstant ? start : std::max(start, end);
    s.async_id = async_id;
    s.flow_begin = flow_begin;
    s.flow_end = flow_end;
    s.flow_chain = flow_chain;
    s.collective = collective_;
    s.args = args_.span();
    s.callstack = callstack_;
    callstack_ = {};
    out_.OnSlice(s);
  }

  // The fields of T that become arguments: not padding, not the slice's own times, not
  // taken by the kind's exporter (HandledFields). Found once per kind, not per record: the
  // exports run at millions of records a second, and today the list is empty for every
  // kind with an exporter.
  template <typename T>
  static const std::vector<const Field*>& ArgFields() {
    static const std::vector<const Field*> fields = [] {
      const std::span<const std::string_view> handled = HandledFields<T>();
      std::vector<const Field*> out;
      for (const Field& f : TableTraits<T>::kFields) {
        if (f.role == FieldRole::kPadding || f.role == FieldRole::kStart ||
            f.role == FieldRole::kEnd) {
          continue;
        }
        if (std::find(handled.begin(), handled.end(), std::string_view(f.name)) == handled.end())
          out.push_back(&f);
      }
      return out;
    }();
    return fields;
  }

  // ArgFields<T>() of `m` as arguments by role: strings resolved, enum values and flag bits
  // named.
  template <typename T>
  void FieldArgs(const Merged<T>& m) {
    for (const Field* field : ArgFields<T>()) {
      const Field& f = *field;
      uint64_t raw = 0;
      std::memcpy(&raw, reinterpret_cast<const char*>(&m.record) + f.offset, f.size);
      const bool is_signed = f.type == FieldType::kI32 || f.type == FieldType::kI64;
      const int64_t value =
          f.type == FieldType::kI32 ? static_cast<int32_t>(raw) : static_cast<int64_t>(raw);
      if (f.role == FieldRole::kStringId) {
        args_.S(f.name, Str(static_cast<uint32_t>(raw)));
      } else if (f.role == FieldRole::kEnum && EnumValueName(f, value) != nullptr) {
        args_.S(f.name, EnumValueName(f, value));
      } else if (f.role == FieldRole::kFlags) {
        std::string names;
        for (const EnumValue& bit : f.values) {
          if ((raw & static_cast<uint64_t>(bit.value)) == 0) continue;
          names += (names.empty() ? "" : ",") + std::string(bit.name);
        }
        args_.S(f.name, args_.Keep(std::move(names)));
      } else if (f.type == FieldType::kF64) {
        double d = 0;
        std::memcpy(&d, &raw, sizeof d);
        args_.S(f.name, args_.Keep(std::to_string(d)));
      } else if (is_signed) {
        args_.I(f.name, value);
      } else {
        args_.U(f.name, raw);
      }
    }
  }

  // A record of a kind with no mapping of its own: a slice on the rank's track
  // named after the kind, every field an argument (Export has added them).
  template <typename T>
  void Generic(const Merged<T>& m) {
    const char* kind = RecordTraits<T>::kName;
    const uint32_t track = NamedTrack(m.rank, kind, TrackClass::kOther);
    Emit(track, SliceShape::kComplete, kind, kind, StartOf(m.record), EndOf(m.record));
  }

  // The application's steps on a "Steps" track per rank, named by kind ("step",
  // "step (captured)") with the number as an argument: viewers group them (one
  // Perfetto slice name, one OTF2 region), and each capture window shows.
  void Step(const Merged<StepRecord>& m) {
    const StepRecord& r = m.record;
    const uint32_t track = NamedTrack(m.rank, "Steps", TrackClass::kSteps);
    const bool captured = (r.flags & kStepCaptured) != 0;
    const std::string name = captured ? "step (captured)" : "step";
    args_.U("step", r.step);
    const char* source = EnumValueName(kStepSourceValues, r.source);
    args_.S("source", source != nullptr ? source : "?");
    if (r.window != 0) {
      args_.U("window", r.window);
      args_.U("window_first_step", r.window_first_step);
    }
    if (captured) args_.S("capture", (r.flags & kStepOnDemand) ? "on demand" : "window");
    if (r.flags & kStepWindowTail) args_.S("capture", "window tail (CUPTI switching off)");
    if (r.period != 0) args_.U("period", r.period);
    Emit(track, SliceShape::kComplete, name, RecordTraits<StepRecord>::kName, r.start_ns, r.end_ns);
  }

  // A counter metric's unit, from its name's suffix (kCounterMetricValues:
  // "..._pct" percents, "..._mib_per_s" MiB per second).
  static std::string CounterUnit(std::string_view metric) {
    auto ends = [&](std::string_view suffix) {
      return metric.size() >= suffix.size() &&
             metric.substr(metric.size() - suffix.size()) == suffix;
    };
    if (ends("_pct")) return "%";
    if (ends("_mib_per_s")) return "MiB/s";
    return "";
  }

  // GPU counters as counter tracks of the rank whose file holds them: one track
  // per GPU and metric, the interval's average from its start.
  void Counter(const Merged<CounterRecord>& m) {
    const CounterRecord& r = m.record;
    const char* metric = EnumValueName(kCounterMetricValues, r.metric);
    std::string name = "GPU " + std::to_string(r.device) + " " + (metric ? metric : "?");
    auto key = std::make_pair(m.rank, name);
    auto it = counter_tracks_.find(key);
    if (it == counter_tracks_.end()) {
      TrackInfo info;
      info.pid = m.rank;
      info.kind = TrackKind::kCounter;
      info.name = name;
      info.category = RecordTraits<CounterRecord>::kName;
      info.series = "value";
      info.unit = CounterUnit(metric ? metric : "");
      it = counter_tracks_.emplace(std::move(key), NewTrack(info)).first;
    }
    out_.OnCounter(trace::CounterSample{it->second, r.start_ns, r.value});
  }

  // An API call gets an arrow to its GPU work only when both ends are in the
  // export: a dangling flow end clutters viewers and bloats the file.
  Status CollectFlows() {
    if (!sel_.Kind(RecordKind::kApi)) return Status::Ok();
    std::vector<uint64_t> api, gpu;
    AON_RETURN_IF_ERROR(CollectKeys<ApiRecord>(reader_, sel_, &api));
    if (sel_.Kind(RecordKind::kKernel))
      AON_RETURN_IF_ERROR(CollectKeys<KernelRecord>(reader_, sel_, &gpu));
    if (sel_.Kind(RecordKind::kMemcpy))
      AON_RETURN_IF_ERROR(CollectKeys<MemcpyRecord>(reader_, sel_, &gpu));
    if (sel_.Kind(RecordKind::kMemset))
      AON_RETURN_IF_ERROR(CollectKeys<MemsetRecord>(reader_, sel_, &gpu));
    SortUnique(&api);
    SortUnique(&gpu);
    std::set_intersection(api.begin(), api.end(), gpu.begin(), gpu.end(),
                          std::back_inserter(linked_));
    return Status::Ok();
  }

  // Sync records carry no device: a stream's device is the one its first GPU
  // record (kernels, then memcpy, then memset, each in start order) ran on, read
  // from the whole timeline so that a window gets the full export's tracks.
  Status CollectStreamDevices() {
    AON_ASSIGN_OR_RETURN(uint64_t syncs, reader_.TableSize(MergedSchemaOf<SyncRecord>()));
    if (syncs == 0) return Status::Ok();
    AON_RETURN_IF_ERROR(CollectStreamDevicesOf<KernelRecord>());
    AON_RETURN_IF_ERROR(CollectStreamDevicesOf<MemcpyRecord>());
    return CollectStreamDevicesOf<MemsetRecord>();
  }
  template <typename T>
  Status CollectStreamDevicesOf() {
    std::pair<uint32_t, uint32_t> last{UINT32_MAX, UINT32_MAX};
    return ScanRows<T>(reader_, [&](const Merged<T>& m) {
      const std::pair<uint32_t, uint32_t> key{m.rank, m.record.stream_id};
      if (key != last && sel_.Rank(m.rank)) {
        last = key;
        stream_device_.emplace(key, m.record.device_id);
      }
      return true;
    });
  }

  // The flow id of a correlation id: for kBothEndsKept only when linked.
  uint64_t FlowOf(uint32_t rank, uint32_t correlation_id) const {
    if (correlation_id == 0) return 0;
    const uint64_t key = FlowKey(rank, correlation_id);
    if (options_.flows == FlowLinks::kEveryCorrelation) return key;
    return std::binary_search(linked_.begin(), linked_.end(), key) ? key : 0;
  }

  uint32_t NewTrack(const TrackInfo& info) {
    const uint32_t id = next_track_++;
    out_.OnTrack(id, info);
    return id;
  }
  uint32_t NewNamedTrack(uint32_t rank, const std::string& name, TrackClass cls,
                         trace::TrackRole role = trace::TrackRole::kOther,
                         uint32_t device = UINT32_MAX) {
    // Numbered per rank and class: the class orders the rows of a process.
    const int64_t ordinal = named_ordinals_[std::make_pair(rank, cls)]++;
    TrackInfo info;
    info.pid = rank;
    info.tid = trace::kFirstNamedTid + (static_cast<int64_t>(cls) << 24) + ordinal;
    info.kind = TrackKind::kNamed;
    info.name = name;
    info.sort_index = info.tid;
    info.role = role;
    info.device = device;
    return NewTrack(info);
  }
  uint32_t GpuTrack(uint32_t rank, uint32_t device, uint32_t stream) {
    auto key = std::make_tuple(rank, device, stream);
    auto it = gpu_tracks_.find(key);
    if (it != gpu_tracks_.end()) return it->second;
    std::string name = device == UINT32_MAX
                           ? "GPU stream " + std::to_string(stream)
                           : "GPU " + std::to_string(device) + " stream " + std::to_string(stream);
    const uint32_t id =
        NewNamedTrack(rank, name, TrackClass::kGpu, trace::TrackRole::kGpuStream, device);
    return gpu_tracks_.emplace(key, id).first->second;
  }
  uint32_t NamedTrack(uint32_t rank, const std::string& name, TrackClass cls,
                      trace::TrackRole role = trace::TrackRole::kOther) {
    auto key = std::make_pair(rank, name);
    auto it = named_tracks_.find(key);
    if (it != named_tracks_.end()) return it->second;
    return named_tracks_.emplace(key, NewNamedTrack(rank, name, cls, role)).first->second;
  }
  uint32_t CpuThread(uint32_t rank, uint32_t tid) {
    auto key = std::make_pair(rank, tid);
    auto it = cpu_threads_.find(key);
    if (it != cpu_threads_.end()) return it->second;
    const bool main = rank < ranks_.size() && ranks_[rank].pid == static_cast<int64_t>(tid);
    TrackInfo info;
    info.pid = rank;
    info.tid = tid;
    info.kind = TrackKind::kThread;
    info.name = (main ? "main thread " : "thread ") + std::to_string(tid);
    info.role = trace::TrackRole::kCpuThread;
    return cpu_threads_.emplace(key, NewTrack(info)).first->second;
  }

  void Kernel(const Merged<KernelRecord>& m) {
    const KernelRecord& r = m.record;
    const uint32_t track = GpuTrack(m.rank, r.device_id, r.stream_id);
    const std::string& name = Named(r.name_id);
    args_.U("correlation_id", r.correlation_id);
    args_.U("device", r.device_id);
    args_.U("context", r.context_id);
    args_.U("stream", r.stream_id);
    args_.Dim("grid", r.grid_x, r.grid_y, r.grid_z);
    args_.Dim("block", r.block_x, r.block_y, r.block_z);
    args_.U("registers_per_thread", r.registers_per_thread);
    args_.U("static_shared_bytes", r.static_shared_bytes);
    args_.U("dynamic_shared_bytes", r.dynamic_shared_bytes);
    if (r.graph_id != 0 || r.graph_node_id != 0) {
      args_.U("graph_id", r.graph_id);
      args_.U("graph_node_id", r.graph_node_id);
    }
    Emit(track, SliceShape::kComplete, name.empty() ? "kernel" : name, "kernel", r.start_ns,
         r.end_ns, 0, FlowOf(m.rank, r.correlation_id));
  }

  void Memcpy(const Merged<MemcpyRecord>& m) {
    const MemcpyRecord& r = m.record;
    const uint32_t track = GpuTrack(m.rank, r.device_id, r.stream_id);
    args_.U("bytes", r.bytes);
    args_.U("copy_kind", r.copy_kind);
    args_.U("src_kind", r.src_kind);
    args_.U("dst_kind", r.dst_kind);
    args_.U("src_device", r.src_device_id);
    args_.U("dst_device", r.dst_device_id);
    args_.U("async", r.flags & 1u);
    args_.U("correlation_id", r.correlation_id);
    args_.U("device", r.device_id);
    args_.U("context", r.context_id);
    args_.U("stream", r.stream_id);
    Emit(track, SliceShape::kComplete, MemcpyName(r.copy_kind), "memcpy", r.start_ns, r.end_ns, 0,
         FlowOf(m.rank, r.correlation_id));
  }

  void Memset(const Merged<MemsetRecord>& m) {
    const MemsetRecord& r = m.record;
    const uint32_t track = GpuTrack(m.rank, r.device_id, r.stream_id);
    args_.U("bytes", r.bytes);
    args_.U("value", r.value);
    args_.U("memory_kind", r.memory_kind);
    args_.U("async", r.flags & 1u);
    args_.U("correlation_id", r.correlation_id);
    args_.U("device", r.device_id);
    args_.U("context", r.context_id);
    args_.U("stream", r.stream_id);
    Emit(track, SliceShape::kComplete, "Memset", "memset", r.start_ns, r.end_ns, 0,
         FlowOf(m.rank, r.correlation_id));
  }

  void Sync(const Merged<SyncRecord>& m) {
    const SyncRecord& r = m.record;
    uint32_t track = 0;
    if (r.stream_id == UINT32_MAX) {
      track = NamedTrack(m.rank, "sync", TrackClass::kSync);
    } else {
      auto it = stream_device_.find(std::make_pair(m.rank, r.stream_id));
      track = GpuTrack(m.rank, it != stream_device_.end() ? it->second : UINT32_MAX, r.stream_id);
    }
    args_.U("sync_type", r.sync_type);
    args_.U("event_id", r.event_id);
    if (r.stream_id != UINT32_MAX) args_.U("stream", r.stream_id);
    args_.U("context", r.context_id);
    args_.U("correlation_id", r.correlation_id);
    Emit(track, SliceShape::kComplete, SyncName(r.sync_type), "sync", r.start_ns, r.end_ns);
  }

  void Api(const Merged<ApiRecord>& m) {
    const ApiRecord& r = m.record;
    const uint32_t track = CpuThread(m.rank, r.thread_id);
    const std::string& name = Named(r.name_id);
    const bool driver = r.domain == static_cast<uint8_t>(ApiDomain::kDriver);
    args_.U("correlation_id", r.correlation_id);
    args_.U("callback_id", r.callback_id);
    args_.I("return_value", r.return_value);
    args_.S("domain", driver ? "driver" : "runtime");
    const uint64_t flow = FlowOf(m.rank, r.correlation_id);
    if (flow != 0) ++flows_;
    Emit(track, SliceShape::kComplete, name.empty() ? "cuda api" : name,
         driver ? "cuda_driver" : "cuda_runtime", r.start_ns, r.end_ns, flow);
  }

  // A host stack sample: an instant on its thread's row (beside that thread's
  // CUDA calls and NVTX ranges), named by its innermost frame, the whole stack
  // an argument and, for Perfetto, its callstack (docs/host-sampling.md).
  void HostSample(const Merged<HostSampleRecord>& m) {
    const HostSampleRecord& r = m.record;
    const uint32_t track = CpuThread(m.rank, r.tid);
    const std::string& stack = Str(r.stack_id);
    args_.S("stack", stack);
    args_.S("thread", Str(r.thread_name_id));
    callstack_ = stack;
    Emit(track, SliceShape::kInstant, args_.Keep(InnermostHostFrame(stack)),
         RecordTraits<HostSampleRecord>::kName, r.start_ns, r.start_ns);
  }

  void Nvtx(const Merged<NvtxRecord>& m) {
    const NvtxRecord& r = m.record;
    const uint32_t track = CpuThread(m.rank, r.thread_id);
    const std::string& domain = Str(r.domain_id);
    const std::string& name = Named(r.name_id);
    // Compilation (XLA's compiler, torch.compile) is its own category, never
    // the program's work: a viewer can tell it apart and filter it.
    const std::string framework = CompileFramework(domain, name);
    const std::string_view cat =
        !framework.empty()
            ? args_.Keep("compile:" + framework)
            : args_.Keep("nvtx:" + (domain.empty() ? std::string("default") : domain));
    const std::string_view shown = name.empty() ? std::string_view("nvtx range") : name;
    args_.U("category", r.category);
    // XLA's executions and thunks: their fields as args (docs/jax.md).
    if (auto xla = ParseXlaRange(name)) {
      if (xla->thunk) {
        args_.S("hlo_op", args_.Keep(xla->hlo_op));
        if (!xla->jax_op.empty()) args_.S("jax_op", args_.Keep(xla->jax_op));
      } else {
        args_.S("hlo_module", args_.Keep(xla->module));
        args_.U("program", xla->program ? 1 : 0);
      }
    }
    if (r.color != 0) {
      char color[16];
      std::snprintf(color, sizeof(color), "#%08x", r.color);
      args_.S("color", args_.Keep(color));
    }
    args_.U("depth", r.depth);
    args_.S("domain", domain.empty() ? std::string_view("default") : std::string_view(domain));
    if (r.type == static_cast<uint8_t>(NvtxType::kMark)) {
      Emit(track, SliceShape::kInstant, name.empty() ? "nvtx mark" : shown, cat, r.start_ns,
           r.start_ns);
    } else if (r.type == static_cast<uint8_t>(NvtxType::kStartEnd)) {
      // Start/end ranges may cross threads and overlap: async slices.
      Emit(track, SliceShape::kAsync, shown, cat, r.start_ns, r.end_ns, 0, 0, 0, ++async_ids_);
    } else {
      Emit(track, SliceShape::kComplete, shown, cat, r.start_ns, r.end_ns);
    }
  }

  // Framework operators (aon_op_begin / aon_op_end) on the OS thread's track,
  // beside that thread's CUDA calls and NVTX ranges: an operator encloses the
  // calls it made, and ranges nest per thread, so they show as one call tree.
  void Op(const Merged<OpRecord>& m) {
    const OpRecord& r = m.record;
    const uint32_t track = CpuThread(m.rank, r.thread_id);
    const std::string& name = Named(r.name_id);
    const char* kind = EnumValueName(kOpKindValues, r.kind);
    args_.S("kind", kind != nullptr ? kind : "?");
    args_.U("op_id", r.op_id);
    args_.U("parent_id", r.parent_id);
    args_.I("sequence_nr", r.sequence_nr);
    args_.U("framework_thread", r.framework_thread);
    if (r.forward_thread != 0) args_.U("forward_thread", r.forward_thread);
    Emit(track, SliceShape::kComplete, name.empty() ? std::string_view("op") : name,
         RecordTraits<OpRecord>::kName, r.start_ns, r.end_ns);
  }

  void Nccl(const Merged<NcclRecord>& m) {
    const NcclRecord& r = m.record;
    // One track per communicator for operations (they overlap only across
    // communicators), one per channel for per-channel GPU work.
    char hash_text[24];
    std::snprintf(hash_text, sizeof(hash_text), "0x%016" PRIx64, r.comm_hash);
    const std::string_view hash = args_.Keep(hash_text);
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
    const std::string track_name =
        channel ? "NCCL channel " + std::to_string(r.channel_id)
                : "NCCL comm " + std::string(hash.substr(14));  // last 4 hex digits
    const uint32_t track =
        NamedTrack(m.rank, track_name, TrackClass::kNccl,
                   channel ? trace::TrackRole::kOther : trace::TrackRole::kCommunicator);
    const std::string& func = Str(r.func_id);
    const std::string_view name =
        args_.Keep(comm ? "communicator " + (func.empty() ? std::string(hash) : func)
                        : (func.empty() ? std::string("NCCL") : func));
    args_.S("comm_hash", hash);
    args_.S("event_type", NcclTypeName(r.event_type));
    if (comm) {
      args_.I("comm_rank", r.comm_rank);
      args_.I("comm_nranks", r.comm_nranks);
      args_.I("comm_nnodes", r.comm_nnodes);
      Emit(track, SliceShape::kComplete, name, "nccl", r.start_ns, r.end_ns);
      return;
    }
    args_.U("seq_number", r.seq_number);
    args_.S("func", func);
    if (channel) {
      args_.I("channel_id", r.channel_id);
      Emit(track, SliceShape::kComplete, name, "nccl", r.start_ns, r.end_ns);
      return;
    }
    args_.U("count", r.count);
    args_.U("bytes", r.bytes);
    args_.S("algo", Str(r.algo_id));
    args_.S("proto", Str(r.proto_id));
    args_.S("datatype", Str(r.datatype_id));
    args_.I("root", r.root);
    args_.I("peer", r.peer);
    args_.U("n_channels", r.n_channels);
    args_.U("n_warps", r.n_warps);
    args_.U("stream", r.stream_id);
    args_.U("correlation_id", r.correlation_id);
    args_.U("gpu_timing", r.gpu_timing);
    if (r.graph_replay != 0) args_.U("graph_replay", r.graph_replay);
    // When the GPU started it, relative to the host call: the rank's wait to get going.
    if (r.gpu_start_ns != 0) {
      args_.I("gpu_start_after_call_ns",
              static_cast<int64_t>(r.gpu_start_ns) - static_cast<int64_t>(r.start_ns));
    }
    const bool collective = r.event_type == static_cast<uint8_t>(NcclEventType::kColl);
    const uint64_t chain = options_.collective_flows && collective && r.comm_hash != 0
                               ? CollectiveFlowId(r.comm_hash, r.seq_number)
                               : 0;
    trace::Collective coll;
    if (collective && r.comm_hash != 0) {
      coll = trace::Collective{r.comm_hash, func, r.root, r.bytes, r.comm_rank};
      collective_ = &coll;
    }
    Emit(track, SliceShape::kComplete, name, "nccl", r.start_ns, r.end_ns, 0, 0, chain);
    collective_ = nullptr;
  }

  // The user's NCCL calls: one "NCCL API" track per rank (a group encloses its
  // calls, so they nest as slices).
  void NcclApiCall(const Merged<NcclRecord>& m, std::string_view hash) {
    const NcclRecord& r = m.record;
    const uint32_t track = NamedTrack(m.rank, "NCCL API", TrackClass::kNcclApi);
    const bool group = r.event_type == static_cast<uint8_t>(NcclEventType::kGroupApi);
    const std::string& func = Str(r.func_id);
    const std::string_view name = args_.Keep(
        group ? std::string("ncclGroup") : "nccl" + (func.empty() ? std::string("?") : func));
    args_.S("comm_hash", hash);
    args_.S("event_type", NcclTypeName(r.event_type));
    args_.U("graph_captured", (r.n_warps & kNcclApiGraphCaptured) ? 1 : 0);
    if (group) {
      args_.U("group_depth", r.count);
    } else {
      args_.S("func", func);
      args_.U("count", r.count);
      args_.U("bytes", r.bytes);
      args_.S("datatype", Str(r.datatype_id));
      if (r.root >= 0) args_.I("root", r.root);
    }
    Emit(track, SliceShape::kComplete, name, "nccl", r.start_ns, r.end_ns);
  }

  // Network proxy progress: one track per rank and channel.
  void NcclProxy(const Merged<NcclRecord>& m, std::string_view hash) {
    const NcclRecord& r = m.record;
    const bool step = r.event_type == static_cast<uint8_t>(NcclEventType::kProxyStep);
    const uint32_t track = NamedTrack(m.rank, "NCCL proxy channel " + std::to_string(r.channel_id),
                                      TrackClass::kNcclProxy);
    const bool send = (r.n_warps & kNcclProxySend) != 0;
    const std::string& func = Str(r.func_id);
    const std::string_view name =
        args_.Keep(std::string(send ? "send" : "recv") + (step ? " step " : " ") +
                   (step ? std::to_string(r.count) : (func.empty() ? "proxy" : func)));
    args_.S("comm_hash", hash);
    args_.S("event_type", NcclTypeName(r.event_type));
    args_.U("seq_number", r.seq_number);
    args_.S("func", func);
    args_.I("channel_id", r.channel_id);
    args_.I("peer", r.peer);
    args_.S("direction", send ? "send" : "recv");
    args_.U(step ? "step" : "steps", r.count);
    args_.U(step ? "bytes" : "step_bytes", r.bytes);
    Emit(track, SliceShape::kComplete, name, "nccl", r.start_ns, r.end_ns);
  }

  const TraceReader& reader_;
  const TimelineView& timeline_;
  const Selection& sel_;
  const TraceBuildOptions& options_;
  trace::TraceSink& out_;
  std::vector<RankSummary> ranks_;  // indexed by rank
  ArgList args_;
  uint64_t records_ = 0;
  std::vector<uint64_t> linked_;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> gpu_tracks_;
  std::map<std::pair<uint32_t, std::string>, uint32_t> named_tracks_;
  std::map<std::pair<uint32_t, std::string>, uint32_t> counter_tracks_;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> cpu_threads_;
  std::map<std::pair<uint32_t, TrackClass>, int64_t> named_ordinals_;
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> stream_device_;
  uint32_t next_track_ = 0;
  uint64_t async_ids_ = 0;
  uint64_t flows_ = 0;
  const trace::Collective* collective_ = nullptr;  // of the slice being emitted
  std::string_view callstack_;                     // of the slice being emitted
  uint32_t name_id_ = 0;                           // its name's string id (Named)
};

template <typename T>
void TableCursor<T>::Emit(Builder& builder) {
  builder.Export(current());
}

}  // namespace

StatusOr<TimelineView> TimelineView::Read(const TraceReader& reader, const std::string& path) {
  if (reader.kind() != FileKind::kTimeline) {
    return InvalidArgument("'" + path + "' is a rank trace, not a merged timeline");
  }
  TimelineView view;
  AON_ASSIGN_OR_RETURN(view.strings, reader.ReadStrings());
  AON_ASSIGN_OR_RETURN(int64_t t0, reader.GetMetaInt("start_ns"));
  view.t0 = static_cast<uint64_t>(t0);
  AON_ASSIGN_OR_RETURN(view.ranks, reader.ReadAllOf<RankSummary>(RankSummarySchema(), "meta"));
  view.synthetic = SyntheticRanks(reader);
  return view;
}

std::string TimelineView::ProcessName(const RankSummary& row) const {
  std::string name = "rank " + std::to_string(row.rank);
  if (!strings.Get(row.host_id).empty()) name += " @ " + strings.Get(row.host_id);
  if (synthetic.count(row.rank) > 0) name += " [SYNTHETIC]";
  return name;
}

Status BuildTraceEvents(const TraceReader& reader, const TimelineView& timeline,
                        const TraceBuildOptions& options, trace::TraceSink* sink,
                        TraceBuildStats* stats) {
  size_t world = 0;
  for (const RankSummary& row : timeline.ranks) world = std::max<size_t>(world, row.rank + 1);
  const Selection sel(options.filter, timeline.t0, world);
  Builder builder(reader, timeline, sel, options, sink);
  return builder.Run(stats);
}

std::span<const std::string_view> HandledFieldNames(RecordKind kind) {
  std::span<const std::string_view> out;
  ForEachRecordType([&](auto record) {
    using T = decltype(record);
    if (TableTraits<T>::kKind == kind) out = HandledFields<T>();
  });
  return out;
}

}  // namespace aon::merge
