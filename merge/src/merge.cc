// Single-process merge of a job directory (see merge.h for what it produces).
//
// Phases: scan the directory -> open and validate every rank file (bad ones are
// recorded, never fatal) -> decide the expected ranks -> build the unified string
// table -> per record kind: read that kind from every rank, remap strings, shift
// clocks, sort each rank, k-way merge into batched appends -> devices and ranks
// tables, strings, /meta attributes -> Finish (atomic rename) -> overview.json ->
// Chrome JSON (unless over max_trace_records).
#include "aon/merge/merge.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <span>
#include <sstream>
#include <type_traits>
#include <utility>

#include "aon/merge/chrome_trace.h"
#include "aon/merge/overview.h"
#include "aon/nccl_resolve.h"
#include "aon/string_table.h"
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

struct JobFiles {
  std::vector<std::string> rank_files;     // sorted by name: "first" means first here
  std::vector<std::string> partial_files;  // sorted by name
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
    if (name.ends_with(kPartialSuffix)) {
      files.partial_files.push_back(it->path().string());
    } else if (name.ends_with(kFinalSuffix)) {
      files.rank_files.push_back(it->path().string());
    }
  }
  if (ec) return IoError("cannot list job directory '" + dir + "': " + ec.message());
  std::sort(files.rank_files.begin(), files.rank_files.end());
  std::sort(files.partial_files.begin(), files.partial_files.end());
  return files;
}

// One rank-*.h5 (or rank-*.h5.partial) file and what opening it found.
struct Candidate {
  std::string path;
  bool partial = false;    // a .partial file: salvaged only for a rank no final file has
  bool superseded = false;  // a readable .partial whose rank another file already gives
  std::optional<uint32_t> name_rank;  // from the file name
  std::unique_ptr<TraceReader> reader;
  RankMetadata meta;
  bool meta_read = false;
  StringTable strings;
  std::array<bool, kRecordKindCount> has_table{};
  RankStatus status = RankStatus::kOk;
  std::string reason;  // why not ok; names the file

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

void OpenCandidate(Candidate& c, std::vector<std::string>* problems) {
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
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    if (!table_status.ok()) return;
    const size_t k = static_cast<size_t>(RecordTraits<T>::kKind);
    auto n = c.reader->TableSize(RecordTraits<T>::Schema());
    if (n.ok()) {
      c.has_table[k] = true;
    } else if (n.status().code() == StatusCode::kNotFound) {
      // A .partial file has only the tables flushed so far: expected, not a problem.
      if (c.partial) return;
      problems->push_back(c.path + ": has no /records/" + RecordKindName(RecordTraits<T>::kKind) +
                          " table; merged as empty");
    } else {
      table_status = n.status();
    }
  });
  if (!table_status.ok()) fail(table_status.message());
}

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
void ResolveRankNccl(RankInput& in, std::vector<NcclRecord>& nccl, MergeReport* report) {
  if (!NcclRecordsNeedResolution(nccl)) return;
  Candidate& c = *in.file;
  auto ext = ReadRankTable<ExternalCorrelationRecord>(c);
  auto kernels = ReadRankTable<KernelRecord>(c);
  auto apis = ReadRankTable<ApiRecord>(c);
  const Status st = !ext.ok() ? ext.status() : !kernels.ok() ? kernels.status() : apis.status();
  if (!st.ok()) {
    report->problems.push_back(c.path +
                               ": NCCL records not tied to their kernels: " + st.message());
    return;
  }
  RankMetadata& m = c.meta;
  const NcclResolveResult r =
      ResolveNcclRecords(nccl, *ext, *kernels, *apis, {m.anchor_clock_ns, m.anchor_realtime_ns});
  if (r.raw_converted > 0) {
    m.nccl_gpu_clock_offset_ns = r.calibration.offset_ns;
    m.nccl_gpu_clock_pairs = r.calibration.pairs;
    m.nccl_gpu_clock_spread_ns = r.calibration.spread_ns;
  }
  if (!r.note.empty()) {
    m.notes.push_back(r.note);
    report->problems.push_back(c.path + ": " + r.note);
  }
}

template <typename T>
Status MergeKind(std::vector<RankInput>& inputs, TraceWriter& writer, size_t batch_records,
                 MergeReport* report) {
  constexpr RecordKind kKind = RecordTraits<T>::kKind;
  const size_t k = static_cast<size_t>(kKind);
  std::vector<std::vector<T>> per_rank(inputs.size());
  uint64_t total = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    RankInput& in = inputs[i];
    if (in.failed || !in.file->has_table[k]) continue;
    auto read = in.file->reader->template ReadAll<T>();
    if (!read.ok()) {
      in.failed = true;
      in.outcome->status = RankStatus::kCorrupt;
      in.outcome->message = read.status().message() + " (its " + RecordKindName(kKind) +
                            " and later kinds are not in the timeline)";
      report->problems.push_back(in.outcome->message);
      continue;
    }
    std::vector<T>& v = per_rank[i] = std::move(read).value();
    if constexpr (std::is_same_v<T, NcclRecord>) ResolveRankNccl(in, v, report);
    const ClockCorrection clock = ClockCorrection::Of(in.file->meta);
    for (T& r : v) {
      ForEachStringId(r, [&](uint32_t& id) {
        if (id < in.string_map.size()) {
          id = in.string_map[id];
        } else {
          id = 0;  // out of range in a corrupt file: the empty string, counted
          ++in.bad_string_ids;
        }
      });
      ShiftRecordClock(r, clock);
    }
    // The agent does not guarantee order; stable keeps file order among equal starts.
    std::stable_sort(v.begin(), v.end(),
                     [](const T& a, const T& b) { return StartOf(a) < StartOf(b); });
    if constexpr (kHasTimestamps<T>) {
      for (const T& r : v) {
        in.first_ns = std::min(in.first_ns, r.start_ns);
        in.last_ns = std::max(in.last_ns, std::max(r.start_ns, r.end_ns));
      }
    }
    in.outcome->records += v.size();
    total += v.size();
  }

  // k-way merge on (start, rank); within a rank the sorted order stands.
  struct Head {
    uint64_t start;
    uint32_t rank;
    uint32_t input;
  };
  auto later = [](const Head& a, const Head& b) {
    return a.start != b.start ? a.start > b.start : a.rank > b.rank;
  };
  std::priority_queue<Head, std::vector<Head>, decltype(later)> heap(later);
  std::vector<size_t> next(inputs.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!per_rank[i].empty()) {
      heap.push(Head{StartOf(per_rank[i][0]), inputs[i].rank, static_cast<uint32_t>(i)});
    }
  }
  std::vector<Merged<T>> batch;
  batch.reserve(std::min<uint64_t>(std::max<size_t>(batch_records, 1), total));
  while (!heap.empty()) {
    const Head h = heap.top();
    heap.pop();
    std::vector<T>& v = per_rank[h.input];
    size_t& pos = next[h.input];
    batch.push_back(Merged<T>{h.rank, 0, v[pos]});
    if (++pos < v.size()) {
      heap.push(Head{StartOf(v[pos]), h.rank, h.input});
    } else {
      std::vector<T>().swap(v);  // release each rank as soon as it is drained
    }
    if (batch.size() >= batch_records) {
      AON_RETURN_IF_ERROR(writer.AppendMerged<T>(std::span<const Merged<T>>(batch)));
      batch.clear();
    }
  }
  if (!batch.empty()) {
    AON_RETURN_IF_ERROR(writer.AppendMerged<T>(std::span<const Merged<T>>(batch)));
  }
  report->records[k] = total;
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

std::string ClockNote(const std::vector<RankInput>& inputs) {
  std::set<std::string> domains;
  std::vector<std::string> unsynced;
  int64_t worst_bound = 0;
  for (const RankInput& in : inputs) {
    const RankMetadata& m = in.file->meta;
    domains.insert(m.clock_domain.empty() ? "an unnamed clock" : m.clock_domain);
    if (!m.clock_synchronized) {
      unsynced.push_back(std::to_string(in.rank));
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
  if (unsynced.size() == inputs.size()) {
    return "ranks not clock-synchronized: timestamps are each host's " + domain +
           "; same-host ranks share it";
  }
  return std::to_string(unsynced.size()) + " of " + std::to_string(inputs.size()) +
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

Status MergeJob(const MergeOptions& options, MergeReport* report) {
  *report = MergeReport{};
  report->job_dir = options.job_dir;
  const std::string timeline_path = options.timeline_path.empty()
                                        ? (fs::path(options.job_dir) / "timeline.h5").string()
                                        : options.timeline_path;
  const std::string chrome_path = options.chrome_path.empty()
                                      ? FilteredTracePath(options.job_dir, options.chrome_filter)
                                      : options.chrome_path;
  const std::string overview_path = options.overview_path.empty()
                                        ? (fs::path(options.job_dir) / "overview.json").string()
                                        : options.overview_path;
  if (options.write_chrome && chrome_path == timeline_path) {
    return InvalidArgument("--chrome and --output both name '" + chrome_path + "'");
  }
  if (options.write_overview &&
      (overview_path == timeline_path || (options.write_chrome && overview_path == chrome_path))) {
    return InvalidArgument("--overview names the same file as another output: '" + overview_path +
                           "'");
  }

  AON_ASSIGN_OR_RETURN(JobFiles files, ScanJobDir(options.job_dir));
  if (files.rank_files.empty() && files.partial_files.empty()) {
    return NotFound("no rank-*.h5 files in job directory '" + options.job_dir + "'");
  }

  // ---- Open every file; decide the expected ranks -------------------------------
  // Final files first; then the .partial files of ranks no readable final file
  // gives (a killed collector's, readable up to its last flush): salvaged.
  std::vector<Candidate> candidates(files.rank_files.size());
  std::set<uint32_t> final_ranks;
  for (size_t i = 0; i < files.rank_files.size(); ++i) {
    Candidate& c = candidates[i];
    c.path = files.rank_files[i];
    c.name_rank = RankFromFileName(fs::path(c.path).filename().string(), kFinalSuffix);
    OpenCandidate(c, &report->problems);
    if (c.ok() && c.meta.rank >= 0) final_ranks.insert(static_cast<uint32_t>(c.meta.rank));
  }
  for (const std::string& p : files.partial_files) {
    const auto name_rank = RankFromFileName(fs::path(p).filename().string(), kPartialSuffix);
    if (name_rank && final_ranks.count(*name_rank)) continue;  // the final file wins: not opened
    Candidate& c = candidates.emplace_back();
    c.path = p;
    c.partial = true;
    c.name_rank = name_rank;
    OpenCandidate(c, &report->problems);
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
  for (const std::string& p : files.partial_files) {
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

  // ---- Unified strings ------------------------------------------------------------
  StringTable strings;
  std::vector<RankInput> inputs;
  for (uint32_t r = 0; r < report->world_size; ++r) {
    if (owner[r] == nullptr) continue;
    RankInput in;
    in.rank = r;
    in.file = owner[r];
    in.outcome = &report->ranks[r];
    const auto& local = owner[r]->strings.strings();
    in.string_map.resize(local.size());
    for (size_t id = 0; id < local.size(); ++id) in.string_map[id] = strings.Intern(local[id]);
    owner[r]->strings = StringTable();  // the map is all that is needed now
    inputs.push_back(std::move(in));
  }

  // ---- Records, kind by kind --------------------------------------------------------
  AON_ASSIGN_OR_RETURN(
      auto writer, TraceWriter::Create(timeline_path, FileKind::kTimeline, options.write_options));
  const size_t batch = std::max<size_t>(options.output_batch_records, 1);
  Status merge_status;
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    if (merge_status.ok()) merge_status = MergeKind<T>(inputs, *writer, batch, report);
  });
  AON_RETURN_IF_ERROR(merge_status);
  for (const RankInput& in : inputs) {
    // Salvaged .partial files: say how far they go.
    if (!in.file->partial || in.outcome->status != RankStatus::kTruncated) continue;
    std::string& msg = in.outcome->message;
    msg = in.file->path + ": " + kSalvagedNote + "; ";
    msg += in.first_ns != UINT64_MAX
               ? "last record at " + std::to_string(in.last_ns) + " ns (timeline clock)"
               : std::string("no records were flushed");
    if (in.file->meta.truncated != 0) msg += "; the process ended without finishing (killed?)";
    report->problems.push_back(msg);
  }

  // ---- Devices, ranks, strings, attributes -------------------------------------------
  std::vector<Merged<DeviceInfo>> devices;
  for (RankInput& in : inputs) {
    for (DeviceInfo d : in.file->meta.devices) {
      ForEachStringId(
          d, [&](uint32_t& id) { id = id < in.string_map.size() ? in.string_map[id] : 0; });
      devices.push_back(Merged<DeviceInfo>{in.rank, 0, d});
    }
  }
  AON_RETURN_IF_ERROR(
      writer->AppendTable(MergedDeviceSchema(), devices.data(), devices.size(), "meta"));

  uint64_t start_ns = UINT64_MAX, end_ns = 0;
  for (RankInput& in : inputs) {
    if (in.bad_string_ids > 0) {
      report->problems.push_back(in.file->path + ": " + std::to_string(in.bad_string_ids) +
                                 " string ids beyond its string table (merged as \"\")");
    }
    if (in.first_ns != UINT64_MAX) {
      start_ns = std::min(start_ns, in.first_ns);
      end_ns = std::max(end_ns, in.last_ns);
    }
  }
  if (start_ns == UINT64_MAX) {  // no timed record at all: fall back to the capture windows
    for (RankInput& in : inputs) {
      const RankMetadata& m = in.file->meta;
      start_ns = std::min(start_ns, ClockCorrection::Of(m).Apply(m.start_ns));
      end_ns = std::max(end_ns, ClockCorrection::Of(m).Apply(m.end_ns));
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
  }
  for (const RankInput& in : inputs) {
    if (in.first_ns != UINT64_MAX) {
      rows[in.rank].first_ns = in.first_ns;
      rows[in.rank].last_ns = in.last_ns;
    }
  }
  AON_RETURN_IF_ERROR(writer->AppendTable(RankSummarySchema(), rows.data(), rows.size(), "meta"));

  std::set<std::string> job_ids, sources;
  std::vector<std::string> synthetic_ranks;
  bool all_synced = true;
  int64_t worst_bound = 0;
  for (const RankInput& in : inputs) {
    const RankMetadata& m = in.file->meta;
    job_ids.insert(m.job_id);
    sources.insert(m.source);
    if (m.source == "synthetic") synthetic_ranks.push_back(std::to_string(in.rank));
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
  AON_RETURN_IF_ERROR(writer->SetMetaAttribute("clock_note", ClockNote(inputs)));
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
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    const std::string kind = RecordKindName(static_cast<RecordKind>(k));
    AON_RETURN_IF_ERROR(writer->SetMetaAttribute("records_" + kind, report->records[k]));
    AON_RETURN_IF_ERROR(writer->SetMetaAttribute("dropped_" + kind, report->dropped[k]));
  }
  AON_RETURN_IF_ERROR(writer->SetMetaAttribute("problems", Join(report->problems, "\n")));
  AON_RETURN_IF_ERROR(writer->Finish());
  report->timeline_path = timeline_path;

  // The overview first: it is small and always useful, also when the full
  // Chrome JSON is over the limit or cannot be written.
  Status overview_status;
  if (options.write_overview) {
    overview_status = WriteOverview(timeline_path, overview_path, options.overview_options);
    if (overview_status.ok()) report->overview_path = overview_path;
  }
  if (options.write_chrome) {
    ChromeExportOptions export_options;
    export_options.filter = options.chrome_filter;
    export_options.max_records = options.max_trace_records;
    ChromeTraceStats stats;
    Status s = ExportChromeTrace(timeline_path, chrome_path, export_options, &stats);
    if (stats.over_limit) {
      report->chrome_not_written =
          s.message() +
          " (--max-trace-records); export a part of the run instead with: aon-export " +
          timeline_path +
          " --window START:END (seconds from the start, e.g. --window 10:20), --ranks LIST "
          "(e.g. 0-3,8) and/or --kinds LIST (e.g. kernels,nccl); or raise --max-trace-records "
          "(0 = no limit)" +
          (report->overview_path.empty() ? std::string()
                                         : "; " + report->overview_path + " shows the whole run");
    } else {
      AON_RETURN_IF_ERROR(s);
      report->chrome_path = chrome_path;
      report->chrome_records = stats.records;
    }
  }
  return overview_status;
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
