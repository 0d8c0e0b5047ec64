// THE NODE-COLLECTOR HOOK (issue #3). The node collector (one process per node per
// step: shared-memory rings, GPU metrics) does not exist yet. This is the only
// place the plugin starts and stops it; both do nothing today.
#include "state.h"

namespace aon::spank {

Status StartNodeCollector(spank_t, const std::string&) {
  // TODO(#3): fork the collector as the job's user (see MakePrivateDirectoriesAs for
  // the privilege drop), pass it the job directory, remember its pid.
  return Status::Ok();
}

void StopNodeCollector(spank_t) {
  // TODO(#3): signal the collector started above and wait for it to flush.
}

}  // namespace aon::spank
