#include "aon/clocksync/ping_pong.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "aon/base/fd_io.h"

namespace aon::clocksync {
namespace {

std::string Where(const std::string& address, uint16_t port) {
  return address + ":" + std::to_string(port);
}

// Reads exactly n bytes, waiting at most timeout_ms for each chunk.
Status ReadReply(int fd, void* buf, size_t n, int timeout_ms, const std::string& where) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    int r = poll(&pfd, 1, timeout_ms);
    if (r == 0)
      return Unavailable("clock ping to " + where + ": no reply within " +
                         std::to_string(timeout_ms) + " ms");
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
  // Every connected client is served as soon as its request is complete (one
  // poll loop), so a slow or distant node does not hold the others up: 64
  // nodes behind a 200 us link sync in the time of one, not of 64. The stamp
  // is taken right after the whole request is read, as before; a reply queued
  // behind another in the same poll round only lengthens that round trip,
  // which the minimum-RTT filter then discards.
  struct Client {
    int fd;
    uint8_t buf[16];
    size_t have;
  };
  std::vector<Client> clients;
  std::vector<pollfd> fds;
  while (!stop_.load()) {
    fds.clear();
    fds.push_back({listen_fd_, POLLIN, 0});
    for (const Client& c : clients) fds.push_back({c.fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), 100) <= 0) continue;
    std::vector<Client> kept;
    kept.reserve(clients.size() + 1);
    for (size_t i = 0; i < clients.size(); ++i) {
      Client& c = clients[i];
      bool drop = false;
      if ((fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        ssize_t n = read(c.fd, c.buf + c.have, sizeof(c.buf) - c.have);
        if (n > 0) {
          c.have += static_cast<size_t>(n);
          if (c.have == sizeof(c.buf)) {
            uint64_t msg[2];
            std::memcpy(msg, c.buf, sizeof(msg));
            msg[1] = clock_();
            c.have = 0;
            drop = !WriteFull(c.fd, msg, sizeof(msg));
          }
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          drop = true;
        }
      }
      if (drop) {
        close(c.fd);
        served_.fetch_add(1);
      } else {
        kept.push_back(c);
      }
    }
    clients.swap(kept);
    if ((fds[0].revents & POLLIN) != 0) {
      int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c >= 0) {
        NoDelay(c);
        clients.push_back(Client{c, {}, 0});
      }
    }
  }
  for (const Client& c : clients) close(c.fd);
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
    Status st = ReadReply(fd, msg, sizeof(msg), timeout_ms, where);
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
