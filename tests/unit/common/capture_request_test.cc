// The control files of on-demand capture (aon/ipc/capture_request.h): what aon-ctl
// writes is what the collectors read, malformed files are refused naming the
// file, and the first step chosen lies past every node's projected step.
#include "aon/ipc/capture_request.h"

#include <gtest/gtest.h>

namespace aon {
namespace {

TEST(CaptureRequest, RoundTrips) {
  CaptureRequest r;
  r.seq = 7;
  r.first_step = 123456;
  r.steps = 5;
  r.source = StepSource::kNvtx;
  auto back = ParseCaptureRequest(FormatCaptureRequest(r), "req");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->seq, 7u);
  EXPECT_EQ(back->first_step, 123456u);
  EXPECT_EQ(back->steps, 5u);
  EXPECT_EQ(back->source, StepSource::kNvtx);
  NodeSteps n{"node-1", 99, StepSource::kTime, 8000000, 1700000000000000000ull, 4};
  auto nb = ParseNodeSteps(FormatNodeSteps(n), "steps");
  ASSERT_TRUE(nb.ok()) << nb.status().ToString();
  EXPECT_EQ(nb->host, "node-1");
  EXPECT_EQ(nb->step, 99u);
  EXPECT_EQ(nb->source, StepSource::kTime);
  EXPECT_EQ(nb->step_ns, 8000000u);
  EXPECT_EQ(nb->at_realtime_ns, 1700000000000000000ull);
  EXPECT_EQ(nb->ranks, 4u);
  // Every step source survives by name, pytorch (1.8) included.
  for (const EnumValue& v : kStepSourceValues) {
    if (v.value == 0) continue;
    r.source = static_cast<StepSource>(v.value);
    auto again = ParseCaptureRequest(FormatCaptureRequest(r), "req");
    ASSERT_TRUE(again.ok()) << v.name << ": " << again.status().ToString();
    EXPECT_EQ(again->source, r.source) << v.name;
  }
}

// aon-ctl trigger's request and a collector's answer: round trips, a reason
// cut and cleaned of control characters (it ends up in notes and terminals),
// malformed files refused naming the file.
TEST(TriggerRequest, RoundTripsAndCleansTheReason) {
  TriggerRequest r;
  r.seq = 3;
  r.reason = "loss spike\nat step 9\x1b[2J";
  auto back = ParseTriggerRequest(FormatTriggerRequest(r), "req");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->seq, 3u);
  EXPECT_EQ(back->reason, "loss spike at step 9 [2J");
  r.reason = std::string(1000, 'x');
  back = ParseTriggerRequest(FormatTriggerRequest(r), "req");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->reason.size(), kMaxTriggerReason);
  TriggerAnswer a{"gpu-node/7", 3, true,
                  "flight recorder dump 1: 812 records of 4 rank(s) written"};
  auto ab = ParseTriggerAnswer(FormatTriggerAnswer(a), "answer");
  ASSERT_TRUE(ab.ok()) << ab.status().ToString();
  EXPECT_EQ(ab->host, "gpu-node/7");
  EXPECT_EQ(ab->seq, 3u);
  EXPECT_TRUE(ab->dumped);
  EXPECT_EQ(ab->what, a.what);
  EXPECT_EQ(HostFilePart("gpu-node/7"), "gpu-node_7");
  EXPECT_EQ(HostFilePart(""), "node");
  for (const char* bad : {"", "aon-trigger-request v1\nseq x\n", "aon-capture-request v1\nseq 1\n",
                          "aon-trigger-request v1\nreason no seq\n"}) {
    auto p = ParseTriggerRequest(bad, "/job/aon-trigger-request");
    EXPECT_FALSE(p.ok()) << bad;
    if (!p.ok()) {
      EXPECT_NE(p.status().message().find("/job/aon-trigger-request"), std::string::npos);
    }
  }
  EXPECT_FALSE(ParseTriggerAnswer("aon-trigger-answer v1\nseq 1\n", "a").ok());  // no dumped
}

TEST(CaptureRequest, MalformedFilesAreRefusedNamingTheFile) {
  const char* bad[] = {
      "",
      "something else\nseq 1\n",
      "aon-capture-request v1\nseq 1\nfirst_step 5\nsource nvtx\n",               // no steps
      "aon-capture-request v1\nseq x\nfirst_step 5\nsteps 3\nsource nvtx\n",      // not a count
      "aon-capture-request v1\nseq 1\nfirst_step -5\nsteps 3\nsource nvtx\n",     // negative
      "aon-capture-request v1\nseq 1\nfirst_step 5\nsteps 0\nsource nvtx\n",      // no steps
      "aon-capture-request v1\nseq 1\nfirst_step 5\nsteps 99999\nsource nvtx\n",  // too many
      "aon-capture-request v1\nseq 1\nfirst_step 5\nsteps 3\nsource sundial\n",   // no source
      "aon-capture-request v1\nseq 1\nfirst_step 5\nsteps 3\ngarbage\n",
  };
  for (const char* text : bad) {
    auto r = ParseCaptureRequest(text, "/job/aon-capture-request");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find("/job/aon-capture-request"), std::string::npos)
        << r.status().ToString();
  }
}

TEST(CaptureRequest, FirstStepLiesPastEveryNodesProjectedStep) {
  const uint64_t now = 1000 * 1000000000ull;
  // Node a: step 100 began 1 s ago, 10 ms steps -> at now + 2 s it is at 400.
  // Node b: step 390 began just now, 20 ms steps -> at now + 2 s it is at 490.
  std::vector<NodeSteps> nodes = {
      {"a", 100, StepSource::kNvtx, 10000000, now - 1000000000ull, 2},
      {"b", 390, StepSource::kNvtx, 20000000, now, 2},
  };
  EXPECT_EQ(ChooseFirstStep(nodes, now, 2000000000ull), 491u);
  // Unknown step length: only past the published step.
  nodes = {{"c", 50, StepSource::kNvtx, 0, now, 1}};
  EXPECT_EQ(ChooseFirstStep(nodes, now, 2000000000ull), 51u);
  EXPECT_EQ(ChooseFirstStep({}, now, 0), 0u);
}

}  // namespace
}  // namespace aon
