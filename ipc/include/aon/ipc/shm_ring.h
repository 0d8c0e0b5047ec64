// Shared-memory record ring: the boundary between a rank's agent (producers)
// and the node collector (the one consumer, in another process).
//
// Protocol (layout version 1). One region per process, a memfd (mode 0600)
// handed to the collector over a Unix socket. All integers little-endian, all
// offsets relative to the region's first byte; nothing in the region is a
// pointer. Sizes are pinned by static_assert below.
//
//   [0, 4096)              RingHeader
//     0    u64  magic                "AONRING1" (0x31474e49524e4f41)
//     8    u32  layout_version       1
//     12   u32  header_bytes         4096
//     16   u64  region_bytes         header_bytes + ring_bytes
//     24   u64  ring_offset          == header_bytes
//     32   u64  ring_bytes           power of two, >= 4096
//     40   i32  pid                  of the producing process
//     44   i32  rank
//     64   atomic u64 head           bytes ever reserved by producers (own cache line)
//     128  atomic u64 tail           bytes ever consumed by the consumer (own cache line)
//     192  atomic u64 dropped[16]    records dropped per RecordKind (ring full), then
//                                    index 15: string records dropped
//     320  atomic u32 producer_state 0 running, 1 finished (no more records)
//     324  u32  reserved
//     328  atomic u64 last_push_ns   producer's clock at its last push (heartbeat)
//   [4096, 4096 + ring_bytes)  the ring: a sequence of 8-byte aligned entries
//
// Entry at ring position p (p = byte counter mod ring_bytes, 8-byte aligned):
//     0    atomic u32 commit   0: not yet written; else the entry's total size in
//                              bytes (header included, multiple of 8)
//     4    u16  type           EntryType below
//     6    u16  payload_bytes  bytes of payload that are meaningful
//     8    payload             a record struct of records.h, or string bytes
// An entry never wraps: a producer whose entry does not fit before the end of
// the ring also reserves the rest of the ring and fills it with a kPadding entry.
//
// Producers (any number of threads): reserve with a CAS on head (failing when
// head + size - tail > ring_bytes: the record is dropped and counted), write
// the payload, then publish with a release store of commit. No syscall, no
// allocation, no lock, no wait: a tail that makes no sense (past every head,
// as a hostile or broken consumer may write it) drops the record too; the
// position written is always head mod ring_bytes, inside the ring, whatever
// the indices say. The consumer reads entries from tail while commit != 0
// (acquire), copies them out, zeroes the consumed bytes (so that a future entry
// header in that space reads 0 until it is committed), then advances tail with
// a release store. The collector does the last two only once what it read is
// in its file (Consumer::Keep::kUntilReleased): until then tail stays behind
// it, and a consumer that takes over the ring reads from there. Every value the consumer reads from the region is checked
// against the ring's bounds: the producer is another process and untrusted.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "aon/format/records.h"
#include "aon/base/status.h"

namespace aon::ring {

inline constexpr uint64_t kMagic = 0x31474e49524e4f41ull;  // "AONRING1"
// 2: the capture control block (on-demand windows).
inline constexpr uint32_t kLayoutVersion = 2;
inline constexpr uint32_t kHeaderBytes = 4096;
inline constexpr uint64_t kMinRingBytes = 4096;
inline constexpr uint64_t kMaxRingBytes = uint64_t{1} << 34;  // 16 GiB
inline constexpr size_t kDropSlots = 16;
inline constexpr size_t kStringDropSlot = 15;
inline constexpr uint32_t kEntryHeaderBytes = 8;
// Longest string carried in one entry (16 KiB: C++ template kernel names run to a
// few KiB). A longer one is cut so that it still names one string: its first
// kMaxStringBytes - kStringCutTailBytes bytes, then "...#" and 16 hex digits of
// the FNV-1a 64-bit hash of the whole string (the same cut on every rank).
inline constexpr uint32_t kMaxStringBytes = 16384;
inline constexpr uint32_t kStringCutTailBytes = 20;  // "...#" + 16 hex digits
// `s` as a string entry carries it: whole, or cut as above.
std::string CutString(std::string_view s);

enum class EntryType : uint16_t {
  kPadding = 0,   // fills the ring's tail end; no payload
  kRecord = 1,    // kRecord + RecordKind: see RecordEntryType()
  kString = 64,   // payload: u32 string id, then the bytes (payload_bytes - 4 of them)
};
inline constexpr uint16_t RecordEntryType(RecordKind kind) {
  return static_cast<uint16_t>(1 + static_cast<uint16_t>(kind));
}

struct alignas(64) RingHeader {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t header_bytes;
  uint64_t region_bytes;
  uint64_t ring_offset;
  uint64_t ring_bytes;
  int32_t pid;
  int32_t rank;
  uint8_t pad0_[16];
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) std::atomic<uint64_t> tail;
  alignas(64) std::atomic<uint64_t> dropped[kDropSlots];
  std::atomic<uint32_t> producer_state;
  uint32_t reserved;
  std::atomic<uint64_t> last_push_ns;
  // The other direction, collector -> agent: an on-demand capture window
  // (aon/ipc/capture_request.h). The collector writes first_step, steps and source,
  // then capture_seq (release); the agent reads capture_seq at each step
  // boundary (acquire) and, when it changed, the rest.
  alignas(64) std::atomic<uint64_t> capture_seq;
  std::atomic<uint64_t> capture_first_step;
  std::atomic<uint32_t> capture_steps;
  std::atomic<uint32_t> capture_source;  // StepSource
};
static_assert(offsetof(RingHeader, head) == 64);
static_assert(offsetof(RingHeader, tail) == 128);
static_assert(offsetof(RingHeader, dropped) == 192);
static_assert(offsetof(RingHeader, producer_state) == 320);
static_assert(offsetof(RingHeader, last_push_ns) == 328);
static_assert(offsetof(RingHeader, capture_seq) == 384);
static_assert(sizeof(RingHeader) <= kHeaderBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

struct EntryHeader {
  std::atomic<uint32_t> commit;
  uint16_t type;
  uint16_t payload_bytes;
};
static_assert(sizeof(EntryHeader) == kEntryHeaderBytes);

inline constexpr uint32_t EntryBytes(uint32_t payload) {
  return (kEntryHeaderBytes + payload + 7u) & ~7u;
}

// A mapped region: owns the mapping (and the fd, if it made one).
class Region {
 public:
  // Creates an anonymous shared region (memfd, 0600) with a ring of at least
  // `ring_bytes` (rounded up to a power of two).
  static StatusOr<Region> Create(uint64_t ring_bytes, int32_t pid, int32_t rank);
  // Maps a region received from another process, validating its header against
  // the file's real size. `fd` is taken over (closed with the Region).
  static StatusOr<Region> Attach(int fd);

  Region() = default;
  Region(Region&& o) noexcept { *this = std::move(o); }
  Region& operator=(Region&& o) noexcept;
  ~Region();

  int fd() const { return fd_; }
  RingHeader* header() const { return reinterpret_cast<RingHeader*>(base_); }
  uint8_t* ring() const { return base_ + kHeaderBytes; }
  uint64_t ring_bytes() const { return ring_bytes_; }
  uint64_t region_bytes() const { return region_bytes_; }
  bool valid() const { return base_ != nullptr; }

 private:
  uint8_t* base_ = nullptr;
  uint64_t region_bytes_ = 0;
  uint64_t ring_bytes_ = 0;  // copied at map time: never re-read from shared memory
  int fd_ = -1;
};

// The producer side: what the agent's threads call. Thread-safe, lock-free.
class Producer {
 public:
  Producer() = default;
  explicit Producer(const Region& region)
      : h_(region.header()), ring_(region.ring()), mask_(region.ring_bytes() - 1) {}

  bool attached() const { return h_ != nullptr; }

  // One piece of an entry's payload (Write copies the pieces in order).
  struct Piece {
    const void* data;
    uint32_t bytes;
  };

  // Copies one entry into the ring. False (and counted in dropped[drop_slot])
  // when the ring is full.
  bool Write(uint16_t type, const void* payload, uint32_t payload_bytes, size_t drop_slot) {
    const Piece one[] = {{payload, payload_bytes}};
    return Write(type, one, payload_bytes, drop_slot);
  }
  template <size_t N>
  bool Write(uint16_t type, const Piece (&pieces)[N], uint32_t payload_bytes, size_t drop_slot) {
    const uint32_t size = EntryBytes(payload_bytes);
    const uint64_t cap = mask_ + 1;
    uint64_t head = h_->head.load(std::memory_order_relaxed);
    uint64_t pos;
    for (int stale = 0;; ++stale) {
      pos = head & mask_;
      // An entry does not wrap: pad to the end and start again at 0.
      const uint64_t pad = pos + size > cap ? cap - pos : 0;
      const uint64_t next = head + pad + size;
      const uint64_t tail = h_->tail.load(std::memory_order_acquire);
      if (tail > head) {
        // A head read before the consumer moved tail past it (this thread was
        // preempted in between) is stale: read it again. The head read now is
        // at least that tail (the consumer read it before publishing the tail,
        // and the acquire above orders the two). A tail still past it breaks
        // the protocol: the other side is not a consumer (it is another
        // process: never trusted), and the record is dropped and counted,
        // never waited for. So is a tail that keeps moving past the head read,
        // which a real consumer cannot do kMaxStaleReads times in a row.
        head = h_->head.load(std::memory_order_relaxed);
        if (tail <= head && stale < kMaxStaleReads) continue;
        h_->dropped[drop_slot].fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      if (next - tail > cap) {
        h_->dropped[drop_slot].fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      if (h_->head.compare_exchange_weak(head, next, std::memory_order_relaxed,
                                         std::memory_order_relaxed)) {
        break;
      }
    }
    if (pos + size > cap) {
      PublishPadding(pos, static_cast<uint32_t>(cap - pos));
      pos = 0;
    }
    Publish(pos, size, type, pieces, payload_bytes);
    return true;
  }

  template <typename T>
  bool Push(const T& record) {
    constexpr RecordKind kind = RecordTraits<T>::kKind;
    return Write(RecordEntryType(kind), &record, sizeof(T), static_cast<size_t>(kind));
  }

  // A string-table entry: id then bytes (cut as kMaxStringBytes says).
  bool PushString(uint32_t id, std::string_view s);

  void CountDropped(size_t slot, uint64_t n) {
    h_->dropped[slot].fetch_add(n, std::memory_order_relaxed);
  }

 private:
  template <size_t N>
  void Publish(uint64_t pos, uint32_t size, uint16_t type, const Piece (&pieces)[N],
               uint32_t payload_bytes) {
    auto* e = reinterpret_cast<EntryHeader*>(ring_ + pos);
    e->type = type;
    e->payload_bytes = static_cast<uint16_t>(payload_bytes);
    uint8_t* to = ring_ + pos + kEntryHeaderBytes;
    for (const Piece& p : pieces) {
      if (p.bytes != 0) std::memcpy(to, p.data, p.bytes);
      to += p.bytes;
    }
    e->commit.store(size, std::memory_order_release);
  }
  void PublishPadding(uint64_t pos, uint32_t size) {
    auto* e = reinterpret_cast<EntryHeader*>(ring_ + pos);
    e->type = static_cast<uint16_t>(EntryType::kPadding);
    e->payload_bytes = 0;
    e->commit.store(size, std::memory_order_release);
  }

  // Fresh reads of head after a tail past it, per record, before it is dropped.
  static constexpr int kMaxStaleReads = 16;

  RingHeader* h_ = nullptr;
  uint8_t* ring_ = nullptr;
  uint64_t mask_ = 0;
};

// One entry as the consumer sees it (valid until the next Drain callback returns).
struct Entry {
  uint16_t type;
  const uint8_t* payload;
  uint32_t payload_bytes;
};

// The consumer side (one thread, usually in the collector process).
//
// kOnDrain: what Drain hands over leaves the ring at once (tail advances).
// kUntilReleased: it stays in the ring, unreachable to producers, until
// Release(): the collector releases what it drained once that is in the file,
// so that if it dies between a drain and its flush, the rank (a new Consumer
// of the same ring, which starts at tail) reads those records again.
class Consumer {
 public:
  enum class Keep { kOnDrain, kUntilReleased };
  Consumer() = default;
  explicit Consumer(const Region& region, Keep keep = Keep::kOnDrain)
      : h_(region.header()),
        ring_(region.ring()),
        cap_(region.ring_bytes()),
        hold_(keep == Keep::kUntilReleased) {}

  struct DrainResult {
    uint64_t entries = 0;
    uint64_t bytes = 0;
    bool pending = false;  // stopped at an entry reserved but not yet committed
  };

  // Hands every committed entry, in ring order, to f(const Entry&), up to
  // max_bytes of ring space. A malformed entry (bad size, type or string) is
  // an error naming what was wrong; the ring is then not read any further.
  template <typename F>
  StatusOr<DrainResult> Drain(F&& f, uint64_t max_bytes = UINT64_MAX);

  // Producer's counters, as last published.
  uint64_t Dropped(size_t slot) const { return h_->dropped[slot].load(std::memory_order_relaxed); }
  bool ProducerFinished() const {
    return h_->producer_state.load(std::memory_order_acquire) != 0;
  }
  // Bytes reserved but not yet drained (bounded by the ring size).
  uint64_t Backlog() const;

  // kUntilReleased: everything drained so far leaves the ring (its space
  // zeroed, then tail moved past it). Nothing to do for kOnDrain.
  void Release();
  // kUntilReleased: bytes drained but not yet released.
  uint64_t Held() const { return read_ - released_; }

 private:
  // Where the next Drain reads (kUntilReleased: ahead of the ring's tail).
  uint64_t ReadFrom();

  RingHeader* h_ = nullptr;
  uint8_t* ring_ = nullptr;
  uint64_t cap_ = 0;
  bool hold_ = false;
  bool started_ = false;   // kUntilReleased: read_ and released_ taken from tail
  uint64_t read_ = 0;      // kUntilReleased: the next entry to drain
  uint64_t released_ = 0;  // kUntilReleased: the tail this consumer last stored
  bool broken_ = false;
};

// Checks one entry's header against the ring's geometry; the message says
// what is wrong. Used by Consumer::Drain.
Status CheckEntry(uint64_t pos, uint32_t size, uint16_t type, uint16_t payload_bytes,
                  uint64_t cap);

template <typename F>
StatusOr<Consumer::DrainResult> Consumer::Drain(F&& f, uint64_t max_bytes) {
  DrainResult result;
  if (broken_) return DataLoss("ring was found corrupt earlier; not read further");
  uint64_t tail = ReadFrom();
  const uint64_t head = h_->head.load(std::memory_order_acquire);
  if (head - tail > cap_) {
    broken_ = true;
    return DataLoss("ring head " + std::to_string(head) + " is more than the ring size past tail " +
                    std::to_string(tail));
  }
  // Entries start 8-byte aligned, so an entry header at tail lies inside the
  // ring; tail is in the shared region, where the other side may write too.
  if ((tail & 7u) != 0) {
    broken_ = true;
    return DataLoss("ring tail " + std::to_string(tail) + " is not 8-byte aligned");
  }
  while (tail != head && result.bytes < max_bytes) {
    const uint64_t pos = tail & (cap_ - 1);
    auto* e = reinterpret_cast<EntryHeader*>(ring_ + pos);
    const uint32_t size = e->commit.load(std::memory_order_acquire);
    if (size == 0) {
      result.pending = true;
      break;
    }
    const uint16_t type = e->type;
    const uint16_t payload_bytes = e->payload_bytes;
    Status ok = CheckEntry(pos, size, type, payload_bytes, cap_);
    if (ok.ok() && size > head - tail) {
      ok = DataLoss("ring entry at " + std::to_string(pos) + " of " + std::to_string(size) +
                    " bytes runs past the producer's head");
    }
    if (!ok.ok()) {
      broken_ = true;
      if (hold_) {
        read_ = tail;
      } else {
        h_->tail.store(tail, std::memory_order_release);
      }
      return ok;
    }
    if (type != static_cast<uint16_t>(EntryType::kPadding)) {
      f(Entry{type, ring_ + pos + kEntryHeaderBytes, payload_bytes});
      ++result.entries;
    }
    if (!hold_) std::memset(ring_ + pos, 0, size);
    tail += size;
    result.bytes += size;
  }
  if (hold_) {
    read_ = tail;
  } else {
    h_->tail.store(tail, std::memory_order_release);
  }
  return result;
}

}  // namespace aon::ring
