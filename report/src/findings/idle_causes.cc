// Idle causes, shared by the rules idle-host-sync, host-work, launch-bound and
// pageable-copies (rules/): the GPU gaps of one cause (host synchronization, host
// work outside CUDA calls, host launched late, synchronous/pageable copies) on the rank where they
// cost the most, in steady state (median per step x steps). Pageable copies add what pinning
// would save of their time (MemoryRank::pinning_saves_ns: at the run's own pinned rate, else the
// link's). The
// straggler's claimed gaps are left out: its host-late and host-work gaps, and its gaps of any
// cause inside its slow range.
#include "findings/idle_causes.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aon/format/host_stack.h"

namespace aon::report {

namespace {

std::string TopNvtx(const std::map<std::string, uint64_t>& m) {
  std::string best;
  uint64_t v = 0;
  for (const auto& [name, ns] : m) {
    if (!name.empty() && ns > v) best = name, v = ns;
  }
  return best;
}

// What the host ran during the gaps, from the samples taken in them: the
// functions of at least a tenth of the samples (at most three), each with its
// count, its lines by samples, and the thread that ran it most.
std::string SampledText(const IdleAnalysis::SampledFrames& s, double* top_share) {
  struct Function {
    uint64_t n = 0;
    bool python = false;  // the key lacks its ")" (the lines go before it)
    std::vector<std::pair<uint64_t, std::string>> lines;  // samples, line
    std::map<std::string, uint64_t> threads;
  };
  // "busy (prep.py" -> ... (a file's directories are in the trace, not here);
  // a native frame under itself.
  std::map<std::string, Function> functions;
  for (const auto& [frame, n] : s.frames) {
    const std::optional<PythonFrame> py = ParsePythonFrame(frame);
    Function& f = functions[py ? py->FunctionAndFileName() : frame];
    f.n += n;
    f.python = py.has_value();
    if (py && !py->line.empty()) f.lines.emplace_back(n, std::string(py->line));
    for (const auto& [thread, k] : s.threads.at(frame)) f.threads[thread] += k;
  }
  std::vector<std::pair<uint64_t, std::string>> order;
  for (const auto& [key, f] : functions) order.emplace_back(f.n, key);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  *top_share = order.empty() || s.samples == 0
                   ? 0
                   : static_cast<double>(order[0].first) / static_cast<double>(s.samples);
  std::string text, last_thread;
  for (size_t i = 0; i < order.size() && i < 3; ++i) {
    const auto& [n, key] = order[i];
    if (i > 0 && n * 10 < s.samples) break;
    Function& f = functions[key];
    std::string thread;
    uint64_t most = 0;
    for (const auto& [name, k] : f.threads) {
      if (k > most) thread = name, most = k;
    }
    std::string shown = key;
    if (!f.lines.empty()) {
      std::sort(f.lines.begin(), f.lines.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      shown += ":";
      for (size_t k = 0; k < f.lines.size() && k < 3; ++k)
        shown += (k ? "," : "") + f.lines[k].second;
      if (f.lines.size() > 3) shown += ",...";
    }
    if (f.python) shown += ")";
    char share[64];
    std::snprintf(share, sizeof share, " in %llu of %llu samples (%.0f %%)",
                  static_cast<unsigned long long>(n), static_cast<unsigned long long>(s.samples),
                  100.0 * static_cast<double>(n) / static_cast<double>(s.samples));
    if (!text.empty()) text += ", ";
    if (!thread.empty() && thread != last_thread) text += "thread \"" + thread + "\" ran ";
    last_thread = thread;
    text += "`" + shown + "`" + share;
  }
  return text;
}

std::string RateText(uint64_t bytes, uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB/s", static_cast<double>(bytes) / static_cast<double>(ns));
  return buf;
}

}  // namespace

std::optional<Detection> DetectIdleCause(const RuleInput& in, GapCause cause) {
  const Report& r = in.report;
  const int straggler = in.claims.straggler_rank;
  uint32_t worst = 0;
  double worst_ns = 0, worst_gaps_ns = 0, all = 0;
  uint64_t count = 0;
  for (uint32_t q = 0; q < r.idle.cause_ns.size(); ++q) {
    const bool is_straggler = static_cast<int>(q) == straggler;
    // The straggler's late launches are its lateness, claimed by its finding.
    if ((cause == GapCause::kHostLate || cause == GapCause::kHostWork) && is_straggler) continue;
    const double gaps_ns =
        static_cast<double>(r.idle.Steady(q, cause, is_straggler ? in.claims.straggler_range : ""));
    double ns = gaps_ns;
    if (cause == GapCause::kSyncCopy && q < r.memory.size())
      ns += static_cast<double>(r.memory[q].pinning_saves_ns);
    all += ns;
    if (ns > worst_ns) {
      worst_ns = ns, worst_gaps_ns = gaps_ns, worst = q;
      auto jt = r.idle.cause_count[q].find(cause);
      count = jt == r.idle.cause_count[q].end() ? 0 : jt->second;
    }
  }
  if (worst_ns < in.min_gain_ns || worst_ns <= 0) return std::nullopt;
  Detection d;
  d.rank = static_cast<int>(worst);
  d.gain_ns = worst_ns;
  d.values["rank"] = std::to_string(worst);
  // The gaps alone: pinning's saving of the copies' own time is said apart
  // (pageable copies made while the GPU was busy leave no gap at all).
  if (worst_gaps_ns > 0 || cause != GapCause::kSyncCopy) {
    d.values["idle"] = in.PerStepText(worst_gaps_ns);
    d.values["gaps"] = std::to_string(count);
  }
  d.values["cause"] = GapCauseName(cause);
  const std::string range =
      TopNvtx(r.idle.cause_nvtx_ns[worst].count(cause) ? r.idle.cause_nvtx_ns[worst].at(cause)
                                                       : std::map<std::string, uint64_t>{});
  if (!range.empty()) d.values["range"] = range;
  for (const Gap& g : r.idle.top_gaps) {
    if (g.cause == cause && g.rank == worst) {
      if (!g.detail.empty()) d.values["longest"] = g.detail;
      break;
    }
  }
  if (cause == GapCause::kSyncCopy && worst < r.memory.size() && r.memory[worst].pageable_count) {
    d.values["pageable_copies"] = std::to_string(r.memory[worst].pageable_count);
    const MemoryRank& m = r.memory[worst];
    d.values["pageable_bytes"] = FormatBytes(static_cast<double>(m.pageable_bytes));
    if (m.pageable_ns > 0) d.values["pageable_rate"] = RateText(m.pageable_bytes, m.pageable_ns);
    char link[96];
    std::snprintf(link, sizeof link,
                  "no pinned copy to compare: at most the GPU's PCIe gen%u x%u link, %.1f GB/s",
                  m.pcie_gen, m.pcie_width, m.link_bytes_per_ns);
    d.values["pinned_rate"] =
        m.pinned_ns > 0
            ? "pinned copies of this run reached " + RateText(m.pinned_bytes, m.pinned_ns)
        : m.link_bytes_per_ns > 0 ? std::string(link)
                                  : "no pinned copy to compare: pinning assumed to double the rate";
    d.numbers["pinning_saves_ns"] = static_cast<double>(m.pinning_saves_ns);
    if (m.pinning_saves_ns > 0)
      d.values["saves"] = in.PerStepText(static_cast<double>(m.pinning_saves_ns));
  }
  if (worst < r.idle.cause_samples.size()) {
    if (auto it = r.idle.cause_samples[worst].find(cause);
        it != r.idle.cause_samples[worst].end()) {
      double share = 0;
      d.values["sampled"] = SampledText(it->second, &share);
      d.numbers["host_samples"] = static_cast<double>(it->second.samples);
      d.numbers["top_frame_share"] = share;
    }
  }
  d.numbers.insert(
      {{"idle_ns", worst_gaps_ns}, {"gaps", static_cast<double>(count)}, {"all_ranks_ns", all}});
  return d;
}

}  // namespace aon::report
