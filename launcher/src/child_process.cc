#include "aon/launcher/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>

namespace aon::launcher {
namespace {

constexpr std::array<int, 5> kForwardedSignals = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};

// The child that signals go to; 0 when none. Written by RunAndWait with the
// forwarded signals blocked, read by the handler.
std::atomic<pid_t> g_forward_to{0};
static_assert(std::atomic<pid_t>::is_always_lock_free, "read from a signal handler");

void ForwardSignal(int signal_number, siginfo_t* info, void* /*context*/) {
  const int saved_errno = errno;
  const pid_t child = g_forward_to.load(std::memory_order_relaxed);
  // SI_KERNEL: the terminal sent it to our whole process group; the child has it.
  const bool child_has_it = info != nullptr && info->si_code == SI_KERNEL;
  if (child > 0 && !child_has_it) ::kill(child, signal_number);
  errno = saved_errno;
}

// Installs the forwarding handler, and restores what was there before.
class SignalForwarding {
 public:
  SignalForwarding() {
    sigemptyset(&blocked_);
    for (int s : kForwardedSignals) sigaddset(&blocked_, s);
    // Blocked until the child's pid is known, so no signal is lost in between.
    ::sigprocmask(SIG_BLOCK, &blocked_, &old_mask_);
    for (size_t i = 0; i < kForwardedSignals.size(); ++i) {
      ::sigaction(kForwardedSignals[i], nullptr, &old_actions_[i]);
      // A signal aon-run was started with ignored (nohup) stays ignored, for
      // aon-run and for the child, as a shell would do.
      if (old_actions_[i].sa_handler == SIG_IGN) continue;
      struct sigaction action {};
      action.sa_sigaction = ForwardSignal;
      action.sa_flags = SA_SIGINFO | SA_RESTART;
      sigemptyset(&action.sa_mask);
      ::sigaction(kForwardedSignals[i], &action, nullptr);
    }
  }
  ~SignalForwarding() {
    g_forward_to.store(0, std::memory_order_relaxed);
    RestoreActions();
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

  // In the child before exec: the dispositions and mask aon-run started with.
  void RestoreInChild() const {
    RestoreActions();
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  void StartForwardingTo(pid_t child) {
    g_forward_to.store(child, std::memory_order_relaxed);
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }

 private:
  void RestoreActions() const {
    for (size_t i = 0; i < kForwardedSignals.size(); ++i)
      ::sigaction(kForwardedSignals[i], &old_actions_[i], nullptr);
  }

  sigset_t blocked_{};
  sigset_t old_mask_{};
  std::array<struct sigaction, kForwardedSignals.size()> old_actions_{};
};

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::vector<std::string> EnvironmentWith(char** base, const std::vector<EnvVar>& vars,
                                         const std::vector<std::string>& unset) {
  std::vector<std::string> out;
  for (char** entry = base; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    std::string_view name = text.substr(0, text.find('='));
    bool dropped = false;
    for (const EnvVar& var : vars) dropped = dropped || var.name == name;
    for (const std::string& removed : unset) dropped = dropped || removed == name;
    if (!dropped) out.emplace_back(text);
  }
  for (const EnvVar& var : vars) out.push_back(var.name + "=" + var.value);
  return out;
}

StatusOr<int> RunAndWait(const std::string& path, const std::vector<std::string>& argv,
                         const std::vector<std::string>& envp) {
  // Everything the child needs is built before fork: between fork and exec
  // only async-signal-safe calls are allowed.
  std::vector<char*> c_argv = CStrings(argv);
  std::vector<char*> c_envp = CStrings(envp);

  // The child reports a failed exec through this pipe; a successful exec
  // closes it (O_CLOEXEC) and the parent reads end-of-file.
  int exec_error_pipe[2];
  if (::pipe2(exec_error_pipe, O_CLOEXEC) != 0) return ErrnoStatus("cannot create a pipe", errno);

  SignalForwarding forwarding;
  const pid_t child = ::fork();
  if (child < 0) {
    const int fork_errno = errno;
    ::close(exec_error_pipe[0]);
    ::close(exec_error_pipe[1]);
    return ErrnoStatus("cannot start " + path + ": fork failed", fork_errno);
  }
  if (child == 0) {
    ::close(exec_error_pipe[0]);
    forwarding.RestoreInChild();
    ::execve(path.c_str(), c_argv.data(), c_envp.data());
    const int exec_errno = errno;
    ssize_t ignored = ::write(exec_error_pipe[1], &exec_errno, sizeof(exec_errno));
    (void)ignored;
    ::_exit(kExitNotFound);
  }
  forwarding.StartForwardingTo(child);
  ::close(exec_error_pipe[1]);

  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_error_pipe[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  ::close(exec_error_pipe[0]);

  int wait_status = 0;
  pid_t waited;
  do {
    waited = ::waitpid(child, &wait_status, 0);
  } while (waited < 0 && errno == EINTR);
  if (waited < 0) return ErrnoStatus("cannot wait for " + path, errno);
  if (n == static_cast<ssize_t>(sizeof(exec_errno)))
    return ErrnoStatus("cannot execute " + path, exec_errno);
  return wait_status;
}

}  // namespace aon::launcher
