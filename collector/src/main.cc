// aon-collector: the node collector (see collector.h). Normally started by the
// first rank's agent on a node; `aon-collector --trigger` and `--quiesce` talk
// to a running one.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>

#include "aon/cli/command_line.h"
#include "aon/config/agent_config.h"
#include "aon/ipc/collector_protocol.h"
#include "collector.h"

namespace {

// CLI11's map from a choice's names to its enum (values in the order of `names`).
template <typename E, size_t N>
std::map<std::string, E> ChoiceMap(const std::array<std::string_view, N>& names, int first = 0) {
  std::map<std::string, E> m;
  for (size_t i = 0; i < N; ++i) m.emplace(std::string(names[i]), static_cast<E>(first + int(i)));
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  using aon::collector::CollectorOptions;
  CollectorOptions o;
  std::string job_id;
  bool daemon = false;
  std::string trigger;
  bool quiesce = false;
  int timeout_ms = 30000;

  CLI::App app{"aon-collector: drains the AON rings of one node's ranks into their trace files",
               "aon-collector"};
  aon::cli::ApplyConventions(app, "aon-collector");
  app.add_option("--socket-name", o.socket_name,
                 "abstract socket name (default: from the job id and output dir)")
      ->type_name("NAME");
  app.add_option("--output-dir", o.output_dir, "the job directory (AON_OUTPUT_DIR)")
      ->type_name("DIR");
  app.add_option("--job-id", job_id, "the job id (AON_JOB_ID), to derive the socket name")
      ->type_name("ID");
  // Budgeted and full capture are the same to the collector: it writes what arrives.
  app.add_option("--mode", o.mode, "budgeted, full or flight")
      ->type_name("budgeted|full|flight")
      ->transform(CLI::CheckedTransformer(
          ChoiceMap<aon::CaptureMode>(aon::kCaptureModes, /*first=*/1)));  // kUnknown is 0
  app.add_option("--window", o.window_s, "flight mode: seconds kept")
      ->type_name("SECONDS")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--flush-ms", o.flush_ms, "ms between appends to the files")
      ->type_name("MS")
      ->check(CLI::Range(10, 600000));
  app.add_option("--drain-ms", o.drain_ms, "ms between ring drains")
      ->type_name("MS")
      ->check(CLI::Range(1, 10000));
  app.add_option("--cpu-budget", o.cpu_budget, "CPU bound in cores (drains less often above it)")
      ->type_name("CORES")
      ->check(CLI::Range(0.01, 64.0));
  app.add_option("--linger-ms", o.linger_ms, "ms to wait after the last rank left")
      ->type_name("MS")
      ->check(CLI::Range(0, 3600000));
  app.add_option("--idle-exit-ms", o.idle_exit_ms, "exit if no rank connects within this")
      ->type_name("MS")
      ->check(CLI::Range(0, 3600000));
  // The agent's choices and range (AON_COUNTERS, AON_COUNTERS_INTERVAL: aon/config/agent_config.h).
  app.add_option("--counters", o.counters, "GPU counters: auto, gpm or off")
      ->type_name("auto|gpm|off")
      ->transform(CLI::CheckedTransformer(ChoiceMap<aon::CounterMode>(aon::kCounterModes)));
  app.add_option("--counters-interval-ms", o.counters_interval_ms, "ms between GPM samples")
      ->type_name("MS")
      ->check(CLI::Range(10, 60000));
  // The agent's ranges (AON_FLIGHT_NCCL_STALL, AON_FLIGHT_STEP_FACTOR: aon/config/agent_config.h).
  app.add_option("--nccl-stall", o.flight.nccl_stall_s, "flight: NCCL stall seconds (0 off)")
      ->type_name("SECONDS")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--step-range", o.flight.step_range, "flight: NVTX step range name ('' off)")
      ->type_name("NAME");
  app.add_option("--step-factor", o.flight.step_factor, "flight: step spike factor")
      ->type_name("FACTOR")
      ->check(CLI::Range(1.01, 1000.0));
  app.add_flag("--verbose", o.verbose, "log progress to stderr");
  app.add_flag("--daemon", daemon, "detach after binding the socket (used by the agent)");
  app.add_option("--trigger", trigger,
                 "ask the running collector to dump its flight window, with this reason")
      ->type_name("REASON");
  app.add_flag("--quiesce", quiesce,
               "ask the running collector to finish every file and exit; waits for it");
  app.add_option("--timeout-ms", timeout_ms, "how long --trigger/--quiesce wait for an answer")
      ->type_name("MS")
      ->check(CLI::Range(1, 3600000));
  if (auto done = aon::cli::Parse(app, argc, argv)) return *done;

  const bool control = !trigger.empty() || quiesce;
  if (o.socket_name.empty() && o.output_dir.empty()) {
    fprintf(stderr, "aon-collector: give --socket-name, or --output-dir (and --job-id)\n");
    return 2;
  }
  // Only a collector of the caller's own user is talked to (the name alone
  // proves nothing: collector_protocol.h).
  aon::CollectorEndpoint endpoint{o.socket_name, geteuid()};
  if (o.socket_name.empty()) {
    // A collector started by hand makes the job's key if there is none; a
    // --trigger / --quiesce without a key has nobody to talk to.
    auto found = aon::JobCollector(job_id, o.output_dir,
                                   control ? aon::KeyMode::kRead : aon::KeyMode::kCreate);
    if (!found.ok()) {
      fprintf(stderr, "aon-collector: %s\n", found.error().message().c_str());
      return 1;
    }
    endpoint = *found;
    o.socket_name = endpoint.name;
  }
  if (control) {
    const aon::CollectorRequest request =
        quiesce ? aon::CollectorRequest::Quiesce() : aon::CollectorRequest::Trigger(trigger);
    auto answer = aon::CallCollector(endpoint, request, timeout_ms);
    if (!answer.ok()) {
      fprintf(stderr, "aon-collector: %s\n", answer.error().message().c_str());
      return 1;
    }
    // What the collector answered: "OK <what it did>" / "IDLE".
    printf("%s %s\n", aon::CollectorReplyName(aon::ExpectedReply(request.verb)), answer->c_str());
    return 0;
  }
  if (o.output_dir.empty()) {
    fprintf(stderr, "aon-collector: --output-dir is required\n");
    return 2;
  }
  auto fd = aon::collector::BindListener(o.socket_name);
  if (!fd.ok()) {
    // Losing the election is the normal case for all but one rank's spawn.
    if (fd.status().code() == aon::StatusCode::kUnavailable) return 0;
    fprintf(stderr, "[aon] collector: %s\n", fd.status().message().c_str());
    return 1;
  }
  if (daemon) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("[aon] collector: fork");
      return 1;
    }
    if (pid > 0) _exit(0);  // the agent reaps this one; the child is adopted by init
    // The agent starts it in a process group of its own but in the job's
    // session (collector_link.cc says why), so it may share the job's
    // terminal: reading it or writing to it from the background must not stop
    // the collector. (A hang-up reaches the foreground group, not this one.)
    signal(SIGTTOU, SIG_IGN);
    signal(SIGTTIN, SIG_IGN);
    // Nothing of the application's stays open here but stderr (for messages).
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0) {
      dup2(devnull, 0);
      dup2(devnull, 1);
    }
    for (int f = 3; f < 1024; ++f) {
      if (f != *fd && f != devnull) close(f);
    }
  }
  umask(077);
  return aon::collector::RunCollector(o, *fd);
}
