#include "open.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "aon/base/fd_io.h"
#include "exchange.h"
#include "messages.h"
#include "reconcile.h"

namespace aon::merge {
namespace {

namespace fs = std::filesystem;

RankStatus ClassifyOpenError(const Status& s) {
  if (s.code() == StatusCode::kUnimplemented) return RankStatus::kUnsupported;
  // HDF5's own wording when the file is shorter than its superblock says.
  if (s.message().find("truncated file") != std::string::npos) return RankStatus::kTruncated;
  return RankStatus::kCorrupt;
}

// libhdf5 1.10.8 crashes (SIGSEGV, SIGFPE) on some crafted files inside the
// calls that give a reader its first look at a structure, where nothing could
// refuse the file first (docs/fuzzing.md, tests/fuzz/libhdf5_known_bugs.txt),
// and whether a heap overflow faults depends on the heap around it. So rank
// files are opened by a child process, the opener: it runs OpenRankFile on each
// in turn and sends back what it found and the string table (the open phase's
// own messages, messages.h) through a pipe. An opener that dies costs the rank
// it was opening (corrupt, the signal named) and a new one goes on with the
// next file; the merge process itself never runs libhdf5's decoding of those
// structures. The records are read later, through structures this decoding
// already checked, by AON's own (fuzzed) chunk code.
std::string DeathOf(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "signal " + std::to_string(sig) + (name != nullptr ? std::string(" SIG") + name : "");
  }
  return "exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

std::string Framed(const std::string& message) {
  const uint64_t n = message.size();
  return std::string(reinterpret_cast<const char*>(&n), sizeof n) + message;
}

struct ToOpen {
  const std::string* path;
  bool partial;
  OpenResult* found;
  StringTable* strings;
};

using Clock = std::chrono::steady_clock;

// Reads from `fd` until `want` bytes are buffered in *bytes past *at, EOF, or
// `deadline` (*late set).
bool Fill(int fd, std::string* bytes, size_t at, size_t want, Clock::time_point deadline,
          bool* late) {
  char buf[1 << 16];
  while (bytes->size() - at < want) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    const int ready =
        left > 0 ? poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30))) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      *late = true;
      return false;
    }
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes->append(buf, static_cast<size_t>(n));
  }
  return true;
}

// One frame of the opener's stream: a length, then that many bytes, at
// [*offset, *offset + *length) of *bytes once read (offsets, not views: a
// later Fill may move the buffer).
bool ReadFrame(int fd, std::string* bytes, size_t* at, size_t* offset, size_t* length,
               Clock::time_point deadline, bool* late) {
  uint64_t n = 0;
  if (!Fill(fd, bytes, *at, sizeof n, deadline, late)) return false;
  std::memcpy(&n, bytes->data() + *at, sizeof n);
  if (n > (uint64_t{1} << 40) || !Fill(fd, bytes, *at + sizeof n, n, deadline, late)) return false;
  *offset = *at + sizeof n;
  *length = static_cast<size_t>(n);
  *at += sizeof n + n;
  return true;
}

// How an opener ended before it sent every file's result.
struct OpenerStop {
  size_t file = 0;       // the file it was opening
  bool crashed = false;  // killed by a fault signal (SEGV, BUS, FPE, ILL, ABRT)
  bool late = false;     // no result within the time a file may take; stopped
  std::string how;       // "signal 11 SIGSEGV", "exit status 1", ...
};

bool FaultSignal(int status) {
  if (!WIFSIGNALED(status)) return false;
  const int sig = WTERMSIG(status);
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT;
}

// Opens files[first..] in one child process ("the opener"), which sends back
// each file's result and string table in order. Returns true when every file
// got its result; else *stop says where and how the opener ended. Opens in this
// process when no child can be made.
bool OpenInOpener(std::vector<ToOpen>& files, size_t first, std::chrono::seconds timeout,
                  std::mutex& in_process, OpenerStop* stop) {
  int fds[2] = {-1, -1};
  pid_t pid = -1;
  {
    // Not while another thread of this process is inside libhdf5 (below): the
    // child would inherit its half-changed state. Nor between another
    // opener's pipe and its fork: no child gets another's write end.
    const std::lock_guard lock(in_process);
    if (pipe2(fds, O_CLOEXEC) != 0) fds[0] = fds[1] = -1;
    if (fds[0] >= 0) pid = fork();
    if (pid > 0) close(fds[1]);
  }
  if (pid < 0) {
    if (fds[0] >= 0) {
      close(fds[0]);
      close(fds[1]);
    }
    const std::lock_guard lock(in_process);
    for (size_t i = first; i < files.size(); ++i) {
      *files[i].found = OpenRankFile(*files[i].path, files[i].partial, files[i].strings);
    }
    return true;
  }
  if (pid == 0) {
    // Only this opener's end of its pipe stays open: another opener's pipe
    // (other threads open at once) must see its end of file when that opener
    // dies, and its writer a broken pipe when its reader gives up.
    if (fds[1] != 3) {
      if (dup2(fds[1], 3) < 0) _exit(1);
      fds[1] = 3;
    }
    if (close_range(4, ~0u, 0) != 0) {
      for (int fd = 4; fd < 4096; ++fd) close(fd);
    }
    // Fault injection for the tests (tests/unit/merge/merge_test.cc): the opener
    // dies on the file of this name as libhdf5's crashes kill it.
    // The same for AON_MERGE_TEST_HANG_OPENING: it never finishes that file.
    const char* fault = std::getenv("AON_MERGE_TEST_CRASH_OPENING");
    const char* hang = std::getenv("AON_MERGE_TEST_HANG_OPENING");
    for (size_t i = first; i < files.size(); ++i) {
      const std::string name = fs::path(*files[i].path).filename().string();
      if (fault != nullptr && *fault != '\0' && name == fault) raise(SIGSEGV);
      if (hang != nullptr && *hang != '\0' && name == hang) {
        for (;;) pause();
      }
      StringTable table;
      CandidateSummaries found;
      found.opened.push_back({i, OpenRankFile(*files[i].path, files[i].partial, &table)});
      // Id 0 (the empty string) is every table's own.
      const std::string packed = PackStrings(std::span(table.strings()).subspan(1));
      table = StringTable();
      const uint64_t n = packed.size();
      if (!WriteFull(fds[1], Framed(Pack(found))) ||
          !WriteFull(fds[1], std::string_view(reinterpret_cast<const char*>(&n), sizeof n)) ||
          !WriteFull(fds[1], packed)) {
        _exit(1);
      }
    }
    _exit(0);
  }
  std::string bytes;
  size_t at = 0, next = first;
  bool late = false;
  for (; next < files.size(); ++next) {
    size_t found_at = 0, found_len = 0, names_at = 0, names_len = 0;
    const Clock::time_point deadline = Clock::now() + timeout;
    if (!ReadFrame(fds[0], &bytes, &at, &found_at, &found_len, deadline, &late) ||
        !ReadFrame(fds[0], &bytes, &at, &names_at, &names_len, deadline, &late)) {
      break;
    }
    const std::string_view view(bytes);
    CandidateSummaries found;
    StringTable names;
    if (!Unpack(view.substr(found_at, found_len), &found).ok() ||
        !UnpackInto(view.substr(names_at, names_len), &names).ok() || found.opened.size() != 1 ||
        found.opened[0].index != next) {
      break;
    }
    *files[next].found = std::move(found.opened[0].found);
    *files[next].strings = std::move(names);
    if (at > (1 << 20)) {  // keep the buffer small
      bytes.erase(0, at);
      at = 0;
    }
  }
  if (late) kill(pid, SIGKILL);
  close(fds[0]);  // an opener still writing gets SIGPIPE
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (next >= files.size()) return true;
  stop->file = next;
  stop->late = late;
  stop->crashed = !late && FaultSignal(status);
  stop->how = DeathOf(status);
  return false;
}

// Opens every file through openers. When one is killed by a fault, or takes
// more than `timeout` over one file (then it is killed), the file it was
// opening is left out as corrupt and a new opener goes on with the next;
// when one ends otherwise (killed from outside, a message this process could
// not read), that file is opened here, as without openers, and a new opener
// goes on after it.
void OpenIsolated(std::vector<ToOpen>& files, std::chrono::seconds timeout,
                  std::mutex& in_process) {
  size_t next = 0;
  OpenerStop stop;
  while (next < files.size() && !OpenInOpener(files, next, timeout, in_process, &stop)) {
    ToOpen& f = files[stop.file];
    if (stop.late) {
      *f.found = OpenResult{};
      f.found->status = RankStatus::kCorrupt;
      f.found->reason = *f.path + ": opening it took more than " + std::to_string(timeout.count()) +
                        " s (libhdf5 stuck in its structures?); the merge's child process that "
                        "opened it was stopped and the file left out";
    } else if (stop.crashed) {
      *f.found = OpenResult{};
      f.found->status = RankStatus::kCorrupt;
      f.found->reason = *f.path + ": libhdf5 crashed opening it (" + stop.how +
                        " in the merge's child process that opens rank files); left out "
                        "(crafted or damaged HDF5 structures, docs/fuzzing.md)";
    } else {
      const std::lock_guard lock(in_process);
      *f.found = OpenRankFile(*f.path, f.partial, f.strings);
    }
    next = stop.file + 1;
  }
}

// OpenIsolated with `openers` children at once, each given one contiguous
// share of the files (at least 8 each): opening is mostly libhdf5 walking each
// file's structures, and a 64-rank job spends ~0.1 s there on one CPU.
void OpenIsolatedShares(std::vector<ToOpen>& files, std::chrono::seconds timeout,
                        unsigned openers) {
  std::mutex in_process;  // libhdf5 in this process: one thread at a time
  const size_t n = std::clamp<size_t>(files.size() / 8, 1, std::max(1u, openers));
  std::vector<std::vector<ToOpen>> shares(n);
  for (size_t s = 0; s < n; ++s) {
    shares[s].assign(files.begin() + static_cast<ptrdiff_t>(files.size() * s / n),
                     files.begin() + static_cast<ptrdiff_t>(files.size() * (s + 1) / n));
  }
  std::vector<std::jthread> threads;
  for (size_t s = 1; s < n; ++s) {
    try {
      threads.emplace_back([&, s] { OpenIsolated(shares[s], timeout, in_process); });
    } catch (const std::system_error&) {
      OpenIsolated(shares[s], timeout, in_process);  // no thread: here, after the others start
    }
  }
  OpenIsolated(shares[0], timeout, in_process);
}

// Opens candidates [first, first + who.size()) that `who` gives this process,
// and tells every process what each found.
Status OpenShared(MergeComm& comm, OpenedJob& job, size_t first, const std::vector<int>& who,
                  const OpenSettings& how) {
  CandidateSummaries mine;
  std::vector<ToOpen> files;
  for (size_t i = 0; i < who.size(); ++i) {
    Candidate& c = job.candidates[first + i];
    c.opened_by = who[i];
    if (who[i] == comm.rank()) {
      files.push_back({&c.path, c.partial, &c.found, &job.strings[first + i]});
    }
  }
  if (how.in_child) {
    OpenIsolatedShares(files, how.timeout, how.openers);
  } else {
    for (ToOpen& f : files) *f.found = OpenRankFile(*f.path, f.partial, f.strings);
  }
  for (size_t i = 0; i < who.size(); ++i) {
    if (who[i] == comm.rank()) mine.opened.push_back({first + i, job.candidates[first + i].found});
  }
  AON_ASSIGN_OR_RETURN(std::vector<CandidateSummaries> all, AllgatherMessage(comm, mine));
  for (size_t q = 0; q < all.size(); ++q) {
    if (static_cast<int>(q) == comm.rank()) continue;
    for (CandidateSummary& s : all[q].opened) {
      if (s.index < first || s.index >= first + who.size() ||
          who[s.index - first] != static_cast<int>(q)) {
        return Internal("merge process " + std::to_string(q) + " sent what it found in candidate " +
                        std::to_string(s.index) + ", which it was not given");
      }
      job.candidates[s.index].found = std::move(s.found);
    }
  }
  return Status::Ok();
}

}  // namespace

OpenResult OpenRankFile(const std::string& path, bool partial, StringTable* strings) {
  OpenResult f;
  auto opened = TraceReader::Open(path);
  if (!opened.ok()) {
    f.status = ClassifyOpenError(opened.status());
    f.reason = opened.status().message();
    return f;
  }
  std::unique_ptr<TraceReader> reader = std::move(opened).value();
  auto fail = [&](std::string reason) {
    f.status = RankStatus::kCorrupt;
    f.reason = std::move(reason);
    return f;
  };
  if (reader->kind() != FileKind::kRank) {
    return fail(path + ": is a merged timeline, not a rank trace");
  }
  auto meta = reader->ReadRankMetadata();
  if (!meta.ok()) return fail("unreadable rank metadata: " + meta.status().message());
  f.meta = std::move(meta).value();
  f.meta_read = true;
  if (f.meta.rank < 0) {
    return fail(path + ": its metadata has no rank (rank " + std::to_string(f.meta.rank) + ")");
  }
  auto table = reader->ReadStrings();
  if (!table.ok() && partial && table.status().code() == StatusCode::kNotFound) {
    // A collector may write the string table only when it finishes.
    f.open_problems.push_back(path + ": has no string table yet; its names are merged as \"\"");
    table = StringTable();
  }
  if (!table.ok()) return fail("unreadable string table: " + table.status().message());
  *strings = std::move(table).value();
  ForEachRankFileRecordType([&](auto tag) {
    using T = decltype(tag);
    const size_t k = static_cast<size_t>(RecordTraits<T>::kKind);
    auto n = reader->TableSize(RecordTraits<T>::Schema());
    if (n.ok()) {
      f.has_table[k] = true;
      f.table_rows[k] = *n;
    } else if (n.status().code() == StatusCode::kNotFound) {
      // A .partial file has only the tables flushed so far, and a file older than
      // the kind has none: expected, not a problem.
      if (partial || reader->format_minor() < KindSinceMinor<T>()) return;
      const std::string missing =
          path + ": has no /records/" + RecordKindName(RecordTraits<T>::kKind) + " table";
      f.open_problems.push_back(missing + "; merged as empty");
      f.damage += (f.damage.empty() ? "" : "; ") + missing;
    } else {
      // A table that fails its checks (short of its declared rows after a
      // full disk, crafted, a link to elsewhere) is not read: it costs its
      // kind, not the rank's other kinds.
      const std::string refused = path + ": /records/" +
                                  RecordKindName(RecordTraits<T>::kKind) +
                                  " not merged (" + n.status().message() + ")";
      f.open_problems.push_back(refused);
      f.damage += (f.damage.empty() ? "" : "; ") + refused;
    }
  });
  return f;
}

StatusOr<OpenedJob> OpenJob(MergeComm& comm, const JobListing& listing, const OpenSettings& how) {
  OpenedJob job;
  std::vector<std::string> paths;
  for (const auto& [path, seen] : listing.finals) {
    Candidate& c = job.candidates.emplace_back();
    c.path = path;
    c.name_rank = RankFromFileName(fs::path(path).filename().string(), false);
    paths.push_back(path);
  }
  job.strings.resize(job.candidates.size());
  AON_RETURN_IF_ERROR(
      OpenShared(comm, job, 0, AssignFiles(paths, listing.finals, comm.size()), how));

  // A final file wins over a .partial file of its rank: that one is not opened.
  const std::set<uint32_t> final_ranks = RanksOfReadableFiles(job.candidates);
  const size_t first = job.candidates.size();
  std::vector<std::string> to_open;
  std::vector<size_t> opened_at;
  for (const auto& [path, seen] : listing.partials) {
    Candidate& c = job.candidates.emplace_back();
    c.path = path;
    c.partial = true;
    c.name_rank = RankFromFileName(fs::path(path).filename().string(), true);
    if (c.name_rank && final_ranks.count(*c.name_rank) > 0) continue;
    to_open.push_back(path);
    opened_at.push_back(job.candidates.size() - 1);
  }
  job.strings.resize(job.candidates.size());
  // Over all the .partial candidates: -1 (opened by no process) for the skipped ones.
  const std::vector<int> assigned = AssignFiles(to_open, listing.partials, comm.size());
  std::vector<int> who(job.candidates.size() - first, -1);
  for (size_t j = 0; j < opened_at.size(); ++j) who[opened_at[j] - first] = assigned[j];
  AON_RETURN_IF_ERROR(OpenShared(comm, job, first, who, how));
  return job;
}

}  // namespace aon::merge
