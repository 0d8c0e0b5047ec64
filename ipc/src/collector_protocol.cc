#include "aon/ipc/collector_protocol.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
    case Errc::kWrongPeer:
      return "another user's socket";
    case Errc::kNoKey:
      return "no collector key";
  }
  return "?";
}

Status CollectorError::ToStatus() const {
  switch (code_) {
    case Errc::kOk:
      return Status::Ok();
    case Errc::kNoCollector:
    case Errc::kNoKey:
      return NotFound(message_);
    case Errc::kWrongPeer:
      return Status(StatusCode::kPermissionDenied, message_);
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

namespace {

bool IsKey(const char* k) {
  for (size_t i = 0; i < kCollectorKeyChars; ++i) {
    const char c = k[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return k[kCollectorKeyChars] == '\0';
}

// Reads the key file at dirfd; 0 or an errno (see CollectorKeyAt).
int ReadKeyAt(int dirfd, char key[kCollectorKeyChars + 1]) {
  const int fd = openat(dirfd, kCollectorKeyFile, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno == ENOTDIR ? ELOOP : errno;
  struct stat st {};
  int err = 0;
  if (fstat(fd, &st) != 0) {
    err = errno;
  } else if (!S_ISREG(st.st_mode)) {
    err = EINVAL;
  } else if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
    err = EPERM;
  } else if (st.st_size != static_cast<off_t>(kCollectorKeyChars)) {
    err = EINVAL;
  } else {
    ssize_t n;
    do {
      n = read(fd, key, kCollectorKeyChars);
    } while (n < 0 && errno == EINTR);
    key[kCollectorKeyChars] = '\0';
    if (n != static_cast<ssize_t>(kCollectorKeyChars) || !IsKey(key)) err = EINVAL;
  }
  close(fd);
  return err;
}

// A fresh key in a temporary file of its own (O_EXCL), then linked (kCreate: fails
// with EEXIST when another maker was first) or renamed (kRenew) into place, so a
// reader never sees a half-written key.
int WriteKeyAt(int dirfd, KeyMode mode) {
  // The key, then 8 more random bytes that name the temporary file.
  unsigned char random[kCollectorKeyChars / 2 + 8];
  size_t got = 0;
  while (got < sizeof(random)) {
    const ssize_t n = getrandom(random + got, sizeof(random) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  char text[kCollectorKeyChars];
  for (size_t i = 0; i < kCollectorKeyChars / 2; ++i) {
    text[2 * i] = kHex[random[i] >> 4];
    text[2 * i + 1] = kHex[random[i] & 15];
  }
  // ".aon-collector-key.<16 hex digits>": unique to this call. No snprintf:
  // this runs in forked children.
  char tmp[sizeof(kCollectorKeyFile) + 1 + 16];
  size_t t = 0;
  for (const char* p = kCollectorKeyFile; *p != '\0'; ++p) tmp[t++] = *p;
  tmp[t++] = '.';
  for (size_t i = kCollectorKeyChars / 2; i < sizeof(random); ++i) {
    tmp[t++] = kHex[random[i] >> 4];
    tmp[t++] = kHex[random[i] & 15];
  }
  tmp[t] = '\0';
  const int fd = openat(dirfd, tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  int err = 0;
  if (fchmod(fd, 0600) != 0) {
    err = errno;
  } else {
    const ssize_t n = write(fd, text, sizeof(text));
    if (n != static_cast<ssize_t>(sizeof(text))) err = n < 0 ? errno : EIO;
  }
  close(fd);
  if (err == 0) {
    int rc = mode == KeyMode::kRenew ? renameat(dirfd, tmp, dirfd, kCollectorKeyFile)
                                     : linkat(dirfd, tmp, dirfd, kCollectorKeyFile, 0);
    // A file system without hard links: rename (two racing makers may then end
    // with two keys, i.e. two collectors, each serving the ranks that read its key).
    if (rc != 0 && (errno == EPERM || errno == ENOTSUP || errno == ENOSYS))
      rc = renameat(dirfd, tmp, dirfd, kCollectorKeyFile);
    if (rc != 0) err = errno;
  }
  unlinkat(dirfd, tmp, 0);  // after rename: already gone
  return err;
}

}  // namespace

int CollectorKeyAt(int dirfd, KeyMode mode, char key[kCollectorKeyChars + 1]) {
  key[0] = '\0';
  if (mode == KeyMode::kRenew) {
    const int err = WriteKeyAt(dirfd, mode);
    if (err != 0) return err;
  } else if (mode == KeyMode::kCreate) {
    int err = ReadKeyAt(dirfd, key);
    if (err != ENOENT) return err;
    err = WriteKeyAt(dirfd, mode);
    if (err != 0 && err != EEXIST) return err;  // EEXIST: another maker's key is there
  }
  return ReadKeyAt(dirfd, key);
}

StatusOr<std::string> CollectorKey(const std::string& output_dir, KeyMode mode, int held_dirfd) {
  const std::string path = output_dir + "/" + kCollectorKeyFile;
  const int dirfd = held_dirfd >= 0
                        ? held_dirfd
                        : open(output_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return ErrnoStatus("cannot open the job directory " + output_dir, errno);
  char key[kCollectorKeyChars + 1];
  const int err = CollectorKeyAt(dirfd, mode, key);
  if (dirfd != held_dirfd) close(dirfd);
  switch (err) {
    case 0:
      return std::string(key);
    case ELOOP:
      return Status(StatusCode::kPermissionDenied,
                    path + " is a symbolic link (not followed): not a collector key");
    case EPERM:
      return Status(StatusCode::kPermissionDenied,
                    path +
                        " belongs to another user or others may read it: not used as the "
                        "collector key");
    case EINVAL:
      return DataLoss(path + " is not a collector key (" + std::to_string(kCollectorKeyChars) +
                      " hex digits)");
    default:
      return ErrnoStatus(mode == KeyMode::kRead ? "cannot read " + path : "cannot make " + path,
                         err);
  }
}

std::string CollectorSocketName(uid_t uid, std::string_view job_id, std::string_view output_dir,
                                std::string_view key) {
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
  std::snprintf(buf, sizeof(buf), "aon-collector.%u.%016llx.", static_cast<unsigned>(uid),
                static_cast<unsigned long long>(h));
  // The key itself, not a hash of it: the name then says nothing about another
  // job's name, and the key is only as secret as the name is before binding.
  return std::string(buf) + std::string(key.substr(0, kCollectorKeyChars));
}

CollectorOr<CollectorEndpoint> JobCollector(std::string_view job_id, const std::string& output_dir,
                                            KeyMode mode, int held_dirfd) {
  auto key = CollectorKey(output_dir, mode, held_dirfd);
  if (!key.ok()) {
    return CollectorError(Errc::kNoKey,
                          "no collector key for " + output_dir + ": " + key.status().message());
  }
  CollectorEndpoint e;
  e.owner = geteuid();
  e.name = CollectorSocketName(e.owner, job_id, output_dir, *key);
  return e;
}

socklen_t CollectorAddress(const std::string& name, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(addr->sun_path) - 1);
  std::memcpy(addr->sun_path + 1, name.data(), n);  // sun_path[0] = 0: abstract
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

CollectorOr<int> ConnectToCollector(const CollectorEndpoint& endpoint) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return CollectorError(Errc::kConnectFailed, std::string("socket: ") + std::strerror(errno));
  sockaddr_un addr;
  const socklen_t len = CollectorAddress(endpoint.name, &addr);
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    close(fd);
    return CollectorError(
        err == ECONNREFUSED || err == ENOENT ? Errc::kNoCollector : Errc::kConnectFailed,
        "no collector on '" + endpoint.name + "': " + std::strerror(err));
  }
  // The listener's credentials, as of its listen(2): who we would be talking to.
  ucred cred{};
  socklen_t cred_len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0) {
    const int err = errno;
    close(fd);
    return CollectorError(Errc::kConnectFailed, "cannot tell who listens on '" + endpoint.name +
                                                    "': " + std::strerror(err));
  }
  if (cred.uid != endpoint.owner) {
    close(fd);
    return CollectorError(Errc::kWrongPeer,
                          "'" + endpoint.name + "' is held by uid " + std::to_string(cred.uid) +
                              " (pid " + std::to_string(cred.pid) +
                              "), not by the job's user (uid " + std::to_string(endpoint.owner) +
                              "): another user's process; nothing was sent to it");
  }
  return fd;
}

CollectorOr<size_t> SendRequest(int fd, const CollectorRequest& request, int pass_fd) {
  const std::string wire = EncodeRequest(request);
  if (wire.size() > kMaxMessageBytes)
    return CollectorError(Errc::kMessageTooLong, std::string(CollectorVerbName(request.verb)) +
                                                     " of " + std::to_string(wire.size()) +
                                                     " bytes (at most " +
                                                     std::to_string(kMaxMessageBytes) + ")");
  iovec iov{const_cast<char*>(wire.data()), wire.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (pass_fd >= 0) {
    mh.msg_control = control;
    mh.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  ssize_t n;
  do {
    n = sendmsg(fd, &mh, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0)
    return CollectorError(Errc::kSendFailed, std::string("sending ") +
                                                 CollectorVerbName(request.verb) +
                                                 " to the collector: " + std::strerror(errno));
  return static_cast<size_t>(n);
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

CollectorOr<std::string> CallCollector(const CollectorEndpoint& endpoint,
                                       const CollectorRequest& request, int timeout_ms) {
  auto connected = ConnectToCollector(endpoint);
  if (!connected.ok()) return connected.error();
  const int fd = *connected;
  auto sent = SendRequest(fd, request);
  if (!sent.ok()) {
    close(fd);
    return sent.error();
  }
  auto reply = ReceiveReply(fd, request.verb, timeout_ms);
  close(fd);
  return reply;
}

}  // namespace aon
