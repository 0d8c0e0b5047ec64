#include "host_sampler.h"

#include <cxxabi.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "aon/base/timebase.h"
#include "aon/format/records.h"

namespace aon::agent {
namespace {

constexpr int kMaxFrames = 48;
constexpr int kMaxThreads = 256;
constexpr auto kDrainEvery = std::chrono::milliseconds(20);
// New threads are looked for at every drain while a window is open (a
// thread that lives less than that may go unsampled), every 200 ms outside;
// armed threads' signal masks are checked every 100 ms of a window.
constexpr int kScanEveryDrains = 10;
constexpr int kMaskEveryDrains = 5;

struct RawSample {
  uint64_t time_ns;
  uint64_t pc;
  uint16_t frames;
  uint8_t flags;
  uint8_t padding[5];
  uint64_t code[kMaxFrames];
  uint64_t instr[kMaxFrames];
};

// One thread's ring: the handler on that thread produces, the sampler's
// thread consumes. Slots are never freed (a late signal may still look one
// up); a thread that ended leaves its slot to the next new thread.
struct Slot {
  std::atomic<int> tid{0};
  std::atomic<bool> armed{false};
  std::atomic<uint32_t> head{0};
  std::atomic<uint32_t> tail{0};
  std::atomic<uint64_t> dropped{0};
  std::atomic<int> fd{-1};    // its perf event, closed by a forked child at once
  uint32_t capacity = 0;      // samples in ring, a power of two
  RawSample* ring = nullptr;  // right after the slot, in the same mapping
};
size_t SlotBytes(uint32_t capacity) {
  static_assert(sizeof(Slot) % alignof(RawSample) == 0);
  return sizeof(Slot) + sizeof(RawSample) * capacity;
}

// What the handler reads: set before any event is armed, never changed after.
struct HandlerState {
  std::atomic<Slot*> slots[kMaxThreads];
  std::atomic<int> count{0};
  PythonLayout python;
  void* (*thread_state)() = nullptr;
  int (*is_finalizing)() = nullptr;
};
HandlerState g_handler;

void RecordSample(Slot* s, uint64_t now, void* context) {
  const uint32_t head = s->head.load(std::memory_order_relaxed);
  if (head - s->tail.load(std::memory_order_acquire) >= s->capacity) {
    s->dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  RawSample& r = s->ring[head & (s->capacity - 1)];
  r.time_ns = now;
  const auto* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  r.pc = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  r.pc = uc->uc_mcontext.pc;
#else
  r.pc = 0;
#endif
  r.frames = 0;
  r.flags = 0;
  // No Python frames once the interpreter shuts down (it frees daemon
  // threads' states while they run).
  if (g_handler.thread_state != nullptr &&
      (g_handler.is_finalizing == nullptr || !g_handler.is_finalizing())) {
    // The thread's own state (thread-specific data: null, or live until this
    // thread ends); never another thread's.
    if (const void* tstate = g_handler.thread_state()) {
      r.frames = static_cast<uint16_t>(
          WalkPythonFrames(g_handler.python, tstate, r.code, r.instr, kMaxFrames, &r.flags));
      r.flags |= kHostSamplePython;
    }
  }
  s->head.store(head + 1, std::memory_order_release);
}

void OnSampleSignal(int, siginfo_t*, void* context) {
  const int saved = errno;
  // The time first: a sample whose slot is still armed after it was taken
  // was taken before the window's end disarmed it.
  const uint64_t now = TimebaseNowNs();
  const int tid = static_cast<int>(syscall(SYS_gettid));
  const int n = g_handler.count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    Slot* s = g_handler.slots[i].load(std::memory_order_acquire);
    if (s != nullptr && s->tid.load(std::memory_order_acquire) == tid) {
      if (s->armed.load(std::memory_order_acquire)) RecordSample(s, now, context);
      break;
    }
  }
  errno = saved;
}

// A forked child inherits the perf events' descriptors, whose signals go to
// the parent's threads: it closes them at once (no lock taken: the sampler's
// thread may have held one at the fork) and never samples.
void CloseEventsInChild() {
  SetSafeReadPid(0);
  const int n = g_handler.count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    Slot* s = g_handler.slots[i].load(std::memory_order_acquire);
    if (s == nullptr) continue;
    s->armed.store(false, std::memory_order_relaxed);
    const int fd = s->fd.exchange(-1);
    if (fd >= 0) close(fd);
  }
}

bool Ours(int sig) {
  struct sigaction current {};
  return sigaction(sig, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
         current.sa_sigaction == OnSampleSignal;
}

// The real-time signal the samples come by: the highest one nobody handles,
// taken once per process and never given back.
int SampleSignal(std::string* why) {
  static std::mutex mu;
  static int chosen = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (chosen != 0) return chosen;
  for (int sig = SIGRTMAX - 1; sig >= SIGRTMIN + 2; --sig) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) != 0) continue;
    if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler != SIG_DFL) continue;
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction != nullptr) continue;
    struct sigaction ours {};
    ours.sa_sigaction = OnSampleSignal;
    ours.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&ours.sa_mask);
    if (sigaction(sig, &ours, nullptr) == 0) {
      chosen = sig;
      pthread_atfork(nullptr, nullptr, CloseEventsInChild);
      return sig;
    }
  }
  *why = "no free real-time signal";
  return 0;
}

std::string ReadSmallFile(const char* path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[4096];
  const ssize_t n = read(fd, buf, sizeof buf);
  close(fd);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string ThreadName(int tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
  std::string name = ReadSmallFile(path);
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

// Whether thread `tid` blocks signal `sig` (its SigBlk in /proc): a blocked
// real-time signal would queue up, one per period, until the per-user limit
// is reached and the kernel falls back to SIGIO, which ends the process.
bool Blocks(int tid, int sig) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
  const std::string status = ReadSmallFile(path);
  const size_t at = status.find("SigBlk:");
  if (at == std::string::npos) return true;  // gone, or not readable: not armed
  const uint64_t mask = std::strtoull(status.c_str() + at + 7, nullptr, 16);
  return (mask >> (sig - 1)) & 1;
}

std::vector<int> ThreadIds() {
  std::vector<int> tids;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return tids;
  while (dirent* e = readdir(d)) {
    const int tid = std::atoi(e->d_name);
    if (tid > 0) tids.push_back(tid);
  }
  closedir(d);
  return tids;
}

std::string Basename(const char* path) {
  if (path == nullptr) return "?";
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

}  // namespace

struct HostSampler::Impl {
  explicit Impl(const SourceContext& c) : context(c) {}

  // One thread's event: a perf task clock (fd) or a CPU-time timer.
  struct Armed {
    Slot* slot = nullptr;
    bool has_timer = false;
    timer_t timer{};
    uint32_t name_id = 0;
    bool seen = false;  // still there at the last scan
    bool sampled = false;
  };

  const SourceContext& context;
  uint64_t period_ns = 0;
  uint32_t capacity = 0;
  uint64_t memory_limit = 0;  // of all rings
  int signo = 0;
  bool perf = true;  // else CPU-time timers
  bool off = false;  // nothing is sampled (said in the notes)
  PythonRuntime runtime;
  std::unique_ptr<PythonResolver> resolver;
  std::unordered_map<uint64_t, std::string> natives;

  std::mutex mu;  // guards threads, running, stopping, finished; never held by the handler
  std::condition_variable cv;
  std::thread thread;
  bool running = false;  // the sampler's thread runs
  bool stopping = false;
  bool finished = false;
  std::atomic<bool> active{false};  // a window is open
  std::map<int, Armed> threads;     // by tid
  // The sampler's thread's own (and Finish's, once it is joined):
  std::vector<Slot*> free_slots;
  uint64_t memory = 0;
  std::string first_failure;
  int drains = 0;
  uint64_t samples = 0, dropped = 0, threads_sampled = 0;
  std::set<int> blocked_tids;  // threads found blocking the signal and not sampled since
  // Threads that could not be armed and were not since: a set, as a thread is
  // tried again at every scan (a count of attempts said thousands of threads
  // where a few were refused for seconds).
  std::set<int> unarmed_tids;

  bool Prepare();
  // A forked child inherits this object (and maybe a held lock): it never
  // samples, and never touches the parent's events.
  bool ForkedChild() const { return getpid() != creator; }
  pid_t creator = getpid();
  void Loop();
  void Scan(bool masks);
  bool Arm(int tid, Armed* a);
  void Disarm(Armed* a);
  void Enable(Armed& a, bool on);
  Slot* NewSlot(int tid);
  void Release(Slot* slot);
  void Drain();
  std::string Native(uint64_t pc);
};

std::unique_ptr<HostSampler> HostSampler::Make(const SourceContext& context) {
  if (!context.recording() || !context.enabled(RecordKind::kHostSamples) ||
      context.config().host_sample_hz <= 0)
    return nullptr;
  return std::unique_ptr<HostSampler>(new HostSampler(context));
}

HostSampler::HostSampler(const SourceContext& context) : impl_(std::make_unique<Impl>(context)) {
  Impl& s = *impl_;
  const auto hz = static_cast<double>(context.config().host_sample_hz);
  s.period_ns = static_cast<uint64_t>(1e9 / hz);
  // Three drains' worth of samples at the asked rate, at least 16.
  const auto want = static_cast<uint32_t>(3 * hz * 0.020);
  s.capacity = 16;
  while (s.capacity < want && s.capacity < 1024) s.capacity *= 2;
  // The rings may take an eighth of AON_MEMORY_CAP: the rest is the records'.
  s.memory_limit = context.config().memory_cap_bytes / 8;
}

HostSampler::~HostSampler() { Finish(); }

// Once, at the first window: the signal, the Python runtime, the thread.
bool HostSampler::Impl::Prepare() {
  if (running || off) return !off;
  std::string why;
  signo = SampleSignal(&why);
  if (signo == 0) {
    off = true;
    context.notes().Note("host sampling: off: " + why);
    return false;
  }
  SetSafeReadPid(getpid());
  if (FindPythonRuntime(&runtime, &why)) {
    g_handler.python = runtime.layout;
    g_handler.is_finalizing = runtime.is_finalizing;
    g_handler.thread_state = runtime.this_thread_state;
    resolver = std::make_unique<PythonResolver>(runtime);
    context.notes().Log("host sampling: Python %s frames", runtime.version.c_str());
  } else if (why != "not a Python process") {
    context.notes().Note("host sampling: " + why);
  }
  running = true;
  thread = std::thread([this] { Loop(); });
  return true;
}

void HostSampler::Start() {
  Impl& s = *impl_;
  if (s.ForkedChild()) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.finished || !s.Prepare()) return;
  if (!Ours(s.signo)) {
    // The application installed its own handler for our signal since.
    s.off = true;
    s.context.notes().Note("host sampling: off: the application took signal " +
                           std::to_string(s.signo) + " for itself");
    return;
  }
  s.active.store(true);
  for (auto& [tid, a] : s.threads) s.Enable(a, true);
  s.cv.notify_all();  // threads not armed yet are, at once
}

void HostSampler::Stop() {
  Impl& s = *impl_;
  if (s.ForkedChild()) return;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.active.load()) return;
  s.active.store(false);
  for (auto& [tid, a] : s.threads) s.Enable(a, false);
  s.cv.notify_all();
}

void HostSampler::Finish() {
  Impl& s = *impl_;
  if (s.ForkedChild()) return;  // the parent's sampling, not ours
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.finished) return;
    s.finished = true;
    s.active.store(false);
    s.stopping = true;
    for (auto& [tid, a] : s.threads) s.Enable(a, false);
  }
  s.cv.notify_all();
  if (s.thread.joinable()) s.thread.join();
  std::lock_guard<std::mutex> lock(s.mu);
  s.Drain();
  for (auto& [tid, a] : s.threads) s.Disarm(&a);
  s.threads.clear();
  if (s.dropped > 0) {
    s.context.notes().Note("host sampling: " + std::to_string(s.dropped) +
                           " samples lost (a thread's ring was full)");
  }
  if (!s.unarmed_tids.empty()) {
    s.context.notes().Note("host sampling: " + std::to_string(s.unarmed_tids.size()) +
                           " thread(s) not sampled: " + s.first_failure);
  }
  if (!s.blocked_tids.empty()) {
    s.context.notes().Note("host sampling: " + std::to_string(s.blocked_tids.size()) +
                           " thread(s) not sampled: they block signal " + std::to_string(s.signo));
  }
  s.context.notes().Log("host sampling: %llu samples of %llu threads (%s, every %llu ns of CPU)",
                        static_cast<unsigned long long>(s.samples),
                        static_cast<unsigned long long>(s.threads_sampled),
                        s.perf ? "perf task clock" : "CPU-time timer",
                        static_cast<unsigned long long>(s.period_ns));
}

void HostSampler::Impl::Loop() {
  pthread_setname_np(pthread_self(), "aon/sampler");
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    const bool now_active = active.load();
    const bool scan = now_active || drains % kScanEveryDrains == 0;
    const bool masks = now_active && drains % kMaskEveryDrains == 0;
    ++drains;
    // Events are made and rings drained without the lock: only this thread
    // adds or removes threads, and a window's boundary (Start, Stop) must
    // never wait for a scan or for frames to be resolved.
    lock.unlock();
    if (scan) Scan(masks);
    Drain();
    lock.lock();
    if (!stopping) cv.wait_for(lock, kDrainEvery);
  }
}

// Arms every thread of the process that is not AON's own, does not block the
// signal and is not armed yet; forgets those that ended (after their last
// samples are drained) or block the signal now.
void HostSampler::Impl::Scan(bool masks) {
  std::vector<int> now = ThreadIds();
  std::sort(now.begin(), now.end());
  // Files are read without the lock (only this thread changes `threads`), so
  // a window's boundary never waits for them.
  std::vector<int> blocking;
  if (masks) {
    for (const auto& [tid, a] : threads) {
      if (a.seen && Blocks(tid, signo)) blocking.push_back(tid);
    }
  }
  std::vector<std::pair<int, Armed>> added;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [tid, a] : threads) {
      const bool blocks = std::find(blocking.begin(), blocking.end(), tid) != blocking.end();
      if (blocks) blocked_tids.insert(tid);
      if (blocks || !std::binary_search(now.begin(), now.end(), tid)) {
        a.seen = false;
        Enable(a, false);
      }
    }
  }
  for (int tid : now) {
    if (threads.count(tid)) continue;  // read without the lock: only this thread changes it
    const std::string name = ThreadName(tid);
    if (name.rfind("aon/", 0) == 0) continue;  // AON's own (a program's name has no slash)
    if (Blocks(tid, signo)) {
      blocked_tids.insert(tid);
      continue;
    }
    Armed a;
    if (!Arm(tid, &a)) continue;
    // A thread blocks every signal while pthread_create sets it up: one seen
    // blocking then and armed now is sampled after all (and one refused
    // before, when rings or descriptors were short).
    blocked_tids.erase(tid);
    unarmed_tids.erase(tid);
    a.seen = true;
    a.name_id = context.sink().Intern(name, RecordKind::kHostSamples);
    added.emplace_back(tid, a);
  }
  std::lock_guard<std::mutex> lock(mu);
  for (auto& [tid, a] : added) {
    auto& placed = threads.emplace(tid, a).first->second;
    if (active.load()) Enable(placed, true);
  }
  for (auto it = threads.begin(); it != threads.end();) {
    // An ended thread goes once its last samples are drained.
    const Slot* slot = it->second.slot;
    if (it->second.seen ||
        slot->head.load(std::memory_order_acquire) != slot->tail.load(std::memory_order_relaxed)) {
      ++it;
      continue;
    }
    Disarm(&it->second);
    it = threads.erase(it);
  }
}

Slot* HostSampler::Impl::NewSlot(int tid) {
  Slot* slot = nullptr;
  if (!free_slots.empty()) {
    slot = free_slots.back();
    free_slots.pop_back();
  } else {
    const int n = g_handler.count.load(std::memory_order_relaxed);
    const size_t bytes = SlotBytes(capacity);
    if (n >= kMaxThreads || memory + bytes > memory_limit) return nullptr;
    if (!context.sink().ReserveExternal(bytes)) return nullptr;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      context.sink().ReleaseExternal(bytes);
      return nullptr;
    }
    memory += bytes;
    slot = new (p) Slot();
    slot->capacity = capacity;
    slot->ring = new (static_cast<char*>(p) + sizeof(Slot)) RawSample[capacity];
    g_handler.slots[n].store(slot, std::memory_order_release);
    g_handler.count.store(n + 1, std::memory_order_release);
  }
  slot->head.store(0);
  slot->tail.store(0);
  slot->dropped.store(0);
  slot->armed.store(false);
  slot->tid.store(tid, std::memory_order_release);
  return slot;
}

void HostSampler::Impl::Release(Slot* slot) {
  slot->armed.store(false, std::memory_order_release);
  slot->tid.store(0, std::memory_order_release);
  free_slots.push_back(slot);
}

bool HostSampler::Impl::Arm(int tid, Armed* a) {
  a->slot = NewSlot(tid);
  if (a->slot == nullptr) {
    unarmed_tids.insert(tid);
    if (first_failure.empty())
      first_failure = "their rings would take more than an eighth of AON_MEMORY_CAP";
    return false;
  }
  int err = 0;
  if (perf) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.sample_period = period_ns;
    attr.disabled = 1;
    attr.exclude_kernel = 1;  // samples in user mode only: what perf_event_paranoid 2 allows
    attr.exclude_hv = 1;
    // Gone when the thread calls exec (a forked child may still hold the
    // descriptor: the new program must not get our signals). Kernels before
    // 5.13 refuse the bit: then without it.
    attr.remove_on_exec = 1;
    int fd =
        static_cast<int>(syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0 && errno == EINVAL) {
      attr.remove_on_exec = 0;
      fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
    }
    if (fd >= 0) {
      f_owner_ex owner{F_OWNER_TID, tid};
      if (fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) == 0 && fcntl(fd, F_SETSIG, signo) == 0 &&
          fcntl(fd, F_SETOWN_EX, &owner) == 0) {
        a->slot->fd.store(fd);
        return true;
      }
      err = errno;
      close(fd);
    } else {
      err = errno;
    }
    if (err == ESRCH) {  // the thread ended meanwhile
      Release(a->slot);
      return false;
    }
    if (err != EACCES && err != EPERM && err != ENOENT && err != ENOSYS && err != EOPNOTSUPP &&
        err != EINVAL) {
      // Out of descriptors or memory: this thread goes unsampled.
      Release(a->slot);
      unarmed_tids.insert(tid);
      if (first_failure.empty())
        first_failure = std::string("perf_event_open: ") + std::strerror(err);
      return false;
    }
    // Not allowed here (perf_event_paranoid 3, a seccomp filter, no perf
    // events): CPU-time timers from now on (threads already armed keep theirs).
    context.notes().Note(std::string("host sampling: perf_event_open: ") + std::strerror(err) +
                         " (perf_event_paranoid above 2, or a seccomp filter?): CPU-time timers "
                         "instead, at most the kernel tick's rate");
    perf = false;
  }
  sigevent ev{};
  ev.sigev_notify = SIGEV_THREAD_ID;
  ev.sigev_signo = signo;
  ev._sigev_un._tid = tid;
  // The thread's CPU-time clock (Linux: MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)).
  const auto clock = static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6);
  if (timer_create(clock, &ev, &a->timer) == 0) {
    a->has_timer = true;
    return true;
  }
  err = errno;
  Release(a->slot);
  if (err == EINVAL || err == ESRCH) return false;  // the thread ended meanwhile
  unarmed_tids.insert(tid);
  if (first_failure.empty()) first_failure = std::string("timer_create: ") + std::strerror(err);
  return false;
}

void HostSampler::Impl::Enable(Armed& a, bool on) {
  a.slot->armed.store(on, std::memory_order_release);
  if (on) a.sampled = true;
  const int fd = a.slot->fd.load();
  if (fd >= 0) {
    ioctl(fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
  } else if (a.has_timer) {
    const long ns = on ? static_cast<long>(period_ns) : 0;
    itimerspec spec{{ns / 1000000000, ns % 1000000000}, {ns / 1000000000, ns % 1000000000}};
    timer_settime(a.timer, 0, &spec, nullptr);
  }
}

void HostSampler::Impl::Disarm(Armed* a) {
  if (a->slot == nullptr) return;
  Enable(*a, false);
  if (const int fd = a->slot->fd.exchange(-1); fd >= 0) close(fd);
  if (a->has_timer) {
    timer_delete(a->timer);
    a->has_timer = false;
  }
  if (a->sampled) ++threads_sampled;
  dropped += a->slot->dropped.load();
  Release(a->slot);
  a->slot = nullptr;
}

std::string HostSampler::Impl::Native(uint64_t pc) {
  if (natives.size() > 100000) natives.clear();  // bounded: the addresses of a long run
  auto [it, added] = natives.try_emplace(pc);
  if (!added) return it->second;
  Dl_info info{};
  std::string frame = "[native] ";
  if (pc != 0 && dladdr(reinterpret_cast<void*>(pc), &info) != 0) {
    const std::string module = Basename(info.dli_fname);
    if (info.dli_sname != nullptr) {
      int status = 0;
      char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
      frame += status == 0 && demangled != nullptr ? demangled : info.dli_sname;
      std::free(demangled);
      frame += " (" + module + ")";
    } else {
      char offset[32];
      std::snprintf(
          offset, sizeof offset, "+0x%llx",
          static_cast<unsigned long long>(pc - reinterpret_cast<uint64_t>(info.dli_fbase)));
      frame += module + offset;
    }
  } else {
    frame += "?";
  }
  it->second = frame;
  return frame;
}

// Only the sampler's thread (or Finish, once it is joined) drains; the set
// of threads changes only on that same thread.
void HostSampler::Impl::Drain() {
  RecordSink& sink = context.sink();
  std::string stack;
  for (auto& [tid, a] : threads) {
    Slot* slot = a.slot;
    const uint32_t head = slot->head.load(std::memory_order_acquire);
    uint32_t tail = slot->tail.load(std::memory_order_relaxed);
    for (; tail != head; ++tail) {
      const RawSample& r = slot->ring[tail & (slot->capacity - 1)];
      stack.clear();
      for (int i = r.frames - 1; i >= 0; --i) {
        stack += resolver ? resolver->Frame(r.code[i], r.instr[i]) : std::string("?");
        stack += '\n';
      }
      stack += Native(r.pc);
      HostSampleRecord rec{};
      rec.start_ns = r.time_ns;
      rec.tid = static_cast<uint32_t>(tid);
      rec.stack_id = sink.Intern(stack, RecordKind::kHostSamples);
      rec.thread_name_id = a.name_id;
      rec.frames = static_cast<uint16_t>(r.frames + 1);
      rec.flags = r.flags;
      sink.Push(rec);
      ++samples;
    }
    slot->tail.store(tail, std::memory_order_release);
  }
  // A code object's address may serve another once it is freed: what was
  // learned lasts one window (or 200 ms in full mode).
  if (!active.load() || drains % kScanEveryDrains == 0) {
    if (resolver) resolver->Forget();
  }
}

}  // namespace aon::agent
