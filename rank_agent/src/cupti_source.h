// The real GPU activity source: CUPTI's activity API inside the rank process.
#pragma once

#include "source_context.h"

namespace aon::agent {

// Claims CUPTI's single subscriber slot, sets CLOCK_MONOTONIC as CUPTI's
// timestamp source and enables the configured activity kinds. On any failure
// (CUPTI missing, another profiler holds it, no driver) it records why, once,
// and returns false; the application runs on untouched.
bool StartCuptiSource(const SourceContext& context);

}  // namespace aon::agent
