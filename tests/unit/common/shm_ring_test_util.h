// Shared by shm_ring_test and its child process (shm_ring_child): the
// deterministic workload a producer thread writes into the ring (kernel
// records and strings, each derived from the thread index and a sequence
// number) and the checker a consumer runs on what it drains.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "aon/format/records.h"
#include "aon/ipc/shm_ring.h"

namespace aon::ring::ringtest {

// Strings are 0..kMaxTestString bytes long: longer than kMaxStringBytes
// sometimes, so that the cut happens under load too.
inline constexpr uint32_t kMaxTestString = 5000;
// A string's id carries the producing thread (high 8 bits) and its sequence number.
inline constexpr uint32_t kSeqBits = 24;

inline uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Whether item `seq` of thread `thread` is a string (about one in four) or a
// kernel record.
inline bool IsString(uint32_t thread, uint32_t seq) {
  return Mix((uint64_t{thread} << 32) | seq) % 4 == 0;
}

inline KernelRecord MakeKernel(uint32_t thread, uint32_t seq) {
  KernelRecord r{};
  const uint64_t m = Mix((uint64_t{thread} << 40) ^ seq ^ 0x1234);
  r.start_ns = m;
  r.end_ns = m + seq;
  r.graph_node_id = ~m;
  r.correlation_id = seq;
  r.device_id = thread;
  r.context_id = static_cast<uint32_t>(m >> 32);
  r.stream_id = thread * 7 + 1;
  r.name_id = seq * 3 + 1;
  r.graph_id = static_cast<uint32_t>(m);
  r.grid_x = static_cast<int32_t>(seq % 1000);
  r.grid_y = -static_cast<int32_t>(thread);
  r.grid_z = 3;
  r.block_x = 128;
  r.block_y = static_cast<int32_t>(m % 7);
  r.block_z = 1;
  r.registers_per_thread = 32 + thread;
  r.static_shared_bytes = seq;
  r.dynamic_shared_bytes = ~seq;
  return r;
}

inline uint32_t StringId(uint32_t thread, uint32_t seq) { return (thread << kSeqBits) | seq; }

// The string as pushed (before any cut).
inline std::string MakeString(uint32_t id) {
  const uint64_t m = Mix(uint64_t{id} ^ 0xabcdefull);
  std::string s(m % (kMaxTestString + 1), '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>('!' + (m + i * 7) % 90);
  return s;
}

// The string as the consumer must receive it.
inline std::string ExpectedString(uint32_t id) {
  std::string s = MakeString(id);
  if (s.size() > kMaxStringBytes) {
    s.resize(kMaxStringBytes - 3);
    s += "...";
  }
  return s;
}

// FNV-1a over a list of sequence numbers: lets one process compare the exact
// set of items accepted with the exact set another received.
inline uint64_t Digest(const std::vector<uint32_t>& seqs) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint32_t s : seqs) h = (h ^ s) * 0x100000001b3ull;
  return h;
}

// One producer thread's workload: up to `n` items, kernels and strings mixed,
// each after pace() (which may wait, or return false to stop early). Records
// which items the ring accepted.
struct ProducerLog {
  uint64_t kernels = 0, strings = 0;        // attempted
  uint64_t kernels_ok = 0, strings_ok = 0;  // accepted (Push returned true)
  std::vector<uint32_t> accepted;           // sequence numbers, in order
};

template <typename Pace>
ProducerLog ProduceItems(Producer& p, uint32_t thread, uint32_t n, Pace&& pace) {
  ProducerLog log;
  for (uint32_t seq = 0; seq < n; ++seq) {
    if (!pace()) break;
    bool ok;
    if (IsString(thread, seq)) {
      const uint32_t id = StringId(thread, seq);
      ok = p.PushString(id, MakeString(id));
      ++log.strings;
      log.strings_ok += ok;
    } else {
      ok = p.Push(MakeKernel(thread, seq));
      ++log.kernels;
      log.kernels_ok += ok;
    }
    if (ok) log.accepted.push_back(seq);
  }
  return log;
}

// Checks every drained entry against the workload; the first problem is kept
// in `error`. Per thread: the sequence numbers received, strictly increasing.
class Checker {
 public:
  // `mixed`: items come from ProduceItems, so whether sequence number s is a
  // kernel or a string is known; otherwise any item may be a kernel record.
  explicit Checker(uint32_t threads, bool mixed = true) : received_(threads), mixed_(mixed) {}

  void operator()(const Entry& e) {
    if (!error.empty()) return;
    uint32_t thread = 0, seq = 0;
    if (e.type == RecordEntryType(RecordKind::kKernel)) {
      KernelRecord r;
      if (e.payload_bytes != sizeof r)
        return Fail("kernel entry of " + std::to_string(e.payload_bytes) + " bytes");
      std::memcpy(&r, e.payload, sizeof r);
      thread = r.device_id;
      seq = r.correlation_id;
      if (thread >= received_.size()) return Fail("kernel from thread " + std::to_string(thread));
      const KernelRecord want = MakeKernel(thread, seq);
      if (std::memcmp(&r, &want, sizeof r) != 0 || (mixed_ && IsString(thread, seq))) {
        return Fail("kernel record thread " + std::to_string(thread) + " seq " +
                    std::to_string(seq) + " is not what was pushed");
      }
      ++kernels;
    } else if (e.type == static_cast<uint16_t>(EntryType::kString)) {
      uint32_t id;
      if (e.payload_bytes < 4) return Fail("short string entry");
      std::memcpy(&id, e.payload, 4);
      thread = id >> kSeqBits;
      seq = id & ((1u << kSeqBits) - 1);
      if (thread >= received_.size()) return Fail("string from thread " + std::to_string(thread));
      const std::string got(reinterpret_cast<const char*>(e.payload) + 4, e.payload_bytes - 4);
      if (got != ExpectedString(id) || !IsString(thread, seq)) {
        return Fail("string " + std::to_string(id) + " of " + std::to_string(got.size()) +
                    " bytes is not what was pushed");
      }
      ++strings;
    } else {
      return Fail("unexpected entry type " + std::to_string(e.type));
    }
    auto& r = received_[thread];
    if (!r.empty() && seq <= r.back()) {
      return Fail("thread " + std::to_string(thread) + ": seq " + std::to_string(seq) + " after " +
                  std::to_string(r.back()));
    }
    r.push_back(seq);
  }

  const std::vector<uint32_t>& received(uint32_t thread) const { return received_[thread]; }

  uint64_t kernels = 0, strings = 0;
  std::string error;

 private:
  void Fail(std::string why) {
    if (error.empty()) error = std::move(why);
  }
  std::vector<std::vector<uint32_t>> received_;
  bool mixed_;
};

}  // namespace aon::ring::ringtest
