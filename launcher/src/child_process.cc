#include "aon/launcher/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>

#include "aon/base/spawn.h"

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

  // The mask aon-run started with (the child's).
  const sigset_t& old_mask() const { return old_mask_; }
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
  SignalForwarding forwarding;
  // The child starts with the dispositions and mask aon-run started with:
  // exec resets the forwarding handlers, the mask is set here.
  SpawnSpec spec;
  spec.path = path;
  spec.argv = argv;
  spec.envp = envp;
  spec.signal_mask = forwarding.old_mask();
  AON_ASSIGN_OR_RETURN(const pid_t child, Spawn(spec));
  forwarding.StartForwardingTo(child);
  return WaitFor(child, path);
}

}  // namespace aon::launcher
