// AON_SKIP_OR_FAIL (tests/support/skip_or_fail.h): a missing prerequisite is a skip on a
// developer's machine and a failure under CI.
#include "skip_or_fail.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>

namespace aon {
namespace {

// Sets CI for one scope and puts back what was there.
class ScopedCi {
 public:
  explicit ScopedCi(const char* value) {
    if (const char* old = getenv("CI")) old_ = old;
    if (value != nullptr) {
      setenv("CI", value, 1);
    } else {
      unsetenv("CI");
    }
  }
  ~ScopedCi() {
    if (old_) {
      setenv("CI", old_->c_str(), 1);
    } else {
      unsetenv("CI");
    }
  }

 private:
  std::optional<std::string> old_;
};

void MissingPrerequisite() { AON_SKIP_OR_FAIL(<< "tool-that-is-not-there is not installed"); }

TEST(SkipOrFail, UnderCiAMissingPrerequisiteFails) {
  ScopedCi ci("true");
  EXPECT_FATAL_FAILURE(MissingPrerequisite(), "tool-that-is-not-there is not installed");
}

TEST(SkipOrFail, CiIsReadAsCiSystemsSetIt) {
  {
    ScopedCi ci("1");
    EXPECT_TRUE(test_support::UnderCi());
  }
  {
    ScopedCi ci("false");
    EXPECT_FALSE(test_support::UnderCi());
  }
  {
    ScopedCi ci(nullptr);
    EXPECT_FALSE(test_support::UnderCi());
  }
}

}  // namespace
}  // namespace aon
