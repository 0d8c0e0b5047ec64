// Agent <-> node collector protocol (one SOCK_SEQPACKET Unix socket per rank).
//
// The collector of a job on a node listens on the abstract socket named by
// CollectorSocketName(uid, job, output_dir): binding it is the election (the
// kernel lets one process bind a name; a loser exits). Abstract names live in
// the network namespace, i.e. one per node even when "nodes" share a host.
// Messages (each one datagram, at most kMaxMessageBytes, text):
//   agent -> collector  "HELLO 1\n" + EncodeRankMetadata(identity)   + SCM_RIGHTS ring memfd
//                       "FINISH\n"  + EncodeRankMetadata(final)      (then waits for DONE)
//                       "TRIGGER <reason>\n"                          (flight mode dump)
//   collector -> agent  "OK <rank file path>\n" | "ERROR <why>\n"    (answer to HELLO)
//                       "DONE <rank file path>\n" | "ERROR <why>\n"  (answer to FINISH)
// A connection that closes without FINISH is a rank that died: the collector
// drains what reached its ring and finishes the file marked truncated.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "aon/status.h"

namespace aon {

inline constexpr int kCollectorProtocolVersion = 1;
inline constexpr size_t kMaxMessageBytes = 64 * 1024;

// Abstract socket name (without the leading NUL): "aon-collector.<uid>.<hash>",
// the hash over job id and output directory.
std::string CollectorSocketName(uid_t uid, std::string_view job_id, std::string_view output_dir);

// The socket address of an abstract name; returns the address length.
socklen_t CollectorAddress(const std::string& name, sockaddr_un* addr);

// Connects a SOCK_SEQPACKET socket to the collector named `name`: the fd, or
// -errno (ECONNREFUSED / ENOENT: no collector is running).
int ConnectToCollector(const std::string& name);

// Reads one message from the collector, waiting at most timeout_ms.
StatusOr<std::string> ReceiveFromCollector(int fd, int timeout_ms);

// Sends a control verb ("TRIGGER <reason>\n", "QUIESCE\n") to the collector
// on `socket_name` and waits up to timeout_ms for its one-line answer.
StatusOr<std::string> CollectorControl(const std::string& socket_name, const std::string& message,
                                       int timeout_ms);

}  // namespace aon
