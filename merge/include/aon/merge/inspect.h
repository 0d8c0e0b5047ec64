// What a rank trace file or a merged timeline holds, for aon-inspect and for
// scripts that check captures (GPU checks parse InspectionToJson's output; its
// fields are documented in merge/README.md and are kept stable).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "aon/format/records.h"
#include "aon/base/status.h"
#include "aon/format/trace_format.h"

namespace aon::merge {

using CountsByKind = std::array<uint64_t, kRecordKindCount>;
using MetaValue = std::variant<std::string, int64_t, uint64_t, double, bool>;

struct DeviceView {
  int64_t rank = -1;  // timelines: the rank that reported it; rank files: -1
  DeviceInfo info{};
  std::string uuid;
  std::string name;
};

struct RankView {
  RankSummary row{};
  std::string host;
  std::string message;
};

struct FileInspection {
  std::string path;
  FileKind kind = FileKind::kRank;
  int format_major = 0;
  int format_minor = 0;
  std::vector<std::pair<std::string, MetaValue>> metadata;  // in a fixed order
  std::vector<std::string> notes;                           // rank files
  std::vector<DeviceView> devices;
  CountsByKind counts{};
  CountsByKind dropped{};
  std::map<uint32_t, CountsByKind> per_rank;
  std::map<uint32_t, std::map<std::string, uint64_t>> kernel_names_per_rank;
  std::map<uint32_t, std::map<std::string, uint64_t>> nvtx_names_per_rank;
  std::vector<RankView> ranks;  // timelines only

  std::map<std::string, uint64_t> KernelNames() const;  // summed over ranks
  std::map<std::string, uint64_t> NvtxNames() const;
};

// Reads everything aon-inspect shows. Errors name the file.
StatusOr<FileInspection> InspectFile(const std::string& path);

std::string InspectionToJson(const FileInspection& inspection);
std::string InspectionToText(const FileInspection& inspection);

}  // namespace aon::merge
