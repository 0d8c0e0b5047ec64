// Parsing and naming of the viewer-export filter (export_filter.h).
#include "aon/export/export_filter.h"

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <limits>

namespace aon::merge {
namespace {

constexpr uint64_t kNsPerSecond = 1'000'000'000;

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool ParseU64(std::string_view s, uint64_t* out) {
  if (!AllDigits(s)) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

// One side of a window: "" (open), "<N>ns", "<S>[.<F>][s]". On error, *why says what.
bool ParseEdge(std::string_view s, WindowEdge* edge, std::string* why) {
  *edge = WindowEdge{};
  if (s.empty()) return true;
  if (s.ends_with("ns")) {
    std::string_view digits = s.substr(0, s.size() - 2);
    if (!ParseU64(digits, &edge->ns)) {
      *why = "'" + std::string(s) + "' is not a whole number of nanoseconds";
      return false;
    }
    edge->set = edge->absolute = true;
    return true;
  }
  if (s.ends_with("s")) s.remove_suffix(1);
  const size_t dot = s.find('.');
  std::string_view whole = s.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
  const bool whole_ok = whole.empty() ? !frac.empty() : AllDigits(whole);
  const bool frac_ok = dot == std::string_view::npos || AllDigits(frac);
  if (!whole_ok || !frac_ok) {
    *why = "'" + std::string(s) +
           "' is not a number of seconds (e.g. 10, 2.5, 30s) or of nanoseconds (e.g. 1000ns)";
    return false;
  }
  if (frac.size() > 9) {
    *why = "'" + std::string(s) + "' is more precise than a nanosecond";
    return false;
  }
  uint64_t seconds = 0;
  if (!whole.empty() && !ParseU64(whole, &seconds)) seconds = UINT64_MAX;
  uint64_t frac_ns = 0;
  for (size_t i = 0; i < 9; ++i) frac_ns = frac_ns * 10 + (i < frac.size() ? frac[i] - '0' : 0);
  if (seconds > (UINT64_MAX - frac_ns) / kNsPerSecond) {
    *why = "'" + std::string(s) + "' seconds is out of range";
    return false;
  }
  edge->set = true;
  edge->ns = seconds * kNsPerSecond + frac_ns;
  return true;
}

// "10s", "1.5s", "1000ns".
std::string EdgeText(const WindowEdge& e) {
  if (e.absolute) return std::to_string(e.ns) + "ns";
  std::string s = std::to_string(e.ns / kNsPerSecond);
  if (uint64_t frac = e.ns % kNsPerSecond; frac != 0) {
    char digits[16];
    std::snprintf(digits, sizeof(digits), "%09" PRIu64, frac);
    std::string f = digits;
    while (!f.empty() && f.back() == '0') f.pop_back();
    s += "." + f;
  }
  return s + "s";
}

std::string Quote(std::string_view option, std::string_view value) {
  return std::string(option) + " '" + std::string(value) + "'";
}

std::string ExportedKindNames() {
  std::string s;
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    if (!IsExportedKind(static_cast<RecordKind>(k))) continue;
    if (!s.empty()) s += ",";
    s += RecordKindName(static_cast<RecordKind>(k));
  }
  return s;
}

}  // namespace

uint64_t WindowEdge::Resolve(uint64_t start_ns, uint64_t open) const {
  if (!set) return open;
  if (absolute) return ns;
  return ns > UINT64_MAX - start_ns ? UINT64_MAX : start_ns + ns;
}

bool ExportFilter::KeepsRank(uint32_t rank) const {
  if (ranks.empty()) return true;
  for (const auto& [lo, hi] : ranks) {
    if (rank >= lo && rank <= hi) return true;
  }
  return false;
}

bool ExportFilter::KeepsKind(RecordKind kind) const {
  if (!IsExportedKind(kind)) return false;
  return kinds.empty() || std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

std::string ExportFilter::WindowText() const {
  if (!HasWindow()) return "";
  return (start.set ? EdgeText(start) : "") + ":" + (end.set ? EdgeText(end) : "");
}

std::string ExportFilter::RanksText() const {
  std::string s;
  for (const auto& [lo, hi] : ranks) {
    if (!s.empty()) s += ",";
    s += std::to_string(lo);
    if (hi != lo) s += "-" + std::to_string(hi);
  }
  return s;
}

std::string ExportFilter::KindsText() const {
  std::string s;
  for (RecordKind k : kinds) {
    if (!s.empty()) s += ",";
    s += RecordKindName(k);
  }
  return s;
}

std::string ExportFilter::Label() const {
  std::vector<std::string> parts;
  if (HasWindow()) {
    parts.push_back((start.set ? EdgeText(start) : "start") + "-" +
                    (end.set ? EdgeText(end) : "end"));
  }
  if (!ranks.empty()) parts.push_back("ranks" + RanksText());
  if (!kinds.empty()) parts.push_back(KindsText());
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : "_") + p;
  return s;
}

std::string ExportFilter::Describe() const {
  std::vector<std::string> parts;
  if (HasWindow()) parts.push_back("window " + WindowText());
  if (!ranks.empty()) parts.push_back("ranks " + RanksText());
  if (!kinds.empty()) parts.push_back("kinds " + KindsText());
  if (parts.empty()) return "everything";
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s;
}

Status ParseWindow(std::string_view text, ExportFilter* filter) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || text.find(':', colon + 1) != std::string_view::npos) {
    return InvalidArgument(Quote("--window", text) +
                           ": expected START:END in seconds from the start of the timeline "
                           "(e.g. 10:20, :5, 30:) or in nanoseconds on the timeline clock "
                           "(e.g. 1000ns:2000ns)");
  }
  WindowEdge start, end;
  std::string why;
  if (!ParseEdge(text.substr(0, colon), &start, &why) ||
      !ParseEdge(text.substr(colon + 1), &end, &why)) {
    return InvalidArgument(Quote("--window", text) + ": " + why);
  }
  if (!start.set && !end.set) {
    return InvalidArgument(Quote("--window", text) + ": give a start, an end or both");
  }
  if (start.set && end.set) {
    if (start.absolute != end.absolute) {
      return InvalidArgument(Quote("--window", text) +
                             ": both sides must be seconds or both nanoseconds (ns)");
    }
    if (start.ns >= end.ns) {
      return InvalidArgument(Quote("--window", text) + ": the start is not before the end");
    }
  }
  filter->start = start;
  filter->end = end;
  return Status::Ok();
}

Status ParseRankList(std::string_view text, ExportFilter* filter) {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  size_t pos = 0;
  if (text.empty()) return InvalidArgument(Quote("--ranks", text) + ": empty list");
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(pos, comma - pos);
    const size_t dash = item.find('-');
    uint64_t lo = 0, hi = 0;
    const bool ok = dash == std::string_view::npos ? ParseU64(item, &lo) && (hi = lo, true)
                                                   : ParseU64(item.substr(0, dash), &lo) &&
                                                         ParseU64(item.substr(dash + 1), &hi);
    if (!ok || hi > UINT32_MAX) {
      return InvalidArgument(Quote("--ranks", text) + ": '" + std::string(item) +
                             "' is not a rank or a range of ranks (e.g. 0-3,8,12-15)");
    }
    if (lo > hi) {
      return InvalidArgument(Quote("--ranks", text) + ": range '" + std::string(item) +
                             "' ends before it starts");
    }
    ranges.emplace_back(static_cast<uint32_t>(lo), static_cast<uint32_t>(hi));
    pos = comma + 1;
  }
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && uint64_t{r.first} <= uint64_t{merged.back().second} + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  filter->ranks = std::move(merged);
  return Status::Ok();
}

Status ParseKindList(std::string_view text, ExportFilter* filter) {
  std::vector<RecordKind> kinds;
  if (text.empty()) return InvalidArgument(Quote("--kinds", text) + ": empty list");
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(pos, comma - pos);
    RecordKind kind{};
    if (!ParseRecordKind(item, &kind) || !IsExportedKind(kind)) {
      return InvalidArgument(Quote("--kinds", text) + ": '" + std::string(item) +
                             "' is not a record kind of the trace (" + ExportedKindNames() + ")");
    }
    kinds.push_back(kind);
    pos = comma + 1;
  }
  std::sort(kinds.begin(), kinds.end());
  kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());
  filter->kinds = std::move(kinds);
  return Status::Ok();
}

bool IsExportedKind(RecordKind kind) {
  // Every timeline kind but the join tables (records.h: kJoinTable).
  bool exported = false;
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    if (TableTraits<T>::kKind == kind) exported = !kJoinTable<T>;
  });
  return exported;
}

std::string FilteredTracePath(const std::string& dir, const ExportFilter& filter) {
  const std::string name = filter.empty() ? "trace.json" : "trace-" + filter.Label() + ".json";
  return (std::filesystem::path(dir) / name).string();
}

}  // namespace aon::merge
