// Helpers shared by the common and merge unit tests: temp directories, random
// records driven by the schemas (so every stored field is exercised), field-wise
// comparison, and whole rank traces written with the real TraceWriter.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "aon/format/records.h"
#include "aon/base/status.h"
#include "aon/format/string_table.h"
#include "aon/format/trace_file.h"
#include "aon/format/trace_format.h"
#include "temp_dir.h"

namespace aon::testing {

using TempDir = ::aon::test_support::TempDir;  // tests/support/temp_dir.h

inline size_t FieldSize(FieldType t) { return FieldTypeSize(t); }

// Raw bits of a field, zero-extended.
inline uint64_t GetField(const void* record, const Field& f) {
  uint64_t v = 0;
  std::memcpy(&v, static_cast<const char*>(record) + f.offset, FieldSize(f.type));
  return v;
}
inline void SetField(void* record, const Field& f, uint64_t v) {
  std::memcpy(static_cast<char*>(record) + f.offset, &v, FieldSize(f.type));
}

// Fields that are string-table ids (records.h / trace_format.h): the merge must
// remap these and keep everything else bit for bit.
inline bool IsStringField(std::string_view name) {
  return name == "name_id" || name == "domain_id" || name == "func_id" || name == "algo_id" ||
         name == "proto_id" || name == "datatype_id" || name == "uuid_id" || name == "stack_id" ||
         name == "thread_name_id";
}

inline void FillRandomFields(const TableSchema& schema, void* record, std::mt19937_64& rng) {
  for (const Field& f : schema.fields) {
    uint64_t v = rng();
    if (f.type == FieldType::kF64) {
      double d = std::uniform_real_distribution<double>(-1e12, 1e12)(rng);
      std::memcpy(&v, &d, sizeof d);
    }
    SetField(record, f, v);
  }
}

template <typename T>
T RandomRecord(std::mt19937_64& rng) {
  T r;
  std::memset(&r, 0, sizeof r);  // padding stays zero: it is never stored
  FillRandomFields(SchemaOf<T>(), &r, rng);
  return r;
}

// Compares every schema field; on a difference names the field.
inline ::testing::AssertionResult FieldsEqual(const TableSchema& schema, const void* a,
                                              const void* b) {
  for (const Field& f : schema.fields) {
    if (GetField(a, f) != GetField(b, f)) {
      return ::testing::AssertionFailure()
             << schema.name << "." << f.name << ": " << GetField(a, f) << " != " << GetField(b, f);
    }
  }
  return ::testing::AssertionSuccess();
}

#define AON_ASSERT_OK(expr)                                            \
  do {                                                                 \
    const ::aon::Status aon_test_status_ = (expr);                     \
    ASSERT_TRUE(aon_test_status_.ok()) << aon_test_status_.ToString(); \
  } while (0)

using AllRecords = RecordVectors;

// Everything one rank file holds.
struct RankTrace {
  RankMetadata meta;
  StringTable strings;
  AllRecords records;

  template <typename T>
  std::vector<T>& Get() {
    return std::get<std::vector<T>>(records);
  }
  template <typename T>
  const std::vector<T>& Get() const {
    return std::get<std::vector<T>>(records);
  }
};

inline RankMetadata BasicMetadata(int32_t rank, int32_t world_size) {
  RankMetadata m;
  m.job_id = "job-42";
  m.rank = rank;
  m.local_rank = rank % 4;
  m.world_size = world_size;
  m.local_size = 4;
  m.host = "node" + std::to_string(rank / 4);
  m.pid = 1000 + rank;
  m.launcher = "openmpi";
  m.source = "cupti";
  m.kinds = "kernels,memcpy,memset,sync,api,nvtx,nccl,external_correlation";
  m.agent_version = "test";
  m.start_ns = 1'000'000'000;
  m.end_ns = 2'000'000'000;
  m.end_reason = "exit";
  return m;
}

// Writes `trace` as a finished rank file at `path` with the real writer.
inline Status WriteRankTrace(const std::string& path, const RankTrace& trace,
                             const WriteOptions& options = {}) {
  AON_ASSIGN_OR_RETURN(auto writer, TraceWriter::Create(path, FileKind::kRank, options));
  AON_RETURN_IF_ERROR(writer->WriteRankMetadata(trace.meta));
  Status st;
  ForEachRecordType([&](auto tag) {
    using T = decltype(tag);
    if (st.ok()) st = writer->Append<T>(std::span<const T>(trace.Get<T>()));
  });
  AON_RETURN_IF_ERROR(st);
  AON_RETURN_IF_ERROR(writer->WriteStrings(trace.strings));
  return writer->Finish();
}

inline std::string RankPath(const std::string& dir, int rank) {
  char name[32];
  std::snprintf(name, sizeof(name), "rank-%05d.h5", rank);
  return dir + "/" + name;
}

}  // namespace aon::testing
