#include "exchange.h"

namespace aon::merge {

Status FirstFailure(const std::vector<StatusMessage>& statuses, int me) {
  for (size_t q = 0; q < statuses.size(); ++q) {
    const StatusMessage& s = statuses[q];
    if (s.code == StatusCode::kOk) continue;
    if (static_cast<int>(q) != me) {
      return Status(s.code, "merge process " + std::to_string(q) + ": " + s.message);
    }
    return s.ToStatus();
  }
  return Status::Ok();
}

Status Agree(MergeComm& comm, const Status& mine) {
  auto all = AllgatherMessage(comm, StatusMessage::Of(mine));
  if (!all.ok()) return all.status();
  return FirstFailure(*all, comm.rank());
}

}  // namespace aon::merge
