// The detector the idle-cause rules share (idle_causes.cc): the GPU gaps of one cause on
// the rank where they cost the most, in steady state.
#pragma once

#include <optional>

#include "aon/report/finding_rules.h"

namespace aon::report {

std::optional<Detection> DetectIdleCause(const RuleInput& in, GapCause cause);

}  // namespace aon::report
