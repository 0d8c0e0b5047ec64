#include "write_timeline.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <set>
#include <vector>

#include "exchange.h"

namespace aon::merge {
namespace {

namespace fs = std::filesystem;

std::string ShardFileName(int process) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "shard-%05d.h5", process);
  return buf;
}

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const std::string& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

std::string ClockNote(const MergedRanks& merged) {
  std::set<std::string> domains;
  std::vector<std::string> unsynced;
  int64_t worst_bound = 0;
  for (const auto& [rank, file] : merged) {
    const RankMetadata& m = file->found.meta;
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

// The record tables of a sharded timeline: one virtual dataset per kind.
Status WriteVirtualTables(TraceWriter& timeline, const TimelineTarget& target,
                          const JobOutcome& outcome, int procs, MergeReport* report) {
  const std::string rel_dir = fs::path(target.shard_dir).filename().string();
  Status vds;
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    constexpr size_t k = static_cast<size_t>(RecordTraits<T>::kKind);
    const TableSchema& schema = MergedSchemaOf<T>();
    std::vector<VirtualPiece> pieces;
    uint64_t rows = 0;
    for (int q = 0; q < procs; ++q) {
      const uint64_t n = outcome.written_by[k][q];
      if (n == 0) continue;
      pieces.push_back(
          VirtualPiece{rel_dir + "/" + ShardFileName(q), "/records/" + schema.name, 0, rows, n});
      rows += n;
    }
    report->records[k] = rows;
    if (vds.ok()) vds = timeline.CreateVirtualTable(schema, rows, pieces);
  });
  return vds;
}

std::vector<RankSummary> RankRows(const JobOutcome& outcome, const MergedRanks& merged,
                                  StringTable& strings, const MergeReport& report) {
  std::vector<const RankMetadata*> meta_of(report.world_size, nullptr);
  for (const auto& [rank, file] : merged) meta_of[rank] = &file->found.meta;
  std::vector<RankSummary> rows(report.world_size);
  for (uint32_t r = 0; r < report.world_size; ++r) {
    const RankOutcome& o = report.ranks[r];
    RankSummary& row = rows[r];
    row = RankSummary{};
    row.rank = r;
    row.status = static_cast<uint8_t>(o.status);
    row.message_id = strings.Intern(o.message);
    row.local_rank = UINT32_MAX;
    row.clock_error_bound_ns = -1;
    row.nccl_gpu_clock_spread_ns = -1;
    row.records = o.records;
    if (const RankMetadata* m = meta_of[r]; m != nullptr) {
      row.host_id = strings.Intern(m->host);
      row.local_rank = m->local_rank >= 0 ? static_cast<uint32_t>(m->local_rank) : UINT32_MAX;
      row.pid = m->pid;
      row.dropped = o.dropped;
      row.clock_offset_ns = m->clock_offset_ns;
      row.clock_error_bound_ns = m->clock_error_bound_ns;
      // As the rank file says, or as measured by the merge's NCCL resolution.
      row.nccl_gpu_clock_offset_ns = m->nccl_gpu_clock_offset_ns;
      row.nccl_gpu_clock_pairs = m->nccl_gpu_clock_pairs;
      row.nccl_gpu_clock_spread_ns = m->nccl_gpu_clock_spread_ns;
      SetCaptureSummary(*m, &row);
      if (m->collector_lost_ns != 0) row.flags |= kRankCollectorLost;
      if (!m->capture_disabled.empty()) {
        row.flags |= kRankCaptureDisabled;
        if (o.message.empty())
          row.message_id = strings.Intern("capture disabled: " + m->capture_disabled);
      }
    }
    if (outcome.first_ns[r] != UINT64_MAX) {
      row.first_ns = outcome.first_ns[r];
      row.last_ns = outcome.last_ns[r];
    }
  }
  return rows;
}

Status Commit(TraceWriter& writer, const TimelineTarget& target) {
  std::error_code ec;
  if (target.sharded) {
    if (std::remove(target.timeline_path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoStatus("removing the old timeline " + target.timeline_path, errno);
    }
    fs::remove_all(target.shard_dir, ec);
    if (!ec) fs::rename(target.shard_tmp, target.shard_dir, ec);
    if (ec) {
      return IoError("cannot move the shards from '" + target.shard_tmp + "' to '" +
                     target.shard_dir + "': " + ec.message());
    }
  }
  AON_RETURN_IF_ERROR(writer.Finish());
  if (!target.sharded && fs::exists(target.shard_dir, ec)) fs::remove_all(target.shard_dir, ec);
  return Status::Ok();
}

}  // namespace

TimelineTarget TimelineTargetOf(const std::string& timeline_path, int procs) {
  TimelineTarget t;
  t.timeline_path = timeline_path;
  t.sharded = procs > 1;
  const fs::path p(timeline_path);
  t.shard_dir = (p.parent_path() / (p.stem().string() + ".shards")).string();
  t.shard_tmp = t.shard_dir + ".partial";
  return t;
}

StatusOr<std::unique_ptr<TraceWriter>> CreateRecordOutput(MergeComm& comm,
                                                          const TimelineTarget& target,
                                                          const WriteOptions& options) {
  if (!target.sharded) {
    return TraceWriter::Create(target.timeline_path, FileKind::kTimeline, options);
  }
  Status made;
  if (comm.rank() == 0) {
    std::error_code ec;
    fs::remove_all(target.shard_tmp, ec);
    if (!ec) fs::create_directories(target.shard_tmp, ec);
    if (!ec) fs::permissions(target.shard_tmp, fs::perms::owner_all, ec);
    if (ec) {
      made =
          IoError("cannot create the shard directory '" + target.shard_tmp + "': " + ec.message());
    }
  }
  AON_RETURN_IF_ERROR(Agree(comm, made));
  Status mine;
  std::unique_ptr<TraceWriter> out;
  std::error_code ec;
  if (!fs::is_directory(target.shard_tmp, ec)) {
    mine = Unavailable("the shard directory '" + target.shard_tmp +
                       "' made by merge process 0 is not visible here: several merge "
                       "processes need a shared output directory");
  } else {
    auto w = TraceWriter::Create((fs::path(target.shard_tmp) / ShardFileName(comm.rank())).string(),
                                 FileKind::kTimeline, options);
    if (w.ok()) {
      out = std::move(w).value();
    } else {
      mine = w.status();
    }
  }
  AON_RETURN_IF_ERROR(Agree(comm, mine));
  return out;
}

Status FinishShard(TraceWriter& shard, const TimelineTarget& target, int process) {
  AON_RETURN_IF_ERROR(
      shard.SetMetaAttribute("shard_of", fs::path(target.timeline_path).filename().string()));
  AON_RETURN_IF_ERROR(shard.SetMetaAttribute("shard", int64_t{process}));
  return shard.Finish();
}

Status WriteTimeline(const TimelineTarget& target, const WriteOptions& options,
                     std::unique_ptr<TraceWriter> out, const JobOutcome& outcome,
                     const MergedRanks& merged, StringTable& strings, MergeReport* report) {
  std::unique_ptr<TraceWriter> timeline;
  if (target.sharded) {
    AON_ASSIGN_OR_RETURN(timeline,
                         TraceWriter::Create(target.timeline_path, FileKind::kTimeline, options));
    AON_RETURN_IF_ERROR(WriteVirtualTables(*timeline, target, outcome, report->procs, report));
    report->shard_dir = target.shard_dir;
  } else {
    for (size_t k = 0; k < kRecordKindCount; ++k) report->records[k] = outcome.written_by[k][0];
    timeline = std::move(out);
  }
  TraceWriter& writer = *timeline;

  // ---- Devices, ranks, strings, attributes -------------------------------------------
  AON_RETURN_IF_ERROR(writer.AppendTable(MergedDeviceSchema(), outcome.devices.data(),
                                         outcome.devices.size(), "meta"));
  uint64_t start_ns = UINT64_MAX, end_ns = 0;
  for (const auto& [rank, file] : merged) {
    if (outcome.bad_string_ids[rank] > 0) {
      report->problems.push_back(file->path + ": " + std::to_string(outcome.bad_string_ids[rank]) +
                                 " string ids beyond its string table (merged as \"\")");
    }
    if (outcome.first_ns[rank] != UINT64_MAX) {
      start_ns = std::min(start_ns, outcome.first_ns[rank]);
      end_ns = std::max(end_ns, outcome.last_ns[rank]);
    }
  }
  if (start_ns == UINT64_MAX) {  // no timed record at all: fall back to the capture windows
    for (const auto& [rank, file] : merged) {
      const RankMetadata& m = file->found.meta;
      start_ns = std::min(start_ns, m.clock().Apply(m.start_ns));
      end_ns = std::max(end_ns, m.clock().Apply(m.end_ns));
    }
  }
  report->start_ns = start_ns;
  report->end_ns = std::max(end_ns, start_ns);

  const std::vector<RankSummary> rows = RankRows(outcome, merged, strings, *report);
  AON_RETURN_IF_ERROR(writer.AppendTable(RankSummarySchema(), rows.data(), rows.size(), "meta"));

  std::set<std::string> job_ids, sources;
  std::vector<std::string> synthetic_ranks;
  std::vector<RankDrops> drops;
  bool all_synced = true;
  int64_t worst_bound = 0;
  for (const auto& [rank, file] : merged) {
    const RankMetadata& m = file->found.meta;
    job_ids.insert(m.job_id);
    sources.insert(m.source);
    if (m.source == "synthetic") synthetic_ranks.push_back(std::to_string(rank));
    if (!m.clock_synchronized || m.clock_error_bound_ns < 0) {
      all_synced = false;
    } else {
      worst_bound = std::max(worst_bound, m.clock_error_bound_ns);
    }
    for (size_t k = 0; k < kRecordKindCount; ++k) {
      const uint64_t damaged = rank < outcome.damaged.size() ? outcome.damaged[rank][k] : 0;
      report->dropped[k] += m.dropped[k] + damaged;
      if (m.dropped[k] > 0 || damaged > 0)
        drops.push_back({rank, static_cast<uint32_t>(k), m.dropped[k], m.unwritten[k], damaged});
    }
  }
  AON_RETURN_IF_ERROR(writer.AppendTable(RankDropsSchema(), drops.data(), drops.size(), "meta"));
  report->job_id = Join({job_ids.begin(), job_ids.end()}, ",");
  if (job_ids.size() > 1) {
    report->problems.push_back("ranks disagree on the job id (" + report->job_id +
                               "): were files of several jobs put in '" + report->job_dir + "'?");
  }
  const std::string all_sources = Join({sources.begin(), sources.end()}, ",");
  const uint32_t ranks_ok = report->ranks_ok();

  AON_RETURN_IF_ERROR(writer.WriteStrings(strings));
  AON_RETURN_IF_ERROR(writer.SetMetaAttribute("job_id", report->job_id));
  AON_RETURN_IF_ERROR(writer.SetMetaAttribute("world_size", int64_t{report->world_size}));
  AON_RETURN_IF_ERROR(writer.SetMetaAttribute("ranks_ok", int64_t{ranks_ok}));
  AON_RETURN_IF_ERROR(writer.SetMetaAttribute("ranks_bad", int64_t{report->world_size - ranks_ok}));
  AON_RETURN_IF_ERROR(writer.SetMetaAttribute("clock_note", ClockNote(merged)));
  AON_RETURN_IF_ERROR(writer.SetMetaAttribute("clock_synchronized", int64_t{all_synced ? 1 : 0}));
  AON_RETURN_IF_ERROR(
      writer.SetMetaAttribute("clock_error_bound_ns", all_synced ? worst_bound : int64_t{-1}));
  // Viewers label the whole timeline as synthetic if any part of it is.
  AON_RETURN_IF_ERROR(writer.SetMetaAttribute(
      "source", synthetic_ranks.empty() ? std::string_view(all_sources) : "synthetic"));
  AON_RETURN_IF_ERROR(writer.SetMetaAttribute("sources", all_sources));
  AON_RETURN_IF_ERROR(writer.SetMetaAttribute("synthetic_ranks", Join(synthetic_ranks, ",")));
  AON_RETURN_IF_ERROR(writer.SetMetaAttribute("start_ns", report->start_ns));
  AON_RETURN_IF_ERROR(writer.SetMetaAttribute("end_ns", report->end_ns));
  for (size_t k = 0; k < kTimelineKindCount; ++k) {
    const std::string kind = RecordKindName(static_cast<RecordKind>(k));
    AON_RETURN_IF_ERROR(writer.SetMetaAttribute("records_" + kind, report->records[k]));
    AON_RETURN_IF_ERROR(writer.SetMetaAttribute("dropped_" + kind, report->dropped[k]));
  }
  AON_RETURN_IF_ERROR(writer.SetMetaAttribute("problems", Join(report->problems, "\n")));
  AON_RETURN_IF_ERROR(
      writer.SetMetaAttribute("capture_events", Join(report->capture_events, "\n")));
  AON_RETURN_IF_ERROR(
      writer.SetMetaAttribute("merge_processes", static_cast<int64_t>(report->procs)));
  AON_RETURN_IF_ERROR(Commit(writer, target));
  report->timeline_path = target.timeline_path;
  return Status::Ok();
}

}  // namespace aon::merge
