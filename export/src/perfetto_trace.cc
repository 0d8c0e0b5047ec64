// Timeline -> Perfetto protobuf trace: the trace-event model (trace_builder.h)
// through the Perfetto writer (perfetto_writer.h).
#include "aon/export/perfetto_trace.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "perfetto_writer.h"
#include "timeline_meta.h"
#include "trace_builder.h"

namespace aon::merge {

std::string FilteredPerfettoPath(const std::string& dir, const ExportFilter& filter) {
  const std::string name =
      filter.empty() ? "trace.pftrace" : "trace-" + filter.Label() + ".pftrace";
  return (std::filesystem::path(dir) / name).string();
}

Status ExportPerfettoTrace(const std::string& timeline_path, const std::string& path,
                           const PerfettoExportOptions& options, PerfettoTraceStats* stats) {
  if (stats != nullptr) *stats = PerfettoTraceStats{};
  AON_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(timeline_path));
  AON_ASSIGN_OR_RETURN(TimelineView timeline, TimelineView::Read(*reader, timeline_path));
  unsigned threads = options.threads;
  if (threads == 0) {
    const unsigned cpus = std::thread::hardware_concurrency();
    threads = std::clamp(cpus > 1 ? cpus - 1 : 1u, 1u, 4u);
  }
  PerfettoWriter out(path, options.max_file_bytes, options.level, threads);
  TraceBuildOptions build;
  build.filter = options.filter;
  // No record limit; flows need no lookup (a lone end is ignored by viewers), so
  // memory does not grow with the records.
  build.flows = FlowLinks::kEveryCorrelation;
  build.collective_flows = true;
  TraceBuildStats built;
  AON_RETURN_IF_ERROR(BuildTraceEvents(*reader, timeline, build, &out, &built)
                          .WithContext("exporting '" + timeline_path + "'"));
  const ExportFilter& filter = options.filter;
  TraceMetadata meta;
  auto add = [&](const char* key, PerfettoWriter::MetaValue value) {
    meta.emplace_back(key, std::move(value));
  };
  add("generator", "aon-merge");
  add("timeline", timeline_path);
  add("job_id", MetaStringOr(*reader, "job_id"));
  add("source", MetaStringOr(*reader, "source"));
  add("clock_note", MetaStringOr(*reader, "clock_note"));
  add("start_ns", std::to_string(timeline.t0));
  add("time_origin", "timestamps are ns on the timeline clock (start_ns is the run's start)");
  add("records", built.records);
  if (!filter.empty()) add("filter", filter.Describe());
  AON_RETURN_IF_ERROR(out.Finish(meta));
  if (stats != nullptr) {
    stats->records = built.records;
    stats->events = out.events();
    stats->flows = built.flows;
    stats->files = out.files();
    stats->index_path = PerfettoIndexPath(path);
  }
  return Status::Ok();
}

}  // namespace aon::merge
