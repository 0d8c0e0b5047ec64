// The one temporary directory of the tests: a fresh directory under /tmp, removed with
// everything in it when the test ends (kept when AON_KEEP_TEST_DIRS is set, to look at).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

namespace aon::test_support {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/aon-test-XXXXXX";
    const char* p = mkdtemp(tmpl);
    if (p == nullptr) ADD_FAILURE() << "mkdtemp failed: " << std::strerror(errno);
    path_ = p != nullptr ? p : "/tmp";
  }
  ~TempDir() {
    std::error_code ec;
    if (path_ != "/tmp" && getenv("AON_KEEP_TEST_DIRS") == nullptr) {
      std::filesystem::remove_all(path_, ec);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

}  // namespace aon::test_support
