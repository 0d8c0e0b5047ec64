#include "xla_steps.h"

namespace aon::agent {
namespace {

constexpr std::string_view kPrefix = "XlaModule:#";
constexpr std::string_view kKey = "hlo_module=";
constexpr size_t kMaxModules = 1024;  // names tracked before the choice (bounded)

}  // namespace

std::optional<std::string> XlaModuleName(std::string_view name) {
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::string_view body = name.substr(kPrefix.size());
  // The program's executables carry their program_id; the autotuner's
  // standalone candidate modules (executed many times while compiling) none.
  if (body.find("program_id=") == std::string_view::npos) return std::nullopt;
  for (size_t at = 0; at < body.size();) {
    if (body.substr(at, kKey.size()) == kKey) {
      const size_t start = at + kKey.size();
      size_t end = start;
      while (end < body.size() && body[end] != ',' && body[end] != '#') ++end;
      if (end == start) return std::nullopt;
      return std::string(body.substr(start, end - start));
    }
    at = body.find(',', at);
    if (at == std::string_view::npos) break;
    ++at;
  }
  return std::nullopt;
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
