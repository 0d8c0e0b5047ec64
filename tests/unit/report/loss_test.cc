// What a job lost (records dropped: the agent's memory cap, or received by the
// collector and not written) is said in every rendering, per rank and kind
// against what was kept, and by every finding built on a kind with losses
// (report/src/analyses/loss.cc, #34 item 5).
#include <gtest/gtest.h>

#include <string>

#include "aon/report/report.h"
#include "timeline_builder.h"

namespace aon::report {
namespace {

using testing::kMs;
using testing::kUs;
using testing::TempDir;
using testing::TimelineBuilder;

// Two ranks, 50 steps of 10 ms each: a 4 ms kernel, then 6 ms of host work
// before the next launch (host-work on both). Rank 0 kept 50 kernels and lost
// 25 to its memory cap (a third); rank 1 lost 10 memcpy records, 4 of them
// received but not written, and no kernel.
TimelineBuilder LossyJob() {
  TimelineBuilder b;
  for (uint32_t r = 0; r < 2; ++r) {
    b.Rank(r);
    for (uint64_t s = 0; s < 50; ++s) {
      const uint64_t at = kMs + s * 10 * kMs;
      b.Step(r, s, at, at + 10 * kMs, kStepCaptured, StepSource::kPytorch);
      b.Kernel(r, "sgemm", at + 10 * kUs, at + 4 * kMs + 10 * kUs, 1, at);
    }
  }
  b.ranks[0].dropped = 25;
  b.ranks[1].dropped = 10;
  b.drops.push_back({0, static_cast<uint32_t>(RecordKind::kKernel), 25, 0, 0});
  b.drops.push_back({1, static_cast<uint32_t>(RecordKind::kMemcpy), 10, 4, 0});
  return b;
}

TEST(Loss, EachRankSaysWhatItLostOfWhichKindAndWhy) {
  TempDir dir;
  const Report r = Analyze(LossyJob().WriteAndLoad(dir.File("t.h5")));
  ASSERT_EQ(r.loss.ranks.size(), 2u);
  EXPECT_EQ(r.loss.dropped, 35u);
  const RankLoss& zero = r.loss.ranks[0];
  ASSERT_EQ(zero.kinds.size(), 1u);
  EXPECT_EQ(zero.kinds[0].kind, RecordKind::kKernel);
  EXPECT_EQ(zero.kinds[0].kept, 50u);
  EXPECT_EQ(zero.kinds[0].dropped, 25u);
  EXPECT_DOUBLE_EQ(zero.kinds[0].share(), 25.0 / 75.0);
  EXPECT_EQ(zero.kinds[0].why(), "memory cap");
  const RankLoss& one = r.loss.ranks[1];
  ASSERT_EQ(one.kinds.size(), 1u);
  EXPECT_EQ(one.kinds[0].kind, RecordKind::kMemcpy);
  EXPECT_EQ(one.kinds[0].kept, 0u);
  EXPECT_EQ(one.kinds[0].unwritten, 4u);
  EXPECT_EQ(one.kinds[0].why(), "memory cap, and not written: disk");
  const std::string& s = r.loss.statement;
  EXPECT_NE(s.find("rank 0 lost 33 % of its kernels (25; memory cap)"), std::string::npos) << s;
  EXPECT_NE(s.find("rank 1 lost 100 % of its memcpy (10; memory cap, and not written: disk)"),
            std::string::npos)
      << s;

  // The terminal says it right after the header, the HTML in a table, the JSON
  // per rank and kind.
  const std::string text = RenderTerminal(r);
  EXPECT_NE(text.find("*** Records were lost: rank 0 lost 33 %"), std::string::npos) << text;
  EXPECT_LT(text.find("Records were lost"), text.find("Findings")) << text;
  const std::string html = RenderHtml(r);
  EXPECT_NE(html.find("<div class=lost id=lost>"), std::string::npos);
  EXPECT_NE(html.find("<td class=l>kernels</td><td>50</td><td>25</td><td>33.3 %</td>"
                      "<td class=l>memory cap</td>"),
            std::string::npos);
  const std::string json = RenderJson(r);
  EXPECT_NE(json.find("\"lost\":{\"records\":35"), std::string::npos) << json.substr(0, 600);
  EXPECT_NE(json.find("{\"kind\":\"memcpy\",\"kept\":0,\"lost\":10,\"unwritten\":4"),
            std::string::npos);
}

// A finding built on a kind its rank lost records of says so; one whose kinds
// lost nothing does not.
TEST(Loss, FindingsBuiltOnIncompleteKindsSaySo) {
  TempDir dir;
  const Report r = Analyze(LossyJob().WriteAndLoad(dir.File("t.h5")));
  const Finding* host = nullptr;
  for (const Finding& f : r.findings)
    if (f.kind == "host-work") host = &f;
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(host->rank, 0);  // both ranks idle alike; the first is named
  EXPECT_NE(host->evidence.find("built on incomplete records: rank 0 lost 33 % of its kernels "
                                "(memory cap)"),
            std::string::npos)
      << host->evidence;
  EXPECT_DOUBLE_EQ(host->numbers.at("lost_share"), 25.0 / 75.0);

  TimelineBuilder whole = LossyJob();
  whole.drops.clear();
  whole.ranks[0].dropped = whole.ranks[1].dropped = 0;
  const Report w = Analyze(whole.WriteAndLoad(dir.File("w.h5")));
  EXPECT_TRUE(w.loss.ranks.empty());
  EXPECT_TRUE(w.loss.statement.empty());
  for (const Finding& f : w.findings) {
    EXPECT_EQ(f.evidence.find("incomplete"), std::string::npos) << f.evidence;
    EXPECT_EQ(f.numbers.count("lost_share"), 0u);
  }
  EXPECT_EQ(RenderTerminal(w).find("Records were lost"), std::string::npos);
}

// Records in a rank's file that the merge could not read (a damaged table,
// /meta/drops.damaged, 1.12) are lost as well, said as such, and the findings
// built on that kind say so.
TEST(Loss, RecordsDamagedInTheRankFileAreLostAndSaidSo) {
  TempDir dir;
  TimelineBuilder b = LossyJob();
  b.drops.clear();
  b.ranks[0].dropped = b.ranks[1].dropped = 0;
  b.drops.push_back({0, static_cast<uint32_t>(RecordKind::kKernel), 0, 0, 30});
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  ASSERT_EQ(r.loss.ranks.size(), 1u);
  EXPECT_EQ(r.loss.ranks[0].rank, 0u);
  const KindLoss& k = r.loss.ranks[0].kinds.at(0);
  EXPECT_EQ(k.kind, RecordKind::kKernel);
  EXPECT_EQ(k.kept, 50u);
  EXPECT_EQ(k.dropped, 30u);
  EXPECT_EQ(k.damaged, 30u);
  EXPECT_EQ(k.why(), "damaged in the rank file");
  EXPECT_NE(r.loss.statement.find("rank 0 lost 38 % of its kernels (30; damaged in the rank file)"),
            std::string::npos)
      << r.loss.statement;
  EXPECT_NE(RenderJson(r).find("\"lost\":30,\"unwritten\":0,\"damaged\":30"), std::string::npos);
  bool caveat = false;
  for (const Finding& f : r.findings)
    caveat |= f.evidence.find("rank 0 lost 38 % of its kernels (damaged in the rank file)") !=
              std::string::npos;
  EXPECT_TRUE(caveat) << "a finding built on kernels says they are incomplete";
}

// A timeline from before 1.11 has a rank's total only: said as such.
TEST(Loss, AnOlderTimelineSaysTheTotalOnly) {
  TempDir dir;
  TimelineBuilder b = LossyJob();
  b.drops.clear();
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  ASSERT_EQ(r.loss.ranks.size(), 2u);
  EXPECT_TRUE(r.loss.ranks[0].kinds.empty());
  EXPECT_NE(r.loss.statement.find(
                "rank 0 lost 25 records (the timeline does not say of which kinds)"),
            std::string::npos)
      << r.loss.statement;
}

// A rank whose node collector exited: the merge's note (what it joined) is
// said with the losses, also with no record dropped. The rank wrote its own
// records itself (what it lost would be counted dropped), so a finding on its
// trace is not caveated; only one built on GPU counters, which end with the
// collector, would be.
TEST(Loss, ARankWhoseCollectorExitedSaysWhatWasJoined) {
  TempDir dir;
  TimelineBuilder b = LossyJob();
  b.drops.clear();
  b.ranks[0].dropped = b.ranks[1].dropped = 0;
  b.ranks[0].flags = kRankCollectorLost;
  b.ranks[0].message_id =
      b.strings.Intern("the node collector exited while this rank ran: aon-merge joined two parts");
  const Report r = Analyze(b.WriteAndLoad(dir.File("t.h5")));
  ASSERT_EQ(r.loss.ranks.size(), 1u);
  EXPECT_EQ(r.loss.ranks[0].rank, 0u);
  EXPECT_EQ(r.loss.ranks[0].collector_lost,
            "the node collector exited while this rank ran: aon-merge joined two parts");
  EXPECT_NE(r.loss.statement.find("rank 0: the node collector exited"), std::string::npos)
      << r.loss.statement;
  EXPECT_TRUE(r.loss.statement.starts_with("No record was lost, but the node's GPU counters end "
                                           "where its collector exited: "))
      << r.loss.statement;
  EXPECT_NE(RenderJson(r).find("\"collector_lost\":\"the node collector exited"),
            std::string::npos);
  EXPECT_NE(RenderHtml(r).find("collector lost: the node collector exited"), std::string::npos);
  const Finding* host = nullptr;
  for (const Finding& f : r.findings)
    if (f.kind == "host-work") host = &f;
  ASSERT_NE(host, nullptr);
  ASSERT_EQ(host->rank, 0);
  EXPECT_EQ(host->evidence.find("incomplete records"), std::string::npos) << host->evidence;
  EXPECT_EQ(r.loss.CollectorLost(0),
            "rank 0's node collector exited while it ran: the node's GPU counters end there");
  EXPECT_EQ(r.loss.CollectorLost(-1), r.loss.CollectorLost(0));
  EXPECT_EQ(r.loss.CollectorLost(1), "");
}

}  // namespace
}  // namespace aon::report
