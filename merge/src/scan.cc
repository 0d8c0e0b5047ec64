#include "scan.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>

#include "exchange.h"
#include "join.h"

namespace aon::merge {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kRankPrefix = "rank-";
constexpr std::string_view kFinalSuffix = ".h5";
constexpr std::string_view kPartialSuffix = ".h5.partial";

}  // namespace

std::optional<uint32_t> RankFromFileName(std::string_view name, bool partial) {
  const std::string_view suffix = partial ? kPartialSuffix : kFinalSuffix;
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

StatusOr<ScanList> ListJobDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return NotFound("job directory '" + dir + "' does not exist or is not a directory");
  }
  ScanList files;
  files.listed = true;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(kRankPrefix)) continue;
    std::error_code size_ec;
    const uint64_t size = it->file_size(size_ec);
    const uint64_t bytes = size_ec ? 0 : size;
    if (name.ends_with(kPartialSuffix)) {
      files.partials.push_back({it->path().string(), bytes});
    } else if (name.ends_with(kFinalSuffix)) {
      files.finals.push_back({it->path().string(), bytes});
    }
  }
  if (ec) return IoError("cannot list job directory '" + dir + "': " + ec.message());
  auto by_path = [](const ListedFile& a, const ListedFile& b) {
    return a.path != b.path ? a.path < b.path : a.bytes < b.bytes;
  };
  std::sort(files.finals.begin(), files.finals.end(), by_path);
  std::sort(files.partials.begin(), files.partials.end(), by_path);
  return files;
}

StatusOr<JobListing> ScanJob(MergeComm& comm, const std::string& job_dir) {
  // Joins first, everywhere, then lists: no process lists a pair another is joining.
  JoinResult join;
  std::error_code ec;
  if (fs::is_directory(job_dir, ec)) join = JoinSplitRanks(job_dir);
  AON_RETURN_IF_ERROR(Agree(comm, Status::Ok()));
  auto mine = ListJobDir(job_dir);
  if (mine.ok()) {
    mine->joined = std::move(join.joined);
    mine->join_problems = std::move(join.problems);
  }
  AON_ASSIGN_OR_RETURN(const std::vector<ScanList> all,
                       AllgatherMessage(comm, mine.ok() ? *mine : ScanList{}));
  // The directory must be readable where the merge runs: the first process's
  // error is everyone's.
  AON_RETURN_IF_ERROR(Agree(comm, mine.status()));
  JobListing listing;
  for (size_t q = 0; q < all.size(); ++q) {
    if (!all[q].listed) continue;
    listing.joined.insert(listing.joined.end(), all[q].joined.begin(), all[q].joined.end());
    listing.join_problems.insert(listing.join_problems.end(), all[q].join_problems.begin(),
                                 all[q].join_problems.end());
    for (auto [files, seen] : {std::pair{&all[q].finals, &listing.finals},
                               std::pair{&all[q].partials, &listing.partials}}) {
      for (const ListedFile& f : *files) {
        SeenFile& entry = (*seen)[f.path];
        entry.bytes = std::max(entry.bytes, f.bytes);
        entry.procs.push_back(static_cast<int>(q));
      }
    }
  }
  if (listing.finals.empty() && listing.partials.empty()) {
    return NotFound("no rank-*.h5 files in job directory '" + job_dir + "'");
  }
  return listing;
}

std::vector<int> AssignFiles(const std::vector<std::string>& paths, const SeenFiles& seen,
                             int procs) {
  std::vector<size_t> order(paths.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return seen.at(paths[a]).bytes > seen.at(paths[b]).bytes;
  });
  std::vector<uint64_t> load(procs, 0);
  std::vector<int> who(paths.size(), 0);
  for (size_t i : order) {
    const SeenFile& file = seen.at(paths[i]);
    int best = file.procs.front();
    for (int q : file.procs) {
      if (load[q] < load[best]) best = q;
    }
    who[i] = best;
    load[best] += std::max<uint64_t>(file.bytes, 1);
  }
  return who;
}

}  // namespace aon::merge
