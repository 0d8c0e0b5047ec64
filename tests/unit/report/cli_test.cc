// aon-report as a real subprocess, and its HTML rendered by headless Chromium.
// Its outputs go through the one private-file writer (a planted link is
// refused) and its terminal summary shows control characters escaped.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "aon/report/report.h"
#include "skip_or_fail.h"
#include "timeline_builder.h"

namespace aon::report {
namespace {

using testing::kMs;
using testing::TempDir;
using testing::TimelineBuilder;

const std::string kReport = std::string(AON_BUILD_BIN_DIR) + "/aon-report";
const char* kChromium = "/usr/bin/chromium";

struct Result {
  int code = -1;
  std::string output;
};

// Runs a shell command line; stdout and stderr together.
Result RunShell(const std::string& command) {
  Result r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

off_t SizeOf(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

void WriteStragglerJob(const std::string& dir, uint32_t late) {
  TimelineBuilder b;
  testing::PlantStraggler(&b, late, 8, true);
  b.Kernel(0, "void at::native::vectorized_elementwise_kernel<4, Add<float>&>(int)", 500 * kMs,
           501 * kMs);
  const Status s = b.Write(dir + "/timeline.h5");
  ASSERT_TRUE(s.ok()) << s.ToString();
}

TEST(Cli, JobDirectoryGivesSummaryHtmlAndJson) {
  TempDir dir;
  WriteStragglerJob(dir.path(), 2);
  const Result r = RunShell(kReport + " " + dir.path() + " --json " + dir.File("r.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Findings"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1. [gain ~40.0 ms, 5.0 ms/step] Make rank 2 keep pace"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(dir.File("report.html")), std::string::npos) << r.output;
  EXPECT_GT(SizeOf(dir.File("report.html")), 5000);
  // The JSON parses and names rank 2 first.
  const Result py = RunShell(
      "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); f=d[\"findings\"][0]; "
      "print(f[\"kind\"], f[\"rank\"], int(f[\"numbers\"][\"lost_ns\"]))' " +
      dir.File("r.json"));
  ASSERT_EQ(py.code, 0) << py.output;
  EXPECT_EQ(py.output, "straggler 2 120000000\n");
}

TEST(Cli, TimelineFileAndOutputOption) {
  TempDir dir;
  WriteStragglerJob(dir.path(), 1);
  const Result r =
      RunShell(kReport + " -q " + dir.File("timeline.h5") + " -o " + dir.File("custom.html"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, "");
  EXPECT_GT(SizeOf(dir.File("custom.html")), 5000);
  EXPECT_EQ(SizeOf(dir.File("report.html")), -1);
}

TEST(Cli, UnreadableInputExitsOneNamingIt) {
  TempDir dir;
  Result r = RunShell(kReport + " " + dir.path());  // no timeline.h5 in it
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find(dir.File("timeline.h5")), std::string::npos) << r.output;

  std::ofstream(dir.File("garbage.h5")) << "not hdf5";
  r = RunShell(kReport + " " + dir.File("garbage.h5"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("garbage.h5"), std::string::npos) << r.output;
}

TEST(Cli, PerRankTraceIsRefusedWithAHint) {
  TempDir dir;
  auto w = TraceWriter::Create(dir.File("rank-00000.h5"), FileKind::kRank);
  ASSERT_TRUE(w.ok());
  RankMetadata meta;
  meta.rank = 0;
  meta.world_size = 1;
  ASSERT_TRUE((*w)->WriteRankMetadata(meta).ok());
  ASSERT_TRUE((*w)->WriteStrings(StringTable()).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  const Result r = RunShell(kReport + " " + dir.File("rank-00000.h5"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("aon-merge"), std::string::npos) << r.output;
}

TEST(Cli, BadCommandLineExitsTwo) {
  EXPECT_EQ(RunShell(kReport).code, 2);
  EXPECT_EQ(RunShell(kReport + " --no-such-option x").code, 2);
  const Result help = RunShell(kReport + " --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.output.find("--json"), std::string::npos);
}

// Issue #18: report.html.partial planted as a link (in a directory another user
// can write) made aon-report overwrite the link's target and chmod it 0600.
TEST(Cli, APlantedPartialLinkIsRefusedAndItsTargetUntouched) {
  TempDir dir;
  WriteStragglerJob(dir.path(), 2);
  const std::string victim = dir.File("victim.conf");
  std::ofstream(victim) << "precious";
  ::chmod(victim.c_str(), 0644);
  ASSERT_EQ(::symlink(victim.c_str(), dir.File("report.html.partial").c_str()), 0);
  const Result r = RunShell(kReport + " -q " + dir.path());
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find(dir.File("report.html.partial")), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("symbolic link"), std::string::npos) << r.output;
  EXPECT_EQ(Slurp(victim), "precious");
  struct stat st {};
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(SizeOf(dir.File("report.html")), -1);
}

// Host names come from the trace: a terminal shows them, never obeys them.
TEST(Cli, ControlCharactersInTheTraceReachTheTerminalEscaped) {
  TempDir dir;
  TimelineBuilder b;
  testing::PlantStraggler(&b, 2, 8, true);
  const uint32_t evil = b.strings.Intern("n\x1b[2J\x07\xc2\x9b");
  for (auto& rank : b.ranks) rank.host_id = evil;
  ASSERT_TRUE(b.Write(dir.File("timeline.h5")).ok());
  const Result r = RunShell(kReport + " --no-html " + dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << "raw ESC reached the terminal";
  EXPECT_EQ(r.output.find('\x07'), std::string::npos) << "raw BEL reached the terminal";
  EXPECT_EQ(r.output.find("\xc2\x9b"), std::string::npos) << "raw CSI reached the terminal";
  EXPECT_NE(r.output.find("n\\x1b[2J\\x07\\u009b"), std::string::npos) << r.output;
}

TEST(Cli, AnEmptyOutputNameIsABadCommandLine) {
  TempDir dir;
  WriteStragglerJob(dir.path(), 1);
  EXPECT_EQ(RunShell(kReport + " -q " + dir.path() + " -o ''").code, 2);
  EXPECT_EQ(RunShell(kReport + " -q " + dir.path() + " --json ''").code, 2);
  EXPECT_EQ(SizeOf(dir.File("report.html")), -1);
}

TEST(Cli, EmptyTimelineStillWritesAReport) {
  TempDir dir;
  TimelineBuilder b;
  b.Rank(0);
  ASSERT_TRUE(b.Write(dir.File("timeline.h5")).ok());
  const Result r = RunShell(kReport + " " + dir.path());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("no GPU activity"), std::string::npos) << r.output;
  EXPECT_GT(SizeOf(dir.File("report.html")), 1000);
}

std::string ChromiumFlags(const std::string& profile) {
  return std::string(kChromium) +
         " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
         "--disable-background-networking"
         " --disable-component-update --disable-sync --user-data-dir=" +
         profile;
}

TEST(Html, RendersInHeadlessChromiumWithEverySection) {
  if (::access(kChromium, X_OK) != 0) {
    AON_SKIP_OR_FAIL(<< kChromium
                     << " is not installed (scripts/install-deps.sh --test installs it)");
  }
  TempDir dir;
  WriteStragglerJob(dir.path(), 2);
  ASSERT_EQ(RunShell(kReport + " -q " + dir.path()).code, 0);
  const std::string html = dir.File("report.html");
  const std::string png = dir.File("report.png");
  Result shot = RunShell("timeout 120 " + ChromiumFlags(dir.File("profile1")) +
                         " --screenshot=" + png + " --window-size=1400,3000 file://" + html);
  ASSERT_EQ(shot.code, 0) << shot.output;
  // A real rendering: a PNG, large enough to hold tables and plots (a blank page is ~10 KB).
  const std::string bytes = Slurp(png);
  ASSERT_GT(bytes.size(), 40000u) << shot.output;
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  if (const char* keep = getenv("AON_REPORT_SCREENSHOT")) {
    std::ofstream(keep, std::ios::binary) << bytes;
  }
  const Result dom =
      RunShell("timeout 120 " + ChromiumFlags(dir.File("profile2")) + " --dump-dom file://" + html);
  ASSERT_EQ(dom.code, 0) << dom.output.substr(0, 2000);
  for (const char* id : {"summary", "findings", "gpu-breakdown", "kernels", "communication",
                         "stragglers", "idle", "imbalance", "nvtx"}) {
    EXPECT_NE(dom.output.find("<section id=\"" + std::string(id) + "\">"), std::string::npos) << id;
  }
  for (const char* plot :
       {"plot-heat", "plot-steps", "plot-stragglers", "plot-kernels", "plot-bandwidth"}) {
    EXPECT_NE(dom.output.find("<svg class=\"plot\" id=\"" + std::string(plot) + "\""),
              std::string::npos)
        << plot;
  }
  EXPECT_NE(dom.output.find("Make rank 2 keep pace"), std::string::npos);
  // The kernel name with <...&> is text, not markup.
  EXPECT_NE(dom.output.find("vectorized_elementwise_kernel&lt;4, Add&lt;float&gt;&amp;&gt;"),
            std::string::npos);
}

}  // namespace
}  // namespace aon::report
