// Starting another program: the one way AON does it (aon-run's launcher, merge and
// report; the SPANK plugin's merge and report; the agent's node collector).
//
// posix_spawn underneath (glibc: a child sharing the parent's memory until it
// executes, no page tables copied, no pthread_atfork handlers run). That is what
// the agent needs: it starts the collector from inside CUDA's cuInit in a process
// that may map tens of GiB and whose frameworks register fork handlers. An error
// means the program never ran; glibc reports a failed exec as the error itself
// (ENOENT: not found, EACCES: not executable).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "aon/base/status.h"

namespace aon {

struct SpawnSpec {
  std::string path;               // what to execute
  std::vector<std::string> argv;  // argv[0] included
  // "NAME=value" entries; unset: this process's environment.
  std::optional<std::vector<std::string>> envp;
  bool new_session = false;       // setsid() in the child: no terminal, no job control
  // A process group of its own (setpgid(0, 0)) but this session: no signal to
  // the caller's group reaches it, and it stays in the session's scheduling
  // autogroup (a new session is a new autogroup, sched(7)).
  bool new_process_group = false;
  bool stdout_to_stderr = false;  // the child's standard output goes where our stderr goes
  // The child's signal mask (unset: ours), and every signal back to its default
  // disposition (else only the caught ones are, as exec does).
  std::optional<sigset_t> signal_mask;
  bool default_signals = false;
};

// Starts `spec`; the child's pid. The message of an error names spec.path.
StatusOr<pid_t> Spawn(const SpawnSpec& spec);

// Waits for `pid` (EINTR retried): its waitpid() status. `what` names it in an error.
StatusOr<int> WaitFor(pid_t pid, const std::string& what);

// What a waitpid() status says as one exit code, the shell's way: the code, or
// 128 + the signal that killed it; `otherwise` for neither (stopped).
int ExitCodeOf(int wait_status, int otherwise);

}  // namespace aon
