#include "xla_steps.h"

#include <utility>

#include "aon/format/framework_ranges.h"

namespace aon::agent {
namespace {

constexpr size_t kMaxModules = 1024;  // names tracked before the choice (bounded)

}  // namespace

std::optional<std::string> XlaModuleName(std::string_view name) {
  // The program's executables carry their program_id; the autotuner's
  // standalone candidate modules (executed many times while compiling) none.
  auto r = ParseXlaRange(name);
  if (!r || r->thunk || !r->program || r->module.empty()) return std::nullopt;
  return std::move(r->module);
}

bool XlaStepModule::Began(const std::string& module) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seen_.find(module);
  if (it == seen_.end()) {
    if (!chosen_.empty() || seen_.size() >= kMaxModules) return false;
    it = seen_.emplace(module, Seen{0, 0, order_++, 0}).first;
  }
  const bool step = !chosen_.empty() && module == chosen_ && it->second.in_flight == 0;
  ++it->second.in_flight;
  return step;
}

void XlaStepModule::Ended(const std::string& module, uint64_t host_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seen_.find(module);
  if (it == seen_.end()) return;
  Seen& s = it->second;
  if (s.in_flight > 0) --s.in_flight;
  ++s.executions;
  s.host_ns += host_ns;
  if (chosen_.empty() && s.executions >= kDecideAt) MaybeDecide();
}

void XlaStepModule::MaybeDecide() {
  const std::string* best = nullptr;
  const Seen* best_seen = nullptr;
  // Compares mean host times without dividing: a/b > c/d as a*d > c*b.
  auto heavier = [](const Seen& a, const Seen& b) {
    const unsigned __int128 l = static_cast<unsigned __int128>(a.host_ns) * b.executions;
    const unsigned __int128 r = static_cast<unsigned __int128>(b.host_ns) * a.executions;
    return l != r ? l > r : a.first_seen < b.first_seen;
  };
  for (const auto& [name, s] : seen_) {
    if (s.executions < kMinRepeats) continue;
    if (best_seen == nullptr || heavier(s, *best_seen)) {
      best = &name;
      best_seen = &s;
    }
  }
  if (best == nullptr) return;
  chosen_ = *best;
  // Only the chosen module is followed from now on.
  for (auto it = seen_.begin(); it != seen_.end();) {
    it = it->first == chosen_ ? std::next(it) : seen_.erase(it);
  }
}

std::string XlaStepModule::chosen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return chosen_;
}

}  // namespace aon::agent
