// Small readers of a merged timeline's /meta attributes shared by the exports
// (chrome_trace.cc, overview.cc).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "aon/format/trace_file.h"

namespace aon::merge {

// The attribute's value, or "" when it is missing (older timelines).
inline std::string MetaStringOr(const TraceReader& r, std::string_view name) {
  auto v = r.GetMetaString(name);
  return v.ok() ? *v : std::string();
}

// Ranks whose activity is synthetic (the "synthetic_ranks" list: "0,3,5").
inline std::set<uint32_t> SyntheticRanks(const TraceReader& r) {
  std::set<uint32_t> ranks;
  const std::string list = MetaStringOr(r, "synthetic_ranks");
  size_t pos = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    ranks.insert(
        static_cast<uint32_t>(std::strtoul(list.substr(pos, comma - pos).c_str(), nullptr, 10)));
    pos = comma + 1;
  }
  return ranks;
}

}  // namespace aon::merge
