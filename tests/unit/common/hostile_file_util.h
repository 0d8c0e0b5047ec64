// Crafted rank files for the reader's and the merge's hostile-input tests: a
// valid file written by the real TraceWriter, then altered with the HDF5 C API
// the way an attacker (or a badly broken writer) could. Each helper changes one
// thing, so a test's error can be pinned on it.
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace aon::testing {

// What the helpers that replace a dataset share: `path` open for writing and
// its dataset `name` open, with its type. Unlink() closes the dataset and
// removes its name (the helper then creates the replacement in `file` with
// `type`); Close() closes the rest and says whether the file closed cleanly.
// Whatever is still open when it goes (a failed assertion) is closed then.
class DatasetToReplace {
 public:
  DatasetToReplace(const std::string& path, const std::string& name) : name_(name) {
    file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    if (file >= 0) ds = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
    if (ds >= 0) type = H5Dget_type(ds);
  }
  ~DatasetToReplace() { Close(); }
  DatasetToReplace(const DatasetToReplace&) = delete;
  DatasetToReplace& operator=(const DatasetToReplace&) = delete;
  bool ok() const { return type >= 0; }
  bool Unlink() {
    if (ds >= 0) H5Dclose(ds);
    ds = -1;
    return file >= 0 && H5Ldelete(file, name_.c_str(), H5P_DEFAULT) >= 0;
  }
  bool Close() {
    if (ds >= 0) H5Dclose(ds);
    if (type >= 0) H5Tclose(type);
    const bool closed = file >= 0 && H5Fclose(file) >= 0;
    ds = type = file = -1;
    return closed;
  }

  hid_t file = -1, ds = -1, type = -1;

 private:
  std::string name_;
};

// Replaces dataset `name` by one of the same type and storage settings (layout,
// chunks, filters) that declares `rows` rows but holds only the original rows:
// the rest of the extent is backed by nothing in the file.
inline void RedeclareRows(const std::string& path, const std::string& name, hsize_t rows) {
  DatasetToReplace d(path, name);
  ASSERT_TRUE(d.ok()) << path << ": " << name;
  hid_t dcpl = H5Dget_create_plist(d.ds);
  hid_t space = H5Dget_space(d.ds);
  hsize_t old_rows = 0;
  H5Sget_simple_extent_dims(space, &old_rows, nullptr);
  std::vector<char> data(old_rows * H5Tget_size(d.type) + 1);
  if (old_rows > 0) {
    ASSERT_GE(H5Dread(d.ds, d.type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), 0);
  }
  H5Sclose(space);
  ASSERT_TRUE(d.Unlink()) << name;
  hsize_t dims[1] = {rows}, maxdims[1] = {H5S_UNLIMITED};
  const bool chunked = H5Pget_layout(dcpl) == H5D_CHUNKED;
  space = H5Screate_simple(1, dims, chunked ? maxdims : nullptr);
  hid_t ds = H5Dcreate2(d.file, name.c_str(), d.type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(ds, 0) << name;
  if (old_rows > 0) {
    hsize_t start[1] = {0}, count[1] = {old_rows};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    hid_t mem = H5Screate_simple(1, count, nullptr);
    ASSERT_GE(H5Dwrite(ds, d.type, mem, space, H5P_DEFAULT, data.data()), 0);
    H5Sclose(mem);
  }
  H5Sclose(space);
  H5Dclose(ds);
  H5Pclose(dcpl);
  ASSERT_TRUE(d.Close()) << path;
}

// Replaces dataset `name` by a contiguous one of the same type that declares
// `rows` rows and was never written: HDF5 allocates nothing for it.
inline void RedeclareContiguous(const std::string& path, const std::string& name, hsize_t rows) {
  DatasetToReplace d(path, name);
  ASSERT_TRUE(d.ok()) << path << ": " << name;
  ASSERT_TRUE(d.Unlink()) << name;
  hsize_t dims[1] = {rows};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t ds = H5Dcreate2(d.file, name.c_str(), d.type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(ds, 0) << name;
  H5Dclose(ds);
  H5Sclose(space);
  ASSERT_TRUE(d.Close()) << path;
}

// Replaces dataset `name` by one of the same type whose `rows` rows are raw
// bytes of the file `outside` (HDF5 external storage, H5Pset_external).
inline void MakeExternalStorage(const std::string& path, const std::string& name,
                                const std::string& outside, hsize_t rows) {
  DatasetToReplace d(path, name);
  ASSERT_TRUE(d.ok()) << path << ": " << name;
  ASSERT_TRUE(d.Unlink()) << name;
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  ASSERT_GE(H5Pset_external(dcpl, outside.c_str(), 0, rows * H5Tget_size(d.type)), 0);
  hsize_t dims[1] = {rows};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t ds = H5Dcreate2(d.file, name.c_str(), d.type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(ds, 0) << name;
  H5Dclose(ds);
  H5Sclose(space);
  H5Pclose(dcpl);
  ASSERT_TRUE(d.Close()) << path;
}

// Replaces the object at `name` (a dataset or a group) by an external link to
// `target_object` in the file `target_file`.
inline void MakeExternalLink(const std::string& path, const std::string& name,
                             const std::string& target_file, const std::string& target_object) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  ASSERT_GE(H5Ldelete(f, name.c_str(), H5P_DEFAULT), 0);
  ASSERT_GE(H5Lcreate_external(target_file.c_str(), target_object.c_str(), f, name.c_str(),
                               H5P_DEFAULT, H5P_DEFAULT),
            0);
  ASSERT_GE(H5Fclose(f), 0);
}

// A file's bytes, to edit what the HDF5 API cannot write.
inline std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
inline void WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// Replaces the chunk of dataset `name` that starts at row `first_row` by
// `bytes`, stored as they are with filter mask `filter_mask` (a bit set: that
// filter was not applied): H5Dwrite_chunk checks neither against the dataset.
inline void RewriteChunk(const std::string& path, const std::string& name, hsize_t first_row,
                         const std::vector<char>& bytes, uint32_t filter_mask = 0) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  ASSERT_GE(ds, 0) << name;
  hsize_t offset[1] = {first_row};
  EXPECT_GE(H5Dwrite_chunk(ds, H5P_DEFAULT, filter_mask, offset, bytes.size(), bytes.data()), 0);
  H5Dclose(ds);
  ASSERT_GE(H5Fclose(f), 0);
}

// Replaces the one occurrence of `from` in the file's bytes by `to` (same
// length): for what the HDF5 API cannot write, such as a chunk index entry
// that states another size. Fails unless `from` occurs exactly once.
inline void PatchBytes(const std::string& path, const std::string& from, const std::string& to) {
  ASSERT_EQ(from.size(), to.size());
  std::string bytes = FileBytes(path);
  const size_t at = bytes.find(from);
  ASSERT_NE(at, std::string::npos) << "pattern not found";
  ASSERT_EQ(bytes.find(from, at + 1), std::string::npos) << "pattern found twice";
  bytes.replace(at, to.size(), to);
  WriteFileBytes(path, bytes);
}

// Moves member `member` of a compound row type to byte `offset`, past what
// the HDF5 API lets a writer do, by editing the type's bytes in the file: the
// first "<member>\0" after the first "<after>\0" (names of a table only it
// has), in a version-1 compound datatype message (what TraceWriter writes),
// followed by its 4-byte offset, expected to be `old_offset`.
inline void MoveCompoundMember(const std::string& path, const std::string& after,
                               const std::string& member, uint32_t old_offset, uint32_t offset) {
  std::string bytes = FileBytes(path);
  const size_t anchor = bytes.find(after + std::string(1, '\0'));
  ASSERT_NE(anchor, std::string::npos) << after;
  const size_t name = bytes.find(member + std::string(1, '\0'), anchor);
  ASSERT_NE(name, std::string::npos) << member;
  const size_t at = name + (member.size() + 1 + 7) / 8 * 8;  // the name, padded to 8 bytes
  ASSERT_LE(at + 4, bytes.size());
  uint32_t stored = 0;
  std::memcpy(&stored, bytes.data() + at, 4);
  ASSERT_EQ(stored, old_offset) << "not the layout this helper knows";
  std::memcpy(bytes.data() + at, &offset, 4);
  WriteFileBytes(path, bytes);
}

// Overwrites the int64 root attribute `name` of an existing file.
inline void SetRootIntAttribute(const std::string& path, const char* name, int64_t value) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t a = H5Aopen(f, name, H5P_DEFAULT);
  ASSERT_GE(a, 0);
  EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &value), 0);
  H5Aclose(a);
  H5Fclose(f);
}

}  // namespace aon::testing
