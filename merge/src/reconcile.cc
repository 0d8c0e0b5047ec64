#include "reconcile.h"

#include <algorithm>
#include <filesystem>

#include "scan.h"

namespace aon::merge {

std::set<uint32_t> RanksOfReadableFiles(std::span<const Candidate> candidates) {
  std::set<uint32_t> ranks;
  for (const Candidate& c : candidates) {
    if (c.ok() && c.found.meta.rank >= 0) ranks.insert(static_cast<uint32_t>(c.found.meta.rank));
  }
  return ranks;
}

bool Reconciliation::nothing_to_merge() const {
  return std::none_of(merged_from.begin(), merged_from.end(),
                      [](const std::optional<size_t>& f) { return f.has_value(); });
}

Reconciliation Reconcile(std::string_view job_dir, std::span<const Candidate> candidates) {
  Reconciliation out;
  std::vector<std::string>& problems = out.problems;
  for (const Candidate& c : candidates) {
    for (const std::string& p : c.found.open_problems) problems.push_back(p);
  }
  // A rank beyond kMaxWorldSize makes a readable file corrupt: decided here, on
  // a copy of each candidate's status.
  std::vector<RankStatus> status(candidates.size());
  std::vector<std::string> reason(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    status[i] = candidates[i].found.status;
    reason[i] = candidates[i].found.reason;
  }
  auto ok = [&](size_t i) { return candidates[i].opened() && status[i] == RankStatus::kOk; };

  // ---- The expected ranks -------------------------------------------------------------
  int64_t world = 0;
  bool any_ok = false;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!ok(i)) continue;
    const Candidate& c = candidates[i];
    const RankMetadata& m = c.found.meta;
    if (m.rank >= kMaxWorldSize) {
      status[i] = RankStatus::kCorrupt;
      reason[i] = c.path + ": rank " + std::to_string(m.rank) + " is implausible";
      continue;
    }
    any_ok = true;
    world = std::max<int64_t>(world, m.rank + 1);
    if (m.world_size > kMaxWorldSize) {
      problems.push_back(c.path + ": world_size " + std::to_string(m.world_size) +
                         " is implausible; ignored");
    } else {
      world = std::max<int64_t>(world, m.world_size);
    }
  }
  if (!any_ok) {
    // Nothing to merge: size the table from what the bad files claim, to report them.
    for (const Candidate& c : candidates) {
      if (c.partial) continue;  // an unreadable .partial file says nothing about the job
      if (auto r = c.claimed_rank(); r && *r < kMaxWorldSize) {
        world = std::max<int64_t>(world, int64_t{*r} + 1);
      }
    }
  }
  out.world_size = static_cast<uint32_t>(world);
  out.ranks.resize(out.world_size);
  out.merged_from.resize(out.world_size);
  for (uint32_t r = 0; r < out.world_size; ++r) {
    RankOutcome& o = out.ranks[r];
    o.rank = r;
    o.status = RankStatus::kMissing;
    o.message = "no " + RankFileName(r) + " in '" + std::string(job_dir) + "'";
  }
  const auto owner_path = [&](uint32_t rank) -> const std::string& {
    return candidates[*out.merged_from[rank]].path;
  };

  // ---- Readable files claim their rank first (candidate order) --------------------------
  std::vector<bool> superseded(candidates.size(), false);
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!ok(i)) continue;
    const Candidate& c = candidates[i];
    const RankMetadata& m = c.found.meta;
    const auto rank = static_cast<uint32_t>(m.rank);
    if (c.name_rank && *c.name_rank != rank) {
      problems.push_back(c.path + ": file name says rank " + std::to_string(*c.name_rank) +
                         " but its metadata says rank " + std::to_string(rank) +
                         "; merged as rank " + std::to_string(rank));
    }
    if (out.merged_from[rank]) {
      if (c.partial) {
        superseded[i] = true;  // reported with the other .partial files
        continue;
      }
      problems.push_back(c.path + ": duplicate: claims rank " + std::to_string(rank) +
                         ", already merged from " + owner_path(rank) + "; skipped");
      continue;
    }
    out.merged_from[rank] = i;
    RankOutcome& o = out.ranks[rank];
    o.status = RankStatus::kOk;
    o.path = c.path;
    o.message.clear();
    o.host = m.host;
    o.source = m.source;
    for (uint64_t d : m.dropped) o.dropped += d;
    if (c.partial) {
      o.status = RankStatus::kTruncated;  // message once its last record is known
    } else if (!c.found.damage.empty()) {
      o.status = RankStatus::kDamaged;
      o.message = c.found.damage;
      if (m.truncated) o.message += "; process ended without finishing (killed?)";
    } else if (m.truncated) {
      o.status = RankStatus::kTruncated;
      o.message = c.path + ": process ended without finishing (killed?); trace ends at " +
                  (m.last_record_ns != 0 ? std::to_string(m.last_record_ns) + " ns"
                                         : std::string("an unknown time"));
      problems.push_back(o.message);
    }
  }

  // ---- Unreadable final files describe a rank no readable file gives -------------------
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (ok(i) || c.partial) continue;  // .partial files: below
    const auto rank = c.claimed_rank();
    std::string line = reason[i];
    if (!rank) {
      line += " (rank unknown: the file name is not rank-<N>.h5)";
    } else if (*rank >= out.world_size) {
      line += " (claims rank " + std::to_string(*rank) + ", beyond world size " +
              std::to_string(out.world_size) + ")";
    } else if (out.merged_from[*rank]) {
      line += " (rank " + std::to_string(*rank) + " merged from " + owner_path(*rank) + ")";
    } else if (out.ranks[*rank].status == RankStatus::kMissing) {
      RankOutcome& o = out.ranks[*rank];
      o.status = status[i];
      o.path = c.path;
      o.message = reason[i];
    }
    problems.push_back(std::move(line));
  }

  // ---- .partial files that are not merged ----------------------------------------------
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (!c.partial) continue;
    if (ok(i) && !superseded[i]) continue;  // salvaged: reported once merged
    std::string line = c.path + ": " + kIncompleteNote;
    if (!c.opened() || superseded[i]) {
      const uint32_t r =
          c.opened() ? static_cast<uint32_t>(c.found.meta.rank) : c.name_rank.value_or(0);
      if (r < out.world_size && out.merged_from[r]) {
        line += " (rank " + std::to_string(r) + " merged from " + owner_path(r) + ")";
      }
    } else {
      line += " (not salvageable: " + reason[i] + ")";
    }
    problems.push_back(std::move(line));
    if (c.name_rank && *c.name_rank < out.world_size &&
        out.ranks[*c.name_rank].status == RankStatus::kMissing) {
      out.ranks[*c.name_rank].message +=
          "; " + std::filesystem::path(c.path).filename().string() + " is " + kIncompleteNote;
    }
  }
  for (const RankOutcome& o : out.ranks) {
    if (o.status == RankStatus::kMissing) {
      problems.push_back("rank " + std::to_string(o.rank) + ": missing: " + o.message);
    }
  }
  return out;
}

}  // namespace aon::merge
