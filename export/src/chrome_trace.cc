// Timeline -> Chrome trace-event JSON: the trace-event model (trace_builder.h)
// through the JSON writer (json_trace_writer.h), streamed into the file.
#include "aon/export/chrome_trace.h"

#include <string>
#include <utility>
#include <vector>

#include "aon/format/records.h"
#include "aon/format/trace_file.h"
#include "json_trace_writer.h"
#include "output_file.h"
#include "timeline_meta.h"
#include "trace_builder.h"

namespace aon::merge {

namespace {

// Records of the kinds the filter keeps: what an export without a window or
// ranks holds, known before reading any record.
StatusOr<uint64_t> CountSelectedKinds(const TraceReader& reader, const ExportFilter& filter) {
  uint64_t total = 0;
  for (size_t k = 0; k < kTimelineKindCount; ++k) {
    const auto kind = static_cast<RecordKind>(k);
    if (!filter.KeepsKind(kind)) continue;
    const TableSchema table{
        RecordKindName(kind), sizeof(uint32_t), {Field{"rank", 0, FieldType::kU32}}};
    AON_ASSIGN_OR_RETURN(uint64_t n, reader.TableSize(table));
    total += n;
  }
  return total;
}

}  // namespace

Status ExportChromeTrace(const std::string& timeline_path, const std::string& json_path,
                         ChromeTraceStats* stats) {
  return ExportChromeTrace(timeline_path, json_path, ChromeExportOptions{}, stats);
}

Status ExportChromeTrace(const std::string& timeline_path, const std::string& json_path,
                         const ChromeExportOptions& options, ChromeTraceStats* stats) {
  if (stats != nullptr) *stats = ChromeTraceStats{};
  const ExportFilter& filter = options.filter;
  AON_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(timeline_path));
  AON_ASSIGN_OR_RETURN(TimelineView timeline, TimelineView::Read(*reader, timeline_path));
  const uint64_t t0 = timeline.t0;
  auto over_limit = [&](uint64_t records, bool exact) {
    if (stats != nullptr) {
      stats->over_limit = true;
      stats->records = records;
    }
    return Unavailable("'" + json_path + "' not written: " + (exact ? "" : "more than ") +
                       std::to_string(exact ? records : options.max_records) +
                       " records selected (" + filter.Describe() + "), the limit is " +
                       std::to_string(options.max_records));
  };
  // Without a window or ranks the count is known before reading any record.
  if (options.max_records != 0 && !filter.HasWindow() && filter.ranks.empty()) {
    AON_ASSIGN_OR_RETURN(uint64_t total, CountSelectedKinds(*reader, filter));
    if (total > options.max_records) return over_limit(total, true);
  }

  AON_ASSIGN_OR_RETURN(auto file, AtomicTextFile::Create(json_path));
  JsonTraceWriter out(file.get(), t0);
  TraceBuildOptions build;
  build.filter = filter;
  build.max_records = options.max_records;
  build.flows = FlowLinks::kBothEndsKept;
  TraceBuildStats built;
  if (Status s = BuildTraceEvents(*reader, timeline, build, &out, &built); !s.ok()) {
    // The .partial file is removed when `file` goes.
    if (built.over_limit) return over_limit(built.records, false);
    return s.WithContext("exporting '" + timeline_path + "'");
  }

  TraceMetadata meta;
  auto add = [&](const char* key, const std::string& value) { meta.emplace_back(key, value); };
  add("generator", "aon-merge");
  add("timeline", timeline_path);
  add("job_id", MetaStringOr(*reader, "job_id"));
  add("source", MetaStringOr(*reader, "source"));
  add("clock_note", MetaStringOr(*reader, "clock_note"));
  add("start_ns", std::to_string(t0));
  add("time_origin", "ts 0 = start_ns on the timeline clock; ts and dur in microseconds");
  add("records", std::to_string(built.records));
  if (!filter.empty()) {
    // What was selected; records overlapping the window are whole, not clipped.
    add("filter", filter.Describe());
    if (filter.HasWindow()) {
      const uint64_t end = filter.end.Resolve(t0, UINT64_MAX);
      add("window", filter.WindowText());
      add("window_start_ns", std::to_string(filter.start.Resolve(t0, 0)));
      add("window_end_ns", end == UINT64_MAX ? std::string() : std::to_string(end));
    }
    if (!filter.ranks.empty()) add("ranks", filter.RanksText());
    if (!filter.kinds.empty()) add("kinds", filter.KindsText());
  }
  out.Finish(meta);
  if (stats != nullptr) {
    stats->events = out.events();
    stats->flows = built.flows;
    stats->records = built.records;
  }
  return file->Commit();
}

}  // namespace aon::merge
