// aon-run: profile a job started by mpirun, srun, torchrun or any program, then
// merge the per-rank traces into one timeline. See launch_plan.h for what it
// decides and child_process.h for how it runs the job.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "aon/cli/command_line.h"
#include "aon/config/agent_config.h"
#include "aon/config/merge_report.h"
#include "aon/config/option_docs.h"
#include "aon/config/tool_paths.h"
#include "aon/ipc/collector_protocol.h"
#include "aon/launcher/child_process.h"
#include "aon/launcher/launch_plan.h"
#include "aon/launcher/run_cli.h"

extern char** environ;

namespace {

using aon::launcher::LaunchPlan;
using aon::launcher::RunOptions;

std::string g_name = "aon-run";  // "aon run" through the front end

void Say(const std::string& line) {
  std::fprintf(stderr, "%s: %s\n", g_name.c_str(), line.c_str());
}

std::string Description() {
  return "aon-run profiles the GPUs of every process of a job and, when the job ends, merges\n"
         "the per-process traces into one timeline you can open in Perfetto.";
}

// CLI11's usage line would say "aon-run [OPTIONS]" and hide the command.
class UsageFormatter : public aon::cli::HelpFormatter {
 public:
  std::string make_usage(const CLI::App* app, std::string /*name*/) const override {
    return "\nUsage: " + app->get_name() +
           " [options] [--] <launcher> <args...>\n"
           "  <launcher> is mpirun/mpiexec (Open MPI), srun, torchrun, or any program. aon-run\n"
           "  runs it with the AON agent injected into every rank (through the CUDA driver's\n"
           "  CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH): the program needs no change.\n";
  }
};

std::string Footer() {
  std::string text =
      "Examples:\n"
      "  aon-run mpirun -np 4 ./train\n"
      "  aon-run -o /scratch/prof srun -n 8 --gpus-per-task=1 python train.py\n"
      "  aon-run torchrun --nproc-per-node=2 train.py\n"
      "  aon-run --source synthetic mpirun -np 4 --oversubscribe build/bin/aon-synthetic-app\n"
      "\n"
      "Results: the job directory (-o, default ./aon-<SLURM_JOB_ID> or\n"
      "./aon-<date>-<time>-<pid>) gets one rank-NNNNN.h5 per process; at the end the merge\n"
      "writes timeline.h5 (all ranks, one clock), trace.pftrace (open it at\n"
      "https://ui.perfetto.dev; trace.json too while the run is small) and overview.json, and\n"
      "the report prints its findings and writes report.html. Then: aon report, aon stats,\n"
      "aon diff, aon export, aon inspect on the directory. Records dropped under --memory-cap\n"
      "are counted and said.\n"
      "\n"
      "Environment set for every rank (the agent's settings; the options above fill them):\n";
  for (const aon::ConfigVariable& var : aon::AgentConfigVariables()) {
    std::string line = "  " + std::string(var.env);
    line.append(var.env[0] != '\0' && std::strlen(var.env) < 16 ? 16 - std::strlen(var.env) : 1,
                ' ');
    line += var.description;
    if (var.default_value[0] != '\0') line += std::string(" [default: ") + var.default_value + "]";
    text += aon::cli::Wrap(line, 90, 18) + "\n";
  }
  text +=
      "  CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH: the agent library, found at\n"
      "                  <aon-run's dir>/../lib/libaon_agent.so unless AON_AGENT_PATH is set\n"
      "aon-run sets AON_JOB_ID to the job directory's name unless it is already set.\n"
      "Open MPI gets '-x VAR' for each so remote ranks see them; srun forwards them (a\n"
      "narrowing --export gets them appended); torchrun and other programs inherit them.\n"
      "\n"
      "Exit status: the application's (128+N if a signal N killed it), never the merge's;\n"
      "125 for aon-run's own errors, 126/127 when the launcher cannot run / is not found.\n"
      "SIGINT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 are passed on to the launcher.";
  return text;
}

// Runs a program of the merge as aon-run's child (signals forwarded): its exit
// status, 128+N when signal N killed it.
aon::StatusOr<int> RunChild(const std::vector<std::string>& argv) {
  std::fflush(stdout);
  const std::vector<std::string> env = aon::launcher::EnvironmentWith(environ, {});
  AON_ASSIGN_OR_RETURN(int wait_status, aon::launcher::RunAndWait(argv.front(), argv, env));
  return aon::launcher::ExitStatusFromWaitStatus(wait_status);
}

// Merge, then report (aon/config/merge_report.h); a failure is a warning,
// never the exit status.
void MergeAndReport(const LaunchPlan& plan, bool report) {
  aon::MergePlan merge;
  merge.job_dir = plan.job_dir;
  merge.merge_program = plan.merge_path;
  merge.report_program = report ? aon::ToolPath(plan.bin_dir, aon::Tool::kReport) : "";
  // Through the job's mpirun (one process per host), the merge sees each host's files.
  merge.attempts.push_back({plan.merge_argv, plan.merge_argv.front() != plan.merge_path});
  const aon::MergeOutcome out =
      aon::MergeThenReport(merge, RunChild, [&](const aon::MergeEvent& e) {
        if (e.kind != aon::MergeEvent::Kind::kMergeStarting) return;
        Say("merging " + std::to_string(e.rank_files) + " rank file" +
            (e.rank_files == 1 ? "" : "s") + " with " + plan.merge_path);
        if (e.argv->front() != plan.merge_path) {
          std::string line = "merging on the job's hosts:";
          for (const std::string& w : *e.argv) line += " " + w;
          Say(line);
        }
      });
  switch (out.merge) {
    case aon::MergeResult::kNoRankFiles:
      Say("warning: no rank files were written to " + plan.job_dir +
          ", so there is nothing to merge. The agent runs only in processes that initialize "
          "CUDA (or NVTX); with --source cupti a CPU-only program writes nothing. Rerun with -v "
          "to see the agent's messages.");
      return;
    case aon::MergeResult::kNoMergeProgram:
      Say("warning: cannot merge: " + plan.merge_path + " is missing; the " +
          std::to_string(out.rank_files) + " rank files are in " + plan.job_dir);
      return;
    case aon::MergeResult::kMergeFailed:
      if (!out.merge_error.ok()) {
        Say("warning: merge failed: " + out.merge_error.message());
      } else {
        Say("warning: aon-merge failed (exit status " + std::to_string(out.merge_exit_status) +
            "); the rank files are in " + plan.job_dir + "; retry with: aon-merge " + plan.job_dir);
      }
      break;
    case aon::MergeResult::kMerged:
      break;
  }
  switch (out.report) {
    case aon::ReportResult::kNotInstalled:
      Say("warning: no report: " + merge.report_program +
          " is missing; run it later with: aon-report " + plan.job_dir);
      break;
    case aon::ReportResult::kFailed:
      if (!out.report_error.ok()) {
        Say("warning: report failed: " + out.report_error.message());
      } else {
        Say("warning: aon-report failed (exit status " + std::to_string(out.report_exit_status) +
            "); retry with: aon-report " + plan.job_dir);
      }
      break;
    case aon::ReportResult::kNotAsked:
    case aon::ReportResult::kNoTimeline:  // the merge said why
    case aon::ReportResult::kWritten:
      break;
  }
}

void PrintSummary(const LaunchPlan& plan, bool merged) {
  const std::string timeline = plan.job_dir + "/timeline.h5";
  const std::string chrome = plan.job_dir + "/trace.json";
  Say("job directory: " + plan.job_dir);
  if (!merged) {
    Say("  not merged (--no-merge); merge later with: aon-merge " + plan.job_dir);
    return;
  }
  if (::access(timeline.c_str(), R_OK) == 0) {
    Say("  timeline:   " + timeline);
    Say("              counts, per-rank status and dropped records: aon-inspect " + timeline);
  }
  if (const std::string report = plan.job_dir + "/report.html";
      ::access(report.c_str(), R_OK) == 0) {
    Say("  report:     " + report + " (aon-report; open it in a browser)");
  }
  if (::access(chrome.c_str(), R_OK) == 0) {
    Say("  trace.json: " + chrome);
    Say("              open it at https://ui.perfetto.dev (Open trace file)");
  } else if (::access(timeline.c_str(), R_OK) == 0) {
    Say("  trace.json: not written (too many records for a viewer); export a window with:");
    Say("              aon-export " + timeline + " --window START:END (seconds)");
  }
  if (const std::string overview = plan.job_dir + "/overview.json";
      ::access(overview.c_str(), R_OK) == 0) {
    Say("  overview:   " + overview + " (whole run, downsampled; opens in Perfetto too)");
  }
}

}  // namespace

// The node collector on this host finishes the files of ranks that died and,
// in flight mode, keeps the last window until told what happened: a failed
// job is a trigger. Waits until it has closed every file, so the merge reads
// finished files. (Collectors on other nodes finish their files on their own.)
void SettleCollector(const LaunchPlan& plan, const RunOptions& options, bool failed) {
  std::string job_id;
  for (const aon::launcher::EnvVar& v : plan.agent_env) {
    if (v.name == aon::AgentConfigVariable(aon::AgentVar::kJobId).env) job_id = v.value;
  }
  auto collector = aon::JobCollector(job_id, plan.job_dir);
  if (!collector.ok()) {
    Say("warning: " + collector.error().message());
    return;
  }
  auto said = [&](const aon::CollectorError& e) {
    // Another user's process on the job's socket: the ranks refused it too
    // (and wrote their own files); say it whatever the verbosity.
    if (e.code() == aon::CollectorErrc::kWrongPeer) {
      Say("warning: the node collector's socket " + e.message() +
          "; the ranks wrote their own files instead (see their notes)");
      return true;
    }
    return false;
  };
  if (failed && options.mode == aon::ChoiceName(aon::CaptureMode::kFlight)) {
    auto answer =
        aon::CallCollector(*collector, aon::CollectorRequest::Trigger("the job failed"), 10000);
    if (answer.ok()) Say("flight recorder: the job failed; the collector wrote its window");
    if (!answer.ok() && said(answer.error())) return;
  }
  auto idle = aon::CallCollector(*collector, aon::CollectorRequest::Quiesce(), 60000);
  if (idle.ok() || idle.code() == aon::CollectorErrc::kNoCollector) return;
  // No collector here (every rank elsewhere, or none left) is the usual case.
  if (!said(idle.error()) && options.verbose > 0) Say("collector: " + idle.error().message());
}

int main(int argc, char** argv) {
  aon::launcher::RunCommandLine command_line;
  RunOptions& options = command_line.options;

  CLI::App app{Description(), "aon-run"};
  g_name = aon::cli::ToolName(argv[0], "aon-run");
  aon::cli::ApplyConventions(app, g_name);
  aon::launcher::DefineRunOptions(app, command_line);
  // The reference tables of docs/options.md (scripts/regen-docs.sh), from the option table.
  app.add_flag_callback(
         "--options-markdown",
         [] {
           std::fputs(aon::session::OptionTablesMarkdown().c_str(), stdout);
           throw CLI::Success();
         },
         "print the option reference as Markdown (docs/options.md) and exit")
      ->group("");
  app.footer(Footer());
  app.formatter(std::make_shared<UsageFormatter>());
  app.get_formatter()->column_width(30);

  if (auto done = aon::cli::Parse(app, argc, argv, aon::launcher::kExitAonError)) return *done;
  options.merge = !command_line.no_merge;
  options.command = app.remaining();
  if (!options.command.empty() && options.command.front() == "--") {
    options.command.erase(options.command.begin());
  } else if (!options.command.empty() && options.command.front().size() > 1 &&
             options.command.front()[0] == '-') {
    // prefix_command() stops at the first word it does not know, options included.
    Say("error: unknown option '" + options.command.front() +
        "' (aon-run's options go before the launcher; a command starting with '-' goes after --)");
    Say("run '" + g_name + " --help' for usage");
    return aon::launcher::kExitAonError;
  }

  auto host = aon::launcher::CurrentHostContext();
  if (!host.ok()) {
    Say("error: " + host.status().message());
    return aon::launcher::kExitAonError;
  }
  auto planned = aon::launcher::PlanLaunch(options, *host);
  if (!planned.ok()) {
    Say("error: " + planned.status().message());
    return aon::launcher::PlanErrorExitStatus(planned.status());
  }
  const LaunchPlan& plan = *planned;
  std::vector<std::string> dir_warnings;
  if (aon::Status s = aon::launcher::PrepareOutputDir(plan.job_dir, &dir_warnings); !s.ok()) {
    Say("error: " + s.message());
    return aon::launcher::kExitAonError;
  }
  for (const std::string& w : dir_warnings) Say("warning: " + w);
  // A fresh key for this run's collector socket name (aon/ipc/collector_protocol.h):
  // nobody else can know the name before the collector holds it.
  if (auto key = aon::CollectorKey(plan.job_dir, aon::KeyMode::kRenew); !key.ok()) {
    Say("error: -o/--output: " + key.status().message());
    return aon::launcher::kExitAonError;
  }

  if (const char* existing = std::getenv("CUDA_INJECTION64_PATH");
      existing != nullptr && *existing != '\0' && plan.agent_path != existing) {
    Say(std::string("warning: replacing CUDA_INJECTION64_PATH=") + existing +
        " (only one injection library can be loaded)");
  }
  Say("profiling into " + plan.job_dir + " (source " + options.source + ", kinds " + options.kinds +
      ", memory cap " + options.memory_cap + ")");
  if (options.source == aon::ChoiceName(aon::GpuSource::kSynthetic))
    Say("SYNTHETIC source: the GPU activity in this trace is FAKE (labeled as such in every file)");
  if (options.verbose > 0) {
    std::string line =
        "running (" + std::string(aon::launcher::LauncherKindName(plan.launcher)) + "):";
    for (const std::string& word : plan.argv) line += " " + word;
    Say(line);
    for (const aon::launcher::EnvVar& var : plan.agent_env) Say("  " + var.name + "=" + var.value);
    if (!plan.launcher_unset.empty()) {
      std::string names;
      for (const std::string& name : plan.launcher_unset) names += " " + name;
      Say("  (given to the ranks only, not to the launcher itself:" + names + ")");
    }
  }
  std::fflush(stdout);

  const std::vector<std::string> env =
      aon::launcher::EnvironmentWith(environ, plan.launcher_env, plan.launcher_unset);
  auto waited = aon::launcher::RunAndWait(plan.program_path, plan.argv, env);
  if (!waited.ok()) {
    Say("error: " + waited.status().message());
    return waited.status().code() == aon::StatusCode::kNotFound ? aon::launcher::kExitNotFound
                                                                : aon::launcher::kExitCannotExecute;
  }
  const int app_status = aon::launcher::ExitStatusFromWaitStatus(*waited);
  if (WIFSIGNALED(*waited)) {
    Say(std::string("the application was killed by signal ") + std::to_string(WTERMSIG(*waited)) +
        " (" + strsignal(WTERMSIG(*waited)) + "); aon-run will exit with " +
        std::to_string(app_status));
  } else if (app_status != 0) {
    Say("the application exited with status " + std::to_string(app_status));
  }

  SettleCollector(plan, options, app_status != 0);
  if (options.merge) MergeAndReport(plan, !command_line.no_report);
  PrintSummary(plan, options.merge);
  return app_status;
}
