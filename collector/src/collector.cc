#include "collector.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <deque>
#include <list>
#include <vector>

#include "aon/base/secure_fs.h"
#include "aon/base/timebase.h"
#include "aon/format/metadata_wire.h"
#include "aon/format/trace_file.h"
#include "aon/format/trace_format.h"
#include "aon/ipc/capture_request.h"
#include "aon/ipc/collector_protocol.h"
#include "aon/ipc/record_batches.h"
#include "aon/ipc/shm_ring.h"
#include "counter_sampler.h"
#include "gpm_counters.h"
#include "ring_intake.h"

namespace aon::collector {
namespace {

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  unsigned char b = static_cast<unsigned char>(sig);
  int saved = errno;
  (void)!write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

// Records' clock: the collector's own times (steps, counters) are on it too.
uint64_t NowNs() { return TimebaseNowNs(); }

double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

void Send(int fd, const CollectorReply& reply) {
  const std::string msg = EncodeReply(reply);
  ssize_t n;
  do {
    n = send(fd, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
}

// One received datagram and the descriptor that came with it (-1 if none).
struct Message {
  std::string text;
  int fd = -1;
  bool closed = false;
};

Message ReceiveMessage(int sock) {
  Message m;
  std::string buf(kMaxMessageBytes, '\0');
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = control;
  mh.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return m;
  if (n <= 0) {
    m.closed = true;
    return m;
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (m.fd < 0) {
        m.fd = fd;
      } else {
        close(fd);  // only one descriptor is expected
      }
    }
  }
  buf.resize(static_cast<size_t>(n));
  m.text = std::move(buf);
  return m;
}

// A window chunk (flight mode): what one drain round brought.
struct Chunk {
  uint64_t at_ns;
  RecordBatches records;
};

struct Rank {
  int sock = -1;
  uid_t peer_uid = 0;  // SO_PEERCRED of the connection
  ring::Region region;
  ring::Consumer consumer;
  RankMetadata meta;  // hello, then the final one
  std::string path;
  std::unique_ptr<TraceWriter> writer;
  Status write_error;  // first failure of the file; later records are counted lost
  // The first flush a full disk or a quota refused (TraceWriter::Reserve): its
  // records are counted lost, the file stays whole, later flushes try again.
  Status no_room;

  RingIntake intake;         // strings, record count, steps from the ring
  RecordBatches pending;     // full mode: drained since the last flush
  std::deque<Chunk> window;  // flight mode
  uint64_t window_bytes = 0;
  uint64_t window_expired = 0;  // records that left the window unpersisted

  uint64_t lost_records = 0;                      // drained but not written (file error)
  std::array<uint64_t, kRecordKindCount> lost{};  // the same, per kind
  void Lose(const RecordBatches& b) {
    auto n = b.CountsPerKind();
    for (size_t k = 0; k < kRecordKindCount; ++k) lost[k] += n[k];
    lost_records += b.records();
  }
  std::vector<std::string> notes;
  std::unique_ptr<FlightWatch> watch;
  bool finished = false;  // FINISH received
  bool done = false;      // file closed
  bool ring_broken = false;
  uint64_t request_seq = 0;  // the on-demand request put in this rank's ring
  // The node's GPU counters went into this rank's file (gpm_counters.h).
  uint64_t counter_rows = 0;
};

class Collector {
 public:
  Collector(CollectorOptions options, int listen_fd)
      : o_(std::move(options)),
        listen_fd_(listen_fd),
        start_ns_(NowNs()),
        start_realtime_ns_(RealtimeNowNs()) {}

  int Run();

 private:
  void Log(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void Accept();
  void OnFirstMessage(std::unique_ptr<Rank>& slot, Message m);
  void OnHello(std::unique_ptr<Rank>& r, Message m, const CollectorRequest& hello);
  void OnMessage(Rank& r);
  void HandleControl(int sock, const CollectorRequest& request);
  void DrainAll();
  void Drain(Rank& r, uint64_t now);
  void DrainToEnd(Rank& r);
  void FlushAll();
  void FlushRank(Rank& r);
  void WritePending(Rank& r);
  void WriteStrings(Rank& r, bool final);
  void Finalize(Rank& r, bool died);
  // Dumps every rank's flight window; returns the records dumped.
  uint64_t Trigger(const std::string& reason);
  void CheckWatches(uint64_t now);
  // On demand (aon/ipc/capture_request.h): this node's steps out, requests in.
  void OnDemandTick(uint64_t now);
  // aon-ctl trigger's request in, this node's answer out.
  void TriggerRequestTick();
  // A request file of aon-ctl in the job directory; kNotFound when there is
  // none, or when it was written before this collector started (an earlier
  // run's, in the same directory: its numbers mean nothing now).
  StatusOr<std::string> ReadThisRunsRequest(const char* name) const;
  void SayOnce(const std::string& problem);
  std::string NodeHost() const;
  // GPU counters: one GPM sample of every GPU, the rows into the holder's file.
  // `finishing`: a rank being finalized still counts (its last rows go in).
  // Files the counter rows sampled so far (counter_sampler.h) with the rank
  // that holds the node's counters; `finishing` samples up to now first.
  void FileCounters(const Rank* finishing = nullptr);
  Rank* CounterHolder(const Rank* finishing = nullptr);
  void Fail(Rank& r, const Status& st);
  bool MakeRoom(Rank& r, uint64_t bytes);
  bool flight() const { return o_.mode == CaptureMode::kFlight; }

  CollectorOptions o_;
  // Held from the start (aon/base/secure_fs.h): every file is made through it.
  HeldDirectory dir_;
  int listen_fd_;
  uint64_t start_ns_;
  uint64_t start_realtime_ns_ = 0;  // requests written before it are an earlier run's
  std::list<std::unique_ptr<Rank>> ranks_;
  std::vector<std::unique_ptr<Rank>> pending_hello_;  // connected, HELLO not yet read
  std::vector<int> quiesce_waiters_;
  bool ever_served_ = false;
  uint64_t last_gone_ns_ = 0;
  int dumps_ = 0;
  int64_t drain_period_ms_ = 0;  // current (throttled) drain period
  int64_t max_drain_period_ms_ = 0;
  double last_cpu_s_ = 0;
  uint64_t last_cpu_at_ns_ = 0;
  double peak_cpu_ = 0;                  // highest per-interval CPU use, in cores
  uint64_t steps_written_ = UINT64_MAX;  // the step last written to aon-steps-<host>
  bool has_request_ = false;
  CaptureRequest request_;
  uint64_t trigger_seq_ = 0;   // the last aon-ctl trigger request served
  std::string control_error_;  // the last problem with the control files, said once
  // GPU counters: opened at the first rank, sampled every counters_interval_ms
  // on the sampler's thread.
  bool counters_opened_ = false;
  std::unique_ptr<CounterSampler> sampler_;
  std::vector<std::string> counter_notes_;
  std::vector<CounterRecord> counter_rows_;
  bool counters_noted_ = false;  // the notes went into a file
};

void Collector::Log(const char* fmt, ...) {
  if (!o_.verbose) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  fprintf(stderr, "[aon] collector %d: %s\n", static_cast<int>(getpid()), buf);
}

void Collector::Accept() {
  while (true) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    // Only our own user, and root for control requests (slurmstepd ends a
    // step's collector): collector_protocol.h says who may talk to whom. A
    // HELLO from root is refused in OnFirstMessage.
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        (cred.uid != geteuid() && cred.uid != 0)) {
      fprintf(stderr,
              "[aon] collector: refused a connection from uid %u (pid %d): not this "
              "collector's user\n",
              static_cast<unsigned>(cred.uid), static_cast<int>(cred.pid));
      Send(fd, {CollectorReplyKind::kError, "not this collector's user"});
      close(fd);
      continue;
    }
    auto r = std::make_unique<Rank>();
    r->sock = fd;
    r->peer_uid = cred.uid;
    pending_hello_.push_back(std::move(r));
  }
}

void Collector::HandleControl(int sock, const CollectorRequest& request) {
  switch (request.verb) {
    case CollectorVerb::kTrigger:
      if (!flight()) {
        Send(sock, {CollectorReplyKind::kOk, "full mode: everything is already being written"});
      } else {
        Trigger(request.argument.empty() ? "requested" : request.argument);
        Send(sock, {CollectorReplyKind::kOk, "dumped"});
      }
      close(sock);
      return;
    case CollectorVerb::kQuiesce:
      quiesce_waiters_.push_back(sock);  // answered IDLE when every file is closed
      return;
    case CollectorVerb::kHello:
    case CollectorVerb::kFinish:
      break;
  }
  Send(sock, {CollectorReplyKind::kError,
              std::string(CollectorVerbName(request.verb)) + " is not a control request"});
  close(sock);
}

// A new connection's first message: a rank's HELLO, or a control request that
// is answered once.
void Collector::OnFirstMessage(std::unique_ptr<Rank>& slot, Message m) {
  auto request = ParseRequest(m.text);
  if (request.ok() && request->verb == CollectorVerb::kHello) {
    if (slot->peer_uid != geteuid()) {
      // A ring is taken only from this collector's own user's processes.
      fprintf(stderr, "[aon] collector: refused a HELLO from uid %u: rings come only from uid %u\n",
              static_cast<unsigned>(slot->peer_uid), static_cast<unsigned>(geteuid()));
      Send(slot->sock,
           {CollectorReplyKind::kError, "HELLO is taken only from this collector's user"});
      if (m.fd >= 0) close(m.fd);
      close(slot->sock);
      slot->sock = -1;
      return;
    }
    OnHello(slot, std::move(m), *request);
    return;
  }
  const int sock = slot->sock;
  slot->sock = -1;
  if (m.fd >= 0) close(m.fd);
  if (!request.ok()) {
    fprintf(stderr, "[aon] collector: refused a connection: %s: %s\n",
            CollectorErrcName(request.code()), request.error().message().c_str());
    Send(sock, {CollectorReplyKind::kError, request.error().message()});
    close(sock);
    return;
  }
  HandleControl(sock, *request);
}

void Collector::OnHello(std::unique_ptr<Rank>& slot, Message m, const CollectorRequest& hello) {
  Rank& r = *slot;
  auto refuse = [&](const std::string& why) {
    fprintf(stderr, "[aon] collector: refused a rank: %s\n", why.c_str());
    Send(r.sock, {CollectorReplyKind::kError, why});
    if (m.fd >= 0) close(m.fd);
    close(r.sock);
    r.sock = -1;
  };
  if (m.fd < 0) return refuse("HELLO without a ring");
  auto meta = DecodeRankMetadata(hello.body);
  if (!meta.ok()) return refuse(meta.status().message());
  auto region = ring::Region::Attach(m.fd);  // takes the fd
  m.fd = -1;
  if (!region.ok())
    return refuse("rank " + std::to_string(meta->rank) + ": " + region.status().message());
  r.meta = std::move(meta).value();
  r.region = std::move(region).value();
  // Drained records stay in the ring until they are in the file (FlushRank):
  // if this collector dies in between, the rank reads them again.
  r.consumer = ring::Consumer(r.region, ring::Consumer::Keep::kUntilReleased);
  const std::string name = FreeRankFileName(dir_, r.meta.rank, r.meta.pid);
  r.path = dir_.path() + "/" + name;
  // Small chunks: each append re-compresses the last partial chunk of every
  // dataset, so 4096-record chunks cut a flush from ~60 ms to ~14 ms
  // (bench/RESULTS.md, "Collector drain and HDF5 append") for +0.6 B/kernel record.
  WriteOptions wo;
  wo.chunk_records = 4096;
  auto writer = TraceWriter::Create(dir_, name, FileKind::kRank, wo);
  if (!writer.ok()) return refuse(writer.status().message());
  r.writer = std::move(writer).value();
  // Room to finish the file, whatever comes: no room now refuses the rank.
  if (!MakeRoom(r, 0)) {
    r.writer.reset();
    unlink(dir_.At(name + ".partial").c_str());  // empty: nothing of the rank is lost
    return refuse(r.no_room.message());
  }
  RankMetadata running = r.meta;
  running.end_reason = "running (written by the node collector up to its last flush)";
  running.truncated = 1;
  Status st = r.writer->WriteRankMetadata(running);
  if (st.ok()) st = r.writer->Flush();
  if (!st.ok()) return refuse(st.message());
  r.watch = std::make_unique<FlightWatch>(o_.flight);
  Send(r.sock, {CollectorReplyKind::kOk, r.path});
  Log("rank %d (pid %lld) -> %s, ring %llu bytes", r.meta.rank, static_cast<long long>(r.meta.pid),
      r.path.c_str(), static_cast<unsigned long long>(r.region.ring_bytes()));
  ever_served_ = true;
  ranks_.push_back(std::move(slot));
}

void Collector::Fail(Rank& r, const Status& st) {
  if (!r.write_error.ok()) return;
  r.write_error = st;
  fprintf(
      stderr,
      "[aon] collector: rank %d: writing %s failed: %s; its later records are counted as lost\n",
      r.meta.rank, r.path.c_str(), st.message().c_str());
}

// Room in the rank's file for `bytes` of records, the names not yet written
// and what finishing the file writes (the metadata and notes), reserved before
// a flush writes anything: a full disk refuses the flush whole, and the file
// stays readable and can still be finished. False: refused (said once).
bool Collector::MakeRoom(Rank& r, uint64_t bytes) {
  for (const std::string& s : r.intake.Unwritten(false)) bytes += s.size() + 8;
  const Status st = r.writer->Reserve(bytes + TraceWriter::kFinishRoom);
  if (st.ok()) return true;
  if (r.no_room.ok()) {
    r.no_room = st;
    fprintf(stderr,
            "[aon] collector: rank %d: %s; records are counted as lost until there is room\n",
            r.meta.rank, st.message().c_str());
  }
  return false;
}

void Collector::Drain(Rank& r, uint64_t now) {
  if (r.ring_broken || r.done) return;
  RecordBatches* into = &r.pending;
  if (flight()) {
    if (r.window.empty() ||
        r.window.back().at_ns + static_cast<uint64_t>(o_.drain_ms) * 1000000ull * 10 < now) {
      r.window.push_back(Chunk{now, RecordBatches()});
    }
    into = &r.window.back().records;
  }
  const uint64_t before = into->bytes();
  auto drained = r.consumer.Drain([&](const ring::Entry& e) {
    const std::string reason = r.intake.Take(e, *into, flight() ? r.watch.get() : nullptr, now);
    if (!reason.empty()) {
      Trigger("rank " + std::to_string(r.meta.rank) + ": " + reason);
      // Trigger moved every window (this chunk included) to the file.
      into = &r.window.emplace_back(Chunk{now, RecordBatches()}).records;
    }
  });
  if (!drained.ok()) {
    r.ring_broken = true;
    r.notes.push_back("collector: ring of this rank is corrupt, not read further: " +
                      drained.status().message());
    fprintf(stderr, "[aon] collector: rank %d: %s\n", r.meta.rank,
            drained.status().message().c_str());
  }
  if (flight()) {
    // The window is kept in memory by design (written only when a trigger
    // fires): the ring is not the place to keep it too.
    r.consumer.Release();
    r.window_bytes += into->bytes() - before;
    // Keep the window: by age, and by the rank's memory cap.
    const uint64_t horizon = static_cast<uint64_t>(o_.window_s * 1e9);
    const uint64_t cap = r.meta.memory_cap_bytes > 0 ? r.meta.memory_cap_bytes : (64ull << 20);
    while (r.window.size() > 1 &&
           (r.window.front().at_ns + horizon < now || r.window_bytes > cap)) {
      r.window_bytes -= r.window.front().records.bytes();
      r.window_expired += r.window.front().records.records();
      r.window.pop_front();
    }
  }
}

// Everything committed to the ring by now (a dead process's ring stays mapped
// here); bounded, in case a live producer keeps writing.
void Collector::DrainToEnd(Rank& r) {
  for (int i = 0; i < 1000; ++i) {
    const uint64_t before = r.intake.records();
    Drain(r, NowNs());
    if (r.intake.records() == before) break;
  }
}

// The node's GPU rows go into one rank file of the node: the lowest rank still
// running (its clock is the node's; /meta/devices ties ranks to GPUs by UUID).
Rank* Collector::CounterHolder(const Rank* finishing) {
  Rank* holder = nullptr;
  for (auto& r : ranks_) {
    if (r->done || (r->finished && r.get() != finishing) || !r->write_error.ok()) continue;
    if (holder == nullptr || r->meta.rank < holder->meta.rank) holder = r.get();
  }
  return holder;
}

void Collector::FileCounters(const Rank* finishing) {
  if (!counters_opened_) {
    counters_opened_ = true;
    std::unique_ptr<GpmCounters> gpm;
    if (o_.counters != CounterMode::kOff) gpm = GpmCounters::Open(&counter_notes_);
    if (gpm != nullptr) {
      sampler_ = std::make_unique<CounterSampler>(
          std::move(gpm), static_cast<uint64_t>(o_.counters_interval_ms) * 1000000ull);
      counter_notes_.push_back(
          "counters: NVML GPM metrics of " + std::to_string(sampler_->active_gpus()) +
          " GPU(s) of this node every " + std::to_string(o_.counters_interval_ms) +
          " ms, read by the " + "collector from " + sampler_->library());
    }
  }
  if (sampler_ == nullptr) return;
  counter_rows_.clear();
  if (finishing != nullptr) {
    sampler_->SampleNowAndTake(&counter_rows_, &counter_notes_);
  } else {
    sampler_->Take(&counter_rows_, &counter_notes_);
  }
  Rank* holder = CounterHolder(finishing);
  if (holder == nullptr || counter_rows_.empty()) return;
  RecordBatches& into =
      flight() && !holder->window.empty() ? holder->window.back().records : holder->pending;
  into.Push<CounterRecord>(counter_rows_);
  holder->counter_rows += counter_rows_.size();
}

void Collector::DrainAll() {
  const uint64_t now = NowNs();
  for (auto& r : ranks_) {
    Drain(*r, now);
    // A rank producing fast is written before its flush interval ends: what
    // the collector holds per rank stays below a quarter of that rank's ring.
    if (!flight() && !r->done && r->region.valid() &&
        r->pending.bytes() > r->region.ring_bytes() / 4) {
      FlushRank(*r);
    }
  }
}

void Collector::WriteStrings(Rank& r, bool final) {
  if (!r.write_error.ok()) return;
  const std::span<const std::string> next = r.intake.Unwritten(final);
  if (next.empty()) return;
  Status st = r.writer->AppendStrings(next);
  if (!st.ok()) return Fail(r, st);
  r.intake.Written(next.size());
}

void Collector::FlushRank(Rank& r) {
  if (r.done) return;
  WritePending(r);
  // Written, or counted lost: either way out of the collector's hands, and
  // out of the ring.
  r.consumer.Release();
}

void Collector::WritePending(Rank& r) {
  if (!r.write_error.ok()) {
    r.Lose(r.pending);
    r.pending.Clear();
    return;
  }
  if (!MakeRoom(r, r.pending.bytes())) {
    r.Lose(r.pending);
    r.pending.Clear();
    return;
  }
  Status st = r.pending.AppendTo(*r.writer);
  if (!st.ok()) {
    // What did not reach the file counts as lost (a partial append included).
    r.Lose(r.pending);
    r.pending.Clear();
    return Fail(r, st);
  }
  r.pending.Clear();
  WriteStrings(r, false);
  st = r.writer->SetMetaAttribute("last_record_ns", r.intake.last_record_ns());
  if (st.ok()) st = r.writer->SetMetaAttribute("end_ns", r.intake.last_record_ns());
  if (st.ok()) st = r.writer->Flush();
  if (!st.ok()) Fail(r, st);
}

void Collector::FlushAll() {
  if (flight()) return;
  for (auto& r : ranks_) FlushRank(*r);
}

uint64_t Collector::Trigger(const std::string& reason) {
  ++dumps_;
  uint64_t total = 0;
  fprintf(stderr, "[aon] collector: flight recorder dump %d: %s\n", dumps_, reason.c_str());
  for (auto& rp : ranks_) {
    Rank& r = *rp;
    if (r.done) continue;
    uint64_t n = 0, first = UINT64_MAX, last = 0, bytes = 0;
    for (const Chunk& c : r.window) bytes += c.records.bytes();
    const bool room = r.write_error.ok() && MakeRoom(r, bytes);
    for (Chunk& c : r.window) {
      n += c.records.records();
      if (n > 0) {
        first = std::min(first, c.at_ns);
        last = std::max(last, c.at_ns);
      }
      if (room && r.write_error.ok()) {
        Status st = c.records.AppendTo(*r.writer);
        if (!st.ok()) Fail(r, st);
      }
      if (!room || !r.write_error.ok()) r.Lose(c.records);
      c.records.Release();
    }
    r.window.clear();
    r.window_bytes = 0;
    if (room) WriteStrings(r, false);
    if (room && r.write_error.ok()) {
      Status st = r.writer->Flush();
      if (!st.ok()) Fail(r, st);
    }
    char buf[256];
    snprintf(buf, sizeof(buf), "flight recorder dump %d: %s: %llu records (the last %.1f s)",
             dumps_, reason.c_str(), static_cast<unsigned long long>(n),
             n > 0 ? static_cast<double>(last - first) / 1e9 : 0.0);
    r.notes.push_back(buf);
    total += n;
  }
  return total;
}

void Collector::CheckWatches(uint64_t now) {
  if (!flight()) return;
  for (auto& r : ranks_) {
    if (r->done || r->finished) continue;
    std::string reason = r->watch->Check(now);
    if (!reason.empty()) Trigger("rank " + std::to_string(r->meta.rank) + ": " + reason);
  }
}

void Collector::SayOnce(const std::string& problem) {
  if (problem == control_error_) return;
  control_error_ = problem;
  fprintf(stderr, "[aon] collector: %s\n", problem.c_str());
}

std::string Collector::NodeHost() const {
  for (const auto& r : ranks_) {
    if (!r->meta.host.empty()) return r->meta.host;
  }
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "node";
  return name;
}

StatusOr<std::string> Collector::ReadThisRunsRequest(const char* name) const {
  uint64_t written_at = 0;
  auto text = ReadPrivateFile(dir_.At(name), kControlFileMaxBytes, &written_at);
  if (text.ok() && written_at < start_realtime_ns_)
    return Status(StatusCode::kNotFound, dir_.path() + "/" + name + ": from an earlier run");
  return text;
}

void Collector::TriggerRequestTick() {
  const std::string path = dir_.path() + "/" + kTriggerRequestFile;
  auto text = ReadThisRunsRequest(kTriggerRequestFile);
  if (!text.ok()) {
    if (text.status().code() != StatusCode::kNotFound)
      SayOnce("flight-recorder trigger request ignored: " + dir_.Shown(text.status().message()));
    return;
  }
  auto request = ParseTriggerRequest(*text, path);
  if (!request.ok()) {
    SayOnce("flight-recorder trigger request ignored: " + request.status().message());
    return;
  }
  if (request->seq == trigger_seq_) return;
  trigger_seq_ = request->seq;
  TriggerAnswer a;
  a.host = NodeHost();
  a.seq = request->seq;
  if (flight()) {
    const uint64_t n = Trigger("requested (aon ctl trigger" +
                               (request->reason.empty() ? "" : ": " + request->reason) + ")");
    a.dumped = true;
    a.what = "flight recorder dump " + std::to_string(dumps_) + ": " + std::to_string(n) +
             " records of " + std::to_string(ranks_.size()) + " rank(s) written";
  } else {
    a.what = std::string("nothing to dump: the job runs in ") +
             (o_.mode == CaptureMode::kFull ? "full" : "budgeted") +
             " mode, not flight (aon ctl capture traces steps on demand)";
  }
  const Status st = WriteFileAtomically(
      dir_.At(std::string(kTriggerAnswerPrefix) + HostFilePart(a.host)), FormatTriggerAnswer(a));
  if (!st.ok()) SayOnce("cannot answer aon-ctl trigger: " + dir_.Shown(st.message()));
}

void Collector::OnDemandTick(uint64_t now) {
  if (o_.output_dir.empty()) return;
  TriggerRequestTick();
  // Out: the latest step any rank of this node began.
  const Rank* latest = nullptr;
  uint32_t with_steps = 0;
  for (const auto& r : ranks_) {
    if (!r->intake.steps().seen) continue;
    ++with_steps;
    if (latest == nullptr || r->intake.steps().begun > latest->intake.steps().begun)
      latest = r.get();
  }
  if (latest != nullptr && latest->intake.steps().begun != steps_written_) {
    const RankSteps& steps = latest->intake.steps();
    const uint64_t real_now = RealtimeNowNs();
    NodeSteps n;
    n.host = latest->meta.host;
    n.step = steps.begun;
    n.source = steps.source;
    n.step_ns = steps.step_ns;
    for (auto& r : ranks_) {
      const RankSteps& rs = r->intake.steps();
      if (rs.seen && rs.source == steps.source && rs.fastest_ns > 0)
        n.step_ns = std::min(n.step_ns == 0 ? UINT64_MAX : n.step_ns, rs.fastest_ns);
    }
    n.at_realtime_ns = real_now - std::min(real_now, now - std::min(now, steps.begun_ns));
    n.ranks = with_steps;
    const Status st = WriteFileAtomically(
        dir_.At(std::string(kNodeStepsPrefix) + HostFilePart(n.host)), FormatNodeSteps(n));
    if (st.ok()) {
      steps_written_ = steps.begun;
      for (auto& r : ranks_) r->intake.ResetFastestStep();
    } else {
      SayOnce("cannot publish this node's steps for aon-ctl: " + dir_.Shown(st.message()));
    }
  }
  // In: a new request, handed to every rank that has not had it.
  const std::string path = dir_.path() + "/" + kCaptureRequestFile;
  auto text = ReadThisRunsRequest(kCaptureRequestFile);
  if (text.ok()) {
    auto request = ParseCaptureRequest(*text, path);
    if (!request.ok()) {
      SayOnce("on-demand capture request ignored: " + request.status().message());
    } else if (!has_request_ || request->seq != request_.seq) {
      has_request_ = true;
      request_ = *request;
      Log("on-demand capture %llu: steps %llu..%llu", static_cast<unsigned long long>(request_.seq),
          static_cast<unsigned long long>(request_.first_step),
          static_cast<unsigned long long>(request_.first_step + request_.steps - 1));
    }
  } else if (text.status().code() != StatusCode::kNotFound) {
    SayOnce("on-demand capture request ignored: " + dir_.Shown(text.status().message()));
  }
  if (!has_request_) return;
  for (auto& r : ranks_) {
    if (r->done || r->ring_broken || r->request_seq == request_.seq) continue;
    ring::RingHeader* h = r->region.header();
    h->capture_first_step.store(request_.first_step, std::memory_order_relaxed);
    h->capture_steps.store(request_.steps, std::memory_order_relaxed);
    h->capture_source.store(static_cast<uint32_t>(request_.source), std::memory_order_relaxed);
    h->capture_seq.store(request_.seq, std::memory_order_release);
    r->request_seq = request_.seq;
  }
}

void Collector::Finalize(Rank& r, bool died) {
  if (r.done) return;
  // Everything that reached the ring (a dead process's ring stays mapped here).
  DrainToEnd(r);
  // The GPU counters up to now, while this file may still hold them.
  if (sampler_ != nullptr && CounterHolder(&r) == &r) FileCounters(&r);
  if (r.counter_rows > 0 || (counters_opened_ && !counters_noted_)) {
    for (const std::string& n : counter_notes_) r.notes.push_back(n);
    if (r.counter_rows > 0) {
      r.notes.push_back("counters: this file holds " + std::to_string(r.counter_rows) +
                        " GPU counter rows of the node's GPUs (while it was the node's lowest "
                        "running rank)");
    }
    counters_noted_ = true;
  }
  if (r.consumer.Backlog() > 0 && !r.ring_broken) {
    r.notes.push_back("collector: " + std::to_string(r.consumer.Backlog()) +
                      " bytes of the ring were reserved but never committed (the process died "
                      "while writing them)");
  }
  if (!flight()) {
    FlushRank(r);
  } else if (died) {
    Trigger("rank " + std::to_string(r.meta.rank) + " ended without finishing (killed?)");
  } else if (!r.window.empty()) {
    uint64_t n = 0;
    for (const Chunk& c : r.window) n += c.records.records();
    r.window_expired += n;
    r.window.clear();
  }
  if (flight() && r.window_expired > 0) {
    r.notes.push_back("flight mode: " + std::to_string(r.window_expired) +
                      " records left the window without a trigger and were not persisted");
  }
  WriteStrings(r, true);

  RankMetadata m = r.meta;
  if (died) {
    m.truncated = 1;
    m.end_ns = r.intake.last_record_ns();
    m.end_reason = "process ended without finishing (killed?): trace truncated";
  } else {
    m.truncated = 0;
  }
  m.last_record_ns = r.intake.last_record_ns();
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    if (r.region.valid()) m.dropped[k] = std::max(m.dropped[k], r.consumer.Dropped(k));
    m.dropped[k] += r.lost[k];  // received, not written: counted whatever became of the ring
    m.unwritten[k] = r.lost[k];
  }
  const Status& lost_why = r.write_error.ok() ? r.no_room : r.write_error;
  m.unwritten_why = r.lost_records > 0 ? lost_why.message() : "";
  if (r.region.valid()) {
    if (uint64_t s = r.consumer.Dropped(ring::kStringDropSlot); s > 0) {
      r.notes.push_back("ring full: " + std::to_string(s) + " names were dropped at first use");
    }
  }
  if (uint64_t n = r.intake.refused_strings(); n > 0) {
    r.notes.push_back(
        "collector: " + std::to_string(n) +
        " names from the ring were not taken: their ids were implausible (more than " +
        std::to_string(RingIntake::kMaxIdLead) + " past the names received)");
  }

  if (r.lost_records > 0) {
    const std::string lost =
        "collector: " + std::to_string(r.lost_records) +
        " records could not be written (counted as dropped): " + lost_why.message();
    r.notes.push_back(lost);
    fprintf(stderr, "[aon] rank %d: %s\n", r.meta.rank, lost.c_str());
  }
  char cpu[300];
  const double wall = static_cast<double>(NowNs() - start_ns_) / 1e9;
  snprintf(cpu, sizeof(cpu),
           "collector pid %d, %.2f s CPU in %.1f s (%.2f %%, peak %.0f %% of a core per interval, "
           "budget %.0f %%; slowest drain period %lld ms), %zu ranks, %llu records from this rank",
           static_cast<int>(getpid()), CpuSeconds(), wall,
           wall > 0 ? 100.0 * CpuSeconds() / wall : 0.0, 100.0 * peak_cpu_, 100.0 * o_.cpu_budget,
           static_cast<long long>(max_drain_period_ms_), ranks_.size(),
           static_cast<unsigned long long>(r.intake.records()));
  r.notes.push_back(cpu);
  for (const std::string& n : r.notes) m.notes.push_back(n);

  Status st = r.write_error;
  if (st.ok()) st = r.writer->WriteRankMetadata(m);
  if (st.ok()) st = r.writer->Finish();
  if (!st.ok()) {
    Fail(r, st);
    fprintf(stderr, "[aon] collector: rank %d: the trace file %s could not be finished: %s\n",
            r.meta.rank, r.path.c_str(), st.message().c_str());
  }
  r.writer.reset();
  r.done = true;
  last_gone_ns_ = NowNs();
  if (r.sock >= 0) {
    if (died) {
      close(r.sock);
      r.sock = -1;
    } else {
      CollectorReply answer{CollectorReplyKind::kDone, r.path};
      if (!st.ok()) answer = {CollectorReplyKind::kError, st.message()};
      if (st.ok() && r.lost_records > 0) {
        answer.text +=
            " (" + std::to_string(r.lost_records) + " records lost: " + m.unwritten_why + ")";
      }
      Send(r.sock, answer);
    }
  }
  Log("rank %d finished (%s): %llu records", r.meta.rank, died ? "died" : "exit",
      static_cast<unsigned long long>(r.intake.records()));
}

void Collector::OnMessage(Rank& r) {
  Message m = ReceiveMessage(r.sock);
  if (m.fd >= 0) close(m.fd);
  if (m.closed) {
    // Closed without FINISH: the rank died.
    if (!r.finished) Finalize(r, /*died=*/true);
    if (r.sock >= 0) {
      close(r.sock);
      r.sock = -1;
    }
    return;
  }
  if (m.text.empty()) return;
  auto request = ParseRequest(m.text);
  if (!request.ok()) {
    Log("rank %d: ignored a message: %s", r.meta.rank, request.error().message().c_str());
    return;
  }
  if (request->verb == CollectorVerb::kFinish) {
    auto meta = DecodeRankMetadata(request->body);
    if (meta.ok()) {
      r.meta = std::move(meta).value();
    } else {
      r.notes.push_back("collector: unreadable final metadata: " + meta.status().message());
    }
    r.finished = true;
    if (flight()) {
      // Held in the window until the collector exits (a late trigger, such
      // as the job failing, can still persist it).
      DrainToEnd(r);
      Send(r.sock, {CollectorReplyKind::kDone, r.path});
      last_gone_ns_ = NowNs();
    } else {
      Finalize(r, /*died=*/false);
    }
  } else if (request->verb == CollectorVerb::kTrigger) {
    HandleControl(dup(r.sock), *request);
  } else {
    Log("rank %d: ignored %s on a rank's connection", r.meta.rank,
        CollectorVerbName(request->verb));
  }
}

int Collector::Run() {
  // The job directory held once: a path renamed or replaced while the job
  // runs does not move the files written below.
  auto held = HeldDirectory::Hold(o_.output_dir);
  if (!held.ok()) {
    Log("%s: no rank is served here (each writes its own file)", held.status().message().c_str());
    return 1;
  }
  dir_ = std::move(held).value();
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return 1;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGUSR1, SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Below the application's threads: the collector takes what the node spares.
  setpriority(PRIO_PROCESS, 0, 5);

  uint64_t next_flush = NowNs() + static_cast<uint64_t>(o_.flush_ms) * 1000000ull;
  drain_period_ms_ = max_drain_period_ms_ = o_.drain_ms;
  last_cpu_at_ns_ = NowNs();
  last_cpu_s_ = CpuSeconds();
  bool stop = false;
  const int64_t linger = flight() ? std::max<int64_t>(o_.linger_ms, 5000) : o_.linger_ms;
  while (!stop) {
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    fds.push_back({g_signal_pipe[0], POLLIN, 0});
    for (auto& r : pending_hello_) fds.push_back({r->sock, POLLIN, 0});
    std::vector<Rank*> polled;
    for (auto& r : ranks_) {
      if (r->sock >= 0) fds.push_back({r->sock, POLLIN, 0}), polled.push_back(r.get());
    }
    const size_t n_pending = pending_hello_.size();
    int rc = poll(fds.data(), fds.size(), static_cast<int>(drain_period_ms_));
    if (rc < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) {
      unsigned char sig;
      while (read(g_signal_pipe[0], &sig, 1) == 1) {
        if (sig == SIGUSR1) {
          Trigger("SIGUSR1");
        } else {
          stop = true;
        }
      }
    }
    // Rings first, then messages: a FINISH finds the ring drained up to now.
    DrainAll();
    if (!ranks_.empty()) FileCounters();
    for (size_t i = 0; i < polled.size(); ++i) {
      if ((fds[2 + n_pending + i].revents & (POLLIN | POLLHUP | POLLERR)) != 0)
        OnMessage(*polled[i]);
    }
    // New connections: their first message is a HELLO (a rank) or a control verb.
    std::vector<std::unique_ptr<Rank>> still_waiting;
    for (size_t i = 0; i < n_pending; ++i) {
      std::unique_ptr<Rank>& slot = pending_hello_[i];
      if ((fds[2 + i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
        still_waiting.push_back(std::move(slot));
        continue;
      }
      Message m = ReceiveMessage(slot->sock);
      if (m.closed) {
        close(slot->sock);
      } else if (m.text.empty()) {
        still_waiting.push_back(std::move(slot));
      } else {
        OnFirstMessage(slot, std::move(m));  // a HELLO moves a rank into ranks_
      }
    }
    for (size_t i = n_pending; i < pending_hello_.size(); ++i)
      still_waiting.push_back(std::move(pending_hello_[i]));
    pending_hello_.swap(still_waiting);
    if (fds[0].revents & POLLIN) Accept();
    const uint64_t now = NowNs();
    if (now >= next_flush) {
      FlushAll();
      CheckWatches(now);
      OnDemandTick(now);
      // CPU budget: measured over the interval that just ended.
      const double cpu = CpuSeconds();
      const double cores = (cpu - last_cpu_s_) / (static_cast<double>(now - last_cpu_at_ns_) / 1e9);
      peak_cpu_ = std::max(peak_cpu_, cores);
      if (cores > o_.cpu_budget) {
        drain_period_ms_ = std::min(drain_period_ms_ * 2, o_.drain_ms * 25);
      } else if (cores < o_.cpu_budget / 2) {
        drain_period_ms_ = std::max(drain_period_ms_ / 2, o_.drain_ms);
      }
      max_drain_period_ms_ = std::max(max_drain_period_ms_, drain_period_ms_);
      last_cpu_s_ = cpu;
      last_cpu_at_ns_ = now;
      next_flush = now + static_cast<uint64_t>(o_.flush_ms) * 1000000ull;
    }
    // Forget ranks whose file is closed and whose socket is gone.
    for (auto it = ranks_.begin(); it != ranks_.end();) {
      if ((*it)->done && (*it)->sock < 0) {
        it = ranks_.erase(it);
      } else {
        ++it;
      }
    }
    bool live = false;
    for (auto& r : ranks_) live = live || !r->finished || r->sock >= 0;
    live = live || !pending_hello_.empty();
    if (!live && !quiesce_waiters_.empty()) break;
    if (!live) {
      const uint64_t since = ever_served_ ? last_gone_ns_ : start_ns_;
      const int64_t wait = ever_served_ ? linger : o_.idle_exit_ms;
      if (now > since + static_cast<uint64_t>(wait) * 1000000ull) break;
    }
  }
  // Exit (linger over, QUIESCE, or a signal): finish every file still open.
  for (auto& r : ranks_) {
    if (!r->done) Finalize(*r, /*died=*/!r->finished);
  }
  for (int s : quiesce_waiters_) {
    Send(s, {CollectorReplyKind::kIdle, ""});
    close(s);
  }
  Log("exiting: %.2f s CPU", CpuSeconds());
  return 0;
}

}  // namespace

StatusOr<int> BindListener(const std::string& socket_name) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoStatus("socket", errno);
  sockaddr_un addr;
  socklen_t len = CollectorAddress(socket_name, &addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    int err = errno;
    close(fd);
    if (err == EADDRINUSE) return Unavailable("another collector serves '" + socket_name + "'");
    return ErrnoStatus("binding '" + socket_name + "'", err);
  }
  if (listen(fd, 256) != 0) {
    int err = errno;
    close(fd);
    return ErrnoStatus("listen", err);
  }
  return fd;
}

int RunCollector(const CollectorOptions& options, int listen_fd) {
  Collector c(options, listen_fd);
  return c.Run();
}

}  // namespace aon::collector
