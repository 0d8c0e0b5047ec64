#include "aon/ping_pong.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace aon::clocksync {
namespace {

std::string Where(const std::string& address, uint16_t port) {
  return address + ":" + std::to_string(port);
}

// Reads exactly n bytes, waiting at most timeout_ms for each chunk.
Status ReadFull(int fd, void* buf, size_t n, int timeout_ms, const std::string& where) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    int r = poll(&pfd, 1, timeout_ms);
    if (r == 0) return Unavailable("clock ping to " + where + ": no reply within " + std::to_string(timeout_ms) + " ms");
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("clock ping to " + where + ": poll", errno);
    }
    ssize_t got = read(fd, p, n);
    if (got == 0) return Unavailable("clock ping to " + where + ": connection closed");
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("clock ping to " + where + ": read", errno);
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return Status::Ok();
}

bool WriteFull(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const uint8_t*>(buf);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

StatusOr<std::unique_ptr<PingServer>> PingServer::Start(const std::string& address, uint16_t port,
                                                       ClockFn clock) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("clock server: socket", errno);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) {
    close(fd);
    return InvalidArgument("clock server: '" + address + "' is not an IPv4 address");
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd, 64) != 0) {
    Status st = ErrnoStatus("clock server: cannot listen on " + Where(address, port), errno);
    close(fd);
    return st;
  }
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  std::unique_ptr<PingServer> s(new PingServer(fd, ntohs(sa.sin_port), std::move(clock)));
  s->thread_ = std::thread([p = s.get()] { p->Serve(); });
  return s;
}

PingServer::PingServer(int listen_fd, uint16_t port, ClockFn clock)
    : listen_fd_(listen_fd), port_(port), clock_(std::move(clock)) {}

PingServer::~PingServer() {
  stop_.store(true);
  shutdown(listen_fd_, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
}

void PingServer::Serve() {
  // One client at a time: exchanges are short, and serving them one by one
  // keeps every reply's stamp free of contention.
  while (!stop_.load()) {
    pollfd pfd{listen_fd_, POLLIN, 0};
    if (poll(&pfd, 1, 100) <= 0) continue;
    int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    NoDelay(c);
    uint64_t msg[2];
    while (!stop_.load() && ReadFull(c, msg, sizeof(msg), 1000, "client").ok()) {
      msg[1] = clock_();
      if (!WriteFull(c, msg, sizeof(msg))) break;
    }
    close(c);
    served_.fetch_add(1);
  }
}

StatusOr<std::vector<PingSample>> Ping(const std::string& address, uint16_t port, int rounds,
                                       const ClockFn& clock, int timeout_ms) {
  const std::string where = Where(address, port);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("clock ping: socket", errno);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) {
    close(fd);
    return InvalidArgument("clock ping: '" + address + "' is not an IPv4 address");
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    Status st = ErrnoStatus("clock ping: cannot connect to " + where, errno);
    close(fd);
    return st;
  }
  NoDelay(fd);
  std::vector<PingSample> samples;
  samples.reserve(static_cast<size_t>(rounds));
  for (int i = 0; i < rounds; ++i) {
    uint64_t msg[2] = {static_cast<uint64_t>(i), 0};
    PingSample s{};
    s.client_send_ns = clock();
    if (!WriteFull(fd, msg, sizeof(msg))) {
      close(fd);
      return Unavailable("clock ping: cannot send to " + where);
    }
    Status st = ReadFull(fd, msg, sizeof(msg), timeout_ms, where);
    s.client_recv_ns = clock();
    if (!st.ok()) {
      close(fd);
      return st;
    }
    if (msg[0] != static_cast<uint64_t>(i)) {
      close(fd);
      return DataLoss("clock ping: reply " + std::to_string(msg[0]) + " to request " +
                      std::to_string(i) + " from " + where);
    }
    s.server_ns = msg[1];
    samples.push_back(s);
  }
  close(fd);
  return samples;
}

}  // namespace aon::clocksync
