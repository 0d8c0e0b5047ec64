#include "aon/collector_protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

namespace aon {

std::string CollectorSocketName(uid_t uid, std::string_view job_id, std::string_view output_dir) {
  // FNV-1a 64: stable across builds and processes (std::hash is not promised to be).
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 0x100000001b3ull;
    }
    h ^= 0xff;
    h *= 0x100000001b3ull;
  };
  mix(job_id);
  mix(output_dir);
  char buf[80];
  std::snprintf(buf, sizeof(buf), "aon-collector.%u.%016llx", static_cast<unsigned>(uid),
                static_cast<unsigned long long>(h));
  return buf;
}

socklen_t CollectorAddress(const std::string& name, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(addr->sun_path) - 1);
  std::memcpy(addr->sun_path + 1, name.data(), n);  // sun_path[0] = 0: abstract
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

int ConnectToCollector(const std::string& name) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sockaddr_un addr;
  socklen_t len = CollectorAddress(name, &addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    int err = errno;
    close(fd);
    return -err;
  }
  return fd;
}

StatusOr<std::string> ReceiveFromCollector(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int rc;
  do {
    rc = poll(&p, 1, timeout_ms);
  } while (rc < 0 && errno == EINTR);
  if (rc == 0) return Unavailable("the collector did not answer within " + std::to_string(timeout_ms) + " ms");
  if (rc < 0) return ErrnoStatus("waiting for the collector", errno);
  std::string buf(kMaxMessageBytes, '\0');
  ssize_t n;
  do {
    n = recv(fd, buf.data(), buf.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoStatus("reading the collector's answer", errno);
  if (n == 0) return Unavailable("the collector closed the connection without answering");
  buf.resize(static_cast<size_t>(n));
  return buf;
}

StatusOr<std::string> CollectorControl(const std::string& socket_name, const std::string& message,
                                       int timeout_ms) {
  int fd = ConnectToCollector(socket_name);
  if (fd < 0) return ErrnoStatus("no collector on '" + socket_name + "'", -fd);
  if (send(fd, message.data(), message.size(), MSG_NOSIGNAL) < 0) {
    int err = errno;
    close(fd);
    return ErrnoStatus("sending to the collector", err);
  }
  auto answer = ReceiveFromCollector(fd, timeout_ms);
  close(fd);
  AON_ASSIGN_OR_RETURN(std::string buf, std::move(answer));
  while (!buf.empty() && buf.back() == '\n') buf.pop_back();
  return buf;
}

}  // namespace aon
