// Typed collectives over MergeComm: every message of messages.h goes through
// these, so that a message is packed and unpacked in one place only.
#pragma once

#include <string>
#include <vector>

#include "aon/merge/merge_comm.h"
#include "aon/base/status.h"
#include "messages.h"

namespace aon::merge {

// Every process's message, in process order (mine included). A message that
// does not unpack is an internal error naming its sender; every process
// receives the same bytes, so all of them fail together.
template <typename M>
StatusOr<std::vector<M>> AllgatherMessage(MergeComm& comm, const M& mine) {
  const std::vector<std::string> all = comm.Allgather(Pack(mine));
  std::vector<M> out(all.size());
  for (size_t q = 0; q < all.size(); ++q) {
    Status s = Unpack(all[q], &out[q]);
    if (!s.ok())
      return s.WithContext("merge process " + std::to_string(q) + " sent a garbled message");
  }
  return out;
}

// The first failure among the processes' statuses (process order), named by
// its process when it is not `me`'s; OK when all are.
Status FirstFailure(const std::vector<StatusMessage>& statuses, int me);

// Every process's status; the first failure wins, so that all processes stop
// together.
Status Agree(MergeComm& comm, const Status& mine);

}  // namespace aon::merge
