// Findings as rules (aon/report/finding_rules.h): the default table's precedence
// is pinned, and the order of findings and of claims comes from the precedence
// in the table, not from where a rule sits in the table or in the code.
#include "aon/report/finding_rules.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "aon/report/report.h"
#include "timeline_builder.h"

namespace aon::report {
namespace {

using testing::kMs;
using testing::TempDir;
using testing::TimelineBuilder;

std::vector<std::string> Kinds(const std::vector<Finding>& findings) {
  std::vector<std::string> kinds;
  for (const Finding& f : findings) kinds.push_back(f.kind);
  return kinds;
}

const Finding* FindKind(const std::vector<Finding>& findings, const std::string& kind) {
  for (const Finding& f : findings) {
    if (f.kind == kind) return &f;
  }
  return nullptr;
}

TEST(FindingRules, DefaultPrecedenceIsPinned) {
  std::vector<FindingRule> rules(DefaultFindingRules().begin(), DefaultFindingRules().end());
  std::set<int> precedences;
  for (const FindingRule& r : rules) {
    EXPECT_TRUE(precedences.insert(r.precedence).second) << "duplicate precedence " << r.id;
    EXPECT_NE(r.detect, nullptr) << r.id;
    EXPECT_FALSE(r.action.empty()) << r.id;
    EXPECT_FALSE(r.evidence.empty()) << r.id;
    EXPECT_FALSE(r.detects.empty()) << r.id;
  }
  std::sort(rules.begin(), rules.end(),
            [](const FindingRule& a, const FindingRule& b) { return a.precedence < b.precedence; });
  std::vector<std::string> ids;
  for (const FindingRule& r : rules) ids.emplace_back(r.id);
  // Changing this order changes which finding wins a tie and what the straggler
  // claims before the idle rules count: say why in aon/report/finding_rules.h.
  EXPECT_EQ(ids,
            (std::vector<std::string>{"compilation", "straggler", "exposed-communication",
                                      "idle-host-sync", "host-work", "launch-bound",
                                      "pageable-copies", "load-imbalance", "phase-bottleneck"}));
}

// Every file of report/src/findings/rules/ is the rule of its name (launch_bound.cc is
// launch-bound), and the default rules are those files: the list is generated from the
// folder, so a rule cannot be written and left out, or listed without its file.
TEST(FindingRules, EachRuleFileIsTheRuleOfItsName) {
  std::set<std::string> from_files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(AON_SOURCE_DIR) +
                                                           "/report/src/findings/rules")) {
    if (e.path().extension() != ".cc") continue;
    std::string id = e.path().stem().string();
    std::replace(id.begin(), id.end(), '_', '-');
    from_files.insert(id);
  }
  std::set<std::string> from_rules;
  for (const FindingRule& r : DefaultFindingRules()) from_rules.emplace(r.id);
  EXPECT_EQ(from_rules, from_files);
  EXPECT_EQ(from_rules.size(), DefaultFindingRules().size()) << "two rules share an id";
}

// Rules with fixed answers, to see the engine alone.
std::optional<Detection> Gain100(const RuleInput&, Claims*) {
  Detection d;
  d.gain_ns = 100;
  return d;
}
std::optional<Detection> Gain200(const RuleInput&, Claims*) {
  Detection d;
  d.gain_ns = 200;
  return d;
}
std::optional<Detection> Never(const RuleInput&, Claims*) { return std::nullopt; }

FindingRule Rule(const char* id, int precedence, decltype(FindingRule::detect) detect) {
  return FindingRule{id, precedence, 0, false, "test", "act", "because", true, detect};
}

TEST(FindingRules, LargerGainFirstThenPrecedenceWhateverTheTableOrder) {
  const Report empty;
  std::vector<FindingRule> rules = {Rule("a", 2, Gain100), Rule("b", 1, Gain100),
                                    Rule("c", 3, Gain200), Rule("d", 0, Never)};
  const std::vector<std::string> expected = {"c", "b", "a"};
  EXPECT_EQ(Kinds(ApplyFindingRules(empty, rules)), expected);
  // The same rules in every other table order: the same findings in the same order.
  std::sort(rules.begin(), rules.end(),
            [](const FindingRule& x, const FindingRule& y) { return x.id < y.id; });
  do {
    EXPECT_EQ(Kinds(ApplyFindingRules(empty, rules)), expected);
  } while (std::next_permutation(
      rules.begin(), rules.end(),
      [](const FindingRule& x, const FindingRule& y) { return x.id < y.id; }));
  // Swapping two precedences swaps the tie, and only the tie.
  for (FindingRule& r : rules) {
    if (r.id == "a") r.precedence = 1;
    if (r.id == "b") r.precedence = 2;
  }
  EXPECT_EQ(Kinds(ApplyFindingRules(empty, rules)), (std::vector<std::string>{"c", "a", "b"}));
  // Equal precedences (a table should have none) fall back to the id, not the position.
  for (FindingRule& r : rules) r.precedence = 5;
  EXPECT_EQ(Kinds(ApplyFindingRules(empty, rules)), (std::vector<std::string>{"c", "a", "b"}));
  std::reverse(rules.begin(), rules.end());
  EXPECT_EQ(Kinds(ApplyFindingRules(empty, rules)), (std::vector<std::string>{"c", "a", "b"}));
}

// A finding that states no gain (a phase verdict) is ranked by its rank_ns:
// above smaller gains, below larger ones, and its stated gain stays 0.
std::optional<Detection> NoGainRank150(const RuleInput&, Claims*) {
  Detection d;
  d.rank_ns = 150;
  return d;
}

TEST(FindingRules, AFindingWithoutAGainRanksByItsWeight) {
  const Report empty;
  const std::vector<FindingRule> rules = {Rule("a", 1, Gain100), Rule("v", 9, NoGainRank150),
                                          Rule("c", 3, Gain200)};
  const std::vector<Finding> f = ApplyFindingRules(empty, rules);
  EXPECT_EQ(Kinds(f), (std::vector<std::string>{"c", "v", "a"}));
  EXPECT_EQ(f[1].gain_ns, 0u);
}

std::optional<Detection> ClaimRank7(const RuleInput&, Claims* claims) {
  claims->straggler_rank = 7;
  Detection d;
  d.gain_ns = 1;
  return d;
}
std::optional<Detection> ReportClaimedRank(const RuleInput& in, Claims*) {
  Detection d;
  d.gain_ns = 1;
  d.rank = in.claims.straggler_rank;
  return d;
}

TEST(FindingRules, ARuleSeesTheClaimsOfHigherPrecedenceOnly) {
  const Report empty;
  // Reader listed first, but the claimer has the higher precedence: it runs first.
  std::vector<FindingRule> rules = {Rule("reader", 2, ReportClaimedRank),
                                    Rule("claimer", 1, ClaimRank7)};
  std::vector<Finding> f = ApplyFindingRules(empty, rules);
  ASSERT_NE(FindKind(f, "reader"), nullptr);
  EXPECT_EQ(FindKind(f, "reader")->rank, 7);
  EXPECT_EQ(Kinds(f), (std::vector<std::string>{"claimer", "reader"}));  // equal gains
  // Claimer listed first but with the lower precedence: the reader runs before it.
  rules = {Rule("claimer", 3, ClaimRank7), Rule("reader", 2, ReportClaimedRank)};
  f = ApplyFindingRules(empty, rules);
  ASSERT_NE(FindKind(f, "reader"), nullptr);
  EXPECT_EQ(FindKind(f, "reader")->rank, -1);
  EXPECT_EQ(Kinds(f), (std::vector<std::string>{"reader", "claimer"}));
}

// The default rules on a planted straggler: it claims its own late launches
// because its precedence is above the idle rules'; give those the higher
// precedence and the same time is reported a second time. The planted rank
// computes 5 ms without a CUDA call before its gemm: host work (host-work), not
// launch overhead.
TEST(FindingRules, TheStragglerClaimsItsLateLaunchesBecauseOfItsPrecedence) {
  TempDir dir;
  TimelineBuilder b;
  testing::PlantStraggler(&b, /*late=*/2, /*steps=*/10, /*nccl_records=*/true);
  const Report r = Analyze(b.WriteAndLoad(dir.File("timeline.h5")));
  std::vector<FindingRule> rules(DefaultFindingRules().begin(), DefaultFindingRules().end());

  const std::vector<Finding> by_default = ApplyFindingRules(r, rules);
  EXPECT_EQ(Kinds(by_default), Kinds(r.findings));
  ASSERT_NE(FindKind(by_default, "straggler"), nullptr);
  EXPECT_EQ(FindKind(by_default, "straggler")->rank, 2);
  for (const char* idle : {"host-work", "launch-bound"}) {
    if (const Finding* f = FindKind(by_default, idle); f != nullptr) {
      EXPECT_NE(f->rank, 2) << idle;
    }
  }

  std::reverse(rules.begin(), rules.end());  // table order alone changes nothing
  EXPECT_EQ(Kinds(ApplyFindingRules(r, rules)), Kinds(by_default));

  for (FindingRule& rule : rules) {
    if (rule.id == "straggler") rule.precedence = 45;  // after host-work (35), launch-bound (40)
  }
  const std::vector<Finding> late_straggler = ApplyFindingRules(r, rules);
  const Finding* work = FindKind(late_straggler, "host-work");
  ASSERT_NE(work, nullptr);
  EXPECT_EQ(work->rank, 2);
  // Its GPU waits from 0.2 ms before each step to its gemm 5.1 ms into the step; the
  // part inside the step counts (steady state: median per step x 10 steps).
  EXPECT_EQ(work->gain_ns, 10 * 5100 * testing::kUs);
}

TEST(FindingRules, DefaultTemplatesAreFilled) {
  TempDir dir;
  TimelineBuilder b;
  testing::PlantStraggler(&b, 1, 6, false);
  const Report r = Analyze(b.WriteAndLoad(dir.File("timeline.h5")));
  ASSERT_FALSE(r.findings.empty());
  for (const Finding& f : r.findings) {
    for (const std::string* text : {&f.action, &f.evidence}) {
      EXPECT_EQ(text->find_first_of("{}[]"), std::string::npos) << f.kind << ": " << *text;
    }
  }
  const Finding* s = FindKind(r.findings, "straggler");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->action,
            "Make rank 1 keep pace: it arrives last at 100 % of 6 collectives, costing the other "
            "ranks 15.0 ms per step of waiting");
}

TEST(ExpandTemplate, PlaceholdersAndOptionalParts) {
  const std::map<std::string, std::string> v = {
      {"rank", "3"}, {"idle", "2 ms"}, {"flag", ""}, {"braces", "{rank} [x]"}};
  EXPECT_EQ(ExpandTemplate("rank {rank} idles {idle}", v), "rank 3 idles 2 ms");
  EXPECT_EQ(ExpandTemplate("a[, b {idle}][, c {missing}] d", v), "a, b 2 ms d");
  EXPECT_EQ(ExpandTemplate("x[{flag} (said)]", v), "x (said)");
  EXPECT_EQ(ExpandTemplate("x[{absent} (said)]", v), "x");
  EXPECT_EQ(ExpandTemplate("[one {rank}][two {missing}]", v), "one 3");
  // A required placeholder without a value stays visible.
  EXPECT_EQ(ExpandTemplate("rank {missing}", v), "rank {missing}");
  // Values are not templates.
  EXPECT_EQ(ExpandTemplate("name {braces}", v), "name {rank} [x]");
  EXPECT_EQ(ExpandTemplate("", v), "");
}

}  // namespace
}  // namespace aon::report
