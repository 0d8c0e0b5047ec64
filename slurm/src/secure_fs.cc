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

#include "aon/session/tool_paths.h"

namespace aon::spank {
namespace {

// Splits an absolute path into its components; rejects "." and "..".
StatusOr<std::vector<std::string>> Components(const std::string& path) {
  if (path.empty() || path[0] != '/')
    return InvalidArgument("'" + path + "' is not an absolute path");
  std::vector<std::string> parts;
  size_t i = 1;
  while (i <= path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string::npos) slash = path.size();
    std::string part = path.substr(i, slash - i);
    if (part == "." || part == "..")
      return InvalidArgument("'" + path + "' contains '" + part + "'");
    if (!part.empty()) parts.push_back(part);
    i = slash + 1;
  }
  if (parts.empty()) return InvalidArgument("'/' cannot be a job directory");
  return parts;
}

struct MkdirFailure {
  int err = 0;
  int component = -1;  // index of the component that failed
};

// Only system calls (safe in a child forked from a threaded process).
MkdirFailure MakeDirsSyscalls(const char* const* parts, int n) {
  int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return {errno, -1};
  for (int i = 0; i < n; ++i) {
    if (mkdirat(fd, parts[i], 0700) != 0 && errno != EEXIST) {
      MkdirFailure f{errno, i};
      close(fd);
      return f;
    }
    const bool last = i == n - 1;
    const int flags = (last ? O_RDONLY : O_PATH) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    int next = openat(fd, parts[i], flags);
    if (next < 0) {
      int err = errno;
      struct stat link {};
      // O_PATH|O_NOFOLLOW on a symlink says ENOTDIR: name the real reason.
      if (err == ENOTDIR && fstatat(fd, parts[i], &link, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(link.st_mode))
        err = ELOOP;
      close(fd);
      return {err, i};
    }
    close(fd);
    fd = next;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    MkdirFailure f{errno, n - 1};
    close(fd);
    return f;
  }
  if (st.st_uid != geteuid()) {
    close(fd);
    return {EPERM, n - 1};
  }
  if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) != 0) {
    MkdirFailure f{errno, n - 1};
    close(fd);
    return f;
  }
  close(fd);
  return {};
}

Status DescribeFailure(const std::string& path, const std::vector<std::string>& parts,
                       MkdirFailure f) {
  std::string at = "/";
  for (int i = 0; i <= f.component && i < static_cast<int>(parts.size()); ++i)
    at += (i ? "/" : "") + parts[static_cast<size_t>(i)];
  std::string why = f.err == ELOOP ? "is a symbolic link (not followed)"
                    : f.err == EPERM && f.component == static_cast<int>(parts.size()) - 1
                        ? "exists and belongs to another user"
                        : std::strerror(f.err);
  Status s = ErrnoStatus("cannot create " + path + " (" + at + ": " + why + ")", f.err);
  return Status(s.code(), "cannot create " + path + " (" + at + ": " + why + ")");
}

}  // namespace

Status MakePrivateDirectories(const std::string& path) {
  AON_ASSIGN_OR_RETURN(std::vector<std::string> parts, Components(path));
  std::vector<const char*> ptrs;
  for (const std::string& p : parts) ptrs.push_back(p.c_str());
  MkdirFailure f = MakeDirsSyscalls(ptrs.data(), static_cast<int>(ptrs.size()));
  if (f.err != 0) return DescribeFailure(path, parts, f);
  return Status::Ok();
}

Status MakePrivateDirectoriesAs(const JobUser& user, const std::string& path) {
  AON_ASSIGN_OR_RETURN(std::vector<std::string> parts, Components(path));
  std::vector<const char*> ptrs;
  for (const std::string& p : parts) ptrs.push_back(p.c_str());
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
    MkdirFailure f;
    if (geteuid() != 0 && getuid() == 0 && seteuid(0) != 0) f = {errno, -2};
    if (f.err == 0 && geteuid() == 0) {
      if (setgroups(user.groups.size(), user.groups.data()) != 0 ||
          setresgid(user.gid, user.gid, user.gid) != 0 ||
          setresuid(user.uid, user.uid, user.uid) != 0)
        f = {errno, -2};
    }
    if (f.err == 0 && (getuid() != user.uid || geteuid() != user.uid || getegid() != user.gid))
      f = {EPERM, -2};
    if (f.err == 0 && user.uid != 0 && setuid(0) == 0) f = {EPERM, -3};  // could regain root
    if (f.err == 0) f = MakeDirsSyscalls(ptrs.data(), static_cast<int>(ptrs.size()));
    int msg[2] = {f.err, f.component};
    ssize_t w = write(pipefd[1], msg, sizeof(msg));
    _exit(w == static_cast<ssize_t>(sizeof(msg)) && f.err == 0 ? 0 : 1);
  }
  close(pipefd[1]);
  int msg[2] = {0, 0};
  ssize_t got;
  do got = read(pipefd[0], msg, sizeof(msg));
  while (got < 0 && errno == EINTR);
  close(pipefd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof(msg)))
    return Internal("the child creating " + path + " died without an answer");
  if (msg[0] == 0) return Status::Ok();
  if (msg[1] == -2)
    return ErrnoStatus("cannot switch to uid " + std::to_string(user.uid) + " to create " + path,
                       msg[0]);
  if (msg[1] == -3) return Internal("dropping privileges to create " + path + " was not permanent");
  return DescribeFailure(path, parts, {msg[0], msg[1]});
}

Status MakeFilesPrivate(const std::string& dir) {
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return ErrnoStatus("cannot open " + dir, errno);
  DIR* d = fdopendir(dfd);
  if (d == nullptr) {
    int e = errno;
    close(dfd);
    return ErrnoStatus("cannot read " + dir, e);
  }
  Status result;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    int fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;  // a symlink or something we cannot open: leave it alone
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_uid == geteuid()) {
      const mode_t want = S_ISDIR(st.st_mode)   ? 0700
                          : S_ISREG(st.st_mode) ? 0600
                                                : (st.st_mode & 07777);
      if ((st.st_mode & 07777) != want && fchmod(fd, want) != 0 && result.ok())
        result = ErrnoStatus(std::string("chmod ") + dir + "/" + e->d_name, errno);
    }
    close(fd);
  }
  closedir(d);
  return result;
}

StatusOr<int> RunProgram(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) {
    umask(077);
    dup2(STDERR_FILENO, STDOUT_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus("waitpid " + argv[0], errno);
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
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
