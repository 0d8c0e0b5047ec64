#include "aon/metadata_wire.h"

#include <charconv>
#include <cstdio>
#include <functional>
#include <map>

namespace aon {
namespace {

void Put(std::string& out, std::string_view key, std::string_view value) {
  out += key;
  out += '=';
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += '\n';
}

template <typename V>
void PutNumber(std::string& out, std::string_view key, V v) {
  Put(out, key, std::to_string(v));
}

std::string Unescape(std::string_view v) {
  std::string s;
  s.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '\\' && i + 1 < v.size()) {
      ++i;
      s += v[i] == 'n' ? '\n' : v[i];
    } else {
      s += v[i];
    }
  }
  return s;
}

template <typename V>
Status ParseNumber(std::string_view key, std::string_view v, V* out) {
  if constexpr (std::is_floating_point_v<V>) {
    char buf[64];
    if (v.size() >= sizeof(buf)) return InvalidArgument("metadata '" + std::string(key) + "': bad number");
    std::copy(v.begin(), v.end(), buf);
    buf[v.size()] = 0;
    char* end = nullptr;
    *out = std::strtod(buf, &end);
    if (end != buf + v.size() || v.empty()) {
      return InvalidArgument("metadata '" + std::string(key) + "': bad number '" + std::string(v) + "'");
    }
    return Status::Ok();
  } else {
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
    if (ec != std::errc() || end != v.data() + v.size()) {
      return InvalidArgument("metadata '" + std::string(key) + "': bad number '" + std::string(v) + "'");
    }
    return Status::Ok();
  }
}

}  // namespace

std::string EncodeRankMetadata(const RankMetadata& m) {
  std::string out;
  Put(out, "job_id", m.job_id);
  PutNumber(out, "rank", m.rank);
  PutNumber(out, "local_rank", m.local_rank);
  PutNumber(out, "world_size", m.world_size);
  PutNumber(out, "local_size", m.local_size);
  Put(out, "host", m.host);
  PutNumber(out, "pid", m.pid);
  Put(out, "launcher", m.launcher);
  Put(out, "clock_domain", m.clock_domain);
  PutNumber(out, "anchor_clock_ns", m.anchor_clock_ns);
  PutNumber(out, "anchor_realtime_ns", m.anchor_realtime_ns);
  PutNumber(out, "clock_offset_ns", m.clock_offset_ns);
  char drift[64];
  std::snprintf(drift, sizeof(drift), "%.17g", m.clock_drift_ppm);
  Put(out, "clock_drift_ppm", drift);
  PutNumber(out, "clock_reference_ns", m.clock_reference_ns);
  PutNumber(out, "clock_error_bound_ns", m.clock_error_bound_ns);
  PutNumber(out, "clock_synchronized", m.clock_synchronized ? 1 : 0);
  Put(out, "source", m.source);
  Put(out, "kinds", m.kinds);
  PutNumber(out, "memory_cap_bytes", m.memory_cap_bytes);
  Put(out, "agent_version", m.agent_version);
  PutNumber(out, "start_ns", m.start_ns);
  PutNumber(out, "end_ns", m.end_ns);
  Put(out, "end_reason", m.end_reason);
  PutNumber(out, "truncated", m.truncated);
  PutNumber(out, "last_record_ns", m.last_record_ns);
  PutNumber(out, "clock_leader_rank", m.clock_leader_rank);
  Put(out, "clock_id", m.clock_id);
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    Put(out, std::string("dropped.") + RecordKindName(static_cast<RecordKind>(k)),
        std::to_string(m.dropped[k]));
  }
  for (const std::string& n : m.notes) Put(out, "note", n);
  PutNumber(out, "nccl_gpu_clock_offset_ns", m.nccl_gpu_clock_offset_ns);
  PutNumber(out, "nccl_gpu_clock_pairs", m.nccl_gpu_clock_pairs);
  PutNumber(out, "nccl_gpu_clock_spread_ns", m.nccl_gpu_clock_spread_ns);
  for (const DeviceInfo& d : m.devices) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%u,%u,%u,%u,%llu,%u,%u", d.device_id, d.uuid_id, d.name_id,
                  d.sm_count, static_cast<unsigned long long>(d.global_memory_bytes),
                  d.compute_major, d.compute_minor);
    Put(out, "device", buf);
  }
  return out;
}

StatusOr<RankMetadata> DecodeRankMetadata(std::string_view text) {
  RankMetadata m;
  int64_t synced = 0;
  using Setter = std::function<Status(std::string_view key, std::string_view value)>;
  auto str = [](std::string* f) -> Setter {
    return [f](std::string_view, std::string_view v) {
      *f = Unescape(v);
      return Status::Ok();
    };
  };
  auto num = [](auto* f) -> Setter {
    return [f](std::string_view k, std::string_view v) { return ParseNumber(k, v, f); };
  };
  const std::map<std::string_view, Setter> setters = {
      {"job_id", str(&m.job_id)},
      {"rank", num(&m.rank)},
      {"local_rank", num(&m.local_rank)},
      {"world_size", num(&m.world_size)},
      {"local_size", num(&m.local_size)},
      {"host", str(&m.host)},
      {"pid", num(&m.pid)},
      {"launcher", str(&m.launcher)},
      {"clock_domain", str(&m.clock_domain)},
      {"anchor_clock_ns", num(&m.anchor_clock_ns)},
      {"anchor_realtime_ns", num(&m.anchor_realtime_ns)},
      {"clock_offset_ns", num(&m.clock_offset_ns)},
      {"clock_drift_ppm", num(&m.clock_drift_ppm)},
      {"clock_reference_ns", num(&m.clock_reference_ns)},
      {"clock_error_bound_ns", num(&m.clock_error_bound_ns)},
      {"clock_synchronized", num(&synced)},
      {"source", str(&m.source)},
      {"kinds", str(&m.kinds)},
      {"memory_cap_bytes", num(&m.memory_cap_bytes)},
      {"agent_version", str(&m.agent_version)},
      {"start_ns", num(&m.start_ns)},
      {"end_ns", num(&m.end_ns)},
      {"end_reason", str(&m.end_reason)},
      {"truncated", num(&m.truncated)},
      {"last_record_ns", num(&m.last_record_ns)},
      {"clock_leader_rank", num(&m.clock_leader_rank)},
      {"clock_id", str(&m.clock_id)},
      {"nccl_gpu_clock_offset_ns", num(&m.nccl_gpu_clock_offset_ns)},
      {"nccl_gpu_clock_pairs", num(&m.nccl_gpu_clock_pairs)},
      {"nccl_gpu_clock_spread_ns", num(&m.nccl_gpu_clock_spread_ns)},
  };
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument("metadata line without '=': '" + std::string(line.substr(0, 80)) + "'");
    }
    std::string_view key = line.substr(0, eq), value = line.substr(eq + 1);
    if (auto it = setters.find(key); it != setters.end()) {
      AON_RETURN_IF_ERROR(it->second(key, value));
    } else if (key == "note") {
      m.notes.push_back(Unescape(value));
    } else if (key.starts_with("dropped.")) {
      RecordKind kind;
      if (ParseRecordKind(key.substr(8), &kind)) {
        AON_RETURN_IF_ERROR(ParseNumber(key, value, &m.dropped[static_cast<size_t>(kind)]));
      }
    } else if (key == "device") {
      DeviceInfo d{};
      unsigned long long mem = 0;
      std::string v(value);
      if (std::sscanf(v.c_str(), "%u,%u,%u,%u,%llu,%u,%u", &d.device_id, &d.uuid_id, &d.name_id,
                      &d.sm_count, &mem, &d.compute_major, &d.compute_minor) != 7) {
        return InvalidArgument("metadata 'device': bad value '" + v + "'");
      }
      d.global_memory_bytes = mem;
      m.devices.push_back(d);
    }
  }
  m.clock_synchronized = synced != 0;
  return m;
}

}  // namespace aon
