// aon-export TIMELINE.h5: viewer exports of an already merged timeline, without
// merging again: a Chrome JSON or Perfetto protobuf trace or an OTF2 archive (--format) of a time
// window, of some ranks and/or of some record kinds, and/or the downsampled
// overview of the whole run.
// Exit status: 0 written; 1 the timeline cannot be read, an output cannot be
// written, or the trace would hold more than --max-trace-records records
// (nothing written); 2 bad command line (bad --window / --ranks / --kinds values
// included: the message names the option and the value; nothing written).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "aon/cli/command_line.h"
#include "aon/export/chrome_trace.h"
#include "aon/export/export_filter.h"
#include "aon/export/otf2_trace.h"
#include "aon/export/overview.h"
#include "aon/export/perfetto_trace.h"
#include "aon/format/trace_file.h"

namespace {

std::string g_name = "aon-export";  // "aon export" through the front end
const char* Me() { return g_name.c_str(); }

// What every export says on failure or an empty selection; false: it failed.
bool Reported(const aon::Status& s, uint64_t records, const aon::merge::ExportFilter& filter,
              const std::string& output) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: error: %s\n", Me(), s.message().c_str());
    return false;
  }
  if (records == 0) {
    std::fprintf(stderr, "%s: warning: no records selected (%s); %s holds no events\n", Me(),
                 filter.Describe().c_str(), output.c_str());
  }
  return true;
}

// --format perfetto: no record limit; files of at most max_file_bytes and an index.
int ExportPerfetto(const std::string& timeline, const std::string& output,
                   const aon::merge::PerfettoExportOptions& options, bool quiet) {
  aon::merge::PerfettoTraceStats stats;
  aon::Status s = aon::merge::ExportPerfettoTrace(timeline, output, options, &stats);
  if (!Reported(s, stats.records, options.filter, output)) return aon::cli::kExitFailed;
  if (!quiet) {
    std::printf("%s: perfetto trace: %s (%llu records: %s; %zu file%s, index %s)\n", Me(),
                output.c_str(), static_cast<unsigned long long>(stats.records),
                options.filter.Describe().c_str(), stats.files.size(),
                stats.files.size() == 1 ? "" : "s", stats.index_path.c_str());
  }
  return 0;
}

// --format otf2: an archive directory (traces.otf2 + traces.def + traces/).
int ExportOtf2(const std::string& timeline, const std::string& output,
               const aon::merge::Otf2ExportOptions& options, bool quiet) {
  aon::merge::Otf2TraceStats stats;
  aon::Status s = aon::merge::ExportOtf2Trace(timeline, output, options, &stats);
  if (!Reported(s, stats.records, options.filter, output)) return aon::cli::kExitFailed;
  if (stats.collectives_as_regions != 0) {
    std::fprintf(stderr,
                 "%s: note: %llu NCCL collectives overlapped another collective of their "
                 "row: written as plain regions, without OTF2 collective events\n",
                 Me(), static_cast<unsigned long long>(stats.collectives_as_regions));
  }
  if (!quiet) {
    std::printf(
        "aon-export: otf2 archive: %s (%llu records: %s; %llu events on %llu locations, %llu "
        "NCCL collectives, %llu metric samples; %u pass%s, OTF2 buffers at most %.0f MiB)\n",
        stats.anchor.c_str(), static_cast<unsigned long long>(stats.records),
        options.filter.Describe().c_str(), static_cast<unsigned long long>(stats.events),
        static_cast<unsigned long long>(stats.locations),
        static_cast<unsigned long long>(stats.collectives),
        static_cast<unsigned long long>(stats.metrics), stats.passes, stats.passes == 1 ? "" : "es",
        static_cast<double>(stats.peak_pool_bytes) / (1 << 20));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "aon-export: write a Chrome JSON or Perfetto protobuf trace from a merged AON timeline "
      "(timeline.h5), or an OTF2 archive: the trace of a time window, ranks or record kinds, "
      "and/or a downsampled "
      "overview of the whole run",
      "aon-export"};
  g_name = aon::cli::ToolName(argv[0], "aon-export");
  aon::cli::ApplyConventions(app, g_name);
  std::string timeline, output, overview, window, ranks, kinds, format = "json";
  double file_mb = static_cast<double>(aon::merge::kDefaultPerfettoFileBytes) / (1 << 20);
  uint64_t max_records = aon::merge::kDefaultMaxTraceRecords;
  bool no_trace = false;
  bool quiet = false;
  app.add_option("JOB", timeline, "job directory (its timeline.h5) or a merged timeline file")
      ->required();
  auto* out_opt =
      app.add_option(
             "-o,--output", output,
             "trace to write (default: trace.json, trace.pftrace with --format perfetto, or the "
             "directory otf2/ with --format otf2, next to the timeline; trace-<selection>.json / "
             ".pftrace / otf2-<selection> with --window/--ranks/--kinds, e.g. "
             "trace-10s-20s.json)")
          ->type_name("PATH");
  app.add_option("--format", format,
                 "json: Chrome trace-event JSON (small traces, --max-trace-records); perfetto: "
                 "Perfetto protobuf, compressed, no record limit, split into files of at most "
                 "--max-file-mb with an index; otf2: an OTF2 archive directory for Vampir, "
                 "Scalasca and otf2-print (open <dir>/traces.otf2), no record limit")
      ->check(CLI::IsMember({"json", "perfetto", "otf2"}))
      ->type_name("json|perfetto|otf2");
  app.add_option("--max-file-mb", file_mb,
                 "--format perfetto: largest file in MiB (fractions allowed); a longer trace "
                 "is split by time into several files")
      ->default_val(file_mb)
      ->type_name("MIB")
      ->check(CLI::Range(static_cast<double>(aon::merge::kMinPerfettoFileBytes) / (1 << 20), 1e9));
  app.add_option("--window", window,
                 "only records overlapping START:END, in seconds from the start of the "
                 "timeline (10:20, :5, 30:) or in ns on the timeline clock (1000ns:2000ns)")
      ->option_text("START:END");
  app.add_option("--ranks", ranks, "only these ranks, e.g. 0-3,8,12-15")->type_name("LIST");
  app.add_option("--kinds", kinds,
                 "only these record kinds, e.g. kernels,nccl (kernels, memcpy, memset, sync, "
                 "api, nvtx, nccl, steps, counters, ops)")
      ->type_name("LIST");
  app.add_option("--max-trace-records", max_records,
                 "refuse (write nothing, exit 1) a trace of more records than this; 0 = no limit")
      ->default_val(max_records)
      ->type_name("N")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--overview", overview, "also write the overview of the whole run to this file")
      ->type_name("FILE");
  app.add_flag("--no-trace", no_trace, "write no trace (only --overview; not with -o)")
      ->excludes(out_opt);
  app.add_flag("-q,--quiet", quiet, "print nothing but errors");
  app.footer(
      "Exit status: 0 written, 1 the timeline cannot be read, an output cannot be written or\n"
      "the trace would exceed --max-trace-records (nothing written), 2 bad command line.");
  if (auto done = aon::cli::Parse(app, argc, argv)) return *done;
  timeline = aon::TimelinePathOf(timeline);
  aon::merge::ChromeExportOptions options;
  options.max_records = max_records;
  auto parse = [&](const char* option, const std::string& text, auto parser) {
    if (app.count(option) == 0) return true;
    aon::Status s = parser(text, &options.filter);
    if (!s.ok()) std::fprintf(stderr, "%s: error: %s\n", Me(), s.message().c_str());
    return s.ok();
  };
  if (!parse("--window", window, aon::merge::ParseWindow) ||
      !parse("--ranks", ranks, aon::merge::ParseRankList) ||
      !parse("--kinds", kinds, aon::merge::ParseKindList)) {
    return aon::cli::kExitUsage;
  }
  if (no_trace && overview.empty()) {
    std::fprintf(stderr, "%s: error: --no-trace without --overview: nothing to write\n", Me());
    return aon::cli::kExitUsage;
  }
  const bool perfetto = format == "perfetto";
  if (!no_trace && output.empty()) {
    const std::string dir = std::filesystem::path(timeline).parent_path().string();
    output = perfetto           ? aon::merge::FilteredPerfettoPath(dir, options.filter)
             : format == "otf2" ? aon::merge::FilteredOtf2Path(dir, options.filter)
                                : aon::merge::FilteredTracePath(dir, options.filter);
  }
  for (const std::string* path : {&output, &overview}) {
    if (!path->empty() && (*path == timeline || (path == &overview && *path == output))) {
      std::fprintf(stderr, "%s: error: '%s' is named twice (timeline or another output)\n", Me(),
                   path->c_str());
      return aon::cli::kExitUsage;
    }
  }

  if (!overview.empty()) {
    aon::merge::OverviewStats stats;
    aon::Status s = aon::merge::WriteOverview(timeline, overview, {}, &stats);
    if (!s.ok()) {
      std::fprintf(stderr, "%s: error: %s\n", Me(), s.message().c_str());
      return aon::cli::kExitFailed;
    }
    if (!quiet) {
      std::printf("%s: overview: %s (%u ranks x %u bins of %llu ns)\n", Me(), overview.c_str(),
                  stats.ranks, stats.bins, static_cast<unsigned long long>(stats.bin_ns));
    }
  }
  if (no_trace) return 0;
  if (format == "otf2") {
    aon::merge::Otf2ExportOptions otf2_options;
    otf2_options.filter = options.filter;
    return ExportOtf2(timeline, output, otf2_options, quiet);
  }
  if (perfetto) {
    aon::merge::PerfettoExportOptions perfetto_options;
    perfetto_options.filter = options.filter;
    perfetto_options.max_file_bytes = static_cast<uint64_t>(file_mb * (1 << 20));
    return ExportPerfetto(timeline, output, perfetto_options, quiet);
  }
  aon::merge::ChromeTraceStats stats;
  aon::Status s = aon::merge::ExportChromeTrace(timeline, output, options, &stats);
  if (!s.ok()) {
    std::fprintf(stderr, "%s: error: %s\n", Me(), s.message().c_str());
    if (stats.over_limit) {
      std::fprintf(stderr,
                   "%s: choose a part with --window START:END (seconds from the start, "
                   "e.g. --window 10:20), --ranks LIST or --kinds LIST, or raise "
                   "--max-trace-records (0 = no limit)\n",
                   Me());
    }
    return aon::cli::kExitFailed;
  }
  if (stats.records == 0) {
    std::fprintf(stderr, "%s: warning: no records selected (%s); %s holds no events\n", Me(),
                 options.filter.Describe().c_str(), output.c_str());
  }
  if (!quiet) {
    std::printf("%s: trace: %s (%llu records: %s)\n", Me(), output.c_str(),
                static_cast<unsigned long long>(stats.records), options.filter.Describe().c_str());
  }
  return 0;
}
