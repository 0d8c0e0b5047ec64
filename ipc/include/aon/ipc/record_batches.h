// Records held per kind in memory, between a ring and a trace file: the node
// collector drains rings into them and appends them to rank files (or, in
// flight mode, keeps them until they leave the window); the agent's degraded
// mode (no collector) drains its own ring through them at exit. One vector per
// record type of RecordTypes (records.h), so a new kind is batched by listing it
// there.
#pragma once

#include <array>
#include <cstring>
#include <span>
#include <tuple>
#include <vector>

#include "aon/format/records.h"
#include "aon/ipc/shm_ring.h"
#include "aon/base/status.h"
#include "aon/format/trace_file.h"

namespace aon {

class RecordBatches {
 public:
  // Takes a record entry (type already validated by the ring). Returns its
  // kind (kCount for an entry that is not a record).
  RecordKind Add(const ring::Entry& e) {
    RecordKind kind = RecordKind::kCount;
    ForEachRankFileRecordType([&](auto tag) {
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

  // Takes records made outside a ring (the collector's own GPU counters).
  template <typename T>
  void Push(std::span<const T> records) {
    auto& v = std::get<std::vector<T>>(vectors_);
    v.insert(v.end(), records.begin(), records.end());
    bytes_ += records.size() * sizeof(T);
    records_ += records.size();
  }

  template <typename T>
  const std::vector<T>& Of() const {
    return std::get<std::vector<T>>(vectors_);
  }

  // Records held of `kind`.
  size_t Count(RecordKind kind) const { return CountsPerKind()[static_cast<size_t>(kind)]; }

  // Appends every non-empty batch to `writer`.
  Status AppendTo(TraceWriter& writer) const {
    Status st;
    ForEachRankFileRecordType([&](auto tag) {
      using T = decltype(tag);
      const auto& v = std::get<std::vector<T>>(vectors_);
      if (st.ok() && !v.empty()) st = writer.Append<T>(v);
    });
    return st;
  }

  // Appends the batch of `kind` to `writer` and empties it.
  Status FlushKind(RecordKind kind, TraceWriter& writer) { return TakeKind(kind, &writer); }
  // Empties the batch of `kind` (records that could not be written).
  void DropKind(RecordKind kind) { (void)TakeKind(kind, nullptr); }

  void Clear() {
    std::apply([](auto&... v) { (v.clear(), ...); }, vectors_);
    bytes_ = records_ = 0;
  }
  // Gives the memory back too (a window chunk that is dropped).
  void Release() {
    std::apply([](auto&... v) { ((void)std::decay_t<decltype(v)>().swap(v), ...); }, vectors_);
    bytes_ = records_ = 0;
  }

  // Records held per RecordKind.
  std::array<uint64_t, kRecordKindCount> CountsPerKind() const {
    std::array<uint64_t, kRecordKindCount> n{};
    ForEachRankFileRecordType([&](auto tag) {
      using T = decltype(tag);
      n[static_cast<size_t>(RecordTraits<T>::kKind)] = std::get<std::vector<T>>(vectors_).size();
    });
    return n;
  }

  uint64_t bytes() const { return bytes_; }
  uint64_t records() const { return records_; }
  bool empty() const { return records_ == 0; }

 private:
  Status TakeKind(RecordKind kind, TraceWriter* writer) {
    Status st;
    ForEachRankFileRecordType([&](auto tag) {
      using T = decltype(tag);
      if (RecordTraits<T>::kKind != kind) return;
      auto& v = std::get<std::vector<T>>(vectors_);
      if (writer != nullptr && !v.empty()) st = writer->Append<T>(v);
      bytes_ -= v.size() * sizeof(T);
      records_ -= v.size();
      v.clear();
    });
    return st;
  }

  RecordVectors vectors_;
  uint64_t bytes_ = 0;
  uint64_t records_ = 0;
};

}  // namespace aon
