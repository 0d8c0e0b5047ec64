// The collector protocol (aon/ipc/collector_protocol.h): every request and reply
// survives encode -> parse unchanged, malformed messages are rejected with the
// code that says why, and the client calls (CallCollector) return codes for a
// missing collector, a refusal, a wrong answer, a hang-up and silence, against a
// real listening socket served by a thread of this test. A listener of another
// uid than the one expected is refused before anything is sent; the job's
// collector key is made, read and refused as collector_protocol.h says.
#include "aon/ipc/collector_protocol.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
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
  // This test's own user listens: the endpoint a client of this user expects.
  CollectorEndpoint endpoint() const { return {name_, geteuid()}; }
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
  auto idle = CallCollector(collector.endpoint(), CollectorRequest::Quiesce(), 10000);
  ASSERT_TRUE(idle.ok()) << idle.error().message();
  EXPECT_EQ(*idle, "");
  EXPECT_EQ(collector.received(), "QUIESCE\n");
}

TEST(CollectorCall, TriggerAnsweredOkGivesItsText) {
  FakeCollector collector("OK dumped\n");
  ASSERT_TRUE(collector.bound());
  auto answer = CallCollector(collector.endpoint(), CollectorRequest::Trigger("asked"), 10000);
  ASSERT_TRUE(answer.ok()) << answer.error().message();
  EXPECT_EQ(*answer, "dumped");
  EXPECT_EQ(collector.received(), "TRIGGER asked\n");
}

TEST(CollectorCall, NoCollectorIsItsOwnCode) {
  auto answer = CallCollector({"aon-protocol-test.nobody." + std::to_string(getpid()), geteuid()},
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
  auto answer = CallCollector(collector.endpoint(), CollectorRequest::Quiesce(), 10000);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.code(), Errc::kRefused);
  EXPECT_NE(answer.error().message().find("not this collector's user"), std::string::npos);
}

TEST(CollectorCall, AnswerOfAnotherKindIsRejected) {
  FakeCollector collector("OK dumped\n");  // QUIESCE expects IDLE
  ASSERT_TRUE(collector.bound());
  auto answer = CallCollector(collector.endpoint(), CollectorRequest::Quiesce(), 10000);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.code(), Errc::kUnexpectedReply);
}

TEST(CollectorCall, GarbledAnswerIsAParseError) {
  FakeCollector collector("WHAT\n");
  ASSERT_TRUE(collector.bound());
  auto answer = CallCollector(collector.endpoint(), CollectorRequest::Quiesce(), 10000);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.code(), Errc::kUnknownVerb);
}

TEST(CollectorCall, HangUpWithoutAnswer) {
  FakeCollector collector("");
  ASSERT_TRUE(collector.bound());
  auto answer = CallCollector(collector.endpoint(), CollectorRequest::Quiesce(), 10000);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.code(), Errc::kClosed);
}

TEST(CollectorCall, SilenceIsATimeout) {
  FakeCollector collector("-");
  ASSERT_TRUE(collector.bound());
  auto answer = CallCollector(collector.endpoint(), CollectorRequest::Quiesce(), 50);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.code(), Errc::kTimedOut);
}

TEST(CollectorCall, AnotherUsersListenerIsRefusedBeforeAnythingIsSent) {
  FakeCollector collector("IDLE\n");
  ASSERT_TRUE(collector.bound());
  // The client expects another uid than the one listening (the test's own):
  // exactly what a client sees when another user holds its job's name.
  const uid_t expected = geteuid() + 4242;
  auto answer = CallCollector({collector.name(), expected}, CollectorRequest::Quiesce(), 10000);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.code(), Errc::kWrongPeer);
  EXPECT_EQ(answer.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(answer.error().message().find("held by uid " + std::to_string(geteuid())),
            std::string::npos)
      << answer.error().message();
  EXPECT_NE(answer.error().message().find("nothing was sent"), std::string::npos);
  EXPECT_EQ(collector.received(), "") << "the request reached another user's socket";
}

class CollectorKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/aon-key-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string KeyPath() const { return dir_ + "/" + kCollectorKeyFile; }
  std::string dir_;
};

TEST_F(CollectorKeyTest, CreatedOnceOwnerOnlyAndReadBack) {
  EXPECT_EQ(CollectorKey(dir_, KeyMode::kRead).status().code(), StatusCode::kNotFound);
  auto made = CollectorKey(dir_, KeyMode::kCreate);
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(made->size(), kCollectorKeyChars);
  EXPECT_EQ(made->find_first_not_of("0123456789abcdef"), std::string::npos) << *made;
  struct stat st {};
  ASSERT_EQ(lstat(KeyPath().c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, geteuid());
  // kCreate keeps an existing key; kRead reads it.
  EXPECT_EQ(*CollectorKey(dir_, KeyMode::kCreate), *made);
  EXPECT_EQ(*CollectorKey(dir_, KeyMode::kRead), *made);
  // kRenew replaces it; nothing else is left in the directory.
  auto renewed = CollectorKey(dir_, KeyMode::kRenew);
  ASSERT_TRUE(renewed.ok()) << renewed.status().message();
  EXPECT_NE(*renewed, *made);
  EXPECT_EQ(*CollectorKey(dir_, KeyMode::kRead), *renewed);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_)) ++entries;
  EXPECT_EQ(entries, 1) << "a temporary key file was left behind";
}

TEST_F(CollectorKeyTest, RacingMakersAgreeOnOneKey) {
  std::vector<std::string> keys(8);
  std::vector<std::thread> makers;
  for (std::string& key : keys) {
    makers.emplace_back([&key, this] {
      auto k = CollectorKey(dir_, KeyMode::kCreate);
      key = k.ok() ? *k : "error: " + k.status().message();
    });
  }
  for (std::thread& t : makers) t.join();
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), 1u) << keys[0];
  EXPECT_EQ(keys[0].size(), kCollectorKeyChars) << keys[0];
}

TEST_F(CollectorKeyTest, ALinkOrAKeyOthersMayReadIsRefused) {
  // A link (to a key-looking file) is never followed.
  const std::string elsewhere = dir_ + "/elsewhere";
  std::ofstream(elsewhere) << std::string(kCollectorKeyChars, 'a');
  chmod(elsewhere.c_str(), 0600);
  std::filesystem::create_symlink(elsewhere, KeyPath());
  auto linked = CollectorKey(dir_, KeyMode::kCreate);
  ASSERT_FALSE(linked.ok());
  EXPECT_EQ(linked.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(linked.status().message().find("symbolic link"), std::string::npos)
      << linked.status().message();
  std::filesystem::remove(KeyPath());
  // A key others may read is no secret.
  std::ofstream(KeyPath()) << std::string(kCollectorKeyChars, 'b');
  chmod(KeyPath().c_str(), 0644);
  auto readable = CollectorKey(dir_, KeyMode::kRead);
  ASSERT_FALSE(readable.ok());
  EXPECT_EQ(readable.status().code(), StatusCode::kPermissionDenied);
  // Not a key at all.
  chmod(KeyPath().c_str(), 0600);
  std::ofstream(KeyPath(), std::ios::trunc) << "not a key";
  EXPECT_EQ(CollectorKey(dir_, KeyMode::kRead).status().code(), StatusCode::kDataLoss);
  // The job's endpoint says which file is wrong.
  auto endpoint = JobCollector("job", dir_);
  ASSERT_FALSE(endpoint.ok());
  EXPECT_EQ(endpoint.code(), Errc::kNoKey);
  EXPECT_NE(endpoint.error().message().find(KeyPath()), std::string::npos)
      << endpoint.error().message();
}

TEST(CollectorSocketName, EndsInTheKeyAndFitsAnAbstractAddress) {
  const std::string key(kCollectorKeyChars, 'c');
  const std::string name = CollectorSocketName(1234, "77.0", "/scratch/u/aon-77.0", key);
  EXPECT_EQ(name.rfind("aon-collector.1234.", 0), 0u) << name;
  EXPECT_EQ(name.substr(name.size() - key.size()), key);
  // Stable, and different for another key, job or directory.
  EXPECT_EQ(name, CollectorSocketName(1234, "77.0", "/scratch/u/aon-77.0", key));
  const std::string other_key(kCollectorKeyChars, 'd');
  EXPECT_NE(name, CollectorSocketName(1234, "77.0", "/scratch/u/aon-77.0", other_key));
  EXPECT_NE(name, CollectorSocketName(1234, "77.1", "/scratch/u/aon-77.0", key));
  EXPECT_NE(name, CollectorSocketName(1234, "77.0", "/scratch/u/aon-77.1", key));
  sockaddr_un addr;
  EXPECT_EQ(CollectorAddress(name, &addr), offsetof(sockaddr_un, sun_path) + 1 + name.size())
      << "the name was cut";
}

}  // namespace
}  // namespace aon
