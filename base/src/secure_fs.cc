#include "aon/base/secure_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "aon/base/fd_io.h"

namespace aon {

// ---- files ---------------------------------------------------------------------

StatusOr<std::string> ReadPrivateFile(const std::string& path, size_t max_bytes,
                                      uint64_t* mtime_ns) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(path + ": no such file");
    if (err == ELOOP)
      return Status(StatusCode::kPermissionDenied, path + ": is a symbolic link; not read");
    return ErrnoStatus(path, err);
  }
  struct stat st {};
  std::string content;
  Status status = Status::Ok();
  if (fstat(fd, &st) != 0) {
    status = ErrnoStatus(path, errno);
  } else if (!S_ISREG(st.st_mode)) {
    status = Status(StatusCode::kPermissionDenied, path + ": not a regular file; not read");
  } else if (st.st_uid != geteuid()) {
    status =
        Status(StatusCode::kPermissionDenied, path + ": owned by uid " + std::to_string(st.st_uid) +
                                                  ", not by this user; not read");
  } else if ((st.st_mode & 022) != 0) {
    status = Status(StatusCode::kPermissionDenied, path + ": writable by other users; not read");
  } else if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    status = InvalidArgument(path + ": " + std::to_string(st.st_size) + " bytes, more than " +
                             std::to_string(max_bytes) + " expected");
  } else {
    content.resize(static_cast<size_t>(st.st_size));
    content.resize(ReadUpTo(fd, content.data(), content.size()));
  }
  close(fd);
  if (!status.ok()) return status;
  if (mtime_ns != nullptr) {
    *mtime_ns = static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ull +
                static_cast<uint64_t>(st.st_mtim.tv_nsec);
  }
  return content;
}

StatusOr<int> CreatePrivateFile(const std::string& path, bool replace_stale) {
  if (replace_stale) {
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0) {
      if (S_ISLNK(st.st_mode))
        return InvalidArgument("'" + path + "' exists and is a symbolic link (not followed)");
      if (!S_ISREG(st.st_mode))
        return InvalidArgument("'" + path + "' exists and is not a regular file");
      if (st.st_uid != geteuid())
        return Status(StatusCode::kPermissionDenied,
                      "'" + path + "' exists and belongs to another user (uid " +
                          std::to_string(st.st_uid) + ")");
      unlink(path.c_str());
    }
  }
  const int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    struct stat st {};
    if (err == EEXIST && lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
      return ErrnoStatus("cannot create '" + path + "': a symbolic link is there (not followed)",
                         err);
    return ErrnoStatus("cannot create '" + path + "'", err);
  }
  // O_CREAT's mode is filtered by the umask: make sure of 0600, and no more.
  if (fchmod(fd, 0600) != 0) {
    const int err = errno;
    close(fd);
    unlink(path.c_str());
    return ErrnoStatus("cannot set the mode of '" + path + "'", err);
  }
  return fd;
}

AtomicFile::AtomicFile(std::string path, std::FILE* file)
    : path_(std::move(path)), partial_(path_ + ".partial"), file_(file) {}

StatusOr<std::unique_ptr<AtomicFile>> AtomicFile::Create(const std::string& path) {
  if (path.empty()) return InvalidArgument("an output file needs a name");
  const std::string partial = path + ".partial";
  AON_ASSIGN_OR_RETURN(const int fd, CreatePrivateFile(partial, /*replace_stale=*/true));
  std::FILE* f = fdopen(fd, "w");
  if (f == nullptr) {
    const int err = errno;
    close(fd);
    unlink(partial.c_str());
    return ErrnoStatus("cannot open '" + partial + "'", err);
  }
  // Large buffer: traces are written in many small pieces.
  std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
  return std::unique_ptr<AtomicFile>(new AtomicFile(path, f));
}

AtomicFile::~AtomicFile() {
  if (file_ != nullptr) {
    std::fclose(file_);
    unlink(partial_.c_str());
  }
}

void AtomicFile::Write(std::string_view text) {
  if (file_ == nullptr || write_errno_ != 0 || text.empty()) return;
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) {
    write_errno_ = errno != 0 ? errno : EIO;
  }
}

Status AtomicFile::Commit() {
  if (file_ == nullptr) return Internal("'" + path_ + "' was already committed");
  std::FILE* f = file_;
  file_ = nullptr;
  int err = write_errno_;
  if (std::fflush(f) != 0 && err == 0) err = errno;
  if (std::fclose(f) != 0 && err == 0) err = errno;
  if (err != 0) {
    unlink(partial_.c_str());
    return ErrnoStatus("writing '" + partial_ + "'", err);
  }
  if (std::rename(partial_.c_str(), path_.c_str()) != 0) {
    err = errno;
    unlink(partial_.c_str());
    return ErrnoStatus("renaming '" + partial_ + "' to '" + path_ + "'", err);
  }
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, std::string_view content) {
  AON_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFile> file, AtomicFile::Create(path));
  file->Write(content);
  return file->Commit();
}

// ---- directories -------------------------------------------------------------

namespace {

using Refusal = DirWalk::Refusal;
using Warning = DirWalk::Warning;

// Everything below runs in forked children too: system calls and plain loops,
// no allocation, no locks.

// dst = a + "/" + b (a "" is the root), cut to PATH_MAX - 1.
void JoinPath(const char* a, const char* b, char* dst) {
  size_t n = 0;
  for (const char* p = a; *p != '\0' && n < PATH_MAX - 1; ++p) dst[n++] = *p;
  if (n < PATH_MAX - 1) dst[n++] = '/';
  for (const char* p = b; *p != '\0' && n < PATH_MAX - 1; ++p) dst[n++] = *p;
  dst[n] = '\0';
}

void CopyPath(const char* src, char* dst) {
  size_t n = 0;
  for (; src[n] != '\0' && n < PATH_MAX - 1; ++n) dst[n] = src[n];
  dst[n] = '\0';
  if (n == 0) {  // the root
    dst[0] = '/';
    dst[1] = '\0';
  }
}

bool SameText(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

int Refuse(DirWalk* out, Refusal why, int err, const char* at, const struct stat* st) {
  out->refusal = why;
  out->err = err;
  CopyPath(at, out->at);
  if (st != nullptr) {
    out->uid = static_cast<uint32_t>(st->st_uid);
    out->gid = static_cast<uint32_t>(st->st_gid);
    out->mode = static_cast<uint32_t>(st->st_mode & 07777);
  }
  return -1;
}

void Note(DirWalk* out, Warning what, const char* at, const struct stat& st) {
  char path[PATH_MAX];
  CopyPath(at, path);
  for (int i = 0; i < out->warning_count; ++i)
    if (out->warnings[i].what == what && SameText(out->warnings[i].at, path)) return;
  if (out->warning_count == DirWalk::kMaxWarnings) return;
  DirWalk::Noted& n = out->warnings[out->warning_count++];
  n.what = what;
  n.uid = static_cast<uint32_t>(st.st_uid);
  n.mode = static_cast<uint32_t>(st.st_mode & 07777);
  CopyPath(path, n.at);
}

// The remaining path is kept in `rest` (NUL-terminated); NextComponent copies
// the next name into `name` and advances. False at the end.
bool NextComponent(const char*& rest, char* name, bool* too_long) {
  while (*rest == '/') ++rest;
  if (*rest == '\0') return false;
  size_t n = 0;
  while (rest[n] != '\0' && rest[n] != '/') ++n;
  if (n > NAME_MAX) {
    *too_long = true;
    return false;
  }
  std::memcpy(name, rest, n);
  name[n] = '\0';
  rest += n;
  return true;
}

// A directory the walk goes through (not the job directory). Whoever may
// rename its entries may move the job directory away while the job runs and
// put a directory of their choice in its place, and every file the job writes
// after that lands there: refused when that is another user (its owner, not
// root; every user, not sticky; a group that is neither the caller's nor
// root's, not sticky). The caller's own group may: noted (on most systems it
// is the caller's private group).
bool CheckPassedDirectory(int dirfd, const char* walked, DirWalk* out) {
  struct stat st {};
  if (fstat(dirfd, &st) != 0) {
    Refuse(out, Refusal::kSyscall, errno, walked, nullptr);
    return false;
  }
  const bool sticky = (st.st_mode & S_ISVTX) != 0;
  if ((st.st_mode & S_IWOTH) != 0 && !sticky) {
    Refuse(out, Refusal::kOpenToAll, EPERM, walked, &st);
    return false;
  }
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    Refuse(out, Refusal::kForeignParent, EPERM, walked, &st);
    return false;
  }
  if ((st.st_mode & S_IWGRP) != 0 && !sticky) {
    if (st.st_gid != 0 && st.st_gid != getegid()) {
      Refuse(out, Refusal::kGroupParent, EPERM, walked, &st);
      return false;
    }
    Note(out, Warning::kGroupWritable, walked, st);
  }
  return true;
}

// Drops the last component of `walked` ("" is the root).
void PopComponent(char* walked) {
  size_t n = 0;
  while (walked[n] != '\0') ++n;
  while (n > 0 && walked[n - 1] != '/') --n;
  if (n > 0) --n;
  walked[n] = '\0';
}

}  // namespace

int WalkPrivateDirectory(const char* path, PathPolicy policy, DirWalk* out) {
  *out = DirWalk{};
  if (path == nullptr || path[0] != '/')
    return Refuse(out, Refusal::kNotAbsolute, EINVAL, "", nullptr);
  // The path as given: no "." or "..", at least one component, not too long.
  {
    size_t len = 0;
    while (path[len] != '\0') ++len;
    if (len >= PATH_MAX) return Refuse(out, Refusal::kTooLong, ENAMETOOLONG, "", nullptr);
    const char* rest = path;
    char name[NAME_MAX + 1];
    bool too_long = false;
    int components = 0;
    while (NextComponent(rest, name, &too_long)) {
      ++components;
      if (SameText(name, ".") || SameText(name, ".."))
        return Refuse(out, Refusal::kDotDot, EINVAL, name, nullptr);
    }
    if (too_long) return Refuse(out, Refusal::kTooLong, ENAMETOOLONG, "", nullptr);
    if (components == 0) return Refuse(out, Refusal::kRoot, EINVAL, "", nullptr);
  }
  // `pending` holds what is left to walk; a followed link's target is put in
  // front of it.
  char pending[2 * PATH_MAX];
  char spliced[2 * PATH_MAX];
  char walked[PATH_MAX] = "";  // the directory `fd` is, links resolved ("" = "/")
  char at[PATH_MAX];
  char name[NAME_MAX + 1];
  std::memcpy(pending, path, std::strlen(path) + 1);
  const char* rest = pending;
  int links = 0;
  bool created_last = false;
  int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Refuse(out, Refusal::kSyscall, errno, "", nullptr);
  auto fail = [&](Refusal why, int err, const char* where, const struct stat* st) {
    close(fd);
    return Refuse(out, why, err, where, st);
  };
  bool too_long = false;
  while (NextComponent(rest, name, &too_long)) {
    if (SameText(name, ".")) continue;
    if (SameText(name, "..")) {  // only in a link's target: the physical parent
      const int up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (up < 0) return fail(Refusal::kSyscall, errno, walked, nullptr);
      close(fd);
      fd = up;
      PopComponent(walked);
      continue;
    }
    if (!CheckPassedDirectory(fd, walked, out)) {
      close(fd);
      return -1;
    }
    JoinPath(walked, name, at);
    struct stat st {};
    created_last = false;
    if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) return fail(Refusal::kSyscall, errno, at, nullptr);
      if (mkdirat(fd, name, 0700) != 0 && errno != EEXIST)
        return fail(Refusal::kSyscall, errno, at, nullptr);
      created_last = true;
      if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return fail(Refusal::kSyscall, errno, at, nullptr);
    }
    if (S_ISLNK(st.st_mode)) {
      if (policy == PathPolicy::kNoSymlinks) return fail(Refusal::kSymlink, ELOOP, at, &st);
      if (st.st_uid != 0 && st.st_uid != geteuid())
        return fail(Refusal::kForeignLink, ELOOP, at, &st);
      if (++links > 40) return fail(Refusal::kTooLong, ELOOP, at, &st);
      char target[PATH_MAX];
      const ssize_t n = readlinkat(fd, name, target, sizeof(target));
      if (n < 0) return fail(Refusal::kSyscall, errno, at, nullptr);
      if (n == 0 || static_cast<size_t>(n) >= sizeof(target))
        return fail(Refusal::kTooLong, ENAMETOOLONG, at, &st);
      const size_t rest_len = std::strlen(rest);
      if (static_cast<size_t>(n) + 1 + rest_len + 1 > sizeof(spliced))
        return fail(Refusal::kTooLong, ENAMETOOLONG, at, &st);
      std::memcpy(spliced, target, static_cast<size_t>(n));
      spliced[n] = '/';
      std::memcpy(spliced + n + 1, rest, rest_len + 1);
      std::memcpy(pending, spliced, static_cast<size_t>(n) + 1 + rest_len + 1);
      rest = pending;
      if (target[0] == '/') {  // absolute: start again at the root
        const int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0) return fail(Refusal::kSyscall, errno, "", nullptr);
        close(fd);
        fd = root;
        walked[0] = '\0';
      }
      continue;
    }
    if (!S_ISDIR(st.st_mode)) return fail(Refusal::kNotDirectory, ENOTDIR, at, &st);
    const int next = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      // Replaced by a link since fstatat: O_PATH | O_NOFOLLOW says ENOTDIR.
      int err = errno;
      struct stat now {};
      if (fstatat(fd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(now.st_mode))
        return fail(Refusal::kSymlink, ELOOP, at, &now);
      return fail(Refusal::kSyscall, err, at, nullptr);
    }
    close(fd);
    fd = next;
    CopyPath(at, walked);
    if (SameText(walked, "/")) walked[0] = '\0';
  }
  if (too_long) return fail(Refusal::kTooLong, ENAMETOOLONG, walked, nullptr);
  // The job directory: the caller's, 0700.
  const int dir = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return fail(Refusal::kSyscall, errno, walked, nullptr);
  close(fd);
  struct stat st {};
  if (fstat(dir, &st) != 0) {
    const int err = errno;
    close(dir);
    return Refuse(out, Refusal::kSyscall, err, walked, nullptr);
  }
  if (st.st_uid != geteuid()) {
    close(dir);
    return Refuse(out, Refusal::kForeignOwner, EPERM, walked, &st);
  }
  if ((st.st_mode & 07777) != 0700) {
    if (fchmod(dir, 0700) != 0) {
      const int err = errno;
      close(dir);
      return Refuse(out, Refusal::kSyscall, err, walked, &st);
    }
    if ((st.st_mode & 077) != 0 && !created_last) Note(out, Warning::kModeTightened, walked, st);
  }
  return dir;
}

namespace {

std::string Octal(uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04o", mode & 07777);
  return buf;
}

}  // namespace

Status DescribeDirWalk(const std::string& path, const DirWalk& walk,
                       std::vector<std::string>* warnings) {
  if (warnings != nullptr) {
    for (int i = 0; i < walk.warning_count && i < DirWalk::kMaxWarnings; ++i) {
      const DirWalk::Noted& n = walk.warnings[i];
      const std::string at = n.at;
      switch (n.what) {
        case Warning::kGroupWritable:
          warnings->push_back(at + " may be written by its group (mode " + Octal(n.mode) +
                              ", not sticky): a member of the group could move " + path +
                              " away and put another directory there");
          break;
        case Warning::kModeTightened:
          warnings->push_back(path + " had mode " + Octal(n.mode) +
                              ": made it 0700 (trace files belong to the job's user)");
          break;
      }
    }
  }
  const std::string at = walk.at;
  std::string why;
  switch (walk.refusal) {
    case Refusal::kNone:
      return Status::Ok();
    case Refusal::kNotAbsolute:
      return InvalidArgument("'" + path + "' is not an absolute path");
    case Refusal::kDotDot:
      return InvalidArgument("'" + path + "' contains '" + at.substr(at.rfind('/') + 1) + "'");
    case Refusal::kRoot:
      return InvalidArgument("'/' cannot be a job directory");
    case Refusal::kTooLong:
      why = walk.err == ELOOP ? "too many symbolic links" : "the path is too long";
      break;
    case Refusal::kSyscall:
      why = std::strerror(walk.err);
      break;
    case Refusal::kSymlink:
      why = "is a symbolic link (not followed)";
      break;
    case Refusal::kForeignLink:
      why = "is a symbolic link owned by uid " + std::to_string(walk.uid) +
            " (not followed: only links of root or your own are)";
      break;
    case Refusal::kNotDirectory:
      why = "is not a directory";
      break;
    case Refusal::kOpenToAll:
      why = "every user may write in it (mode " + Octal(walk.mode) +
            ", not sticky), so anyone could replace what lies below it";
      break;
    case Refusal::kForeignOwner:
      why = "exists and belongs to another user (uid " + std::to_string(walk.uid) + ")";
      break;
    case Refusal::kForeignParent:
      why = "belongs to uid " + std::to_string(walk.uid) +
            ", who could move the job directory away while the job runs and put another "
            "in its place: choose a path that only you and root can change";
      break;
    case Refusal::kGroupParent:
      why = "group " + std::to_string(walk.gid) + " may write in it (mode " + Octal(walk.mode) +
            ", not sticky) and it is not your group: any member could move the job directory "
            "away while the job runs and put another in its place";
      break;
  }
  const std::string message = "cannot create " + path + " (" + at + ": " + why + ")";
  return Status(ErrnoStatus(message, walk.err).code(), message);
}

StatusOr<std::vector<std::string>> MakePrivateDirectories(const std::string& path,
                                                          PathPolicy policy) {
  auto walk = std::make_unique<DirWalk>();
  const int fd = WalkPrivateDirectory(path.c_str(), policy, walk.get());
  if (fd >= 0) close(fd);
  std::vector<std::string> warnings;
  AON_RETURN_IF_ERROR(DescribeDirWalk(path, *walk, &warnings));
  return warnings;
}

StatusOr<HeldDirectory> HeldDirectory::Hold(const std::string& path) {
  std::error_code ec;
  const std::string absolute =
      path.empty() || path[0] == '/' ? path : std::filesystem::absolute(path, ec).string();
  auto walk = std::make_unique<DirWalk>();
  const int fd = WalkPrivateDirectory(absolute.c_str(), PathPolicy::kOwnedSymlinks, walk.get());
  std::vector<std::string> warnings;  // accepted as they are: aon-run said them
  AON_RETURN_IF_ERROR(DescribeDirWalk(path, *walk, &warnings));
  HeldDirectory held;
  held.fd_ = fd;
  held.path_ = path;
  held.via_ = path;
  // The magic link must lead to the very directory held (a /proc of another
  // namespace, or none, would not).
  const std::string via = "/proc/self/fd/" + std::to_string(fd);
  struct stat mine {}, seen {};
  if (fstat(fd, &mine) == 0 && stat(via.c_str(), &seen) == 0 && mine.st_dev == seen.st_dev &&
      mine.st_ino == seen.st_ino) {
    held.via_ = via;
  }
  return held;
}

HeldDirectory::HeldDirectory(HeldDirectory&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      via_(std::move(other.via_)) {}

HeldDirectory& HeldDirectory::operator=(HeldDirectory&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    via_ = std::move(other.via_);
  }
  return *this;
}

HeldDirectory::~HeldDirectory() {
  if (fd_ >= 0) close(fd_);
}

std::string HeldDirectory::At(std::string_view name) const {
  std::string at = via_;
  at += '/';
  at += name;
  return at;
}

std::string HeldDirectory::Shown(std::string text) const {
  if (!redirected()) return text;
  const std::string from = via_ + "/";
  const std::string to = path_ + "/";
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

namespace {

// MakeFilesPrivate's loop over the directory open at `dfd` (taken: closed
// here), named `dir` in messages; into subdirectories while depth > 1.
Status MakeEntriesPrivate(int dfd, const std::string& dir, int depth) {
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
    const std::string name = dir + "/" + e->d_name;
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_uid == geteuid()) {
      const mode_t want = S_ISDIR(st.st_mode)   ? 0700
                          : S_ISREG(st.st_mode) ? 0600
                                                : (st.st_mode & 07777);
      if ((st.st_mode & 07777) != want && fchmod(fd, want) != 0 && result.ok())
        result = ErrnoStatus("chmod " + name, errno);
      if (S_ISDIR(st.st_mode) && depth > 1) {
        Status below = MakeEntriesPrivate(fd, name, depth - 1);  // takes fd
        fd = -1;
        if (result.ok()) result = below;
      }
    }
    if (fd >= 0) close(fd);
  }
  closedir(d);
  return result;
}

}  // namespace

Status MakeFilesPrivate(const std::string& dir) {
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return ErrnoStatus("cannot open " + dir, errno);
  return MakeEntriesPrivate(dfd, dir, 1);
}

Status MakeTreePrivate(int dir_fd, const std::string& name) {
  int dfd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return ErrnoStatus("cannot open " + name, errno);
  return MakeEntriesPrivate(dfd, name, kMaxPrivateTreeDepth);
}

}  // namespace aon
