// AON's NVTX injection (nvtx_injection.cc says how and why): the agent's side
// of InitializeInjectionNvtx2, which entry_points.cc exports.
#pragma once

#include <cstdint>

#include "source_context.h"

namespace aon::agent {

// NVTX's getter for its function tables (NvtxGetExportTableFunc_t).
using NvtxExportTableGetter = const void* (*)(uint32_t export_table_id);

// Fills this module's CORE and CORE2 slots so its ranges and marks reach
// `context`'s sink (and its step ranges the capture control). Called once per
// module; 1 when installed, 0 when NVTX is not wanted or the tables are unusable.
int InstallNvtxInjection(const SourceContext& context, NvtxExportTableGetter get_export_table);

}  // namespace aon::agent
