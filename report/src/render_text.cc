// Terminal summary and JSON of a Report.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "aon/report/report.h"

namespace aon::report {

std::string FormatDuration(double ns) {
  char buf[48];
  const double a = std::fabs(ns);
  if (a >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
  } else if (a >= 1e6) {
    std::snprintf(buf, sizeof buf, a >= 1e8 ? "%.0f ms" : "%.1f ms", ns / 1e6);
  } else if (a >= 1e3) {
    std::snprintf(buf, sizeof buf, a >= 1e5 ? "%.0f us" : "%.1f us", ns / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  }
  return buf;
}

std::string FormatBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, (b == std::floor(b) || u == 0) ? "%.0f %s" : "%.1f %s", b,
                units[u]);
  return buf;
}

namespace {

std::string Wrap(const std::string& text, size_t width, const std::string& indent) {
  std::string out, line;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t sp = text.find(' ', pos);
    if (sp == std::string::npos) sp = text.size();
    const std::string word = text.substr(pos, sp - pos);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    pos = sp + 1;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

void AppendJsonString(std::string* out, const std::string& s) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\r':
        *out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(
              c);  // invalid UTF-8 passes through; names are from the string table
        }
    }
  }
  *out += '"';
}

std::string Num(double v) {
  if (!std::isfinite(v)) return "0";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 1e18) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.6g", v);
  }
  return buf;
}

}  // namespace

std::string RenderTerminal(const Report& r) {
  std::string o;
  char buf[256];
  o += "AON report: job " + (r.job_id.empty() ? std::string("?") : r.job_id) + "  (" + r.path +
       ")\n";
  uint32_t ok = 0;
  for (const RankInfo& i : r.ranks) ok += i.status == RankStatus::kOk;
  std::snprintf(
      buf, sizeof buf, "%u ranks (%u ok), GPU activity %s, source %s, steps: %zu (%s)\n",
      r.world_size, ok, FormatDuration(static_cast<double>(r.end_ns - r.start_ns)).c_str(),
      r.source.empty() ? "?" : r.source.c_str(), r.steps.typical_count, r.steps.method.c_str());
  o += buf;
  if (r.synthetic)
    o += "*** SYNTHETIC: the GPU activity in this timeline is FAKE (aon-synthetic-app) ***\n";
  int notes = 0;
  for (const std::string& n : r.notes) {
    if (++notes > 3) {
      o += "note: (" + std::to_string(r.notes.size() - 3) + " more notes in the HTML report)\n";
      break;
    }
    o += "note: " + n.substr(0, 150) + "\n";
  }
  o += "\nFindings (by estimated time to gain):\n";
  if (r.findings.empty())
    o += "  none: no straggler, exposed communication, idle or imbalance above 0.2 % of the run\n";
  for (size_t i = 0; i < r.findings.size() && i < 5; ++i) {
    const Finding& f = r.findings[i];
    std::snprintf(buf, sizeof buf, "%zu. [gain ~%s%s] ", i + 1,
                  FormatDuration(static_cast<double>(f.gain_ns)).c_str(),
                  f.gain_per_step_ns > 0
                      ? (", " + FormatDuration(f.gain_per_step_ns) + "/step").c_str()
                      : "");
    std::string text = Wrap(std::string(buf) + f.action, 96, "    ");
    o += " " + text.substr(4);
    o += Wrap("evidence: " + f.evidence, 92, "      ");
  }
  std::snprintf(buf, sizeof buf, "\n %4s  %-12s  %5s  %9s  %8s  %7s  %6s  %7s  %6s  %6s\n", "rank",
                "host", "steps", "step mean", "GPU busy", "compute", "comm", "exposed", "idle",
                "last");
  o += buf;
  const uint32_t shown = std::min<uint32_t>(r.world_size, 16);
  for (uint32_t q = 0; q < shown; ++q) {
    const RankInfo& info = r.ranks[q];
    if (info.status != RankStatus::kOk) {
      std::snprintf(buf, sizeof buf, " %4u  %-12.12s  %s\n", q, info.host.c_str(),
                    RankStatusName(info.status));
      o += buf;
      continue;
    }
    const RankBreakdown& b = r.breakdown[q];
    auto pct = [&](uint64_t v) {
      return b.span_ns ? 100.0 * static_cast<double>(v) / b.span_ns : 0.0;
    };
    const StragglerStats& s = r.comm.stragglers[q];
    std::snprintf(
        buf, sizeof buf,
        " %4u  %-12.12s  %5zu  %9s  %7.1f%%  %6.1f%%  %5.1f%%  %6.1f%%  %5.1f%%  %6s\n", q,
        info.host.c_str(), b.steps, b.steps ? FormatDuration(b.step_mean_ns).c_str() : "-",
        pct(b.busy_ns), pct(b.compute_ns), pct(b.comm_ns), pct(b.exposed_comm_ns), pct(b.idle_ns),
        s.collectives
            ? (std::to_string(static_cast<int>(std::lround(s.last_fraction * 100))) + "%").c_str()
            : "-");
    o += buf;
  }
  if (shown < r.world_size)
    o += " ... " + std::to_string(r.world_size - shown) + " more ranks in the HTML report\n";
  return o;
}

std::string RenderJson(const Report& r) {
  std::string o = "{\"file\":";
  AppendJsonString(&o, r.path);
  o += ",\"job\":";
  AppendJsonString(&o, r.job_id);
  o += ",\"source\":";
  AppendJsonString(&o, r.source);
  o += ",\"synthetic\":" + std::string(r.synthetic ? "true" : "false");
  o += ",\"clock_synchronized\":" + std::string(r.clock_synchronized ? "true" : "false");
  o += ",\"world_size\":" + Num(r.world_size);
  o += ",\"duration_ns\":" + Num(static_cast<double>(r.end_ns - r.start_ns));
  o += ",\"steps\":{\"method\":";
  AppendJsonString(&o, r.steps.method);
  o += ",\"count\":" + Num(static_cast<double>(r.steps.typical_count)) + "}";
  o += ",\"communication_source\":";
  AppendJsonString(&o, r.comm.source);
  o += ",\"collectives\":" + Num(static_cast<double>(r.comm.collectives.size()));
  o += ",\"notes\":[";
  for (size_t i = 0; i < r.notes.size(); ++i) {
    if (i) o += ",";
    AppendJsonString(&o, r.notes[i]);
  }
  o += "],\"findings\":[";
  for (size_t i = 0; i < r.findings.size(); ++i) {
    const Finding& f = r.findings[i];
    if (i) o += ",";
    o += "{\"kind\":";
    AppendJsonString(&o, f.kind);
    o += ",\"rank\":" + std::to_string(f.rank) +
         ",\"gain_ns\":" + Num(static_cast<double>(f.gain_ns)) +
         ",\"gain_per_step_ns\":" + Num(f.gain_per_step_ns) + ",\"action\":";
    AppendJsonString(&o, f.action);
    o += ",\"evidence\":";
    AppendJsonString(&o, f.evidence);
    o += ",\"numbers\":{";
    bool first = true;
    for (const auto& [k, v] : f.numbers) {
      if (!first) o += ",";
      first = false;
      AppendJsonString(&o, k);
      o += ":" + Num(v);
    }
    o += "}}";
  }
  o += "],\"ranks\":[";
  for (uint32_t q = 0; q < r.world_size; ++q) {
    if (q) o += ",";
    const RankBreakdown& b = r.breakdown[q];
    const StragglerStats& s = r.comm.stragglers[q];
    o += "{\"rank\":" + Num(q) + ",\"status\":\"" + RankStatusName(r.ranks[q].status) +
         "\",\"host\":";
    AppendJsonString(&o, r.ranks[q].host);
    o += ",\"span_ns\":" + Num(static_cast<double>(b.span_ns)) +
         ",\"busy_ns\":" + Num(static_cast<double>(b.busy_ns)) +
         ",\"idle_ns\":" + Num(static_cast<double>(b.idle_ns)) +
         ",\"compute_ns\":" + Num(static_cast<double>(b.compute_ns)) +
         ",\"comm_ns\":" + Num(static_cast<double>(b.comm_ns)) +
         ",\"copy_ns\":" + Num(static_cast<double>(b.copy_ns)) +
         ",\"memset_ns\":" + Num(static_cast<double>(b.memset_ns)) +
         ",\"exposed_comm_ns\":" + Num(static_cast<double>(b.exposed_comm_ns)) +
         ",\"overlap_fraction\":" + Num(b.overlap_fraction) +
         ",\"steps\":" + Num(static_cast<double>(b.steps)) +
         ",\"step_mean_ns\":" + Num(b.step_mean_ns) +
         ",\"collectives\":" + Num(static_cast<double>(s.collectives)) +
         ",\"last_count\":" + Num(static_cast<double>(s.last_count)) +
         ",\"last_fraction\":" + Num(s.last_fraction) +
         ",\"caused_lost_ns\":" + Num(static_cast<double>(s.caused_lost_ns)) +
         ",\"waited_ns\":" + Num(static_cast<double>(s.waited_ns));
    o += ",\"idle_by_cause_ns\":{";
    bool first = true;
    if (q < r.idle.cause_ns.size()) {
      for (const auto& [c, ns] : r.idle.cause_ns[q]) {
        if (!first) o += ",";
        first = false;
        AppendJsonString(&o, GapCauseName(c));
        o += ":" + Num(static_cast<double>(ns));
      }
    }
    const MemoryRank& m = r.memory[q];
    o += "},\"pageable_copies\":" + Num(static_cast<double>(m.pageable_count)) +
         ",\"pageable_bytes\":" + Num(static_cast<double>(m.pageable_bytes)) +
         ",\"small_copies\":" + Num(static_cast<double>(m.small_count)) + "}";
  }
  o += "],\"comm_groups\":[";
  for (size_t i = 0; i < r.comm.groups.size(); ++i) {
    const CommGroup& g = r.comm.groups[i];
    if (i) o += ",";
    o += "{\"type\":";
    AppendJsonString(&o, g.type);
    o += ",\"bytes\":" + Num(static_cast<double>(g.bytes)) + ",\"nranks\":" + Num(g.nranks) +
         ",\"count\":" + Num(static_cast<double>(g.count)) +
         ",\"mean_transfer_ns\":" + Num(g.mean_transfer_ns) +
         ",\"algbw_gbps\":" + Num(g.algbw_gbps) + ",\"busbw_gbps\":" + Num(g.busbw_gbps) +
         ",\"algo\":";
    AppendJsonString(&o, g.algo);
    o += ",\"proto\":";
    AppendJsonString(&o, g.proto);
    o += "}";
  }
  o += "],\"kernels\":[";
  for (size_t i = 0; i < r.kernels.size() && i < 50; ++i) {
    const KernelStats& k = r.kernels[i];
    if (i) o += ",";
    o += "{\"name\":";
    AppendJsonString(&o, k.name);
    o += ",\"family\":\"" + std::string(KernelFamilyName(k.family)) +
         "\",\"count\":" + Num(static_cast<double>(k.count)) +
         ",\"total_ns\":" + Num(static_cast<double>(k.total_ns)) +
         ",\"mean_ns\":" + Num(k.mean_ns) + ",\"stddev_ns\":" + Num(k.stddev_ns) +
         ",\"launch_config\":";
    AppendJsonString(&o, k.launch_config);
    o += "}";
  }
  o += "],\"nvtx\":[";
  for (size_t i = 0; i < r.nvtx.size() && i < 50; ++i) {
    const NvtxStat& n = r.nvtx[i];
    if (i) o += ",";
    o += "{\"name\":";
    AppendJsonString(&o, n.name);
    o += ",\"count\":" + Num(static_cast<double>(n.count)) +
         ",\"range_ns\":" + Num(static_cast<double>(n.range_ns)) +
         ",\"gpu_ns\":" + Num(static_cast<double>(n.gpu_ns)) + "}";
  }
  o += "]}\n";
  return o;
}

}  // namespace aon::report
