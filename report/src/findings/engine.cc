// ApplyFindingRules: runs a rule table in precedence order and ranks what fires
// (the contract is in aon/report/finding_rules.h).
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "aon/report/finding_rules.h"
#include "findings/rule.h"

namespace aon::report {

std::string Percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f %%", fraction * 100);
  return buf;
}

std::string RuleInput::PerStepText(double ns) const {
  return steps > 0 ? FormatDuration(ns / steps) + " per step" : FormatDuration(ns) + " in total";
}

std::string ExpandTemplate(std::string_view text,
                           const std::map<std::string, std::string>& values) {
  std::string out;
  std::string part;      // the optional part being built
  bool in_part = false;  // inside "[...]"
  bool part_complete = true;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    std::string& dest = in_part ? part : out;
    if (c == '[' && !in_part) {
      in_part = true;
      part.clear();
      part_complete = true;
    } else if (c == ']' && in_part) {
      in_part = false;
      if (part_complete) out += part;
    } else if (c == '{') {
      const size_t close = text.find('}', i);
      if (close == std::string_view::npos) {
        dest.append(text.substr(i));
        break;
      }
      const std::string name(text.substr(i + 1, close - i - 1));
      auto it = values.find(name);
      if (it != values.end()) {
        dest += it->second;
      } else if (in_part) {
        part_complete = false;
      } else {
        dest += "{" + name + "}";
      }
      i = close;
    } else {
      dest += c;
    }
  }
  if (in_part && part_complete) out += part;  // an unclosed part: keep it, tests see it
  return out;
}

std::vector<Finding> ApplyFindingRules(const Report& r, std::span<const FindingRule> rules) {
  // Precedence order, whatever the table's order.
  std::vector<size_t> order(rules.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto higher = [&](size_t a, size_t b) {
    return rules[a].precedence != rules[b].precedence ? rules[a].precedence < rules[b].precedence
                                                      : rules[a].id < rules[b].id;
  };
  std::sort(order.begin(), order.end(), higher);

  double mean_span = 0;
  int gpu_ranks = 0;
  for (const RankBreakdown& b : r.breakdown) {
    if (b.has_gpu) mean_span += static_cast<double>(b.span_ns), ++gpu_ranks;
  }
  if (gpu_ranks) mean_span /= gpu_ranks;
  Claims claims;
  const RuleInput in{r, mean_span * 0.002, static_cast<double>(r.steps.typical_count), claims};

  struct Fired {
    size_t rule;
    Finding finding;
    double rank_ns;  // Detection::rank_ns, else the gain
  };
  std::vector<Fired> fired;
  for (size_t i : order) {
    const FindingRule& rule = rules[i];
    if (rule.detect == nullptr) continue;
    std::optional<Detection> d = rule.detect(in, &claims);
    if (!d) continue;
    Finding f;
    f.kind = std::string(rule.id);
    f.rank = d->rank;
    f.gain_ns = static_cast<uint64_t>(d->gain_ns);
    f.gain_per_step_ns = rule.per_step ? in.PerStep(d->gain_ns) : 0.0;
    f.action = ExpandTemplate(rule.action, d->values);
    f.evidence = ExpandTemplate(rule.evidence, d->values);
    f.numbers = std::move(d->numbers);
    // Built on records its rank (any rank, for a comparison) lost some of:
    // says which, and how many. A rank whose collector died wrote its own
    // records itself (those it could not keep are counted dropped), but the
    // node's GPU counters, which only the collector reads, end there.
    const int whose = rule.across_ranks ? -1 : f.rank;
    double lost = 0;
    std::string said = (rule.uses & (1u << static_cast<size_t>(RecordKind::kCounters))) != 0
                           ? r.loss.CollectorLost(whose)
                           : "";
    for (size_t k = 0; k < kRecordKindCount; ++k) {
      if (!(rule.uses & (1u << k))) continue;
      f.built_on.emplace_back(RecordKindName(static_cast<RecordKind>(k)));
      auto [share, text] = r.loss.Of(whose, static_cast<RecordKind>(k));
      if (text.empty() || said.find(text) != std::string::npos) continue;
      lost = std::max(lost, share);
      said += (said.empty() ? "" : ", ") + text;
    }
    if (!said.empty()) {
      f.evidence += "; built on incomplete records: " + said;
      f.numbers["lost_share"] = lost;
    }
    const double rank_ns = d->rank_ns > 0 ? d->rank_ns : d->gain_ns;
    fired.push_back({i, std::move(f), rank_ns});
  }
  std::sort(fired.begin(), fired.end(), [&](const Fired& a, const Fired& b) {
    return a.rank_ns != b.rank_ns ? a.rank_ns > b.rank_ns : higher(a.rule, b.rule);
  });
  std::vector<Finding> out;
  out.reserve(fired.size());
  for (Fired& f : fired) out.push_back(std::move(f.finding));
  return out;
}

std::vector<Finding> RankFindings(const Report& r) {
  return ApplyFindingRules(r, DefaultFindingRules());
}

}  // namespace aon::report
