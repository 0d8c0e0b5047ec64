// What TraceReader says about files it cannot use, and the writer's .partial
// protocol. Every error must name the file.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "aon/format/trace_file.h"
#include "hostile_file_util.h"
#include "trace_test_util.h"

namespace aon {
namespace {

using testing::TempDir;

// A complete, valid rank file with some records.
void WriteValidFile(const std::string& path, size_t kernels = 20000) {
  testing::RankTrace t;
  t.meta = testing::BasicMetadata(0, 1);
  t.strings.Intern("kernel");
  std::mt19937_64 rng(1);
  for (size_t i = 0; i < kernels; ++i)
    t.Get<KernelRecord>().push_back(testing::RandomRecord<KernelRecord>(rng));
  AON_ASSERT_OK(testing::WriteRankTrace(path, t));
}

void ExpectNamesFile(const Status& s, const std::string& path) {
  EXPECT_NE(s.message().find(path), std::string::npos) << s.ToString();
}

TEST(TraceReaderErrors, MissingFile) {
  TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  auto r = TraceReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  ExpectNamesFile(r.status(), path);
}

TEST(TraceReaderErrors, Directory) {
  TempDir dir;
  auto r = TraceReader::Open(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  ExpectNamesFile(r.status(), dir.path());
}

TEST(TraceReaderErrors, GarbageAndEmptyFiles) {
  TempDir dir;
  const std::string garbage = dir.File("garbage.h5");
  {
    std::ofstream out(garbage, std::ios::binary);
    std::mt19937_64 rng(3);
    for (int i = 0; i < 100000; ++i) out.put(static_cast<char>(rng()));
  }
  auto r = TraceReader::Open(garbage);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  ExpectNamesFile(r.status(), garbage);

  const std::string empty = dir.File("empty.h5");
  std::ofstream(empty).close();
  r = TraceReader::Open(empty);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  ExpectNamesFile(r.status(), empty);
}

TEST(TraceReaderErrors, TruncatedFile) {
  TempDir dir;
  const std::string valid = dir.File("valid.h5");
  WriteValidFile(valid);
  const std::string cut = dir.File("cut.h5");
  std::filesystem::copy_file(valid, cut);
  std::filesystem::resize_file(cut, std::filesystem::file_size(valid) / 2);
  auto r = TraceReader::Open(cut);
  ASSERT_FALSE(r.ok()) << "a file cut at half must not open as valid";
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  ExpectNamesFile(r.status(), cut);
  // HDF5's innermost error says what is wrong, not just "unable to open file".
  EXPECT_NE(r.status().message().find("truncated file"), std::string::npos) << r.status().message();
}

TEST(TraceReaderErrors, NewerMajorVersion) {
  TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  WriteValidFile(path, 10);
  testing::SetRootIntAttribute(path, "aon_format_major", 2);
  auto r = TraceReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  ExpectNamesFile(r.status(), path);
  const std::string version = "2." + std::to_string(kFormatMinor);  // the minor is left as written
  EXPECT_NE(r.status().message().find(version), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("1.x"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("newer"), std::string::npos) << r.status().message();
}

TEST(TraceReaderErrors, OlderMajorVersionIsAlsoRefused) {
  TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  WriteValidFile(path, 10);
  testing::SetRootIntAttribute(path, "aon_format_major", 0);
  auto r = TraceReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  ExpectNamesFile(r.status(), path);
}

TEST(TraceReaderErrors, NewerMinorVersionIsRead) {
  TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  WriteValidFile(path, 10);
  testing::SetRootIntAttribute(path, "aon_format_minor", 7);
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->format_minor(), 7);
  auto k = (*r)->ReadAll<KernelRecord>();
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->size(), 10u);
}

TEST(TraceReaderErrors, Hdf5FileWithoutAonAttributes) {
  TempDir dir;
  const std::string path = dir.File("plain.h5");
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t g = H5Gcreate2(f, "/records", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Gclose(g);
  H5Fclose(f);
  auto r = TraceReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  ExpectNamesFile(r.status(), path);
  EXPECT_NE(r.status().message().find("not an AON trace"), std::string::npos)
      << r.status().message();
}

TEST(TraceReaderErrors, UnknownFileKind) {
  TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  WriteValidFile(path, 1);
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  H5Adelete(f, "aon_file_kind");
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, 6);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, "aon_file_kind", type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, type, "bogus");
  H5Aclose(a);
  H5Sclose(space);
  H5Tclose(type);
  H5Fclose(f);
  auto r = TraceReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  ExpectNamesFile(r.status(), path);
  EXPECT_NE(r.status().message().find("bogus"), std::string::npos) << r.status().message();
}

// Replaces /strings/offsets of a valid file with `offsets`.
void ReplaceStringOffsets(const std::string& path, const std::vector<uint64_t>& offsets) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  ASSERT_GE(H5Ldelete(f, "/strings/offsets", H5P_DEFAULT), 0);
  hsize_t dims[1] = {offsets.size()};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t ds = H5Dcreate2(f, "/strings/offsets", H5T_STD_U64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                        H5P_DEFAULT);
  ASSERT_GE(ds, 0);
  H5Dwrite(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets.data());
  H5Dclose(ds);
  H5Sclose(space);
  H5Fclose(f);
}

TEST(TraceReaderErrors, CorruptStringTable) {
  // data = "\0kernel\0" : string 0 at 0, string 1 at 1.
  const std::vector<std::vector<uint64_t>> bad = {
      {0, 100},   // offset beyond the data
      {0, 1, 1},  // string 1 twice: ids would not be dense
      {1},        // id 0 is not the empty string
      {0, 1, 0},  // going backwards
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    TempDir dir;
    const std::string path = dir.File("rank-00000.h5");
    WriteValidFile(path, 1);
    ReplaceStringOffsets(path, bad[i]);
    auto r = TraceReader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto s = (*r)->ReadStrings();
    ASSERT_FALSE(s.ok()) << "case " << i;
    EXPECT_EQ(s.status().code(), StatusCode::kDataLoss);
    ExpectNamesFile(s.status(), path);
  }
}

// ---- .partial protocol ----------------------------------------------------------

TEST(TracePartial, NoFinalFileBeforeFinish) {
  TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  auto w = TraceWriter::Create(path, FileKind::kRank);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::exists(path + ".partial"));
  AON_ASSERT_OK((*w)->WriteRankMetadata(testing::BasicMetadata(0, 1)));
  EXPECT_FALSE(std::filesystem::exists(path));
  struct stat st {};
  ASSERT_EQ(stat((path + ".partial").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "trace files belong to the job's user only";
  AON_ASSERT_OK((*w)->Finish());
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  AON_ASSERT_OK((*w)->Finish());  // a second Finish is harmless
}

TEST(TracePartial, AbandonedWriterLeavesOnlyThePartialFile) {
  TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  {
    auto w = TraceWriter::Create(path, FileKind::kRank);
    ASSERT_TRUE(w.ok());
    AON_ASSERT_OK((*w)->WriteRankMetadata(testing::BasicMetadata(0, 1)));
  }  // the rank "crashed"
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::exists(path + ".partial"));
  auto r = TraceReader::Open(path);
  EXPECT_FALSE(r.ok());
}

// A .partial file another process still writes (a running collector's) is
// refused by HDF5's file lock: the reader says so, and does not call it corrupt.
TEST(TracePartial, AFileAnotherProcessWritesIsNamedAsSuch) {
  const char* locking = std::getenv("HDF5_USE_FILE_LOCKING");
  if (locking != nullptr && std::string(locking) != "TRUE" && std::string(locking) != "1") {
    GTEST_SKIP() << "HDF5_USE_FILE_LOCKING=" << locking << ": no file locks to meet";
  }
  TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t writer = fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    close(ready[0]);
    close(done[1]);
    auto w = TraceWriter::Create(path, FileKind::kRank);
    const char ok = w.ok() && (*w)->WriteRankMetadata(testing::BasicMetadata(0, 1)).ok() ? 1 : 0;
    (void)!write(ready[1], &ok, 1);
    char c;
    (void)!read(done[0], &c, 1);  // holds the file open until the parent has read
    _exit(0);
  }
  close(ready[1]);
  close(done[0]);
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  auto r = TraceReader::Open(path + ".partial");
  close(done[1]);
  int st = 0;
  waitpid(writer, &st, 0);
  ASSERT_EQ(ok, 1) << "the writer could not write";
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("another process has it open for writing"),
            std::string::npos)
      << r.status().message();
  ExpectNamesFile(r.status(), path + ".partial");
}

TEST(TracePartial, RerunReplacesStalePartialAndFinalFiles) {
  TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  WriteValidFile(path, 100);
  { std::ofstream(path + ".partial") << "stale"; }
  WriteValidFile(path, 5);
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto k = (*r)->ReadAll<KernelRecord>();
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->size(), 5u);
}

TEST(TracePartial, SymlinkedPartialIsRefused) {
  TempDir dir;
  const std::string path = dir.File("rank-00000.h5");
  const std::string target = dir.File("victim");
  { std::ofstream(target) << "do not touch"; }
  std::filesystem::create_symlink(target, path + ".partial");
  auto w = TraceWriter::Create(path, FileKind::kRank);
  ASSERT_FALSE(w.ok());
  ExpectNamesFile(w.status(), path + ".partial");
  std::ifstream in(target);
  std::string content;
  std::getline(in, content);
  EXPECT_EQ(content, "do not touch");
}

TEST(TracePartial, UnwritableDirectoryNamesThePath) {
  TempDir dir;
  const std::string path = dir.File("no/such/dir/rank-00000.h5");
  auto w = TraceWriter::Create(path, FileKind::kRank);
  ASSERT_FALSE(w.ok());
  ExpectNamesFile(w.status(), path);
}

}  // namespace
}  // namespace aon
