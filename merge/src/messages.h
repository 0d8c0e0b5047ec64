// Every message merge processes exchange, in the order the phases send them
// (merge.cc has the phases). Each is a struct with exactly one Pack and one
// Unpack; nothing else reads or writes their bytes.
//
//   phase        message             collective  from each process
//   any          StatusMessage       Allgather   its status after a step that can fail
//                                                locally (Agree: the first failure wins)
//   1 scan       ScanList            Allgather   the rank files it sees, with sizes
//   2 open       CandidateSummaries  Allgather   what opening its files found
//   3 strings    StringUnion         Allgather   the strings of the ranks it merges
//   4 records    RowCount            Allgather   rows it will read (all kinds; then per kind)
//                StartSamples        Allgather   sampled start times of a kind
//                RecordSlab<T>       Alltoall    the records of one slab, per destination
//   5 outcomes   ProcessOutcome      Allgather   its status, rows written, per-rank results
//
// Byte messages are packed with Packer (pack.h): little-endian u64 numbers,
// u64-length-prefixed strings and lists. A record slab is Merged<T> records as
// 8-byte words. Unpack never reads past its input, never allocates more than
// the input could hold, and fails (naming the message) on a short, long or
// malformed input; the out-parameter is then unspecified.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aon/format/records.h"
#include "aon/base/status.h"
#include "aon/format/string_table.h"
#include "aon/format/trace_format.h"
#include "candidate.h"

namespace aon::merge {

// ---- StatusMessage: a process's status (Agree) ------------------------------------

struct StatusMessage {
  StatusCode code = StatusCode::kOk;
  std::string message;

  static StatusMessage Of(const Status& s) { return {s.code(), s.message()}; }
  Status ToStatus() const { return Status(code, message); }
};
std::string Pack(const StatusMessage& m);
Status Unpack(std::string_view bytes, StatusMessage* m);

// ---- 1. ScanList: the job directory as one process sees it --------------------------

struct ListedFile {
  std::string path;
  uint64_t bytes = 0;
};
struct ScanList {
  bool listed = false;             // false: the directory could not be listed here (Agree says why)
  std::vector<ListedFile> finals;  // rank-*.h5, sorted by path
  std::vector<ListedFile> partials;  // rank-*.h5.partial, sorted by path
  // What this process's join (join.h) did before listing: ranks whose two parts
  // it joined, and pairs it could not join.
  std::vector<std::string> joined, join_problems;
};
std::string Pack(const ScanList& m);
Status Unpack(std::string_view bytes, ScanList* m);

// ---- 2. CandidateSummaries: what opening a process's files found --------------------

struct CandidateSummary {
  uint64_t index = 0;  // into the candidates every process holds
  OpenResult found;
};
struct CandidateSummaries {
  std::vector<CandidateSummary> opened;
};
std::string Pack(const CandidateSummaries& m);
Status Unpack(std::string_view bytes, CandidateSummaries* m);

// ---- 3. StringUnion: the strings of a process's merged ranks -------------------------

struct StringUnion {
  std::vector<std::string> strings;  // each once, in first-seen order
};
std::string Pack(const StringUnion& m);
Status Unpack(std::string_view bytes, StringUnion* m);
// The same message without a StringUnion copy of the strings: packed from a
// table's strings, and interned into a table as read (an opener hands a rank's
// string table over this way, up to 4 GiB of it).
std::string PackStrings(std::span<const std::string> strings);
Status UnpackInto(std::string_view bytes, StringTable* table);

// ---- 4. Records: sizes, samples, slabs ---------------------------------------------

struct RowCount {
  uint64_t rows = 0;
};
std::string Pack(const RowCount& m);
Status Unpack(std::string_view bytes, RowCount* m);

struct StartSamples {
  std::vector<uint64_t> starts;
};
std::string Pack(const StartSamples& m);
Status Unpack(std::string_view bytes, StartSamples* m);

// The records of one slab going to one process; what a process receives from
// all others (slabs concatenated in process order) is again a RecordSlab.
template <typename T>
struct RecordSlab {
  using M = Merged<T>;
  static_assert(sizeof(M) % sizeof(uint64_t) == 0, "records travel as 8-byte words");
  static constexpr size_t kWords = sizeof(M) / sizeof(uint64_t);
  std::vector<M> records;
};

// Appends the slab's words to *words.
template <typename T>
void Pack(const RecordSlab<T>& m, std::vector<uint64_t>* words) {
  const size_t at = words->size();
  words->resize(at + m.records.size() * RecordSlab<T>::kWords);
  if (!m.records.empty()) {
    std::memcpy(words->data() + at, m.records.data(), m.records.size() * sizeof(Merged<T>));
  }
}

template <typename T>
Status Unpack(std::span<const uint64_t> words, RecordSlab<T>* m) {
  constexpr size_t kWords = RecordSlab<T>::kWords;
  if (words.size() % kWords != 0) {
    return Internal(std::string("record slab of ") + RecordKindName(RecordTraits<T>::kKind) + ": " +
                    std::to_string(words.size()) + " words, not a multiple of " +
                    std::to_string(kWords) + " per record");
  }
  m->records.resize(words.size() / kWords);
  if (!words.empty()) std::memcpy(m->records.data(), words.data(), words.size_bytes());
  return Status::Ok();
}

// ---- 5. ProcessOutcome: what a process did, for process 0 ---------------------------

// One rank merged by the process (its rank results, as process 0 reports them).
struct RankResult {
  uint32_t rank = 0;
  uint64_t records = 0;
  uint64_t first_ns = UINT64_MAX;  // UINT64_MAX: no timed record
  uint64_t last_ns = 0;
  uint64_t bad_string_ids = 0;
  // Per kind: records in its file the merge could not read (a damaged table).
  std::array<uint64_t, kRecordKindCount> damaged{};
  RankStatus status = RankStatus::kOk;  // damaged or corrupt when a read failed mid-merge
  std::string message;
  // The NCCL calibration and notes as resolved by the merge (nccl_resolve.h).
  int64_t nccl_gpu_clock_offset_ns = 0;
  int64_t nccl_gpu_clock_pairs = 0;
  int64_t nccl_gpu_clock_spread_ns = -1;
  std::vector<std::string> notes;
  std::vector<std::string> problems;  // found while merging this rank
  std::vector<DeviceInfo> devices;    // string ids already in the unified table
};
struct ProcessOutcome {
  StatusMessage status;
  std::array<uint64_t, kRecordKindCount> written{};  // rows appended, per kind
  std::vector<RankResult> ranks;                     // in rank order
};
std::string Pack(const ProcessOutcome& m);
Status Unpack(std::string_view bytes, ProcessOutcome* m);

}  // namespace aon::merge
