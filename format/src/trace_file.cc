// The names of trace_file.h's enums. TraceWriter is in trace_writer.cc,
// TraceReader in trace_reader.cc.
#include "aon/format/trace_file.h"

#include <sys/stat.h>

namespace aon {

const char* FileKindName(FileKind kind) {
  return kind == FileKind::kRank ? "aon-rank-trace" : "aon-timeline";
}

const char* RankStatusName(RankStatus status) {
  switch (status) {
    case RankStatus::kOk:
      return "ok";
    case RankStatus::kMissing:
      return "missing";
    case RankStatus::kCorrupt:
      return "corrupt";
    case RankStatus::kTruncated:
      return "truncated";
    case RankStatus::kUnsupported:
      return "unsupported";
    case RankStatus::kDamaged:
      return "damaged";
  }
  return "unknown";
}

std::string TimelinePathOf(const std::string& job_dir_or_file) {
  struct stat st {};
  const bool dir = ::stat(job_dir_or_file.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  return dir ? job_dir_or_file + "/timeline.h5" : job_dir_or_file;
}

}  // namespace aon
