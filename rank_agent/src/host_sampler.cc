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

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>

#include "aon/base/timebase.h"
#include "aon/format/records.h"

namespace aon::agent {
namespace {

constexpr int kMaxFrames = 48;
constexpr uint32_t kRingSamples = 128;  // a power of two
constexpr int kMaxThreads = 256;
constexpr auto kDrainEvery = std::chrono::milliseconds(20);
// New threads are looked for at every drain while a window is open (a
// thread that lives less than that may go unsampled), every 200 ms outside.
constexpr int kScanEveryDrains = 10;

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
  RawSample ring[kRingSamples];
};

// What the handler reads: set before any event is armed, never changed after.
struct HandlerState {
  std::atomic<Slot*> slots[kMaxThreads];
  std::atomic<int> count{0};
  PythonLayout python;
  void* (*thread_state)() = nullptr;
};
HandlerState g_handler;

void RecordSample(Slot* s, void* context) {
  const uint32_t head = s->head.load(std::memory_order_relaxed);
  if (head - s->tail.load(std::memory_order_acquire) >= kRingSamples) {
    s->dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  RawSample& r = s->ring[head & (kRingSamples - 1)];
  r.time_ns = TimebaseNowNs();
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
  if (g_handler.thread_state != nullptr) {
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
  const int tid = static_cast<int>(syscall(SYS_gettid));
  const int n = g_handler.count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    Slot* s = g_handler.slots[i].load(std::memory_order_acquire);
    if (s != nullptr && s->tid.load(std::memory_order_acquire) == tid) {
      if (s->armed.load(std::memory_order_acquire)) RecordSample(s, context);
      break;
    }
  }
  errno = saved;
}

// The real-time signal the samples come by: the highest one nobody handles,
// taken once per process and never given back.
int SampleSignal(std::string* why) {
  static std::mutex mu;
  static int chosen = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (chosen != 0) {
    struct sigaction current {};
    sigaction(chosen, nullptr, &current);
    if (current.sa_sigaction == OnSampleSignal) return chosen;
    *why = "signal " + std::to_string(chosen) + " was taken over by the application";
    return 0;
  }
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
      return sig;
    }
  }
  *why = "no free real-time signal";
  return 0;
}

std::string ThreadName(int tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[32];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return {};
  std::string name(buf, static_cast<size_t>(n));
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
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

// A perf event's ring: its header page and one data page.
size_t MapBytes() { return static_cast<size_t>(2 * sysconf(_SC_PAGESIZE)); }

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
    int fd = -1;
    void* map = nullptr;
    bool has_timer = false;
    timer_t timer{};
    uint32_t name_id = 0;
    bool seen = false;  // still there at the last scan
    bool sampled = false;
  };

  const SourceContext& context;
  uint64_t period_ns = 0;
  int signo = 0;
  bool perf = true;  // else CPU-time timers
  bool off = false;  // neither works here: nothing is sampled
  bool python = false;
  PythonRuntime runtime;
  std::unique_ptr<PythonResolver> resolver;
  std::unordered_map<uint64_t, std::string> natives;

  std::mutex mu;  // guards what follows; never held by the handler
  std::condition_variable cv;
  std::thread thread;
  bool running = false;  // the sampler's thread runs
  bool active = false;   // a window is open
  bool stopping = false;
  bool finished = false;
  std::map<int, Armed> threads;  // by tid
  std::vector<Slot*> free_slots;
  std::string first_failure;
  int drains = 0;  // by the sampler's thread
  // Counted by the sampler's thread (samples), or under mu.
  uint64_t samples = 0, dropped = 0, threads_sampled = 0, unarmed = 0;

  bool Prepare();
  void Loop();
  void Scan();
  bool Arm(int tid, Armed* a);
  void Disarm(Armed* a);
  void Enable(Armed& a, bool on);
  Slot* NewSlot(int tid);
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
  impl_->period_ns =
      static_cast<uint64_t>(1e9 / static_cast<double>(context.config().host_sample_hz));
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
  python = FindPythonRuntime(&runtime, &why);
  if (python) {
    g_handler.python = runtime.layout;
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
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.finished || !s.Prepare()) return;
  s.active = true;
  for (auto& [tid, a] : s.threads) s.Enable(a, true);
  s.cv.notify_all();  // threads not armed yet are, at once
}

void HostSampler::Stop() {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.active) return;
  s.active = false;
  for (auto& [tid, a] : s.threads) s.Enable(a, false);
  s.cv.notify_all();
}

void HostSampler::Finish() {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.finished) return;
    s.finished = true;
    s.active = false;
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
  if (s.unarmed > 0) {
    s.context.notes().Note("host sampling: " + std::to_string(s.unarmed) +
                           " thread(s) not sampled: " + s.first_failure);
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
    if (active || drains % kScanEveryDrains == 0) Scan();
    ++drains;
    // Only this thread adds or removes threads: the rings are read without
    // the lock, so a window's boundary never waits for frames to be resolved.
    lock.unlock();
    Drain();
    lock.lock();
    if (!stopping) cv.wait_for(lock, kDrainEvery);
  }
}

// Arms every thread of the process that is not AON's own and not armed yet;
// forgets those that ended (after their last samples are drained).
void HostSampler::Impl::Scan() {
  for (auto& [tid, a] : threads) a.seen = false;
  for (int tid : ThreadIds()) {
    auto it = threads.find(tid);
    if (it != threads.end()) {
      it->second.seen = true;
      continue;
    }
    const std::string name = ThreadName(tid);
    if (name.rfind("aon/", 0) == 0) continue;  // AON's own threads (a program's name has no slash)
    Armed a;
    if (!Arm(tid, &a)) continue;
    a.seen = true;
    a.name_id = context.sink().Intern(name, RecordKind::kHostSamples);
    auto& placed = threads.emplace(tid, a).first->second;
    if (active) Enable(placed, true);
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
    if (n >= kMaxThreads) return nullptr;
    if (!context.sink().ReserveExternal(sizeof(Slot))) return nullptr;
    void* p = mmap(nullptr, sizeof(Slot), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) {
      context.sink().ReleaseExternal(sizeof(Slot));
      return nullptr;
    }
    slot = new (p) Slot();
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

bool HostSampler::Impl::Arm(int tid, Armed* a) {
  a->slot = NewSlot(tid);
  if (a->slot == nullptr) {
    ++unarmed;
    if (first_failure.empty())
      first_failure = "no memory left under AON_MEMORY_CAP for its samples";
    return false;
  }
  auto release = [&] {
    a->slot->tid.store(0, std::memory_order_release);
    free_slots.push_back(a->slot);
    a->slot = nullptr;
  };
  int err = 0;
  if (perf) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.sample_period = period_ns;
    attr.disabled = 1;
    attr.exclude_kernel = 1;  // user time only: what perf_event_paranoid 2 allows
    attr.exclude_hv = 1;
    attr.wakeup_events = 1;  // every sample wakes: one signal each
    const int fd =
        static_cast<int>(syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd >= 0) {
      // A read-only ring: the kernel overwrites it and never waits for a reader.
      void* map = mmap(nullptr, MapBytes(), PROT_READ, MAP_SHARED, fd, 0);
      f_owner_ex owner{F_OWNER_TID, tid};
      if (map != MAP_FAILED && fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) == 0 &&
          fcntl(fd, F_SETSIG, signo) == 0 && fcntl(fd, F_SETOWN_EX, &owner) == 0) {
        a->fd = fd;
        a->map = map;
        return true;
      }
      err = errno;
      if (map != MAP_FAILED) munmap(map, MapBytes());
      close(fd);
    } else {
      err = errno;
    }
    if (err == ESRCH) {  // the thread ended meanwhile
      release();
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
  release();
  if (err == EINVAL || err == ESRCH) return false;  // the thread ended meanwhile
  ++unarmed;
  if (first_failure.empty()) first_failure = std::string("timer_create: ") + std::strerror(err);
  return false;
}

void HostSampler::Impl::Enable(Armed& a, bool on) {
  a.slot->armed.store(on, std::memory_order_release);
  if (on) a.sampled = true;
  if (a.fd >= 0) {
    ioctl(a.fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
  } else if (a.has_timer) {
    const long ns = on ? static_cast<long>(period_ns) : 0;
    itimerspec spec{{ns / 1000000000, ns % 1000000000}, {ns / 1000000000, ns % 1000000000}};
    timer_settime(a.timer, 0, &spec, nullptr);
  }
}

void HostSampler::Impl::Disarm(Armed* a) {
  if (a->slot == nullptr) return;
  Enable(*a, false);
  if (a->fd >= 0) {
    munmap(a->map, MapBytes());
    close(a->fd);
    a->fd = -1;
  }
  if (a->has_timer) {
    timer_delete(a->timer);
    a->has_timer = false;
  }
  if (a->sampled) ++threads_sampled;
  dropped += a->slot->dropped.load();
  a->slot->tid.store(0, std::memory_order_release);
  free_slots.push_back(a->slot);
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

void HostSampler::Impl::Drain() {
  RecordSink& sink = context.sink();
  std::string stack;
  for (auto& [tid, a] : threads) {
    Slot* slot = a.slot;
    const uint32_t head = slot->head.load(std::memory_order_acquire);
    uint32_t tail = slot->tail.load(std::memory_order_relaxed);
    for (; tail != head; ++tail) {
      const RawSample& r = slot->ring[tail & (kRingSamples - 1)];
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
  if (!active || drains % kScanEveryDrains == 0) {
    if (resolver) resolver->Forget();
  }
}

}  // namespace aon::agent
