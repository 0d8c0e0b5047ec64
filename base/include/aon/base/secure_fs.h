// How AON makes its directories and writes its files: never through a link
// another user planted, always the job's user's, mode 0700 / 0600. Every file
// and job directory AON creates goes through here (the trace files through
// TraceWriter, which creates them with CreatePrivateFile).
//
// Files. CreatePrivateFile is the one way a file is created: open(2) with
// O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600, so a name that already exists (a
// planted link, another user's file) is never opened, let alone written or
// chmod-ed. Outputs are written as "<path>.partial" and renamed to <path> when
// complete (AtomicFile): a reader never sees half a file under the final name,
// a failure leaves nothing behind, and rename(2) replaces a link at the final
// name instead of following it.
//
// Directories. WalkPrivateDirectory walks a path from "/" one component at a
// time (openat(2), O_NOFOLLOW), creating what is missing with mode 0700:
//   - the last component (the job directory) must be a directory the caller
//     owns; group/other permission bits are removed (0700);
//   - a directory on the way that every user may write and that is not sticky
//     is refused: anyone could rename what lies below it and put their own
//     there. One a group may write (not sticky), or one another user (not root)
//     owns, is accepted with a warning that names it;
//   - a symbolic link on the way is refused under PathPolicy::kNoSymlinks (the
//     SPANK plugin) and followed under kOwnedSymlinks (aon-run: /home ->
//     /export/home) only when root or the caller owns it: a link of anyone
//     else is refused, naming its owner.
// The walk makes system calls only (no allocation), so it may run in a child
// forked from a threaded process: slurmstepd drops to the job's user in one
// (slurm/src/secure_fs.h).
#pragma once

#include <limits.h>
#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "aon/base/status.h"

namespace aon {

// ---- files ---------------------------------------------------------------------

// Creates `path` with O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, mode
// 0600, and returns the descriptor. With replace_stale, a regular file the
// caller owns already at `path` (a crashed run's .partial) is removed first; a
// link, another user's file or anything else there is refused, naming it.
StatusOr<int> CreatePrivateFile(const std::string& path, bool replace_stale);

// A file written as "<path>.partial" and renamed to <path> by Commit.
class AtomicFile {
 public:
  static StatusOr<std::unique_ptr<AtomicFile>> Create(const std::string& path);
  ~AtomicFile();  // without a successful Commit, the .partial file is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Buffered; the first write error is reported by Commit.
  void Write(std::string_view text);
  // Flushes, closes and renames; on any failure the .partial file is removed.
  Status Commit();

  const std::string& path() const { return path_; }

 private:
  AtomicFile(std::string path, std::FILE* file);

  std::string path_;
  std::string partial_;
  std::FILE* file_ = nullptr;
  int write_errno_ = 0;
};

// AtomicFile in one call.
Status WriteFileAtomically(const std::string& path, std::string_view content);

// Reads a small file that only the caller may have written: opened with
// O_NOFOLLOW (a link is refused), a regular file the caller owns, writable by
// nobody else, at most `max_bytes`. NotFound when it does not exist; any other
// refusal names the file and the reason. `mtime_ns`, when given, receives the
// file's modification time (CLOCK_REALTIME ns).
StatusOr<std::string> ReadPrivateFile(const std::string& path, size_t max_bytes,
                                      uint64_t* mtime_ns = nullptr);

// ---- directories -------------------------------------------------------------

enum class PathPolicy : uint8_t {
  kNoSymlinks,     // any symbolic link on the path is refused
  kOwnedSymlinks,  // links owned by root or the caller are followed, others refused
};

// What a walk found, in fixed-size fields: a forked child sends it to its
// parent as is. Messages are made by DescribeDirWalk.
struct DirWalk {
  enum class Refusal : uint8_t {
    kNone,
    kSyscall,       // a system call failed: err says which errno
    kNotAbsolute,   // the path does not start with '/'
    kDotDot,        // the path has a "." or ".." component
    kRoot,          // the path is "/"
    kTooLong,       // longer than PATH_MAX, or links too deep
    kSymlink,       // a link, refused by kNoSymlinks
    kForeignLink,   // a link owned by another user
    kNotDirectory,  // a component is not a directory
    kOpenToAll,     // a directory on the way every user may write (not sticky)
    kForeignOwner,  // the job directory belongs to another user
    kForeignParent,  // a directory on the way belongs to another user (not root)
    kGroupParent,    // a directory on the way a group other than the caller's and
                     // root's may write (not sticky)
  };
  enum class Warning : uint8_t {
    kGroupWritable,  // a directory on the way the caller's (or root's) group may write
    kModeTightened,  // the job directory had group/other bits: now 0700
  };
  static constexpr int kMaxWarnings = 4;

  Refusal refusal = Refusal::kNone;
  int err = 0;             // errno of kSyscall (and the errno a Status gets)
  uint32_t uid = 0;        // owner of what `at` names (refusals and warnings)
  uint32_t gid = 0;        // its group (kGroupParent)
  uint32_t mode = 0;       // its mode bits
  char at[PATH_MAX] = {};  // the component a refusal names (as walked, links resolved)
  int warning_count = 0;
  struct Noted {
    Warning what;
    uint32_t uid;
    uint32_t mode;
    char at[PATH_MAX];
  } warnings[kMaxWarnings] = {};

  bool ok() const { return refusal == Refusal::kNone; }
};

// Walks (and creates) `path` as described above and returns the job
// directory's descriptor (O_RDONLY | O_DIRECTORY, close-on-exec), or -1 with
// out->refusal set. System calls only.
int WalkPrivateDirectory(const char* path, PathPolicy policy, DirWalk* out);

// The walk's refusal as a Status naming the path and the component ("cannot
// create /a/b/c (/a/b: is a symbolic link owned by uid 1001 (not followed))"),
// OK if none; its warnings appended to *warnings as sentences.
Status DescribeDirWalk(const std::string& path, const DirWalk& walk,
                       std::vector<std::string>* warnings);

// WalkPrivateDirectory + DescribeDirWalk. Returns the warnings.
StatusOr<std::vector<std::string>> MakePrivateDirectories(const std::string& path,
                                                          PathPolicy policy);

// A job directory held open for the life of a process. Hold walks `path` as
// WalkPrivateDirectory does (kOwnedSymlinks: creating what is missing, refusing
// a parent another user could change) and keeps the job directory's
// descriptor. At(name) names a file through that descriptor
// (/proc/self/fd/N/name): the kernel resolves it from the directory the
// process holds, so renaming or replacing the path while the job runs does not
// move where the job's files land. path() is the path as given, for messages;
// Shown(text) puts it back where a message names At()'s form. Without a usable
// /proc, At() falls back to the path (and redirected() says so).
class HeldDirectory {
 public:
  HeldDirectory() = default;
  static StatusOr<HeldDirectory> Hold(const std::string& path);
  HeldDirectory(HeldDirectory&& other) noexcept;
  HeldDirectory& operator=(HeldDirectory&& other) noexcept;
  HeldDirectory(const HeldDirectory&) = delete;
  HeldDirectory& operator=(const HeldDirectory&) = delete;
  ~HeldDirectory();

  bool held() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // False when /proc could not be used: At() then resolves the path anew.
  bool redirected() const { return via_ != path_; }
  std::string At(std::string_view name) const;
  std::string Shown(std::string text) const;

 private:
  int fd_ = -1;
  std::string path_;  // as given
  std::string via_;   // "/proc/self/fd/N", or path_
};

// chmod 0600 of every regular file and 0700 of every directory directly in
// `dir` that the caller owns (no link followed, nothing else touched).
Status MakeFilesPrivate(const std::string& dir);

// The same for everything below the directory open at `dir_fd` (not the
// directory itself), down to kMaxPrivateTreeDepth levels; `name` names it in
// messages. For a tree another library wrote into a directory AON created and
// holds open (the OTF2 archive).
inline constexpr int kMaxPrivateTreeDepth = 8;
Status MakeTreePrivate(int dir_fd, const std::string& name);

}  // namespace aon
