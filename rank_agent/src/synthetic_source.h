#pragma once

#include "source_context.h"

namespace aon::agent {

// Turns on the synthetic device (AON_SOURCE=synthetic). See aon/synthetic_device.h.
bool StartSyntheticSource(const SourceContext& context);

}  // namespace aon::agent
