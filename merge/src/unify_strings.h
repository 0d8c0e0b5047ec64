// Phase 3, strings: one string table for the timeline, the same on every
// process. Each process sends the union of the string tables of the ranks it
// merges (StringUnion, messages.h); every process interns the unions in
// process order, then maps each of its ranks' ids into that table.
#pragma once

#include <cstdint>
#include <vector>

#include "aon/merge/merge_comm.h"
#include "aon/base/status.h"
#include "aon/format/string_table.h"

namespace aon::merge {

// Collective. `mine`: the tables of this process's merged ranks, in rank order.
StatusOr<StringTable> UnifyStrings(MergeComm& comm, const std::vector<const StringTable*>& mine);

// A rank's ids in the unified table: map[local id] = unified id.
std::vector<uint32_t> MapStrings(const StringTable& local, StringTable& unified);

}  // namespace aon::merge
