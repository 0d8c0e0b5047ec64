#include "open.h"

#include <filesystem>
#include <string>
#include <utility>

#include "exchange.h"
#include "reconcile.h"

namespace aon::merge {
namespace {

namespace fs = std::filesystem;

RankStatus ClassifyOpenError(const Status& s) {
  if (s.code() == StatusCode::kUnimplemented) return RankStatus::kUnsupported;
  // HDF5's own wording when the file is shorter than its superblock says.
  if (s.message().find("truncated file") != std::string::npos) return RankStatus::kTruncated;
  return RankStatus::kCorrupt;
}

// Opens candidates [first, first + who.size()) that `who` gives this process,
// and tells every process what each found.
Status OpenShared(MergeComm& comm, OpenedJob& job, size_t first, const std::vector<int>& who) {
  CandidateSummaries mine;
  for (size_t i = 0; i < who.size(); ++i) {
    Candidate& c = job.candidates[first + i];
    c.opened_by = who[i];
    if (who[i] != comm.rank()) continue;
    c.found = OpenRankFile(c.path, c.partial, &job.strings[first + i]);
    mine.opened.push_back({first + i, c.found});
  }
  AON_ASSIGN_OR_RETURN(std::vector<CandidateSummaries> all, AllgatherMessage(comm, mine));
  for (size_t q = 0; q < all.size(); ++q) {
    if (static_cast<int>(q) == comm.rank()) continue;
    for (CandidateSummary& s : all[q].opened) {
      if (s.index < first || s.index >= first + who.size() ||
          who[s.index - first] != static_cast<int>(q)) {
        return Internal("merge process " + std::to_string(q) + " sent what it found in candidate " +
                        std::to_string(s.index) + ", which it was not given");
      }
      job.candidates[s.index].found = std::move(s.found);
    }
  }
  return Status::Ok();
}

}  // namespace

OpenResult OpenRankFile(const std::string& path, bool partial, StringTable* strings) {
  OpenResult f;
  auto opened = TraceReader::Open(path);
  if (!opened.ok()) {
    f.status = ClassifyOpenError(opened.status());
    f.reason = opened.status().message();
    return f;
  }
  std::unique_ptr<TraceReader> reader = std::move(opened).value();
  auto fail = [&](std::string reason) {
    f.status = RankStatus::kCorrupt;
    f.reason = std::move(reason);
    return f;
  };
  if (reader->kind() != FileKind::kRank) {
    return fail(path + ": is a merged timeline, not a rank trace");
  }
  auto meta = reader->ReadRankMetadata();
  if (!meta.ok()) return fail("unreadable rank metadata: " + meta.status().message());
  f.meta = std::move(meta).value();
  f.meta_read = true;
  if (f.meta.rank < 0) {
    return fail(path + ": its metadata has no rank (rank " + std::to_string(f.meta.rank) + ")");
  }
  auto table = reader->ReadStrings();
  if (!table.ok() && partial && table.status().code() == StatusCode::kNotFound) {
    // A collector may write the string table only when it finishes.
    f.open_problems.push_back(path + ": has no string table yet; its names are merged as \"\"");
    table = StringTable();
  }
  if (!table.ok()) return fail("unreadable string table: " + table.status().message());
  *strings = std::move(table).value();
  Status table_status;
  ForEachRankFileRecordType([&](auto tag) {
    using T = decltype(tag);
    if (!table_status.ok()) return;
    const size_t k = static_cast<size_t>(RecordTraits<T>::kKind);
    auto n = reader->TableSize(RecordTraits<T>::Schema());
    if (n.ok()) {
      f.has_table[k] = true;
      f.table_rows[k] = *n;
    } else if (n.status().code() == StatusCode::kNotFound) {
      // A .partial file has only the tables flushed so far, and a file older than
      // the kind has none: expected, not a problem.
      if (partial || reader->format_minor() < KindSinceMinor<T>()) return;
      f.open_problems.push_back(path + ": has no /records/" +
                                RecordKindName(RecordTraits<T>::kKind) + " table; merged as empty");
    } else {
      table_status = n.status();
    }
  });
  if (!table_status.ok()) return fail(table_status.message());
  return f;
}

StatusOr<OpenedJob> OpenJob(MergeComm& comm, const JobListing& listing) {
  OpenedJob job;
  std::vector<std::string> paths;
  for (const auto& [path, seen] : listing.finals) {
    Candidate& c = job.candidates.emplace_back();
    c.path = path;
    c.name_rank = RankFromFileName(fs::path(path).filename().string(), false);
    paths.push_back(path);
  }
  job.strings.resize(job.candidates.size());
  AON_RETURN_IF_ERROR(OpenShared(comm, job, 0, AssignFiles(paths, listing.finals, comm.size())));

  // A final file wins over a .partial file of its rank: that one is not opened.
  const std::set<uint32_t> final_ranks = RanksOfReadableFiles(job.candidates);
  const size_t first = job.candidates.size();
  std::vector<std::string> to_open;
  std::vector<size_t> opened_at;
  for (const auto& [path, seen] : listing.partials) {
    Candidate& c = job.candidates.emplace_back();
    c.path = path;
    c.partial = true;
    c.name_rank = RankFromFileName(fs::path(path).filename().string(), true);
    if (c.name_rank && final_ranks.count(*c.name_rank) > 0) continue;
    to_open.push_back(path);
    opened_at.push_back(job.candidates.size() - 1);
  }
  job.strings.resize(job.candidates.size());
  // Over all the .partial candidates: -1 (opened by no process) for the skipped ones.
  const std::vector<int> assigned = AssignFiles(to_open, listing.partials, comm.size());
  std::vector<int> who(job.candidates.size() - first, -1);
  for (size_t j = 0; j < opened_at.size(); ++j) who[opened_at[j] - first] = assigned[j];
  AON_RETURN_IF_ERROR(OpenShared(comm, job, first, who));
  return job;
}

}  // namespace aon::merge
