// Timeline -> overview.json (overview.h): fixed-width bins per rank, read with
// a few columns at a time; memory and output are O(ranks x bins). The bins and
// ranges become trace events (trace_events.h) written by the JSON trace writer.
#include "aon/export/overview.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "aon/format/framework_ranges.h"
#include "aon/format/records.h"
#include "aon/format/string_table.h"
#include "aon/format/trace_file.h"
#include "aon/format/trace_format.h"
#include "json_trace_writer.h"
#include "output_file.h"
#include "timeline_meta.h"

namespace aon::merge {
namespace {

constexpr uint64_t kChunkRecords = 1 << 16;

// What the counters need of a record.
struct Span {
  uint32_t rank;
  uint8_t event_type;  // NCCL only
  uint64_t start_ns;
  uint64_t end_ns;
};

// Rows [first, first + out->size()) of T's table as spans. Whole rows are read
// and the spans taken from them: a table read in its own layout goes through
// the direct chunk path (libdeflate, on the reader's threads), where reading
// only these columns made HDF5 inflate (zlib) and convert every chunk itself,
// about a third of the overview's time.
template <typename T>
Status ReadSpans(const TraceReader& reader, uint64_t first, std::vector<Span>* out) {
  std::vector<Merged<T>> rows(out->size());
  AON_RETURN_IF_ERROR(reader.ReadTable(MergedSchemaOf<T>(), first, rows.size(), rows.data()));
  for (size_t i = 0; i < rows.size(); ++i) {
    const Merged<T>& m = rows[i];
    Span& s = (*out)[i];
    s = Span{};
    s.rank = m.rank;
    s.start_ns = m.record.start_ns;
    s.end_ns = m.record.end_ns;
    if constexpr (std::is_same_v<T, NcclRecord>) s.event_type = m.record.event_type;
  }
  return Status::Ok();
}

// Reads one table's spans in order (the timeline sorts each table by start).
class SpanCursor {
 public:
  template <typename T>
  static SpanCursor Of(const TraceReader& reader) {
    return SpanCursor(reader, MergedSchemaOf<T>(), &ReadSpans<T>);
  }

  Status Open() {
    AON_ASSIGN_OR_RETURN(n_, reader_.TableSize(schema_));
    return Fill();
  }
  bool done() const { return next_ >= n_; }
  const Span& peek() const { return chunk_[next_ - first_]; }
  Status Advance() {
    ++next_;
    return Fill();
  }

 private:
  using Read = Status (*)(const TraceReader&, uint64_t, std::vector<Span>*);
  SpanCursor(const TraceReader& reader, const TableSchema& schema, Read read)
      : reader_(reader), schema_(schema), read_(read) {}
  Status Fill() {
    if (next_ < n_ && next_ >= first_ + chunk_.size()) {
      first_ = next_;
      chunk_.resize(static_cast<size_t>(std::min(kChunkRecords, n_ - first_)));
      AON_RETURN_IF_ERROR(read_(reader_, first_, &chunk_));
    }
    return Status::Ok();
  }

  const TraceReader& reader_;
  const TableSchema& schema_;
  Read read_;
  uint64_t n_ = 0, first_ = 0, next_ = 0;
  std::vector<Span> chunk_;
};

// Union of intervals per rank, added bin by bin into busy[rank * bins + bin].
// Intervals must arrive in start order per rank.
class BusyUnion {
 public:
  BusyUnion(uint64_t t0, uint64_t width, uint32_t bins, size_t ranks)
      : t0_(t0), width_(width), bins_(bins), busy_(ranks * bins, 0), open_(ranks) {}

  void Add(size_t rank, uint64_t start, uint64_t end) {
    end = std::max(start, end);
    Interval& cur = open_[rank];
    if (cur.valid && start <= cur.end) {
      cur.end = std::max(cur.end, end);
      return;
    }
    if (cur.valid) Flush(rank, cur);
    cur = Interval{true, start, end};
  }
  void Finish() {
    for (size_t r = 0; r < open_.size(); ++r) {
      if (open_[r].valid) Flush(r, open_[r]);
      open_[r].valid = false;
    }
  }
  uint64_t busy(size_t rank, uint32_t bin) const { return busy_[rank * bins_ + bin]; }

 private:
  struct Interval {
    bool valid = false;
    uint64_t start = 0, end = 0;
  };
  void Flush(size_t rank, const Interval& iv) {
    // Clamp to the run; the last bin may reach past its end.
    const uint64_t limit = t0_ + width_ * bins_;
    const uint64_t a = std::max(iv.start, t0_), b = std::min(iv.end, limit);
    if (a >= b) return;
    for (uint64_t bin = (a - t0_) / width_; bin < bins_; ++bin) {
      const uint64_t lo = t0_ + bin * width_, hi = lo + width_;
      if (lo >= b) break;
      busy_[rank * bins_ + bin] += std::min(b, hi) - std::max(a, lo);
    }
  }

  uint64_t t0_, width_;
  uint32_t bins_;
  std::vector<uint64_t> busy_;
  std::vector<Interval> open_;
};

// The smallest 1, 2 or 5 x 10^k that is >= v (v >= 1).
uint64_t NiceCeil(uint64_t v) {
  for (uint64_t p = 1;; p *= 10) {
    for (uint64_t m : {1, 2, 5}) {
      if (m * p >= v) return m * p;
    }
    if (p > UINT64_MAX / 100) return v;
  }
}

struct NvtxKept {
  uint64_t duration;
  NvtxRecord record;
};
bool LongerFirst(const NvtxKept& a, const NvtxKept& b) { return a.duration > b.duration; }

// A counter's value in the bin: a fraction with 4 significant digits, or a
// count. Equal values (as written) make no new sample.
struct CounterValue {
  double fraction = 0;
  uint64_t count = 0;
  bool is_count = false;
  bool operator==(const CounterValue&) const = default;
  std::variant<double, uint64_t> value() const {
    if (is_count) return count;
    return fraction;
  }
};

// The fraction as it will be written ("%.4g"), so that two bins compare equal
// exactly when their text would.
CounterValue Fraction(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4g", v);
  return CounterValue{std::strtod(text, nullptr), 0, false};
}
CounterValue Count(uint64_t n) { return CounterValue{0, n, true}; }

// The run's span, its merged ranks densely numbered and the bins they are
// counted in.
struct Frame {
  uint64_t t0 = 0, t_end = 0;
  std::vector<const RankSummary*> ok;
  std::vector<int64_t> dense;
  uint64_t width = 0;
  uint32_t bins = 0;
  size_t nranks = 0;
  int64_t index(uint32_t rank) const { return rank < dense.size() ? dense[rank] : -1; }
};

// Stage: the run's span and its merged ranks, from the timeline's meta.
Frame NumberRanks(const std::vector<RankSummary>& rows, int64_t start_meta, int64_t end_meta) {
  Frame f;
  f.t0 = static_cast<uint64_t>(start_meta);
  f.t_end = std::max(f.t0, static_cast<uint64_t>(end_meta));

  // Ranks that were merged, densely numbered.
  uint32_t max_rank = 0;
  for (const RankSummary& row : rows) {
    if (!RankMerged(static_cast<RankStatus>(row.status))) continue;
    f.ok.push_back(&row);
    max_rank = std::max(max_rank, row.rank);
  }
  f.dense.assign(f.ok.empty() ? 0 : size_t{max_rank} + 1, -1);
  for (size_t i = 0; i < f.ok.size(); ++i) f.dense[f.ok[i]->rank] = static_cast<int64_t>(i);
  return f;
}

// Stage: the bins' width and count, within the options' limits.
void ChooseBins(const OverviewOptions& options, Frame* f) {
  // Bins.
  uint64_t max_bins = std::max<uint32_t>(1, options.max_bins);
  if (!f->ok.empty() && f->ok.size() * max_bins > options.max_total_bins) {
    max_bins =
        std::max<uint64_t>(std::max<uint32_t>(1, std::min(options.min_bins, options.max_bins)),
                           options.max_total_bins / f->ok.size());
  }
  const uint64_t span = f->t_end - f->t0;
  f->width = NiceCeil(std::max<uint64_t>(1, (span + max_bins - 1) / max_bins));
  f->bins = static_cast<uint32_t>(std::max<uint64_t>(1, (span + f->width - 1) / f->width));
  f->nranks = f->ok.size();
}

// Stage: GPU busy and kernels per bin, from the kernel, memcpy and memset tables.
Status CountGpu(const TraceReader& reader, const Frame& f, BusyUnion* gpu,
                std::vector<uint64_t>* kernels) {
  SpanCursor cursors[] = {SpanCursor::Of<KernelRecord>(reader),
                          SpanCursor::Of<MemcpyRecord>(reader),
                          SpanCursor::Of<MemsetRecord>(reader)};
  for (SpanCursor& c : cursors) AON_RETURN_IF_ERROR(c.Open());
  for (;;) {
    SpanCursor* next = nullptr;
    for (SpanCursor& c : cursors) {
      if (!c.done() && (next == nullptr || c.peek().start_ns < next->peek().start_ns)) next = &c;
    }
    if (next == nullptr) break;
    const Span& s = next->peek();
    if (const int64_t r = f.index(s.rank); r >= 0) {
      gpu->Add(static_cast<size_t>(r), s.start_ns, s.end_ns);
      if (next == &cursors[0] && s.start_ns >= f.t0) {
        const uint64_t bin = std::min<uint64_t>((s.start_ns - f.t0) / f.width, f.bins - 1);
        ++(*kernels)[static_cast<size_t>(r) * f.bins + bin];
      }
    }
    AON_RETURN_IF_ERROR(next->Advance());
  }
  gpu->Finish();
  return Status::Ok();
}

// Stage: NCCL busy per bin, from the NCCL table.
Status CountNccl(const TraceReader& reader, const Frame& f, BusyUnion* nccl) {
  SpanCursor c = SpanCursor::Of<NcclRecord>(reader);
  AON_RETURN_IF_ERROR(c.Open());
  while (!c.done()) {
    const Span& s = c.peek();
    const bool op = s.event_type == static_cast<uint8_t>(NcclEventType::kColl) ||
                    s.event_type == static_cast<uint8_t>(NcclEventType::kP2p);
    if (const int64_t r = f.index(s.rank); op && r >= 0) {
      nccl->Add(static_cast<size_t>(r), s.start_ns, s.end_ns);
    }
    AON_RETURN_IF_ERROR(c.Advance());
  }
  nccl->Finish();
  return Status::Ok();
}

// Stage: the longest NVTX top-level ranges per rank, from the NVTX table.
Status KeepLongestNvtx(const TraceReader& reader, const Frame& f,
                       std::vector<std::vector<NvtxKept>>* nvtx, uint64_t* nvtx_omitted) {
  const size_t nvtx_cap = size_t{2} * f.bins;
  const TableSchema& schema = MergedSchemaOf<NvtxRecord>();
  AON_ASSIGN_OR_RETURN(uint64_t n, reader.TableSize(schema));
  std::vector<Merged<NvtxRecord>> chunk(static_cast<size_t>(std::min(n, kChunkRecords)));
  for (uint64_t first = 0; first < n; first += kChunkRecords) {
    const uint64_t count = std::min(kChunkRecords, n - first);
    AON_RETURN_IF_ERROR(reader.ReadTable(schema, first, count, chunk.data()));
    for (uint64_t i = 0; i < count; ++i) {
      const NvtxRecord& r = chunk[i].record;
      const int64_t rank = f.index(chunk[i].rank);
      if (rank < 0 || r.depth != 0 || r.type == static_cast<uint8_t>(NvtxType::kMark) ||
          r.end_ns <= r.start_ns || r.end_ns - r.start_ns <= f.width) {
        continue;
      }
      std::vector<NvtxKept>& heap = (*nvtx)[static_cast<size_t>(rank)];
      NvtxKept kept{r.end_ns - r.start_ns, r};
      if (heap.size() < nvtx_cap) {
        heap.push_back(kept);
        std::push_heap(heap.begin(), heap.end(), LongerFirst);
        continue;
      }
      ++*nvtx_omitted;
      if (kept.duration > heap.front().duration) {
        std::pop_heap(heap.begin(), heap.end(), LongerFirst);
        heap.back() = kept;
        std::push_heap(heap.begin(), heap.end(), LongerFirst);
      }
    }
  }
  return Status::Ok();
}

// The ids handed out so far across the ranks, and the NVTX ranges written.
struct WriteCounts {
  uint64_t nvtx_written = 0, async_id = 0;
  uint32_t next_track = 0;
};

// Stage: a rank's counter tracks (GPU busy, NCCL busy, kernels per bin).
void WriteCounters(JsonTraceWriter& out, const Frame& f, size_t r, const BusyUnion& gpu,
                   const BusyUnion& nccl, const std::vector<uint64_t>& kernels,
                   uint32_t* next_track) {
  const RankSummary& row = *f.ok[r];
  const uint64_t t0 = f.t0, width = f.width;
  const uint32_t bins = f.bins;
  // Counters: a sample per change, 0 at the end of the run.
  auto counter = [&](std::string_view track, std::string_view series, CounterValue zero,
                     auto value_of) {
    trace::TrackInfo info;
    info.pid = row.rank;
    info.kind = trace::TrackKind::kCounter;
    info.name = track;
    info.series = series;
    const uint32_t id = (*next_track)++;
    out.OnTrack(id, info);
    std::optional<CounterValue> last;
    for (uint32_t b = 0; b <= bins; ++b) {
      const CounterValue v = b < bins ? value_of(b) : zero;
      if (v == last) continue;
      out.OnCounter(trace::CounterSample{id, t0 + uint64_t{b} * width, v.value()});
      last = v;
    }
  };
  const double w = static_cast<double>(width);
  counter("GPU busy", "fraction", Fraction(0),
          [&](uint32_t b) { return Fraction(static_cast<double>(gpu.busy(r, b)) / w); });
  counter("NCCL busy", "fraction", Fraction(0),
          [&](uint32_t b) { return Fraction(static_cast<double>(nccl.busy(r, b)) / w); });
  counter("kernels", "per bin", Count(0), [&](uint32_t b) { return Count(kernels[r * bins + b]); });
}

// Stage: a rank's kept NVTX ranges, as slices on their threads' tracks.
void WriteNvtxRanges(JsonTraceWriter& out, const StringTable& strings, const RankSummary& row,
                     std::vector<NvtxKept>& kept, WriteCounts* ids) {
  // NVTX ranges, in time order, on their threads.
  std::sort(kept.begin(), kept.end(), [](const NvtxKept& a, const NvtxKept& b) {
    return a.record.start_ns != b.record.start_ns ? a.record.start_ns < b.record.start_ns
                                                  : a.duration > b.duration;
  });
  std::map<uint32_t, uint32_t> threads;  // OS thread id -> track id
  for (const NvtxKept& k : kept) {
    const NvtxRecord& n = k.record;
    auto thread = threads.find(n.thread_id);
    if (thread == threads.end()) {
      const bool main = row.pid == static_cast<int64_t>(n.thread_id);
      trace::TrackInfo info;
      info.pid = row.rank;
      info.tid = n.thread_id;
      info.kind = trace::TrackKind::kThread;
      info.name = (main ? "main thread " : "thread ") + std::to_string(n.thread_id);
      thread = threads.emplace(n.thread_id, ids->next_track++).first;
      out.OnTrack(thread->second, info);
    }
    const std::string& domain = strings.Get(n.domain_id);
    const std::string& label = strings.Get(n.name_id);
    const std::string framework = CompileFramework(domain, label);  // as the full trace
    const std::string cat = !framework.empty()
                                ? "compile:" + framework
                                : "nvtx:" + (domain.empty() ? std::string("default") : domain);
    trace::Slice slice;
    slice.track = thread->second;
    slice.name = label.empty() ? std::string_view("nvtx range") : label;
    slice.category = cat;
    slice.start_ns = n.start_ns;
    slice.end_ns = n.end_ns;
    if (n.type == static_cast<uint8_t>(NvtxType::kStartEnd)) {
      slice.shape = trace::SliceShape::kAsync;
      slice.async_id = ++ids->async_id;
    }
    out.OnSlice(slice);
    ++ids->nvtx_written;
  }
}

// Stage: the overview's metadata: its source, its bins and what it holds.
TraceMetadata OverviewMetadata(const TraceReader& reader, const std::string& timeline_path,
                               const Frame& f, uint64_t nvtx_written, uint64_t nvtx_omitted) {
  TraceMetadata meta;
  auto add = [&](const char* key, JsonTraceWriter::MetaValue value) {
    meta.emplace_back(key, std::move(value));
  };
  add("generator", "aon-merge");
  add("kind", "overview");
  add("timeline", timeline_path);
  add("job_id", MetaStringOr(reader, "job_id"));
  add("source", MetaStringOr(reader, "source"));
  add("start_ns", std::to_string(f.t0));
  add("end_ns", std::to_string(f.t_end));
  add("bin_ns", f.width);
  add("bins", uint64_t{f.bins});
  add("ranks", uint64_t{f.nranks});
  add("nvtx_ranges", nvtx_written);
  add("nvtx_ranges_omitted", nvtx_omitted);
  add("time_origin", "ts 0 = start_ns on the timeline clock; ts and dur in microseconds");
  add("counters",
      "GPU busy: fraction of the bin during which any kernel, memcpy or memset of the rank ran; "
      "NCCL busy: the same for NCCL collective and p2p operations; kernels: kernels started in "
      "the bin");
  return meta;
}

}  // namespace

Status WriteOverview(const std::string& timeline_path, const std::string& json_path,
                     const OverviewOptions& options, OverviewStats* stats) {
  if (stats != nullptr) *stats = OverviewStats{};
  AON_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(timeline_path));
  if (reader->kind() != FileKind::kTimeline) {
    return InvalidArgument("'" + timeline_path + "' is a rank trace, not a merged timeline");
  }
  AON_ASSIGN_OR_RETURN(StringTable strings, reader->ReadStrings());
  AON_ASSIGN_OR_RETURN(int64_t start_meta, reader->GetMetaInt("start_ns"));
  AON_ASSIGN_OR_RETURN(int64_t end_meta, reader->GetMetaInt("end_ns"));
  AON_ASSIGN_OR_RETURN(std::vector<RankSummary> rows,
                       reader->ReadAllOf<RankSummary>(RankSummarySchema(), "meta"));
  Frame f = NumberRanks(rows, start_meta, end_meta);
  const std::set<uint32_t> synthetic = SyntheticRanks(*reader);
  ChooseBins(options, &f);

  // GPU busy (kernels, memcpy, memset merged in start order) and kernels per bin.
  BusyUnion gpu(f.t0, f.width, f.bins, f.nranks);
  std::vector<uint64_t> kernels(f.nranks * f.bins, 0);
  AON_RETURN_IF_ERROR(CountGpu(*reader, f, &gpu, &kernels));
  // NCCL busy: operations only (channels are parts of them, comms span the job).
  BusyUnion nccl(f.t0, f.width, f.bins, f.nranks);
  AON_RETURN_IF_ERROR(CountNccl(*reader, f, &nccl));
  // NVTX top-level ranges longer than a bin: the longest 2 x bins per rank.
  std::vector<std::vector<NvtxKept>> nvtx(f.nranks);
  uint64_t nvtx_omitted = 0;
  AON_RETURN_IF_ERROR(KeepLongestNvtx(*reader, f, &nvtx, &nvtx_omitted));

  AON_ASSIGN_OR_RETURN(auto file, AtomicTextFile::Create(json_path));
  JsonTraceWriter out(file.get(), f.t0);
  WriteCounts ids;
  for (size_t r = 0; r < f.nranks; ++r) {
    const RankSummary& row = *f.ok[r];
    std::string name = "rank " + std::to_string(row.rank);
    if (!strings.Get(row.host_id).empty()) name += " @ " + strings.Get(row.host_id);
    if (synthetic.count(row.rank) > 0) name += " [SYNTHETIC]";
    out.OnProcess(trace::ProcessInfo{row.rank, name, row.rank, strings.Get(row.host_id)});
    WriteCounters(out, f, r, gpu, nccl, kernels, &ids.next_track);
    WriteNvtxRanges(out, strings, row, nvtx[r], &ids);
  }

  out.Finish(OverviewMetadata(*reader, timeline_path, f, ids.nvtx_written, nvtx_omitted));
  if (stats != nullptr) {
    stats->bin_ns = f.width;
    stats->bins = f.bins;
    stats->ranks = static_cast<uint32_t>(f.nranks);
    stats->events = out.events();
    stats->nvtx_ranges = ids.nvtx_written;
    stats->nvtx_ranges_omitted = nvtx_omitted;
  }
  return file->Commit();
}

}  // namespace aon::merge
