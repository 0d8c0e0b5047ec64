#include "collector_link.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "aon/base/spawn.h"
#include "aon/config/agent_env.h"
#include "aon/config/tool_paths.h"
#include "aon/format/metadata_wire.h"
#include "aon/ipc/collector_protocol.h"

extern char** environ;

namespace aon::agent {
namespace {

void SleepMs(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Starts `path --daemon ...`; the first child exits as soon as the real
// collector is forked off, and is reaped here, so nothing is left as our child.
Status SpawnCollector(const std::string& path, const std::vector<std::string>& args) {
  SpawnSpec spec;
  spec.path = path;
  // Its own process group, not its own session: a new session is a new
  // scheduling autogroup (sched(7)), whose share of a core the kernel weighs
  // against the job's group as a whole. Beside another job whose ranks sleep
  // and wake every few hundred microseconds on the same cores, the collector's
  // group was left runnable but unscheduled for up to 1.5 s (its GPU counters
  // sampler with it: one counters interval over a whole phase). In the job's
  // group, its threads are weighed against the job's own threads instead.
  spec.new_process_group = true;
  spec.default_signals = true;
  spec.argv.push_back(path);
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  // The collector is not a CUDA program: it must not load us (or any injection) again.
  spec.envp.emplace();
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view v(*e);
    const std::string_view name = v.substr(0, v.find('='));
    if (name == kCudaInjectionVar || name == kNvtxInjectionVar || name == "LD_PRELOAD" ||
        name == kNcclProfilerPluginVar) {
      continue;
    }
    spec.envp->emplace_back(v);
  }
  sigset_t none;
  sigemptyset(&none);
  spec.signal_mask = none;
  AON_ASSIGN_OR_RETURN(const pid_t pid, Spawn(spec));
  AON_ASSIGN_OR_RETURN(const int status, WaitFor(pid, path));
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    return Unavailable(path + " exited with status " + std::to_string(WEXITSTATUS(status)) +
                       " while starting");
  }
  return Status::Ok();
}

}  // namespace

std::string CollectorLink::FindCollector(const AgentConfig& config) {
  if (!config.collector.empty()) return config.collector;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&CollectorLink::FindCollector), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  auto path = FindTool(ToolOrigin::kAgentLibrary, DirectoryOf(info.dli_fname), Tool::kCollector);
  return path.ok() ? *path : "";
}

namespace {

// Connects to the collector of `endpoint`, starting it from `collector_path`
// when nothing listens there.
CollectorOr<int> ConnectOrStart(const AgentConfig& config, const std::string& collector_path,
                                const CollectorEndpoint& endpoint) {
  const std::string& name = endpoint.name;
  auto connected = ConnectToCollector(endpoint);
  if (connected.code() == CollectorErrc::kNoCollector) {
    if (collector_path.empty()) {
      return CollectorError(CollectorErrc::kNoCollector,
                            "no aon-collector found (set AON_COLLECTOR)");
    }
    std::vector<std::string> args = {"--daemon",
                                     "--socket-name",
                                     name,
                                     "--output-dir",
                                     config.output_dir,
                                     "--mode",
                                     std::string(ChoiceName(config.mode)),
                                     "--window",
                                     std::to_string(config.window_s),
                                     "--flush-ms",
                                     std::to_string(config.flush_interval_ms),
                                     "--nccl-stall",
                                     std::to_string(config.flight_nccl_stall_s),
                                     "--step-range",
                                     config.flight_step_range,
                                     "--step-factor",
                                     std::to_string(config.flight_step_factor),
                                     "--counters",
                                     std::string(ChoiceName(config.counters)),
                                     "--counters-interval-ms",
                                     std::to_string(config.counters_interval_ms)};
    if (config.verbose > 0) args.push_back("--verbose");
    if (Status spawned = SpawnCollector(collector_path, args); !spawned.ok())
      return CollectorError(CollectorErrc::kNoCollector, spawned.message());
    // The spawned collector (or one another rank started) binds within ms.
    for (int i = 0; i < 250 && connected.code() == CollectorErrc::kNoCollector; ++i) {
      connected = ConnectToCollector(endpoint);
      if (connected.code() == CollectorErrc::kNoCollector) SleepMs(i < 50 ? 2 : 10);
    }
    if (connected.code() == CollectorErrc::kNoCollector) {
      return CollectorError(CollectorErrc::kNoCollector,
                            "the collector started from " + collector_path +
                                " did not accept connections: " + connected.error().message());
    }
  }
  return connected;
}

// The job's collector under a fresh key, unless another rank renewed the one
// `taken` ends in first (then under that one): the directory is locked while
// the key is read and replaced, so the ranks of a node agree on one new name.
CollectorOr<CollectorEndpoint> RenewedCollector(const AgentConfig& config,
                                                const HeldDirectory& job_dir,
                                                const std::string& taken) {
  // A description of its own: the lock goes with it when it is closed.
  const int dir = openat(job_dir.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return CollectorError(CollectorErrc::kNoKey,
                          "cannot open " + config.output_dir + ": " + std::strerror(errno));
  while (flock(dir, LOCK_EX) != 0 && errno == EINTR) {
  }
  auto now = JobCollector(config.job_id, config.output_dir, KeyMode::kRead, dir);
  if (now.ok() && now->name == taken)
    now = JobCollector(config.job_id, config.output_dir, KeyMode::kRenew, dir);
  close(dir);  // and the lock with it
  return now;
}

}  // namespace

StatusOr<std::unique_ptr<CollectorLink>> CollectorLink::Connect(const AgentConfig& config,
                                                                const HeldDirectory& job_dir,
                                                                const std::string& collector_path,
                                                                const RankMetadata& hello,
                                                                int ring_fd) {
  // The key that makes the socket name unguessable lives in the job directory
  // (collector_protocol.h); the first rank of a job made without aon-run or srun
  // makes both.
  auto endpoint = JobCollector(config.job_id, config.output_dir, KeyMode::kCreate, job_dir.fd());
  if (!endpoint.ok()) return endpoint.status();
  auto connected = ConnectOrStart(config, collector_path, *endpoint);
  std::string note;
  if (connected.code() == CollectorErrc::kWrongPeer) {
    // Another user holds the name: it learnt it from /proc/net/unix while a
    // collector of this job held it, and took it when that one exited. A fresh
    // key gives the job a name nobody else knows until its collector holds it.
    auto fresh = RenewedCollector(config, job_dir, endpoint->name);
    if (fresh.ok()) {
      note = connected.error().message() +
             ": this job's collector key was renewed, its collector runs under the new name";
      connected = ConnectOrStart(config, collector_path, *fresh);
    }
  }
  // Another user's socket (kWrongPeer) ends here: nothing, the ring least of
  // all, was sent to it.
  if (!connected.ok()) return connected.error().ToStatus();
  const int fd = *connected;
  std::unique_ptr<CollectorLink> link(new CollectorLink(fd));
  link->note_ = std::move(note);
  auto sent = SendRequest(fd, CollectorRequest::Hello(EncodeRankMetadata(hello)), ring_fd);
  if (!sent.ok()) return sent.status();
  auto rank_file = ReceiveReply(fd, CollectorVerb::kHello, 10000);
  if (!rank_file.ok()) {
    return Unavailable("the collector did not take this rank: " + rank_file.error().message());
  }
  link->rank_file_ = std::move(rank_file).value();
  return link;
}

CollectorLink::~CollectorLink() {
  if (fd_ >= 0) close(fd_);
}

CollectorOr<std::string> CollectorLink::Finish(const RankMetadata& final_metadata, int timeout_ms) {
  auto sent = SendRequest(fd_, CollectorRequest::Finish(EncodeRankMetadata(final_metadata)));
  if (!sent.ok()) return sent.error();
  auto path = ReceiveReply(fd_, CollectorVerb::kFinish, timeout_ms);
  if (!path.ok()) {
    return CollectorError(path.error().code(), "the collector could not finish the rank file: " +
                                                   path.error().message());
  }
  return std::move(path).value();
}

}  // namespace aon::agent
