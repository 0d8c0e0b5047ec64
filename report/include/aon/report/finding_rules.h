// Findings as rules: what aon-report tells the user to fix, one rule per kind of
// finding, one file per rule (report/src/findings/rules/; DefaultFindingRules()).
//
// A rule has an id (Finding::kind), a precedence, a detector (predicate and
// producer in one: it decides whether the rule fires and computes the numbers),
// and the texts as templates: `action` (what to do, Finding::action) and
// `evidence` (why, Finding::evidence).
//
// Precedence (a unique integer, smaller = higher) decides two things, and
// nothing else does (not the rules' order in the table, not the order of code):
//   1. Evaluation order. Rules run from the smallest precedence up, and a rule
//      sees the Claims of every rule that ran before it. The straggler rule
//      claims its rank's "host launched late" gaps and its gaps inside its slow
//      range: they are its lateness seen from its own side, so the idle rules
//      (run after it) do not report them again.
//   2. Ties. Findings are ranked by estimated gain, largest first (a finding
//      that states no gain by its Detection::rank_ns); equal ones by
//      precedence. Equal precedences (a table should have none) by id.
//
// Templates: "{name}" is replaced by the detector's value for name; "[...]" is
// an optional part, kept only when every placeholder inside it has a value (a
// value may be empty: "[{flag} text]" keeps " text" when flag is set). Optional
// parts do not nest; '{', '}', '[' and ']' are not literal text in a template.
// A placeholder outside optional parts without a value stays as "{name}" so
// that tests see it.
//
// The default rules (src/findings/rules/, one file each; DefaultFindingRules()). Gains
// are wall-time estimates over the whole run, deliberately simple; each rule's file
// says how it computes its gain:
//   compilation      the rank's compile wall time (union over threads):
//                    start-up or recompilation time (compilation.cc);
//   straggler        sum over the collectives where the rank arrived last of
//                    (its arrival - the second-last arrival): the step would end
//                    that much earlier if it kept pace (straggler.cc);
//   exposed comm     communication not overlapped by compute, minus the time the
//                    rank only waited for late ranks (exposed_communication.cc);
//   idle causes      (idle-host-sync, host-work, launch-bound, pageable-copies) the GPU gaps
//                    of that cause on the worst rank, median per step x steps so
//                    warm-up steps don't dominate; pageable copies add what
//                    pinning saves of their time, at the rate the run's own
//                    large pinned copies reached (else half) (idle_causes.cc);
//   imbalance        the slowest rank's compute minus the mean (load_imbalance.cc);
//   phase bottleneck none stated (0): GPU counters say why a phase is slow, not
//                    how much faster it could run; ranked as if a tenth of the
//                    phase were at stake (phase_bottleneck.cc).
//
// Why this precedence: compilation first: it is no phase of the program, and
// the gaps it leaves are not the idle rules'. The straggler comes next because it explains time the
// other rules would otherwise count again (the others' waiting is exposed
// communication on their side; its own late launches are idle time on its side);
// then what every rank pays (exposed communication), then the idle causes from
// the most direct fix (remove a sync; move host work off the step's critical
// path) to the broadest (feed the GPU faster, pinned memory), then imbalance, since the rules above
// often explain it; the phase bottleneck last: it says why, where the others say where time is
// lost.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aon/report/report.h"

namespace aon::report {

// FindingRule::uses of these kinds.
constexpr uint32_t Uses(std::initializer_list<RecordKind> kinds) {
  uint32_t bits = 0;
  for (RecordKind k : kinds) bits |= 1u << static_cast<uint32_t>(k);
  return bits;
}

// What rules of higher precedence have claimed, for the rules after them.
struct Claims {
  int straggler_rank = -1;      // the straggler finding's rank
  std::string straggler_range;  // its slow NVTX range ("" = none named)
};

// What a detector sees.
struct RuleInput {
  const Report& report;
  double min_gain_ns = 0;  // 0.2 % of the mean GPU span: smaller gains are not findings
  double steps = 0;        // typical number of steps (0 = none found)
  const Claims& claims;    // made by the rules that ran before

  // ns / steps (0 without steps).
  double PerStep(double ns) const { return steps > 0 ? ns / steps : 0.0; }
  // "3.2 ms per step", or "41 ms in total" without steps.
  std::string PerStepText(double ns) const;
};

// What a detector found: the numbers of one finding and its templates' values.
struct Detection {
  int rank = -1;       // the rank to act on, -1 = all
  double gain_ns = 0;  // estimated wall time to gain over the run
  // What the finding is ranked by when it states no gain (0: its gain): a weight
  // for the order, never shown as a figure.
  double rank_ns = 0;
  std::map<std::string, std::string> values;  // for the templates' {placeholders}
  std::map<std::string, double> numbers;      // Finding::numbers (--json)
};

struct FindingRule {
  std::string_view id;        // Finding::kind
  int precedence = 0;         // unique in a table; smaller runs first and wins ties
  // The record kinds the rule's figures rest on: a finding whose rank (every
  // rank, for -1) lost records of one of them says so in its evidence, with the
  // share lost (LossSummary). Bits 1 << RecordKind.
  uint32_t uses = 0;
  // Whether its figures compare ranks (a straggler against the others): then
  // any rank's losses make it incomplete, not only those of the rank it names.
  bool across_ranks = false;
  std::string_view detects;   // one line: what fires the rule (docs, tests)
  std::string_view action;    // template of Finding::action
  std::string_view evidence;  // template of Finding::evidence
  // Whether the gain is a per-step cost (Finding::gain_per_step_ns = gain / steps);
  // false for one-off time (a start-up compilation), whose per-step share would
  // read as a cost every step pays.
  bool per_step = true;
  // Returns nothing when the rule does not fire; may add to `claims` when it does.
  std::optional<Detection> (*detect)(const RuleInput& in, Claims* claims) = nullptr;
};

// The rules aon-report applies (straggler, exposed-communication,
// idle-host-sync, launch-bound, pageable-copies, load-imbalance, phase-bottleneck).
std::span<const FindingRule> DefaultFindingRules();

// Runs `rules` on the analyses in `r` (precedence order) and ranks the findings.
std::vector<Finding> ApplyFindingRules(const Report& r, std::span<const FindingRule> rules);

// Fills a template (syntax above).
std::string ExpandTemplate(std::string_view text, const std::map<std::string, std::string>& values);


}  // namespace aon::report
