#include "aon/ipc/shm_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <new>

namespace aon::ring {
namespace {

uint64_t RoundUpPow2(uint64_t v) {
  uint64_t p = kMinRingBytes;
  while (p < v) p <<= 1;
  return p;
}

}  // namespace

Region& Region::operator=(Region&& o) noexcept {
  if (this != &o) {
    this->~Region();
    base_ = o.base_;
    region_bytes_ = o.region_bytes_;
    ring_bytes_ = o.ring_bytes_;
    fd_ = o.fd_;
    o.base_ = nullptr;
    o.fd_ = -1;
    o.region_bytes_ = o.ring_bytes_ = 0;
  }
  return *this;
}

Region::~Region() {
  if (base_ != nullptr) munmap(base_, region_bytes_);
  if (fd_ >= 0) close(fd_);
  base_ = nullptr;
  fd_ = -1;
}

StatusOr<Region> Region::Create(uint64_t ring_bytes, int32_t pid, int32_t rank) {
  if (ring_bytes > kMaxRingBytes) {
    return InvalidArgument("ring size " + std::to_string(ring_bytes) + " exceeds the maximum " +
                           std::to_string(kMaxRingBytes));
  }
  const uint64_t rb = RoundUpPow2(std::max(ring_bytes, kMinRingBytes));
  const uint64_t total = kHeaderBytes + rb;
  int fd = memfd_create("aon-ring", MFD_CLOEXEC);
  if (fd < 0) return ErrnoStatus("memfd_create", errno);
  // Only this user may map it (through /proc/<pid>/fd or a passed descriptor).
  if (fchmod(fd, 0600) != 0 || ftruncate(fd, static_cast<off_t>(total)) != 0) {
    int err = errno;
    close(fd);
    return ErrnoStatus("sizing the ring's shared memory", err);
  }
  void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    close(fd);
    return ErrnoStatus("mmap of the ring", err);
  }
  Region r;
  r.base_ = static_cast<uint8_t*>(p);
  r.region_bytes_ = total;
  r.ring_bytes_ = rb;
  r.fd_ = fd;
  // A fresh memfd reads as zeros: every entry is "not committed".
  auto* h = new (p) RingHeader();
  h->magic = kMagic;
  h->layout_version = kLayoutVersion;
  h->header_bytes = kHeaderBytes;
  h->region_bytes = total;
  h->ring_offset = kHeaderBytes;
  h->ring_bytes = rb;
  h->pid = pid;
  h->rank = rank;
  return r;
}

StatusOr<Region> Region::Attach(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return ErrnoStatus("fstat of the ring", err);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  auto fail = [&](const std::string& why) {
    close(fd);
    return DataLoss("not an AON ring: " + why);
  };
  if (!S_ISREG(st.st_mode)) return fail("not a memory file");
  if (size < kHeaderBytes + kMinRingBytes || size > kHeaderBytes + kMaxRingBytes) {
    return fail("size " + std::to_string(size) + " out of range");
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    close(fd);
    return ErrnoStatus("mmap of the ring", err);
  }
  Region r;
  r.base_ = static_cast<uint8_t*>(p);
  r.region_bytes_ = size;
  r.fd_ = fd;
  const RingHeader* h = r.header();
  // Everything the geometry depends on is checked once here and copied out.
  if (h->magic != kMagic) return DataLoss("not an AON ring: bad magic");
  if (h->layout_version != kLayoutVersion) {
    return Unimplemented("ring layout version " + std::to_string(h->layout_version) +
                         " (this collector reads version " + std::to_string(kLayoutVersion) + ")");
  }
  const uint64_t rb = h->ring_bytes;
  if (h->header_bytes != kHeaderBytes || h->ring_offset != kHeaderBytes ||
      h->region_bytes != size || rb < kMinRingBytes || (rb & (rb - 1)) != 0 ||
      kHeaderBytes + rb != size) {
    return DataLoss("ring header geometry does not match its " + std::to_string(size) +
                    "-byte region");
  }
  r.ring_bytes_ = rb;
  return r;
}

std::string CutString(std::string_view s) {
  if (s.size() <= kMaxStringBytes) return std::string(s);
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char tail[kStringCutTailBytes + 1];
  std::snprintf(tail, sizeof tail, "...#%016llx", static_cast<unsigned long long>(h));
  return std::string(s.substr(0, kMaxStringBytes - kStringCutTailBytes)) + tail;
}

bool Producer::PushString(uint32_t id, std::string_view s) {
  // No allocation on the record path unless the string must be cut.
  std::string cut;
  if (s.size() > kMaxStringBytes) {
    cut = CutString(s);
    s = cut;
  }
  const Piece pieces[] = {{&id, 4}, {s.data(), static_cast<uint32_t>(s.size())}};
  return Write(static_cast<uint16_t>(EntryType::kString), pieces,
               static_cast<uint32_t>(4 + s.size()), kStringDropSlot);
}

Status CheckEntry(uint64_t pos, uint32_t size, uint16_t type, uint16_t payload_bytes,
                  uint64_t cap) {
  auto bad = [&](const std::string& why) {
    return DataLoss("corrupt ring entry at offset " + std::to_string(pos) + ": " + why);
  };
  if (size < kEntryHeaderBytes || (size & 7u) != 0) return bad("size " + std::to_string(size));
  if (pos + size > cap) return bad("size " + std::to_string(size) + " runs past the ring's end");
  if (kEntryHeaderBytes + uint64_t{payload_bytes} > size) {
    return bad("payload of " + std::to_string(payload_bytes) + " bytes in a " +
               std::to_string(size) + "-byte entry");
  }
  if (type == static_cast<uint16_t>(EntryType::kPadding)) return Status::Ok();
  if (type == static_cast<uint16_t>(EntryType::kString)) {
    if (payload_bytes < 4 || payload_bytes > 4 + kMaxStringBytes) {
      return bad("string entry of " + std::to_string(payload_bytes) + " bytes");
    }
    return Status::Ok();
  }
  if (type >= 1 && type < 1 + kRecordKindCount) {
    const auto kind = static_cast<RecordKind>(type - 1);
    size_t want = 0;
    ForEachRankFileRecordType([&](auto tag) {
      using T = decltype(tag);
      if (RecordTraits<T>::kKind == kind) want = sizeof(T);
    });
    if (payload_bytes != want) {
      return bad(std::string(RecordKindName(kind)) + " record of " +
                 std::to_string(payload_bytes) + " bytes (expected " + std::to_string(want) + ")");
    }
    return Status::Ok();
  }
  return bad("unknown entry type " + std::to_string(type));
}

uint64_t Consumer::Backlog() const {
  const uint64_t head = h_->head.load(std::memory_order_acquire);
  const uint64_t tail = hold_ && started_ ? read_ : h_->tail.load(std::memory_order_relaxed);
  return std::min(head - tail, cap_);
}

uint64_t Consumer::ReadFrom() {
  if (!hold_) return h_->tail.load(std::memory_order_relaxed);
  // Taken once: from then on this consumer keeps its own positions, whatever
  // the producer's side of the region says (Drain checks them as it reads).
  if (!started_) {
    started_ = true;
    read_ = released_ = h_->tail.load(std::memory_order_relaxed);
  }
  return read_;
}

void Consumer::Release() {
  if (!hold_ || !started_ || read_ == released_) return;
  // Entries are 8-byte aligned and never wrap, but a run of them may: zeroed
  // in up to two pieces. Drain read every byte of it, so it lies in the ring.
  const uint64_t n = std::min(read_ - released_, cap_);
  const uint64_t pos = released_ & (cap_ - 1);
  const uint64_t first = std::min(n, cap_ - pos);
  std::memset(ring_ + pos, 0, first);
  std::memset(ring_, 0, n - first);
  released_ = read_;
  // Forward only: a consumer that took the ring over (a rank that judged this
  // collector gone) may have moved tail further; moving it back would hand
  // producers space it has not read.
  uint64_t tail = h_->tail.load(std::memory_order_relaxed);
  while (tail < released_ &&
         !h_->tail.compare_exchange_weak(tail, released_, std::memory_order_release,
                                         std::memory_order_relaxed)) {
  }
}

}  // namespace aon::ring
