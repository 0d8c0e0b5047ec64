// Tests of aon::launcher's child process handling with real children (sh).
#include "aon/launcher/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

extern char** environ;

namespace aon::launcher {
namespace {

namespace fs = std::filesystem;

TEST(EnvironmentWith, ReplacesAndAdds) {
  std::string a = "A=1", b = "B=2", c = "C=3";
  char* base[] = {a.data(), b.data(), c.data(), nullptr};
  std::vector<std::string> env = EnvironmentWith(base, {{"B", "new"}, {"D", "4"}});
  EXPECT_EQ(env, (std::vector<std::string>{"A=1", "C=3", "B=new", "D=4"}));
  EXPECT_EQ(EnvironmentWith(base, {{"D", "4"}}, {"A", "C"}),
            (std::vector<std::string>{"B=2", "D=4"}));
}

TEST(RunAndWait, ReturnsTheWaitStatus) {
  auto status = RunAndWait("/bin/sh", {"sh", "-c", "exit 3"}, EnvironmentWith(environ, {}));
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(ExitStatusFromWaitStatus(*status), 3);

  auto killed = RunAndWait("/bin/sh", {"sh", "-c", "kill -KILL $$"}, EnvironmentWith(environ, {}));
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(ExitStatusFromWaitStatus(*killed), 128 + SIGKILL);
}

TEST(RunAndWait, PassesTheEnvironment) {
  auto status = RunAndWait("/bin/sh", {"sh", "-c", "test \"$AON_TEST_VAR\" = 'a b,c'"},
                           EnvironmentWith(environ, {{"AON_TEST_VAR", "a b,c"}}));
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(ExitStatusFromWaitStatus(*status), 0);
}

TEST(RunAndWait, ExecFailureIsAnErrorNamingThePath) {
  auto status = RunAndWait("/nonexistent/launcher", {"launcher"}, {});
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.status().code(), StatusCode::kNotFound);
  EXPECT_NE(status.status().message().find("/nonexistent/launcher"), std::string::npos);

  // Without any execute bit even root gets EACCES.
  char path[] = "/tmp/aon-not-executable-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::fchmod(fd, 0644);
  ::close(fd);
  auto not_executable = RunAndWait(path, {"x"}, {});
  ::unlink(path);
  ASSERT_FALSE(not_executable.ok());
  EXPECT_EQ(not_executable.status().code(), StatusCode::kPermissionDenied)
      << not_executable.status().ToString();
}

TEST(RunAndWait, ForwardsSignalsSentToUsAndSurvivesThem) {
  char pattern[] = "/tmp/aon-forward-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string ready = std::string(pattern) + "/ready";
  // The child exits 42 on SIGUSR1; without forwarding it would run for 30 s,
  // and without our handler SIGUSR1 would kill the test.
  std::thread sender([&] {
    for (int i = 0; i < 3000 && !fs::exists(ready); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::kill(::getpid(), SIGUSR1);
  });
  auto start = std::chrono::steady_clock::now();
  auto status = RunAndWait("/bin/sh",
                           {"sh", "-c",
                            "trap 'exit 42' USR1; touch " + ready +
                                "; i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"},
                           EnvironmentWith(environ, {}));
  sender.join();
  fs::remove_all(pattern);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(ExitStatusFromWaitStatus(*status), 42);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  // Our disposition is back to what it was.
  struct sigaction now {};
  ::sigaction(SIGUSR1, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

}  // namespace
}  // namespace aon::launcher
