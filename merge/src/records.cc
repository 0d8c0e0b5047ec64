#include "records.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <utility>

#include "aon/base/thread_cpu.h"
#include "aon/merge/nccl_resolve.h"
#include "exchange.h"
#include "phase_clock.h"
#include "progress.h"
#include "record_ops.h"
#include "sample_sort.h"

namespace aon::merge {
namespace {

// Samples of start times the slab boundaries are cut from, over all processes.
constexpr uint64_t kMaxSamples = uint64_t{1} << 18;
// Records per read in the first pass and per re-read.
constexpr uint64_t kBlockRecords = 65536;

struct Block {
  uint64_t first = 0;
  uint64_t count = 0;
  uint64_t min_start = 0;
  uint64_t max_start = 0;
};

// Memory for the kept records: not zero-filled (the reader writes every field
// of a row; members outside a kind's schema, its explicit padding, are left as
// they are), and mapped with transparent huge pages where the kernel allows
// them, so that filling 100 MB costs 50 page faults instead of 25,000 (on a
// virtual machine each fault is several microseconds).
class KeptMemory {
 public:
  KeptMemory() = default;
  KeptMemory(const KeptMemory&) = delete;
  KeptMemory& operator=(const KeptMemory&) = delete;
  ~KeptMemory() { Release(); }

  // At least `bytes` bytes (the contents are not kept when it grows); nullptr
  // when the memory cannot be mapped.
  std::byte* Get(size_t bytes) {
    if (bytes <= size_) return base_;
    Release();
    constexpr size_t kHugePage = size_t{2} << 20;
    const size_t size = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    madvise(p, size, MADV_HUGEPAGE);  // advice: without it, ordinary pages
    base_ = static_cast<std::byte*>(p);
    size_ = size;
    return base_;
  }

 private:
  void Release() {
    if (base_ != nullptr) munmap(base_, size_);
    base_ = nullptr;
    size_ = 0;
  }
  std::byte* base_ = nullptr;
  size_t size_ = 0;
};

// What one process brings to the record merge.
struct KindContext {
  MergeComm& comm;
  std::vector<RankInput>& inputs;  // this process's ranks, in rank order
  TraceWriter& out;                // its shard, or the timeline itself (one process)
  uint64_t budget_bytes;
  size_t batch_records;
  Progress& progress;
  MergePhaseTimes* phases;
  unsigned threads = 1;       // decoding rank files; above 1, also merging beside appending
  HelperThreads* helpers;     // threads - 1 of them, for every rank file's reads (or none)
  uint64_t done_records = 0;  // progress: 2 x records of the kinds finished (global)
  RecordsMerged merged;
  // The kept records of the kind being merged, every rank's in one buffer that
  // the next kind reuses (at most the budget's worth).
  KeptMemory& kept_memory;
};

Status Reopen(RankInput& in, unsigned decode_threads, HelperThreads* helpers) {
  if (in.reader != nullptr) return Status::Ok();
  AON_ASSIGN_OR_RETURN(in.reader, TraceReader::Open(in.file->path));
  in.reader->SetDecodeThreads(decode_threads, helpers);
  return Status::Ok();
}

// Closes a rank's reader when the scope that read it ends.
struct CloseWhenDone {
  RankInput& in;
  ~CloseWhenDone() { in.reader.reset(); }
};

// One whole table of a rank (empty when the file has none).
template <typename T>
StatusOr<std::vector<T>> ReadRankTable(const RankInput& in) {
  if (!in.file->found.has_table[static_cast<size_t>(RecordTraits<T>::kKind)]) {
    return std::vector<T>();
  }
  return in.reader->template ReadAll<T>();
}

// Ties the rank's NCCL operations to their kernels and converts raw channel
// times (nccl_resolve.h), on the rank's own clock, before any clock correction.
// Records of files already resolved by their agent are left as they are. The
// calibration goes into the rank's metadata, as the agent used to write it.
void ResolveRankNccl(RankInput& in, std::vector<NcclRecord>& nccl) {
  const std::string& path = in.file->path;
  auto graph = ReadRankTable<NcclGraphRecord>(in);
  if (!graph.ok()) {
    in.problems.push_back(path + ": NCCL CUDA-graph rows unreadable: " + graph.status().message());
    graph = std::vector<NcclGraphRecord>();
  }
  if (!NcclRecordsNeedResolution(nccl, *graph)) return;
  auto ext = ReadRankTable<ExternalCorrelationRecord>(in);
  // The kernels and API calls gathered while those kinds were read (a table the
  // file lacks is gathered: empty), or else all of them, read again.
  const auto& has = in.file->found.has_table;
  const bool gathered =
      in.nccl_ids.has_value() &&
      (in.nccl_kernels_gathered || !has[static_cast<size_t>(RecordKind::kKernel)]) &&
      (in.nccl_apis_gathered || !has[static_cast<size_t>(RecordKind::kApi)]);
  StatusOr<std::vector<KernelRecord>> kernels = std::move(in.nccl_kernels);
  StatusOr<std::vector<ApiRecord>> apis = std::move(in.nccl_apis);
  if (!gathered) {
    kernels = ReadRankTable<KernelRecord>(in);
    apis = ReadRankTable<ApiRecord>(in);
  }
  const Status st = !ext.ok() ? ext.status() : !kernels.ok() ? kernels.status() : apis.status();
  if (!st.ok()) {
    in.problems.push_back(path + ": NCCL records not tied to their kernels: " + st.message());
    return;
  }
  RankMetadata& m = in.file->found.meta;
  const NcclResolveResult r = ResolveNcclRecords(nccl, *graph, *ext, *kernels, *apis,
                                                 {m.anchor_clock_ns, m.anchor_realtime_ns});
  if (r.raw_converted > 0) {
    m.nccl_gpu_clock_offset_ns = r.calibration.offset_ns;
    m.nccl_gpu_clock_pairs = r.calibration.pairs;
    m.nccl_gpu_clock_spread_ns = r.calibration.spread_ns;
  }
  if (!r.note.empty()) {
    m.notes.push_back(r.note);
    in.problems.push_back(path + ": " + r.note);
  }
}

// Before a rank's kernels are read: whether its NCCL records will need
// resolving by correlation id only (NcclReferencedRecords), and by which ids.
// A table that cannot be read here leaves nothing planned: the NCCL kind then
// reads everything and reports it.
void PlanNcclGathering(RankInput& in) {
  in.nccl_ids.reset();
  if (!in.file->found.has_table[static_cast<size_t>(RecordKind::kNccl)]) return;
  auto nccl = ReadRankTable<NcclRecord>(in);
  auto graph = ReadRankTable<NcclGraphRecord>(in);
  auto ext = ReadRankTable<ExternalCorrelationRecord>(in);
  if (!nccl.ok() || !graph.ok() || !ext.ok() || !NcclRecordsNeedResolution(*nccl, *graph)) return;
  in.nccl_ids = NcclReferencedRecords(*nccl, *graph, *ext);
}

// A rank whose file cannot be reopened: this kind and the later ones are not
// in the timeline.
void FailRank(RankInput& in, RecordKind kind, const std::string& what) {
  in.failed = true;
  in.outcome->status = RankStatus::kCorrupt;
  in.outcome->message =
      what + " (its " + RecordKindName(kind) + " and later kinds are not in the timeline)";
  in.problems.push_back(in.outcome->message);
}

// A table of the rank that could not be read to its end (a chunk that fails
// its checksum or does not decode): what was read before it is merged, the
// rest of the kind is counted as damaged once the kind is done, and the
// rank's other kinds are merged as usual. The rank's status says so.
void DamageTable(RankInput& in, RecordKind kind, const std::string& what) {
  const size_t k = static_cast<size_t>(kind);
  if (in.damaged_kind[k]) return;
  in.damaged_kind[k] = true;
  RankOutcome& o = *in.outcome;
  const std::string said = what + " (the rest of its " + std::string(RecordKindName(kind)) +
                           " records is not in the timeline)";
  if (o.status == RankStatus::kOk) o.status = RankStatus::kDamaged;
  o.message += (o.message.empty() ? "" : "; ") + said;
  in.problems.push_back(said);
}

// A rank's records with unified string ids and on the reference clock. Returns
// how many string ids were out of range (a corrupt file): those become 0, the
// empty string. Reads `in` only: runs on the reader's decoding threads.
template <typename T>
uint64_t PrepareRecords(const RankInput& in, std::span<T> records) {
  uint64_t bad = 0;
  const uint32_t* map = in.string_map.data();
  const size_t map_size = in.string_map.size();
  for (T& r : records) {
    ForEachStringId(r, [&](uint32_t& id) {
      if (id < map_size) {
        id = map[id];
      } else {
        id = 0;
        ++bad;
      }
    });
    ShiftRecordClock(r, in.clock);
  }
  return bad;
}

template <typename T>
bool StartsBefore(const T& a, const T& b) {
  return StartOf(a) < StartOf(b);
}

// One rank's records of a round, in their order: by start, and in file order
// among equal starts. They lie `stride` bytes apart: a rank's own table (T) or
// records received from another process (Merged<T>).
template <typename T>
struct Run {
  const std::byte* first = nullptr;
  size_t stride = 0;
  size_t n = 0;
  uint32_t rank = 0;
  const T& operator[](size_t x) const { return *reinterpret_cast<const T*>(first + x * stride); }
};

// The k-way merge of a round's runs: by start, then rank, then the order in
// the rank's file. Every run is sorted and holds all of its rank's records of
// the round, so a heap of one head per run gives the next record. Appends to
// `batch`; whenever it holds batch_records, calls full(batch), which hands the
// records on and leaves `batch` empty, or returns false to stop the merge.
template <typename T, typename Full>
void MergeRuns(const std::vector<Run<T>>& runs, std::vector<Merged<T>>& batch, size_t batch_records,
               Full&& full) {
  struct Head {
    uint64_t start;
    uint32_t rank;
    uint32_t run;
    size_t next;  // index in the run of the record after this one
  };
  auto before = [](const Head& a, const Head& b) {
    return a.start != b.start ? a.start < b.start : a.rank < b.rank;
  };
  std::vector<Head> heap;
  for (size_t r = 0; r < runs.size(); ++r) {
    if (runs[r].n > 0)
      heap.push_back({StartOf(runs[r][0]), runs[r].rank, static_cast<uint32_t>(r), 1});
  }
  // A min-heap on `before`: the root is the next record out.
  auto sift_down = [&](size_t at) {
    const size_t n = heap.size();
    const Head moving = heap[at];
    for (;;) {
      size_t child = 2 * at + 1;
      if (child >= n) break;
      if (child + 1 < n && before(heap[child + 1], heap[child])) ++child;
      if (!before(heap[child], moving)) break;
      heap[at] = heap[child];
      at = child;
    }
    heap[at] = moving;
  };
  for (size_t x = heap.size() / 2; x-- > 0;) sift_down(x);
  while (!heap.empty()) {
    Head& top = heap.front();
    const Run<T>& run = runs[top.run];
    batch.push_back(Merged<T>{run.rank, 0, run[top.next - 1]});
    if (top.next < run.n) {
      top.start = StartOf(run[top.next]);
      ++top.next;
    } else {
      top = heap.back();
      heap.pop_back();
    }
    if (!heap.empty()) sift_down(0);
    if (batch.size() >= batch_records && !full(batch)) return;
  }
}

// Appends a round's runs in merged order (MergeRuns). The first append error
// stops appending. What is left in `batch` (under batch_records) is appended
// after the last round only: rounds of a small memory budget then still append
// whole chunks, which HDF5 would otherwise inflate and deflate again for every
// round. With threads > 1 and at least two batches to append, a thread of its
// own merges while this one appends (and compresses, aon/format/trace_file.h) the
// batch before: three batches, one filled, one waiting, one appended. Its CPU
// time is the sort phase's, as is this thread's wait for a full batch.
template <typename T>
void AppendMerged(const std::vector<Run<T>>& runs, TraceWriter& out, std::vector<Merged<T>>& batch,
                  size_t batch_records, bool last_round, unsigned threads, MergePhaseTimes* phases,
                  Status* status) {
  using M = Merged<T>;
  auto append = [&](std::vector<M>& b) {
    const PhaseClock writing(phases, MergePhase::kWrite);
    if (status->ok()) *status = out.AppendMerged<T>(std::span<const M>(b));
    b.clear();
    return status->ok();
  };
  size_t records = batch.size();
  for (const Run<T>& r : runs) records += r.n;
  bool merged = false;
  if (threads > 1 && records >= 2 * batch_records && status->ok()) {
    struct Handoff {
      std::mutex m;
      std::condition_variable cv;
      std::vector<M> ready;  // a full batch when has_ready, else an empty one
      bool has_ready = false;
      bool done = false;   // the merging thread has finished
      bool stop = false;   // an append failed: the merge stops at its next batch
      bool threw = false;  // the merging thread ran out of memory
    } h;
    std::vector<M> writing;
    h.ready.reserve(batch_records);
    writing.reserve(batch_records);
    uint64_t merge_cpu_ns = 0;
    auto merge = [&] {
      const uint64_t cpu0 = ThisThreadCpuNs();
      bool threw = false;
      try {
        MergeRuns(runs, batch, batch_records, [&h](std::vector<M>& b) {
          std::unique_lock lock(h.m);
          h.cv.wait(lock, [&h] { return !h.has_ready || h.stop; });
          if (h.stop) return false;
          h.ready.swap(b);
          h.has_ready = true;
          h.cv.notify_all();
          return true;
        });
      } catch (...) {
        threw = true;
      }
      merge_cpu_ns = ThisThreadCpuNs() - cpu0;
      const std::lock_guard lock(h.m);
      h.threw = threw;
      h.done = true;
      h.cv.notify_all();
    };
    std::optional<std::jthread> merger;
    try {
      merger.emplace(merge);
    } catch (const std::system_error&) {
      // No thread: merged on this one below.
    }
    merged = merger.has_value();
    // Stops the merging thread (before an exception here leaves, joining it).
    auto stop = [&h] {
      const std::lock_guard lock(h.m);
      h.stop = true;
      h.cv.notify_all();
    };
    while (merged) {
      {
        const PhaseClock waiting(phases, MergePhase::kSort);
        std::unique_lock lock(h.m);
        h.cv.wait(lock, [&h] { return h.has_ready || h.done; });
        if (!h.has_ready) break;
        writing.swap(h.ready);
        h.has_ready = false;
        h.cv.notify_all();
      }
      bool appended = false;
      try {
        appended = append(writing);
      } catch (...) {
        stop();
        throw;
      }
      if (!appended) {
        stop();
        break;
      }
    }
    merger.reset();  // joined
    if (merged && phases != nullptr) {
      phases->cpu_s[static_cast<size_t>(MergePhase::kSort)] +=
          1e-9 * static_cast<double>(merge_cpu_ns);
    }
    if (h.threw && status->ok()) *status = Unavailable("out of memory merging records");
  }
  if (!merged && status->ok()) {
    PhaseClock merging(phases, MergePhase::kSort);
    MergeRuns(runs, batch, batch_records, [&](std::vector<M>& b) {
      merging.Stop();
      const bool ok = append(b);
      merging.Start();
      return ok;
    });
  }
  if (last_round && !batch.empty()) append(batch);
}

// The records of `run` (sorted by start) in slab `slab` (sample_sort.h):
// starts in [bounds[slab - 1], bounds[slab]), open at either end.
template <typename T>
std::pair<size_t, size_t> SlabRange(std::span<const T> run, const std::vector<uint64_t>& bounds,
                                    uint64_t slab) {
  auto first_at = [&](uint64_t bound) {
    return static_cast<size_t>(
        std::partition_point(run.begin(), run.end(),
                             [&](const T& r) { return StartOf(r) < bound; }) -
        run.begin());
  };
  return {slab == 0 ? 0 : first_at(bounds[slab - 1]),
          slab >= bounds.size() ? run.size() : first_at(bounds[slab])};
}

// One kind's merge, stage by stage: Size (rows, rounds, whether the first pass
// keeps what it reads), ReadRanks (the first pass: read, remap, correct clocks,
// index blocks, sample starts), CutSlabs (P x R time ranges cut at sample
// quantiles), then per round RoundRecords and ExchangeAndAppend.
template <typename T>
class KindMerge {
 public:
  using M = Merged<T>;
  static constexpr RecordKind kKind = RecordTraits<T>::kKind;
  static constexpr size_t k = static_cast<size_t>(kKind);
  static constexpr bool kNccl = std::is_same_v<T, NcclRecord>;
  // Kinds the rank's NCCL resolution gathers rows from.
  static constexpr bool kNcclSource =
      std::is_same_v<T, KernelRecord> || std::is_same_v<T, ApiRecord>;

  explicit KindMerge(KindContext& cx)
      : cx_(cx),
        inputs_(cx.inputs),
        procs_(static_cast<uint64_t>(cx.comm.size())),
        rows_(inputs_.size(), 0),
        kept_(inputs_.size()),
        nccl_kept_(kNccl ? inputs_.size() : 0),
        blocks_(inputs_.size()),
        unsorted_(inputs_.size(), 0),
        sent_(inputs_.size(), 0) {}

  Status Merge() {
    AON_RETURN_IF_ERROR(Size());
    ReadRanks();
    AON_RETURN_IF_ERROR(CutSlabs());
    // Each rank's records of the round, sorted: kept from the first pass, or
    // re-read from the blocks that overlap the round's slabs. A slab is then one
    // range of each rank's records: this process's own slab is merged from
    // where the records lie, the others' are copied once, into what is sent.
    reread_.resize(keep_ ? 0 : inputs_.size());
    batch_.reserve(cx_.batch_records);
    for (uint64_t round = 0; round < rounds_; ++round) {
      const std::vector<std::span<const T>> mine = RoundRecords(round);
      ExchangeAndAppend(round, mine);
      cx_.progress.Set(
          kind_name_,
          rounds_ > 1 ? "round " + std::to_string(round + 1) + "/" + std::to_string(rounds_)
                      : std::string("sorting, writing"),
          cx_.done_records,
          0.5 + 0.5 * static_cast<double>(round + 1) / static_cast<double>(rounds_), total_);
    }
    for (size_t i = 0; i < inputs_.size(); ++i) {
      RankInput& in = inputs_[i];
      in.outcome->records += sent_[i];
      if (in.damaged_kind[k]) in.damaged[k] = rows_[i] > sent_[i] ? rows_[i] - sent_[i] : 0;
    }
    cx_.done_records += 2 * total_;
    return Status::Ok();
  }

 private:
  // Sizes: how many rounds, and whether the first pass can keep what it reads.
  Status Size() {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (inputs_[i].failed || !inputs_[i].file->found.has_table[k]) continue;
      rows_[i] = inputs_[i].file->found.table_rows[k];
      local_rows_ += rows_[i];
    }
    uint64_t max_local = 0;
    {
      AON_ASSIGN_OR_RETURN(const std::vector<RowCount> counts,
                           AllgatherMessage(cx_.comm, RowCount{local_rows_}));
      for (const RowCount& c : counts) {
        total_ += c.rows;
        max_local = std::max(max_local, c.rows);
      }
    }
    rounds_ = SortRounds(max_local, total_, procs_, sizeof(M), cx_.budget_bytes);
    // NCCL records are resolved per rank as a whole (a small kind): always kept.
    keep_ = rounds_ == 1 || kNccl;
    cx_.merged.rounds[k] = rounds_;
    // One slab (one process, one round) needs no samples: its bounds are empty.
    sample_ = procs_ * rounds_ > 1;
    stride_ = std::max<uint64_t>(1, total_ / kMaxSamples);
    if (keep_ && !kNccl) {
      uint64_t all_rows = 0;
      for (uint64_t r : rows_) all_rows += r;
      kept_records_ = reinterpret_cast<T*>(cx_.kept_memory.Get(all_rows * sizeof(T)));
      // Without that memory the round re-reads its records, as a larger job would.
      keep_ = kept_records_ != nullptr || all_rows == 0;
    }
    return Status::Ok();
  }

  // ---- First pass ------------------------------------------------------------------
  // Rank tables are nearly in start order (records are written as CUPTI
  // completes them, which interleaves streams), and a rank's clock correction
  // keeps the order. A rank whose records are not in order is sorted here,
  // stably: file order among equal starts, as the merge's order requires.
  void ReadRanks() {
    PhaseClock reading(cx_.phases, MergePhase::kRead);
    uint64_t kept_rows = 0;  // rows of the ranks before this one
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (rows_[i] == 0) continue;
      RankInput& in = inputs_[i];
      T* const rank_kept = kept_records_ == nullptr ? nullptr : kept_records_ + kept_rows;
      kept_rows += rows_[i];
      if (Status st = Reopen(in, cx_.threads, cx_.helpers); !st.ok()) {
        FailRank(in, kKind, st.message());
        continue;
      }
      const CloseWhenDone close{in};
      previous_start_ = 0;
      if constexpr (kNccl) {
        ReadNcclRank(i);
      } else {
        ReadRank(i, rank_kept);
      }
    }
    if (keep_) {
      for (size_t i = 0; i < inputs_.size(); ++i) {
        if (unsorted_[i]) std::stable_sort(kept_[i].begin(), kept_[i].end(), StartsBefore<T>);
      }
    }
    reading.Stop();
    cx_.merged.read += read_rows_;
  }

  // The rows' order, bounds and samples, once they are prepared.
  void Take(size_t i, std::span<const T> v, uint64_t first) {
    RankInput& in = inputs_[i];
    Block b{first, v.size(), UINT64_MAX, 0};
    for (size_t x = 0; x < v.size(); ++x) {
      const uint64_t start = StartOf(v[x]);
      unsorted_[i] |= static_cast<char>(start < previous_start_);
      previous_start_ = start;
      b.min_start = std::min(b.min_start, start);
      b.max_start = std::max(b.max_start, start);
      if (sample_ && (first + x) % stride_ == 0) samples_.starts.push_back(start);
      if constexpr (kHasStart<T>) {
        in.first_ns = std::min(in.first_ns, start);
        in.last_ns = std::max(in.last_ns, std::max(start, EndOf(v[x])));
      }
    }
    if (!keep_) blocks_[i].push_back(b);
  }

  // NCCL records: read whole, resolved on the rank's own clock, then prepared.
  void ReadNcclRank(size_t i) {
    RankInput& in = inputs_[i];
    auto all = in.reader->template ReadAll<T>();
    if (!all.ok()) {
      DamageTable(in, kKind, all.status().message());
      return;
    }
    nccl_kept_[i] = std::move(all).value();
    ResolveRankNccl(in, nccl_kept_[i]);  // on the rank's own clock, before correction
    kept_[i] = nccl_kept_[i];
    in.bad_string_ids += PrepareRecords(in, kept_[i]);
    Take(i, kept_[i], 0);
    read_rows_ += rows_[i];
  }

  // Every other kind, block by block. Kept records are read in place; otherwise
  // one block buffer is reused. The decoding threads prepare the rows as they
  // unpack them, and first gather what the rank's NCCL resolution will need
  // from this kind.
  void ReadRank(size_t i, T* rank_kept) {
    RankInput& in = inputs_[i];
    if constexpr (std::is_same_v<T, KernelRecord>) PlanNcclGathering(in);
    const std::unordered_set<uint32_t>* gather_ids = nullptr;
    if constexpr (kNcclSource) {
      if (in.nccl_ids.has_value()) {
        gather_ids = std::is_same_v<T, KernelRecord> ? &in.nccl_ids->kernels : &in.nccl_ids->apis;
      }
    }
    // Most rows are not gathered: a bitmap of the ids' low 16 bits turns nearly
    // all of them away before the set is asked (a few hundred ids per rank).
    std::vector<uint64_t> maybe_gathered;
    if (gather_ids != nullptr) {
      maybe_gathered.assign(1024, 0);
      for (uint32_t id : *gather_ids)
        maybe_gathered[(id & 0xffffu) >> 6] |= uint64_t{1} << (id & 63);
    }
    std::mutex gather_mutex;
    std::vector<std::pair<uint64_t, T>> gathered;  // (row, record), in any order
    const T* block_rows = nullptr;                 // the block being read: its rows
    uint64_t block_first = 0;                      // and the first one's index
    std::atomic<uint64_t> bad_ids{0};
    const TraceReader::RowsVisitor prepare = [&](void* p, uint64_t n) {
      const std::span<T> v(static_cast<T*>(p), n);
      if (gather_ids != nullptr) {
        if constexpr (kNcclSource) {
          for (const T& r : v) {
            const uint32_t low = r.correlation_id & 0xffffu;
            if (((maybe_gathered[low >> 6] >> (low & 63)) & 1) == 0 ||
                !gather_ids->contains(r.correlation_id)) {
              continue;
            }
            const std::lock_guard lock(gather_mutex);
            gathered.emplace_back(block_first + static_cast<uint64_t>(&r - block_rows), r);
          }
        }
      }
      const uint64_t bad = PrepareRecords(in, v);
      if (bad > 0) bad_ids.fetch_add(bad, std::memory_order_relaxed);
    };
    std::vector<T> buf;
    for (uint64_t first = 0; first < rows_[i]; first += kBlockRecords) {
      const uint64_t n = std::min(kBlockRecords, rows_[i] - first);
      if (!keep_) buf.resize(n);
      T* const into = keep_ ? rank_kept + first : buf.data();
      block_rows = into;
      block_first = first;
      Status st =
          in.reader->ReadTable(RecordTraits<T>::Schema(), first, n, into, "records", &prepare);
      if (!st.ok()) {  // the blocks before this one are merged
        DamageTable(in, kKind, st.message());
        break;
      }
      if (keep_) kept_[i] = std::span<T>(rank_kept, first + n);
      Take(i, std::span<T>(into, n), first);
      read_rows_ += n;
      cx_.progress.Set(kind_name_, "reading", cx_.done_records,
                       0.5 * static_cast<double>(read_rows_) /
                           static_cast<double>(std::max<uint64_t>(1, local_rows_)),
                       total_);
    }
    in.bad_string_ids += bad_ids.load(std::memory_order_relaxed);
    if constexpr (kNcclSource) {
      if (gather_ids != nullptr && !in.damaged_kind[k]) KeepGathered(in, gathered);
    }
  }

  // The rows the rank's NCCL resolution needs, in file order.
  static void KeepGathered(RankInput& in, std::vector<std::pair<uint64_t, T>>& gathered) {
    std::sort(gathered.begin(), gathered.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<T> records;
    records.reserve(gathered.size());
    for (const auto& [row, r] : gathered) records.push_back(r);
    if constexpr (std::is_same_v<T, KernelRecord>) {
      in.nccl_kernels = std::move(records);
      in.nccl_kernels_gathered = true;
    } else {
      in.nccl_apis = std::move(records);
      in.nccl_apis_gathered = true;
    }
  }

  // ---- Slabs: P x R time ranges cut at sample quantiles ---------------------------
  Status CutSlabs() {
    const PhaseClock exchanging(cx_.phases, MergePhase::kExchange);
    AON_ASSIGN_OR_RETURN(std::vector<StartSamples> all, AllgatherMessage(cx_.comm, samples_));
    std::vector<uint64_t>().swap(samples_.starts);
    std::vector<uint64_t> starts;
    for (StartSamples& s : all) {
      starts.insert(starts.end(), s.starts.begin(), s.starts.end());
      std::vector<uint64_t>().swap(s.starts);
    }
    bounds_ = SlabBounds(std::move(starts), procs_ * rounds_);
    return Status::Ok();
  }

  // ---- Rounds ------------------------------------------------------------------------
  // Each rank's records of `round`, sorted.
  std::vector<std::span<const T>> RoundRecords(uint64_t round) {
    std::vector<std::span<const T>> mine(inputs_.size());
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (keep_) {
        mine[i] = kept_[i];
        continue;
      }
      RankInput& in = inputs_[i];
      const CloseWhenDone close{in};
      const PhaseClock rereading(cx_.phases, MergePhase::kRead);
      std::vector<T>& got = reread_[i];
      got.clear();
      std::vector<T> buf;
      for (const Block& b : blocks_[i]) {
        if (!BlockInRound(bounds_, b.min_start, b.max_start, rounds_, round)) continue;
        buf.resize(b.count);
        Status st = Reopen(in, cx_.threads, cx_.helpers);
        if (st.ok())
          st = in.reader->ReadTable(RecordTraits<T>::Schema(), b.first, b.count, buf.data());
        if (!st.ok()) {  // what earlier rounds sent is merged
          DamageTable(in, kKind, st.message());
          blocks_[i].clear();
          break;
        }
        PrepareRecords(in, std::span<T>(buf));  // bad ids: counted in the first pass
        for (const T& r : buf) {
          if (SlabOf(bounds_, StartOf(r)) % rounds_ == round) got.push_back(r);
        }
      }
      if (unsorted_[i]) std::stable_sort(got.begin(), got.end(), StartsBefore<T>);
      mine[i] = got;
    }
    return mine;
  }

  // Routes the round's records to their processes, receives theirs, and merges
  // and appends this process's slab.
  void ExchangeAndAppend(uint64_t round, const std::vector<std::span<const T>>& mine) {
    const uint64_t self = static_cast<uint64_t>(cx_.comm.rank());
    PhaseClock exchanging(cx_.phases, MergePhase::kExchange);
    // ranges[i * procs + p]: rank i's records for process p.
    std::vector<std::pair<size_t, size_t>> ranges(inputs_.size() * procs_);
    std::vector<uint64_t> counts(procs_, 0);
    for (size_t i = 0; i < inputs_.size(); ++i) {
      for (uint64_t p = 0; p < procs_; ++p) {
        const auto range = SlabRange(mine[i], bounds_, p * rounds_ + round);
        ranges[i * procs_ + p] = range;
        sent_[i] += range.second - range.first;
        if (p != self) counts[p] += (range.second - range.first) * RecordSlab<T>::kWords;
      }
    }
    RecordSlab<T> got;
    if (procs_ > 1) {
      std::vector<uint64_t> send = PackForOthers(mine, ranges, counts, self);
      std::vector<uint64_t> recv_counts;
      std::vector<uint64_t> recv = cx_.comm.Alltoall(send, counts, &recv_counts);
      std::vector<uint64_t>().swap(send);
      if (Status st = Unpack<T>(recv, &got); !st.ok() && cx_.merged.local.ok()) {
        cx_.merged.local = st;  // reported through the outcomes, which every process waits for
      }
      std::vector<uint64_t>().swap(recv);
    }
    // The runs: this process's ranks, then what the others sent (each sends
    // all of a rank's records together, sorted).
    std::vector<Run<T>> runs;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const auto [first, last] = ranges[i * procs_ + self];
      if (last > first) {
        runs.push_back({reinterpret_cast<const std::byte*>(mine[i].data() + first), sizeof(T),
                        last - first, inputs_[i].rank});
      }
    }
    for (size_t x = 0; x < got.records.size();) {
      size_t end = x + 1;
      while (end < got.records.size() && got.records[end].rank == got.records[x].rank) ++end;
      runs.push_back({reinterpret_cast<const std::byte*>(&got.records[x].record), sizeof(M),
                      end - x, got.records[x].rank});
      x = end;
    }
    exchanging.Stop();

    size_t n = 0;
    for (const Run<T>& r : runs) n += r.n;
    AppendMerged<T>(runs, cx_.out, batch_, cx_.batch_records, round + 1 == rounds_, cx_.threads,
                    cx_.phases, &cx_.merged.local);
    cx_.merged.written[k] += n;
    if (keep_ && round + 1 == rounds_) {
      kept_.clear();
      std::vector<std::vector<T>>().swap(nccl_kept_);
    }
  }

  // What this process sends the others: each one's ranges of every rank, as Merged rows.
  std::vector<uint64_t> PackForOthers(const std::vector<std::span<const T>>& mine,
                                      const std::vector<std::pair<size_t, size_t>>& ranges,
                                      const std::vector<uint64_t>& counts, uint64_t self) const {
    uint64_t words = 0;
    for (uint64_t c : counts) words += c;
    std::vector<uint64_t> send(words);
    uint64_t* at = send.data();
    for (uint64_t p = 0; p < procs_; ++p) {
      if (p == self) continue;
      for (size_t i = 0; i < inputs_.size(); ++i) {
        const auto [first, last] = ranges[i * procs_ + p];
        for (size_t x = first; x < last; ++x) {
          const M m{inputs_[i].rank, 0, mine[i][x]};
          std::memcpy(at, &m, sizeof(M));
          at += RecordSlab<T>::kWords;
        }
      }
    }
    return send;
  }

  KindContext& cx_;
  std::vector<RankInput>& inputs_;
  const char* const kind_name_ = RecordKindName(kKind);
  const uint64_t procs_;
  std::vector<uint64_t> rows_;
  uint64_t local_rows_ = 0, total_ = 0, rounds_ = 1;
  bool keep_ = false;
  bool sample_ = false;
  uint64_t stride_ = 1;
  StartSamples samples_;
  // Kept records: rank i's are kept_[i], in the context's buffer (NCCL records,
  // resolved per rank as vectors, in nccl_kept_).
  std::vector<std::span<T>> kept_;
  std::vector<std::vector<T>> nccl_kept_;
  T* kept_records_ = nullptr;
  std::vector<std::vector<Block>> blocks_;
  std::vector<char> unsorted_;
  uint64_t previous_start_ = 0;  // of the rank being read
  uint64_t read_rows_ = 0;
  std::vector<uint64_t> bounds_;
  std::vector<uint64_t> sent_;
  std::vector<std::vector<T>> reread_;
  std::vector<M> batch_;
};

template <typename T>
Status MergeKind(KindContext& cx) {
  return KindMerge<T>(cx).Merge();
}

}  // namespace

StatusOr<RecordsMerged> MergeRecords(MergeComm& comm, std::vector<RankInput>& inputs,
                                     TraceWriter& out, const RecordOptions& options) {
  uint64_t mine = 0;
  for (const RankInput& in : inputs) {
    for (uint64_t n : in.file->found.table_rows) mine += n;
  }
  uint64_t total_records = 0;
  {
    AON_ASSIGN_OR_RETURN(const std::vector<RowCount> counts,
                         AllgatherMessage(comm, RowCount{mine}));
    for (const RowCount& c : counts) total_records += c.rows;
  }
  Progress progress(options.progress && comm.rank() == 0, total_records);
  KeptMemory kept_memory;
  const unsigned threads = std::max(1u, options.threads);
  std::unique_ptr<HelperThreads> helpers;
  if (threads > 1) helpers = std::make_unique<HelperThreads>(threads - 1);
  KindContext cx{.comm = comm,
                 .inputs = inputs,
                 .out = out,
                 .budget_bytes = std::max<uint64_t>(options.budget_bytes, 1),
                 .batch_records = std::max<size_t>(options.batch_records, 1),
                 .progress = progress,
                 .phases = options.phases,
                 .threads = threads,
                 .helpers = helpers.get(),
                 .done_records = 0,
                 .merged = {},
                 .kept_memory = kept_memory};
  Status garbled;
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    if (garbled.ok()) garbled = MergeKind<T>(cx);
  });
  progress.Finish();
  for (RankInput& in : inputs) in.reader.reset();  // none reads with `helpers` any more
  AON_RETURN_IF_ERROR(garbled);
  return std::move(cx.merged);
}

}  // namespace aon::merge
