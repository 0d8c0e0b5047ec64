// The plugin's job-directory creation as another user (what slurmstepd does as
// root): privileges dropped in a forked child, no symlink followed, the result
// owned by the user with mode 0700. Uses `nobody`; needs root.
#include "secure_fs.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "skip_or_fail.h"

namespace aon::spank {
namespace {
namespace fs = std::filesystem;

class SecureFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) AON_SKIP_OR_FAIL(<< "needs root (it drops to nobody)");
    const passwd* pw = getpwnam("nobody");
    ASSERT_NE(pw, nullptr);
    user_.uid = pw->pw_uid;
    user_.gid = pw->pw_gid;
    char tmpl[] = "/tmp/aon-securefs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::permissions(root_, fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::group_read);
    base_ = root_ + "/home";  // the user's own directory
    fs::create_directory(base_);
    ASSERT_EQ(chown(base_.c_str(), user_.uid, user_.gid), 0);
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }
  JobUser user_;
  std::string root_, base_;
};

TEST_F(SecureFsTest, CreatesAsTheUserWithMode0700) {
  const std::string dir = base_ + "/traces/aon-7.0";
  Status s = MakePrivateDirectoriesAs(user_, dir);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const std::string& p : {base_ + "/traces", dir}) {
    struct stat st {};
    ASSERT_EQ(lstat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, user_.uid) << p;
    EXPECT_EQ(st.st_mode & 07777, 0700u) << p;
  }
  EXPECT_TRUE(MakePrivateDirectoriesAs(user_, dir).ok()) << "idempotent";
}

TEST_F(SecureFsTest, NeverFollowsASymlinkTheUserPlanted) {
  const std::string target = root_ + "/root-owned";
  fs::create_directory(target);
  fs::create_directory_symlink(target, base_ + "/link");
  ASSERT_EQ(lchown((base_ + "/link").c_str(), user_.uid, user_.gid), 0);
  Status s = MakePrivateDirectoriesAs(user_, base_ + "/link/aon-7.0");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("symbolic link"), std::string::npos) << s.message();
  EXPECT_TRUE(fs::is_empty(target));
  // The job directory itself as a symlink: refused too.
  fs::create_directory_symlink(target, base_ + "/aon-8.0");
  EXPECT_FALSE(MakePrivateDirectoriesAs(user_, base_ + "/aon-8.0").ok());
}

TEST_F(SecureFsTest, CannotWriteWhereTheUserCannot) {
  const std::string locked = root_ + "/locked";  // root's, 0755
  fs::create_directory(locked);
  Status s = MakePrivateDirectoriesAs(user_, locked + "/aon-7.0");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("Permission denied"), std::string::npos) << s.message();
  EXPECT_TRUE(fs::is_empty(locked)) << "nothing created as root";
  // An existing directory of someone else is not taken over.
  Status other = MakePrivateDirectoriesAs(user_, locked);
  EXPECT_FALSE(other.ok());
  EXPECT_NE(other.message().find("another user"), std::string::npos) << other.message();
}

TEST_F(SecureFsTest, FilesBecomePrivate) {
  const std::string dir = root_ + "/job";
  ASSERT_TRUE(MakePrivateDirectories(dir).ok());
  const std::string file = dir + "/rank-00000.h5";
  FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write | fs::perms::others_read);
  ASSERT_TRUE(MakeFilesPrivate(dir).ok());
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

}  // namespace
}  // namespace aon::spank
