// aon-clock-server: a PingServer on this process's CLOCK_MONOTONIC, for tests
// that run it in another time namespace (a "host" with another clock).
//   aon-clock-server ADDRESS PORT SECONDS   -> prints "port=<p>", serves one
// client, and exits when that client is done or after SECONDS.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "aon/clocksync/ping_pong.h"
#include "aon/base/timebase.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: aon-clock-server ADDRESS PORT SECONDS\n");
    return 2;
  }
  auto server = aon::clocksync::PingServer::Start(argv[1], static_cast<uint16_t>(std::atoi(argv[2])),
                                                  [] { return aon::TimebaseNowNs(); });
  if (!server.ok()) {
    std::fprintf(stderr, "aon-clock-server: %s\n", server.status().message().c_str());
    return 1;
  }
  std::printf("port=%u\n", (*server)->port());
  std::fflush(stdout);
  for (int i = 0; i < std::atoi(argv[3]) * 100 && (*server)->served() == 0; ++i) usleep(10000);
  return (*server)->served() > 0 ? 0 : 3;
}
