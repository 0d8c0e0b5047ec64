// The collector protocol (aon/collector_protocol.h): every request and reply
// survives encode -> parse unchanged, malformed messages are rejected with the
// code that says why, and the client calls (CallCollector) return codes for a
// missing collector, a refusal, a wrong answer, a hang-up and silence, against a
// real listening socket served by a thread of this test.
#include "aon/collector_protocol.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace aon {
namespace {

using Errc = CollectorErrc;

TEST(CollectorProtocol, EveryRequestRoundTrips) {
  const std::vector<CollectorRequest> requests = {
      CollectorRequest::Hello("rank=3\npid=77\n"),
      CollectorRequest::Hello(""),
      CollectorRequest::Finish("rank=3\nend_reason=exit\n"),
      CollectorRequest::Trigger("the job failed"),
      CollectorRequest::Trigger(""),
      CollectorRequest::Quiesce(),
  };
  for (const CollectorRequest& request : requests) {
    const std::string wire = EncodeRequest(request);
    auto parsed = ParseRequest(wire);
    ASSERT_TRUE(parsed.ok()) << wire << ": " << parsed.error().message();
    EXPECT_EQ(*parsed, request) << wire;
  }
}

TEST(CollectorProtocol, WireFormatIsTheDocumentedOne) {
  EXPECT_EQ(EncodeRequest(CollectorRequest::Hello("m")), "HELLO 1\nm");
  EXPECT_EQ(EncodeRequest(CollectorRequest::Finish("m")), "FINISH\nm");
  EXPECT_EQ(EncodeRequest(CollectorRequest::Trigger("why")), "TRIGGER why\n");
  EXPECT_EQ(EncodeRequest(CollectorRequest::Trigger("")), "TRIGGER\n");
  EXPECT_EQ(EncodeRequest(CollectorRequest::Quiesce()), "QUIESCE\n");
  EXPECT_EQ(EncodeReply({CollectorReplyKind::kOk, "/j/rank-00000.h5"}), "OK /j/rank-00000.h5\n");
  EXPECT_EQ(EncodeReply({CollectorReplyKind::kDone, "/j/rank-00000.h5"}),
            "DONE /j/rank-00000.h5\n");
  EXPECT_EQ(EncodeReply({CollectorReplyKind::kIdle, ""}), "IDLE\n");
  EXPECT_EQ(EncodeReply({CollectorReplyKind::kError, "no"}), "ERROR no\n");
}

TEST(CollectorProtocol, EveryReplyRoundTrips) {
  const std::vector<CollectorReply> replies = {
      {CollectorReplyKind::kOk, "/jobs/a/rank-00001.h5"},
      {CollectorReplyKind::kOk, "dumped"},
      {CollectorReplyKind::kDone, "/jobs/a/rank-00001.h5 (3 records lost: disk full)"},
      {CollectorReplyKind::kIdle, ""},
      {CollectorReplyKind::kError, "not this collector's user"},
  };
  for (const CollectorReply& reply : replies) {
    const std::string wire = EncodeReply(reply);
    auto parsed = ParseReply(wire);
    ASSERT_TRUE(parsed.ok()) << wire << ": " << parsed.error().message();
    EXPECT_EQ(*parsed, reply) << wire;
  }
}

TEST(CollectorProtocol, NewlinesInAnArgumentCannotForgeASecondLine) {
  const std::string wire = EncodeRequest(CollectorRequest::Trigger("a\nQUIESCE"));
  EXPECT_EQ(wire, "TRIGGER a QUIESCE\n");
  auto parsed = ParseRequest(wire);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->verb, CollectorVerb::kTrigger);
  EXPECT_EQ(parsed->argument, "a QUIESCE");
  EXPECT_EQ(EncodeReply({CollectorReplyKind::kError, "x\nIDLE"}), "ERROR x IDLE\n");
}

TEST(CollectorProtocol, MalformedRequestsAreRejectedWithTheirCode) {
  const std::vector<std::pair<std::string, Errc>> cases = {
      {"", Errc::kEmptyMessage},
      {"QUIESCE", Errc::kMissingNewline},
      {"HELLO 1", Errc::kMissingNewline},
      {"STOP\n", Errc::kUnknownVerb},
      {"quiesce\n", Errc::kUnknownVerb},
      {"OK x\n", Errc::kUnknownVerb},  // a reply is not a request
      {"HELLO 2\nmeta", Errc::kUnsupportedVersion},
      {"HELLO\nmeta", Errc::kBadArgument},
      {"HELLO one\nmeta", Errc::kBadArgument},
      {"HELLO 1x\nmeta", Errc::kBadArgument},
      {"FINISH now\nmeta", Errc::kBadArgument},
      {"QUIESCE now\n", Errc::kBadArgument},
      {"QUIESCE\nmore", Errc::kUnexpectedBody},
      {"TRIGGER a\nb", Errc::kUnexpectedBody},
      {std::string(kMaxMessageBytes + 1, 'x'), Errc::kMessageTooLong},
  };
  for (const auto& [wire, code] : cases) {
    auto parsed = ParseRequest(wire);
    ASSERT_FALSE(parsed.ok()) << "accepted '" << wire.substr(0, 20) << "'";
    EXPECT_EQ(parsed.code(), code)
        << "'" << wire.substr(0, 20) << "': " << CollectorErrcName(parsed.code());
    EXPECT_FALSE(parsed.error().message().empty());
  }
}

TEST(CollectorProtocol, MalformedRepliesAreRejectedWithTheirCode) {
  const std::vector<std::pair<std::string, Errc>> cases = {
      {"", Errc::kEmptyMessage},
      {"IDLE", Errc::kMissingNewline},
      {"FINE\n", Errc::kUnknownVerb},
      {"QUIESCE\n", Errc::kUnknownVerb},  // a request is not a reply
      {"IDLE now\n", Errc::kBadArgument},
      {"OK a\nb", Errc::kUnexpectedBody},
  };
  for (const auto& [wire, code] : cases) {
    auto parsed = ParseReply(wire);
    ASSERT_FALSE(parsed.ok()) << "accepted '" << wire << "'";
    EXPECT_EQ(parsed.code(), code) << "'" << wire << "': " << CollectorErrcName(parsed.code());
  }
}

TEST(CollectorProtocol, EachRequestExpectsItsReply) {
  EXPECT_EQ(ExpectedReply(CollectorVerb::kHello), CollectorReplyKind::kOk);
  EXPECT_EQ(ExpectedReply(CollectorVerb::kFinish), CollectorReplyKind::kDone);
  EXPECT_EQ(ExpectedReply(CollectorVerb::kTrigger), CollectorReplyKind::kOk);
  EXPECT_EQ(ExpectedReply(CollectorVerb::kQuiesce), CollectorReplyKind::kIdle);
}

TEST(CollectorProtocol, ErrorsMapToStatusCodes) {
  EXPECT_EQ(CollectorError(Errc::kNoCollector, "x").ToStatus().code(), StatusCode::kNotFound);
  EXPECT_EQ(CollectorError(Errc::kRefused, "x").ToStatus().code(), StatusCode::kUnavailable);
  EXPECT_EQ(CollectorError(Errc::kTimedOut, "x").ToStatus().code(), StatusCode::kUnavailable);
  EXPECT_EQ(CollectorError(Errc::kUnknownVerb, "x").ToStatus().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CollectorError(Errc::kRefused, "why").ToStatus().message(), "why");
}

// A collector stand-in on a fresh abstract name: it reads one request and
// answers with `answer` (nothing: it hangs up; "-": it stays silent until the
// client gives up).
class FakeCollector {
 public:
  explicit FakeCollector(std::string answer)
      : name_("aon-protocol-test." + std::to_string(getpid()) + "." + std::to_string(counter_++)),
        answer_(std::move(answer)) {
    listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr;
    socklen_t len = CollectorAddress(name_, &addr);
    bound_ = listen_fd_ >= 0 && bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
             listen(listen_fd_, 4) == 0;
    if (bound_) thread_ = std::thread([this] { Serve(); });
  }
  ~FakeCollector() {
    if (thread_.joinable()) thread_.join();
    if (listen_fd_ >= 0) close(listen_fd_);
  }
  bool bound() const { return bound_; }
  const std::string& name() const { return name_; }
  std::string received() {
    if (thread_.joinable()) thread_.join();
    return received_;
  }

 private:
  void Serve() {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    std::string buf(kMaxMessageBytes, '\0');
    ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n > 0) received_.assign(buf.data(), static_cast<size_t>(n));
    if (answer_ == "-") {
      // Silent: wait until the client closes its end.
      char c;
      while (recv(fd, &c, 1, 0) > 0) {
      }
    } else if (!answer_.empty()) {
      (void)send(fd, answer_.data(), answer_.size(), MSG_NOSIGNAL);
    }
    close(fd);
  }
  static inline std::atomic<int> counter_{0};
  std::string name_;
  std::string answer_;
  int listen_fd_ = -1;
  bool bound_ = false;
  std::thread thread_;
  std::string received_;
};

TEST(CollectorCall, QuiesceAnsweredIdle) {
  FakeCollector collector("IDLE\n");
  ASSERT_TRUE(collector.bound());
  auto idle = CallCollector(collector.name(), CollectorRequest::Quiesce(), 10000);
  ASSERT_TRUE(idle.ok()) << idle.error().message();
  EXPECT_EQ(*idle, "");
  EXPECT_EQ(collector.received(), "QUIESCE\n");
}

TEST(CollectorCall, TriggerAnsweredOkGivesItsText) {
  FakeCollector collector("OK dumped\n");
  ASSERT_TRUE(collector.bound());
  auto answer = CallCollector(collector.name(), CollectorRequest::Trigger("asked"), 10000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ(*answer, "dumped");
  EXPECT_EQ(collector.received(), "TRIGGER asked\n");
}

TEST(CollectorCall, NoCollectorIsItsOwnCode) {
  auto answer = CallCollector("aon-protocol-test.nobody." + std::to_string(getpid()),
                              CollectorRequest::Quiesce(), 1000);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.code(), Errc::kNoCollector);
  EXPECT_EQ(answer.status().code(), StatusCode::kNotFound);
  EXPECT_NE(answer.error().message().find("aon-protocol-test.nobody"), std::string::npos)
      << answer.error().message();
}

TEST(CollectorCall, ErrorReplyIsARefusalWithTheCollectorsReason) {
  FakeCollector collector("ERROR not this collector's user\n");
  ASSERT_TRUE(collector.bound());
  auto answer = CallCollector(collector.name(), CollectorRequest::Quiesce(), 10000);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.code(), Errc::kRefused);
  EXPECT_NE(answer.error().message().find("not this collector's user"), std::string::npos);
}

TEST(CollectorCall, AnswerOfAnotherKindIsRejected) {
  FakeCollector collector("OK dumped\n");  // QUIESCE expects IDLE
  ASSERT_TRUE(collector.bound());
  auto answer = CallCollector(collector.name(), CollectorRequest::Quiesce(), 10000);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.code(), Errc::kUnexpectedReply);
}

TEST(CollectorCall, GarbledAnswerIsAParseError) {
  FakeCollector collector("WHAT\n");
  ASSERT_TRUE(collector.bound());
  auto answer = CallCollector(collector.name(), CollectorRequest::Quiesce(), 10000);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.code(), Errc::kUnknownVerb);
}

TEST(CollectorCall, HangUpWithoutAnswer) {
  FakeCollector collector("");
  ASSERT_TRUE(collector.bound());
  auto answer = CallCollector(collector.name(), CollectorRequest::Quiesce(), 10000);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.code(), Errc::kClosed);
}

TEST(CollectorCall, SilenceIsATimeout) {
  FakeCollector collector("-");
  ASSERT_TRUE(collector.bound());
  auto answer = CallCollector(collector.name(), CollectorRequest::Quiesce(), 50);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.code(), Errc::kTimedOut);
}

}  // namespace
}  // namespace aon
