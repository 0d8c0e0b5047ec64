// A test whose prerequisite is missing here (a program not built, a tool not installed, no
// root or no second user) skips on a developer's machine, but fails under CI (CI=true, as
// .ci/run is run): there scripts/install-deps.sh --test has installed everything and the
// build has made everything, so a missing prerequisite is a broken install step or build,
// which a skip would let pass as green.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

namespace aon::test_support {

inline bool UnderCi() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string_view v(ci);
  return v == "true" || v == "1" || v == "yes";
}

}  // namespace aon::test_support

// AON_SKIP_OR_FAIL(<< "what is missing"): in a test body (or a void helper it calls).
#define AON_SKIP_OR_FAIL(message)                                                   \
  do {                                                                              \
    if (::aon::test_support::UnderCi()) {                                           \
      GTEST_FAIL() << "missing under CI, where everything must be there: " message; \
    }                                                                               \
    GTEST_SKIP() message;                                                           \
  } while (0)
