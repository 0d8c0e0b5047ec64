#include "record_sink.h"

#include <pthread.h>

#include <algorithm>

#include "aon/ipc/record_batches.h"

namespace aon::agent {

RecordSink::RecordSink(uint64_t cap_bytes, int32_t pid, int32_t rank, std::string* why) {
  // Half the cap, as a power of two, and never more than a ring can be: a cap
  // above 2 x kMaxRingBytes (which AON_MEMORY_CAP refuses) still gets a ring.
  uint64_t ring_bytes = ring::kMinRingBytes;
  while (ring_bytes * 2 <= cap_bytes / 2 && ring_bytes * 2 <= ring::kMaxRingBytes) ring_bytes *= 2;
  auto region = ring::Region::Create(ring_bytes, pid, rank);
  if (region.ok()) {
    region_ = std::move(region).value();
    producer_ = ring::Producer(region_);
    const uint64_t used = region_.region_bytes();
    external_cap_ = cap_bytes > used ? cap_bytes - used : 0;
  } else if (why != nullptr) {
    *why = "no shared-memory ring (" + region.status().message() + "): every record is dropped";
  }
}

bool RecordSink::ReserveExternal(uint64_t bytes) {
  uint64_t used = external_used_.load(std::memory_order_relaxed);
  do {
    if (used + bytes > external_cap_) return false;
  } while (!external_used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

std::atomic<bool> g_sink_in_forked_child{false};

namespace {
// Registered when the library is loaded, before any record can be pushed.
const int g_sink_atfork = pthread_atfork(
    nullptr, nullptr, [] { g_sink_in_forked_child.store(true, std::memory_order_relaxed); });
}  // namespace

void RecordSink::CountDropped(RecordKind kind, uint64_t n) {
  if (g_sink_in_forked_child.load(std::memory_order_relaxed)) return;
  if (producer_.attached()) {
    producer_.CountDropped(static_cast<size_t>(kind), n);
  } else {
    local_dropped_[static_cast<size_t>(kind)].fetch_add(n, std::memory_order_relaxed);
  }
}

std::array<uint64_t, kRecordKindCount> RecordSink::Dropped() const {
  std::array<uint64_t, kRecordKindCount> out{};
  for (size_t i = 0; i < kRecordKindCount; ++i) {
    out[i] = local_dropped_[i].load(std::memory_order_relaxed);
    if (region_.valid()) out[i] += region_.header()->dropped[i].load(std::memory_order_relaxed);
  }
  return out;
}

uint32_t RecordSink::Intern(std::string_view s, RecordKind kind) {
  if (s.empty() || g_sink_in_forked_child.load(std::memory_order_relaxed)) return 0;
  // Strings are stored NUL-terminated (rank files, timelines): a NUL inside
  // one (a Python frame's name, read from the interpreter, may hold any byte)
  // would make two strings read back the same, and a reader refuses the
  // whole table as corrupt (seen: a rank file the merge could not read). Such
  // a byte is stored as '?', before the lookup, so equal results share an id.
  std::string clean;
  if (s.find('\0') != std::string_view::npos) {
    clean.assign(s);
    std::replace(clean.begin(), clean.end(), '\0', '?');
    s = clean;
  }
  std::lock_guard<std::mutex> lock(strings_mu_);
  const size_t before = strings_.size();
  // Looked up first: only a new string is charged and sent.
  uint32_t id = strings_.Intern(s);
  if (strings_.size() == before) return id;
  if (!ReserveExternal(s.size() + 64)) {
    // Kept (ids are dense) but counted: the cap is reached.
    CountDropped(kind, 1);
  }
  // Under the lock: strings enter the ring in id order.
  if (!producer_.attached() || !producer_.PushString(id, s)) unsent_strings_.push_back(id);
  return id;
}

size_t RecordSink::ResendDroppedStrings() {
  std::lock_guard<std::mutex> lock(strings_mu_);
  std::vector<uint32_t> still;
  for (uint32_t id : unsent_strings_) {
    if (!producer_.attached() || !producer_.PushString(id, strings_.Get(id))) still.push_back(id);
  }
  unsent_strings_.swap(still);
  return unsent_strings_.size();
}

void RecordSink::MarkFinished() {
  if (region_.valid()) region_.header()->producer_state.store(1, std::memory_order_release);
}

Status RecordSink::AppendNewStrings(TraceWriter& writer, size_t* written) {
  std::vector<std::string> next;
  {
    std::lock_guard<std::mutex> lock(strings_mu_);
    const std::vector<std::string>& all = strings_.strings();
    if (*written >= all.size()) return Status::Ok();
    next.assign(all.begin() + static_cast<std::ptrdiff_t>(*written), all.end());
  }
  AON_RETURN_IF_ERROR(writer.AppendStrings(next));
  *written += next.size();
  return Status::Ok();
}

Status RecordSink::DrainTo(TraceWriter& writer, Unwritten* unwritten) {
  constexpr size_t kBatch = 4096;
  uint64_t names_bytes = 0;
  {
    std::lock_guard<std::mutex> lock(strings_mu_);
    names_bytes = strings_.bytes() + 8 * strings_.size();
  }
  RecordBatches batches;
  // The batch of `kind` (every batch: kCount) into the file, or counted as
  // unwritten when the file has no room for it; room for the names is kept.
  auto write = [&](RecordKind kind) -> Status {
    const Status room = writer.Reserve(batches.bytes() + names_bytes);
    if (room.ok())
      return kind == RecordKind::kCount ? batches.AppendTo(writer)
                                        : batches.FlushKind(kind, writer);
    if (unwritten->why.empty()) unwritten->why = room.message();
    const auto held = batches.CountsPerKind();
    for (size_t k = 0; k < kRecordKindCount; ++k) {
      if (kind != RecordKind::kCount && k != static_cast<size_t>(kind)) continue;
      unwritten->records[k] += held[k];
      batches.DropKind(static_cast<RecordKind>(k));
    }
    return Status::Ok();
  };
  Status st;
  if (region_.valid()) {
    ring::Consumer consumer(region_);
    // What the ring holds now, not what producers add meanwhile: a pass ends
    // even while the application produces faster than the file takes it.
    uint64_t left = consumer.Backlog();
    while (st.ok() && left > 0) {
      auto drained = consumer.Drain(
          [&](const ring::Entry& e) {
            const RecordKind kind = batches.Add(e);
            if (kind != RecordKind::kCount && st.ok() && batches.Count(kind) >= kBatch)
              st = write(kind);
          },
          left);
      if (!drained.ok()) {
        st = drained.status();
        break;
      }
      if (drained->bytes == 0) break;
      left -= std::min(left, drained->bytes);
    }
  }
  if (st.ok()) st = write(RecordKind::kCount);
  return st;
}

}  // namespace aon::agent
