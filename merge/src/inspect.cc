#include "aon/merge/inspect.h"

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <sstream>

#include "aon/base/json_writer.h"
#include "aon/merge/merge.h"
#include "aon/format/string_table.h"
#include "aon/format/trace_file.h"

namespace aon::merge {
namespace {

constexpr uint64_t kChunkRecords = 1 << 16;

// The columns the counting passes read; the reader matches members by name, so
// only these two are read from disk.
struct RankAndName {
  uint32_t rank;
  uint32_t name_id;
};

TableSchema RankAndNameSchema(const std::string& table, bool with_rank, bool with_name) {
  TableSchema s{table, sizeof(RankAndName), {}};
  if (with_rank) s.fields.push_back(Field{"rank", offsetof(RankAndName, rank), FieldType::kU32});
  if (with_name)
    s.fields.push_back(Field{"name_id", offsetof(RankAndName, name_id), FieldType::kU32});
  return s;
}

// Calls f(rank, name_id) per record of /records/<table>. Rank files have no rank
// column: `fixed_rank` is used instead.
template <typename F>
Status ScanColumns(const TraceReader& reader, const std::string& table, bool timeline,
                   bool with_name, uint32_t fixed_rank, F&& f) {
  const TableSchema schema = RankAndNameSchema(table, timeline, with_name);
  auto n = reader.TableSize(schema);
  if (!n.ok()) return n.status().code() == StatusCode::kNotFound ? Status::Ok() : n.status();
  std::vector<RankAndName> chunk(static_cast<size_t>(std::min(*n, kChunkRecords)));
  for (uint64_t first = 0; first < *n; first += kChunkRecords) {
    const uint64_t count = std::min(kChunkRecords, *n - first);
    AON_RETURN_IF_ERROR(reader.ReadTable(schema, first, count, chunk.data()));
    for (uint64_t i = 0; i < count; ++i) f(timeline ? chunk[i].rank : fixed_rank, chunk[i].name_id);
  }
  return Status::Ok();
}

std::string KindName(size_t k) { return RecordKindName(static_cast<RecordKind>(k)); }

// Kinds a file of `kind` holds: rank files also hold bookkeeping kinds.
size_t KindsIn(FileKind kind) {
  return kind == FileKind::kTimeline ? kTimelineKindCount : kRecordKindCount;
}

void AddRankMetadata(const RankMetadata& m, FileInspection* out) {
  for (const MetaField& f : RankMetadataFields()) {
    std::visit(
        [&](auto member) {
          const auto& v = m.*member;
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, int32_t>) {
            out->metadata.emplace_back(f.name, int64_t{v});
          } else {
            out->metadata.emplace_back(f.name, v);
          }
        },
        f.member);
  }
}

Status AddTimelineMetadata(const TraceReader& r, FileInspection* out) {
  // The attributes aon-merge writes (merge/README.md), in a fixed order.
  enum class Type { kString, kInt, kUInt, kBool };
  static const std::pair<const char*, Type> kAttributes[] = {
      {"job_id", Type::kString},
      {"world_size", Type::kInt},
      {"ranks_ok", Type::kInt},
      {"ranks_bad", Type::kInt},
      {"clock_note", Type::kString},
      {"clock_synchronized", Type::kBool},
      {"clock_error_bound_ns", Type::kInt},
      {"source", Type::kString},
      {"sources", Type::kString},
      {"synthetic_ranks", Type::kString},
      {"start_ns", Type::kUInt},
      {"end_ns", Type::kUInt},
      {"problems", Type::kString},
      {"capture_events", Type::kString},
  };
  for (const auto& [name, type] : kAttributes) {
    if (type == Type::kString) {
      auto v = r.GetMetaString(name);
      if (v.ok()) out->metadata.emplace_back(name, *v);
      continue;
    }
    auto v = r.GetMetaInt(name);
    if (!v.ok()) continue;
    if (type == Type::kBool) {
      out->metadata.emplace_back(name, *v != 0);
    } else if (type == Type::kUInt) {
      out->metadata.emplace_back(name, static_cast<uint64_t>(*v));
    } else {
      out->metadata.emplace_back(name, *v);
    }
  }
  for (size_t k = 0; k < kRecordKindCount; ++k) {
    auto d = r.GetMetaInt("dropped_" + KindName(k));
    out->dropped[k] = d.ok() ? static_cast<uint64_t>(*d) : 0;
  }
  return Status::Ok();
}

// ---- JSON rendering -----------------------------------------------------------------

// The inspection's JSON through the one JSON writer; Value() writes a metadata
// value as its JSON type (doubles with 17 significant digits, non-finite as null).
class Json {
 public:
  Json() : w_(&s_) {}
  std::string& str() { return s_; }
  void Key(std::string_view key) { w_.Key(key); }
  void Open(char c) { c == '{' ? w_.BeginObject() : w_.BeginArray(); }
  void Close(char c) { c == '}' ? w_.EndObject() : w_.EndArray(); }
  void Value(const MetaValue& v) {
    if (const auto* s = std::get_if<std::string>(&v)) {
      w_.String(*s);
    } else if (const auto* i = std::get_if<int64_t>(&v)) {
      w_.Int(*i);
    } else if (const auto* u = std::get_if<uint64_t>(&v)) {
      w_.Uint(*u);
    } else if (const auto* b = std::get_if<bool>(&v)) {
      w_.Bool(*b);
    } else {
      w_.Double(std::get<double>(v), 17);
    }
  }
  void Field(std::string_view key, const MetaValue& v) {
    Key(key);
    Value(v);
  }

 private:
  std::string s_;
  JsonWriter w_;
};

void CountsObject(Json& j, const CountsByKind& counts, FileKind file) {
  j.Open('{');
  for (size_t k = 0; k < KindsIn(file); ++k) j.Field(KindName(k), counts[k]);
  j.Close('}');
}

void NamesObject(Json& j, const std::map<std::string, uint64_t>& names) {
  j.Open('{');
  for (const auto& [name, count] : names) j.Field(name, count);
  j.Close('}');
}

void NamesPerRank(Json& j, const std::map<uint32_t, std::map<std::string, uint64_t>>& m) {
  j.Open('{');
  for (const auto& [rank, names] : m) {
    j.Key(std::to_string(rank));
    NamesObject(j, names);
  }
  j.Close('}');
}

std::map<std::string, uint64_t> SumNames(
    const std::map<uint32_t, std::map<std::string, uint64_t>>& per_rank) {
  std::map<std::string, uint64_t> total;
  for (const auto& [rank, names] : per_rank) {
    for (const auto& [name, count] : names) total[name] += count;
  }
  return total;
}

std::string ValueText(const MetaValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* u = std::get_if<uint64_t>(&v)) return std::to_string(*u);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  std::ostringstream o;
  o << std::get<double>(v);
  return o.str();
}

}  // namespace

std::map<std::string, uint64_t> FileInspection::KernelNames() const {
  return SumNames(kernel_names_per_rank);
}
std::map<std::string, uint64_t> FileInspection::NvtxNames() const {
  return SumNames(nvtx_names_per_rank);
}

StatusOr<FileInspection> InspectFile(const std::string& path) {
  AON_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(path));
  FileInspection out;
  out.path = path;
  out.kind = reader->kind();
  out.format_major = reader->format_major();
  out.format_minor = reader->format_minor();
  AON_ASSIGN_OR_RETURN(StringTable strings, reader->ReadStrings());
  const bool timeline = out.kind == FileKind::kTimeline;
  uint32_t file_rank = 0;

  if (!timeline) {
    AON_ASSIGN_OR_RETURN(RankMetadata m, reader->ReadRankMetadata());
    AddRankMetadata(m, &out);
    out.notes = m.notes;
    out.dropped = m.dropped;
    file_rank = m.rank >= 0 ? static_cast<uint32_t>(m.rank) : 0;
    for (const DeviceInfo& d : m.devices) {
      out.devices.push_back(DeviceView{-1, d, strings.Get(d.uuid_id), strings.Get(d.name_id)});
    }
    out.per_rank[file_rank] = CountsByKind{};
  } else {
    AON_RETURN_IF_ERROR(AddTimelineMetadata(*reader, &out));
    AON_ASSIGN_OR_RETURN(auto devices,
                         reader->ReadAllOf<Merged<DeviceInfo>>(MergedDeviceSchema(), "meta"));
    for (const Merged<DeviceInfo>& d : devices) {
      out.devices.push_back(DeviceView{d.rank, d.record, strings.Get(d.record.uuid_id),
                                       strings.Get(d.record.name_id)});
    }
    AON_ASSIGN_OR_RETURN(auto rows, reader->ReadAllOf<RankSummary>(RankSummarySchema(), "meta"));
    for (const RankSummary& row : rows) {
      out.ranks.push_back(RankView{row, strings.Get(row.host_id), strings.Get(row.message_id)});
      out.per_rank[row.rank] = CountsByKind{};
    }
  }

  for (size_t k = 0; k < KindsIn(out.kind); ++k) {
    const RecordKind kind = static_cast<RecordKind>(k);
    const bool named = kind == RecordKind::kKernel || kind == RecordKind::kNvtx;
    auto& names = kind == RecordKind::kKernel ? out.kernel_names_per_rank : out.nvtx_names_per_rank;
    if (!timeline && !named) {
      // One rank: the table size is the count, no need to read records.
      auto n = reader->TableSize(TableSchema{KindName(k), 0, {}});
      if (!n.ok() && n.status().code() != StatusCode::kNotFound) return n.status();
      out.counts[k] = n.ok() ? *n : 0;
      out.per_rank[file_rank][k] = out.counts[k];
      continue;
    }
    AON_RETURN_IF_ERROR(ScanColumns(*reader, KindName(k), timeline, named, file_rank,
                                    [&](uint32_t rank, uint32_t name_id) {
                                      ++out.counts[k];
                                      ++out.per_rank[rank][k];
                                      if (named) ++names[rank][strings.Get(name_id)];
                                    }));
  }
  return out;
}

std::string InspectionToJson(const FileInspection& in) {
  Json j;
  j.Open('{');
  j.Field("file", in.path);
  j.Field("file_kind", std::string(FileKindName(in.kind)));
  j.Field("format", std::to_string(in.format_major) + "." + std::to_string(in.format_minor));
  j.Key("metadata");
  j.Open('{');
  for (const auto& [key, value] : in.metadata) j.Field(key, value);
  j.Key("notes");
  j.Open('[');
  for (const std::string& n : in.notes) j.Value(n);
  j.Close(']');
  j.Key("devices");
  j.Open('[');
  for (const DeviceView& d : in.devices) {
    j.Open('{');
    if (d.rank >= 0) j.Field("rank", d.rank);
    j.Field("device_id", uint64_t{d.info.device_id});
    j.Field("uuid", d.uuid);
    j.Field("name", d.name);
    j.Field("sm_count", uint64_t{d.info.sm_count});
    j.Field("global_memory_bytes", d.info.global_memory_bytes);
    j.Field("compute_major", uint64_t{d.info.compute_major});
    j.Field("compute_minor", uint64_t{d.info.compute_minor});
    j.Close('}');
  }
  j.Close(']');
  j.Close('}');
  j.Key("counts");
  CountsObject(j, in.counts, in.kind);
  j.Key("dropped");
  CountsObject(j, in.dropped, in.kind);
  j.Key("per_rank");
  j.Open('{');
  for (const auto& [rank, counts] : in.per_rank) {
    j.Key(std::to_string(rank));
    CountsObject(j, counts, in.kind);
  }
  j.Close('}');
  j.Key("kernel_names");
  NamesObject(j, in.KernelNames());
  j.Key("nvtx_names");
  NamesObject(j, in.NvtxNames());
  j.Key("kernel_names_per_rank");
  NamesPerRank(j, in.kernel_names_per_rank);
  j.Key("nvtx_names_per_rank");
  NamesPerRank(j, in.nvtx_names_per_rank);
  j.Key("ranks");
  j.Open('[');
  for (const RankView& r : in.ranks) {
    j.Open('{');
    j.Field("rank", uint64_t{r.row.rank});
    j.Field("status", std::string(RankStatusName(static_cast<RankStatus>(r.row.status))));
    j.Field("message", r.message);
    j.Field("host", r.host);
    j.Field("local_rank", r.row.local_rank == UINT32_MAX ? int64_t{-1} : int64_t{r.row.local_rank});
    j.Field("pid", r.row.pid);
    j.Field("records", r.row.records);
    j.Field("dropped", r.row.dropped);
    j.Field("first_ns", r.row.first_ns);
    j.Field("last_ns", r.row.last_ns);
    j.Field("clock_offset_ns", r.row.clock_offset_ns);
    j.Field("clock_error_bound_ns", r.row.clock_error_bound_ns);
    j.Field("nccl_gpu_clock_offset_ns", r.row.nccl_gpu_clock_offset_ns);
    j.Field("nccl_gpu_clock_pairs", r.row.nccl_gpu_clock_pairs);
    j.Field("nccl_gpu_clock_spread_ns", r.row.nccl_gpu_clock_spread_ns);
    j.Close('}');
  }
  j.Close(']');
  j.Close('}');
  j.str() += "\n";
  return j.str();
}

std::string InspectionToText(const FileInspection& in) {
  std::ostringstream o;
  o << in.path << ": " << FileKindName(in.kind) << ", format " << in.format_major << "."
    << in.format_minor << "\n";
  o << "metadata:\n";
  for (const auto& [key, value] : in.metadata) {
    std::string text = ValueText(value);
    // Multi-line values (the timeline's problems) stay readable.
    for (size_t p = text.find('\n'); p != std::string::npos; p = text.find('\n', p + 1)) {
      text.replace(p, 1, "\n    ");
    }
    o << "  " << key << ": " << text << "\n";
  }
  if (!in.notes.empty()) {
    o << "notes:\n";
    for (const std::string& n : in.notes) o << "  - " << n << "\n";
  }
  o << "devices:" << (in.devices.empty() ? " none" : "") << "\n";
  for (const DeviceView& d : in.devices) {
    o << "  ";
    if (d.rank >= 0) o << "rank " << d.rank << " ";
    char mem[32];
    std::snprintf(mem, sizeof(mem), "%.1f GiB",
                  static_cast<double>(d.info.global_memory_bytes) / (1024.0 * 1024.0 * 1024.0));
    o << "GPU " << d.info.device_id << ": " << d.name << " (" << d.uuid << "), " << d.info.sm_count
      << " SMs, " << mem << ", compute " << d.info.compute_major << "." << d.info.compute_minor
      << "\n";
  }
  o << "records (dropped):\n";
  for (size_t k = 0; k < KindsIn(in.kind); ++k) {
    char line[96];
    std::snprintf(line, sizeof(line), "  %-22s %12" PRIu64 " (%" PRIu64 ")\n", KindName(k).c_str(),
                  in.counts[k], in.dropped[k]);
    o << line;
  }
  if (in.kind == FileKind::kTimeline) {
    o << "ranks:\n";
    for (const RankView& r : in.ranks) {
      o << "  rank " << r.row.rank << ": " << RankStatusName(static_cast<RankStatus>(r.row.status));
      if (!r.host.empty()) o << " on " << r.host;
      o << ", " << r.row.records << " records, " << r.row.dropped << " dropped";
      if (!r.message.empty()) o << ": " << r.message;
      o << "\n";
    }
    o << "records per rank:\n  rank";
    for (size_t k = 0; k < KindsIn(in.kind); ++k) o << " " << KindName(k);
    o << "\n";
    for (const auto& [rank, counts] : in.per_rank) {
      o << "  " << rank;
      for (size_t k = 0; k < KindsIn(in.kind); ++k) o << " " << counts[k];
      o << "\n";
    }
  }
  auto top = [&](const char* title, const std::map<std::string, uint64_t>& names) {
    if (names.empty()) return;
    std::vector<std::pair<uint64_t, std::string>> sorted;
    for (const auto& [name, count] : names) sorted.emplace_back(count, name);
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    o << title << " (" << names.size() << " distinct, most frequent first):\n";
    for (size_t i = 0; i < sorted.size() && i < 20; ++i) {
      o << "  " << sorted[i].first << "  "
        << (sorted[i].second.empty() ? "(no name)" : sorted[i].second) << "\n";
    }
  };
  top("kernel names", in.KernelNames());
  top("nvtx names", in.NvtxNames());
  return o.str();
}

}  // namespace aon::merge
