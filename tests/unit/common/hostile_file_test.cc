// TraceReader on crafted files (issue #18, item 4): whatever a file declares,
// the reader answers with an error that names the file, the dataset and the
// reason, before allocating for the declaration, and never reads another file
// the crafted one points at. Each fixture is a valid rank file written by the
// real TraceWriter, then altered with the HDF5 C API (hostile_file_util.h).
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "aon/base/helper_threads.h"
#include "aon/format/trace_file.h"
#include "hostile_file_util.h"
#include "trace_test_util.h"

namespace aon {
namespace {

using testing::TempDir;

constexpr hsize_t k2to24 = hsize_t{1} << 24;
constexpr hsize_t k2to34 = hsize_t{1} << 34;
constexpr hsize_t k2to37 = hsize_t{1} << 37;
constexpr hsize_t k2to40 = hsize_t{1} << 40;

// A valid rank file: two strings, one device, `kernels` random kernels.
std::string WriteRank(const TempDir& dir, const std::string& name, size_t kernels = 20,
                      const WriteOptions& options = {}) {
  const std::string path = dir.File(name);
  testing::RankTrace t;
  t.meta = testing::BasicMetadata(0, 1);
  t.meta.devices.push_back(DeviceInfo{});
  t.strings.Intern("kernel");
  std::mt19937_64 rng(7);
  for (size_t i = 0; i < kernels; ++i)
    t.Get<KernelRecord>().push_back(testing::RandomRecord<KernelRecord>(rng));
  const Status written = testing::WriteRankTrace(path, t, options);
  EXPECT_TRUE(written.ok()) << written.ToString();
  return path;
}

// The error names the file and says each of `words`.
void ExpectRefused(const Status& s, const std::string& path,
                   std::initializer_list<const char*> words) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("'" + path + "'"), std::string::npos) << s.ToString();
  for (const char* w : words)
    EXPECT_NE(s.message().find(w), std::string::npos) << w << ": " << s.ToString();
}

std::unique_ptr<TraceReader> OpenOk(const std::string& path) {
  auto r = TraceReader::Open(path);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

// ---- Declared extents ------------------------------------------------------------

TEST(HostileFile, HugeStringDataIsRefusedBeforeAllocating) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  testing::RedeclareRows(path, "/strings/data", k2to40);
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  ExpectRefused(r->ReadStrings().status(), path, {"/strings/data", "declares 1099511627776 rows"});
}

TEST(HostileFile, HugeStringOffsetsAreRefusedBeforeAllocating) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  testing::RedeclareRows(path, "/strings/offsets", k2to37);
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  ExpectRefused(r->ReadStrings().status(), path,
                {"/strings/offsets", "declares 137438953472 rows"});
}

TEST(HostileFile, HugeDeviceTableIsRefusedBeforeAllocating) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  testing::RedeclareRows(path, "/meta/devices", k2to40);
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  ExpectRefused(r->ReadRankMetadata().status(), path,
                {"/meta/devices", "declares 1099511627776 rows"});
}

TEST(HostileFile, HugeRecordTableIsRefusedNotRead) {
  for (hsize_t rows : {k2to24, k2to34}) {
    TempDir dir;
    const std::string path = WriteRank(dir, "rank-00000.h5");
    testing::RedeclareRows(path, "/records/kernels", rows);
    auto r = OpenOk(path);
    ASSERT_NE(r, nullptr);
    auto n = r->TableSize(RecordTraits<KernelRecord>::Schema());
    ExpectRefused(n.status(), path,
                  {"/records/kernels", ("declares " + std::to_string(rows)).c_str()});
    ExpectRefused(r->ReadAll<KernelRecord>().status(), path, {"/records/kernels"});
  }
}

TEST(HostileFile, RowsPastTheStoredChunksAreRefused) {
  // Two stored chunks of 16384 kernels (random, so deflate hardly shrinks
  // them): a third chunk's worth of rows is within what the stored bytes could
  // inflate to, but no chunk holds them; they would read as zeros.
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5", 20000);
  testing::RedeclareRows(path, "/records/kernels", 3 * 16384);
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  ExpectRefused(r->TableSize(RecordTraits<KernelRecord>::Schema()).status(), path,
                {"/records/kernels", "stores only 2 chunk(s)"});
}

TEST(HostileFile, ContiguousDatasetLargerThanTheFileIsRefused) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  testing::RedeclareContiguous(path, "/records/kernels", k2to34);
  testing::RedeclareContiguous(path, "/strings/offsets", 1000);  // smaller, but never written
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  ExpectRefused(r->TableSize(RecordTraits<KernelRecord>::Schema()).status(), path,
                {"/records/kernels", "in a file of"});
  ExpectRefused(r->ReadStrings().status(), path, {"/strings/offsets", "stores 0 bytes"});
}

TEST(HostileFile, ValidFileStillReadsWhole) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5", 40000);
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  auto k = r->ReadAll<KernelRecord>();
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->size(), 40000u);
  auto m = r->ReadRankMetadata();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->devices.size(), 1u);
  auto s = r->ReadStrings();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->size(), 2u);
}

// ---- Row types -------------------------------------------------------------------

TEST(HostileFile, RowMemberPastItsRowIsRefusedBeforeConverting) {
  // Found by tests/fuzz/rank_file_fuzz.cc: HDF5 converts rows at the member
  // offsets the file states, unchecked; /meta/devices rows (32 bytes then, 40 since 1.10) with
  // name_id at byte 524288 made it read far past its conversion buffer.
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  testing::MoveCompoundMember(path, "uuid_id", "name_id", 8, 524288);
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  ExpectRefused(r->ReadRankMetadata().status(), path,
                {"/meta/devices", "'name_id'", "at offset 524288) lies outside its 40-byte rows"});
}

// Replaces /records/kernels of `path` with 4 zero rows of the row type
// `make_type` returns (it owns the new type; it gets the stored one), keeping
// the dataset's creation properties.
void ReplaceKernelsTable(const std::string& path, const std::function<hid_t(hid_t)>& make_type) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t old = H5Dopen2(f, "/records/kernels", H5P_DEFAULT);
  hid_t stored = H5Dget_type(old);
  hid_t dcpl = H5Dget_create_plist(old);
  H5Dclose(old);
  hid_t type = make_type(stored);
  H5Tclose(stored);
  ASSERT_GE(H5Ldelete(f, "/records/kernels", H5P_DEFAULT), 0);
  hsize_t dims[1] = {4}, maxdims[1] = {H5S_UNLIMITED};
  hid_t space = H5Screate_simple(1, dims, maxdims);
  hid_t ds = H5Dcreate2(f, "/records/kernels", type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  std::vector<char> rows(4 * H5Tget_size(type), 0);
  EXPECT_GE(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
  H5Dclose(ds);
  H5Sclose(space);
  H5Pclose(dcpl);
  H5Tclose(type);
  H5Fclose(f);
}

TEST(HostileFile, RowsLargerThanTheirMembersAreRefused) {
  // Found by tests/fuzz/rank_file_fuzz.cc: memcpy rows stated 56 bytes over 52
  // bytes of members; HDF5 took each inflated chunk to hold rows of 56 bytes
  // and read past the end of the 52-byte rows it held.
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  ASSERT_NO_FATAL_FAILURE(ReplaceKernelsTable(path, [](hid_t stored) {
    hid_t type = H5Tcopy(stored);  // a dataset's own type is read-only
    const size_t row = H5Tget_size(type);
    EXPECT_EQ(row, 84u);
    EXPECT_GE(H5Tset_size(type, row + 4), 0);  // the same members, 4 bytes of padding after them
    return type;
  }));
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  ExpectRefused(r->ReadAll<KernelRecord>().status(), path,
                {"/records/kernels", "rows of 88 bytes hold members of 84 bytes"});
}

// Found by tests/fuzz/rank_file_fuzz.cc: an integer member whose stated bits are
// not the whole of its bytes (here grid_x as 16 bits from bit 8 of its 4 bytes;
// a crafted file states more bits than the bytes hold) makes HDF5's conversion
// read the bits it states (SEGV in H5T__bit_find < H5T__conv_i_i). AON writes
// every number full width: anything else is refused before converting.
TEST(HostileFile, ANumberWhoseBitsAreNotItsBytesIsRefusedBeforeConverting) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  ASSERT_NO_FATAL_FAILURE(ReplaceKernelsTable(path, [](hid_t stored) {
    hid_t type = H5Tcreate(H5T_COMPOUND, H5Tget_size(stored));
    for (int i = 0; i < H5Tget_nmembers(stored); ++i) {
      const auto m = static_cast<unsigned>(i);
      char* name = H5Tget_member_name(stored, m);
      hid_t member = H5Tget_member_type(stored, m);
      hid_t copy = H5Tcopy(member);
      if (std::string(name) == "grid_x") {
        EXPECT_GE(H5Tset_precision(copy, 16), 0);
        EXPECT_GE(H5Tset_offset(copy, 8), 0);
      }
      EXPECT_GE(H5Tinsert(type, name, H5Tget_member_offset(stored, m), copy), 0);
      H5Tclose(copy);
      H5Tclose(member);
      H5free_memory(name);
    }
    return type;
  }));
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  ExpectRefused(r->ReadAll<KernelRecord>().status(), path,
                {"/records/kernels", "'grid_x'", "(precision 16, offset 8) AON never writes"});
}

// ---- Chunks as the chunk index states them ------------------------------------------
//
// Found by tests/fuzz/rank_file_fuzz.cc: HDF5 takes each chunk's stored size,
// address and filter mask from the chunk index, allocates that size before the
// read and copies a whole chunk of rows out of an unfiltered chunk's buffer.

// Bytes of one row of dataset `name` on disk.
size_t DiskRowBytes(const std::string& path, const std::string& name) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  hid_t type = H5Dget_type(ds);
  const size_t bytes = H5Tget_size(type);
  H5Tclose(type);
  H5Dclose(ds);
  H5Fclose(f);
  return bytes;
}

// The key of a chunk of a 1-D dataset in a version-1 B-tree chunk index (what
// TraceWriter's files use): stored size, filter mask, first row, 0.
std::string ChunkKey(uint32_t size, uint64_t first_row) {
  std::string key(24, '\0');
  std::memcpy(key.data(), &size, 4);
  std::memcpy(key.data() + 8, &first_row, 8);
  return key;
}

TEST(HostileFile, AnUnfilteredChunkShorterThanAChunkIsRefused) {
  // A chunk of 8 kernels stated one byte short: HDF5 read a whole chunk out
  // of the shorter buffer (heap-buffer-overflow in H5VM_memcpyvv). Files
  // without checksums (written before them) are read still.
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5", 20,
                                     {.deflate_level = 0, .chunk_records = 8, .checksum = false});
  const uint32_t chunk_bytes = static_cast<uint32_t>(8 * DiskRowBytes(path, "/records/kernels"));
  testing::PatchBytes(path, ChunkKey(chunk_bytes, 8), ChunkKey(chunk_bytes - 1, 8));
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  const std::string stores = "the chunk of rows from 8 stores " + std::to_string(chunk_bytes - 1) +
                             " bytes, not a chunk's " + std::to_string(chunk_bytes) + " bytes";
  ExpectRefused(r->ReadAll<KernelRecord>().status(), path, {"/records/kernels", stores.c_str()});
  KernelRecord k{};
  const Status before = r->ReadTable(RecordTraits<KernelRecord>::Schema(), 0, 1, &k);
  EXPECT_TRUE(before.ok()) << "the chunks before it read as usual: " << before.ToString();
}

// A chunk whose deflate stream is damaged, among chunks decoded by several
// threads (TraceReader::SetDecodeThreads): the read fails naming that chunk,
// whichever thread met it, and the same as when one thread decodes. With
// checksums (the default) the chunk fails its checksum before it is inflated;
// without (older files), it does not inflate.
TEST(HostileFile, AChunkThatDoesNotInflateIsNamedWhateverThreadDecodesIt) {
  for (const bool checksum : {false, true}) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5", 200,
                                     {.deflate_level = 4, .chunk_records = 8, .checksum = checksum});
  testing::RewriteChunk(path, "/records/kernels", 8 * 13, std::vector<char>(100, 'x'));
  const std::string named = std::string("the chunk of rows from 104 ") +
                            (checksum ? "fails its checksum" : "does not inflate");
  for (unsigned threads : {1u, 3u, 8u}) {
    SCOPED_TRACE(std::to_string(threads) + " decoding threads, checksum " + std::to_string(checksum));
    auto r = OpenOk(path);
    ASSERT_NE(r, nullptr);
    r->SetDecodeThreads(threads);
    ExpectRefused(r->ReadAll<KernelRecord>().status(), path, {"/records/kernels", named.c_str()});
    std::vector<KernelRecord> before(104);
    const Status ok = r->ReadTable(RecordTraits<KernelRecord>::Schema(), 0, 104, before.data());
    EXPECT_TRUE(ok.ok()) << "the chunks before it read as usual: " << ok.ToString();
  }
  }
}

// A read of more chunks than a reader keeps in hand (64) goes in windows, each
// read by this thread while the others decode the chunks already read: the
// rows come back the same for any number of threads, with or without a kept
// pool, and a damaged chunk in a later window is the one named.
TEST(HostileFile, LongReadsInWindowsNameTheFirstDamagedChunk) {
  for (const bool checksum : {false, true}) {
  SCOPED_TRACE("checksum " + std::to_string(checksum));
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5", 1000,
                                     {.deflate_level = 4, .chunk_records = 8, .checksum = checksum});
  const std::string named = std::string("the chunk of rows from 800 ") +
                            (checksum ? "fails its checksum" : "does not inflate");
  std::vector<KernelRecord> expected;
  {
    auto r = OpenOk(path);
    ASSERT_NE(r, nullptr);
    auto all = r->ReadAll<KernelRecord>();
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    expected = *all;
  }
  ASSERT_EQ(expected.size(), 1000u);  // 125 chunks: two windows
  const TableSchema& schema = RecordTraits<KernelRecord>::Schema();
  HelperThreads pool(3);
  for (unsigned threads : {2u, 4u, 8u}) {
    for (HelperThreads* helpers : {static_cast<HelperThreads*>(nullptr), &pool}) {
      SCOPED_TRACE(std::to_string(threads) + " decoding threads" + (helpers ? ", pool" : ""));
      auto r = OpenOk(path);
      ASSERT_NE(r, nullptr);
      r->SetDecodeThreads(threads, helpers);
      std::vector<KernelRecord> back(997);
      AON_ASSERT_OK(r->ReadTable(schema, 3, 997, back.data()));
      for (size_t i = 0; i < back.size(); ++i) {
        ASSERT_TRUE(testing::FieldsEqual(schema, &expected[3 + i], &back[i])) << "record " << 3 + i;
      }
    }
  }
  testing::RewriteChunk(path, "/records/kernels", 8 * 100, std::vector<char>(100, 'x'));
  testing::RewriteChunk(path, "/records/kernels", 8 * 110, std::vector<char>(100, 'y'));
  for (unsigned threads : {1u, 3u, 8u}) {
    SCOPED_TRACE(std::to_string(threads) + " decoding threads");
    auto r = OpenOk(path);
    ASSERT_NE(r, nullptr);
    r->SetDecodeThreads(threads, &pool);
    ExpectRefused(r->ReadAll<KernelRecord>().status(), path, {"/records/kernels", named.c_str()});
    std::vector<KernelRecord> before(800);
    AON_ASSERT_OK(r->ReadTable(schema, 0, 800, before.data()));
    EXPECT_TRUE(testing::FieldsEqual(schema, &expected[799], &before[799]));
  }
  }
}

// Where chunk `first_row` of dataset `name` lies in the file: (address, size).
std::pair<uint64_t, uint64_t> ChunkPlace(const std::string& path, const std::string& name,
                                         hsize_t first_row) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  hsize_t offset[1] = {first_row};
  unsigned mask = 0;
  haddr_t addr = 0;
  hsize_t size = 0;
  const herr_t got = H5Dget_chunk_info_by_coord(ds, offset, &mask, &addr, &size);
  H5Dclose(ds);
  H5Fclose(f);
  EXPECT_GE(got, 0) << name << " row " << first_row;
  return {addr, size};
}

// One bit flipped in the middle of a stored chunk, as a bad disk or a bad copy
// would: the read names that chunk and stops there, unfiltered or deflated,
// for any number of decoding threads; the chunks before it read as they were.
// (Without checksums an unfiltered chunk read back with one record changed.)
TEST(HostileFile, AFlippedBitInAStoredChunkFailsItsChecksum) {
  for (const int level : {0, 4}) {
    SCOPED_TRACE("deflate level " + std::to_string(level));
    TempDir dir;
    const std::string path =
        WriteRank(dir, "rank-00000.h5", 200, {.deflate_level = level, .chunk_records = 8});
    const auto [addr, size] = ChunkPlace(path, "/records/kernels", 8 * 13);
    ASSERT_GT(size, 8u);
    std::string bytes = testing::FileBytes(path);
    ASSERT_LT(addr + size, bytes.size());
    bytes[addr + size / 2] ^= 0x10;
    testing::WriteFileBytes(path, bytes);
    for (unsigned threads : {1u, 3u}) {
      SCOPED_TRACE(std::to_string(threads) + " decoding threads");
      auto r = OpenOk(path);
      ASSERT_NE(r, nullptr);
      r->SetDecodeThreads(threads);
      ExpectRefused(r->ReadAll<KernelRecord>().status(), path,
                    {"/records/kernels", "the chunk of rows from 104 fails its checksum"});
      std::vector<KernelRecord> before(104);
      const Status ok = r->ReadTable(RecordTraits<KernelRecord>::Schema(), 0, 104, before.data());
      EXPECT_TRUE(ok.ok()) << "the chunks before it read as usual: " << ok.ToString();
    }
  }
}

// The checksums AON writes with its own chunks are the ones HDF5's Fletcher-32
// filter checks, and the other way round: a table appended in parts (the rows
// up to a chunk boundary go through HDF5's pipeline, whole chunks are written
// directly) reads back the same through HDF5's pipeline (which checks every
// chunk's checksum) and through AON's direct reads (which check them too).
TEST(Checksums, AonsChunksAndHdf5sChunksCheckEachOther) {
  for (const int level : {0, 1, 4}) {
    SCOPED_TRACE("deflate level " + std::to_string(level));
    TempDir dir;
    const std::string path = dir.File("rank-00000.h5");
    std::mt19937_64 rng(11);
    std::vector<KernelRecord> kernels;
    for (int i = 0; i < 203; ++i) kernels.push_back(testing::RandomRecord<KernelRecord>(rng));
    {
      auto w = TraceWriter::Create(path, FileKind::kRank,
                                   {.deflate_level = level, .chunk_records = 16});
      AON_ASSERT_OK(w.status());
      AON_ASSERT_OK((*w)->WriteRankMetadata(testing::BasicMetadata(0, 1)));
      StringTable strings;
      AON_ASSERT_OK((*w)->WriteStrings(strings));
      // 5 rows (HDF5's pipeline), then 198: 11 rows to the boundary (HDF5),
      // 11 whole chunks (direct) and 11 rows (HDF5).
      AON_ASSERT_OK((*w)->Append(std::span<const KernelRecord>(kernels.data(), 5)));
      AON_ASSERT_OK((*w)->Append(std::span<const KernelRecord>(kernels.data() + 5, 198)));
      AON_ASSERT_OK((*w)->Finish());
    }
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    hid_t ds = H5Dopen2(f, "/records/kernels", H5P_DEFAULT);
    hid_t dcpl = H5Dget_create_plist(ds);
    EXPECT_GT(H5Pget_nfilters(dcpl), 0);
    unsigned flags = 0, config = 0;
    size_t nvalues = 0;
    EXPECT_EQ(H5Pget_filter2(dcpl, static_cast<unsigned>(H5Pget_nfilters(dcpl) - 1), &flags,
                             &nvalues, nullptr, 0, nullptr, &config),
              H5Z_FILTER_FLETCHER32);
    hid_t type = H5Dget_type(ds);
    std::vector<char> through_hdf5(203 * H5Tget_size(type));
    EXPECT_GE(H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, through_hdf5.data()), 0)
        << "HDF5's filter refused a checksum AON wrote";
    H5Tclose(type);
    H5Pclose(dcpl);
    H5Dclose(ds);
    H5Fclose(f);
    auto r = OpenOk(path);
    ASSERT_NE(r, nullptr);
    auto back = r->ReadAll<KernelRecord>();
    AON_ASSERT_OK(back.status());
    ASSERT_EQ(back->size(), kernels.size());
    const TableSchema& schema = RecordTraits<KernelRecord>::Schema();
    for (size_t i = 0; i < kernels.size(); ++i) {
      ASSERT_TRUE(testing::FieldsEqual(schema, &kernels[i], &(*back)[i])) << "record " << i;
    }
  }
}

TEST(HostileFile, AChunkThatSkipsAFilterIsRefused) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  testing::RewriteChunk(path, "/records/kernels", 0, std::vector<char>(100, 'x'), 1);
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  ExpectRefused(r->ReadAll<KernelRecord>().status(), path,
                {"/records/kernels", "the chunk of rows from 0 skips filters (mask 1)"});
}

TEST(HostileFile, AChunkStatedLargerThanTheFileIsRefusedBeforeAllocating) {
  // The index said 1.85 GB for a chunk of a 45 KB file: HDF5 allocated it.
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  testing::RewriteChunk(path, "/records/kernels", 0, std::vector<char>(777, 'x'));
  testing::PatchBytes(path, ChunkKey(777, 0), ChunkKey(0x7ffffff0, 0));
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  ExpectRefused(
      r->ReadAll<KernelRecord>().status(), path,
      {"/records/kernels", "the chunk of rows from 0 is stated to hold 2147483632 bytes"});
}

// ---- Other files: external storage, external links, virtual datasets -------------

TEST(HostileFile, ExternalRawStorageIsNotFollowed) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  const std::string secret = dir.File("secret.txt");
  { std::ofstream(secret) << std::string("\0top secret\0", 12) << std::string(4096, 'x'); }
  testing::MakeExternalStorage(path, "/strings/data", secret, 12);
  testing::MakeExternalStorage(path, "/records/kernels", secret, 10);
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  auto s = r->ReadStrings();
  ExpectRefused(s.status(), path, {"/strings/data", "external file"});
  ExpectRefused(r->TableSize(RecordTraits<KernelRecord>::Schema()).status(), path,
                {"/records/kernels", "external file"});
}

TEST(HostileFile, ExternalLinksAreNotFollowed) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  // The link targets are valid AON files: following them would "work".
  const std::string other = WriteRank(dir, "other.h5", 50);
  testing::MakeExternalLink(path, "/strings", other, "/strings");
  testing::MakeExternalLink(path, "/records/kernels", other, "/records/kernels");
  testing::MakeExternalLink(path, "/meta", other, "/meta");
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  ExpectRefused(r->ReadStrings().status(), path, {"'/strings'", "external link"});
  ExpectRefused(r->TableSize(RecordTraits<KernelRecord>::Schema()).status(), path,
                {"'/records/kernels'", "external link"});
  KernelRecord k{};
  ExpectRefused(r->ReadTable(RecordTraits<KernelRecord>::Schema(), 0, 1, &k), path,
                {"'/records/kernels'", "external link"});
  ExpectRefused(r->ReadRankMetadata().status(), path, {"/meta", "external link"});
}

TEST(HostileFile, VirtualDatasetInARankFileIsRefused) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  const std::string other = WriteRank(dir, "other.h5", 50);
  {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    hid_t old = H5Dopen2(f, "/records/kernels", H5P_DEFAULT);
    hid_t type = H5Dget_type(old);
    H5Dclose(old);
    ASSERT_GE(H5Ldelete(f, "/records/kernels", H5P_DEFAULT), 0);
    hsize_t dims[1] = {50};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    ASSERT_GE(H5Pset_virtual(dcpl, space, other.c_str(), "/records/kernels", space), 0);
    hid_t ds = H5Dcreate2(f, "/records/kernels", type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Tclose(type);
    H5Fclose(f);
  }
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  ExpectRefused(r->TableSize(RecordTraits<KernelRecord>::Schema()).status(), path,
                {"/records/kernels", "virtual dataset"});
}

TEST(HostileFile, FiltersAonNeverWritesAreRefused) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    ASSERT_GE(H5Ldelete(f, "/strings/offsets", H5P_DEFAULT), 0);
    hsize_t dims[1] = {2}, chunk[1] = {2};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, chunk);
    ASSERT_GE(H5Pset_scaleoffset(dcpl, H5Z_SO_INT, H5Z_SO_INT_MINBITS_DEFAULT), 0);
    hid_t ds =
        H5Dcreate2(f, "/strings/offsets", H5T_STD_U64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    const uint64_t offsets[2] = {0, 1};
    H5Dwrite(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Fclose(f);
  }
  auto r = OpenOk(path);
  ASSERT_NE(r, nullptr);
  ExpectRefused(r->ReadStrings().status(), path,
                {"/strings/offsets", ("filter " + std::to_string(H5Z_FILTER_SCALEOFFSET)).c_str()});
}

// ---- Attributes ------------------------------------------------------------------

TEST(HostileFile, FormatMajorIsComparedAsRead) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  // 2^32 + 1: an int cast would take it for major 1, this AON's.
  testing::SetRootIntAttribute(path, "aon_format_major", (int64_t{1} << 32) + 1);
  auto r = TraceReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented) << r.status().ToString();
  EXPECT_NE(r.status().message().find("'" + path + "'"), std::string::npos);
  EXPECT_NE(r.status().message().find("format 4294967297."), std::string::npos)
      << r.status().ToString();
}

TEST(HostileFile, FormatMinorOutOfRangeIsRefused) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  testing::SetRootIntAttribute(path, "aon_format_minor", (int64_t{1} << 32) + 3);
  ExpectRefused(TraceReader::Open(path).status(), path,
                {"minor version 4294967299", "out of range"});
}

TEST(HostileFile, AttributeWithManyValuesIsNotReadIntoOne) {
  TempDir dir;
  const std::string path = WriteRank(dir, "rank-00000.h5");
  {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    ASSERT_GE(H5Adelete(f, "aon_format_major"), 0);
    hsize_t dims[1] = {4096};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t a = H5Acreate2(f, "aon_format_major", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(a, 0);
    std::vector<int64_t> ones(4096, 1);
    H5Awrite(a, H5T_NATIVE_INT64, ones.data());
    H5Aclose(a);
    H5Sclose(space);
    H5Fclose(f);
  }
  ExpectRefused(TraceReader::Open(path).status(), path, {"aon_format_major", "not a single value"});
}

}  // namespace
}  // namespace aon
