// LoadTimeline: one merged timeline into memory (every record kind).
#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "aon/format/trace_file.h"
#include "aon/report/report.h"

namespace aon::report {

size_t Timeline::HostCount() const {
  std::set<std::string> hosts;
  for (const RankInfo& r : ranks) {
    if (RankMerged(r.status) && !r.host.empty()) hosts.insert(r.host);
  }
  return hosts.size();
}

namespace {

template <typename T>
Status LoadKind(const TraceReader& reader, std::vector<Merged<T>>* out) {
  auto records = reader.ReadAllMerged<T>();
  if (!records.ok()) {
    // An absent dataset is an empty kind (older writers); anything else is an error.
    if (records.status().code() == StatusCode::kNotFound) return Status::Ok();
    return records.status().WithContext(std::string("reading ") +
                                        RecordKindName(RecordTraits<T>::kKind));
  }
  *out = std::move(records).value();
  return Status::Ok();
}

template <typename T>
void NoteRanks(const std::vector<Merged<T>>& v, uint32_t* max_rank_plus_one) {
  for (const auto& m : v) *max_rank_plus_one = std::max(*max_rank_plus_one, m.rank + 1);
}

}  // namespace

StatusOr<Timeline> LoadTimeline(const std::string& path) {
  AON_ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, TraceReader::Open(path));
  if (reader->kind() != FileKind::kTimeline) {
    return InvalidArgument(
        path +
        ": is a per-rank trace, not a merged timeline; run aon-merge on its job directory first");
  }
  Timeline t;
  t.path = path;
  auto str = [&](const char* name) {
    auto v = reader->GetMetaString(name);
    return v.ok() ? *v : std::string();
  };
  auto num = [&](const char* name, int64_t fallback) {
    auto v = reader->GetMetaInt(name);
    return v.ok() ? *v : fallback;
  };
  t.job_id = str("job_id");
  t.source = str("source");
  t.clock_note = str("clock_note");
  t.clock_synchronized = num("clock_synchronized", 0) != 0;
  const int64_t world = num("world_size", 0);
  auto lines = [](const std::string& text, std::vector<std::string>* out) {
    for (size_t pos = 0; pos < text.size();) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) nl = text.size();
      if (nl > pos) out->push_back(text.substr(pos, nl - pos));
      pos = nl + 1;
    }
  };
  lines(str("problems"), &t.problems);
  lines(str("capture_events"), &t.capture_events);  // absent before 1.16
  AON_ASSIGN_OR_RETURN(t.strings, reader->ReadStrings());
  Status loaded = Status::Ok();
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    if (loaded.ok()) loaded = LoadKind(*reader, &t.Records<T>()).WithContext(path);
  });
  AON_RETURN_IF_ERROR(loaded);
  // Each rank's GPUs (the merge's /meta/devices: Merged<DeviceInfo>); absent in
  // timelines without device rows.
  if (auto rows = reader->ReadAllOf<Merged<DeviceInfo>>(MergedSchema(DeviceInfoSchema()), "meta");
      rows.ok()) {
    t.devices = std::move(rows).value();
  }
  std::stable_sort(t.steps.begin(), t.steps.end(), [](const auto& a, const auto& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.record.step < b.record.step;
  });

  std::vector<RankSummary> summaries;
  if (auto rows = reader->ReadAllOf<RankSummary>(RankSummarySchema(), "meta"); rows.ok()) {
    summaries = std::move(rows).value();
  }
  uint32_t n = world > 0 ? static_cast<uint32_t>(world) : 0;
  for (const RankSummary& s : summaries) n = std::max(n, s.rank + 1);
  NoteRanks(t.kernels, &n);
  NoteRanks(t.memcpys, &n);
  NoteRanks(t.memsets, &n);
  NoteRanks(t.nvtx, &n);
  NoteRanks(t.apis, &n);
  NoteRanks(t.nccl, &n);
  NoteRanks(t.steps, &n);
  n = std::min<uint32_t>(n, 1u << 20);  // a corrupt rank id must not allocate the world
  t.world_size = n;
  t.ranks.resize(n);
  for (uint32_t r = 0; r < n; ++r) {
    t.ranks[r].rank = r;
    t.ranks[r].status = RankStatus::kMissing;
    t.ranks[r].message = "not in the timeline's rank table";
  }
  for (const RankSummary& s : summaries) {
    if (s.rank >= n) continue;
    RankInfo& info = t.ranks[s.rank];
    info.listed = true;
    info.host = t.strings.Get(s.host_id);
    info.status = static_cast<RankStatus>(s.status);
    info.message = t.strings.Get(s.message_id);
    info.capture_mode = s.capture_mode <= static_cast<uint8_t>(CaptureMode::kFlight)
                            ? static_cast<CaptureMode>(s.capture_mode)
                            : CaptureMode::kUnknown;
    info.steps = s.steps;
    info.captured_steps = s.captured_steps;
    info.windows = s.windows;
    info.capture_period = s.capture_period;
    info.overhead_budget = s.overhead_budget;
    info.window_step_ratio = s.window_step_ratio;
    info.amortized_cost = s.amortized_cost;
    info.local_rank = s.local_rank;
    info.dropped_total = s.dropped;
    info.collector_lost = (s.flags & kRankCollectorLost) != 0;
    info.capture_disabled = (s.flags & kRankCaptureDisabled) != 0;
  }
  // What each rank lost, per kind (1.11).
  if (auto rows = reader->ReadAllOf<RankDrops>(RankDropsSchema(), "meta"); rows.ok()) {
    for (const RankDrops& d : *rows) {
      if (d.rank >= n) continue;
      RankInfo& info = t.ranks[d.rank];
      info.drops_by_kind = true;
      if (d.kind < kRecordKindCount) {
        info.dropped[d.kind] += d.dropped;
        info.unwritten[d.kind] += std::min(d.unwritten, d.dropped);
        info.damaged[d.kind] += d.damaged;
      }
    }
  }
  // Ranks with records but no row (an older or partial table) still count as present.
  std::vector<bool> has(n, false);
  for (const auto& k : t.kernels) has[k.rank] = true;
  for (const auto& k : t.nvtx) has[k.rank] = true;
  for (const auto& k : t.memcpys) has[k.rank] = true;
  for (const auto& k : t.steps) has[k.rank] = true;
  for (uint32_t r = 0; r < n; ++r) {
    if (!t.ranks[r].listed && has[r]) {
      t.ranks[r].status = RankStatus::kOk;
      t.ranks[r].message = "records present but not in the rank table";
    }
  }
  return t;
}

}  // namespace aon::report
