// Phase 4, records: every kind merged by a sample sort on start time, in
// bounded memory (sample_sort.h has the arithmetic).
//
// Per kind: a first pass reads each rank's table in blocks (strings remapped,
// clock corrected, NCCL records resolved with the kernels and API calls they
// refer to, gathered as those kinds were read), notes each block's time range and
// samples start times (StartSamples, messages.h); the samples cut the time axis
// into slabs, process p owning slabs [p * R, (p + 1) * R); in round j every
// process sends each record of slab p * R + j to p (RecordSlab, kept from the
// first pass when everything fits the memory budget, otherwise re-read from the
// blocks that overlap), and p appends it to its output in (start, rank, order
// in the rank's file) order: each rank's records are kept sorted by start, so a
// slab is one range of each rank's, and p merges those runs (k-way).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aon/base/linear_clock.h"
#include "aon/merge/merge_types.h"
#include "aon/merge/merge_comm.h"
#include "aon/merge/nccl_resolve.h"
#include "aon/base/status.h"
#include "aon/format/trace_file.h"
#include "candidate.h"

namespace aon::merge {

// A rank merged by this process: its file, its reader while it is read, and
// how its ids and clock map onto the timeline.
struct RankInput {
  uint32_t rank = 0;
  Candidate* file = nullptr;
  RankOutcome* outcome = nullptr;
  // Open only while the rank is read: an open HDF5 file costs about 0.9 MB (its
  // metadata cache), which for 1,024 rank files held open would be the merge's
  // largest memory use. Reopening costs a fraction of a millisecond.
  std::unique_ptr<TraceReader> reader;
  std::vector<uint32_t> string_map;  // rank-local id -> unified id
  uint64_t bad_string_ids = 0;
  bool failed = false;  // its file could not be reopened: no further kinds from this rank
  // Per kind: a table that could not be read to its end (DamageTable), and
  // then how many of its records are not in the timeline.
  std::array<bool, kRecordKindCount> damaged_kind{};
  std::array<uint64_t, kRecordKindCount> damaged{};
  uint64_t first_ns = UINT64_MAX;
  uint64_t last_ns = 0;
  LinearClock clock;
  // Found while merging this rank; process 0 reports them in rank order.
  std::vector<std::string> problems;
  // When its NCCL records need resolving by correlation id only
  // (NcclReferencedRecords): the kernels and API calls they can refer to,
  // gathered in file order on the rank's own clock while those kinds are read.
  std::optional<NcclReferencedIds> nccl_ids;
  std::vector<KernelRecord> nccl_kernels;
  std::vector<ApiRecord> nccl_apis;
  bool nccl_kernels_gathered = false;
  bool nccl_apis_gathered = false;
};

struct RecordOptions {
  uint64_t budget_bytes = uint64_t{1} << 30;  // records in memory at once, per process
  size_t batch_records = 1 << 16;             // records per HDF5 append
  bool progress = false;                      // a progress bar (process 0, on a terminal)
  MergePhaseTimes* phases = nullptr;          // kRead .. kWrite are added to, when set
  // Threads: TraceReader::SetDecodeThreads of the rank files; above 1, also a
  // thread that merges while this one appends (records.cc, AppendMerged).
  unsigned threads = 1;
};

struct RecordsMerged {
  std::array<uint64_t, kRecordKindCount> written{};  // rows this process appended, per kind
  std::array<uint64_t, kRecordKindCount> rounds{};   // sort rounds per kind
  uint64_t read = 0;                                 // rows read in the first pass
  // The first append error. Rounds still go on after one (they are collective);
  // it travels in the outcomes (outcomes.h).
  Status local;
};

// Collective: every kind, into `out` (this process's shard, or the timeline
// itself with one process). Fills each input's counts, times and problems.
// Returns an error only for a garbled message, which every process sees alike.
StatusOr<RecordsMerged> MergeRecords(MergeComm& comm, std::vector<RankInput>& inputs,
                                     TraceWriter& out, const RecordOptions& options);

}  // namespace aon::merge
