// RankMetadata and StringTable round trips through real files.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <string>
#include <vector>

#include "aon/format/metadata_wire.h"
#include "aon/format/string_table.h"
#include "aon/format/trace_file.h"
#include "trace_test_util.h"

namespace aon {
namespace {

using testing::TempDir;

RankMetadata FullMetadata() {
  RankMetadata m;
  m.job_id = "1234.0";
  m.rank = 5;
  m.local_rank = 1;
  m.world_size = 16;
  m.local_size = 4;
  m.host = "gpu-node-07";
  m.pid = 987654;
  m.launcher = "slurm";
  m.clock_domain = "CLOCK_MONOTONIC_RAW";
  m.anchor_clock_ns = 123'456'789'012;
  m.anchor_realtime_ns = 1'790'000'000'123'456'789;
  m.clock_offset_ns = -45'678;
  m.clock_drift_ppm = 1.25;
  m.clock_error_bound_ns = 900;
  m.clock_synchronized = true;
  m.clock_leader_rank = 4;
  m.clock_id = "e7aa5dad-5c64-45be-81d5-674b473cc05c/timens:4026531834";
  m.source = "synthetic";
  m.kinds = "kernels,memcpy,api";
  m.memory_cap_bytes = 64ull << 20;
  m.agent_version = "0.1.0-test";
  m.start_ns = 123'000'000'000;
  m.end_ns = 129'000'000'000;
  m.end_reason = "signal SIGTERM";
  for (size_t i = 0; i < kRecordKindCount; ++i) m.dropped[i] = 1000 * i + 3;
  m.notes = {"CUPTI unavailable: another profiler holds the subscriber", "memory cap reached",
             "ünïcödé note ✓"};
  m.devices = {DeviceInfo{0, 1, 2, 132, 150'000'000'000, 9, 0, 5, 16},
               DeviceInfo{1, 3, 2, 132, 150'000'000'000, 9, 0, 4, 8}};
  return m;
}

void ExpectSameMetadata(const RankMetadata& a, const RankMetadata& b) {
  EXPECT_EQ(a.job_id, b.job_id);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.local_rank, b.local_rank);
  EXPECT_EQ(a.world_size, b.world_size);
  EXPECT_EQ(a.local_size, b.local_size);
  EXPECT_EQ(a.host, b.host);
  EXPECT_EQ(a.pid, b.pid);
  EXPECT_EQ(a.launcher, b.launcher);
  EXPECT_EQ(a.clock_domain, b.clock_domain);
  EXPECT_EQ(a.anchor_clock_ns, b.anchor_clock_ns);
  EXPECT_EQ(a.anchor_realtime_ns, b.anchor_realtime_ns);
  EXPECT_EQ(a.clock_offset_ns, b.clock_offset_ns);
  EXPECT_EQ(a.clock_drift_ppm, b.clock_drift_ppm);
  EXPECT_EQ(a.clock_error_bound_ns, b.clock_error_bound_ns);
  EXPECT_EQ(a.clock_synchronized, b.clock_synchronized);
  EXPECT_EQ(a.clock_leader_rank, b.clock_leader_rank);
  EXPECT_EQ(a.clock_id, b.clock_id);
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.kinds, b.kinds);
  EXPECT_EQ(a.memory_cap_bytes, b.memory_cap_bytes);
  EXPECT_EQ(a.agent_version, b.agent_version);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.end_reason, b.end_reason);
  EXPECT_EQ(a.dropped, b.dropped);
  EXPECT_EQ(a.notes, b.notes);
  ASSERT_EQ(a.devices.size(), b.devices.size());
  for (size_t i = 0; i < a.devices.size(); ++i) {
    EXPECT_TRUE(testing::FieldsEqual(DeviceInfoSchema(), &a.devices[i], &b.devices[i]));
  }
}

StatusOr<RankMetadata> WriteAndRead(const TempDir& dir, const RankMetadata& m) {
  const std::string path = dir.File("rank.h5");
  AON_ASSIGN_OR_RETURN(auto writer, TraceWriter::Create(path, FileKind::kRank));
  AON_RETURN_IF_ERROR(writer->WriteRankMetadata(m));
  AON_RETURN_IF_ERROR(writer->WriteStrings(StringTable()));
  AON_RETURN_IF_ERROR(writer->Finish());
  AON_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(path));
  return reader->ReadRankMetadata();
}

TEST(FormatMetadata, EveryFieldRoundTrips) {
  TempDir dir;
  const RankMetadata m = FullMetadata();
  auto back = WriteAndRead(dir, m);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameMetadata(m, *back);
}

TEST(FormatMetadata, DefaultsRoundTrip) {
  TempDir dir;
  const RankMetadata m;  // unknown rank, empty strings, no devices, no notes
  auto back = WriteAndRead(dir, m);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameMetadata(m, *back);
  EXPECT_EQ(back->clock_error_bound_ns, -1);
  EXPECT_TRUE(back->devices.empty());
  EXPECT_TRUE(back->notes.empty());
}

// Says the open file `f` is of format minor `minor`.
void SetFormatMinor(hid_t f, int64_t minor) {
  hid_t a = H5Aopen(f, "aon_format_minor", H5P_DEFAULT);
  EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &minor), 0);
  H5Aclose(a);
}

// A rank file of FullMetadata() and no strings, to edit into an older minor's.
void WriteFullRank(const std::string& path) {
  auto writer = TraceWriter::Create(path, FileKind::kRank);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  ASSERT_TRUE((*writer)->WriteRankMetadata(FullMetadata()).ok());
  ASSERT_TRUE((*writer)->WriteStrings(StringTable()).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
}

// 1.3 added clock_leader_rank and clock_id: a 1.2 file (without them) reads as
// "this rank measured for itself, clock unknown", which leaves it as it was.
TEST(FormatMetadata, OlderMinorWithoutClockLeaderFieldsReadsAsOwnMeasurement) {
  TempDir dir;
  const std::string path = dir.File("rank.h5");
  ASSERT_NO_FATAL_FAILURE(WriteFullRank(path));
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t meta = H5Gopen2(f, "/meta", H5P_DEFAULT);
  EXPECT_GE(H5Adelete(meta, "clock_leader_rank"), 0);
  EXPECT_GE(H5Adelete(meta, "clock_id"), 0);
  H5Gclose(meta);
  SetFormatMinor(f, 2);
  H5Fclose(f);

  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->format_minor(), 2);
  auto back = (*reader)->ReadRankMetadata();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->clock_leader_rank, -1);
  EXPECT_EQ(back->clock_id, "");
  EXPECT_TRUE(back->clock_synchronized);
  EXPECT_EQ(back->clock_offset_ns, FullMetadata().clock_offset_ns);
}

// 1.10 added devices.pcie_gen and pcie_width: a 1.9 file's 32-byte device rows
// (written here with HDF5's own API, member by member as 1.9 wrote them) read
// with every other member in place and the link not known.
TEST(FormatMetadata, OlderMinorDeviceRowsReadWithoutThePcieLink) {
  TempDir dir;
  const std::string path = dir.File("rank.h5");
  ASSERT_NO_FATAL_FAILURE(WriteFullRank(path));
  struct OldDevice {
    uint32_t device_id, uuid_id, name_id, sm_count;
    uint64_t global_memory_bytes;
    uint32_t compute_major, compute_minor;
  };
  static_assert(sizeof(OldDevice) == 32);
  const OldDevice rows[2] = {{0, 1, 2, 132, 150'000'000'000, 9, 0},
                             {1, 3, 2, 78, 96ull << 30, 8, 9}};
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  ASSERT_GE(H5Ldelete(f, "/meta/devices", H5P_DEFAULT), 0);
  hid_t type = H5Tcreate(H5T_COMPOUND, sizeof(OldDevice));
  H5Tinsert(type, "device_id", HOFFSET(OldDevice, device_id), H5T_NATIVE_UINT32);
  H5Tinsert(type, "uuid_id", HOFFSET(OldDevice, uuid_id), H5T_NATIVE_UINT32);
  H5Tinsert(type, "name_id", HOFFSET(OldDevice, name_id), H5T_NATIVE_UINT32);
  H5Tinsert(type, "sm_count", HOFFSET(OldDevice, sm_count), H5T_NATIVE_UINT32);
  H5Tinsert(type, "global_memory_bytes", HOFFSET(OldDevice, global_memory_bytes),
            H5T_NATIVE_UINT64);
  H5Tinsert(type, "compute_major", HOFFSET(OldDevice, compute_major), H5T_NATIVE_UINT32);
  H5Tinsert(type, "compute_minor", HOFFSET(OldDevice, compute_minor), H5T_NATIVE_UINT32);
  hsize_t dims[1] = {2};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t ds = H5Dcreate2(f, "/meta/devices", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  EXPECT_GE(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows), 0);
  H5Dclose(ds);
  H5Sclose(space);
  H5Tclose(type);
  SetFormatMinor(f, 9);
  H5Fclose(f);

  auto reader = TraceReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto back = (*reader)->ReadRankMetadata();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->devices.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const DeviceInfo& d = back->devices[i];
    EXPECT_EQ(d.device_id, rows[i].device_id);
    EXPECT_EQ(d.uuid_id, rows[i].uuid_id);
    EXPECT_EQ(d.name_id, rows[i].name_id);
    EXPECT_EQ(d.sm_count, rows[i].sm_count);
    EXPECT_EQ(d.global_memory_bytes, rows[i].global_memory_bytes);
    EXPECT_EQ(d.compute_major, rows[i].compute_major);
    EXPECT_EQ(d.compute_minor, rows[i].compute_minor);
    EXPECT_EQ(d.pcie_gen, 0u);
    EXPECT_EQ(d.pcie_width, 0u);
  }
}

// The agent -> collector socket carries the 1.3 fields too (the collector
// writes the rank file from them).
TEST(FormatMetadata, WireCarriesClockLeaderFields) {
  const RankMetadata m = FullMetadata();
  auto back = DecodeRankMetadata(EncodeRankMetadata(m));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->clock_leader_rank, 4);
  EXPECT_EQ(back->clock_id, m.clock_id);
  auto defaults = DecodeRankMetadata(EncodeRankMetadata(RankMetadata()));
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->clock_leader_rank, -1);
  EXPECT_EQ(defaults->clock_id, "");
  auto bad = DecodeRankMetadata("clock_leader_rank=four\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("clock_leader_rank"), std::string::npos);
}

// The PCIe link travels with its device; an older agent's seven values still
// decode (no link known), and any other count is refused with its key.
TEST(FormatMetadata, WireCarriesThePcieLinkAndReadsOlderDevices) {
  auto back = DecodeRankMetadata(EncodeRankMetadata(FullMetadata()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->devices.size(), 2u);
  EXPECT_EQ(back->devices[0].pcie_gen, 5u);
  EXPECT_EQ(back->devices[0].pcie_width, 16u);
  EXPECT_EQ(back->devices[1].pcie_width, 8u);
  auto older = DecodeRankMetadata("device=3,1,2,132,1000,9,0\n");
  ASSERT_TRUE(older.ok()) << older.status().ToString();
  ASSERT_EQ(older->devices.size(), 1u);
  EXPECT_EQ(older->devices[0].device_id, 3u);
  EXPECT_EQ(older->devices[0].pcie_gen, 0u);
  EXPECT_EQ(older->devices[0].pcie_width, 0u);
  auto eight = DecodeRankMetadata("device=3,1,2,132,1000,9,0,5\n");
  ASSERT_FALSE(eight.ok());
  EXPECT_NE(eight.status().message().find("device"), std::string::npos);
}

TEST(FormatMetadata, ExtremeValuesRoundTrip) {
  TempDir dir;
  RankMetadata m = FullMetadata();
  m.pid = INT64_MAX;
  m.clock_offset_ns = INT64_MIN;
  m.anchor_realtime_ns = uint64_t{INT64_MAX};
  m.clock_drift_ppm = -1e-9;
  m.dropped.fill(uint64_t{1} << 40);
  m.devices.clear();
  for (uint32_t d = 0; d < 16; ++d) m.devices.push_back(DeviceInfo{d, d, d, d, d, d, d, d, d});
  auto back = WriteAndRead(dir, m);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameMetadata(m, *back);
}

TEST(FormatMetadata, TimelineAttributesRoundTrip) {
  TempDir dir;
  const std::string path = dir.File("timeline.h5");
  {
    auto w = TraceWriter::Create(path, FileKind::kTimeline);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    AON_ASSERT_OK((*w)->SetMetaAttribute("text", std::string_view("a\nb \"c\"")));
    AON_ASSERT_OK((*w)->SetMetaAttribute("empty", std::string_view("")));
    AON_ASSERT_OK((*w)->SetMetaAttribute("neg", int64_t{-5}));
    AON_ASSERT_OK((*w)->SetMetaAttribute("big", uint64_t{1} << 62));
    AON_ASSERT_OK((*w)->SetMetaAttribute("ratio", 0.125));
    AON_ASSERT_OK((*w)->SetMetaAttribute("neg", int64_t{-6}));  // rewriting replaces
    AON_ASSERT_OK((*w)->Finish());
  }
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*(*r)->GetMetaString("text"), "a\nb \"c\"");
  EXPECT_EQ(*(*r)->GetMetaString("empty"), "");
  EXPECT_EQ(*(*r)->GetMetaInt("neg"), -6);
  EXPECT_EQ(*(*r)->GetMetaInt("big"), int64_t{1} << 62);
  EXPECT_EQ(*(*r)->GetMetaDouble("ratio"), 0.125);
  auto missing = (*r)->GetMetaString("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(path), std::string::npos) << missing.status().message();
  auto wrong_type = (*r)->GetMetaInt("text");
  EXPECT_FALSE(wrong_type.ok());
  EXPECT_FALSE((*r)->ReadRankMetadata().ok()) << "a timeline has no rank metadata";
}

// An attribute holds at most 64 KiB (the file format AON writes): a longer text
// is cut at a line end and says so; the file is written. Found while triaging
// the rank-file fuzzer: a merge whose problems filled more than 64 KiB (a job
// of 1,500 ranks with one file) failed without a timeline.
TEST(FormatMetadata, TextLongerThanAnAttributeHoldsIsCutAtALineAndSaysSo) {
  TempDir dir;
  const std::string path = dir.File("timeline.h5");
  std::string lines;
  for (int i = 0; i < 20000; ++i) lines += "rank " + std::to_string(i) + ": missing\n";
  lines += std::string(100000, 'x');  // a line longer than an attribute, too
  {
    auto w = TraceWriter::Create(path, FileKind::kTimeline);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    AON_ASSERT_OK((*w)->SetMetaAttribute("problems", lines));
    AON_ASSERT_OK((*w)->SetMetaAttribute("one_line", std::string(100000, 'y')));
    AON_ASSERT_OK((*w)->Finish());
  }
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string problems = *(*r)->GetMetaString("problems");
  EXPECT_LE(problems.size(), 64u * 1024);
  const size_t note = problems.rfind("\n... (");
  ASSERT_NE(note, std::string::npos) << problems.substr(problems.size() - 200);
  EXPECT_EQ(problems.substr(0, note + 1), lines.substr(0, note + 1)) << "whole lines, as written";
  EXPECT_TRUE(problems.ends_with(std::to_string(lines.size() - note) +
                                 " more bytes not stored: an attribute holds at most 60000)"))
      << problems.substr(note);
  const std::string one_line = *(*r)->GetMetaString("one_line");
  EXPECT_LE(one_line.size(), 64u * 1024);
  EXPECT_TRUE(one_line.starts_with(std::string(50000, 'y')));
}

// ---- String table ---------------------------------------------------------------

TEST(TraceStringTable, InternIsDenseAndIdempotent) {
  StringTable t;
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.Get(0), "");
  EXPECT_EQ(t.Intern(""), 0u);
  EXPECT_EQ(t.Intern("a"), 1u);
  EXPECT_EQ(t.Intern("b"), 2u);
  EXPECT_EQ(t.Intern("a"), 1u);
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.bytes(), 2u);
  EXPECT_EQ(t.Get(2), "b");
  EXPECT_EQ(t.Get(99), "") << "an id out of range reads as the empty string";
  EXPECT_TRUE(t.Contains(2));
  EXPECT_FALSE(t.Contains(3));
  // Interning many strings must not invalidate the index (vector growth).
  for (int i = 0; i < 10000; ++i) t.Intern("s" + std::to_string(i));
  EXPECT_EQ(t.Intern("s0"), 3u);
  EXPECT_EQ(t.Intern("s9999"), 3u + 9999u);
}

TEST(TraceStringTable, FileRoundTrip) {
  StringTable t;
  std::vector<std::string> values = {
      "void gemm_kernel<float, 128>(float const*, float*, int)",
      "ünïcödé ✓ 日本語 🚀",
      std::string("tab\tnewline\nquote\"backslash\\"),
      std::string(1 << 20, 'x'),  // 1 MiB
      "a",
  };
  for (int i = 0; i < 5000; ++i) values.push_back("name_" + std::to_string(i * 7919));
  std::vector<uint32_t> ids;
  for (const std::string& v : values) ids.push_back(t.Intern(v));

  TempDir dir;
  const std::string path = dir.File("strings.h5");
  {
    auto w = TraceWriter::Create(path, FileKind::kRank);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    AON_ASSERT_OK((*w)->WriteStrings(t));
    AON_ASSERT_OK((*w)->Finish());
  }
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto back = (*r)->ReadStrings();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), t.size());
  EXPECT_EQ(back->Get(0), "");
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(back->Get(ids[i]), values[i]) << i;
  EXPECT_EQ(back->bytes(), t.bytes());
}

TEST(TraceStringTable, OnlyTheEmptyString) {
  TempDir dir;
  const std::string path = dir.File("strings.h5");
  {
    auto w = TraceWriter::Create(path, FileKind::kRank);
    ASSERT_TRUE(w.ok());
    AON_ASSERT_OK((*w)->WriteStrings(StringTable()));
    AON_ASSERT_OK((*w)->Finish());
  }
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok());
  auto back = (*r)->ReadStrings();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->size(), 1u);
}

TEST(TraceStringTable, MissingTableIsNotFound) {
  TempDir dir;
  const std::string path = dir.File("nostrings.h5");
  {
    auto w = TraceWriter::Create(path, FileKind::kRank);
    ASSERT_TRUE(w.ok());
    AON_ASSERT_OK((*w)->Finish());
  }
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok());
  auto back = (*r)->ReadStrings();
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), StatusCode::kNotFound);
  EXPECT_NE(back.status().message().find(path), std::string::npos) << back.status().message();
}

}  // namespace
}  // namespace aon
