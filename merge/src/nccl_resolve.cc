// NCCL record post-processing (see nccl_resolve.h): the agent's former
// FinalizeNcclRecords, on tables read back from a rank file, plus CUDA-graph
// replays.
#include "aon/merge/nccl_resolve.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace aon {
namespace {

bool IsOperation(const NcclRecord& r) {
  return r.event_type == static_cast<uint8_t>(NcclEventType::kColl) ||
         r.event_type == static_cast<uint8_t>(NcclEventType::kP2p);
}

// Event types of the CUDA-graph bookkeeping rows format 1.3 kept in the nccl
// table (records.h: now NcclGraphRecord).
constexpr uint8_t kLegacyGraphNode = 6;
constexpr uint8_t kLegacyCapturedColl = 7;
constexpr uint8_t kLegacyCapturedP2p = 8;

bool IsLegacyGraphRow(const NcclRecord& r) {
  return r.event_type >= kLegacyGraphNode && r.event_type <= kLegacyCapturedP2p;
}

constexpr uint8_t kTimingNone = static_cast<uint8_t>(NcclGpuTiming::kNone);
constexpr uint8_t kTimingRaw = static_cast<uint8_t>(NcclGpuTiming::kRaw);
constexpr uint8_t kTimingKernel = static_cast<uint8_t>(NcclGpuTiming::kKernel);

// What the graph pass decided about each record (indexed like `nccl` after it).
enum class Role : uint8_t { kPlain, kCaptured, kReplay };

struct ReplayKernel {
  uint64_t start;
  uint64_t end;
  uint32_t correlation;
  uint32_t stream;
};

void AddNote(std::string* note, const std::string& text) {
  if (!note->empty()) *note += "; ";
  *note += text;
}

// The operation record a captured API call stands for.
NcclRecord OperationOfCapturedCall(const NcclGraphRecord& c) {
  NcclRecord op{};
  op.start_ns = op.end_ns = c.time_ns;
  op.comm_hash = c.comm_hash;
  op.count = c.count;
  op.bytes = c.bytes;
  op.external_id = c.external_id;
  op.func_id = c.func_id;
  op.datatype_id = c.datatype_id;
  op.root = c.root;
  op.peer = -1;  // P2pApi does not name the peer
  op.channel_id = -1;
  op.comm_rank = c.comm_rank;
  op.comm_nranks = c.comm_nranks;
  op.comm_nnodes = c.comm_nnodes;
  op.event_type = static_cast<uint8_t>(c.event == static_cast<uint8_t>(NcclGraphEvent::kCapturedP2p)
                                           ? NcclEventType::kP2p
                                           : NcclEventType::kColl);
  op.gpu_timing = kTimingNone;
  return op;
}

// The CUDA-graph pass (nccl_resolve.h, "CUDA graphs"), stage by stage: the
// graph rows, every node's launch, the replayed kernels of each launch, the
// operations each launch ran at capture, then each launch expanded into its
// replays; what could not be tied is said in the result's note.
class GraphReplayPass {
 public:
  GraphReplayPass(std::vector<NcclRecord>& nccl, NcclResolveResult* result,
                  std::vector<int64_t>* replay_offsets)
      : nccl_(nccl), result_(result), replay_offsets_(replay_offsets) {}

  std::vector<Role> Run(std::span<const NcclGraphRecord> graph,
                        std::span<const KernelRecord> kernels, std::span<const ApiRecord> apis) {
    ReadGraphRows(graph);
    role_.assign(nccl_.size(), Role::kPlain);
    if (launch_of_created_.empty() && captured_calls_.empty()) return role_;
    IndexReplays(LaunchOfNode(), kernels, apis);
    IndexCaptures();
    std::vector<uint64_t> ordered(launches_.begin(), launches_.end());
    std::sort(ordered.begin(), ordered.end());  // deterministic output order
    for (uint64_t launch : ordered) {
      if (!expanded_.count(launch)) ExpandLaunch(launch);
    }
    for (const NcclRecord& c : added_) {
      nccl_.push_back(c);
      role_.push_back(Role::kReplay);
    }
    NoteProblems();
    return role_;
  }

 private:
  // Node rows: created node -> its launch; clone -> original. Captured calls.
  void ReadGraphRows(std::span<const NcclGraphRecord> graph) {
    for (const NcclGraphRecord& r : graph) {
      switch (static_cast<NcclGraphEvent>(r.event)) {
        case NcclGraphEvent::kNodeCreated:
          if (launch_of_created_.emplace(r.node_id, r.external_id).second) ++result_->graph_nodes;
          break;
        case NcclGraphEvent::kNodeCloned:
          if (original_of_clone_.emplace(r.node_id, r.original_node_id).second) {
            ++result_->graph_node_clones;
          }
          break;
        case NcclGraphEvent::kCapturedColl:
        case NcclGraphEvent::kCapturedP2p:
          captured_calls_.push_back(r);
          break;
      }
    }
  }

  // Every node (created or clone, through any number of clone generations) ->
  // the NCCL launch that created its origin. A clone whose chain does not end at
  // a created node (its row lost) maps to nothing: its replays are reported,
  // not guessed.
  std::unordered_map<uint64_t, uint64_t> LaunchOfNode() const {
    std::unordered_map<uint64_t, uint64_t> launch_of_node = launch_of_created_;
    for (const auto& [clone, original] : original_of_clone_) {
      uint64_t n = original;
      for (int depth = 0; depth < 64; ++depth) {
        if (auto c = launch_of_created_.find(n); c != launch_of_created_.end()) {
          launch_of_node.emplace(clone, c->second);
          break;
        }
        auto up = original_of_clone_.find(n);
        if (up == original_of_clone_.end()) break;
        n = up->second;
      }
    }
    return launch_of_node;
  }

  // The replayed kernels of each launch, in start order, and the start of the
  // API call that launched each.
  void IndexReplays(const std::unordered_map<uint64_t, uint64_t>& launch_of_node,
                    std::span<const KernelRecord> kernels, std::span<const ApiRecord> apis) {
    for (const KernelRecord& k : kernels) {
      if (k.graph_node_id == 0) continue;
      auto l = launch_of_node.find(k.graph_node_id);
      if (l == launch_of_node.end()) continue;
      replays_of_launch_[l->second].push_back(
          {k.start_ns, k.end_ns, k.correlation_id, k.stream_id});
      graph_launch_call_.emplace(k.correlation_id, 0);
    }
    for (auto& [launch, replays] : replays_of_launch_) {
      std::sort(replays.begin(), replays.end(),
                [](const ReplayKernel& a, const ReplayKernel& b) { return a.start < b.start; });
    }
    for (const ApiRecord& a : apis) {
      auto c = graph_launch_call_.find(a.correlation_id);
      if (c != graph_launch_call_.end() && (c->second == 0 || a.start_ns < c->second)) {
        c->second = a.start_ns;
      }
    }
  }

  // The operations each launch ran at capture (NCCL reported them then),
  // launches already expanded (a resolved file run again), and the records
  // NCCL reported without a launch.
  void IndexCaptures() {
    for (const auto& [node, launch] : launch_of_created_) launches_.insert(launch);
    for (const NcclGraphRecord& c : captured_calls_) {
      if (c.external_id != 0) launches_.insert(c.external_id);
    }
    launches_.erase(0);
    for (size_t i = 0; i < nccl_.size(); ++i) {
      const NcclRecord& r = nccl_[i];
      if (!IsOperation(r) || r.external_id == 0 || !launches_.count(r.external_id)) continue;
      if (r.graph_replay != 0) {
        expanded_.insert(r.external_id);
      } else {
        ops_of_launch_[r.external_id].push_back(i);
      }
    }
    // Records NCCL reported without a launch (host-callback replays are among
    // them), by communicator: candidates for the replays of captured calls.
    for (size_t i = 0; i < nccl_.size(); ++i) {
      const NcclRecord& r = nccl_[i];
      if (IsOperation(r) && r.external_id == 0 && r.graph_replay == 0 && r.correlation_id == 0) {
        unlaunched_of_comm_[r.comm_hash].push_back(i);
      }
    }
  }

  // One launch: its captured operations (or, where NCCL reported nothing at
  // capture, its captured calls), each with a record per replayed kernel.
  void ExpandLaunch(uint64_t launch) {
    std::vector<size_t> ops = ops_of_launch_[launch];
    bool from_calls = false;
    if (ops.empty()) {
      // NCCL reported nothing at capture: the captured calls are the operations.
      for (const NcclGraphRecord& c : captured_calls_) {
        if (c.external_id != launch) continue;
        ops.push_back(nccl_.size());
        nccl_.push_back(OperationOfCapturedCall(c));
        role_.push_back(Role::kPlain);
        ++result_->captured_from_calls;
      }
      from_calls = true;
    }
    if (ops.empty()) {
      ++result_->graph_launches_unmatched;
      return;
    }
    const std::vector<ReplayKernel>& replays = replays_of_launch_[launch];
    for (size_t i : ops) {
      role_[i] = Role::kCaptured;
      ++result_->captured_operations;
      if (replays.empty()) {
        ++result_->captured_without_replay;
        continue;
      }
      nccl_[i].stream_id = replays.front().stream;
      const std::vector<size_t> reported_for =
          from_calls ? ReportedReplays(i, replays) : std::vector<size_t>(replays.size(), SIZE_MAX);
      for (size_t k = 0; k < replays.size(); ++k)
        AddReplay(launch, i, k, replays[k], reported_for[k]);
    }
  }

  // NCCL's own replay records (only where it reported nothing at capture):
  // the same call (communicator, function, size, peer), after the capture;
  // each replayed kernel takes the latest one that started before it.
  std::vector<size_t> ReportedReplays(size_t i, const std::vector<ReplayKernel>& replays) {
    std::vector<size_t> reported_for(replays.size(), SIZE_MAX);
    const NcclRecord& op = nccl_[i];
    const uint8_t want_type = op.event_type;
    std::vector<size_t> cands;
    for (size_t j : unlaunched_of_comm_[op.comm_hash]) {
      const NcclRecord& r = nccl_[j];
      if (role_[j] != Role::kPlain || r.event_type != want_type || r.func_id != op.func_id ||
          r.count != op.count || r.datatype_id != op.datatype_id ||
          (op.peer >= 0 && r.peer != op.peer) ||  // P2pApi names no peer
          r.start_ns < op.start_ns) {
        continue;
      }
      cands.push_back(j);
    }
    std::sort(cands.begin(), cands.end(),
              [&](size_t a, size_t b) { return nccl_[a].start_ns < nccl_[b].start_ns; });
    size_t next = 0;
    for (size_t k = 0; k < replays.size(); ++k) {
      size_t best = SIZE_MAX;
      while (next < cands.size() && nccl_[cands[next]].start_ns <= replays[k].start) best = next++;
      if (best != SIZE_MAX) reported_for[k] = cands[best];
    }
    return reported_for;
  }

  // Replay k of captured operation i: NCCL's own record of it tied to the
  // kernel (`reported` != SIZE_MAX), or a copy of the operation at the kernel's times.
  void AddReplay(uint64_t launch, size_t i, size_t k, const ReplayKernel& kr, size_t reported) {
    const uint32_t number = static_cast<uint32_t>(k + 1);
    ++result_->graph_replays;
    if (reported != SIZE_MAX) {
      NcclRecord& r = nccl_[reported];
      role_[reported] = Role::kReplay;
      ++result_->graph_replays_reported;
      if (k == 0 || nccl_[i].seq_number == 0) nccl_[i].seq_number = r.seq_number;
      r.graph_replay = number;
      r.external_id = launch;
      r.correlation_id = kr.correlation;
      r.stream_id = kr.stream;
      if (r.gpu_timing == kTimingNone) {
        r.gpu_start_ns = kr.start;
        r.end_ns = std::max(kr.end, r.start_ns);
        r.gpu_timing = kTimingKernel;
      } else if (r.gpu_timing == kTimingRaw && r.gpu_start_ns != 0) {
        replay_offsets_->push_back(static_cast<int64_t>(kr.start) -
                                   static_cast<int64_t>(r.gpu_start_ns));
      }
      return;
    }
    NcclRecord c = nccl_[i];
    c.graph_replay = number;
    c.correlation_id = kr.correlation;
    c.stream_id = kr.stream;
    const uint64_t call = graph_launch_call_[kr.correlation];
    c.start_ns = call != 0 && call <= kr.start ? call : kr.start;
    c.gpu_start_ns = kr.start;
    c.end_ns = std::max(kr.end, c.start_ns);
    c.gpu_timing = kTimingKernel;
    added_.push_back(c);
  }

  void NoteProblems() {
    std::string& note = result_->note;
    if (result_->captured_without_replay > 0) {
      AddNote(&note, "NCCL CUDA graphs: " + std::to_string(result_->captured_without_replay) +
                         " of " + std::to_string(result_->captured_operations) +
                         " captured operations have no replayed kernel in this file (never "
                         "replayed, or their graph nodes were not recorded): no replay records");
    }
    if (result_->graph_launches_unmatched > 0) {
      AddNote(&note, "NCCL CUDA graphs: " + std::to_string(result_->graph_launches_unmatched) +
                         " captured NCCL launches have graph nodes but no NCCL operation: their "
                         "replays are not attributed");
    }
  }

  std::vector<NcclRecord>& nccl_;
  NcclResolveResult* result_;
  std::vector<int64_t>* replay_offsets_;
  std::vector<Role> role_;
  std::unordered_map<uint64_t, uint64_t> launch_of_created_;
  std::unordered_map<uint64_t, uint64_t> original_of_clone_;
  std::vector<NcclGraphRecord> captured_calls_;
  std::unordered_map<uint64_t, std::vector<ReplayKernel>> replays_of_launch_;
  std::unordered_map<uint32_t, uint64_t> graph_launch_call_;  // correlation -> API call start
  std::unordered_set<uint64_t> launches_;
  std::unordered_map<uint64_t, std::vector<size_t>> ops_of_launch_;
  std::unordered_set<uint64_t> expanded_;
  std::unordered_map<uint64_t, std::vector<size_t>> unlaunched_of_comm_;
  std::vector<NcclRecord> added_;
};

// Appends replay records, and returns each record's role; raw replay channel
// times tied to their kernel are added to `replay_offsets` for the calibration.
std::vector<Role> ResolveGraphReplays(std::vector<NcclRecord>& nccl,
                                      std::span<const NcclGraphRecord> graph,
                                      std::span<const KernelRecord> kernels,
                                      std::span<const ApiRecord> apis, NcclResolveResult* result,
                                      std::vector<int64_t>* replay_offsets) {
  return GraphReplayPass(nccl, result, replay_offsets).Run(graph, kernels, apis);
}

}  // namespace

std::vector<NcclGraphRecord> TakeLegacyGraphRows(std::vector<NcclRecord>& nccl) {
  std::vector<NcclGraphRecord> graph;
  for (const NcclRecord& r : nccl) {
    if (!IsLegacyGraphRow(r)) continue;
    NcclGraphRecord g{};
    g.time_ns = r.start_ns;
    g.external_id = r.external_id;
    g.comm_hash = r.comm_hash;
    g.root = r.root;
    g.comm_rank = r.comm_rank;
    g.comm_nranks = r.comm_nranks;
    g.comm_nnodes = r.comm_nnodes;
    if (r.event_type == kLegacyGraphNode) {
      // 1.3: seq_number = the node, count = the original of a clone (0: created).
      g.node_id = r.seq_number;
      g.original_node_id = r.count;
      g.event = static_cast<uint8_t>(r.count == 0 ? NcclGraphEvent::kNodeCreated
                                                  : NcclGraphEvent::kNodeCloned);
    } else {
      g.count = r.count;
      g.bytes = r.bytes;
      g.func_id = r.func_id;
      g.datatype_id = r.datatype_id;
      g.event =
          static_cast<uint8_t>(r.event_type == kLegacyCapturedP2p ? NcclGraphEvent::kCapturedP2p
                                                                  : NcclGraphEvent::kCapturedColl);
    }
    graph.push_back(g);
  }
  if (!graph.empty()) std::erase_if(nccl, IsLegacyGraphRow);
  return graph;
}

bool NcclRecordsNeedResolution(std::span<const NcclRecord> nccl,
                               std::span<const NcclGraphRecord> graph) {
  return !graph.empty() || std::any_of(nccl.begin(), nccl.end(), [](const NcclRecord& r) {
    return r.gpu_timing == kTimingRaw || (IsOperation(r) && r.correlation_id == 0) ||
           IsLegacyGraphRow(r);
  });
}

std::optional<NcclReferencedIds> NcclReferencedRecords(
    std::span<const NcclRecord> nccl, std::span<const NcclGraphRecord> graph,
    std::span<const ExternalCorrelationRecord> ext) {
  if (!graph.empty() || std::any_of(nccl.begin(), nccl.end(), IsLegacyGraphRow)) {
    return std::nullopt;
  }
  // Without graph rows ResolveNcclRecords reads API calls only for NCCL's
  // launches (ids of NCCL external correlations), and kernels only for the
  // operations' ids: one they had, or one from those launches.
  NcclReferencedIds ids;
  for (const ExternalCorrelationRecord& e : ext) {
    if (e.external_kind != kNcclExternalCorrelationKind) continue;
    ids.apis.insert(e.correlation_id);
    ids.kernels.insert(e.correlation_id);
  }
  for (const NcclRecord& r : nccl) {
    if (r.correlation_id != 0) ids.kernels.insert(r.correlation_id);
  }
  return ids;
}

NcclResolveResult ResolveNcclRecords(std::vector<NcclRecord>& nccl,
                                     std::span<const NcclGraphRecord> graph,
                                     std::span<const ExternalCorrelationRecord> ext,
                                     std::span<const KernelRecord> kernels,
                                     std::span<const ApiRecord> apis, RealtimeAnchorNs anchor) {
  NcclResolveResult result;
  std::vector<int64_t> replay_offsets;
  std::vector<NcclGraphRecord> legacy = TakeLegacyGraphRows(nccl);
  if (!legacy.empty()) legacy.insert(legacy.end(), graph.begin(), graph.end());
  const std::vector<Role> role =
      ResolveGraphReplays(nccl, legacy.empty() ? graph : std::span<const NcclGraphRecord>(legacy),
                          kernels, apis, &result, &replay_offsets);

  // NCCL's launches: external id -> CUPTI correlation id (the last one wins, as
  // in the agent).
  std::unordered_map<uint64_t, uint32_t> corr_of_external;
  for (const ExternalCorrelationRecord& e : ext) {
    if (e.external_kind == kNcclExternalCorrelationKind) {
      corr_of_external[e.external_id] = e.correlation_id;
    }
  }
  std::unordered_set<uint32_t> launch_corr;  // correlation ids of NCCL launches
  launch_corr.reserve(corr_of_external.size());
  for (const auto& [external, corr] : corr_of_external) launch_corr.insert(corr);

  // NCCL's launches in time order: (host time of the launch call, its CUPTI
  // correlation id). Fallback for an operation no launch claimed on its thread
  // (seen for ~1 % of send/recv operations on H200): the nearest launch.
  std::vector<std::pair<uint64_t, uint32_t>> launches;
  if (!launch_corr.empty()) {
    for (const ApiRecord& a : apis) {
      if (launch_corr.count(a.correlation_id)) launches.emplace_back(a.start_ns, a.correlation_id);
    }
    std::sort(launches.begin(), launches.end());
  }

  // Pass 1: the correlation id of every operation (replays have their kernel's).
  for (size_t i = 0; i < nccl.size(); ++i) {
    NcclRecord& r = nccl[i];
    if (!IsOperation(r) || role[i] == Role::kReplay || r.graph_replay != 0) continue;
    if (r.correlation_id != 0) {
      ++result.already_resolved;
      continue;
    }
    auto c = r.external_id != 0 ? corr_of_external.find(r.external_id) : corr_of_external.end();
    if (c != corr_of_external.end()) {
      r.correlation_id = c->second;
      ++result.by_external_id;
      continue;
    }
    // The NCCL launch nearest in time (NCCL may also report an operation just
    // after its launch, e.g. the last one of a run).
    auto next =
        std::lower_bound(launches.begin(), launches.end(), std::make_pair(r.start_ns, uint32_t{0}));
    auto best = next;
    if (next == launches.end() || (next != launches.begin() && r.start_ns - std::prev(next)->first <
                                                                   next->first - r.start_ns)) {
      best = next == launches.begin() ? launches.end() : std::prev(next);
    }
    if (best == launches.end()) {
      ++result.unresolved;
      continue;
    }
    r.correlation_id = best->second;
    ++result.by_time;
  }

  // The kernels of those correlation ids only (the first record of an id wins,
  // as in the agent).
  // Neither replays (a graph launch's kernels share one correlation id) nor
  // captured operations (their launch ran nothing) are looked up.
  auto looked_up = [&](size_t i) {
    const NcclRecord& r = nccl[i];
    return IsOperation(r) && r.correlation_id != 0 && role[i] == Role::kPlain &&
           r.graph_replay == 0;
  };
  std::unordered_set<uint32_t> wanted;
  for (size_t i = 0; i < nccl.size(); ++i) {
    if (looked_up(i)) wanted.insert(nccl[i].correlation_id);
  }
  struct KernelAt {
    uint64_t start;
    uint64_t end;
    uint32_t stream;
  };
  std::unordered_map<uint32_t, KernelAt> kernel_of_corr;
  kernel_of_corr.reserve(wanted.size());
  if (!wanted.empty()) {
    for (const KernelRecord& k : kernels) {
      if (wanted.count(k.correlation_id)) {
        kernel_of_corr.emplace(k.correlation_id, KernelAt{k.start_ns, k.end_ns, k.stream_id});
      }
    }
  }
  std::unordered_set<uint32_t>().swap(wanted);

  // Pass 2: each operation's kernel. Per kernel, the earliest first-channel
  // start of the operations it ran: that one starts with the kernel; later
  // operations of a fused launch (a send/recv group) start when their peer is
  // ready.
  std::unordered_map<uint32_t, int64_t> offset_of_kernel;
  for (size_t i = 0; i < nccl.size(); ++i) {
    NcclRecord& r = nccl[i];
    if (!looked_up(i)) continue;
    auto k = kernel_of_corr.find(r.correlation_id);
    if (k == kernel_of_corr.end()) {
      ++result.without_kernel;
      continue;
    }
    r.stream_id = k->second.stream;
    if (r.gpu_timing == kTimingNone) {
      // No channel timing: the operation's GPU span is its kernel's (shared by
      // the operations of one launch, e.g. a send/recv group).
      r.gpu_start_ns = k->second.start;
      r.end_ns = std::max(k->second.end, r.start_ns);
      r.gpu_timing = kTimingKernel;
    }
    if (r.gpu_timing == kTimingRaw && r.gpu_start_ns != 0) {
      const int64_t offset =
          static_cast<int64_t>(k->second.start) - static_cast<int64_t>(r.gpu_start_ns);
      auto [it, inserted] = offset_of_kernel.emplace(r.correlation_id, offset);
      if (!inserted) it->second = std::max(it->second, offset);
    }
  }

  // Calibration: median over kernels; spread of the middle 80 % (the
  // channel-vs-kernel start jitter).
  std::vector<int64_t> offsets = std::move(replay_offsets);
  offsets.reserve(offsets.size() + offset_of_kernel.size());
  for (const auto& [corr, offset] : offset_of_kernel) offsets.push_back(offset);
  NcclGpuClockCalibration& cal = result.calibration;
  if (!offsets.empty()) {
    std::sort(offsets.begin(), offsets.end());
    cal.offset_ns = offsets[offsets.size() / 2];
    cal.pairs = static_cast<int64_t>(offsets.size());
    const size_t lo = offsets.size() / 10, hi = offsets.size() - 1 - offsets.size() / 10;
    cal.spread_ns = offsets[hi] - offsets[lo];
    result.channel_timing = NcclGpuTiming::kCalibrated;
  } else {
    // No pairs (CUPTI not capturing): %globaltimer tracks CLOCK_REALTIME on
    // current drivers; convert through the rank's realtime anchor.
    cal.offset_ns =
        static_cast<int64_t>(anchor.clock_ns) - static_cast<int64_t>(anchor.realtime_ns);
    result.channel_timing = NcclGpuTiming::kAssumed;
  }

  auto convert = [&](uint64_t t) {
    return t == 0 ? 0 : static_cast<uint64_t>(static_cast<int64_t>(t) + cal.offset_ns);
  };
  for (NcclRecord& r : nccl) {
    if (r.gpu_timing != kTimingRaw) continue;
    ++result.raw_converted;
    if (r.event_type == static_cast<uint8_t>(NcclEventType::kKernelCh)) {
      r.start_ns = convert(r.start_ns);
    } else {
      r.gpu_start_ns = convert(r.gpu_start_ns);
    }
    r.end_ns = convert(r.end_ns);
    r.gpu_timing = static_cast<uint8_t>(result.channel_timing);
  }
  if (result.raw_converted > 0 && result.channel_timing == NcclGpuTiming::kAssumed) {
    AddNote(&result.note,
            "NCCL: GPU channel times could not be calibrated against CUPTI (no correlated "
            "kernels); %globaltimer was taken as CLOCK_REALTIME");
  }
  return result;
}

}  // namespace aon
