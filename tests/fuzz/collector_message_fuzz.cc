// Fuzz target: the input is one datagram on the node collector's socket
// (aon/ipc/collector_protocol.h), as a client could send it: the collector parses
// the request, and a HELLO's or FINISH's body as RankMetadata
// (aon/format/metadata_wire.h); an agent parses the collector's replies the same way.
// Besides never crashing, what was parsed must survive its own encoding: the
// request encoded and parsed again is the same request, and the metadata
// encoded, decoded and encoded again is the same text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "aon/ipc/collector_protocol.h"
#include "aon/format/metadata_wire.h"

namespace {

void Require(bool holds, const char* what) {
  if (holds) return;
  std::fprintf(stderr, "collector_message_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The collector receives at most kMaxMessageBytes (its receive buffer).
  if (size > aon::kMaxMessageBytes) return 0;
  const std::string_view wire(reinterpret_cast<const char*>(data), size);
  (void)aon::ParseReply(wire);
  auto request = aon::ParseRequest(wire);
  if (!request.ok()) return 0;
  auto again = aon::ParseRequest(aon::EncodeRequest(*request));
  Require(again.ok() && *again == *request, "a request does not survive its encoding");
  if (request->verb != aon::CollectorVerb::kHello && request->verb != aon::CollectorVerb::kFinish)
    return 0;
  auto meta = aon::DecodeRankMetadata(request->body);
  if (!meta.ok()) return 0;
  const std::string text = aon::EncodeRankMetadata(*meta);
  auto decoded = aon::DecodeRankMetadata(text);
  Require(decoded.ok() && aon::EncodeRankMetadata(*decoded) == text,
          "metadata does not survive its encoding");
  return 0;
}
