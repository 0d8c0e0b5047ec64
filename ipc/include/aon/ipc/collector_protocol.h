// Agent/tool <-> node collector protocol (SOCK_SEQPACKET Unix sockets). Every
// message of it is declared here, encoded and parsed only here; the collector,
// the agent, aon-run, aon-collector --trigger/--quiesce and the SPANK plugin
// speak it through these types, never through string literals of their own.
//
// The collector of a job on a node listens on the abstract socket named by
// CollectorSocketName(uid, job, output_dir, key): binding it is the election
// (the kernel lets one process bind a name; a loser exits). Abstract names live
// in the network namespace, i.e. one per node even when "nodes" share a host.
//
// Who may talk to whom. Abstract sockets have no permissions: any process in
// the namespace may bind a free name or connect to a bound one. So:
//   - The name is not guessable. It ends in the job's collector key: 128 random
//     bits in <output_dir>/.aon-collector-key, a 0600 file of the job's user in
//     the job's 0700 directory (aon/base/secure_fs.h). aon-run writes a fresh key
//     before each run, slurmstepd's child (as the user) when it makes the step's
//     directory, an agent when it finds none. Another user cannot read it, so
//     cannot bind the name before the collector does; the name shows in
//     /proc/net/unix only once the collector holds it.
//   - Every client checks who answers, before it sends a byte: ConnectToCollector
//     reads the listener's SO_PEERCRED and refuses (kWrongPeer) any uid but the
//     job's user, the only user a collector of the job runs as (the agent starts
//     it as the user, slurmstepd never starts one). Clients: the agent (its ring
//     memfd goes only to its own user's collector), aon-run, aon-collector
//     --trigger / --quiesce (the caller's uid), the SPANK plugin in slurmstepd
//     (root, expecting the job's uid). A refused collector is said once; the
//     agent then writes its own file (its ring was never shared), the tools
//     report it, nothing waits on it.
//   - The collector checks each connection's SO_PEERCRED: HELLO (a ring) only
//     from its own uid; TRIGGER and QUIESCE from its own uid or root (slurmstepd
//     ends the step's collector). Anyone else gets ERROR and is closed.
// With both, a key that leaked (or a collector that died and left its name free)
// still gives another user nothing. A name shows in /proc/net/unix while a
// collector holds it: after that collector exits, another user may bind it. An
// agent that finds its job's name held by another uid renews the job's key
// (under a lock on the job directory, so the node's ranks agree) and starts its
// collector under the new name, which nobody else can know before it is bound;
// the squatter holds a name the job no longer uses.
//
// Each message is one datagram of at most kMaxMessageBytes: a first line
// "VERB[ ARGUMENT]\n", then, for HELLO and FINISH only, a body.
//
//   request (CollectorVerb)  wire                                from
//   kHello                   "HELLO 1\n" + EncodeRankMetadata    agent (+ SCM_RIGHTS ring memfd)
//   kFinish                  "FINISH\n"  + EncodeRankMetadata    agent (then waits for DONE)
//   kTrigger                 "TRIGGER[ <reason>]\n"              aon-run, aon-collector --trigger
//   kQuiesce                 "QUIESCE\n"                         aon-run, slurmstepd, --quiesce
//
//   reply (CollectorReplyKind)  wire                answers
//   kOk                         "OK <text>\n"       HELLO (the rank file), TRIGGER (what was done)
//   kDone                       "DONE <text>\n"     FINISH (the rank file, and any loss)
//   kIdle                       "IDLE\n"            QUIESCE (every file is closed; it exits)
//   kError                      "ERROR <why>\n"     any request it refuses
//
// A rank's connection starts with HELLO; any other first message is a control
// request, answered once, after which the collector closes the connection. A
// connection that closes without FINISH is a rank that died: the collector
// drains what reached its ring and finishes the file marked truncated.
//
// Failures are CollectorErrc codes (a malformed message, no collector, a
// timeout, a refusal...); callers branch on the code, never on message text.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "aon/base/status.h"

namespace aon {

inline constexpr int kCollectorProtocolVersion = 1;
inline constexpr size_t kMaxMessageBytes = 64 * 1024;

enum class CollectorVerb : uint8_t { kHello, kFinish, kTrigger, kQuiesce };
enum class CollectorReplyKind : uint8_t { kOk, kDone, kIdle, kError };
const char* CollectorVerbName(CollectorVerb verb);        // "HELLO", ...
const char* CollectorReplyName(CollectorReplyKind kind);  // "OK", ...
CollectorReplyKind ExpectedReply(CollectorVerb verb);     // HELLO -> kOk, FINISH -> kDone, ...

struct CollectorRequest {
  CollectorVerb verb = CollectorVerb::kQuiesce;
  int version = kCollectorProtocolVersion;  // kHello
  std::string argument;                     // kTrigger: the reason ("" = unspecified)
  std::string body;                         // kHello, kFinish: EncodeRankMetadata(...)
  bool operator==(const CollectorRequest&) const = default;

  static CollectorRequest Hello(std::string metadata);
  static CollectorRequest Finish(std::string metadata);
  static CollectorRequest Trigger(std::string reason);
  static CollectorRequest Quiesce();
};

struct CollectorReply {
  CollectorReplyKind kind = CollectorReplyKind::kOk;
  std::string text;  // kOk, kDone: what was done / the file; kError: why; kIdle: ""
  bool operator==(const CollectorReply&) const = default;
};

enum class CollectorErrc : uint8_t {
  kOk = 0,
  // A message that does not follow the protocol (either direction).
  kEmptyMessage,
  kMessageTooLong,
  kMissingNewline,      // no "\n" after the first line
  kUnknownVerb,         // a request or reply name not listed above
  kUnsupportedVersion,  // HELLO of another protocol version
  kBadArgument,         // an argument missing, unexpected or malformed
  kUnexpectedBody,      // text after the first line of a message that has no body
  // Talking to a collector.
  kNoCollector,    // nothing listens on the name (ECONNREFUSED, ENOENT)
  kConnectFailed,  // connect() failed otherwise
  kSendFailed,
  kReceiveFailed,
  kTimedOut,         // no answer within the time given
  kClosed,           // the collector closed the connection without answering
  kRefused,          // the collector answered ERROR
  kUnexpectedReply,  // an answer of another kind than the request's
  kWrongPeer,        // the socket's listener runs as another user: nothing was sent
  kNoKey,            // the job directory's collector key is missing or not usable
};
const char* CollectorErrcName(CollectorErrc code);  // "no collector", "timed out", ...

// A failure of the protocol: the code to branch on, and a message for people
// that names what failed ("no collector on 'aon-collector.0.…'").
class CollectorError {
 public:
  CollectorError() = default;
  CollectorError(CollectorErrc code, std::string message)
      : code_(code), message_(std::move(message)) {}
  CollectorErrc code() const { return code_; }
  const std::string& message() const { return message_; }
  // The same failure as an aon::Status (kNotFound for kNoCollector,
  // kUnavailable for a collector that refused, timed out or hung up,
  // kInvalidArgument for a malformed message, kIoError otherwise).
  Status ToStatus() const;

 private:
  CollectorErrc code_ = CollectorErrc::kOk;
  std::string message_;
};

// A protocol result: StatusOr with the protocol's error, whose code() callers branch on.
template <typename T>
using CollectorOr = StatusOr<T, CollectorError>;

// Encoding never fails: a newline inside an argument or a reply text becomes a
// space (the first line is the whole of it).
std::string EncodeRequest(const CollectorRequest& request);
std::string EncodeReply(const CollectorReply& reply);
CollectorOr<CollectorRequest> ParseRequest(std::string_view wire);
CollectorOr<CollectorReply> ParseReply(std::string_view wire);

// ---- where the job's collector listens ------------------------------------------

inline constexpr char kCollectorKeyFile[] = ".aon-collector-key";
inline constexpr size_t kCollectorKeyChars = 32;  // 128 bits, lowercase hex

enum class KeyMode : uint8_t {
  kRead,    // the key must be there
  kCreate,  // made if missing (the first of several racing makers wins: link(2))
  kRenew,   // a fresh key replaces any old one (aon-run, before each run)
};

// The collector key of the directory `dirfd` refers to, into key[0..32]
// (NUL-terminated). The file must be a regular file of the caller's euid with no
// group/other bits, read without following a link. Returns 0 or an errno:
// ENOENT (kRead, none), ELOOP (a link), EPERM (another user's, or readable by
// others), EINVAL (not a key). System calls only: used in forked children.
int CollectorKeyAt(int dirfd, KeyMode mode, char key[kCollectorKeyChars + 1]);

// The same for a directory path; the error names the file and why.
// `held_dirfd`, when not -1, is output_dir held open (HeldDirectory): the key
// is read there, not at the path.
StatusOr<std::string> CollectorKey(const std::string& output_dir, KeyMode mode,
                                   int held_dirfd = -1);

// Abstract socket name (without the leading NUL):
// "aon-collector.<uid>.<hash of job id and output dir>.<key>".
std::string CollectorSocketName(uid_t uid, std::string_view job_id, std::string_view output_dir,
                                std::string_view key);

// A job's collector: the socket name, and the only uid allowed to listen on it.
struct CollectorEndpoint {
  std::string name;
  uid_t owner = 0;
};

// The endpoint of the caller's own job (owner = geteuid()): reads the key in
// output_dir (kNoKey when there is none: no collector can have been started).
CollectorOr<CollectorEndpoint> JobCollector(std::string_view job_id, const std::string& output_dir,
                                            KeyMode mode = KeyMode::kRead, int held_dirfd = -1);

// The socket address of an abstract name; returns the address length.
socklen_t CollectorAddress(const std::string& name, sockaddr_un* addr);

// Connects a SOCK_SEQPACKET socket to `endpoint` and checks the listener's
// SO_PEERCRED before anything is sent: the fd, or kNoCollector (nothing
// listens), kWrongPeer (another uid listens: the socket is closed),
// kConnectFailed.
CollectorOr<int> ConnectToCollector(const CollectorEndpoint& endpoint);

// Sends `request` on a connected socket as one datagram, with `pass_fd`
// attached (SCM_RIGHTS) when it is >= 0 (HELLO's ring memfd): the bytes sent,
// or kMessageTooLong / kSendFailed. Call it only on a ConnectToCollector fd.
CollectorOr<size_t> SendRequest(int fd, const CollectorRequest& request, int pass_fd = -1);

// Waits at most timeout_ms for the collector's answer to `answered` on `fd` and
// returns its text when it is the reply that request expects (kRefused with the
// collector's reason for ERROR, kUnexpectedReply for another kind).
CollectorOr<std::string> ReceiveReply(int fd, CollectorVerb answered, int timeout_ms);

// Sends `request` (TRIGGER or QUIESCE) on a new connection to `endpoint` and
// returns the text of its expected reply (QUIESCE: "").
CollectorOr<std::string> CallCollector(const CollectorEndpoint& endpoint,
                                       const CollectorRequest& request, int timeout_ms);

}  // namespace aon
