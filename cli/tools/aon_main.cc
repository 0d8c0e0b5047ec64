// aon: the one front end. `aon <command> [args...]` runs the tool aon-<command>
// that sits beside it (as git runs git-<command>), with argv[0] = "aon
// <command>" so that its help and errors use the name the user typed. The
// tools stay the implementations and can be run as aon-<command> too.
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "aon/base/terminal_text.h"
#include "aon/cli/command_line.h"

namespace {

struct Command {
  const char* name;
  const char* summary;
};

// In the order a user meets them.
constexpr Command kCommands[] = {
    {"run", "profile a job: aon run [options] <mpirun|srun|torchrun|program> <args...>"},
    {"report", "what to fix: findings of a job, in the terminal and as HTML and JSON"},
    {"stats", "summary tables per kernel, copy, CUDA call, NVTX range, NCCL call, operator, step"},
    {"diff", "what changed between two runs, per step, largest change first"},
    {"export", "Perfetto, Chrome JSON or OTF2 of a timeline, or of a window, ranks and kinds"},
    {"inspect", "what a rank file or a timeline holds (counts, ranks, drops, notes)"},
    {"merge", "merge a job's rank files into one timeline (aon run does it at the job's end)"},
    {"ctl", "steer a running job: capture steps on demand, flight-recorder dumps, where it is"},
};

std::string Usage() {
  std::string text =
      "aon: an always-on GPU profiler for Slurm/MPI machine-learning jobs\n\n"
      "Usage: aon <command> [args...]\n"
      "       aon help <command>       the command's own help (also: aon <command> --help)\n"
      "       aon --version\n\nCommands:\n";
  for (const Command& c : kCommands) {
    text += "  " + std::string(c.name);
    text.append(10 - std::strlen(c.name), ' ');
    text += c.summary;
    text += '\n';
  }
  text +=
      "\nExamples:\n"
      "  aon run mpirun -np 4 ./train            profile; the job directory is named at the end\n"
      "  aon report aon-1234                     findings of that job directory\n"
      "  aon stats aon-1234 -r kernels           the kernels' time table\n"
      "  aon diff aon-1200 aon-1234              what got slower since run 1200\n"
      "  aon ctl capture --steps 20 aon-1234     trace the next 20 steps of a running job\n"
      "\nEvery command takes a job directory wherever it takes a timeline. Exit status: 0 done,\n"
      "1 failed (the message says why), 2 bad command line; aon run exits with the\n"
      "application's status, and 125-127 when it could not run it.\n";
  return text;
}

int Distance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diag = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

const Command* Find(std::string_view name) {
  for (const Command& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

int Unknown(std::string_view word) {
  std::string hint;
  for (const Command& c : kCommands)
    if (Distance(word, c.name) <= 2) hint = std::string("; did you mean '") + c.name + "'?";
  std::fprintf(stderr, "aon: error: '%s' is not an aon command%s\nrun 'aon --help' for the list\n",
               aon::EscapeForTerminal(word).c_str(), hint.c_str());
  return aon::cli::kExitUsage;
}

// The directory this program was started from: the tools live beside it, in the
// build tree (build/bin) as in an installed tree (bin/).
std::string OwnDirectory() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

int RunTool(const Command& c, int argc, char** argv, bool help) {
  const std::string dir = OwnDirectory();
  const std::string tool = dir + "/aon-" + c.name;
  std::string shown = std::string("aon ") + c.name;
  std::vector<char*> args = {shown.data()};
  std::string help_flag = "--help";
  if (help) args.push_back(help_flag.data());
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(tool.c_str(), args.data());
  std::fprintf(stderr, "aon: error: cannot run %s: %s (the tools are installed beside aon)\n",
               aon::EscapeForTerminal(tool).c_str(), std::strerror(errno));
  return aon::cli::kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(Usage().c_str(), stderr);
    return aon::cli::kExitUsage;
  }
  const std::string_view first = argv[1];
  if (first == "-h" || first == "--help") {
    std::fputs(Usage().c_str(), stdout);
    return std::fflush(stdout) == 0 ? aon::cli::kExitOk : aon::cli::kExitFailed;
  }
  if (first == "--version") {
    std::printf("aon %s\n", std::string(aon::cli::Version()).c_str());
    return std::fflush(stdout) == 0 ? aon::cli::kExitOk : aon::cli::kExitFailed;
  }
  if (first == "help") {
    if (argc == 2) {
      std::fputs(Usage().c_str(), stdout);
      return std::fflush(stdout) == 0 ? aon::cli::kExitOk : aon::cli::kExitFailed;
    }
    const Command* c = Find(argv[2]);
    return c == nullptr ? Unknown(argv[2]) : RunTool(*c, argc - 3, argv + 3, /*help=*/true);
  }
  if (!first.empty() && first[0] == '-') {
    std::fprintf(stderr,
                 "aon: error: unknown option '%s' (options go after the command: aon run -o DIR "
                 "...)\nrun 'aon --help' for the list of commands\n",
                 aon::EscapeForTerminal(first).c_str());
    return aon::cli::kExitUsage;
  }
  const Command* c = Find(first);
  return c == nullptr ? Unknown(first) : RunTool(*c, argc - 2, argv + 2, /*help=*/false);
}
