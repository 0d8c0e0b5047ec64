#include "secure_fs.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "aon/base/fd_io.h"
#include "aon/base/spawn.h"
#include "aon/config/tool_paths.h"
#include "aon/ipc/collector_protocol.h"

namespace aon::spank {

Status MakePrivateDirectories(const std::string& path, std::vector<std::string>* warnings) {
  AON_ASSIGN_OR_RETURN(std::vector<std::string> noted,
                       aon::MakePrivateDirectories(path, PathPolicy::kNoSymlinks));
  if (warnings != nullptr) warnings->insert(warnings->end(), noted.begin(), noted.end());
  return Status::Ok();
}

namespace {

// What the child sends back: fixed-size, written whole to the pipe.
struct ChildAnswer {
  enum Stage : int { kDone, kSwitchUser, kRootRegained };
  int stage = kDone;
  int err = 0;  // kSwitchUser: errno
  DirWalk walk;
  int key_err = 0;
  char key[kCollectorKeyChars + 1] = {};
};

}  // namespace

Status MakePrivateDirectoriesAs(const JobUser& user, const std::string& path,
                                PreparedJobDir* prepared) {
  if (path.empty() || path[0] != '/')
    return InvalidArgument("'" + path + "' is not an absolute path");
  auto answer = std::make_unique<ChildAnswer>();  // made here: the child only fills it
  const bool want_key = prepared != nullptr;
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  const pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(pipefd[0]);
    close(pipefd[1]);
    return ErrnoStatus("fork", e);
  }
  if (pid == 0) {
    // Child: become the user for good, then create. System calls only.
    ChildAnswer& a = *answer;
    close(pipefd[0]);
    if (geteuid() != 0 && getuid() == 0 && seteuid(0) != 0) {
      a.stage = ChildAnswer::kSwitchUser;
      a.err = errno;
    }
    if (a.stage == ChildAnswer::kDone && geteuid() == 0) {
      if (setgroups(user.groups.size(), user.groups.data()) != 0 ||
          setresgid(user.gid, user.gid, user.gid) != 0 ||
          setresuid(user.uid, user.uid, user.uid) != 0) {
        a.stage = ChildAnswer::kSwitchUser;
        a.err = errno;
      }
    }
    if (a.stage == ChildAnswer::kDone &&
        (getuid() != user.uid || geteuid() != user.uid || getegid() != user.gid)) {
      a.stage = ChildAnswer::kSwitchUser;
      a.err = EPERM;
    }
    if (a.stage == ChildAnswer::kDone && user.uid != 0 && setuid(0) == 0)
      a.stage = ChildAnswer::kRootRegained;
    if (a.stage == ChildAnswer::kDone) {
      const int dir = WalkPrivateDirectory(path.c_str(), PathPolicy::kNoSymlinks, &a.walk);
      if (dir >= 0) {
        if (want_key) a.key_err = CollectorKeyAt(dir, KeyMode::kCreate, a.key);
        close(dir);
      }
    }
    _exit(WriteFull(pipefd[1], &a, sizeof(a)) ? 0 : 1);
  }
  close(pipefd[1]);
  const size_t got = ReadUpTo(pipefd[0], answer.get(), sizeof(ChildAnswer));
  close(pipefd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != sizeof(ChildAnswer))
    return Internal("the child creating " + path + " died without an answer");
  const ChildAnswer& a = *answer;
  if (a.stage == ChildAnswer::kSwitchUser)
    return ErrnoStatus("cannot switch to uid " + std::to_string(user.uid) + " to create " + path,
                       a.err);
  if (a.stage == ChildAnswer::kRootRegained)
    return Internal("dropping privileges to create " + path + " was not permanent");
  std::vector<std::string> warnings;
  AON_RETURN_IF_ERROR(DescribeDirWalk(path, a.walk, &warnings));
  if (prepared != nullptr) {
    if (a.key_err != 0)
      return ErrnoStatus("cannot make the collector key " + path + "/" + kCollectorKeyFile,
                         a.key_err);
    prepared->warnings = std::move(warnings);
    prepared->collector_key = a.key;
  }
  return Status::Ok();
}

StatusOr<int> RunProgram(const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("no program to run");
  // The umask is the spawning process's (posix_spawn has no umask of its own):
  // 077 for the child's whole start, so nothing it creates is ever readable by
  // others, even before MakeFilesPrivate; srun is at its end here.
  const mode_t before = umask(077);
  SpawnSpec spec;
  spec.path = argv[0];
  spec.argv = argv;
  spec.stdout_to_stderr = true;
  auto pid = Spawn(spec);
  umask(before);
  if (!pid.ok()) return pid.status();
  AON_ASSIGN_OR_RETURN(const int status, WaitFor(*pid, argv[0]));
  return ExitCodeOf(status, 1);
}

std::string PluginDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&PluginDirectory), &info) == 0 || info.dli_fname == nullptr)
    return "";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

std::string FindAgent(const std::string& plugin_dir) {
  auto agent = FindTool(ToolOrigin::kSpankPlugin, plugin_dir, Tool::kAgent);
  return agent.ok() ? *agent : "";
}

std::string FindBinDir(const std::string& plugin_dir) {
  auto bindir = aon::FindBinDir(ToolOrigin::kSpankPlugin, plugin_dir);
  return bindir.ok() ? *bindir : "";
}

}  // namespace aon::spank
