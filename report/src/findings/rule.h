// What a finding rule's file needs (report/README.md, "Findings"). Each file in
// src/findings/rules/ is one rule: its detector and, in AON_FINDING_RULE(<file stem>),
// its FindingRule (id, precedence, texts). The build lists every file there
// (report/CMakeLists.txt generates the list DefaultFindingRules() returns), so adding a
// rule edits no central table; the precedence is the rule's own and
// tests/unit/report/finding_rules_test.cc pins the order.
#pragma once

#include <optional>
#include <string>

#include "aon/report/finding_rules.h"

// Defines the function that returns the rule of rules/<stem>.cc.
#define AON_FINDING_RULE(stem) const ::aon::report::FindingRule& FindingRule_##stem()

namespace aon::report {

// "40 %" (engine.cc).
std::string Percent(double fraction);

}  // namespace aon::report
