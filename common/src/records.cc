#include "aon/records.h"

#include <cstddef>
#include <mutex>
#include <unordered_map>

namespace aon {
namespace {

constexpr const char* kKindNames[kRecordKindCount] = {
    "kernels", "memcpy", "memset", "sync", "api", "nvtx", "nccl", "external_correlation",
};

#define AON_F(Type, member, ftype) Field{#member, offsetof(Type, member), FieldType::ftype}

}  // namespace

const char* RecordKindName(RecordKind kind) {
  auto i = static_cast<size_t>(kind);
  return i < kRecordKindCount ? kKindNames[i] : "unknown";
}

bool ParseRecordKind(std::string_view name, RecordKind* kind) {
  for (size_t i = 0; i < kRecordKindCount; ++i) {
    if (name == kKindNames[i]) {
      *kind = static_cast<RecordKind>(i);
      return true;
    }
  }
  return false;
}

const Field* TableSchema::Find(std::string_view field_name) const {
  for (const Field& f : fields) {
    if (field_name == f.name) return &f;
  }
  return nullptr;
}

const TableSchema& RecordTraits<KernelRecord>::Schema() {
  using T = KernelRecord;
  static const TableSchema s{RecordKindName(kKind), sizeof(T),
                             {AON_F(T, start_ns, kU64), AON_F(T, end_ns, kU64),
                              AON_F(T, graph_node_id, kU64), AON_F(T, correlation_id, kU32),
                              AON_F(T, device_id, kU32), AON_F(T, context_id, kU32),
                              AON_F(T, stream_id, kU32), AON_F(T, name_id, kU32),
                              AON_F(T, graph_id, kU32), AON_F(T, grid_x, kI32),
                              AON_F(T, grid_y, kI32), AON_F(T, grid_z, kI32),
                              AON_F(T, block_x, kI32), AON_F(T, block_y, kI32),
                              AON_F(T, block_z, kI32), AON_F(T, registers_per_thread, kU32),
                              AON_F(T, static_shared_bytes, kU32),
                              AON_F(T, dynamic_shared_bytes, kU32)}};
  return s;
}

const TableSchema& RecordTraits<MemcpyRecord>::Schema() {
  using T = MemcpyRecord;
  static const TableSchema s{RecordKindName(kKind), sizeof(T),
                             {AON_F(T, start_ns, kU64), AON_F(T, end_ns, kU64),
                              AON_F(T, bytes, kU64), AON_F(T, correlation_id, kU32),
                              AON_F(T, device_id, kU32), AON_F(T, context_id, kU32),
                              AON_F(T, stream_id, kU32), AON_F(T, src_device_id, kU32),
                              AON_F(T, dst_device_id, kU32), AON_F(T, copy_kind, kU8),
                              AON_F(T, src_kind, kU8), AON_F(T, dst_kind, kU8),
                              AON_F(T, flags, kU8)}};
  return s;
}

const TableSchema& RecordTraits<MemsetRecord>::Schema() {
  using T = MemsetRecord;
  static const TableSchema s{RecordKindName(kKind), sizeof(T),
                             {AON_F(T, start_ns, kU64), AON_F(T, end_ns, kU64),
                              AON_F(T, bytes, kU64), AON_F(T, correlation_id, kU32),
                              AON_F(T, device_id, kU32), AON_F(T, context_id, kU32),
                              AON_F(T, stream_id, kU32), AON_F(T, value, kU32),
                              AON_F(T, memory_kind, kU8), AON_F(T, flags, kU8)}};
  return s;
}

const TableSchema& RecordTraits<SyncRecord>::Schema() {
  using T = SyncRecord;
  static const TableSchema s{RecordKindName(kKind), sizeof(T),
                             {AON_F(T, start_ns, kU64), AON_F(T, end_ns, kU64),
                              AON_F(T, correlation_id, kU32), AON_F(T, context_id, kU32),
                              AON_F(T, stream_id, kU32), AON_F(T, event_id, kU32),
                              AON_F(T, sync_type, kU32)}};
  return s;
}

const TableSchema& RecordTraits<ApiRecord>::Schema() {
  using T = ApiRecord;
  static const TableSchema s{RecordKindName(kKind), sizeof(T),
                             {AON_F(T, start_ns, kU64), AON_F(T, end_ns, kU64),
                              AON_F(T, correlation_id, kU32), AON_F(T, callback_id, kU32),
                              AON_F(T, thread_id, kU32), AON_F(T, return_value, kI32),
                              AON_F(T, name_id, kU32), AON_F(T, domain, kU8)}};
  return s;
}

const TableSchema& RecordTraits<NvtxRecord>::Schema() {
  using T = NvtxRecord;
  static const TableSchema s{RecordKindName(kKind), sizeof(T),
                             {AON_F(T, start_ns, kU64), AON_F(T, end_ns, kU64),
                              AON_F(T, thread_id, kU32), AON_F(T, domain_id, kU32),
                              AON_F(T, name_id, kU32), AON_F(T, category, kU32),
                              AON_F(T, color, kU32), AON_F(T, depth, kU16),
                              AON_F(T, type, kU8)}};
  return s;
}

const TableSchema& RecordTraits<NcclRecord>::Schema() {
  using T = NcclRecord;
  static const TableSchema s{
      RecordKindName(kKind), sizeof(T),
      {AON_F(T, start_ns, kU64), AON_F(T, end_ns, kU64), AON_F(T, gpu_start_ns, kU64),
       AON_F(T, comm_hash, kU64), AON_F(T, seq_number, kU64), AON_F(T, count, kU64),
       AON_F(T, bytes, kU64), AON_F(T, external_id, kU64), AON_F(T, correlation_id, kU32),
       AON_F(T, func_id, kU32), AON_F(T, algo_id, kU32), AON_F(T, proto_id, kU32),
       AON_F(T, datatype_id, kU32), AON_F(T, root, kI32), AON_F(T, peer, kI32),
       AON_F(T, n_channels, kU32), AON_F(T, n_warps, kU32), AON_F(T, stream_id, kU32),
       AON_F(T, channel_id, kI32), AON_F(T, comm_rank, kI32), AON_F(T, comm_nranks, kI32),
       AON_F(T, comm_nnodes, kI32), AON_F(T, graph_replay, kU32), AON_F(T, event_type, kU8),
       AON_F(T, gpu_timing, kU8)}};
  return s;
}

const TableSchema& RecordTraits<ExternalCorrelationRecord>::Schema() {
  using T = ExternalCorrelationRecord;
  static const TableSchema s{RecordKindName(kKind), sizeof(T),
                             {AON_F(T, external_id, kU64), AON_F(T, correlation_id, kU32),
                              AON_F(T, external_kind, kU32)}};
  return s;
}

const TableSchema& MergedSchema(const TableSchema& base) {
  // One merged schema per base schema, built once; the map only grows.
  static std::mutex mu;
  static std::unordered_map<const TableSchema*, TableSchema> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(&base);
  if (it != cache.end()) return it->second;
  // Merged<T> places T at offset 8 for every T here (all have 8-byte alignment).
  constexpr size_t kRecordOffset = 8;
  TableSchema merged{base.name, base.record_size + kRecordOffset, {}};
  merged.fields.push_back(Field{"rank", 0, FieldType::kU32});
  for (const Field& f : base.fields) {
    merged.fields.push_back(Field{f.name, f.offset + kRecordOffset, f.type});
  }
  return cache.emplace(&base, std::move(merged)).first->second;
}

static_assert(offsetof(Merged<KernelRecord>, record) == 8);
static_assert(offsetof(Merged<ExternalCorrelationRecord>, record) == 8);
static_assert(offsetof(Merged<NcclRecord>, record) == 8);

}  // namespace aon
