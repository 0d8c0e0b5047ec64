#include "records.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <type_traits>
#include <utility>

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

// What one process brings to the record merge.
struct KindContext {
  MergeComm& comm;
  std::vector<RankInput>& inputs;  // this process's ranks, in rank order
  TraceWriter& out;                // its shard, or the timeline itself (one process)
  uint64_t budget_bytes;
  size_t batch_records;
  Progress& progress;
  MergePhaseTimes* phases;
  unsigned decode_threads = 1;
  uint64_t done_records = 0;  // progress: 2 x records of the kinds finished (global)
  RecordsMerged merged;
};

Status Reopen(RankInput& in, unsigned decode_threads) {
  if (in.reader != nullptr) return Status::Ok();
  AON_ASSIGN_OR_RETURN(in.reader, TraceReader::Open(in.file->path));
  in.reader->SetDecodeThreads(decode_threads);
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
  auto kernels = ReadRankTable<KernelRecord>(in);
  auto apis = ReadRankTable<ApiRecord>(in);
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

void FailRank(RankInput& in, RecordKind kind, const std::string& what, bool partly) {
  in.failed = true;
  in.outcome->status = RankStatus::kCorrupt;
  in.outcome->message = what + (partly ? " (part of its " : " (its ") + RecordKindName(kind) +
                        (partly ? " records and its later kinds are not in the timeline)"
                                : " and later kinds are not in the timeline)");
  in.problems.push_back(in.outcome->message);
}

template <typename T>
void PrepareRecords(RankInput& in, std::span<T> records) {
  for (T& r : records) {
    ForEachStringId(r, [&](uint32_t& id) {
      if (id < in.string_map.size()) {
        id = in.string_map[id];
      } else {
        id = 0;  // out of range in a corrupt file: the empty string, counted
        ++in.bad_string_ids;
      }
    });
    ShiftRecordClock(r, in.clock);
  }
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

// Appends a round's runs in order: start, then rank, then the order in the
// rank's file. Every run is sorted and holds all of its rank's records of the
// round, so this is a k-way merge of the runs on (start, rank) (a heap of one
// head per run). The first append error stops appending. What is left in
// `batch` (under batch_records) is appended after the last round only: rounds
// of a small memory budget then still append whole chunks, which HDF5 would
// otherwise inflate and deflate again for every round.
template <typename T>
void AppendMerged(const std::vector<Run<T>>& runs, TraceWriter& out, std::vector<Merged<T>>& batch,
                  size_t batch_records, bool last_round, MergePhaseTimes* phases, Status* status) {
  PhaseClock merging(phases, MergePhase::kSort);
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
  auto flush = [&] {
    merging.Stop();
    const PhaseClock writing(phases, MergePhase::kWrite);
    if (status->ok()) *status = out.AppendMerged<T>(std::span<const Merged<T>>(batch));
    batch.clear();
    merging.Start();
  };
  while (!heap.empty() && status->ok()) {
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
    if (batch.size() >= batch_records) flush();
  }
  if (last_round && !batch.empty()) flush();
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

template <typename T>
Status MergeKind(KindContext& cx) {
  using M = Merged<T>;
  constexpr RecordKind kKind = RecordTraits<T>::kKind;
  constexpr size_t k = static_cast<size_t>(kKind);
  const char* kind_name = RecordKindName(kKind);
  const TableSchema& schema = RecordTraits<T>::Schema();
  const uint64_t procs = static_cast<uint64_t>(cx.comm.size());
  std::vector<RankInput>& inputs = cx.inputs;

  // Sizes: how many rounds, and whether the first pass can keep what it reads.
  std::vector<uint64_t> rows(inputs.size(), 0);
  uint64_t local_rows = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].failed || !inputs[i].file->found.has_table[k]) continue;
    rows[i] = inputs[i].file->found.table_rows[k];
    local_rows += rows[i];
  }
  uint64_t total = 0, max_local = 0;
  {
    AON_ASSIGN_OR_RETURN(const std::vector<RowCount> counts,
                         AllgatherMessage(cx.comm, RowCount{local_rows}));
    for (const RowCount& c : counts) {
      total += c.rows;
      max_local = std::max(max_local, c.rows);
    }
  }
  const uint64_t rounds = SortRounds(max_local, total, procs, sizeof(M), cx.budget_bytes);
  // NCCL records are resolved per rank as a whole (a small kind): always kept.
  const bool keep = rounds == 1 || std::is_same_v<T, NcclRecord>;
  cx.merged.rounds[k] = rounds;

  // ---- First pass: read, remap, correct clocks, index blocks, sample starts --------
  const uint64_t stride = std::max<uint64_t>(1, total / kMaxSamples);
  StartSamples samples;
  std::vector<std::vector<T>> kept(inputs.size());
  std::vector<std::vector<Block>> blocks(inputs.size());
  // Rank tables are nearly in start order (records are written as CUPTI
  // completes them, which interleaves streams), and a rank's clock correction
  // keeps the order. A rank whose records are not in order is sorted here,
  // stably: file order among equal starts, as the merge's order requires.
  std::vector<char> unsorted(inputs.size(), 0);
  uint64_t read_rows = 0;
  PhaseClock reading(cx.phases, MergePhase::kRead);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (rows[i] == 0) continue;
    RankInput& in = inputs[i];
    if (Status st = Reopen(in, cx.decode_threads); !st.ok()) {
      FailRank(in, kKind, st.message(), false);
      continue;
    }
    const CloseWhenDone close{in};
    uint64_t previous_start = 0;
    auto take = [&](std::span<T> v, uint64_t first) {
      PrepareRecords(in, v);
      Block b{first, v.size(), UINT64_MAX, 0};
      for (size_t x = 0; x < v.size(); ++x) {
        const uint64_t start = StartOf(v[x]);
        unsorted[i] |= static_cast<char>(start < previous_start);
        previous_start = start;
        b.min_start = std::min(b.min_start, start);
        b.max_start = std::max(b.max_start, start);
        if ((first + x) % stride == 0) samples.starts.push_back(start);
        if constexpr (kHasStart<T>) {
          in.first_ns = std::min(in.first_ns, start);
          in.last_ns = std::max(in.last_ns, std::max(start, EndOf(v[x])));
        }
      }
      if (!keep) blocks[i].push_back(b);
    };
    if constexpr (std::is_same_v<T, NcclRecord>) {
      auto all = in.reader->template ReadAll<T>();
      if (!all.ok()) {
        FailRank(in, kKind, all.status().message(), false);
        continue;
      }
      kept[i] = std::move(all).value();
      ResolveRankNccl(in, kept[i]);  // on the rank's own clock, before correction
      take(std::span<T>(kept[i]), 0);
      read_rows += rows[i];
      continue;
    }
    // Kept records are read in place; otherwise one block buffer is reused.
    if (keep) kept[i].reserve(rows[i]);
    std::vector<T> buf;
    for (uint64_t first = 0; first < rows[i]; first += kBlockRecords) {
      const uint64_t n = std::min(kBlockRecords, rows[i] - first);
      std::vector<T>& into = keep ? kept[i] : buf;
      const size_t at = keep ? into.size() : 0;
      into.resize(at + n);
      Status st = in.reader->ReadTable(schema, first, n, into.data() + at);
      if (!st.ok()) {
        FailRank(in, kKind, st.message(), false);
        std::vector<T>().swap(kept[i]);
        blocks[i].clear();
        break;
      }
      take(std::span<T>(into.data() + at, n), first);
      read_rows += n;
      cx.progress.Set(kind_name, "reading", cx.done_records,
                      0.5 * static_cast<double>(read_rows) /
                          static_cast<double>(std::max<uint64_t>(1, local_rows)),
                      total);
    }
  }

  if (keep) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (unsorted[i]) std::stable_sort(kept[i].begin(), kept[i].end(), StartsBefore<T>);
    }
  }
  reading.Stop();
  cx.merged.read += read_rows;

  // ---- Slabs: P x R time ranges cut at sample quantiles ---------------------------
  std::vector<uint64_t> bounds;
  {
    const PhaseClock exchanging(cx.phases, MergePhase::kExchange);
    AON_ASSIGN_OR_RETURN(std::vector<StartSamples> all, AllgatherMessage(cx.comm, samples));
    std::vector<uint64_t>().swap(samples.starts);
    std::vector<uint64_t> starts;
    for (StartSamples& s : all) {
      starts.insert(starts.end(), s.starts.begin(), s.starts.end());
      std::vector<uint64_t>().swap(s.starts);
    }
    bounds = SlabBounds(std::move(starts), procs * rounds);
  }

  // ---- Rounds: route, exchange, merge, append ---------------------------------------
  // Each rank's records of the round, sorted: kept from the first pass, or
  // re-read from the blocks that overlap the round's slabs. A slab is then one
  // range of each rank's records: this process's own slab is merged from
  // where the records lie, the others' are copied once, into what is sent.
  std::vector<uint64_t> sent(inputs.size(), 0);
  std::vector<std::vector<T>> reread(keep ? 0 : inputs.size());
  std::vector<M> batch;
  batch.reserve(cx.batch_records);
  const uint64_t self = static_cast<uint64_t>(cx.comm.rank());
  for (uint64_t round = 0; round < rounds; ++round) {
    std::vector<std::span<const T>> mine(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (keep) {
        mine[i] = kept[i];
        continue;
      }
      RankInput& in = inputs[i];
      const CloseWhenDone close{in};
      const PhaseClock rereading(cx.phases, MergePhase::kRead);
      std::vector<T>& got = reread[i];
      got.clear();
      std::vector<T> buf;
      for (const Block& b : blocks[i]) {
        if (!BlockInRound(bounds, b.min_start, b.max_start, rounds, round)) continue;
        buf.resize(b.count);
        Status st = Reopen(in, cx.decode_threads);
        if (st.ok()) st = in.reader->ReadTable(schema, b.first, b.count, buf.data());
        if (!st.ok()) {
          FailRank(in, kKind, st.message(), true);
          blocks[i].clear();
          break;
        }
        // Counted (bad ids) in the first pass already.
        const uint64_t bad = in.bad_string_ids;
        PrepareRecords(in, std::span<T>(buf));
        in.bad_string_ids = bad;
        for (const T& r : buf) {
          if (SlabOf(bounds, StartOf(r)) % rounds == round) got.push_back(r);
        }
      }
      if (unsorted[i]) std::stable_sort(got.begin(), got.end(), StartsBefore<T>);
      mine[i] = got;
    }

    PhaseClock exchanging(cx.phases, MergePhase::kExchange);
    // ranges[i * procs + p]: rank i's records for process p.
    std::vector<std::pair<size_t, size_t>> ranges(inputs.size() * procs);
    std::vector<uint64_t> counts(procs, 0);
    for (size_t i = 0; i < inputs.size(); ++i) {
      for (uint64_t p = 0; p < procs; ++p) {
        const auto range = SlabRange(mine[i], bounds, p * rounds + round);
        ranges[i * procs + p] = range;
        sent[i] += range.second - range.first;
        if (p != self) counts[p] += (range.second - range.first) * RecordSlab<T>::kWords;
      }
    }
    std::vector<uint64_t> send;
    {
      uint64_t words = 0;
      for (uint64_t c : counts) words += c;
      send.resize(words);
      uint64_t* at = send.data();
      for (uint64_t p = 0; p < procs; ++p) {
        if (p == self) continue;
        for (size_t i = 0; i < inputs.size(); ++i) {
          const auto [first, last] = ranges[i * procs + p];
          for (size_t x = first; x < last; ++x) {
            const M m{inputs[i].rank, 0, mine[i][x]};
            std::memcpy(at, &m, sizeof(M));
            at += RecordSlab<T>::kWords;
          }
        }
      }
    }
    std::vector<uint64_t> recv;
    RecordSlab<T> got;
    if (procs > 1) {
      std::vector<uint64_t> recv_counts;
      recv = cx.comm.Alltoall(send, counts, &recv_counts);
      std::vector<uint64_t>().swap(send);
      if (Status st = Unpack<T>(recv, &got); !st.ok() && cx.merged.local.ok()) {
        cx.merged.local = st;  // reported through the outcomes, which every process waits for
      }
      std::vector<uint64_t>().swap(recv);
    }
    // The runs: this process's ranks, then what the others sent (each sends
    // all of a rank's records together, sorted).
    std::vector<Run<T>> runs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto [first, last] = ranges[i * procs + self];
      if (last > first) {
        runs.push_back({reinterpret_cast<const std::byte*>(mine[i].data() + first), sizeof(T),
                        last - first, inputs[i].rank});
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
    AppendMerged<T>(runs, cx.out, batch, cx.batch_records, round + 1 == rounds, cx.phases,
                    &cx.merged.local);
    cx.merged.written[k] += n;
    if (keep && round + 1 == rounds) {
      for (std::vector<T>& v : kept) std::vector<T>().swap(v);
    }
    cx.progress.Set(kind_name,
                    rounds > 1 ? "round " + std::to_string(round + 1) + "/" + std::to_string(rounds)
                               : std::string("sorting, writing"),
                    cx.done_records,
                    0.5 + 0.5 * static_cast<double>(round + 1) / static_cast<double>(rounds),
                    total);
  }
  for (size_t i = 0; i < inputs.size(); ++i) inputs[i].outcome->records += sent[i];
  cx.done_records += 2 * total;
  return Status::Ok();
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
  KindContext cx{.comm = comm,
                 .inputs = inputs,
                 .out = out,
                 .budget_bytes = std::max<uint64_t>(options.budget_bytes, 1),
                 .batch_records = std::max<size_t>(options.batch_records, 1),
                 .progress = progress,
                 .phases = options.phases,
                 .decode_threads = std::max(1u, options.decode_threads),
                 .done_records = 0,
                 .merged = {}};
  Status garbled;
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    if (garbled.ok()) garbled = MergeKind<T>(cx);
  });
  progress.Finish();
  AON_RETURN_IF_ERROR(garbled);
  return std::move(cx.merged);
}

}  // namespace aon::merge
