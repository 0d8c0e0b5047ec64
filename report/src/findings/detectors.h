// The detectors of the default finding rules (rule_table.cc), one file per kind
// of finding. Each is a FindingRule::detect: a predicate and a producer in one.
#pragma once

#include <optional>
#include <string>

#include "aon/report/finding_rules.h"

namespace aon::report {

std::optional<Detection> DetectStraggler(const RuleInput& in, Claims* claims);  // straggler.cc
std::optional<Detection> DetectExposedCommunication(const RuleInput& in,
                                                    Claims* claims);  // exposed_communication.cc
// idle_causes.cc: one per gap cause.
std::optional<Detection> DetectHostSync(const RuleInput& in, Claims* claims);
std::optional<Detection> DetectLaunchBound(const RuleInput& in, Claims* claims);
std::optional<Detection> DetectPageableCopies(const RuleInput& in, Claims* claims);
std::optional<Detection> DetectLoadImbalance(const RuleInput& in,
                                             Claims* claims);  // load_imbalance.cc
std::optional<Detection> DetectPhaseBottleneck(const RuleInput& in,
                                               Claims* claims);  // phase_bottleneck.cc

// "40 %" (engine.cc).
std::string Percent(double fraction);

}  // namespace aon::report
