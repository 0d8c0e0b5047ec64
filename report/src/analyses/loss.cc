// Loss: what each rank lost (records dropped: the agent's memory cap, or
// received by the collector and not written) against what the timeline kept,
// per record kind (LossSummary). Every rendering says it; findings built on a
// kind their rank lost records of say so (report/src/findings/engine.cc).
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "analyses/analysis.h"

namespace aon::report {

namespace {

// "42 %", "99.7 %", "0.3 %", "0.0012 %": a loss is never said as 0 % nor,
// short of all, as 100 %.
std::string LostPercent(double share) {
  char buf[32];
  const double pct = share * 100;
  if (pct >= 1 && pct < 99.5) {
    std::snprintf(buf, sizeof buf, "%.0f %%", pct);
  } else if (share < 1) {
    std::snprintf(buf, sizeof buf, "%.3g %%", std::min(pct, 99.9));
  } else {
    std::snprintf(buf, sizeof buf, "100 %%");
  }
  return buf;
}

}  // namespace

std::string KindLoss::why() const {
  const uint64_t lost_at_capture = dropped > damaged ? dropped - damaged : 0;
  const uint64_t not_written = std::min(unwritten, lost_at_capture);
  std::string why;
  auto add = [&](const char* what) { why += (why.empty() ? "" : ", and ") + std::string(what); };
  if (lost_at_capture > not_written) add("memory cap");
  if (not_written > 0) add("not written: disk");
  if (damaged > 0) add("damaged in the rank file");
  return why.empty() ? "memory cap" : why;
}

std::pair<double, std::string> LossSummary::Of(int rank, RecordKind kind) const {
  const RankLoss* worst = nullptr;
  const KindLoss* worst_kind = nullptr;
  for (const RankLoss& r : ranks) {
    if (rank >= 0 && static_cast<int>(r.rank) != rank) continue;
    if (r.kinds.empty() && r.dropped > 0 && worst_kind == nullptr) {
      // A timeline that does not say of which kinds: the rank's total.
      return {0.0, "rank " + std::to_string(r.rank) + " lost " + std::to_string(r.dropped) +
                       " records of kinds the timeline does not name"};
    }
    for (const KindLoss& k : r.kinds) {
      if (k.kind == kind && k.dropped > 0 &&
          (worst_kind == nullptr || k.share() > worst_kind->share()))
        worst = &r, worst_kind = &k;
    }
  }
  if (worst_kind == nullptr) return {0.0, ""};
  return {worst_kind->share(), "rank " + std::to_string(worst->rank) + " lost " +
                                   LostPercent(worst_kind->share()) + " of its " +
                                   RecordKindName(kind) + " (" + worst_kind->why() + ")"};
}

std::string LossSummary::CollectorLost(int rank) const {
  for (const RankLoss& r : ranks) {
    if ((rank < 0 || static_cast<int>(r.rank) == rank) && !r.collector_lost.empty())
      return "rank " + std::to_string(r.rank) +
             "'s node collector exited while it ran: the node's GPU counters end there";
  }
  return "";
}

LossSummary SummarizeLoss(const Timeline& t) {
  LossSummary s;
  // Records kept, per rank and kind.
  std::vector<std::array<uint64_t, kRecordKindCount>> kept(t.world_size);
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    const auto& records = const_cast<Timeline&>(t).Records<T>();
    for (const auto& m : records)
      if (m.rank < kept.size()) ++kept[m.rank][static_cast<size_t>(TableTraits<T>::kKind)];
  });
  std::string said;
  for (const RankInfo& info : t.ranks) {
    auto none = [](const auto& counts) {
      return std::all_of(counts.begin(), counts.end(), [](uint64_t d) { return d == 0; });
    };
    if (info.dropped_total == 0 && !info.collector_lost && none(info.dropped) &&
        none(info.damaged))
      continue;
    RankLoss r;
    r.rank = info.rank;
    r.dropped = info.dropped_total;
    if (info.collector_lost)
      r.collector_lost =
          info.message.empty() ? std::string("the node collector exited while it ran") : info.message;
    std::string kinds;
    if (info.drops_by_kind) {
      r.dropped = 0;
      for (size_t k = 0; k < kRecordKindCount; ++k) {
        if (info.dropped[k] == 0 && info.damaged[k] == 0) continue;
        KindLoss l;
        l.kind = static_cast<RecordKind>(k);
        l.kept = info.rank < kept.size() ? kept[info.rank][k] : 0;
        l.dropped = info.dropped[k] + info.damaged[k];
        l.unwritten = std::min(info.unwritten[k], info.dropped[k]);
        l.damaged = info.damaged[k];
        r.dropped += l.dropped;
        kinds += (kinds.empty() ? "" : ", ") + LostPercent(l.share()) + " of its " +
                 RecordKindName(l.kind) + " (" + std::to_string(l.dropped) + "; " + l.why() + ")";
        r.kinds.push_back(l);
      }
    } else if (r.dropped > 0) {
      kinds = std::to_string(r.dropped) + " records (the timeline does not say of which kinds)";
    }
    s.dropped += r.dropped;
    if (!kinds.empty())
      said += (said.empty() ? "" : "; ") + ("rank " + std::to_string(r.rank) + " lost " + kinds);
    if (!r.collector_lost.empty())
      said += (said.empty() ? "" : "; ") + ("rank " + std::to_string(r.rank) + ": " + r.collector_lost);
    s.ranks.push_back(std::move(r));
  }
  if (!s.ranks.empty()) {
    // A collector that died costs nothing by itself (its ranks wrote the rest
    // themselves) but the node's GPU counters after it: said, not as a loss.
    const std::string opening =
        s.dropped > 0 ? "Records were lost: "
                      : "No record was lost, but the node's GPU counters end where its collector "
                        "exited: ";
    s.statement = opening + said +
                  ". Figures come from what was kept; findings built on a kind with losses say "
                  "so. A memory cap: raise --memory-cap (or capture fewer kinds); not written: "
                  "free space where the job directory is; damaged in the rank file: the file "
                  "changed after it was written (disk, copy; aon-merge names the chunk); a "
                  "collector that exited: its log (aon-run -v) says why.";
  }
  return s;
}

const Analysis kLossAnalysis = {"loss", "", "loss",
                                [](const Timeline& t, Report* r) { r->loss = SummarizeLoss(t); }};

}  // namespace aon::report
