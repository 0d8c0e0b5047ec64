// Timeline -> OTF2 archive: the trace-event model (trace_builder.h) through the
// OTF2 writer (otf2_writer.h), in passes over groups of ranks.
#include "aon/export/otf2_trace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>
#include <vector>

#if AON_HAVE_OTF2
#include "otf2_writer.h"
#endif
#include "aon/base/secure_fs.h"
#include "timeline_meta.h"
#include "trace_builder.h"

namespace aon::merge {

namespace fs = std::filesystem;

std::string FilteredOtf2Path(const std::string& dir, const ExportFilter& filter) {
  const std::string name = filter.empty() ? "otf2" : "otf2-" + filter.Label();
  return (fs::path(dir) / name).string();
}

#if !AON_HAVE_OTF2
Status ExportOtf2Trace(const std::string&, const std::string& dir, const Otf2ExportOptions&,
                       Otf2TraceStats* stats) {
  if (stats != nullptr) *stats = Otf2TraceStats{};
  return Unimplemented("cannot write the OTF2 archive '" + dir +
                       "': this AON was built without libotf2 (apt-get install "
                       "libotf2-trace-dev, then build again)");
}
#else
namespace {

// The anchor file of an archive AON wrote: a regular file naming AON as the
// archive's creator (Otf2Writer::Open), in its first 64 KiB.
bool AonAnchor(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  std::string head(64 << 10, '\0');
  ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, head.data(), head.size()) : -1;
  close(fd);
  if (n <= 0) return false;
  head.resize(static_cast<size_t>(n));
  return head.find(kOtf2Creator) != std::string::npos;
}

// A directory we may replace: a real directory (not a link) of ours holding an
// anchor AON wrote (`anchor` = true) or anything (a .partial of an earlier run).
Status CheckOurs(const std::string& path, bool anchor) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    return Internal("'" + path + "': " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    return InvalidArgument("'" + path +
                           "' exists and is not a directory of this user's (a link, a file "
                           "or another user's): not replaced");
  }
  if (anchor && !AonAnchor((fs::path(path) / "traces.otf2").string())) {
    return InvalidArgument("'" + path +
                           "' exists and is not an OTF2 archive AON wrote (no traces.otf2 "
                           "with AON as its creator): not replaced");
  }
  return Status::Ok();
}

// Counts the builder's tracks per rank (a dry run of the export).
class TrackCounter final : public trace::TraceSink {
 public:
  void OnProcess(const trace::ProcessInfo&) override {}
  void OnTrack(uint32_t, const trace::TrackInfo& track) override { ++tracks_[track.pid]; }
  void OnSlice(const trace::Slice&) override {}
  void OnCounter(const trace::CounterSample&) override {}
  uint64_t Tracks(uint32_t rank) const {
    auto it = tracks_.find(rank);
    return it == tracks_.end() ? 0 : it->second;
  }

 private:
  std::map<uint32_t, uint64_t> tracks_;
};

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

// Stage: the archive's directory, the name given less its trailing slashes.
StatusOr<std::string> ArchiveDir(const std::string& dir_given) {
  std::string dir = dir_given;  // "out/" is "out"
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty() || dir == "/" || fs::path(dir).filename() == "." ||
      fs::path(dir).filename() == "..") {
    return InvalidArgument("'" + dir_given + "' cannot be the OTF2 archive's directory");
  }
  return dir;
}

// Stage: the names the archive takes are free, or ours (an old .partial is removed).
Status ClearTheWay(const std::string& dir, const std::string& partial) {
  if (Exists(dir)) AON_RETURN_IF_ERROR(CheckOurs(dir, true));
  if (Exists(partial)) {
    AON_RETURN_IF_ERROR(CheckOurs(partial, false));
    std::error_code ec;
    fs::remove_all(partial, ec);
  }
  return Status::Ok();
}

// Stage: the path libotf2 writes at: the held directory through /proc, or by name.
std::string WriteAt(int fd, const std::string& partial, const struct stat& made) {
  std::string write_at = "/proc/self/fd/" + std::to_string(fd);
  if (struct stat via{};
      stat(write_at.c_str(), &via) != 0 || via.st_dev != made.st_dev || via.st_ino != made.st_ino) {
    write_at = partial;  // no /proc: by name, in a directory mode 0700 of ours
  }
  return write_at;
}

// Stage: the ranks to export, grouped into passes of at most `cap` tracks.
Status PlanPasses(const TraceReader& reader, const TimelineView& timeline,
                  const std::string& timeline_path, const Otf2ExportOptions& options,
                  uint64_t chunk, std::vector<std::vector<uint32_t> >* passes) {
  std::vector<uint32_t> ranks;
  for (const RankSummary& row : timeline.ranks) {
    if (RankMerged(static_cast<RankStatus>(row.status)) && options.filter.KeepsRank(row.rank)) {
      ranks.push_back(row.rank);
    }
  }
  const uint64_t cap = std::max<uint64_t>(1, options.memory_bytes / chunk);
  if (ranks.size() > 1) {
    TrackCounter counter;
    TraceBuildOptions build;
    build.filter = options.filter;
    build.flows = FlowLinks::kEveryCorrelation;
    if (Status s = BuildTraceEvents(reader, timeline, build, &counter, nullptr)
                       .WithContext("exporting '" + timeline_path + "'");
        !s.ok()) {
      return s;
    }
    uint64_t open = 0;
    for (uint32_t rank : ranks) {
      const uint64_t tracks = counter.Tracks(rank);
      if (passes->empty() || (open + tracks > cap && !passes->back().empty())) {
        passes->emplace_back();
        open = 0;
      }
      passes->back().push_back(rank);
      open += tracks;
    }
  } else {
    passes->push_back(ranks);
  }
  return Status::Ok();
}

// Stage: the archive itself: each pass's events through the writer, then its properties.
Status WriteArchive(Otf2Writer& out, const TraceReader& reader, const TimelineView& timeline,
                    const std::string& timeline_path, const Otf2ExportOptions& options,
                    const std::vector<std::vector<uint32_t> >& passes, uint64_t* records) {
  if (Status s = out.Open(); !s.ok()) return s;
  for (const std::vector<uint32_t>& pass : passes) {
    if (pass.empty()) continue;
    TraceBuildOptions build;
    build.filter = options.filter;
    build.filter.ranks.clear();
    for (uint32_t rank : pass) build.filter.ranks.emplace_back(rank, rank);
    build.flows = FlowLinks::kEveryCorrelation;  // OTF2 has no flows: nothing to look up
    TraceBuildStats built;
    out.BeginPass();
    Status s = BuildTraceEvents(reader, timeline, build, &out, &built)
                   .WithContext("exporting '" + timeline_path + "'");
    if (s.ok()) s = out.EndPass();
    if (!s.ok()) return s;
    *records += built.records;
  }
  std::vector<std::pair<std::string, std::string> > properties = {
      {"GENERATOR", "aon-export"},
      {"TIMELINE", timeline_path},
      {"JOB_ID", MetaStringOr(reader, "job_id")},
      {"SOURCE", MetaStringOr(reader, "source")},
      {"CLOCK", "ns on the AON timeline clock (the reference rank's CLOCK_MONOTONIC); " +
                    MetaStringOr(reader, "clock_note")},
      {"START_NS", std::to_string(timeline.t0)},
      {"RECORDS", std::to_string(*records)},
  };
  if (!options.filter.empty()) properties.emplace_back("FILTER", options.filter.Describe());
  return out.Finish(timeline.t0, properties);
}

// Stage: the whole archive takes the directory's name, in place of an older one.
Status ReplaceArchive(const std::string& dir, const std::string& partial) {
  // Replace an older archive only now that the new one is whole: it moves to a
  // fresh directory of its own (nothing else is touched) and is removed once the
  // new archive has its name; if that fails, it gets its name back.
  std::error_code ec;
  std::string old;
  if (Exists(dir)) {
    std::string tmpl = dir + ".old-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      return Internal("replacing '" + dir + "': " + std::strerror(errno));
    }
    old = tmpl;
    if (rename(dir.c_str(), old.c_str()) != 0) {  // onto the empty directory
      const int err = errno;
      rmdir(old.c_str());
      return Internal("replacing '" + dir + "': " + std::strerror(err));
    }
  }
  if (rename(partial.c_str(), dir.c_str()) != 0) {
    const int err = errno;
    if (!old.empty()) rename(old.c_str(), dir.c_str());
    return Internal("renaming '" + partial + "' to '" + dir + "': " + std::strerror(err));
  }
  if (!old.empty()) fs::remove_all(old, ec);
  return Status::Ok();
}

// Stage: the stats of the archive written.
void FillStats(const Otf2WriterCounts& c, uint64_t records, size_t passes, const std::string& dir,
               Otf2TraceStats* stats) {
  stats->records = records;
  stats->events = c.events;
  stats->collectives = c.collectives;
  stats->collectives_as_regions = c.collectives_as_regions;
  stats->metrics = c.metrics;
  stats->overlap_rows = c.overlap_rows;
  stats->locations = c.locations;
  stats->passes = static_cast<uint32_t>(passes);
  stats->peak_pool_bytes = c.peak_pool_bytes;
  stats->anchor = (fs::path(dir) / "traces.otf2").string();
}

}  // namespace

Status ExportOtf2Trace(const std::string& timeline_path, const std::string& dir_given,
                       const Otf2ExportOptions& options, Otf2TraceStats* stats) {
  if (stats != nullptr) *stats = Otf2TraceStats{};
  AON_ASSIGN_OR_RETURN(const std::string dir, ArchiveDir(dir_given));
  AON_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(timeline_path));
  AON_ASSIGN_OR_RETURN(TimelineView timeline, TimelineView::Read(*reader, timeline_path));
  const std::string partial = dir + ".partial";
  AON_RETURN_IF_ERROR(ClearTheWay(dir, partial));
  // The archive is written into a directory only this user may enter, made
  // here (mkdir fails on anything already there) and held open. libotf2 opens
  // its files by path: it gets /proc/self/fd/N, which leads into this
  // directory even if its name in the parent is moved and replaced by a link
  // meanwhile. The name is checked again before the final rename.
  if (mkdir(partial.c_str(), 0700) != 0) {
    return Internal("creating '" + partial + "': " + std::strerror(errno));
  }
  auto discard = [&](Status s) {
    std::error_code ec;
    fs::remove_all(partial, ec);
    return s;
  };
  struct Held {
    int fd;
    ~Held() {
      if (fd >= 0) close(fd);
    }
  } const held{open(partial.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
  if (held.fd < 0) return discard(Internal("opening '" + partial + "': " + std::strerror(errno)));
  struct stat made {};
  if (fstat(held.fd, &made) != 0 || made.st_uid != geteuid()) {
    return discard(Internal("'" + partial + "' is not the directory just made"));
  }
  const std::string write_at = WriteAt(held.fd, partial, made);

  // The ranks to export, in passes whose locations fit the chunk pool: a
  // location holds one chunk from its first event to the end of its pass. The
  // builder's tracks per rank, counted first, decide (lanes for NVTX ranges
  // and overlapping slices come on top).
  const uint64_t chunk =
      std::clamp<uint64_t>(options.chunk_bytes, kOtf2MinChunkBytes, kOtf2MaxChunkBytes);
  std::vector<std::vector<uint32_t> > passes;
  if (Status s = PlanPasses(*reader, timeline, timeline_path, options, chunk, &passes); !s.ok()) {
    return discard(s);
  }

  Otf2WriterLimits limits;
  limits.chunk_bytes = chunk;
  limits.memory_bytes = options.memory_bytes;
  Otf2Writer out(write_at, limits, partial);
  uint64_t records = 0;
  if (Status s = WriteArchive(out, *reader, timeline, timeline_path, options, passes, &records);
      !s.ok()) {
    return discard(s);
  }
  // libotf2 made its files and traces/ with the umask's modes: 0600 and 0700.
  if (Status s = MakeTreePrivate(held.fd, partial); !s.ok()) return discard(s);
  if (struct stat now{};
      lstat(partial.c_str(), &now) != 0 || now.st_dev != made.st_dev || now.st_ino != made.st_ino) {
    return Internal("'" + partial + "' was moved or replaced while the archive was written: " +
                    "not renamed to '" + dir + "'");
  }
  if (Status s = ReplaceArchive(dir, partial); !s.ok()) return discard(s);
  if (stats != nullptr) FillStats(out.counts(), records, passes.size(), dir, stats);
  return Status::Ok();
}
#endif  // AON_HAVE_OTF2

}  // namespace aon::merge
