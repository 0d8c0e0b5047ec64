#include "agent.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "aon/format/trace_file.h"
#include "op_ranges.h"

namespace aon::agent {
namespace {

constexpr const char* kAgentVersion = "0.1.0";

// Self-pipe from the signal handler to the agent's thread. Written only with
// write(2), which is async-signal-safe.
int g_signal_pipe[2] = {-1, -1};
constexpr int kHandledSignals[] = {SIGTERM, SIGINT, SIGHUP};

void OnSignal(int sig) {
  unsigned char b = static_cast<unsigned char>(sig);
  int saved = errno;
  if (g_signal_pipe[1] >= 0) (void)!write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

void* SignalThread(void*) {
  unsigned char sig = 0;
  // Also watches the collector's socket for a hangup (events = 0: never
  // consumes the collector's answers, which Finish reads).
  int collector = Agent::Get().collector_fd();
  while (true) {
    pollfd fds[2] = {{g_signal_pipe[0], POLLIN, 0}, {collector, 0, 0}};
    int rc = poll(fds, collector >= 0 ? 2 : 1, -1);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return nullptr;
    if (collector >= 0 && (fds[1].revents & (POLLHUP | POLLERR)) != 0) {
      Agent::Get().OnCollectorLost();
      collector = -1;
    } else if (collector >= 0 && (fds[1].revents & POLLNVAL) != 0) {
      // The application closed our descriptor: the collector still runs and
      // drains the ring; it is only no longer watched from here.
      collector = -1;
    }
    if ((fds[0].revents & POLLIN) == 0) continue;
    ssize_t n = read(g_signal_pipe[0], &sig, 1);
    if (n == 1) break;
    if (n < 0 && errno == EINTR) continue;
    return nullptr;
  }
  char reason[64];
  snprintf(reason, sizeof(reason), "signal %s", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
  Agent::Get().Finish(reason);
  // Now die the way the signal meant to.
  signal(sig, SIG_DFL);
  kill(getpid(), sig);
  return nullptr;
}

void AtExit() { Agent::Get().Finish("exit"); }

// FNV-1a: the job id's hash, the same in every rank (the capture windows' phase).
uint64_t JobSeed(std::string_view job_id) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : job_id) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace

Agent& Agent::Get() {
  // Leaked on purpose: CUPTI and NVTX may call in during static destruction.
  static Agent* agent = new Agent();
  return *agent;
}

Agent::Agent() {
  pid_ = getpid();
  anchor_ = TakeRealtimeAnchor();
  start_ns_ = anchor_.timebase_ns;
  identity_ = DetectRankIdentity();
  auto config = LoadAgentConfig();
  if (config.ok()) {
    config_ = *config;
    config_ok_ = true;
  } else {
    // A bad setting disables capture, never the application.
    fprintf(stderr, "[aon] rank %d: capture disabled: %s\n", identity_.rank,
            config.status().message().c_str());
    notes_.push_back("capture disabled: " + config.status().message());
    capture_disabled_ = config.status().message();
    // Still write the (empty) trace, so the reason reaches the job directory.
    if (const char* dir = getenv(AgentConfigVariable(AgentVar::kOutputDir).env))
      config_.output_dir = dir;
    if (const char* job = getenv(AgentConfigVariable(AgentVar::kJobId).env)) config_.job_id = job;
  }
  if (!config_.job_id.empty()) identity_.job_id = config_.job_id;
  // The launcher (torchrun) loaded us too: entry points still find a valid
  // (empty) agent; nothing starts, nothing is written.
  launcher_process_ = config_.launcher_parent_pid != 0 && config_.launcher_parent_pid == getppid();
  const bool records = config_ok_ && !launcher_process_;
  std::string ring_problem;
  sink_ = std::make_unique<RecordSink>(config_.memory_cap_bytes, static_cast<int32_t>(pid_),
                                       identity_.rank, &ring_problem);
  if (!ring_problem.empty()) notes_.push_back(ring_problem);
  capture_ =
      std::make_unique<CaptureControl>(config_, JobSeed(identity_.job_id), *sink_, *this, records);
  context_ = std::make_unique<SourceContext>(config_, identity_, *sink_, *capture_, *this, records,
                                             !launcher_process_);
  if (launcher_process_) {
    Log("this process is the job's launcher, not a rank: nothing is recorded");
    return;
  }
  BindOpRanges(*sink_, *this);
  sampler_ = HostSampler::Make(*context_);
  capture_->AttachFollower(sampler_.get());
  if (config_.output_dir.empty()) {
    Note("AON_OUTPUT_DIR is not set: the trace of this process will not be written");
  } else {
    // Held once: a job directory renamed or replaced while the job runs does
    // not move this rank's files. One that another user could change (or
    // that is not the job's user's) is refused, and nothing is written.
    auto held = HeldDirectory::Hold(config_.output_dir);
    if (held.ok()) {
      job_dir_ = std::move(held).value();
    } else {
      fprintf(stderr, "[aon] rank %d: %s: the trace of this process will not be written\n",
              identity_.rank, held.status().message().c_str());
    }
  }
  if (config_ok_ && job_dir_.held()) ConnectCollector();
  InstallExitHooks();
  // Clock rendezvous through the job's PMIx (node leaders measure against rank
  // 0, other ranks of a node follow their leader); fetching and measuring run on
  // their own thread, so this returns at once.
  clock_sync_ = clocksync::RankClockSync::Start();
  Log("agent started: rank %d/%d (local %d) on %s, launcher %s, kinds %s, cap %llu bytes",
      identity_.rank, identity_.world_size, identity_.local_rank, identity_.host.c_str(),
      identity_.launcher.c_str(), config_.KindsString().c_str(),
      static_cast<unsigned long long>(config_.memory_cap_bytes));
}

void Agent::ConnectCollector() {
  if (config_.collector == "off") {
    Note(
        "AON_COLLECTOR=off: this rank writes its trace itself at exit (degraded: a killed "
        "process loses it)");
    return;
  }
  if (!sink_->region().valid()) return;
  const std::string path = CollectorLink::FindCollector(config_);
  auto link = CollectorLink::Connect(config_, job_dir_, path, BaseMetadata(), sink_->region().fd());
  if (!link.ok()) {
    Note("no node collector (" + link.status().message() +
         "): this rank writes its trace itself at exit (degraded: a killed process loses it)");
    return;
  }
  collector_ = std::move(link).value();
  if (!collector_->note().empty()) Note(collector_->note());
  Log("node collector writes %s", collector_->rank_file().c_str());
}

void Agent::OnCollectorLost() {
  uint64_t none = 0;
  collector_lost_ns_.compare_exchange_strong(none, TimebaseNowNs(), std::memory_order_acq_rel);
  collector_lost_.store(true, std::memory_order_release);
  Note(
      "the node collector exited while this rank runs: its file keeps what it flushed; the "
      "rest of this rank's records is written by the rank itself, as it runs (degraded)");
  if (getpid() != pid_ || !job_dir_.held() || !sink_->region().valid()) return;
  // The flight recorder keeps its window in memory and writes only on a
  // trigger: its rank writes the ring's content at exit, as before.
  if (config_.mode == CaptureMode::kFlight) return;
  std::lock_guard<std::mutex> lock(takeover_mu_);
  if (takeover_stop_ || takeover_.joinable()) return;  // finishing already, or taken over
  // Exit handlers run in the reverse order of their registration: HDF5's
  // (registered at its first use, it closes every open file) must not run
  // before Finish finishes the file the take-over writes. Started here without
  // it; Finish's handler is registered again after this first use, for the
  // statics it builds.
  StartHdf5WithoutExitHandler();
  std::atexit(AtExit);
  try {
    takeover_ = std::thread([this] { TakeOver(); });
  } catch (const std::system_error& e) {
    Note(std::string("no thread to take the ring over (") + e.what() +
         "): the rank writes what its ring holds at exit");
  }
}

void Agent::TakeOver() {
  pthread_setname_np(pthread_self(), "aon/takeover");  // AON's own: never host-sampled
  // As often as the collector flushes (collector.h: flush_ms), and sooner when
  // the ring fills past a quarter, as it would.
  constexpr auto kPeriod = std::chrono::milliseconds(1000);
  constexpr auto kPoll = std::chrono::milliseconds(20);
  const uint64_t quarter = sink_->ring_bytes() / 4;
  auto last = std::chrono::steady_clock::now() - kPeriod;
  std::unique_lock<std::mutex> lock(takeover_mu_);
  while (!takeover_stop_) {
    const auto now = std::chrono::steady_clock::now();
    const ring::RingHeader* h = sink_->region().header();
    const uint64_t backlog =
        h->head.load(std::memory_order_relaxed) - h->tail.load(std::memory_order_relaxed);
    if (now - last >= kPeriod || backlog > quarter) {
      lock.unlock();
      DrainOwnFile();
      lock.lock();
      last = now;
      if (!own_status_.ok()) return;  // said at exit; the ring keeps what it can
    }
    takeover_cv_.wait_for(lock, kPoll, [&] { return takeover_stop_; });
  }
}

// The take-over thread's (or, once it is joined, Finish's) own file: created
// on first use, the ring drained into it, then flushed, so that what it holds
// is readable even if this process dies before finishing it.
void Agent::DrainOwnFile() {
  if (!own_status_.ok()) return;
  if (own_writer_ == nullptr) {
    auto writer = TraceWriter::Create(
        job_dir_, FreeRankFileName(job_dir_, identity_.rank, getpid()), FileKind::kRank);
    if (!writer.ok()) {
      own_status_ = writer.status();
      return;
    }
    own_writer_ = std::move(writer).value();
  }
  if (own_status_.ok()) own_status_ = sink_->DrainTo(*own_writer_, &own_unwritten_);
  if (own_status_.ok()) own_status_ = sink_->AppendNewStrings(*own_writer_, &own_strings_);
  // As of this flush: what the ring dropped and what did not fit, so that a
  // rank killed from here on still counts them.
  RankMetadata m = BaseMetadata();
  m.collector_lost_ns = collector_lost_ns_.load(std::memory_order_acquire);
  m.end_reason = "running (written by the rank itself up to its last flush)";
  m.truncated = 1;
  m.dropped = sink_->Dropped();
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    m.dropped[k] += own_unwritten_.records[k];
    m.unwritten[k] += own_unwritten_.records[k];
  }
  m.unwritten_why = own_unwritten_.why;
  if (own_status_.ok()) own_status_ = own_writer_->WriteRankMetadata(m);
  if (own_status_.ok()) own_status_ = own_writer_->Flush();
}

void Agent::StopTakeOver() {
  {
    std::lock_guard<std::mutex> lock(takeover_mu_);
    takeover_stop_ = true;
  }
  takeover_cv_.notify_all();
  if (takeover_.joinable()) takeover_.join();
}

RankMetadata Agent::BaseMetadata() const {
  RankMetadata m;
  m.job_id = identity_.job_id;
  m.rank = identity_.rank;
  m.local_rank = identity_.local_rank;
  m.world_size = identity_.world_size;
  m.local_size = identity_.local_size;
  m.host = identity_.host;
  m.pid = pid_;
  m.launcher = identity_.launcher;
  m.clock_domain = kTimebaseName;
  m.anchor_clock_ns = anchor_.timebase_ns;
  m.anchor_realtime_ns = anchor_.realtime_ns;
  m.clock_id = TimebaseClockId();
  m.kinds = config_.KindsString();
  m.memory_cap_bytes = config_.memory_cap_bytes;
  m.agent_version = kAgentVersion;
  m.start_ns = start_ns_;
  m.source = ChoiceName(config_.source);  // what was asked; Finish says what ran
  m.capture_disabled = capture_disabled_;
  return m;
}

void Agent::InstallExitHooks() {
  atexit(AtExit);
  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) {
    Note(std::string("no signal hook (pipe: ") + strerror(errno) + "): a SIGTERM loses the trace");
    return;
  }
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  // The thread must not receive the application's signals itself.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&thread, &attr, SignalThread, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    Note(std::string("no signal hook (thread: ") + strerror(rc) + "): a SIGTERM loses the trace");
    return;
  }
  pthread_setname_np(thread, "aon/signal");
  for (int sig : kHandledSignals) {
    struct sigaction current {};
    sigaction(sig, nullptr, &current);
    // Only where the application keeps the default (termination): an
    // application's own handler usually ends in exit(), which atexit covers.
    if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL) {
      struct sigaction sa {};
      sa.sa_handler = OnSignal;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;
      sigaction(sig, &sa, nullptr);
    }
  }
}

void Agent::Note(const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(meta_mu_);
    for (const std::string& n : notes_) {
      if (n == text) return;
    }
    notes_.push_back(text);
  }
  fprintf(stderr, "[aon] rank %d: %s\n", identity_.rank, text.c_str());
}

void Agent::LogV(const char* fmt, va_list ap) {
  if (config_.verbose <= 0) return;
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  fprintf(stderr, "[aon] rank %d: %s\n", identity_.rank, buf);
}

void Agent::SetSource(const std::string& source) {
  std::lock_guard<std::mutex> lock(meta_mu_);
  source_ = source;
}

void Agent::AddDevice(const DeviceInfo& device) {
  std::lock_guard<std::mutex> lock(meta_mu_);
  for (const DeviceInfo& d : devices_) {
    if (d.device_id == device.device_id) return;
  }
  devices_.push_back(device);
}

void Agent::AddFinishHook(Hook hook) {
  std::lock_guard<std::mutex> lock(meta_mu_);
  for (Hook h : finish_hooks_) {
    if (h == hook) return;
  }
  finish_hooks_.push_back(hook);
}

void Agent::Finish(const char* reason) {
  if (getpid() != pid_) return;  // forked child: the parent owns this rank's file
  if (launcher_process_) return;
  std::call_once(finish_once_, [&] {
    // No take-over starts from here on (a collector that exits after it wrote
    // this rank's file hangs up too), and one under way stops: what it wrote
    // is finished below, by WriteInProcess.
    StopTakeOver();
    // The last step ends and a capture window still open is closed first: its
    // records go through the flush below.
    RankMetadata capture_summary;
    capture_->Finish(&capture_summary);
    if (sampler_) sampler_->Finish();  // its last samples, before the flush below
    if (Hook hook = flush_hook_.load()) hook();
    std::vector<Hook> hooks;
    {
      std::lock_guard<std::mutex> lock(meta_mu_);
      hooks = finish_hooks_;
    }
    for (Hook hook : hooks) hook();
    // Names the ring had no room for, before the producer is closed.
    if (size_t unsent = sink_->ResendDroppedStrings(); unsent > 0) {
      Note(std::to_string(unsent) + " names never reached the trace (ring full at exit)");
    }
    sink_->Close();
    sink_->MarkFinished();
    if (!job_dir_.held()) return;

    RankMetadata m = BaseMetadata();
    m.end_ns = TimebaseNowNs();
    m.end_reason = reason;
    clocksync::SyncResult clock = clock_sync_->Finish();
    m.clock_synchronized = clock.synchronized;
    m.set_clock(clock);
    m.clock_leader_rank = clock.leader_rank;
    Log("clock: %s (offset %lld ns, drift %.3f ppm, bound %lld ns)", clock.note.c_str(),
        static_cast<long long>(clock.offset_ns), clock.drift * 1e6,
        static_cast<long long>(clock.bound_ns));
    // A follower of a node leader other than rank 0 is unsynchronized in its
    // own file until the merge copies its leader's model: not a degradation.
    if (!clock.synchronized && clock.leader_rank < 0 && identity_.world_size != 1) Note(clock.note);
    m.dropped = sink_->Dropped();
    m.collector_lost_ns = collector_lost_ns_.load(std::memory_order_acquire);
    m.capture_mode = capture_summary.capture_mode;
    m.step_source = capture_summary.step_source;
    m.steps = capture_summary.steps;
    m.captured_steps = capture_summary.captured_steps;
    m.windows = capture_summary.windows;
    m.capture_period = capture_summary.capture_period;
    m.overhead_budget = capture_summary.overhead_budget;
    m.window_step_ratio = capture_summary.window_step_ratio;
    m.duty_cycle = capture_summary.duty_cycle;
    m.amortized_cost = capture_summary.amortized_cost;
    {
      std::lock_guard<std::mutex> lock(meta_mu_);
      m.source = source_;
      m.notes = notes_;
      m.devices = devices_;
    }
    if (collector_ && !collector_lost_.load(std::memory_order_acquire)) {
      auto done = collector_->Finish(m, 30000);
      if (done.ok()) {
        Log("collector wrote %s (%s)", done->c_str(), reason);
        return;
      }
      Note("the collector did not finish this rank's file (" + done.error().message() +
           "): written by the rank itself (degraded)");
      // Gone (not merely slow: that one may still finish its file): its
      // .partial holds what it flushed, and aon-merge joins the two.
      if (m.collector_lost_ns == 0 && done.error().code() != CollectorErrc::kTimedOut)
        m.collector_lost_ns = TimebaseNowNs();
      std::lock_guard<std::mutex> lock(meta_mu_);
      m.notes = notes_;
    }
    WriteInProcess(m);
  });
}

void Agent::WriteInProcess(const RankMetadata& m) {
  // The file the take-over thread wrote while the job ran, if any, gets the
  // rest; else a new one.
  StopTakeOver();
  Status st = own_status_;
  if (st.ok() && own_writer_ == nullptr) {
    auto created = TraceWriter::Create(
        job_dir_, FreeRankFileName(job_dir_, identity_.rank, getpid()), FileKind::kRank);
    if (created.ok()) {
      own_writer_ = std::move(created).value();
    } else {
      st = created.status();
    }
  }
  std::unique_ptr<TraceWriter>* writer = &own_writer_;
  if (st.ok()) st = (*writer)->WriteRankMetadata(m);
  RecordSink::Unwritten lost = own_unwritten_;
  if (st.ok()) st = sink_->DrainTo(**writer, &lost);
  if (st.ok()) st = sink_->AppendNewStrings(**writer, &own_strings_);
  if (st.ok() && !lost.why.empty()) {
    // What did not fit is dropped, counted and said, in the file it did not fit in.
    RankMetadata said = m;
    uint64_t n = 0;
    for (size_t k = 0; k < kRecordKindCount; ++k) {
      said.dropped[k] += lost.records[k];
      said.unwritten[k] += lost.records[k];
      n += lost.records[k];
    }
    said.unwritten_why = lost.why;
    said.notes.push_back("rank: " + std::to_string(n) +
                         " records could not be written (counted as dropped): " + lost.why);
    fprintf(stderr, "[aon] rank %d: %s\n", identity_.rank, said.notes.back().c_str());
    st = (*writer)->WriteRankMetadata(said);
  }
  if (st.ok()) st = (*writer)->Finish();
  if (!st.ok()) {
    fprintf(stderr, "[aon] rank %d: writing the trace failed: %s\n", identity_.rank,
            st.message().c_str());
    return;
  }
  Log("wrote %s (%s)", (*writer)->path().c_str(), m.end_reason.c_str());
}

}  // namespace aon::agent
