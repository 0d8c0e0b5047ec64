#include "aon/base/spawn.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

extern char** environ;

namespace aon {
namespace {

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

StatusOr<pid_t> Spawn(const SpawnSpec& spec) {
  std::vector<char*> argv = CStrings(spec.argv);
  std::vector<char*> envp;
  if (spec.envp) envp = CStrings(*spec.envp);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  short flags = 0;
  if (spec.new_session) flags |= POSIX_SPAWN_SETSID;
  if (spec.new_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  if (spec.signal_mask) {
    flags |= POSIX_SPAWN_SETSIGMASK;
    posix_spawnattr_setsigmask(&attr, &*spec.signal_mask);
  }
  if (spec.default_signals) {
    flags |= POSIX_SPAWN_SETSIGDEF;
    sigset_t all;
    sigfillset(&all);
    posix_spawnattr_setsigdefault(&attr, &all);
  }
  posix_spawnattr_setflags(&attr, flags);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (spec.stdout_to_stderr) posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, spec.path.c_str(), &actions, &attr, argv.data(),
                             spec.envp ? envp.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return ErrnoStatus("cannot execute " + spec.path, rc);
  return pid;
}

StatusOr<int> WaitFor(pid_t pid, const std::string& what) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus("cannot wait for " + what, errno);
  }
  return status;
}

int ExitCodeOf(int wait_status, int otherwise) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return otherwise;
}

}  // namespace aon
