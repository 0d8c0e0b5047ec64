#include "join.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

// "rank-<digits>.pid<digits>.h5": a rank file written beside another of its rank.
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
  return digits(name) && name == ".h5";
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

// Copies every rank-file table of `from` into `to`, in pieces; a table that is
// absent (a .partial holds only what was flushed) adds nothing. With `salvage`
// (the collector's .partial: it may have died writing its last chunk), a table
// is copied up to its first unreadable chunk and what was left is counted in
// `lost`; otherwise an unreadable piece is an error. `span` gets the copied
// records' times.
Status CopyRecords(const TraceReader& from, TraceWriter& to, bool salvage, Span* span,
                   std::string* lost) {
  Status st;
  ForEachRankFileRecordType([&](auto tag) {
    using T = decltype(tag);
    if (!st.ok()) return;
    const TableSchema& schema = RecordTraits<T>::Schema();
    auto rows = from.TableSize(schema);
    if (!rows.ok()) {
      if (rows.status().code() != StatusCode::kNotFound) st = rows.status();
      return;
    }
    std::vector<T> piece;
    uint64_t at = 0;
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
  Status st = CopyRecords(**first, **writer, /*salvage=*/true, &before, &unreadable);
  if (st.ok()) st = CopyRecords(**second, **writer, /*salvage=*/false, &after, &none);
  const std::string collector_name = fs::path(collector.path).filename().string();
  const std::string own_name = fs::path(own.path).filename().string();
  const uint64_t lost_at = own.meta.collector_lost_ns;
  RankMetadata m = own.meta;
  std::string note = "the node collector exited while this rank ran (found gone at " +
                     Seconds(lost_at) + " on the host clock): aon-merge joined " + collector_name +
                     " (what the collector had flushed";
  if (!before.empty()) note += ", records up to " + Seconds(before.last);
  if (!unreadable.empty())
    note += "; its last chunk was cut off where the collector died: " + unreadable + " records lost";
  note += ") and " + own_name + " (what the rank wrote itself: what its ring still held, and after)";
  // Records the collector had read but not flushed are missing: they were made
  // after its last flushed record and before it was found gone.
  if (!before.empty() && lost_at > before.last)
    note += "; records made in the " + Seconds(lost_at - before.last) +
            " before the collector was found gone may be missing (read by it, never written)";
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
    if (name.ends_with(".h5.partial")) {
      partials.push_back(it->path().string());
    } else if (IsBesideName(name)) {
      std::optional<RankMetadata> m = MetadataOf(it->path().string());
      if (m && m->collector_lost_ns != 0) own.push_back({it->path().string(), std::move(*m)});
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
