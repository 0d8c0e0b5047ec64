// Clock offset/drift estimation: against simulated exchanges with known truth
// (asymmetric, jittery delays; drift), over real loopback TCP, and against a
// real second process whose CLOCK_MONOTONIC is shifted by a time namespace.
// In every case the reported bound must hold: |estimate - truth| <= bound.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "aon/clocksync/clock_estimator.h"
#include "aon/clocksync/ping_pong.h"
#include "aon/base/timebase.h"

namespace aon::clocksync {
namespace {

// A simulated exchange: server clock = client clock + offset(t); one-way delays
// drawn independently (so asymmetric), the server stamps on arrival.
struct Link {
  double min_delay_ns, max_delay_ns;
};
std::vector<PingSample> Simulate(std::mt19937_64& rng, uint64_t t0, int rounds, const Link& link,
                                 const std::function<int64_t(uint64_t)>& offset_at) {
  std::uniform_real_distribution<double> delay(link.min_delay_ns, link.max_delay_ns);
  std::vector<PingSample> out;
  uint64_t t = t0;
  for (int i = 0; i < rounds; ++i) {
    const auto out_delay = static_cast<uint64_t>(delay(rng));
    const auto back_delay = static_cast<uint64_t>(delay(rng));
    PingSample s{};
    s.client_send_ns = t;
    const uint64_t arrive = t + out_delay;
    s.server_ns = static_cast<uint64_t>(static_cast<int64_t>(arrive) + offset_at(arrive));
    s.client_recv_ns = arrive + back_delay;
    out.push_back(s);
    t = s.client_recv_ns + 10'000;
  }
  return out;
}

TEST(ClockEstimator, MinimumRoundTripAndTheBoundHoldsUnderAsymmetry) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t truth = static_cast<int64_t>(rng() % 4'000'000'000ull) - 2'000'000'000;
    auto samples = Simulate(rng, 1'000'000'000'000ull, 1 + trial % 50, {5'000, 400'000},
                            [&](uint64_t) { return truth; });
    auto m = EstimateOffset(samples);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_LE(static_cast<uint64_t>(std::llabs(m->offset_ns - truth)), m->bound_ns) << trial;
    uint64_t min_rtt = UINT64_MAX;
    for (const auto& s : samples) min_rtt = std::min(min_rtt, s.client_recv_ns - s.client_send_ns);
    EXPECT_EQ(m->rtt_ns, min_rtt);
    EXPECT_EQ(m->samples, samples.size());
  }
}

TEST(ClockEstimator, BadSamplesAreErrors) {
  EXPECT_FALSE(EstimateOffset({}).ok());
  std::vector<PingSample> backwards = {{100, 5, 50}};
  auto m = EstimateOffset(backwards);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("not monotonic"), std::string::npos);
  EXPECT_FALSE(FitClockModel({}).ok());
}

TEST(ClockEstimator, FiftyPpmDriftOverTenMinutesWithJitteryLinks) {
  // 200 us +- 50 us one way, 50 ppm drift, a measurement every 30 s for 10 min.
  std::mt19937_64 rng(11);
  const uint64_t start = 5'000'000'000'000ull;
  const int64_t offset0 = 3'141'592'653;
  const double drift = 50e-6;
  auto truth = [&](uint64_t t) {
    return offset0 + static_cast<int64_t>(std::llround(drift * static_cast<double>(t - start)));
  };
  std::vector<OffsetMeasurement> ms;
  for (int i = 0; i <= 20; ++i) {
    auto samples = Simulate(rng, start + static_cast<uint64_t>(i) * 30'000'000'000ull, 200,
                            {150'000, 250'000}, truth);
    auto m = EstimateOffset(samples);
    ASSERT_TRUE(m.ok());
    ms.push_back(*m);
  }
  auto model = FitClockModel(ms);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_NEAR(model->drift, drift, 1e-7);
  uint64_t worst = 0;
  for (uint64_t t = start; t <= start + 600'000'000'000ull; t += 7'000'000'000ull) {
    const uint64_t err = static_cast<uint64_t>(std::llabs(model->OffsetAt(t) - truth(t)));
    worst = std::max(worst, err);
    EXPECT_LE(err, model->bound_ns) << "at +" << (t - start) / 1e9 << " s";
  }
  EXPECT_LE(worst, 10'000u) << "residual over the 10 simulated minutes";
  RecordProperty("worst_residual_ns", std::to_string(worst));
  RecordProperty("bound_ns", std::to_string(model->bound_ns));
}

// The estimate comes from the fastest exchange of all that were made, and its
// bound covers half that round trip (the most the reply's time can be off):
// what the samples give, however slow the machine. How small the bound is on
// loopback is measured in bench/RESULTS.md ("Clock synchronization: start-up
// time and accuracy vs rounds"), not asserted here.
void ExpectBoundOfTheBestExchange(const std::vector<PingSample>& samples,
                                  const OffsetMeasurement& m) {
  uint64_t best = UINT64_MAX;
  for (const PingSample& s : samples) best = std::min(best, s.client_recv_ns - s.client_send_ns);
  EXPECT_EQ(m.rtt_ns, best);
  EXPECT_GE(2 * m.bound_ns, best);
  EXPECT_EQ(m.samples, samples.size());
}

TEST(ClockPingPong, LoopbackWithAnInjectedOffset) {
  const int64_t injected = 1'234'567'890;
  auto server = PingServer::Start("127.0.0.1", 0, [&] { return TimebaseNowNs() + injected; });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto samples = Ping("127.0.0.1", (*server)->port(), 300, [] { return TimebaseNowNs(); });
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  auto m = EstimateOffset(*samples);
  ASSERT_TRUE(m.ok());
  EXPECT_LE(static_cast<uint64_t>(std::llabs(m->offset_ns - injected)), m->bound_ns);
  ExpectBoundOfTheBestExchange(*samples, *m);
  RecordProperty("residual_ns", std::to_string(std::llabs(m->offset_ns - injected)));
}

TEST(ClockPingPong, DeadServerIsAClearErrorNotAHang) {
  auto samples = Ping("127.0.0.1", 1, 3, [] { return TimebaseNowNs(); }, 500);
  ASSERT_FALSE(samples.ok());
  EXPECT_NE(samples.status().message().find("127.0.0.1:1"), std::string::npos)
      << samples.status().message();
}

TEST(ClockPingPong, SecondProcessInAnotherTimeNamespace) {
  // The server runs with CLOCK_MONOTONIC shifted by exactly +7 s (a time
  // namespace), as a rank on another host with another clock would.
  const std::string server = std::string(AON_BUILD_BIN_DIR) + "/aon-clock-server";
  const std::string cmd = "exec unshare --time --fork --monotonic 7 " + server + " 127.0.0.1 0 30";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  unsigned port = 0;
  const int got = fscanf(p, "port=%u", &port);
  ASSERT_EQ(got, 1) << "aon-clock-server under unshare --time did not start (time namespaces "
                       "unsupported here?)";
  auto samples = Ping("127.0.0.1", static_cast<uint16_t>(port), 300, [] { return TimebaseNowNs(); });
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  auto m = EstimateOffset(*samples);
  ASSERT_TRUE(m.ok());
  const int64_t truth = 7'000'000'000;
  EXPECT_LE(static_cast<uint64_t>(std::llabs(m->offset_ns - truth)), m->bound_ns)
      << "estimated " << m->offset_ns << " bound " << m->bound_ns;
  ExpectBoundOfTheBestExchange(*samples, *m);
  RecordProperty("residual_ns", std::to_string(std::llabs(m->offset_ns - truth)));
  // The server exits once its one client is done.
  EXPECT_EQ(pclose(p), 0);
}

}  // namespace
}  // namespace aon::clocksync
