// RankMetadata as text, for the agent -> collector socket (hello and finish
// messages). One "key=value" per line; '\\' and newlines in values are escaped
// ("\\\\", "\\n"); devices are
// "device=id,uuid_id,name_id,sm_count,memory,major,minor,pcie_gen,pcie_width"
// (an agent of format 1.9 or older: the first seven).
// Decoding is strict about syntax (a malformed number names its key) and
// ignores unknown keys, so a newer agent can talk to an older collector.
#pragma once

#include <string>
#include <string_view>

#include "aon/base/status.h"
#include "aon/format/trace_format.h"

namespace aon {

std::string EncodeRankMetadata(const RankMetadata& m);
StatusOr<RankMetadata> DecodeRankMetadata(std::string_view text);

}  // namespace aon
