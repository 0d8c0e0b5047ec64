// Ping-pong over TCP between a clock server (a node leader's, or the root's)
// and a client, producing the samples clock_estimator.h turns into offsets.
//
// Wire format, both directions 16 bytes, little-endian: request {u64 sequence,
// u64 zero}; reply {u64 sequence, u64 server clock in ns}. The server stamps
// its clock as late as possible before replying. TCP_NODELAY on both ends.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "aon/clocksync/clock_estimator.h"
#include "aon/base/status.h"

namespace aon::clocksync {

// The clock being compared; tests inject offsets and drift through it.
using ClockFn = std::function<uint64_t()>;

class PingServer {
 public:
  // Listens on `address` (IPv4 dotted quad) and `port` (0: any free port).
  static StatusOr<std::unique_ptr<PingServer>> Start(const std::string& address, uint16_t port,
                                                     ClockFn clock);
  ~PingServer();  // stops the thread, closes sockets
  uint16_t port() const { return port_; }
  // Clients served to the end (disconnected).
  int served() const { return served_.load(); }

 private:
  PingServer(int listen_fd, uint16_t port, ClockFn clock);
  void Serve();

  int listen_fd_;
  uint16_t port_;
  ClockFn clock_;
  std::atomic<bool> stop_{false};
  std::atomic<int> served_{0};
  std::thread thread_;
};

// Connects to a PingServer and performs `rounds` exchanges, stamping with
// `clock`. Errors name the address and what failed; `timeout_ms` bounds each
// wait so a dead server never hangs the caller.
StatusOr<std::vector<PingSample>> Ping(const std::string& address, uint16_t port, int rounds,
                                       const ClockFn& clock, int timeout_ms = 2000);

}  // namespace aon::clocksync
