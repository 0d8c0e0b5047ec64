// Merge of a job directory by one or more processes (merge.h says what it
// produces; docs/trace-format.md has the sharded layout).
//
// Every process runs every phase; MergeComm makes them collective, and with one
// process (SoloComm) they reduce to the plain serial merge.
//  1. Scan: each process lists the job directory as it sees it; the lists are
//     exchanged and every file goes to one process that sees it (largest files
//     first, to the least loaded), so a node-local directory is read on its node
//     and a shared one is spread evenly.
//  2. Open: each process opens and validates its files; what it found (status,
//     metadata, tables present, problems) is exchanged, so that every process
//     takes the same decisions about ranks (missing, duplicate, salvaged ...).
//  3. Strings: each process unites its ranks' string tables; the unions are
//     exchanged and interned in process order: one table, the same everywhere.
//  4. Records, kind by kind, a sample sort on start time in bounded memory: a
//     first pass reads each rank's table in blocks (strings remapped, clock
//     corrected), notes each block's time range and samples start times; the
//     samples cut the time axis into slabs, process p owning slabs
//     [p * R, (p + 1) * R); in round j every process sends each record of slab
//     p * R + j to p (kept from the first pass when everything fits the memory
//     budget, otherwise re-read from the blocks that overlap), and p sorts what it
//     receives by (start, rank, order in the rank's file) and appends it to its
//     output. R grows with the data so that a round fits the budget.
//  5. Outcomes: per rank counts, first/last times, problems, NCCL calibration and
//     devices go to process 0.
//  6. Process 0 writes the timeline: with one process the records were written
//     into it directly; with several, each wrote one time range of every kind into
//     its own shard file and the timeline's tables are HDF5 virtual datasets over
//     the shards, in process order (one piece per process and kind).
// The viewer exports (overview, Chrome JSON) are not part of the merge: the
// aon-merge program makes them from the timeline (merge_exports.h).
#include "aon/merge/merge.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <span>
#include <sstream>
#include <type_traits>
#include <utility>

#include "aon/clock_leaders.h"
#include "aon/merge/nccl_resolve.h"
#include "aon/metadata_wire.h"
#include "aon/string_table.h"
#include "pack.h"
#include "record_ops.h"

namespace aon::merge {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kRankPrefix = "rank-";
constexpr std::string_view kFinalSuffix = ".h5";
constexpr std::string_view kPartialSuffix = ".h5.partial";
// A world_size beyond this is treated as corrupt metadata rather than a reason to
// allocate a row per rank.
constexpr int64_t kMaxWorldSize = int64_t{1} << 22;

constexpr const char* kIncompleteNote = "incomplete (rank still running or crashed before writing)";
constexpr const char* kSalvagedNote =
    "collector stopped before finishing this rank; records up to its last flush";

std::optional<uint32_t> RankFromFileName(std::string_view name, std::string_view suffix) {
  if (!name.starts_with(kRankPrefix) || !name.ends_with(suffix)) return std::nullopt;
  std::string_view digits =
      name.substr(kRankPrefix.size(), name.size() - kRankPrefix.size() - suffix.size());
  if (digits.empty()) return std::nullopt;
  uint32_t rank = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return rank;
}

std::string RankFileName(uint32_t rank) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "rank-%05u.h5", rank);
  return buf;
}

// The job directory as one process sees it: rank files with their sizes.
struct JobFiles {
  std::vector<std::pair<std::string, uint64_t>> rank_files;     // sorted by name
  std::vector<std::pair<std::string, uint64_t>> partial_files;  // sorted by name
};

StatusOr<JobFiles> ScanJobDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return NotFound("job directory '" + dir + "' does not exist or is not a directory");
  }
  JobFiles files;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(kRankPrefix)) continue;
    std::error_code size_ec;
    const uint64_t size = it->file_size(size_ec);
    const uint64_t bytes = size_ec ? 0 : size;
    if (name.ends_with(kPartialSuffix)) {
      files.partial_files.emplace_back(it->path().string(), bytes);
    } else if (name.ends_with(kFinalSuffix)) {
      files.rank_files.emplace_back(it->path().string(), bytes);
    }
  }
  if (ec) return IoError("cannot list job directory '" + dir + "': " + ec.message());
  std::sort(files.rank_files.begin(), files.rank_files.end());
  std::sort(files.partial_files.begin(), files.partial_files.end());
  return files;
}

// One rank-*.h5 (or rank-*.h5.partial) file and what opening it found. Every
// process holds every candidate; only the process that opened it (`mine`) has
// its reader and string table.
struct Candidate {
  std::string path;
  bool partial = false;    // a .partial file: salvaged only for a rank no final file has
  bool superseded = false;  // a readable .partial whose rank another file already gives
  bool mine = false;        // opened by this process
  std::optional<uint32_t> name_rank;  // from the file name
  std::unique_ptr<TraceReader> reader;
  RankMetadata meta;
  bool meta_read = false;
  StringTable strings;
  std::array<bool, kRecordKindCount> has_table{};
  std::array<uint64_t, kRecordKindCount> table_rows{};
  RankStatus status = RankStatus::kOk;
  std::string reason;  // why not ok; names the file
  std::vector<std::string> open_problems;  // found while opening (reported in file order)

  bool ok() const { return status == RankStatus::kOk; }
  std::optional<uint32_t> claimed_rank() const {
    if (meta_read && meta.rank >= 0) return static_cast<uint32_t>(meta.rank);
    return name_rank;
  }
};

RankStatus ClassifyOpenError(const Status& s) {
  if (s.code() == StatusCode::kUnimplemented) return RankStatus::kUnsupported;
  // HDF5's own wording when the file is shorter than its superblock says.
  if (s.message().find("truncated file") != std::string::npos) return RankStatus::kTruncated;
  return RankStatus::kCorrupt;
}

void OpenCandidate(Candidate& c) {
  std::vector<std::string>* problems = &c.open_problems;
  auto reader = TraceReader::Open(c.path);
  if (!reader.ok()) {
    c.status = ClassifyOpenError(reader.status());
    c.reason = reader.status().message();
    return;
  }
  auto fail = [&](std::string reason) {
    c.status = RankStatus::kCorrupt;
    c.reason = std::move(reason);
    c.reader.reset();
  };
  c.reader = std::move(reader).value();
  if (c.reader->kind() != FileKind::kRank) {
    return fail(c.path + ": is a merged timeline, not a rank trace");
  }
  auto meta = c.reader->ReadRankMetadata();
  if (!meta.ok()) return fail("unreadable rank metadata: " + meta.status().message());
  c.meta = std::move(meta).value();
  c.meta_read = true;
  if (c.meta.rank < 0)
    return fail(c.path + ": its metadata has no rank (rank " + std::to_string(c.meta.rank) + ")");
  auto strings = c.reader->ReadStrings();
  if (!strings.ok() && c.partial && strings.status().code() == StatusCode::kNotFound) {
    // A collector may write the string table only when it finishes.
    problems->push_back(c.path + ": has no string table yet; its names are merged as \"\"");
    strings = StringTable();
  }
  if (!strings.ok()) return fail("unreadable string table: " + strings.status().message());
  c.strings = std::move(strings).value();
  Status table_status;
  ForEachRankFileRecordType([&](auto tag) {
    using T = decltype(tag);
    if (!table_status.ok()) return;
    const size_t k = static_cast<size_t>(RecordTraits<T>::kKind);
    auto n = c.reader->TableSize(RecordTraits<T>::Schema());
    if (n.ok()) {
      c.has_table[k] = true;
      c.table_rows[k] = *n;
    } else if (n.status().code() == StatusCode::kNotFound) {
      // A .partial file has only the tables flushed so far, and a file older than
      // the kind has none: expected, not a problem.
      if (c.partial || c.reader->format_minor() < KindSinceMinor<T>()) return;
      problems->push_back(c.path + ": has no /records/" + RecordKindName(RecordTraits<T>::kKind) +
                          " table; merged as empty");
    } else {
      table_status = n.status();
    }
  });
  if (!table_status.ok()) fail(table_status.message());
}

// Rank files are open only while they are read: an open HDF5 file costs about
// 0.9 MB (its metadata cache), which for 1,024 rank files held open would be the
// merge's largest memory use. Reopening costs a fraction of a millisecond.
Status Reopen(Candidate& c) {
  if (c.reader != nullptr) return Status::Ok();
  auto r = TraceReader::Open(c.path);
  if (!r.ok()) return r.status();
  c.reader = std::move(r).value();
  return Status::Ok();
}

// Closes a candidate's reader when the scope that read it ends.
struct CloseWhenDone {
  Candidate& c;
  ~CloseWhenDone() { c.reader.reset(); }
};

// A rank being merged: its reader and how its ids and clock map onto the timeline.
struct RankInput {
  uint32_t rank = 0;
  Candidate* file = nullptr;
  RankOutcome* outcome = nullptr;
  std::vector<uint32_t> string_map;  // rank-local id -> unified id
  uint64_t bad_string_ids = 0;
  bool failed = false;  // a read failed mid-merge: no further kinds from this rank
  uint64_t first_ns = UINT64_MAX;
  uint64_t last_ns = 0;
  LinearClock clock;
  // Found while merging this rank (by whichever process owns it); process 0
  // reports them in rank order.
  std::vector<std::string> problems;
};

// One whole table of a rank (empty when the file has none).
template <typename T>
StatusOr<std::vector<T>> ReadRankTable(const Candidate& c) {
  if (!c.has_table[static_cast<size_t>(RecordTraits<T>::kKind)]) return std::vector<T>();
  return c.reader->template ReadAll<T>();
}

// Ties the rank's NCCL operations to their kernels and converts raw channel
// times (nccl_resolve.h), on the rank's own clock, before any clock correction.
// Records of files already resolved by their agent are left as they are. The
// calibration goes into the rank's metadata, as the agent used to write it.
void ResolveRankNccl(RankInput& in, std::vector<NcclRecord>& nccl) {
  Candidate& c = *in.file;
  auto graph = ReadRankTable<NcclGraphRecord>(c);
  if (!graph.ok()) {
    in.problems.push_back(c.path + ": NCCL CUDA-graph rows unreadable: " + graph.status().message());
    graph = std::vector<NcclGraphRecord>();
  }
  if (!NcclRecordsNeedResolution(nccl, *graph)) return;
  auto ext = ReadRankTable<ExternalCorrelationRecord>(c);
  auto kernels = ReadRankTable<KernelRecord>(c);
  auto apis = ReadRankTable<ApiRecord>(c);
  const Status st = !ext.ok() ? ext.status() : !kernels.ok() ? kernels.status() : apis.status();
  if (!st.ok()) {
    in.problems.push_back(c.path + ": NCCL records not tied to their kernels: " + st.message());
    return;
  }
  RankMetadata& m = c.meta;
  const NcclResolveResult r = ResolveNcclRecords(nccl, *graph, *ext, *kernels, *apis,
                                                 {m.anchor_clock_ns, m.anchor_realtime_ns});
  if (r.raw_converted > 0) {
    m.nccl_gpu_clock_offset_ns = r.calibration.offset_ns;
    m.nccl_gpu_clock_pairs = r.calibration.pairs;
    m.nccl_gpu_clock_spread_ns = r.calibration.spread_ns;
  }
  if (!r.note.empty()) {
    m.notes.push_back(r.note);
    in.problems.push_back(c.path + ": " + r.note);
  }
}

// ---- Progress ---------------------------------------------------------------------

// A one-line progress bar on stderr, drawn by process 0 when stderr is a
// terminal. Work is counted in records: each kind is read once (first pass) and
// exchanged + written once (its rounds).
class Progress {
 public:
  Progress(bool enabled, uint64_t total_records)
      : on_(enabled && isatty(STDERR_FILENO) == 1),
        total_(std::max<uint64_t>(1, 2 * total_records)),
        t0_(std::chrono::steady_clock::now()) {}
  ~Progress() { Finish(); }

  void Set(std::string_view kind, std::string_view phase, uint64_t done_before_kind,
           double fraction_of_kind, uint64_t kind_records) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(100) && fraction_of_kind < 1.0) return;
    last_ = now;
    const double done = static_cast<double>(done_before_kind) +
                        fraction_of_kind * static_cast<double>(2 * kind_records);
    const double f = std::min(1.0, done / static_cast<double>(total_));
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(f * kWidth);
    const double secs = std::chrono::duration<double>(now - t0_).count();
    std::fprintf(stderr, "\raon-merge: [%.*s%*s] %3d%% %-20.*s %-16.*s %6.1f s\x1b[K",
                 filled, "==============================", kWidth - filled, "",
                 static_cast<int>(f * 100), static_cast<int>(kind.size()), kind.data(),
                 static_cast<int>(phase.size()), phase.data(), secs);
    std::fflush(stderr);
    drawn_ = true;
  }
  void Finish() {
    if (drawn_) std::fputs("\r\x1b[K", stderr);
    drawn_ = false;
  }

 private:
  bool on_;
  uint64_t total_;
  std::chrono::steady_clock::time_point t0_;
  std::chrono::steady_clock::time_point last_{};
  bool drawn_ = false;
};

// ---- Records: a sample sort by start time ----------------------------------------------

// What one process brings to the record merge.
struct KindContext {
  MergeComm& comm;
  std::vector<RankInput>& inputs;  // this process's ranks, in rank order
  TraceWriter& out;                // its shard, or the timeline itself (one process)
  uint64_t budget_bytes;           // records in memory at once, per process
  size_t batch_records;            // records per HDF5 append
  Progress& progress;
  uint64_t done_records = 0;       // progress: 2 x records of the kinds finished (global)
  std::array<uint64_t, kRecordKindCount> written{};  // rows this process appended, per kind
  std::array<uint64_t, kRecordKindCount> rounds{};   // R per kind, for the report
  Status out_status;               // the first append error (rounds still go on: collective)
};

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

void FailRank(RankInput& in, RecordKind kind, const std::string& what, bool partly) {
  in.failed = true;
  in.outcome->status = RankStatus::kCorrupt;
  in.outcome->message =
      what + (partly ? " (part of its " : " (its ") + RecordKindName(kind) +
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
Status MergeKind(KindContext& cx) {
  using M = Merged<T>;
  static_assert(sizeof(M) % sizeof(uint64_t) == 0, "records travel as 8-byte words");
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
    if (inputs[i].failed || !inputs[i].file->has_table[k]) continue;
    rows[i] = inputs[i].file->table_rows[k];
    local_rows += rows[i];
  }
  uint64_t total = 0, max_local = 0;
  {
    Packer p;
    p.U64(local_rows);
    for (const std::string& msg : cx.comm.Allgather(p.bytes())) {
      Unpacker u(msg);
      const uint64_t n = u.U64();
      total += n;
      max_local = std::max(max_local, n);
    }
  }
  // A round holds about (a process's share) x 3: what it sends, what it
  // receives, the sorted output batch.
  const uint64_t share_bytes =
      std::max(max_local, (total + procs - 1) / procs) * sizeof(M) * 3;
  const uint64_t budget = std::max<uint64_t>(cx.budget_bytes, 1);
  const uint64_t rounds = std::max<uint64_t>(1, (share_bytes + budget - 1) / budget);
  // NCCL records are resolved per rank as a whole (a small kind): always kept.
  const bool keep = rounds == 1 || std::is_same_v<T, NcclRecord>;
  cx.rounds[k] = rounds;

  // ---- First pass: read, remap, correct clocks, index blocks, sample starts --------
  const uint64_t stride = std::max<uint64_t>(1, total / kMaxSamples);
  std::vector<uint64_t> samples;
  std::vector<std::vector<T>> kept(inputs.size());
  std::vector<std::vector<Block>> blocks(inputs.size());
  uint64_t read_rows = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (rows[i] == 0) continue;
    RankInput& in = inputs[i];
    if (Status st = Reopen(*in.file); !st.ok()) {
      FailRank(in, kKind, st.message(), false);
      continue;
    }
    const CloseWhenDone close{*in.file};
    auto take = [&](std::span<T> v, uint64_t first) {
      PrepareRecords(in, v);
      Block b{first, v.size(), UINT64_MAX, 0};
      for (size_t x = 0; x < v.size(); ++x) {
        const uint64_t start = StartOf(v[x]);
        b.min_start = std::min(b.min_start, start);
        b.max_start = std::max(b.max_start, start);
        if ((first + x) % stride == 0) samples.push_back(start);
        if constexpr (kHasStart<T>) {
          in.first_ns = std::min(in.first_ns, start);
          in.last_ns = std::max(in.last_ns, std::max(start, EndOf(v[x])));
        }
      }
      if (!keep) blocks[i].push_back(b);
    };
    if constexpr (std::is_same_v<T, NcclRecord>) {
      auto all = in.file->reader->template ReadAll<T>();
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
      Status st = in.file->reader->ReadTable(schema, first, n, into.data() + at);
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

  // ---- Slabs: P x R time ranges cut at sample quantiles ---------------------------
  std::vector<uint64_t> bounds;  // slab s = [bounds[s-1], bounds[s]); K - 1 values
  {
    Packer p;
    p.U64(samples.size());
    p.Raw(samples.data(), samples.size() * sizeof(uint64_t));
    std::vector<uint64_t>().swap(samples);
    std::vector<uint64_t> all;
    for (const std::string& msg : cx.comm.Allgather(p.bytes())) {
      Unpacker u(msg);
      const uint64_t n = u.U64();
      const size_t old = all.size();
      all.resize(old + n);
      u.Raw(all.data() + old, n * sizeof(uint64_t));
    }
    std::sort(all.begin(), all.end());
    const uint64_t slabs = procs * rounds;
    for (uint64_t s = 1; s < slabs; ++s) {
      bounds.push_back(all.empty() ? UINT64_MAX : all[std::min(all.size() - 1, s * all.size() / slabs)]);
    }
  }
  auto slab_of = [&](uint64_t start) -> uint64_t {
    return static_cast<uint64_t>(std::upper_bound(bounds.begin(), bounds.end(), start) -
                                 bounds.begin());
  };

  // ---- Rounds: route, exchange, sort, append ----------------------------------------
  std::vector<uint64_t> sent(inputs.size(), 0);
  for (uint64_t round = 0; round < rounds; ++round) {
    std::vector<std::vector<M>> to(procs);
    auto route = [&](size_t i, const T& r) {
      const uint64_t s = slab_of(StartOf(r));
      if (s % rounds != round) return;
      to[s / rounds].push_back(M{inputs[i].rank, 0, r});
      ++sent[i];
    };
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (keep) {
        for (const T& r : kept[i]) route(i, r);
        if (rounds == 1) std::vector<T>().swap(kept[i]);
        continue;
      }
      const CloseWhenDone close{*inputs[i].file};
      for (const Block& b : blocks[i]) {
        // Does this block hold any start of this round's slabs?
        const uint64_t lo = slab_of(b.min_start), hi = slab_of(b.max_start);
        bool overlaps = hi - lo + 1 >= rounds;
        for (uint64_t s = lo; !overlaps && s <= hi; ++s) overlaps = s % rounds == round;
        if (!overlaps) continue;
        std::vector<T> buf(b.count);
        Status st = Reopen(*inputs[i].file);
        if (st.ok()) st = inputs[i].file->reader->ReadTable(schema, b.first, b.count, buf.data());
        if (!st.ok()) {
          FailRank(inputs[i], kKind, st.message(), true);
          blocks[i].clear();
          break;
        }
        // Counted (bad ids) in the first pass already.
        const uint64_t bad = inputs[i].bad_string_ids;
        PrepareRecords(inputs[i], std::span<T>(buf));
        inputs[i].bad_string_ids = bad;
        for (const T& r : buf) route(i, r);
      }
    }
    std::vector<uint64_t> send, counts(procs);
    size_t words = 0;
    for (const auto& v : to) words += v.size() * sizeof(M) / sizeof(uint64_t);
    send.resize(words);
    size_t at = 0;
    for (uint64_t p = 0; p < procs; ++p) {
      const size_t n = to[p].size() * sizeof(M) / sizeof(uint64_t);
      if (n > 0) std::memcpy(send.data() + at, to[p].data(), n * sizeof(uint64_t));
      counts[p] = n;
      at += n;
      std::vector<M>().swap(to[p]);
    }
    std::vector<uint64_t> recv_counts;
    std::vector<uint64_t> recv = cx.comm.Alltoall(send, counts, &recv_counts);
    std::vector<uint64_t>().swap(send);
    const size_t n = recv.size() * sizeof(uint64_t) / sizeof(M);
    std::vector<M> got(n);
    if (n > 0) std::memcpy(got.data(), recv.data(), n * sizeof(M));
    std::vector<uint64_t>().swap(recv);

    // Order: start, then rank, then the order in the rank's file (which is the
    // order received: one process sends all of a rank, in file order).
    struct Key {
      uint64_t start;
      uint32_t rank;
      uint32_t pos;
    };
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
    batch.reserve(std::min(n, cx.batch_records));
    for (size_t x = 0; x < n && cx.out_status.ok(); ++x) {
      batch.push_back(got[keys[x].pos]);
      if (batch.size() >= cx.batch_records || x + 1 == n) {
        cx.out_status = cx.out.AppendMerged<T>(std::span<const M>(batch));
        batch.clear();
      }
    }
    cx.written[k] += n;
    cx.progress.Set(kind_name,
                    rounds > 1 ? "round " + std::to_string(round + 1) + "/" +
                                     std::to_string(rounds)
                               : std::string("sorting, writing"),
                    cx.done_records,
                    0.5 + 0.5 * static_cast<double>(round + 1) / static_cast<double>(rounds),
                    total);
  }
  for (size_t i = 0; i < inputs.size(); ++i) inputs[i].outcome->records += sent[i];
  cx.done_records += 2 * total;
  return Status::Ok();
}

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const std::string& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

// ---- What processes tell each other ---------------------------------------------------

// Every process's status; the first failure wins (named by process when it is
// another's), so that all processes stop together.
Status Agree(MergeComm& comm, const Status& mine) {
  Packer p;
  p.U64(static_cast<uint64_t>(mine.code()));
  p.Str(mine.message());
  const std::vector<std::string> all = comm.Allgather(p.bytes());
  for (size_t q = 0; q < all.size(); ++q) {
    Unpacker u(all[q]);
    const auto code = static_cast<StatusCode>(u.U64());
    std::string message = u.Str();
    if (code == StatusCode::kOk) continue;
    if (static_cast<int>(q) != comm.rank()) {
      message = "merge process " + std::to_string(q) + ": " + message;
    }
    return Status(code, std::move(message));
  }
  return Status::Ok();
}

void PackCandidate(Packer& p, const Candidate& c) {
  p.U64(static_cast<uint64_t>(c.status));
  p.Str(c.reason);
  p.U64(c.meta_read ? 1 : 0);
  if (c.meta_read) p.Str(EncodeRankMetadata(c.meta));
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    p.U64(c.has_table[k] ? 1 : 0);
    p.U64(c.table_rows[k]);
  }
  p.Strs(c.open_problems);
}

void UnpackCandidate(Unpacker& u, Candidate& c) {
  c.status = static_cast<RankStatus>(u.U64());
  c.reason = u.Str();
  c.meta_read = u.U64() != 0;
  if (c.meta_read) {
    auto meta = DecodeRankMetadata(u.Str());
    if (meta.ok()) {
      c.meta = std::move(meta).value();
    } else {  // cannot happen between processes of one binary; never trust it anyway
      c.meta_read = false;
      c.status = RankStatus::kCorrupt;
      c.reason = c.path + ": metadata garbled between merge processes: " + meta.status().message();
    }
  }
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    c.has_table[k] = u.U64() != 0;
    c.table_rows[k] = u.U64();
  }
  c.open_problems = u.Strs();
}

// Files seen by the processes: path -> (size, the processes that see it).
using SeenFiles = std::map<std::string, std::pair<uint64_t, std::vector<int>>>;

// Gives each path to one process that sees it: largest first, each to the
// process with the fewest bytes so far (ties: the lowest process). Every
// process computes the same answer.
std::vector<int> AssignFiles(const std::vector<std::string>& paths, const SeenFiles& seen,
                             int procs) {
  std::vector<size_t> order(paths.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return seen.at(paths[a]).first > seen.at(paths[b]).first;
  });
  std::vector<uint64_t> load(procs, 0);
  std::vector<int> who(paths.size(), 0);
  for (size_t i : order) {
    const auto& [size, procs_seeing] = seen.at(paths[i]);
    int best = procs_seeing.front();
    for (int q : procs_seeing) {
      if (load[q] < load[best]) best = q;
    }
    who[i] = best;
    load[best] += std::max<uint64_t>(size, 1);
  }
  return who;
}

// Opens candidates [first, first + who.size()) where `who` says this process
// should, and tells every process what each found.
void OpenShared(MergeComm& comm, std::vector<Candidate>& cands, size_t first,
                const std::vector<int>& who) {
  Packer p;
  for (size_t i = 0; i < who.size(); ++i) {
    if (who[i] != comm.rank()) continue;
    Candidate& c = cands[first + i];
    OpenCandidate(c);
    c.reader.reset();  // reopened while its records are read (Reopen)
    c.mine = true;
    p.U64(first + i);
    PackCandidate(p, c);
  }
  const std::vector<std::string> all = comm.Allgather(p.bytes());
  for (size_t q = 0; q < all.size(); ++q) {
    if (static_cast<int>(q) == comm.rank()) continue;
    Unpacker u(all[q]);
    while (u.ok() && !u.done()) {
      const uint64_t i = u.U64();
      if (i < first || i >= first + who.size()) break;
      UnpackCandidate(u, cands[i]);
    }
  }
}

// Where the shards of a timeline go: "<dir>/<stem>.shards" next to it.
std::string ShardDirOf(const std::string& timeline_path) {
  fs::path p(timeline_path);
  return (p.parent_path() / (p.stem().string() + ".shards")).string();
}

std::string ShardFileName(int process) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "shard-%05d.h5", process);
  return buf;
}

// The merged ranks (every process knows their metadata): rank -> its file.
using MergedRanks = std::vector<std::pair<uint32_t, const Candidate*>>;

std::string ClockNote(const MergedRanks& merged) {
  std::set<std::string> domains;
  std::vector<std::string> unsynced;
  int64_t worst_bound = 0;
  for (const auto& [rank, file] : merged) {
    const RankMetadata& m = file->meta;
    domains.insert(m.clock_domain.empty() ? "an unnamed clock" : m.clock_domain);
    if (!m.clock_synchronized) {
      unsynced.push_back(std::to_string(rank));
    } else {
      worst_bound = std::max(worst_bound, m.clock_error_bound_ns);
    }
  }
  const std::string domain =
      domains.size() == 1
          ? *domains.begin()
          : "their host clock (" + Join({domains.begin(), domains.end()}, ", ") + ")";
  if (unsynced.empty()) {
    return "clock-synchronized: each rank's clock_offset_ns applied; worst error bound " +
           std::to_string(worst_bound) + " ns";
  }
  if (unsynced.size() == merged.size()) {
    return "ranks not clock-synchronized: timestamps are each host's " + domain +
           "; same-host ranks share it";
  }
  return std::to_string(unsynced.size()) + " of " + std::to_string(merged.size()) +
         " ranks not clock-synchronized (ranks " + Join(unsynced, ",") +
         "): their timestamps are their host's " + domain + "; same-host ranks share it";
}

}  // namespace

const TableSchema& MergedDeviceSchema() { return MergedSchema(DeviceInfoSchema()); }

uint32_t MergeReport::ranks_ok() const {
  return static_cast<uint32_t>(std::count_if(ranks.begin(), ranks.end(), [](const RankOutcome& r) {
    return r.status == RankStatus::kOk;
  }));
}

std::string TimelinePath(const MergeOptions& options) {
  return options.timeline_path.empty() ? (fs::path(options.job_dir) / "timeline.h5").string()
                                       : options.timeline_path;
}

Status MergeJob(const MergeOptions& options, MergeReport* report) {
  SoloComm solo;
  MergeComm& comm = options.comm != nullptr ? *options.comm : solo;
  const int procs = comm.size();
  const bool root = comm.rank() == 0;
  *report = MergeReport{};
  report->job_dir = options.job_dir;
  report->procs = procs;
  report->process = comm.rank();
  const std::string timeline_path = TimelinePath(options);

  // ---- Scan: every process lists the directory; each file goes to one of them ----
  SeenFiles seen_final, seen_partial;
  {
    auto files = ScanJobDir(options.job_dir);
    Packer p;
    p.U64(files.ok() ? 1 : 0);
    if (files.ok()) {
      p.U64(files->rank_files.size());
      for (const auto& [path, size] : files->rank_files) {
        p.Str(path);
        p.U64(size);
      }
      p.U64(files->partial_files.size());
      for (const auto& [path, size] : files->partial_files) {
        p.Str(path);
        p.U64(size);
      }
    }
    const std::vector<std::string> all = comm.Allgather(p.bytes());
    // The directory must be readable where the merge runs: the first process's
    // error is everyone's.
    AON_RETURN_IF_ERROR(Agree(comm, files.status()));
    for (size_t q = 0; q < all.size(); ++q) {
      Unpacker u(all[q]);
      if (u.U64() == 0) continue;
      for (SeenFiles* seen : {&seen_final, &seen_partial}) {
        const uint64_t n = u.U64();
        for (uint64_t i = 0; i < n && u.ok(); ++i) {
          std::string path = u.Str();
          const uint64_t size = u.U64();
          auto& entry = (*seen)[path];
          entry.first = std::max(entry.first, size);
          entry.second.push_back(static_cast<int>(q));
        }
      }
    }
  }
  if (seen_final.empty() && seen_partial.empty()) {
    return NotFound("no rank-*.h5 files in job directory '" + options.job_dir + "'");
  }

  // ---- Open every file; decide the expected ranks -------------------------------
  // Final files first; then the .partial files of ranks no readable final file
  // gives (a killed collector's, readable up to its last flush): salvaged.
  std::vector<Candidate> candidates(seen_final.size());
  {
    std::vector<std::string> paths;
    for (const auto& [path, info] : seen_final) paths.push_back(path);
    for (size_t i = 0; i < paths.size(); ++i) {
      candidates[i].path = paths[i];
      candidates[i].name_rank =
          RankFromFileName(fs::path(paths[i]).filename().string(), kFinalSuffix);
    }
    OpenShared(comm, candidates, 0, AssignFiles(paths, seen_final, procs));
  }
  std::set<uint32_t> final_ranks;
  for (Candidate& c : candidates) {
    for (std::string& p : c.open_problems) report->problems.push_back(std::move(p));
    c.open_problems.clear();
    if (c.ok() && c.meta.rank >= 0) final_ranks.insert(static_cast<uint32_t>(c.meta.rank));
  }
  std::vector<std::string> partial_paths;
  for (const auto& [path, info] : seen_partial) partial_paths.push_back(path);
  {
    std::vector<std::string> to_open;
    const size_t first = candidates.size();
    for (const std::string& p : partial_paths) {
      const auto name_rank = RankFromFileName(fs::path(p).filename().string(), kPartialSuffix);
      if (name_rank && final_ranks.count(*name_rank)) continue;  // the final file wins: not opened
      Candidate& c = candidates.emplace_back();
      c.path = p;
      c.partial = true;
      c.name_rank = name_rank;
      to_open.push_back(p);
    }
    OpenShared(comm, candidates, first, AssignFiles(to_open, seen_partial, procs));
    for (size_t i = first; i < candidates.size(); ++i) {
      for (std::string& p : candidates[i].open_problems) report->problems.push_back(std::move(p));
      candidates[i].open_problems.clear();
    }
  }
  int64_t world = 0;
  bool any_ok = false;
  for (Candidate& c : candidates) {
    if (!c.ok()) continue;
    if (c.meta.rank >= kMaxWorldSize) {
      c.status = RankStatus::kCorrupt;
      c.reason = c.path + ": rank " + std::to_string(c.meta.rank) + " is implausible";
      c.reader.reset();
      continue;
    }
    any_ok = true;
    world = std::max<int64_t>(world, c.meta.rank + 1);
    if (c.meta.world_size > kMaxWorldSize) {
      report->problems.push_back(c.path + ": world_size " + std::to_string(c.meta.world_size) +
                                 " is implausible; ignored");
    } else {
      world = std::max<int64_t>(world, c.meta.world_size);
    }
  }
  if (!any_ok) {
    // Nothing to merge: size the table from what the bad files claim, to report them.
    for (const Candidate& c : candidates) {
      if (c.partial) continue;  // an unreadable .partial file says nothing about the job
      if (auto r = c.claimed_rank(); r && *r < kMaxWorldSize)
        world = std::max<int64_t>(world, *r + 1);
    }
  }
  report->world_size = static_cast<uint32_t>(world);
  report->ranks.resize(report->world_size);
  for (uint32_t r = 0; r < report->world_size; ++r) {
    RankOutcome& o = report->ranks[r];
    o.rank = r;
    o.status = RankStatus::kMissing;
    o.message = "no " + RankFileName(r) + " in '" + options.job_dir + "'";
  }

  // Good files claim their rank first (file-name order); a bad file only
  // describes a rank that no good file covers.
  std::vector<Candidate*> owner(report->world_size, nullptr);
  for (Candidate& c : candidates) {
    if (!c.ok()) continue;
    const auto rank = static_cast<uint32_t>(c.meta.rank);
    if (c.name_rank && *c.name_rank != rank) {
      report->problems.push_back(c.path + ": file name says rank " + std::to_string(*c.name_rank) +
                                 " but its metadata says rank " + std::to_string(rank) +
                                 "; merged as rank " + std::to_string(rank));
    }
    if (owner[rank] != nullptr) {
      c.reader.reset();
      if (c.partial) {
        c.superseded = true;  // reported with the other .partial files
        continue;
      }
      report->problems.push_back(c.path + ": duplicate: claims rank " + std::to_string(rank) +
                                 ", already merged from " + owner[rank]->path + "; skipped");
      continue;
    }
    owner[rank] = &c;
    RankOutcome& o = report->ranks[rank];
    o.status = RankStatus::kOk;
    o.path = c.path;
    o.message.clear();
    o.host = c.meta.host;
    o.source = c.meta.source;
    for (uint64_t d : c.meta.dropped) o.dropped += d;
    if (c.partial) {
      o.status = RankStatus::kTruncated;  // message once its last record is known
    } else if (c.meta.truncated != 0) {
      o.status = RankStatus::kTruncated;
      o.message = c.path + ": process ended without finishing (killed?); trace ends at " +
                  (c.meta.last_record_ns != 0 ? std::to_string(c.meta.last_record_ns) + " ns"
                                              : std::string("an unknown time"));
      report->problems.push_back(o.message);
    }
  }
  for (Candidate& c : candidates) {
    if (c.ok() || c.partial) continue;  // unreadable .partial files: below
    const auto rank = c.claimed_rank();
    std::string line = c.reason;
    if (!rank) {
      line += " (rank unknown: the file name is not rank-<N>.h5)";
    } else if (*rank >= report->world_size) {
      line += " (claims rank " + std::to_string(*rank) + ", beyond world size " +
              std::to_string(report->world_size) + ")";
    } else if (owner[*rank] != nullptr) {
      line += " (rank " + std::to_string(*rank) + " merged from " + owner[*rank]->path + ")";
    } else if (report->ranks[*rank].status == RankStatus::kMissing) {
      RankOutcome& o = report->ranks[*rank];
      o.status = c.status;
      o.path = c.path;
      o.message = c.reason;
    }
    report->problems.push_back(std::move(line));
  }
  std::map<std::string, const Candidate*> opened_partials;
  for (const Candidate& c : candidates) {
    if (c.partial) opened_partials.emplace(c.path, &c);
  }
  for (const std::string& p : partial_paths) {
    auto it = opened_partials.find(p);
    const Candidate* c = it != opened_partials.end() ? it->second : nullptr;
    auto rank = RankFromFileName(fs::path(p).filename().string(), kPartialSuffix);
    if (c != nullptr && c->ok() && !c->superseded) continue;  // salvaged: reported once merged
    std::string line = p + ": " + kIncompleteNote;
    if (c == nullptr || c->superseded) {
      const uint32_t r = c != nullptr ? static_cast<uint32_t>(c->meta.rank) : rank.value_or(0);
      if (r < report->world_size && owner[r] != nullptr) {
        line += " (rank " + std::to_string(r) + " merged from " + owner[r]->path + ")";
      }
    } else {
      line += " (not salvageable: " + c->reason + ")";
    }
    report->problems.push_back(std::move(line));
    if (rank && *rank < report->world_size && report->ranks[*rank].status == RankStatus::kMissing) {
      report->ranks[*rank].message +=
          "; " + fs::path(p).filename().string() + " is " + kIncompleteNote;
    }
  }
  for (const RankOutcome& o : report->ranks) {
    if (o.status == RankStatus::kMissing)
      report->problems.push_back("rank " + std::to_string(o.rank) + ": missing: " + o.message);
  }
  if (!any_ok) {
    std::string msg = "nothing to merge in '" + options.job_dir + "': no rank file could be read";
    for (const std::string& p : report->problems) msg += "\n  " + p;
    return DataLoss(msg);
  }

  // ---- Unified strings: local unions, interned in process order -------------------
  MergedRanks merged;
  for (uint32_t r = 0; r < report->world_size; ++r) {
    if (owner[r] != nullptr) merged.emplace_back(r, owner[r]);
  }
  // Ranks that share their node leader's clock get its measurement (every
  // process has every rank's metadata, so all decide the same).
  {
    std::vector<RankMetadata*> metas;
    for (const auto& [rank, file] : merged) metas.push_back(&owner[rank]->meta);
    for (std::string& line : ApplyClockLeaders(metas)) report->problems.push_back(std::move(line));
  }
  StringTable strings;
  {
    StringTable local_union;
    for (const auto& [rank, file] : merged) {
      if (!file->mine) continue;
      for (const std::string& text : file->strings.strings()) local_union.Intern(text);
    }
    Packer p;
    p.Strs(local_union.strings());
    for (const std::string& msg : comm.Allgather(p.bytes())) {
      Unpacker u(msg);
      for (const std::string& text : u.Strs()) strings.Intern(text);
    }
  }
  std::vector<RankInput> inputs;  // this process's ranks
  for (const auto& [rank, file] : merged) {
    if (!file->mine) continue;
    RankInput in;
    in.rank = rank;
    in.file = owner[rank];
    in.outcome = &report->ranks[rank];
    in.clock = file->meta.clock();
    const auto& local = file->strings.strings();
    in.string_map.resize(local.size());
    for (size_t id = 0; id < local.size(); ++id) in.string_map[id] = strings.Intern(local[id]);
    owner[rank]->strings = StringTable();  // the map is all that is needed now
    inputs.push_back(std::move(in));
  }

  // ---- Where the records go: the timeline itself, or this process's shard ----------
  const bool sharded = procs > 1;
  const std::string shard_dir = ShardDirOf(timeline_path);
  const std::string shard_tmp = shard_dir + ".partial";
  std::unique_ptr<TraceWriter> out;
  if (sharded) {
    Status made;
    if (root) {
      std::error_code ec;
      fs::remove_all(shard_tmp, ec);
      if (!ec) fs::create_directories(shard_tmp, ec);
      if (!ec) fs::permissions(shard_tmp, fs::perms::owner_all, ec);
      if (ec) made = IoError("cannot create the shard directory '" + shard_tmp + "': " + ec.message());
    }
    AON_RETURN_IF_ERROR(Agree(comm, made));
    Status mine;
    std::error_code ec;
    if (!fs::is_directory(shard_tmp, ec)) {
      mine = Unavailable("the shard directory '" + shard_tmp +
                         "' made by merge process 0 is not visible here: several merge "
                         "processes need a shared output directory");
    } else {
      auto w = TraceWriter::Create((fs::path(shard_tmp) / ShardFileName(comm.rank())).string(),
                                   FileKind::kTimeline, options.write_options);
      if (w.ok()) {
        out = std::move(w).value();
      } else {
        mine = w.status();
      }
    }
    AON_RETURN_IF_ERROR(Agree(comm, mine));
  } else {
    AON_ASSIGN_OR_RETURN(
        out, TraceWriter::Create(timeline_path, FileKind::kTimeline, options.write_options));
  }

  // ---- Records, kind by kind ---------------------------------------------------------
  uint64_t total_records = 0;
  {
    uint64_t mine = 0;
    for (const RankInput& in : inputs) {
      for (uint64_t n : in.file->table_rows) mine += n;
    }
    Packer p;
    p.U64(mine);
    for (const std::string& msg : comm.Allgather(p.bytes())) total_records += Unpacker(msg).U64();
  }
  Progress progress(options.progress && root, total_records);
  KindContext cx{comm,
                 inputs,
                 *out,
                 std::max<uint64_t>(options.memory_budget_bytes, 1),
                 std::max<size_t>(options.output_batch_records, 1),
                 progress,
                 0,
                 {},
                 {},
                 Status::Ok()};
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    (void)MergeKind<T>(cx);
  });
  progress.Finish();
  report->rounds = cx.rounds;
  Status local = cx.out_status;
  if (local.ok() && sharded) {
    local = out->SetMetaAttribute("shard_of", fs::path(timeline_path).filename().string());
    if (local.ok()) local = out->SetMetaAttribute("shard", int64_t{comm.rank()});
    if (local.ok()) local = out->Finish();
  }

  // ---- Outcomes to process 0 -----------------------------------------------------------
  std::vector<std::string> outcomes;
  {
    Packer p;
    p.U64(static_cast<uint64_t>(local.code()));
    p.Str(local.message());
    for (uint64_t n : cx.written) p.U64(n);
    p.U64(inputs.size());
    for (const RankInput& in : inputs) {
      const RankMetadata& m = in.file->meta;
      p.U64(in.rank);
      p.U64(in.outcome->records);
      p.U64(in.first_ns);
      p.U64(in.last_ns);
      p.U64(in.bad_string_ids);
      p.U64(static_cast<uint64_t>(in.outcome->status));
      p.Str(in.outcome->message);
      p.I64(m.nccl_gpu_clock_offset_ns);
      p.I64(m.nccl_gpu_clock_pairs);
      p.I64(m.nccl_gpu_clock_spread_ns);
      p.Strs(m.notes);
      p.Strs(in.problems);
      p.U64(m.devices.size());
      for (DeviceInfo d : m.devices) {
        ForEachStringId(
            d, [&](uint32_t& id) { id = id < in.string_map.size() ? in.string_map[id] : 0; });
        p.Raw(&d, sizeof(d));
      }
    }
    outcomes = comm.Allgather(p.bytes());
  }
  AON_RETURN_IF_ERROR(Agree(comm, local));
  if (!root) return Status::Ok();  // process 0 writes the timeline and the exports

  std::array<std::vector<uint64_t>, kRecordKindCount> written_by;  // [kind][process]
  std::vector<uint64_t> first_ns(report->world_size, UINT64_MAX), last_ns(report->world_size, 0),
      bad_ids(report->world_size, 0);
  std::vector<std::vector<std::string>> rank_problems(report->world_size);
  std::vector<Merged<DeviceInfo>> devices;
  for (const std::string& msg : outcomes) {
    Unpacker u(msg);
    u.U64();
    u.Str();
    for (size_t k = 0; k < kRecordKindCount; ++k) written_by[k].push_back(u.U64());
    const uint64_t n = u.U64();
    for (uint64_t i = 0; i < n && u.ok(); ++i) {
      const auto rank = static_cast<uint32_t>(u.U64());
      if (rank >= report->world_size || owner[rank] == nullptr) break;  // guarded, never expected
      RankOutcome& o = report->ranks[rank];
      RankMetadata& m = owner[rank]->meta;
      o.records = u.U64();
      first_ns[rank] = u.U64();
      last_ns[rank] = u.U64();
      bad_ids[rank] = u.U64();
      o.status = static_cast<RankStatus>(u.U64());
      o.message = u.Str();
      m.nccl_gpu_clock_offset_ns = u.I64();
      m.nccl_gpu_clock_pairs = u.I64();
      m.nccl_gpu_clock_spread_ns = u.I64();
      m.notes = u.Strs();
      rank_problems[rank] = u.Strs();
      const uint64_t nd = u.U64();
      for (uint64_t d = 0; d < nd && u.ok(); ++d) {
        Merged<DeviceInfo> row{rank, 0, {}};
        u.Raw(&row.record, sizeof(row.record));
        devices.push_back(row);
      }
    }
  }
  std::stable_sort(devices.begin(), devices.end(),
                   [](const auto& a, const auto& b) { return a.rank < b.rank; });
  for (auto& lines : rank_problems) {
    for (std::string& line : lines) report->problems.push_back(std::move(line));
  }
  for (const auto& [rank, file] : merged) {
    // Salvaged .partial files: say how far they go.
    RankOutcome& o = report->ranks[rank];
    if (!file->partial || o.status != RankStatus::kTruncated) continue;
    std::string& msg = o.message;
    msg = file->path + ": " + kSalvagedNote + "; ";
    msg += first_ns[rank] != UINT64_MAX
               ? "last record at " + std::to_string(last_ns[rank]) + " ns (timeline clock)"
               : std::string("no records were flushed");
    if (file->meta.truncated != 0) msg += "; the process ended without finishing (killed?)";
    report->problems.push_back(msg);
  }
  std::unique_ptr<TraceWriter> timeline;
  if (sharded) {
    AON_ASSIGN_OR_RETURN(timeline, TraceWriter::Create(timeline_path, FileKind::kTimeline,
                                                       options.write_options));
    const std::string rel_dir = fs::path(shard_dir).filename().string();
    Status vds;
    ForEachRecordType([&](auto tag) {
      using T = decltype(tag);
      constexpr size_t k = static_cast<size_t>(RecordTraits<T>::kKind);
      const TableSchema& schema = MergedSchemaOf<T>();
      std::vector<VirtualPiece> pieces;
      uint64_t rows = 0;
      for (int q = 0; q < procs; ++q) {
        const uint64_t n = written_by[k][q];
        if (n == 0) continue;
        pieces.push_back(VirtualPiece{rel_dir + "/" + ShardFileName(q), "/records/" + schema.name,
                                      0, rows, n});
        rows += n;
      }
      report->records[k] = rows;
      if (vds.ok()) vds = timeline->CreateVirtualTable(schema, rows, pieces);
    });
    AON_RETURN_IF_ERROR(vds);
    report->shard_dir = shard_dir;
  } else {
    for (size_t k = 0; k < kRecordKindCount; ++k) report->records[k] = written_by[k][0];
    timeline = std::move(out);
  }
  TraceWriter* writer = timeline.get();

  // ---- Devices, ranks, strings, attributes -------------------------------------------
  AON_RETURN_IF_ERROR(
      writer->AppendTable(MergedDeviceSchema(), devices.data(), devices.size(), "meta"));

  uint64_t start_ns = UINT64_MAX, end_ns = 0;
  for (const auto& [rank, file] : merged) {
    if (bad_ids[rank] > 0) {
      report->problems.push_back(file->path + ": " + std::to_string(bad_ids[rank]) +
                                 " string ids beyond its string table (merged as \"\")");
    }
    if (first_ns[rank] != UINT64_MAX) {
      start_ns = std::min(start_ns, first_ns[rank]);
      end_ns = std::max(end_ns, last_ns[rank]);
    }
  }
  if (start_ns == UINT64_MAX) {  // no timed record at all: fall back to the capture windows
    for (const auto& [rank, file] : merged) {
      const RankMetadata& m = file->meta;
      start_ns = std::min(start_ns, m.clock().Apply(m.start_ns));
      end_ns = std::max(end_ns, m.clock().Apply(m.end_ns));
    }
  }
  report->start_ns = start_ns;
  report->end_ns = std::max(end_ns, start_ns);

  std::vector<RankSummary> rows(report->world_size);
  for (uint32_t r = 0; r < report->world_size; ++r) {
    const RankOutcome& o = report->ranks[r];
    RankSummary& row = rows[r];
    row = RankSummary{};
    row.rank = r;
    row.status = static_cast<uint8_t>(o.status);
    row.message_id = strings.Intern(o.message);
    row.local_rank = UINT32_MAX;
    row.clock_error_bound_ns = -1;
    row.nccl_gpu_clock_spread_ns = -1;
    row.records = o.records;
    if (owner[r] != nullptr) {
      const RankMetadata& m = owner[r]->meta;
      row.host_id = strings.Intern(m.host);
      row.local_rank = m.local_rank >= 0 ? static_cast<uint32_t>(m.local_rank) : UINT32_MAX;
      row.pid = m.pid;
      row.dropped = o.dropped;
      row.clock_offset_ns = m.clock_offset_ns;
      row.clock_error_bound_ns = m.clock_error_bound_ns;
      // As the rank file says, or as measured by the NCCL resolution above.
      row.nccl_gpu_clock_offset_ns = m.nccl_gpu_clock_offset_ns;
      row.nccl_gpu_clock_pairs = m.nccl_gpu_clock_pairs;
      row.nccl_gpu_clock_spread_ns = m.nccl_gpu_clock_spread_ns;
    }
    if (first_ns[r] != UINT64_MAX) {
      row.first_ns = first_ns[r];
      row.last_ns = last_ns[r];
    }
  }
  AON_RETURN_IF_ERROR(writer->AppendTable(RankSummarySchema(), rows.data(), rows.size(), "meta"));

  std::set<std::string> job_ids, sources;
  std::vector<std::string> synthetic_ranks;
  bool all_synced = true;
  int64_t worst_bound = 0;
  for (const auto& [rank, file] : merged) {
    const RankMetadata& m = file->meta;
    job_ids.insert(m.job_id);
    sources.insert(m.source);
    if (m.source == "synthetic") synthetic_ranks.push_back(std::to_string(rank));
    if (!m.clock_synchronized || m.clock_error_bound_ns < 0) {
      all_synced = false;
    } else {
      worst_bound = std::max(worst_bound, m.clock_error_bound_ns);
    }
    for (size_t k = 0; k < kRecordKindCount; ++k) report->dropped[k] += m.dropped[k];
  }
  report->job_id = Join({job_ids.begin(), job_ids.end()}, ",");
  if (job_ids.size() > 1) {
    report->problems.push_back("ranks disagree on the job id (" + report->job_id +
                               "): were files of several jobs put in '" + options.job_dir + "'?");
  }
  const std::string all_sources = Join({sources.begin(), sources.end()}, ",");
  const uint32_t ranks_ok = report->ranks_ok();

  AON_RETURN_IF_ERROR(writer->WriteStrings(strings));
  AON_RETURN_IF_ERROR(writer->SetMetaAttribute("job_id", report->job_id));
  AON_RETURN_IF_ERROR(writer->SetMetaAttribute("world_size", int64_t{report->world_size}));
  AON_RETURN_IF_ERROR(writer->SetMetaAttribute("ranks_ok", int64_t{ranks_ok}));
  AON_RETURN_IF_ERROR(
      writer->SetMetaAttribute("ranks_bad", int64_t{report->world_size - ranks_ok}));
  AON_RETURN_IF_ERROR(writer->SetMetaAttribute("clock_note", ClockNote(merged)));
  AON_RETURN_IF_ERROR(writer->SetMetaAttribute("clock_synchronized", int64_t{all_synced ? 1 : 0}));
  AON_RETURN_IF_ERROR(
      writer->SetMetaAttribute("clock_error_bound_ns", all_synced ? worst_bound : int64_t{-1}));
  // Viewers label the whole timeline as synthetic if any part of it is.
  AON_RETURN_IF_ERROR(writer->SetMetaAttribute(
      "source", synthetic_ranks.empty() ? std::string_view(all_sources) : "synthetic"));
  AON_RETURN_IF_ERROR(writer->SetMetaAttribute("sources", all_sources));
  AON_RETURN_IF_ERROR(writer->SetMetaAttribute("synthetic_ranks", Join(synthetic_ranks, ",")));
  AON_RETURN_IF_ERROR(writer->SetMetaAttribute("start_ns", report->start_ns));
  AON_RETURN_IF_ERROR(writer->SetMetaAttribute("end_ns", report->end_ns));
  for (size_t k = 0; k < kTimelineKindCount; ++k) {
    const std::string kind = RecordKindName(static_cast<RecordKind>(k));
    AON_RETURN_IF_ERROR(writer->SetMetaAttribute("records_" + kind, report->records[k]));
    AON_RETURN_IF_ERROR(writer->SetMetaAttribute("dropped_" + kind, report->dropped[k]));
  }
  AON_RETURN_IF_ERROR(writer->SetMetaAttribute("problems", Join(report->problems, "\n")));
  AON_RETURN_IF_ERROR(
      writer->SetMetaAttribute("merge_processes", static_cast<int64_t>(procs)));
  // Commit. Sharded: the old timeline goes first, so that no complete-looking
  // timeline ever points at shards of another merge; then the shard directory is
  // swapped in and the timeline renamed. One process: a stale shard directory
  // (of an earlier sharded merge of this job) is removed afterwards.
  std::error_code ec;
  if (sharded) {
    if (std::remove(timeline_path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoStatus("removing the old timeline " + timeline_path, errno);
    }
    fs::remove_all(shard_dir, ec);
    if (!ec) fs::rename(shard_tmp, shard_dir, ec);
    if (ec) {
      return IoError("cannot move the shards from '" + shard_tmp + "' to '" + shard_dir +
                     "': " + ec.message());
    }
  }
  AON_RETURN_IF_ERROR(writer->Finish());
  if (!sharded && fs::exists(shard_dir, ec)) fs::remove_all(shard_dir, ec);
  report->timeline_path = timeline_path;
  return Status::Ok();
}

std::string FormatMergeSummary(const MergeReport& report) {
  std::ostringstream out;
  // A truncated rank (killed process, collector stopped) is merged up to where
  // its trace ends: say so instead of counting it as missing.
  const auto partial = static_cast<uint32_t>(
      std::count_if(report.ranks.begin(), report.ranks.end(), [](const RankOutcome& r) {
        return r.status == RankStatus::kTruncated && r.records > 0;
      }));
  out << "aon-merge: job " << (report.job_id.empty() ? "(no id)" : report.job_id) << ": merged "
      << report.ranks_ok() + partial << " of " << report.world_size << " ranks";
  if (partial > 0) out << " (" << partial << " truncated)";
  out << " from " << report.job_dir << "\n";
  for (const RankOutcome& o : report.ranks) {
    if (o.status == RankStatus::kOk) continue;
    out << "  rank " << o.rank << ": " << RankStatusName(o.status) << ": " << o.message << "\n";
  }
  out << "records:";
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    out << (k == 0 ? " " : ", ") << RecordKindName(static_cast<RecordKind>(k)) << " "
        << report.records[k];
  }
  out << "\ndropped:";
  bool any_dropped = false;
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    if (report.dropped[k] == 0) continue;
    out << (any_dropped ? ", " : " ") << RecordKindName(static_cast<RecordKind>(k)) << " "
        << report.dropped[k];
    any_dropped = true;
  }
  if (!any_dropped) out << " none";
  out << "\n";
  if (!report.timeline_path.empty()) out << "timeline: " << report.timeline_path << "\n";
  if (!report.overview_path.empty()) out << "overview: " << report.overview_path << "\n";
  if (!report.chrome_path.empty()) out << "chrome trace: " << report.chrome_path << "\n";
  if (!report.chrome_not_written.empty()) {
    out << "chrome trace: not written (over --max-trace-records; see the note)\n";
  }
  return out.str();
}

}  // namespace aon::merge
