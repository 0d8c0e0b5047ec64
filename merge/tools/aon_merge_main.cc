// aon-merge JOB: one timeline from a job's per-rank trace files (MergeJob),
// then the viewer files made from it: a downsampled overview, the Perfetto
// protobuf trace and the Chrome JSON trace (WriteMergeExports, on process 0).
// Exit status: 0 when the timeline was written (bad ranks are recorded in it and
// named on stderr; a JSON trace over --max-trace-records is skipped with a note), 1 when nothing
// could be merged or an output could not be written, 2 for a bad command line (including bad
// --window / --ranks / --kinds values: then nothing is written).
//
// Several processes: `mpirun -np N aon-merge ...` / `srun aon-merge ...` (one or
// more per node), or `aon-merge --procs N ...`, which starts mpirun itself.
#include <malloc.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "aon/base/terminal_text.h"
#include "aon/cli/command_line.h"
#include "aon/export/export_filter.h"
#include "aon/merge/merge.h"
#include "aon/merge/merge_exports.h"
#include "mpi_comm.h"

namespace {

std::string g_name = "aon-merge";  // "aon merge" through the front end
const char* Me() { return g_name.c_str(); }

// "" would silently mean the default file.
CLI::Validator NotEmpty(const std::string& what) {
  return CLI::Validator(
      [what](std::string& value) { return value.empty() ? "needs a " + what : std::string(); },
      what);
}

// A failed merge leaves no half-written timeline behind (the JSON outputs
// remove their own, aon/base/secure_fs.h).
void RemovePartialTimeline(const aon::merge::MergeOptions& options) {
  const std::string timeline =
      options.timeline_path.empty() ? options.job_dir + "/timeline.h5" : options.timeline_path;
  const std::string partial = timeline + ".partial";
  struct stat st {};
  if (lstat(partial.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
    unlink(partial.c_str());
}

// aon-merge --procs N outside an MPI job: the same command under mpirun.
int RelaunchUnderMpirun(int procs, int argc, char** argv) {
  std::vector<std::string> args = {"mpirun", "-np", std::to_string(procs), "--oversubscribe"};
  if (geteuid() == 0) args.push_back("--allow-run-as-root");
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  args.push_back(n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(argv[0]));
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  execvp("mpirun", cargs.data());
  std::fprintf(stderr,
               "%s: error: --procs %d: cannot start mpirun: %s (run it as "
               "'mpirun -np %d aon-merge ...', or use --procs 1)\n",
               Me(), procs, std::strerror(errno), procs);
  return 1;
}

// The CPUs this process may run on (its affinity: mpirun and srun bind), shared
// with the other merge processes started on this node, at most 4.
unsigned DefaultCompressThreads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  int local = 1;
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_STEP_TASKS_PER_NODE"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && std::atoi(v) > 0) {
      local = std::atoi(v);
      break;
    }
  }
  return static_cast<unsigned>(std::clamp(cpus / local, 1, 4));
}

// The command line's values: the merge's and the exports' options, and the
// flags and texts that become parts of them.
struct CommandLine {
  aon::merge::MergeOptions options;
  aon::merge::MergeExportOptions exports;
  bool no_chrome = false;
  bool no_perfetto = false;
  bool no_overview = false;
  double perfetto_file_mb = static_cast<double>(exports.perfetto_max_file_bytes) / (1 << 20);
  bool quiet = false;
  std::string window, ranks, kinds;
  int procs = 1;
  double memory_mb = static_cast<double>(options.memory_budget_bytes >> 20);
  bool no_progress = false;
  bool timings = false;
};

// Stage: the options that name the inputs and outputs and select what is traced.
void AddOutputOptions(CLI::App& app, CommandLine& cl) {
  app.add_option("JOB", cl.options.job_dir, "job directory holding the rank-*.h5 files")
      ->required();
  app.add_option("-o,--output", cl.options.timeline_path,
                 "timeline file to write (default: JOB/timeline.h5)")
      ->type_name("FILE")
      ->check(NotEmpty("FILE"));
  auto* chrome = app.add_option("--chrome", cl.exports.chrome_path,
                                "Chrome trace-event JSON to write (default: JOB/trace.json, or "
                                "JOB/trace-<selection>.json with --window/--ranks/--kinds)")
                     ->type_name("FILE");
  app.add_flag("--no-chrome", cl.no_chrome, "do not write the Chrome trace-event JSON")
      ->excludes(chrome);
  auto* perfetto =
      app.add_option("--perfetto", cl.exports.perfetto_path,
                     "Perfetto protobuf trace to write, compressed, no record limit (default: "
                     "JOB/trace.pftrace, or trace-<selection>.pftrace); more files and an "
                     "index when it is split")
          ->type_name("FILE");
  app.add_flag("--no-perfetto", cl.no_perfetto, "do not write the Perfetto trace")
      ->excludes(perfetto);
  app.add_option("--perfetto-max-file-mb", cl.perfetto_file_mb,
                 "largest Perfetto trace file in MiB (fractions allowed); a longer trace is "
                 "split by time into several files listed by an index")
      ->default_val(cl.perfetto_file_mb)
      ->type_name("MIB")
      ->check(CLI::Range(static_cast<double>(aon::merge::kMinPerfettoFileBytes) / (1 << 20), 1e9));
  app.add_option("--window", cl.window,
                 "trace only records overlapping START:END, in seconds from the start of the "
                 "timeline (10:20, :5, 30:) or in ns on the timeline clock (1000ns:2000ns)")
      ->option_text("START:END");
  app.add_option("--ranks", cl.ranks, "trace only these ranks, e.g. 0-3,8,12-15")
      ->type_name("LIST");
  app.add_option("--kinds", cl.kinds,
                 "trace only these record kinds, e.g. kernels,nccl (kernels, memcpy, memset, "
                 "sync, api, nvtx, nccl, steps, counters, ops)")
      ->type_name("LIST");
  app.add_option("--max-trace-records", cl.exports.max_trace_records,
                 "skip the trace (with a note) when it would hold more records than this; "
                 "0 = no limit")
      ->default_val(cl.exports.max_trace_records)
      ->type_name("N")
      ->check(CLI::NonNegativeNumber);
  auto* overview = app.add_option("--overview", cl.exports.overview_path,
                                  "overview JSON to write (default: JOB/overview.json)")
                       ->type_name("FILE");
  app.add_flag("--no-overview", cl.no_overview, "do not write the overview JSON")
      ->excludes(overview);
  app.add_flag("-q,--quiet", cl.quiet,
               "print no summary and no progress bar (problems still go to stderr)");
}

// Stage: the options of how the merge runs: processes, memory, compression, threads.
void AddMergeOptions(CLI::App& app, CommandLine& cl) {
  app.add_option("-j,--procs,--jobs", cl.procs,
                 "merge processes: starts 'mpirun -np N' of aon-merge unless already run by "
                 "mpirun/srun (then one per process started)")
      ->type_name("N")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--memory-mb", cl.memory_mb,
                 "records each merge process holds in memory at once (MiB, about); more data "
                 "is merged in more rounds")
      ->default_val(cl.memory_mb)
      ->type_name("MIB")
      ->check(CLI::Range(0.001, 1e9));
  app.add_flag("--no-progress", cl.no_progress, "no progress bar (it is drawn only on a terminal)");
  app.add_option("--compression", cl.options.write_options.deflate_level,
                 "deflate level of the timeline's (and shards') record tables: 0 = none "
                 "(7x the bytes), 1 = AON's run-length encoder (fast), 2-9 = smaller, slower")
      ->default_val(cl.options.write_options.deflate_level)
      ->type_name("LEVEL")
      ->check(CLI::Range(0, 9));
  cl.options.write_options.compress_threads = DefaultCompressThreads();
  app.add_option("--threads", cl.options.write_options.compress_threads,
                 "threads per merge process that inflate the rank files' and compress the "
                 "timeline's record chunks; above 1, also one that merges while another writes "
                 "(default: the CPUs this process may run on, shared with the other merge "
                 "processes of its node, at most 4)")
      ->default_val(cl.options.write_options.compress_threads)
      ->type_name("N")
      ->check(CLI::Range(1, 64));
  app.add_flag("--timings", cl.timings,
               "print where each merge process spent its time (phases, wall and CPU seconds) "
               "on stderr");
}

// Stage: the parsed flags into the exports' options; false for a bad selection.
bool ApplyExportFlags(const CLI::App& app, CommandLine& cl) {
  cl.exports.write_chrome = !cl.no_chrome;
  cl.exports.write_perfetto = !cl.no_perfetto;
  cl.exports.perfetto_max_file_bytes = static_cast<uint64_t>(cl.perfetto_file_mb * (1 << 20));
  cl.exports.write_overview = !cl.no_overview;
  // Checked before anything is merged: a bad value writes nothing.
  auto parse = [&](const char* option, const std::string& text, auto parser) {
    if (app.count(option) == 0) return true;
    aon::Status s = parser(text, &cl.exports.chrome_filter);
    if (!s.ok()) std::fprintf(stderr, "%s: error: %s\n", Me(), s.message().c_str());
    return s.ok();
  };
  if (!parse("--window", cl.window, aon::merge::ParseWindow) ||
      !parse("--ranks", cl.ranks, aon::merge::ParseRankList) ||
      !parse("--kinds", cl.kinds, aon::merge::ParseKindList)) {
    return false;
  }
  return true;
}

// Stage: the merge's process-wide settings: communicator, memory and progress bar.
void SetUpMerge(aon::merge::MergeComm* comm, CommandLine& cl) {
  cl.options.comm = comm;
  cl.options.memory_budget_bytes = static_cast<uint64_t>(cl.memory_mb * 1048576.0);
  // Each kind's record buffers are freed before the next kind takes as much
  // again. glibc returns large blocks to the kernel (mmap'd, or trimmed off
  // the heap), and faulting them in again cost 13 % of a merge (64 ranks x
  // 50 k records, one process). Up to 32 MiB (glibc's largest threshold) they
  // now come from the heap, which keeps up to the memory budget when freed.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD,
          static_cast<int>(std::min<uint64_t>(cl.options.memory_budget_bytes, INT32_MAX)));
  cl.options.progress = !cl.quiet && !cl.no_progress;
}

// Stage: what process 0 says of the outcome on stderr and stdout; the exit status.
int ReportOutcome(const aon::Status& status, const aon::merge::MergeOptions& options,
                  const aon::merge::MergeReport& report, bool quiet) {
  if (!status.ok()) {
    if (report.timeline_path.empty()) RemovePartialTimeline(options);
    std::fprintf(stderr, "%s: error: %s\n", Me(), aon::EscapeForTerminal(status.message()).c_str());
    if (!report.timeline_path.empty()) {
      std::fprintf(stderr, "%s: the timeline %s was written\n", Me(), report.timeline_path.c_str());
    }
    return 1;
  }
  for (const std::string& p : report.problems) {
    std::fprintf(stderr, "%s: warning: %s\n", Me(), aon::EscapeForTerminal(p).c_str());
  }
  if (!report.chrome_not_written.empty()) {
    std::fprintf(stderr, "%s: note: %s\n", Me(),
                 aon::EscapeForTerminal(report.chrome_not_written).c_str());
  }
  // Hosts and paths come from the rank files: shown, never interpreted.
  if (!quiet)
    std::fputs(aon::EscapeForTerminal(aon::merge::FormatMergeSummary(report)).c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "aon-merge: merge a job directory's per-rank AON traces (rank-NNNNN.h5) into one "
      "cluster timeline (HDF5), a Perfetto trace (protobuf, compressed), a Chrome trace (JSON, "
      "while small) and a downsampled overview of the whole run (JSON)",
      "aon-merge"};
  g_name = aon::cli::ToolName(argv[0], "aon-merge");
  aon::cli::ApplyConventions(app, g_name);
  CommandLine cl;
  AddOutputOptions(app, cl);
  AddMergeOptions(app, cl);
  app.footer(
      "Exit status: 0 the timeline was written (bad ranks are recorded in it and named on\n"
      "stderr), 1 nothing could be merged or an output could not be written, 2 bad command line.");
  if (auto done = aon::cli::Parse(app, argc, argv)) return *done;
  if (!ApplyExportFlags(app, cl)) return aon::cli::kExitUsage;
  aon::merge::MergeOptions& options = cl.options;
  aon::merge::MergeExportOptions& exports = cl.exports;

  std::unique_ptr<aon::merge::MergeComm> comm;
  if (aon::merge::LaunchedAsMpiJob()) {
    comm = aon::merge::InitMpiComm(&argc, &argv);
  } else if (cl.procs > 1) {
    return RelaunchUnderMpirun(cl.procs, argc, argv);
  }
  SetUpMerge(comm.get(), cl);

  const bool speaker = comm == nullptr || comm->rank() == 0;  // process 0 speaks for all
  // The viewer outputs' paths are checked before anything is merged.
  if (aon::Status s = aon::merge::ResolveMergeExports(options, &exports); !s.ok()) {
    if (speaker) std::fprintf(stderr, "%s: error: %s\n", Me(), s.message().c_str());
    return 1;
  }

  aon::merge::MergeReport report;
  aon::Status status = aon::merge::MergeJob(options, &report);
  if (cl.timings) {
    std::fprintf(stderr, "%s: timings: %s", Me(), aon::merge::FormatMergePhases(report).c_str());
  }
  if (!speaker) return status.ok() ? 0 : 1;
  // The exports, from the timeline MergeJob wrote.
  if (status.ok()) status = aon::merge::WriteMergeExports(exports, &report);
  return ReportOutcome(status, options, report, cl.quiet);
}
