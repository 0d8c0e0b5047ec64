#include "records.h"

#include <algorithm>
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
  uint64_t done_records = 0;  // progress: 2 x records of the kinds finished (global)
  RecordsMerged merged;
};

Status Reopen(RankInput& in) {
  if (in.reader != nullptr) return Status::Ok();
  AON_ASSIGN_OR_RETURN(in.reader, TraceReader::Open(in.file->path));
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

// Appends a round's records in order: start, then rank, then the order in the
// rank's file (which is the order received: one process sends all of a rank,
// in file order). The first append error stops appending.
template <typename T>
void AppendSorted(const std::vector<Merged<T>>& got, TraceWriter& out, size_t batch_records,
                  MergePhaseTimes* phases, Status* status) {
  PhaseClock sorting(phases, MergePhase::kSort);
  using M = Merged<T>;
  struct Key {
    uint64_t start;
    uint32_t rank;
    uint32_t pos;
  };
  const size_t n = got.size();
  std::vector<Key> keys(n);
  for (size_t x = 0; x < n; ++x) {
    keys[x] = Key{StartOf(got[x].record), got[x].rank, static_cast<uint32_t>(x)};
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    if (a.start != b.start) return a.start < b.start;
    if (a.rank != b.rank) return a.rank < b.rank;
    return a.pos < b.pos;
  });
  std::vector<M> batch;
  batch.reserve(std::min(n, batch_records));
  for (size_t x = 0; x < n && status->ok(); ++x) {
    batch.push_back(got[keys[x].pos]);
    if (batch.size() >= batch_records || x + 1 == n) {
      sorting.Stop();
      PhaseClock writing(phases, MergePhase::kWrite);
      *status = out.AppendMerged<T>(std::span<const M>(batch));
      writing.Stop();
      sorting.Start();
      batch.clear();
    }
  }
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
  uint64_t read_rows = 0;
  PhaseClock reading(cx.phases, MergePhase::kRead);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (rows[i] == 0) continue;
    RankInput& in = inputs[i];
    if (Status st = Reopen(in); !st.ok()) {
      FailRank(in, kKind, st.message(), false);
      continue;
    }
    const CloseWhenDone close{in};
    auto take = [&](std::span<T> v, uint64_t first) {
      PrepareRecords(in, v);
      Block b{first, v.size(), UINT64_MAX, 0};
      for (size_t x = 0; x < v.size(); ++x) {
        const uint64_t start = StartOf(v[x]);
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

  // ---- Rounds: route, exchange, sort, append ----------------------------------------
  std::vector<uint64_t> sent(inputs.size(), 0);
  for (uint64_t round = 0; round < rounds; ++round) {
    PhaseClock exchanging(cx.phases, MergePhase::kExchange);
    std::vector<RecordSlab<T>> to(procs);
    auto route = [&](size_t i, const T& r) {
      const uint64_t s = SlabOf(bounds, StartOf(r));
      if (s % rounds != round) return;
      to[s / rounds].records.push_back(M{inputs[i].rank, 0, r});
      ++sent[i];
    };
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (keep) {
        for (const T& r : kept[i]) route(i, r);
        if (rounds == 1) std::vector<T>().swap(kept[i]);
        continue;
      }
      RankInput& in = inputs[i];
      const CloseWhenDone close{in};
      for (const Block& b : blocks[i]) {
        if (!BlockInRound(bounds, b.min_start, b.max_start, rounds, round)) continue;
        exchanging.Stop();
        PhaseClock rereading(cx.phases, MergePhase::kRead);
        std::vector<T> buf(b.count);
        Status st = Reopen(in);
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
        rereading.Stop();
        exchanging.Start();
        for (const T& r : buf) route(i, r);
      }
      exchanging.Start();  // also after a failed re-read
    }
    std::vector<uint64_t> send, counts(procs);
    {
      size_t words = 0;
      for (const RecordSlab<T>& slab : to) words += slab.records.size() * RecordSlab<T>::kWords;
      send.reserve(words);
    }
    for (uint64_t p = 0; p < procs; ++p) {
      const size_t before = send.size();
      Pack(to[p], &send);
      counts[p] = send.size() - before;
      std::vector<M>().swap(to[p].records);
    }
    std::vector<uint64_t> recv_counts;
    std::vector<uint64_t> recv = cx.comm.Alltoall(send, counts, &recv_counts);
    std::vector<uint64_t>().swap(send);
    RecordSlab<T> got;
    if (Status st = Unpack<T>(recv, &got); !st.ok() && cx.merged.local.ok()) {
      cx.merged.local = st;  // reported through the outcomes, which every process waits for
    }
    std::vector<uint64_t>().swap(recv);
    exchanging.Stop();

    const size_t n = got.records.size();
    AppendSorted<T>(got.records, cx.out, cx.batch_records, cx.phases, &cx.merged.local);
    cx.merged.written[k] += n;
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
