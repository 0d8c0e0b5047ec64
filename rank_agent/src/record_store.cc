#include "record_store.h"

#include <algorithm>

namespace aon::agent {

uint32_t RecordStore::Intern(std::string_view s, RecordKind kind) {
  if (s.empty()) return 0;
  std::lock_guard<std::mutex> lock(strings_mu_);
  size_t before = strings_.size();
  // Look up first: only a new string is charged.
  uint32_t id = strings_.Intern(s);
  if (strings_.size() != before && !Charge(s.size() + 64)) {
    // Over the cap: the string is kept (records already refer to it by id
    // and names are small) and the overrun is counted as a drop of `kind`.
    CountDropped(kind, 1);
  }
  return id;
}

std::array<uint64_t, kRecordKindCount> RecordStore::Dropped() const {
  std::array<uint64_t, kRecordKindCount> out{};
  for (size_t i = 0; i < kRecordKindCount; ++i) out[i] = dropped_[i].load(std::memory_order_relaxed);
  return out;
}

Status RecordStore::WriteTo(TraceWriter& writer) {
  Status st;
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    if (!st.ok()) return;
    auto& slot = std::get<Slot<T>>(slots_);
    std::deque<T> held;
    {
      std::lock_guard<std::mutex> lock(slot.mu);
      held.swap(slot.records);
    }
    // Transient copy at write time (exit): the incremental writer of the
    // collector (#3) removes it.
    std::vector<T> records(held.begin(), held.end());
    held.clear();
    // Sorted by start per rank file: the merge relies on nothing but it makes
    // per-rank reads sequential in time and compress better.
    std::stable_sort(records.begin(), records.end(),
                     [](const T& a, const T& b) { return StartOf(a) < StartOf(b); });
    st = writer.Append<T>(records);
  });
  AON_RETURN_IF_ERROR(st);
  std::lock_guard<std::mutex> lock(strings_mu_);
  return writer.WriteStrings(strings_);
}

}  // namespace aon::agent
