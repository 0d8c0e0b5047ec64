// aon-ctl: steer a running job's profiling from outside it.
//
//   aon-ctl capture [--steps N] [--lead SECONDS] [--first-step S] JOB_DIR
//       every rank of the job, on every node, traces the same N steps from the
//       next step that all of them can still reach (docs/always-on.md, "On demand")
//   aon-ctl steps JOB_DIR
//       where each node of the job is: its latest step, step source and length
//   aon-ctl trigger [--wait SECONDS] JOB_DIR [REASON...]
//       a flight-mode job's collectors, on every node, write their windows with
//       REASON; each answers what it did, and aon-ctl prints the answers
//
// It talks to the job through files in its job directory (aon/ipc/capture_request.h):
// each node's collector publishes its steps there and picks requests up from
// there, so a directory the nodes share reaches all of them. Only the job's
// user can steer it: the files are written and read as that user's own.
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "aon/base/secure_fs.h"
#include "aon/base/terminal_text.h"
#include "aon/base/timebase.h"
#include "aon/cli/command_line.h"
#include "aon/ipc/capture_request.h"

namespace {

std::string g_name = "aon-ctl";  // "aon ctl" through the front end

void Say(const std::string& line) {
  std::fprintf(stderr, "%s: %s\n", g_name.c_str(), line.c_str());
}

const char* SourceName(aon::StepSource s) {
  const char* n = aon::EnumValueName(aon::kStepSourceValues, static_cast<int64_t>(s));
  return n != nullptr ? n : "none";
}

// The job directory must be a directory of this user: a request is only ever
// put where the job's own collectors look, never into someone else's directory.
aon::Status CheckJobDir(const std::string& dir) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return aon::ErrnoStatus(dir, errno);
  if (!S_ISDIR(st.st_mode)) return aon::InvalidArgument(dir + ": not a job directory");
  if (st.st_uid != geteuid())
    return aon::Status(aon::StatusCode::kPermissionDenied,
                       dir + ": owned by uid " + std::to_string(st.st_uid) + ", not by this user");
  return aon::Status::Ok();
}

// The control files in `dir` whose names start with `prefix` (each node's
// own), read as the user's own (a link or another user's file is an error) and
// parsed; `skipped` gets the message of each one that could not be.
template <typename T>
std::vector<T> ReadControlFiles(const std::string& dir, const char* prefix,
                                aon::StatusOr<T> (*parse)(std::string_view, const std::string&),
                                std::vector<std::string>* skipped) {
  std::vector<T> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(prefix, 0) != 0 || name.find(".partial") != std::string::npos) continue;
    const std::string path = dir + "/" + name;
    auto text = aon::ReadPrivateFile(path, aon::kControlFileMaxBytes);
    if (!text.ok()) {
      skipped->push_back(text.status().message());
      continue;
    }
    auto parsed = parse(*text, path);
    if (!parsed.ok()) {
      skipped->push_back(parsed.status().message());
      continue;
    }
    out.push_back(std::move(parsed).value());
  }
  closedir(d);
  return out;
}

// The sequence number of a new request in `path`: past the request already
// there (if any).
template <typename T>
uint64_t NextSeq(const std::string& path,
                 aon::StatusOr<T> (*parse)(std::string_view, const std::string&)) {
  uint64_t seq = 0;
  if (auto old = aon::ReadPrivateFile(path, aon::kControlFileMaxBytes); old.ok()) {
    if (auto prev = parse(*old, path); prev.ok()) seq = prev->seq;
  }
  return seq + 1;
}

// Every node's published steps; problems with single files are said, not fatal.
// A node whose latest step is old (over 2 min and over 10 steps ago) is left
// out when `skip_stale`: a file left by an earlier run in the same directory, or
// a node whose ranks stopped stepping; its step would set the first step wrong.
std::vector<aon::NodeSteps> ReadNodes(const std::string& dir, bool skip_stale = false) {
  std::vector<std::string> skipped;
  std::vector<aon::NodeSteps> found =
      ReadControlFiles(dir, aon::kNodeStepsPrefix, aon::ParseNodeSteps, &skipped);
  for (const std::string& why : skipped) Say("skipped: " + aon::EscapeForTerminal(why));
  std::vector<aon::NodeSteps> nodes;
  const uint64_t now = aon::RealtimeNowNs();
  for (aon::NodeSteps& n : found) {
    const uint64_t age = now > n.at_realtime_ns ? now - n.at_realtime_ns : 0;
    if (skip_stale && age > std::max<uint64_t>(120'000'000'000ull, 10 * n.step_ns)) {
      Say("skipped " + aon::EscapeForTerminal(n.host) + ": its latest step began " +
          std::to_string(age / 1000000000ull) +
          " s ago (an earlier run in this directory, or its ranks stopped stepping)");
      continue;
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

int Steps(const std::string& dir) {
  if (aon::Status st = CheckJobDir(dir); !st.ok()) {
    Say("error: " + aon::EscapeForTerminal(st.message()));
    return aon::cli::kExitFailed;
  }
  const std::vector<aon::NodeSteps> nodes = ReadNodes(dir);
  if (nodes.empty()) {
    Say(dir + ": no node has published steps yet (is the job running, in budgeted mode?)");
    return 1;
  }
  const uint64_t now = aon::RealtimeNowNs();
  std::printf("%-24s %12s %-10s %10s %8s %6s\n", "host", "step", "source", "step ms", "age s",
              "ranks");
  for (const aon::NodeSteps& n : nodes) {
    std::printf("%-24.24s %12llu %-10s %10.3f %8.1f %6u\n", aon::EscapeForTerminal(n.host).c_str(),
                static_cast<unsigned long long>(n.step), SourceName(n.source), n.step_ns / 1e6,
                now > n.at_realtime_ns ? (now - n.at_realtime_ns) / 1e9 : 0.0, n.ranks);
  }
  return 0;
}

// The answers to trigger request `seq` found so far. A file that cannot be
// read or parsed is left out (not the user's own, a link, or being replaced).
std::vector<aon::TriggerAnswer> ReadAnswers(const std::string& dir, uint64_t seq) {
  std::vector<std::string> skipped;
  std::vector<aon::TriggerAnswer> answers =
      ReadControlFiles(dir, aon::kTriggerAnswerPrefix, aon::ParseTriggerAnswer, &skipped);
  std::erase_if(answers, [&](const aon::TriggerAnswer& a) { return a.seq != seq; });
  return answers;
}

int Trigger(const std::string& dir, const std::vector<std::string>& words, double wait_s) {
  if (aon::Status st = CheckJobDir(dir); !st.ok()) {
    Say("error: " + aon::EscapeForTerminal(st.message()));
    return aon::cli::kExitFailed;
  }
  aon::TriggerRequest r;
  for (const std::string& w : words) r.reason += (r.reason.empty() ? "" : " ") + w;
  r.reason = aon::CleanTriggerReason(r.reason.empty() ? "by hand" : r.reason);
  const std::string path = dir + "/" + aon::kTriggerRequestFile;
  r.seq = NextSeq(path, aon::ParseTriggerRequest);
  // The nodes that publish steps say how many answers to wait for; without
  // any (no step source), the first answer and a short wait for more.
  const size_t nodes = ReadNodes(dir, /*skip_stale=*/true).size();
  if (aon::Status st = aon::WriteFileAtomically(path, aon::FormatTriggerRequest(r)); !st.ok()) {
    Say("error: " + aon::EscapeForTerminal(st.message()));
    return aon::cli::kExitFailed;
  }
  const uint64_t start = aon::RealtimeNowNs();
  const uint64_t limit = static_cast<uint64_t>(wait_s * 1e9);
  std::vector<aon::TriggerAnswer> answers;
  uint64_t settled_at = 0;  // when the answers stopped growing
  for (;;) {
    std::vector<aon::TriggerAnswer> now_found = ReadAnswers(dir, r.seq);
    const uint64_t now = aon::RealtimeNowNs();
    if (now_found.size() != answers.size()) settled_at = now;
    answers = std::move(now_found);
    if (nodes > 0 && answers.size() >= nodes) break;
    // Collectors read requests about once a second: 2.5 s without a new answer
    // after the first is every node that will answer.
    if (nodes == 0 && !answers.empty() && now - settled_at > 2'500'000'000ull) break;
    if (now - start > limit) break;
    const timespec pause{0, 100'000'000};
    nanosleep(&pause, nullptr);
  }
  std::sort(answers.begin(), answers.end(),
            [](const auto& a, const auto& b) { return a.host < b.host; });
  int dumped = 0;
  for (const aon::TriggerAnswer& a : answers) {
    std::printf("%s: %s\n", aon::EscapeForTerminal(a.host).c_str(),
                aon::EscapeForTerminal(a.what).c_str());
    dumped += a.dumped ? 1 : 0;
  }
  if (answers.empty()) {
    Say("error: no node collector answered within " + std::to_string(static_cast<int>(wait_s)) +
        " s (is the job running, and is " + aon::EscapeForTerminal(dir) +
        " shared by its nodes?); the request stays there for collectors that start later "
        "in this run");
    return aon::cli::kExitFailed;
  }
  if (nodes > answers.size()) {
    Say("warning: " + std::to_string(answers.size()) + " of " + std::to_string(nodes) +
        " nodes answered within " + std::to_string(static_cast<int>(wait_s)) + " s");
  }
  std::printf("trigger %llu (%s): %d of %zu node(s) dumped their flight window\n",
              static_cast<unsigned long long>(r.seq), aon::EscapeForTerminal(r.reason).c_str(),
              dumped, answers.size());
  return dumped > 0 ? aon::cli::kExitOk : aon::cli::kExitFailed;
}

int Capture(const std::string& dir, uint32_t steps, double lead_s, int64_t first_step) {
  if (aon::Status st = CheckJobDir(dir); !st.ok()) {
    Say("error: " + aon::EscapeForTerminal(st.message()));
    return aon::cli::kExitFailed;
  }
  const std::vector<aon::NodeSteps> nodes = ReadNodes(dir, /*skip_stale=*/true);
  aon::CaptureRequest r;
  r.steps = steps;
  if (first_step >= 0) {
    r.first_step = static_cast<uint64_t>(first_step);
    r.source = nodes.empty() ? aon::StepSource::kNone : nodes.front().source;
  } else {
    if (nodes.empty()) {
      Say(dir +
          ": no node has published steps yet (is the job running, in budgeted mode?); "
          "nothing requested");
      return 1;
    }
    r.source = nodes.front().source;
    r.first_step =
        aon::ChooseFirstStep(nodes, aon::RealtimeNowNs(), static_cast<uint64_t>(lead_s * 1e9));
  }
  for (const aon::NodeSteps& n : nodes) {
    if (n.source != r.source) {
      Say("nodes disagree on what marks a step (" + std::string(SourceName(n.source)) + " on " +
          aon::EscapeForTerminal(n.host) + ", " + SourceName(r.source) +
          " elsewhere); nothing requested");
      return 1;
    }
  }
  if (r.source == aon::StepSource::kNone) {
    Say("no step source known (no node has published steps): nothing requested");
    return 1;
  }
  const std::string path = dir + "/" + aon::kCaptureRequestFile;
  r.seq = NextSeq(path, aon::ParseCaptureRequest);
  if (aon::Status st = aon::WriteFileAtomically(path, aon::FormatCaptureRequest(r)); !st.ok()) {
    Say("error: " + aon::EscapeForTerminal(st.message()));
    return aon::cli::kExitFailed;
  }
  std::printf("capture %llu: steps %llu..%llu (%s) requested on %zu node(s)\n",
              static_cast<unsigned long long>(r.seq), static_cast<unsigned long long>(r.first_step),
              static_cast<unsigned long long>(r.first_step + r.steps - 1), SourceName(r.source),
              nodes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aon-ctl steers a running job's AON profiling through its job directory.",
               "aon-ctl"};
  g_name = aon::cli::ToolName(argv[0], "aon-ctl");
  aon::cli::ApplyConventions(app, g_name);
  app.require_subcommand(1);
  std::string dir;
  uint32_t steps = 3;
  double lead_s = 3.0;
  int64_t first_step = -1;
  CLI::App* capture = app.add_subcommand(
      "capture", "trace the same steps on every rank, from the next step all can reach");
  capture->add_option("--steps", steps, "steps to trace")
      ->type_name("N")
      ->check(CLI::Range(1u, aon::kMaxOnDemandSteps))
      ->capture_default_str();
  capture
      ->add_option("--lead", lead_s,
                   "seconds the request may take to reach every rank (collectors read it about "
                   "once a second)")
      ->type_name("SECONDS")
      ->check(CLI::Range(0.5, 3600.0))
      ->capture_default_str();
  capture
      ->add_option("--first-step", first_step,
                   "start at this step instead (when the job directory is not shared: run it "
                   "on every node with the same step, e.g. through srun --jobid J --overlap)")
      ->type_name("STEP")
      ->check(CLI::Range(int64_t{0}, INT64_MAX));
  capture->add_option("JOB_DIR", dir, "the job's directory (aon-run -o, srun --aon-output)")
      ->required();
  CLI::App* show = app.add_subcommand("steps", "where each node of the job is");
  show->add_option("JOB_DIR", dir, "the job's directory")->required();
  std::vector<std::string> reason;
  double wait_s = 10.0;
  CLI::App* trigger =
      app.add_subcommand("trigger", "flight mode: each node writes its window now, with a reason");
  trigger
      ->add_option("--wait", wait_s,
                   "seconds to wait for the nodes' answers (collectors read requests about "
                   "once a second)")
      ->type_name("SECONDS")
      ->check(CLI::Range(1.0, 600.0))
      ->capture_default_str();
  trigger->add_option("JOB_DIR", dir, "the job's directory")->required();
  trigger->add_option("REASON", reason, "why (kept with the dump; default: by hand)");
  app.footer(
      "Exit status: 0 done, 1 the request could not be made (the message says why), 2 bad "
      "command line.");
  if (auto done = aon::cli::Parse(app, argc, argv)) return *done;
  if (capture->parsed()) return Capture(dir, steps, lead_s, first_step);
  if (trigger->parsed()) return Trigger(dir, reason, wait_s);
  return Steps(dir);
}
