#include "aon/format/metadata_wire.h"

#include <charconv>
#include <cstdio>
#include <map>
#include <variant>

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
    if (v.size() >= sizeof(buf))
      return InvalidArgument("metadata '" + std::string(key) + "': bad number");
    std::copy(v.begin(), v.end(), buf);
    buf[v.size()] = 0;
    char* end = nullptr;
    *out = std::strtod(buf, &end);
    if (end != buf + v.size() || v.empty()) {
      return InvalidArgument("metadata '" + std::string(key) + "': bad number '" + std::string(v) +
                             "'");
    }
    return Status::Ok();
  } else {
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
    if (ec != std::errc() || end != v.data() + v.size()) {
      return InvalidArgument("metadata '" + std::string(key) + "': bad number '" + std::string(v) +
                             "'");
    }
    return Status::Ok();
  }
}

}  // namespace

std::string EncodeRankMetadata(const RankMetadata& m) {
  std::string out;
  for (const MetaField& f : RankMetadataFields()) {
    std::visit(
        [&](auto member) {
          const auto& v = m.*member;
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::string>) {
            Put(out, f.name, v);
          } else if constexpr (std::is_same_v<V, double>) {
            char buf[64];
            std::snprintf(buf, sizeof(buf), "%.17g", v);
            Put(out, f.name, buf);
          } else if constexpr (std::is_same_v<V, bool>) {
            PutNumber(out, f.name, v ? 1 : 0);
          } else {
            PutNumber(out, f.name, v);
          }
        },
        f.member);
  }
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    Put(out, std::string("dropped.") + RecordKindName(static_cast<RecordKind>(k)),
        std::to_string(m.dropped[k]));
  }
  for (const std::string& n : m.notes) Put(out, "note", n);
  for (const DeviceInfo& d : m.devices) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%u,%u,%u,%u,%llu,%u,%u,%u,%u", d.device_id, d.uuid_id,
                  d.name_id, d.sm_count, static_cast<unsigned long long>(d.global_memory_bytes),
                  d.compute_major, d.compute_minor, d.pcie_gen, d.pcie_width);
    Put(out, "device", buf);
  }
  return out;
}

StatusOr<RankMetadata> DecodeRankMetadata(std::string_view text) {
  RankMetadata m;
  std::map<std::string_view, const MetaField*> fields;
  for (const MetaField& f : RankMetadataFields()) fields.emplace(f.name, &f);
  auto set = [&m](const MetaField& f, std::string_view key, std::string_view value) {
    return std::visit(
        [&](auto member) -> Status {
          auto& out = m.*member;
          using V = std::decay_t<decltype(out)>;
          if constexpr (std::is_same_v<V, std::string>) {
            out = Unescape(value);
            return Status::Ok();
          } else if constexpr (std::is_same_v<V, bool>) {
            int64_t v = 0;
            AON_RETURN_IF_ERROR(ParseNumber(key, value, &v));
            out = v != 0;
            return Status::Ok();
          } else {
            return ParseNumber(key, value, &out);
          }
        },
        f.member);
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
      return InvalidArgument("metadata line without '=': '" + std::string(line.substr(0, 80)) +
                             "'");
    }
    std::string_view key = line.substr(0, eq), value = line.substr(eq + 1);
    if (auto it = fields.find(key); it != fields.end()) {
      AON_RETURN_IF_ERROR(set(*it->second, key, value));
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
      // Nine values; an agent of format 1.9 or older sends seven (no PCIe link).
      const int n = std::sscanf(v.c_str(), "%u,%u,%u,%u,%llu,%u,%u,%u,%u", &d.device_id, &d.uuid_id,
                                &d.name_id, &d.sm_count, &mem, &d.compute_major, &d.compute_minor,
                                &d.pcie_gen, &d.pcie_width);
      if (n != 7 && n != 9) {
        return InvalidArgument("metadata 'device': bad value '" + v + "'");
      }
      d.global_memory_bytes = mem;
      m.devices.push_back(d);
    }
  }
  return m;
}

}  // namespace aon
