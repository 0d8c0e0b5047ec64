// Format 1.3's CUDA-graph bookkeeping, for tests that write or resolve old
// files: shared by nccl_resolve_test.cc and the fuzzers' seeds (tests/fuzz/).
#pragma once

#include "aon/format/records.h"

namespace aon::testing {

// A CUDA-graph row as a format 1.3 agent wrote it: an nccl row of event type 6
// (graph node: seq_number = node, count = original of a clone) or 7 (captured
// collective call), the layout records.h documented for 1.3.
inline NcclRecord LegacyGraphRow(const NcclGraphRecord& g) {
  NcclRecord r{};
  r.start_ns = r.end_ns = g.time_ns;
  r.external_id = g.external_id;
  r.comm_hash = g.comm_hash;
  r.comm_rank = g.comm_rank;
  r.comm_nranks = g.comm_nranks;
  r.comm_nnodes = g.comm_nnodes;
  r.channel_id = r.peer = -1;
  r.root = g.root;
  if (g.event == static_cast<uint8_t>(NcclGraphEvent::kCapturedColl)) {
    r.event_type = 7;
    r.func_id = g.func_id;
    r.count = g.count;
    r.bytes = g.bytes;
    r.datatype_id = g.datatype_id;
  } else {
    r.event_type = 6;
    r.seq_number = g.node_id;
    r.count = g.original_node_id;
  }
  return r;
}

}  // namespace aon::testing
