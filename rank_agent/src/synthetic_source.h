#pragma once

namespace aon::agent {

// Turns on the synthetic device (AON_SOURCE=synthetic). See aon/synthetic_device.h.
bool StartSyntheticSource();

}  // namespace aon::agent
