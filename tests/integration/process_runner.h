// Runs a program for an integration test: stdin from /dev/null, stdout and
// stderr captured, extra environment variables on top of the test's own, and
// a time limit after which the whole process group is killed (a hung mpirun
// fails the test instead of hanging ctest).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace aon::testing {

struct ProcessResult {
  int exit_status = -1;  // exit code, or 128 + signal; -1 if it had to be killed
  bool timed_out = false;
  std::string out;
  std::string err;
  std::string Describe() const;  // for failure messages: status, stdout, stderr
};

class Process {
 public:
  // Starts `argv` (argv[0] searched in PATH) in its own process group, with
  // stdout/stderr going to files in `scratch_dir`.
  Process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
          const std::string& scratch_dir);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  ProcessResult Wait(std::chrono::seconds limit = std::chrono::seconds(240));

 private:
  pid_t pid_ = -1;
  std::string out_path_;
  std::string err_path_;
  std::string spawn_error_;
};

// Runs to completion.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env,
                         const std::string& scratch_dir,
                         std::chrono::seconds limit = std::chrono::seconds(240));

// A private scratch directory for one test (mkdtemp in the system's temporary
// directory; "" if it cannot be made), and its end: removed when the test
// passed, kept and named on stderr for inspection when it failed.
std::string MakeScratchDir(const std::string& prefix);
void EndScratchDir(const std::string& dir, bool failed);

}  // namespace aon::testing
