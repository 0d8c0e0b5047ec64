#include "process_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace aon::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::atomic<int> g_sequence{0};

}  // namespace

std::string ProcessResult::Describe() const {
  return "exit status " + std::to_string(exit_status) + (timed_out ? " (TIMED OUT)" : "") +
         "\n--- stdout ---\n" + out + "\n--- stderr ---\n" + err;
}

Process::Process(const std::vector<std::string>& argv,
                 const std::map<std::string, std::string>& env, const std::string& scratch_dir) {
  const int n = g_sequence.fetch_add(1);
  out_path_ = scratch_dir + "/process-" + std::to_string(n) + ".out";
  err_path_ = scratch_dir + "/process-" + std::to_string(n) + ".err";

  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [name, value] : env) merged[name] = value;
  std::vector<std::string> env_strings;
  for (const auto& [name, value] : merged) env_strings.push_back(name + "=" + value);
  std::vector<char*> c_env;
  for (std::string& s : env_strings) c_env.push_back(s.data());
  c_env.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> c_argv;
  for (std::string& s : args) c_argv.push_back(s.data());
  c_argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  int rc = posix_spawnp(&pid_, c_argv[0], &actions, &attr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    pid_ = -1;
    spawn_error_ = "cannot start " + argv[0] + ": " + std::strerror(rc);
  }
}

Process::~Process() {
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

ProcessResult Process::Wait(std::chrono::seconds limit) {
  ProcessResult result;
  if (pid_ <= 0) {
    result.err = spawn_error_;
    return result;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (true) {
    pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      result.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  if (!result.timed_out) {
    result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  result.out = ReadFile(out_path_);
  result.err = ReadFile(err_path_);
  return result;
}

ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env,
                         const std::string& scratch_dir, std::chrono::seconds limit) {
  Process process(argv, env, scratch_dir);
  return process.Wait(limit);
}

std::string MakeScratchDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  return ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
}

void EndScratchDir(const std::string& dir, bool failed) {
  if (dir.empty()) return;
  if (failed) {
    std::fprintf(stderr, "kept %s for inspection\n", dir.c_str());
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace aon::testing
