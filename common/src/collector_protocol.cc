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
namespace {

using Errc = CollectorErrc;

// The first line must be one line: a newline inside becomes a space.
std::string OneLine(std::string_view text) {
  std::string s(text);
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

std::string Quoted(std::string_view wire) {
  std::string s(wire.substr(0, std::min<size_t>(wire.size(), 40)));
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20) c = '.';
  return "'" + s + (wire.size() > 40 ? "...'" : "'");
}

// A message split into its first line's name and argument and the body after it.
struct Parts {
  std::string_view name;
  std::string_view argument;
  bool has_argument = false;
  std::string_view body;
};

CollectorOr<Parts> Split(std::string_view wire) {
  if (wire.empty()) return CollectorError(Errc::kEmptyMessage, "empty message");
  if (wire.size() > kMaxMessageBytes)
    return CollectorError(Errc::kMessageTooLong, "message of " + std::to_string(wire.size()) +
                                                     " bytes (at most " +
                                                     std::to_string(kMaxMessageBytes) + ")");
  const size_t nl = wire.find('\n');
  if (nl == std::string_view::npos)
    return CollectorError(Errc::kMissingNewline, "no newline after " + Quoted(wire));
  Parts p;
  std::string_view first = wire.substr(0, nl);
  p.body = wire.substr(nl + 1);
  const size_t space = first.find(' ');
  p.name = first.substr(0, space);
  if (space != std::string_view::npos) {
    p.has_argument = true;
    p.argument = first.substr(space + 1);
  }
  return p;
}

CollectorError BadArgument(std::string_view wire, const std::string& why) {
  return CollectorError(Errc::kBadArgument, why + " in " + Quoted(wire));
}

}  // namespace

const char* CollectorVerbName(CollectorVerb verb) {
  switch (verb) {
    case CollectorVerb::kHello:
      return "HELLO";
    case CollectorVerb::kFinish:
      return "FINISH";
    case CollectorVerb::kTrigger:
      return "TRIGGER";
    case CollectorVerb::kQuiesce:
      return "QUIESCE";
  }
  return "?";
}

const char* CollectorReplyName(CollectorReplyKind kind) {
  switch (kind) {
    case CollectorReplyKind::kOk:
      return "OK";
    case CollectorReplyKind::kDone:
      return "DONE";
    case CollectorReplyKind::kIdle:
      return "IDLE";
    case CollectorReplyKind::kError:
      return "ERROR";
  }
  return "?";
}

CollectorReplyKind ExpectedReply(CollectorVerb verb) {
  switch (verb) {
    case CollectorVerb::kHello:
      return CollectorReplyKind::kOk;
    case CollectorVerb::kFinish:
      return CollectorReplyKind::kDone;
    case CollectorVerb::kTrigger:
      return CollectorReplyKind::kOk;
    case CollectorVerb::kQuiesce:
      return CollectorReplyKind::kIdle;
  }
  return CollectorReplyKind::kError;
}

const char* CollectorErrcName(CollectorErrc code) {
  switch (code) {
    case Errc::kOk:
      return "ok";
    case Errc::kEmptyMessage:
      return "empty message";
    case Errc::kMessageTooLong:
      return "message too long";
    case Errc::kMissingNewline:
      return "missing newline";
    case Errc::kUnknownVerb:
      return "unknown request";
    case Errc::kUnsupportedVersion:
      return "unsupported protocol version";
    case Errc::kBadArgument:
      return "bad argument";
    case Errc::kUnexpectedBody:
      return "unexpected body";
    case Errc::kNoCollector:
      return "no collector";
    case Errc::kConnectFailed:
      return "connect failed";
    case Errc::kSendFailed:
      return "send failed";
    case Errc::kReceiveFailed:
      return "receive failed";
    case Errc::kTimedOut:
      return "timed out";
    case Errc::kClosed:
      return "closed without an answer";
    case Errc::kRefused:
      return "refused";
    case Errc::kUnexpectedReply:
      return "unexpected reply";
  }
  return "?";
}

Status CollectorError::ToStatus() const {
  switch (code_) {
    case Errc::kOk:
      return Status::Ok();
    case Errc::kNoCollector:
      return NotFound(message_);
    case Errc::kTimedOut:
    case Errc::kClosed:
    case Errc::kRefused:
      return Unavailable(message_);
    case Errc::kEmptyMessage:
    case Errc::kMessageTooLong:
    case Errc::kMissingNewline:
    case Errc::kUnknownVerb:
    case Errc::kUnsupportedVersion:
    case Errc::kBadArgument:
    case Errc::kUnexpectedBody:
    case Errc::kUnexpectedReply:
      return InvalidArgument(message_);
    case Errc::kConnectFailed:
    case Errc::kSendFailed:
    case Errc::kReceiveFailed:
      return IoError(message_);
  }
  return Internal(message_);
}

CollectorRequest CollectorRequest::Hello(std::string metadata) {
  CollectorRequest r;
  r.verb = CollectorVerb::kHello;
  r.body = std::move(metadata);
  return r;
}

CollectorRequest CollectorRequest::Finish(std::string metadata) {
  CollectorRequest r;
  r.verb = CollectorVerb::kFinish;
  r.body = std::move(metadata);
  return r;
}

CollectorRequest CollectorRequest::Trigger(std::string reason) {
  CollectorRequest r;
  r.verb = CollectorVerb::kTrigger;
  r.argument = OneLine(reason);
  return r;
}

CollectorRequest CollectorRequest::Quiesce() { return CollectorRequest{}; }

std::string EncodeRequest(const CollectorRequest& request) {
  std::string wire = CollectorVerbName(request.verb);
  switch (request.verb) {
    case CollectorVerb::kHello:
      return wire + " " + std::to_string(request.version) + "\n" + request.body;
    case CollectorVerb::kFinish:
      return wire + "\n" + request.body;
    case CollectorVerb::kTrigger:
      if (!request.argument.empty()) wire += " " + OneLine(request.argument);
      return wire + "\n";
    case CollectorVerb::kQuiesce:
      return wire + "\n";
  }
  return wire + "\n";
}

CollectorOr<CollectorRequest> ParseRequest(std::string_view wire) {
  auto split = Split(wire);
  if (!split.ok()) return split.error();
  const Parts& p = *split;
  CollectorRequest r;
  if (p.name == "HELLO") {
    r.verb = CollectorVerb::kHello;
    const std::string v(p.argument);
    char* end = nullptr;
    const long version = std::strtol(v.c_str(), &end, 10);
    if (!p.has_argument || v.empty() || *end != '\0' || version < 0 || version > 1000000)
      return BadArgument(wire, "HELLO needs a protocol version");
    if (version != kCollectorProtocolVersion)
      return CollectorError(Errc::kUnsupportedVersion,
                            "protocol version " + v + " (this collector speaks " +
                                std::to_string(kCollectorProtocolVersion) + ")");
    r.version = static_cast<int>(version);
    r.body = std::string(p.body);
  } else if (p.name == "FINISH") {
    r.verb = CollectorVerb::kFinish;
    if (p.has_argument) return BadArgument(wire, "FINISH takes no argument");
    r.body = std::string(p.body);
  } else if (p.name == "TRIGGER") {
    r.verb = CollectorVerb::kTrigger;
    r.argument = std::string(p.argument);
  } else if (p.name == "QUIESCE") {
    r.verb = CollectorVerb::kQuiesce;
    if (p.has_argument) return BadArgument(wire, "QUIESCE takes no argument");
  } else {
    return CollectorError(Errc::kUnknownVerb, "unknown request " + Quoted(wire));
  }
  if ((r.verb == CollectorVerb::kTrigger || r.verb == CollectorVerb::kQuiesce) && !p.body.empty())
    return CollectorError(Errc::kUnexpectedBody,
                          std::string(CollectorVerbName(r.verb)) + " has no body: " + Quoted(wire));
  return r;
}

std::string EncodeReply(const CollectorReply& reply) {
  std::string wire = CollectorReplyName(reply.kind);
  if (reply.kind != CollectorReplyKind::kIdle && !reply.text.empty())
    wire += " " + OneLine(reply.text);
  return wire + "\n";
}

CollectorOr<CollectorReply> ParseReply(std::string_view wire) {
  auto split = Split(wire);
  if (!split.ok()) return split.error();
  const Parts& p = *split;
  CollectorReply r;
  if (p.name == "OK") {
    r.kind = CollectorReplyKind::kOk;
  } else if (p.name == "DONE") {
    r.kind = CollectorReplyKind::kDone;
  } else if (p.name == "IDLE") {
    r.kind = CollectorReplyKind::kIdle;
    if (p.has_argument) return BadArgument(wire, "IDLE takes no argument");
  } else if (p.name == "ERROR") {
    r.kind = CollectorReplyKind::kError;
  } else {
    return CollectorError(Errc::kUnknownVerb, "unknown reply " + Quoted(wire));
  }
  if (!p.body.empty())
    return CollectorError(Errc::kUnexpectedBody, "a reply is one line: " + Quoted(wire));
  r.text = std::string(p.argument);
  return r;
}

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

CollectorOr<std::string> ReceiveReply(int fd, CollectorVerb answered, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int rc;
  do {
    rc = poll(&p, 1, timeout_ms);
  } while (rc < 0 && errno == EINTR);
  if (rc == 0)
    return CollectorError(Errc::kTimedOut, "the collector did not answer " +
                                               std::string(CollectorVerbName(answered)) +
                                               " within " + std::to_string(timeout_ms) + " ms");
  if (rc < 0)
    return CollectorError(Errc::kReceiveFailed,
                          std::string("waiting for the collector: ") + std::strerror(errno));
  std::string buf(kMaxMessageBytes, '\0');
  ssize_t n;
  do {
    n = recv(fd, buf.data(), buf.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0)
    return CollectorError(Errc::kReceiveFailed,
                          std::string("reading the collector's answer: ") + std::strerror(errno));
  if (n == 0)
    return CollectorError(Errc::kClosed, "the collector closed the connection without answering " +
                                             std::string(CollectorVerbName(answered)));
  buf.resize(static_cast<size_t>(n));
  auto parsed = ParseReply(buf);
  if (!parsed.ok()) return parsed.error();
  CollectorReply& reply = *parsed;
  if (reply.kind == CollectorReplyKind::kError)
    return CollectorError(
        Errc::kRefused,
        "the collector refused " + std::string(CollectorVerbName(answered)) + ": " + reply.text);
  if (reply.kind != ExpectedReply(answered))
    return CollectorError(Errc::kUnexpectedReply, "the collector answered " +
                                                      std::string(CollectorVerbName(answered)) +
                                                      " with " + CollectorReplyName(reply.kind));
  return std::move(reply.text);
}

CollectorOr<std::string> CallCollector(const std::string& socket_name,
                                       const CollectorRequest& request, int timeout_ms) {
  const int fd = ConnectToCollector(socket_name);
  if (fd < 0) {
    const int err = -fd;
    return CollectorError(
        err == ECONNREFUSED || err == ENOENT ? Errc::kNoCollector : Errc::kConnectFailed,
        "no collector on '" + socket_name + "': " + std::strerror(err));
  }
  const std::string wire = EncodeRequest(request);
  ssize_t sent;
  do {
    sent = send(fd, wire.data(), wire.size(), MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) {
    const int err = errno;
    close(fd);
    return CollectorError(Errc::kSendFailed,
                          std::string("sending to the collector: ") + std::strerror(err));
  }
  auto reply = ReceiveReply(fd, request.verb, timeout_ms);
  close(fd);
  return reply;
}

}  // namespace aon
