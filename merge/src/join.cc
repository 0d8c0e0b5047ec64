#include "join.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>

#include "aon/format/trace_file.h"

namespace aon::merge {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPartialSuffix = ".partial";
constexpr std::string_view kJoinedSuffix = ".joined";
constexpr uint64_t kRowsPerRead = 1 << 16;
// The collector writes chunks of this many rows (collector.cc): the unit in
// which a .partial it died writing is salvaged.
constexpr uint64_t kCollectorChunkRows = 4096;
// A lock left by a merge that died is taken over after this long.
constexpr int64_t kStaleLockSeconds = 600;

// "rank-<digits>.pid<digits>.h5" or "rank-<digits>.pid<digits>.<digits>.h5"
// (FreeRankFileName): a rank file written beside another of its rank.
bool IsBesideName(std::string_view name) {
  auto digits = [&](std::string_view& s) {
    size_t n = 0;
    while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
    s.remove_prefix(n);
    return n > 0;
  };
  if (!name.starts_with("rank-")) return false;
  name.remove_prefix(5);
  if (!digits(name) || !name.starts_with(".pid")) return false;
  name.remove_prefix(4);
  if (!digits(name)) return false;
  if (name.starts_with(".") && name != ".h5") {
    name.remove_prefix(1);
    if (!digits(name)) return false;
  }
  return name == ".h5";
}

struct RankPart {
  std::string path;
  RankMetadata meta;
};

// The metadata of a rank file, or nothing (unreadable: not this phase's to say).
std::optional<RankMetadata> MetadataOf(const std::string& path) {
  auto reader = TraceReader::Open(path);
  if (!reader.ok()) return std::nullopt;
  auto meta = (*reader)->ReadRankMetadata();
  if (!meta.ok()) return std::nullopt;
  return std::move(meta).value();
}

// The collector-side .partial of `own` (same rank and process), if any.
std::optional<RankPart> CollectorPartOf(const RankPart& own, const std::vector<std::string>& partials) {
  for (const std::string& p : partials) {
    std::optional<RankMetadata> m = MetadataOf(p);
    if (m && m->rank == own.meta.rank && m->pid == own.meta.pid) return RankPart{p, std::move(*m)};
  }
  return std::nullopt;
}

// An exclusive lock file beside the output (O_EXCL), taken over when stale.
class JoinLock {
 public:
  explicit JoinLock(std::string path) : path_(std::move(path)) {
    for (int attempt = 0; attempt < 2 && !held_; ++attempt) {
      const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd >= 0) {
        close(fd);
        held_ = true;
        break;
      }
      struct stat st {};
      if (errno != EEXIST || lstat(path_.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
          st.st_uid != geteuid() || std::time(nullptr) - st.st_mtime < kStaleLockSeconds)
        break;
      unlink(path_.c_str());  // our own, left by a merge that died long ago
    }
  }
  ~JoinLock() {
    if (held_) unlink(path_.c_str());
  }
  JoinLock(const JoinLock&) = delete;
  JoinLock& operator=(const JoinLock&) = delete;
  bool held() const { return held_; }

 private:
  std::string path_;
  bool held_ = false;
};

// The earliest and latest start_ns of the records copied from one part.
struct Span {
  uint64_t first = std::numeric_limits<uint64_t>::max(), last = 0;
  void Add(uint64_t t) {
    if (t == 0) return;
    first = std::min(first, t);
    last = std::max(last, t);
  }
  bool empty() const { return last == 0; }
};

// Rows of each kind copied from the collector's part: where the rank's own
// part may start over (see Overlap).
using CopiedRows = std::array<uint64_t, kRecordKindCount>;

template <typename T>
bool SameRecord(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Records of kind T at the start of the rank's own part that the collector's
// part holds too, at its end (its first `copied` rows). The collector releases
// ring space only once a flush is in its file; one that died after writing a
// flush and before releasing it leaves those records in the ring, and the rank
// reads them again. Both parts hold the ring's records in ring order, so such
// records are a prefix of one part equal to a suffix of the other: found from
// the collector's last record, then checked whole. 0 when there is none.
template <typename T>
uint64_t Overlap(const TraceReader& collector, uint64_t copied, const TraceReader& own,
                           uint64_t own_rows) {
  const TableSchema& schema = RecordTraits<T>::Schema();
  if (copied == 0 || own_rows == 0) return uint64_t{0};
  // A part that cannot be read here (a .partial cut off in its last chunk)
  // has no overlap to find: CopyRecords salvages or refuses it.
  T last{};
  if (!collector.ReadTable(schema, copied - 1, 1, &last).ok()) return uint64_t{0};
  // Where the collector's last record is in the own part (it cannot be further
  // in than the collector's row count).
  const uint64_t limit = std::min(copied, own_rows);
  std::vector<T> piece;
  uint64_t k = 0;
  for (uint64_t at = 0; at < limit && k == 0; at += piece.size()) {
    piece.assign(std::min<uint64_t>(kRowsPerRead, limit - at), T{});
    if (!own.ReadTable(schema, at, piece.size(), piece.data()).ok()) return uint64_t{0};
    for (size_t i = 0; i < piece.size(); ++i) {
      if (SameRecord(piece[i], last)) {
        k = at + i + 1;
        break;
      }
    }
  }
  if (k == 0) return uint64_t{0};
  std::vector<T> theirs, mine;
  for (uint64_t at = 0; at < k; at += mine.size()) {
    const uint64_t n = std::min<uint64_t>(kRowsPerRead, k - at);
    theirs.assign(n, T{});
    mine.assign(n, T{});
    if (!collector.ReadTable(schema, copied - k + at, n, theirs.data()).ok() ||
        !own.ReadTable(schema, at, n, mine.data()).ok())
      return uint64_t{0};
    for (uint64_t i = 0; i < n; ++i) {
      if (!SameRecord(theirs[i], mine[i])) return uint64_t{0};
    }
  }
  return k;
}

// Copies every rank-file table of `from` into `to`, in pieces; a table that is
// absent (a .partial holds only what was flushed) adds nothing. With `salvage`
// (a .partial: its writer may have died writing its last chunk), a table is
// copied up to its first unreadable chunk and what was left is counted in
// `lost`; otherwise an unreadable piece is an error. The rows copied of each
// kind go to `copied` (if not null). With `earlier` (the collector's part, of which
// `earlier_rows` were copied), records it already held are left out and
// counted in `twice`. `span` gets the copied records' times.
Status CopyRecords(const TraceReader& from, TraceWriter& to, bool salvage, Span* span,
                   std::string* lost, CopiedRows* copied, const TraceReader* earlier,
                   const CopiedRows* earlier_rows, uint64_t* twice) {
  Status st;
  ForEachRankFileRecordType([&](auto tag) {
    using T = decltype(tag);
    if (!st.ok()) return;
    const TableSchema& schema = RecordTraits<T>::Schema();
    const size_t kind = static_cast<size_t>(RecordTraits<T>::kKind);
    auto rows = from.TableSize(schema);
    if (!rows.ok()) {
      if (rows.status().code() != StatusCode::kNotFound) st = rows.status();
      return;
    }
    std::vector<T> piece;
    uint64_t at = 0;
    if (earlier != nullptr) {
      at = Overlap<T>(*earlier, (*earlier_rows)[kind], from, *rows);
      *twice += at;
    }
    // A failed read is retried in chunks of the collector's size, to keep every
    // readable one.
    uint64_t step = kRowsPerRead;
    while (at < *rows && st.ok()) {
      piece.resize(std::min<uint64_t>(step, *rows - at));
      Status read = from.ReadTable(schema, at, piece.size(), piece.data());
      if (!read.ok()) {
        if (!salvage) {
          st = read;
        } else if (step > kCollectorChunkRows) {
          step = kCollectorChunkRows;
          continue;
        } else {
          *lost += std::string(lost->empty() ? "" : ", ") + std::to_string(*rows - at) + " of " +
                   std::to_string(*rows) + " " + RecordKindName(RecordTraits<T>::kKind);
        }
        break;
      }
      if constexpr (requires(const T& r) { r.start_ns; }) {
        for (const T& r : piece) span->Add(r.start_ns);
      }
      st = to.Append<T>(piece);
      at += piece.size();
    }
    if (copied != nullptr) (*copied)[kind] = at;
  });
  return st;
}

std::string Seconds(uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(ns) / 1e9);
  return buf;
}

// Writes `target` from the collector's part and the rank's own; on success the
// inputs are renamed to <name>.joined. The output is written under a hidden
// name (`temp`, no rank file the merge lists) and takes its own name only once
// whole; until then no input is touched, so a merge that dies here leaves the
// two parts as they were. Says what it joined.
Status Join(const RankPart& collector, const RankPart& own, const std::string& target,
            const std::string& temp, std::string* said) {
  auto first = TraceReader::Open(collector.path);
  if (!first.ok()) return first.status();
  auto second = TraceReader::Open(own.path);
  if (!second.ok()) return second.status();
  auto strings = (*second)->ReadStrings();  // the agent's own table: every name of both parts
  if (!strings.ok()) return strings.status();
  WriteOptions options;
  auto writer = TraceWriter::Create(temp, FileKind::kRank, options);
  if (!writer.ok()) return writer.status();
  Span before, after;
  std::string unreadable, none;
  CopiedRows copied{};
  uint64_t twice = 0;
  // The rank's own part is a .partial too when the rank was killed after it
  // took over (it flushed it every second): salvaged the same way.
  const bool own_unfinished = own.path.ends_with(kPartialSuffix);
  Status st = CopyRecords(**first, **writer, /*salvage=*/true, &before, &unreadable, &copied,
                          nullptr, nullptr, nullptr);
  if (st.ok())
    st = CopyRecords(**second, **writer, own_unfinished, &after, &none, nullptr, first->get(),
                     &copied, &twice);
  const std::string collector_name = fs::path(collector.path).filename().string();
  const std::string own_name = fs::path(own.path).filename().string();
  const uint64_t lost_at = own.meta.collector_lost_ns;
  RankMetadata m = own.meta;
  std::string note = "the node collector exited while this rank ran (found gone at " +
                     Seconds(lost_at) + " on the host clock): aon-merge joined " + collector_name +
                     " (what the collector had flushed";
  if (!before.empty()) note += ", records up to " + Seconds(before.last);
  if (!unreadable.empty())
    note += "; its last chunk was cut off where the collector died: " + unreadable +
            " records unreadable there (a flush not yet freed from the ring: the rank's own part "
            "holds them)";
  note += ") and " + own_name +
          " (what the rank wrote itself: what its ring still held, from the collector's last "
          "flush on, and after";
  if (own_unfinished) {
    m.truncated = 1;
    note += "; the rank ended without finishing it (killed?): records up to its last flush";
    if (!after.empty()) note += ", " + Seconds(after.last);
    if (!none.empty()) note += "; cut off in its last chunk: " + none + " records unreadable";
  }
  note += ")";
  if (twice > 0)
    note += "; " + std::to_string(twice) +
            " records were in both (the collector died after writing them and before freeing "
            "their ring space): kept once";
  m.notes.push_back(note);
  if (st.ok()) st = (*writer)->WriteRankMetadata(m);
  if (st.ok()) st = (*writer)->WriteStrings(*strings);
  if (st.ok()) st = (*writer)->Finish();
  if (!st.ok()) {
    writer->reset();
    unlink((temp + std::string(kPartialSuffix)).c_str());
    return st;
  }
  // The output takes its name (never over a file: the caller holds the lock and
  // saw none), then the inputs step aside.
  struct stat seen {};
  if (lstat(target.c_str(), &seen) == 0 || std::rename(temp.c_str(), target.c_str()) != 0) {
    unlink(temp.c_str());
    return IoError("cannot name the joined file " + target);
  }
  std::string kept;
  for (const std::string& input : {collector.path, own.path}) {
    if (std::rename(input.c_str(), (input + std::string(kJoinedSuffix)).c_str()) != 0)
      kept += " (" + fs::path(input).filename().string() + " could not be renamed: " +
              std::strerror(errno) + ")";
  }
  *said = target + ": " + note + kept;
  return Status::Ok();
}

}  // namespace

JoinResult JoinSplitRanks(const std::string& dir) {
  JoinResult out;
  std::vector<std::string> partials;
  std::vector<RankPart> own;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with("rank-") || it->is_symlink(ec)) continue;
    // A rank's own part names the collector's loss in its metadata (also as a
    // .partial: the rank took over, then was killed); a collector's never does.
    const bool partial = name.ends_with(".h5.partial");
    const std::string_view stem =
        partial ? std::string_view(name).substr(0, name.size() - kPartialSuffix.size()) : name;
    std::optional<RankMetadata> m;
    if (IsBesideName(stem)) m = MetadataOf(it->path().string());
    if (m && m->collector_lost_ns != 0) {
      own.push_back({it->path().string(), std::move(*m)});
    } else if (partial) {
      partials.push_back(it->path().string());
    }
  }
  std::sort(partials.begin(), partials.end());
  for (const RankPart& mine : own) {
    std::optional<RankPart> collector = CollectorPartOf(mine, partials);
    if (!collector) continue;  // the collector died before it created its file
    std::string target = collector->path.substr(0, collector->path.size() - kPartialSuffix.size());
    struct stat st {};
    if (lstat(target.c_str(), &st) == 0) {
      out.problems.push_back(mine.path + ": not joined with " + collector->path + ": " + target +
                             " exists already; merged from " +
                             fs::path(mine.path).filename().string() + " alone");
      continue;
    }
    // Hidden names (a leading '.'): no rank file of the merge's listing.
    const std::string dir_of = fs::path(target).parent_path().string();
    const std::string stem = fs::path(target).filename().string();
    JoinLock lock(dir_of + "/." + stem + ".joining");
    if (!lock.held()) continue;  // another merge process joins it
    if (lstat(collector->path.c_str(), &st) != 0 || lstat(target.c_str(), &st) == 0)
      continue;  // joined meanwhile
    std::string said;
    Status joined = Join(*collector, mine, target, dir_of + "/.joining-" + stem, &said);
    if (joined.ok()) {
      out.joined.push_back(said);
    } else {
      out.problems.push_back(mine.path + " and " + collector->path +
                             ": the rank's two parts could not be joined (" + joined.message() +
                             "); merged from " + fs::path(mine.path).filename().string() + " alone");
    }
  }
  return out;
}

}  // namespace aon::merge
