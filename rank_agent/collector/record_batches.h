// Records drained from a ring, held per kind until the collector appends them
// to a rank file (or, in flight mode, until they leave the window).
#pragma once

#include <array>
#include <cstring>
#include <tuple>
#include <vector>

#include "aon/records.h"
#include "aon/shm_ring.h"
#include "aon/status.h"
#include "aon/trace_file.h"

namespace aon::collector {

class RecordBatches {
 public:
  // Takes a record entry (type already validated by the ring). Returns its kind.
  RecordKind Add(const ring::Entry& e) {
    RecordKind kind = RecordKind::kCount;
    ForEachRecordType([&](auto tag) {
      using T = decltype(tag);
      if (e.type != ring::RecordEntryType(RecordTraits<T>::kKind)) return;
      auto& v = std::get<std::vector<T>>(vectors_);
      v.emplace_back();
      std::memcpy(&v.back(), e.payload, sizeof(T));
      kind = RecordTraits<T>::kKind;
      bytes_ += sizeof(T);
      ++records_;
    });
    return kind;
  }

  template <typename T>
  const std::vector<T>& Of() const {
    return std::get<std::vector<T>>(vectors_);
  }

  Status AppendTo(TraceWriter& writer) const {
    Status st;
    ForEachRecordType([&](auto tag) {
      using T = decltype(tag);
      const auto& v = std::get<std::vector<T>>(vectors_);
      if (st.ok() && !v.empty()) st = writer.Append<T>(v);
    });
    return st;
  }

  void Clear() {
    std::apply([](auto&... v) { (v.clear(), ...); }, vectors_);
    bytes_ = records_ = 0;
  }
  // Gives the memory back too (a window chunk that is dropped).
  void Release() {
    std::apply([](auto&... v) { (std::vector<typename std::decay_t<decltype(v)>::value_type>().swap(v), ...); },
               vectors_);
    bytes_ = records_ = 0;
  }

  // Records held per RecordKind.
  std::array<uint64_t, kRecordKindCount> CountsPerKind() const {
    std::array<uint64_t, kRecordKindCount> n{};
    ForEachRecordType([&](auto tag) {
      using T = decltype(tag);
      n[static_cast<size_t>(RecordTraits<T>::kKind)] = std::get<std::vector<T>>(vectors_).size();
    });
    return n;
  }

  uint64_t bytes() const { return bytes_; }
  uint64_t records() const { return records_; }
  bool empty() const { return records_ == 0; }

 private:
  std::tuple<std::vector<KernelRecord>, std::vector<MemcpyRecord>, std::vector<MemsetRecord>,
             std::vector<SyncRecord>, std::vector<ApiRecord>, std::vector<NvtxRecord>,
             std::vector<NcclRecord>, std::vector<ExternalCorrelationRecord>>
      vectors_;
  uint64_t bytes_ = 0;
  uint64_t records_ = 0;
};

}  // namespace aon::collector
