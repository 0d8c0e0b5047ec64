#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace aon::merge {

Progress::Progress(bool enabled, uint64_t total_records)
    : on_(enabled && isatty(STDERR_FILENO) == 1),
      total_(std::max<uint64_t>(1, 2 * total_records)),
      t0_(std::chrono::steady_clock::now()) {}

void Progress::Set(std::string_view kind, std::string_view phase, uint64_t done_before_kind,
                   double fraction_of_kind, uint64_t kind_records) {
  if (!on_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(100) && fraction_of_kind < 1.0) return;
  last_ = now;
  const double done = static_cast<double>(done_before_kind) +
                      fraction_of_kind * static_cast<double>(2 * kind_records);
  const double f = std::min(1.0, done / static_cast<double>(total_));
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(f * kWidth);
  const double secs = std::chrono::duration<double>(now - t0_).count();
  std::fprintf(stderr, "\raon-merge: [%.*s%*s] %3d%% %-20.*s %-16.*s %6.1f s\x1b[K", filled,
               "==============================", kWidth - filled, "", static_cast<int>(f * 100),
               static_cast<int>(kind.size()), kind.data(), static_cast<int>(phase.size()),
               phase.data(), secs);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::Finish() {
  if (drawn_) std::fputs("\r\x1b[K", stderr);
  drawn_ = false;
}

}  // namespace aon::merge
