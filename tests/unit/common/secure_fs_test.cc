// How AON writes files and makes directories (aon/base/secure_fs.h), on real files:
// a planted link is never written through, chmod-ed or followed unless root or
// the caller owns it; a failed write leaves no .partial; a job directory ends up
// the caller's with mode 0700; a directory every user may write is refused on
// the way, a group-writable or foreign one named in a warning. The cases with a
// second user (`nobody`) need root and are skipped otherwise.
#include "aon/base/secure_fs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "skip_or_fail.h"

namespace aon {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::optional<uid_t> NobodyUid() {
  if (geteuid() != 0) return std::nullopt;
  const passwd* pw = getpwnam("nobody");
  if (pw == nullptr || pw->pw_uid == 0) return std::nullopt;
  return pw->pw_uid;
}

class SecureFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/aon-secure-fs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_;
};

// ---- files ---------------------------------------------------------------------

// ReadPrivateFile: the control files aon-ctl and the collectors exchange are
// read only when they are the user's own and nobody else could have written them.
TEST_F(SecureFsTest, ReadPrivateFileReadsOnlyTheUsersOwnFiles) {
  const std::string path = root_ + "/request";
  ASSERT_TRUE(WriteFileAtomically(path, "hello\n").ok());
  auto ok = ReadPrivateFile(path, 64);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, "hello\n");
  EXPECT_EQ(ReadPrivateFile(root_ + "/absent", 64).status().code(), StatusCode::kNotFound);
  // Too big for what is expected.
  auto big = ReadPrivateFile(path, 3);
  EXPECT_FALSE(big.ok());
  EXPECT_TRUE(Contains(big.status().message(), path)) << big.status().ToString();
  // Writable by others: anyone could have put the request there.
  ASSERT_EQ(chmod(path.c_str(), 0666), 0);
  auto shared = ReadPrivateFile(path, 64);
  EXPECT_EQ(shared.status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Contains(shared.status().message(), "writable by other users"));
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  // A link is refused, not followed.
  const std::string link = root_ + "/link";
  ASSERT_EQ(symlink(path.c_str(), link.c_str()), 0);
  auto linked = ReadPrivateFile(link, 64);
  EXPECT_EQ(linked.status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Contains(linked.status().message(), "symbolic link"));
  // Another user's file (root only: chown).
  if (std::optional<uid_t> nobody = NobodyUid()) {
    ASSERT_EQ(chown(path.c_str(), *nobody, static_cast<gid_t>(-1)), 0);
    auto foreign = ReadPrivateFile(path, 64);
    EXPECT_EQ(foreign.status().code(), StatusCode::kPermissionDenied);
    EXPECT_TRUE(Contains(foreign.status().message(), "not by this user"));
  }
}

TEST_F(SecureFsTest, AtomicFileWritesOwnerOnlyAndRenames) {
  const std::string path = root_ + "/report.html";
  ASSERT_TRUE(WriteFileAtomically(path, "<html>").ok());
  EXPECT_EQ(ReadAll(path), "<html>");
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_FALSE(fs::exists(path + ".partial"));
  // An existing result is replaced.
  ASSERT_TRUE(WriteFileAtomically(path, "<html>2").ok());
  EXPECT_EQ(ReadAll(path), "<html>2");
}

// The attack on aon-report: report.html.partial planted as a link to a
// file of someone else's. The file is neither written nor chmod-ed.
TEST_F(SecureFsTest, APlantedPartialLinkIsNeverWrittenThrough) {
  const std::string victim = root_ + "/victim";
  std::ofstream(victim) << "precious";
  fs::permissions(victim, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                              fs::perms::others_read);
  const std::string path = root_ + "/report.html";
  fs::create_symlink(victim, path + ".partial");
  const Status s = WriteFileAtomically(path, "<html>");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), path + ".partial")) << s.message();
  EXPECT_TRUE(Contains(s.message(), "symbolic link")) << s.message();
  EXPECT_EQ(ReadAll(victim), "precious");
  EXPECT_EQ(ModeOf(victim), 0644u);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_symlink(path + ".partial")) << "someone else's link is not ours to remove";
}

// A link at the final name is replaced by the rename, not followed.
TEST_F(SecureFsTest, ALinkAtTheFinalNameIsReplacedNotFollowed) {
  const std::string victim = root_ + "/victim";
  std::ofstream(victim) << "precious";
  const std::string path = root_ + "/trace.json";
  fs::create_symlink(victim, path);
  ASSERT_TRUE(WriteFileAtomically(path, "{}").ok());
  EXPECT_FALSE(fs::is_symlink(path));
  EXPECT_EQ(ReadAll(path), "{}");
  EXPECT_EQ(ReadAll(victim), "precious");
}

TEST_F(SecureFsTest, AFailedCommitLeavesNoPartial) {
  const std::string path = root_ + "/out";
  fs::create_directories(path + "/not-empty");  // rename onto a non-empty directory fails
  const Status s = WriteFileAtomically(path, "data");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), path)) << s.message();
  EXPECT_FALSE(fs::exists(path + ".partial"));
  // Without Commit, nothing is left either.
  {
    auto file = AtomicFile::Create(root_ + "/abandoned");
    ASSERT_TRUE(file.ok());
    (*file)->Write("half");
  }
  EXPECT_FALSE(fs::exists(root_ + "/abandoned.partial"));
  EXPECT_FALSE(fs::exists(root_ + "/abandoned"));
}

// A held job directory (#34, item 2): its path renamed away while the job runs
// and a link to another directory put in its place, a file made through At()
// still lands in the directory that was held, and nothing reaches the other;
// Shown() names the file under the path as given.
TEST_F(SecureFsTest, AHeldDirectoryKeepsItsFilesWhenItsPathIsSwapped) {
  const std::string job = root_ + "/job";
  auto held = HeldDirectory::Hold(job);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_TRUE(held->redirected()) << "/proc/self/fd is not usable here";
  EXPECT_EQ(ModeOf(job), 0700u);
  ASSERT_EQ(std::rename(job.c_str(), (root_ + "/moved").c_str()), 0);
  fs::create_directory(root_ + "/elsewhere");
  fs::create_directory_symlink(root_ + "/elsewhere", job);
  const Status written = WriteFileAtomically(held->At("out.txt"), "kept");
  ASSERT_TRUE(written.ok()) << written.ToString();
  EXPECT_EQ(ReadAll(root_ + "/moved/out.txt"), "kept");
  EXPECT_TRUE(fs::is_empty(root_ + "/elsewhere"));
  EXPECT_EQ(held->Shown("cannot write " + held->At("out.txt") + ": full"),
            "cannot write " + job + "/out.txt: full");
  // Moved, it still closes its descriptor once.
  HeldDirectory moved = std::move(held).value();
  EXPECT_TRUE(moved.held());
}

// Hold refuses what the walk refuses, naming the path and the reason: here a
// directory on the way that every user may write.
TEST_F(SecureFsTest, HoldRefusesAJobDirectoryBelowADirectoryAnyoneMayWrite) {
  const std::string open_to_all = root_ + "/shared";
  fs::create_directory(open_to_all);
  ASSERT_EQ(chmod(open_to_all.c_str(), 0777), 0);
  auto held = HeldDirectory::Hold(open_to_all + "/job");
  ASSERT_FALSE(held.ok());
  EXPECT_TRUE(Contains(held.status().message(), open_to_all + "/job")) << held.status().message();
  EXPECT_TRUE(Contains(held.status().message(), "every user may write")) << held.status().message();
  EXPECT_FALSE(fs::exists(open_to_all + "/job"));
}

TEST_F(SecureFsTest, AnotherUsersStaleFileIsNotRemovedOrOpened) {
  const auto nobody = NobodyUid();
  if (!nobody) AON_SKIP_OR_FAIL(<< "needs root and a 'nobody' user");
  const std::string stale = root_ + "/timeline.h5.partial";
  std::ofstream(stale) << "theirs";
  ASSERT_EQ(chown(stale.c_str(), *nobody, static_cast<gid_t>(-1)), 0);
  auto fd = CreatePrivateFile(stale, /*replace_stale=*/true);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Contains(fd.status().message(), "another user")) << fd.status().message();
  EXPECT_EQ(ReadAll(stale), "theirs");
}

// ---- directories -------------------------------------------------------------

TEST_F(SecureFsTest, MakesEveryMissingDirectory0700) {
  const std::string job = root_ + "/a/b/job";
  auto made = MakePrivateDirectories(job, PathPolicy::kNoSymlinks);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_TRUE(made->empty());
  for (const std::string& d : {root_ + "/a", root_ + "/a/b", job}) EXPECT_EQ(ModeOf(d), 0700u) << d;
  EXPECT_TRUE(MakePrivateDirectories(job, PathPolicy::kNoSymlinks).ok()) << "idempotent";
}

TEST_F(SecureFsTest, AnExistingJobDirectoryIsMadePrivateAndSaidSo) {
  const std::string job = root_ + "/job";
  fs::create_directory(job);
  chmod(job.c_str(), 0777);
  auto made = MakePrivateDirectories(job, PathPolicy::kNoSymlinks);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(ModeOf(job), 0700u);
  ASSERT_EQ(made->size(), 1u);
  EXPECT_TRUE(Contains(made->front(), job + " had mode 0777: made it 0700")) << made->front();
}

TEST_F(SecureFsTest, ADirectoryEveryUserMayWriteIsRefusedOnTheWay) {
  const std::string open_dir = root_ + "/shared";
  fs::create_directory(open_dir);
  chmod(open_dir.c_str(), 0777);
  for (PathPolicy policy : {PathPolicy::kNoSymlinks, PathPolicy::kOwnedSymlinks}) {
    auto made = MakePrivateDirectories(open_dir + "/job", policy);
    ASSERT_FALSE(made.ok());
    EXPECT_EQ(made.status().code(), StatusCode::kPermissionDenied);
    EXPECT_TRUE(Contains(made.status().message(), "(" + open_dir + ": every user may write in it"))
        << made.status().message();
  }
  EXPECT_FALSE(fs::exists(open_dir + "/job")) << "created below it anyway";
  // Sticky (as /tmp is): nobody may move another's entries; accepted, silently.
  chmod(open_dir.c_str(), 01777);
  auto sticky = MakePrivateDirectories(open_dir + "/job", PathPolicy::kNoSymlinks);
  ASSERT_TRUE(sticky.ok()) << sticky.status().message();
  EXPECT_TRUE(sticky->empty());
}

TEST_F(SecureFsTest, AGroupWritableDirectoryOnTheWayIsAWarning) {
  const std::string team = root_ + "/team";
  fs::create_directory(team);
  chmod(team.c_str(), 0775);
  auto made = MakePrivateDirectories(team + "/job", PathPolicy::kNoSymlinks);
  ASSERT_TRUE(made.ok()) << made.status().message();
  ASSERT_EQ(made->size(), 1u);
  EXPECT_TRUE(Contains(made->front(), team + " may be written by its group (mode 0775"))
      << made->front();
  EXPECT_EQ(ModeOf(team + "/job"), 0700u);
}

TEST_F(SecureFsTest, OwnLinksAreFollowedOnlyWhenAllowed) {
  const std::string real = root_ + "/real";
  fs::create_directory(real);
  fs::create_directory_symlink(real, root_ + "/link");
  // A relative link through "..", as /home -> ../export/home.
  fs::create_directory(root_ + "/sub");
  fs::create_directory_symlink("../real", root_ + "/sub/up");
  auto refused = MakePrivateDirectories(root_ + "/link/job", PathPolicy::kNoSymlinks);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(Contains(refused.status().message(), root_ + "/link: is a symbolic link"))
      << refused.status().message();
  EXPECT_FALSE(fs::exists(real + "/job"));
  auto followed = MakePrivateDirectories(root_ + "/link/job", PathPolicy::kOwnedSymlinks);
  ASSERT_TRUE(followed.ok()) << followed.status().message();
  EXPECT_EQ(ModeOf(real + "/job"), 0700u);
  auto relative = MakePrivateDirectories(root_ + "/sub/up/job2", PathPolicy::kOwnedSymlinks);
  ASSERT_TRUE(relative.ok()) << relative.status().message();
  EXPECT_TRUE(fs::is_directory(real + "/job2"));
  // The job directory itself as an own link: followed as well.
  fs::create_directory_symlink(real + "/job", root_ + "/job-link");
  EXPECT_TRUE(MakePrivateDirectories(root_ + "/job-link", PathPolicy::kOwnedSymlinks).ok());
}

TEST_F(SecureFsTest, AnotherUsersLinkOrDirectoryIsRefused) {
  const auto nobody = NobodyUid();
  if (!nobody) AON_SKIP_OR_FAIL(<< "needs root and a 'nobody' user");
  chmod(root_.c_str(), 0755);
  const std::string real = root_ + "/real";
  fs::create_directory(real);
  // A link someone else planted (issue #18: aon-run's -o accepted as a link).
  const std::string planted = root_ + "/out";
  fs::create_directory_symlink(real, planted);
  ASSERT_EQ(lchown(planted.c_str(), *nobody, static_cast<gid_t>(-1)), 0);
  for (const std::string& path : {planted, planted + "/job"}) {
    auto made = MakePrivateDirectories(path, PathPolicy::kOwnedSymlinks);
    ASSERT_FALSE(made.ok()) << path;
    EXPECT_TRUE(Contains(made.status().message(),
                         planted + ": is a symbolic link owned by uid " + std::to_string(*nobody)))
        << made.status().message();
  }
  EXPECT_TRUE(fs::is_empty(real));
  // A directory of someone else's (issue #18: -o owned by another user, mode
  // 0777): not taken over, not chmod-ed.
  const std::string theirs = root_ + "/theirs";
  fs::create_directory(theirs);
  ASSERT_EQ(chown(theirs.c_str(), *nobody, static_cast<gid_t>(-1)), 0);
  chmod(theirs.c_str(), 0777);
  auto made = MakePrivateDirectories(theirs, PathPolicy::kOwnedSymlinks);
  ASSERT_FALSE(made.ok());
  EXPECT_TRUE(Contains(made.status().message(),
                       "exists and belongs to another user (uid " + std::to_string(*nobody)))
      << made.status().message();
  EXPECT_EQ(ModeOf(theirs), 0777u);
  // Below a directory of someone else's, even one only they may write (#34
  // item 2): they could move it away while a job runs and put a directory of
  // their choice in its place. Refused, for an existing directory of ours as
  // for a new one, and nothing is created.
  chmod(theirs.c_str(), 0755);
  const std::string mine = theirs + "/mine";
  fs::create_directory(mine);
  chmod(mine.c_str(), 0700);
  for (const std::string& path : {mine, theirs + "/new"}) {
    auto below = MakePrivateDirectories(path, PathPolicy::kOwnedSymlinks);
    ASSERT_FALSE(below.ok()) << path;
    EXPECT_TRUE(Contains(below.status().message(),
                         theirs + ": belongs to uid " + std::to_string(*nobody) +
                             ", who could move the job directory away"))
        << below.status().message();
  }
  EXPECT_FALSE(fs::exists(theirs + "/new"));
  EXPECT_EQ(ModeOf(mine), 0700u);
}

// A directory on the way that a group other than the caller's (or root's) may
// write, not sticky: any member could swap the job directory; refused. The
// caller's own group: a warning (AGroupWritableDirectoryOnTheWayIsAWarning).
TEST_F(SecureFsTest, ADirectoryAnotherGroupMayWriteIsRefused) {
  const auto nobody = NobodyUid();
  if (!nobody) AON_SKIP_OR_FAIL(<< "needs root and a 'nobody' user");
  const gid_t other = getegid() == 65534 ? 65533 : 65534;  // nogroup, or one next to it
  const std::string shared = root_ + "/shared";
  fs::create_directory(shared);
  ASSERT_EQ(chown(shared.c_str(), static_cast<uid_t>(-1), other), 0);
  chmod(shared.c_str(), 0775);
  auto made = MakePrivateDirectories(shared + "/job", PathPolicy::kNoSymlinks);
  ASSERT_FALSE(made.ok());
  EXPECT_TRUE(Contains(made.status().message(), shared + ": group " + std::to_string(other) +
                                                    " may write in it (mode 0775, not sticky)"))
      << made.status().message();
  EXPECT_FALSE(fs::exists(shared + "/job"));
  // Sticky, as a shared scratch directory: members cannot move others' entries.
  chmod(shared.c_str(), 01775);
  EXPECT_TRUE(MakePrivateDirectories(shared + "/job", PathPolicy::kNoSymlinks).ok());
}

// MakeTreePrivate (a tree another library wrote, the OTF2 archive): every file
// below becomes 0600 and every directory 0700, however deep within the limit;
// a link is neither followed nor chmod-ed, its target untouched; another
// user's file is left as it is.
TEST_F(SecureFsTest, TreeBelowAHeldDirectoryBecomesPrivate) {
  const std::string top = root_ + "/archive";
  std::string deep = top;
  for (int level = 1; level < kMaxPrivateTreeDepth; ++level) deep += "/d";
  fs::create_directories(deep);
  std::ofstream(top + "/anchor") << "a";
  std::ofstream(deep + "/leaf") << "b";
  const std::string outside = root_ + "/outside";
  std::ofstream(outside) << "c";
  ASSERT_EQ(chmod(outside.c_str(), 0644), 0);
  fs::create_symlink(outside, top + "/link");
  for (std::string d = deep; d.size() >= top.size(); d = fs::path(d).parent_path().string()) {
    ASSERT_EQ(chmod(d.c_str(), 0777), 0);
  }
  ASSERT_EQ(chmod((top + "/anchor").c_str(), 0666), 0);
  ASSERT_EQ(chmod((deep + "/leaf").c_str(), 0644), 0);
  const auto nobody = NobodyUid();
  const std::string theirs = top + "/theirs";
  std::ofstream(theirs) << "d";
  ASSERT_EQ(chmod(theirs.c_str(), 0644), 0);
  if (nobody) {
    ASSERT_EQ(chown(theirs.c_str(), *nobody, static_cast<gid_t>(-1)), 0);
  }

  const int fd = open(top.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const Status s = MakeTreePrivate(fd, top);
  close(fd);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(ModeOf(top), 0777u) << "the held directory itself is the caller's to set";
  for (std::string d = deep; d.size() > top.size(); d = fs::path(d).parent_path().string()) {
    EXPECT_EQ(ModeOf(d), 0700u) << d;
  }
  EXPECT_EQ(ModeOf(top + "/anchor"), 0600u);
  EXPECT_EQ(ModeOf(deep + "/leaf"), 0600u);
  EXPECT_EQ(ModeOf(outside), 0644u) << "a link's target is not touched";
  EXPECT_EQ(ModeOf(theirs), nobody ? 0644u : 0600u) << "another user's file is left alone";
}

TEST_F(SecureFsTest, PathsThatAreNotJobDirectories) {
  EXPECT_FALSE(MakePrivateDirectories("relative/dir", PathPolicy::kNoSymlinks).ok());
  EXPECT_FALSE(MakePrivateDirectories("/", PathPolicy::kNoSymlinks).ok());
  auto dots = MakePrivateDirectories(root_ + "/a/../b", PathPolicy::kOwnedSymlinks);
  ASSERT_FALSE(dots.ok());
  EXPECT_TRUE(Contains(dots.status().message(), "contains '..'")) << dots.status().message();
  std::ofstream(root_ + "/file") << "x";
  auto below_file = MakePrivateDirectories(root_ + "/file/job", PathPolicy::kNoSymlinks);
  ASSERT_FALSE(below_file.ok());
  EXPECT_TRUE(Contains(below_file.status().message(), root_ + "/file: is not a directory"))
      << below_file.status().message();
}

}  // namespace
}  // namespace aon
