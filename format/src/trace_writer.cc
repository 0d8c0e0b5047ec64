// TraceWriter (aon/format/trace_file.h): HDF5 trace files written through the
// serial HDF5 C API, whole record chunks packed and compressed by AON.
#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <variant>

#include "aon/base/secure_fs.h"
#include "aon/format/trace_file.h"
#include "chunk_codec.h"
#include "direct_chunk_io.h"
#include "hdf5_support.h"

namespace aon {

// aon::format's internal helpers (hdf5_support.h, direct_chunk_io.h), named unqualified.
using namespace hdf5;

TraceWriter::TraceWriter(std::string path, std::string open_path, FileKind kind,
                         WriteOptions options, int64_t file)
    : path_(std::move(path)),
      open_path_(std::move(open_path)),
      kind_(kind),
      options_(options),
      file_(file),
      merged_records_(kind == FileKind::kTimeline) {}

TraceWriter::~TraceWriter() {
  if (file_ >= 0) H5Fclose(static_cast<hid_t>(file_));
  GiveBackRoom();
}

void StartHdf5WithoutExitHandler() {
  (void)H5dont_atexit();  // refused (harmlessly) once HDF5 is in use
  (void)H5open();
}

std::string FreeRankFileName(const HeldDirectory& dir, int rank, int64_t pid) {
  char name[96];
  auto taken = [&] {
    const std::string at = dir.At(name);
    struct stat st {};
    return lstat(at.c_str(), &st) == 0 || lstat((at + ".partial").c_str(), &st) == 0;
  };
  std::snprintf(name, sizeof(name), "rank-%05d.h5", rank);
  if (!taken()) return name;
  // The same process may need two (the collector's part of it, then its own
  // after the collector died): .pid<P>.h5, then .pid<P>.<n>.h5.
  std::snprintf(name, sizeof(name), "rank-%05d.pid%lld.h5", rank, static_cast<long long>(pid));
  for (int n = 2; taken() && n < 1000; ++n)
    std::snprintf(name, sizeof(name), "rank-%05d.pid%lld.%d.h5", rank, static_cast<long long>(pid),
                  n);
  return name;
}

StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Create(const std::string& path, FileKind kind,
                                                           const WriteOptions& options) {
  return CreateAt(path, path, kind, options);
}

StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Create(const HeldDirectory& dir,
                                                           std::string_view name, FileKind kind,
                                                           const WriteOptions& options) {
  std::string shown = dir.path();
  shown += '/';
  shown += name;
  auto made = CreateAt(shown, dir.At(name), kind, options);
  if (!made.ok()) return Status(made.status().code(), dir.Shown(made.status().message()));
  return made;
}

StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::CreateAt(const std::string& path,
                                                             const std::string& open_path,
                                                             FileKind kind,
                                                             const WriteOptions& options) {
  SilenceHdf5();
  const std::string partial = open_path + ".partial";
  // Create the file ourselves (aon/base/secure_fs.h): owner-only mode, never through
  // a link. HDF5 then opens it again by name: it must be the same file.
  auto created = CreatePrivateFile(partial, /*replace_stale=*/true);
  if (!created.ok()) return created.status();
  struct stat mine {};
  const int fstat_rc = fstat(*created, &mine);
  const int fstat_errno = errno;
  close(*created);
  if (fstat_rc != 0) {
    unlink(partial.c_str());
    return ErrnoStatus("cannot create " + FormatContext(partial), fstat_errno);
  }
  hid_t file = H5Fcreate(partial.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) {
    unlink(partial.c_str());
    return IoError("cannot create " + FormatContext(partial) + ": " + Hdf5Error());
  }
  void* handle = nullptr;
  struct stat opened {};
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || handle == nullptr ||
      fstat(*static_cast<int*>(handle), &opened) != 0 || opened.st_dev != mine.st_dev ||
      opened.st_ino != mine.st_ino) {
    H5Fclose(file);
    return Status(
        StatusCode::kPermissionDenied,
        FormatContext(partial) + " was replaced between its creation and its opening: not written");
  }
  std::unique_ptr<TraceWriter> w(new TraceWriter(path, open_path, kind, options, file));
  w->reserve_fd_ = fcntl(*static_cast<int*>(handle), F_DUPFD_CLOEXEC, 0);
  w->reserve_unsupported_ = w->reserve_fd_ < 0;
  int64_t major = kFormatMajor, minor = kFormatMinor;
  AON_RETURN_IF_ERROR(
      WriteScalarAttribute(file, "aon_format_major", H5T_NATIVE_INT64, H5T_STD_I64LE, &major));
  AON_RETURN_IF_ERROR(
      WriteScalarAttribute(file, "aon_format_minor", H5T_NATIVE_INT64, H5T_STD_I64LE, &minor));
  AON_RETURN_IF_ERROR(WriteStringAttribute(file, "aon_file_kind", FileKindName(kind)));
  return w;
}

Status TraceWriter::EnsureGroup(std::string_view group, int64_t* id) {
  std::string name = "/" + std::string(group);
  hid_t f = static_cast<hid_t>(file_);
  hid_t g = H5Lexists(f, name.c_str(), H5P_DEFAULT) > 0
                ? H5Gopen2(f, name.c_str(), H5P_DEFAULT)
                : H5Gcreate2(f, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0)
    return IoError("creating group " + name + " in " + FormatContext(path_) + ": " + Hdf5Error());
  *id = g;
  return Status::Ok();
}

Status TraceWriter::SetMetaAttribute(std::string_view name, std::string_view value) {
  int64_t g = -1;
  AON_RETURN_IF_ERROR(EnsureGroup("meta", &g));
  Hid group = Group(static_cast<hid_t>(g));
  return WriteStringAttribute(group.get(), name, value).WithContext(FormatContext(path_));
}
Status TraceWriter::SetMetaScalar(std::string_view name, int64_t mem_type, int64_t file_type,
                                  const void* value) {
  int64_t g = -1;
  AON_RETURN_IF_ERROR(EnsureGroup("meta", &g));
  Hid group = Group(static_cast<hid_t>(g));
  return WriteScalarAttribute(group.get(), name, static_cast<hid_t>(mem_type),
                              static_cast<hid_t>(file_type), value)
      .WithContext(FormatContext(path_));
}
Status TraceWriter::SetMetaAttribute(std::string_view name, int64_t value) {
  return SetMetaScalar(name, H5T_NATIVE_INT64, H5T_STD_I64LE, &value);
}
Status TraceWriter::SetMetaAttribute(std::string_view name, uint64_t value) {
  return SetMetaScalar(name, H5T_NATIVE_UINT64, H5T_STD_U64LE, &value);
}
Status TraceWriter::SetMetaAttribute(std::string_view name, double value) {
  return SetMetaScalar(name, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, &value);
}

Status TraceWriter::WriteRankMetadata(const RankMetadata& m) {
  for (const MetaField& f : RankMetadataFields()) {
    AON_RETURN_IF_ERROR(std::visit(
        [&](auto member) -> Status {
          const auto& v = m.*member;
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::string> || std::is_same_v<V, uint64_t> ||
                        std::is_same_v<V, double>) {
            return SetMetaAttribute(f.name, v);
          } else {
            return SetMetaAttribute(f.name, static_cast<int64_t>(v));
          }
        },
        f.member));
  }
  for (size_t i = 0; i < kRecordKindCount; ++i) {
    const std::string kind = RecordKindName(static_cast<RecordKind>(i));
    AON_RETURN_IF_ERROR(SetMetaAttribute("dropped_" + kind, m.dropped[i]));
    AON_RETURN_IF_ERROR(SetMetaAttribute("unwritten_" + kind, m.unwritten[i]));
  }
  std::string notes;
  for (const std::string& n : m.notes) {
    if (!notes.empty()) notes += '\n';
    notes += n;
  }
  AON_RETURN_IF_ERROR(SetMetaAttribute("notes", notes));
  {
    // Written again (the collector rewrites metadata at every flush): the
    // devices table is replaced, not appended to.
    const std::string name = "/meta/" + DeviceInfoSchema().name;
    hid_t f = static_cast<hid_t>(file_);
    if (H5Lexists(f, name.c_str(), H5P_DEFAULT) > 0) {
      Hid ds = Dataset(H5Dopen2(f, name.c_str(), H5P_DEFAULT));
      hsize_t zero[1] = {0};
      if (!ds.valid() || H5Dset_extent(ds.get(), zero) < 0) {
        return IoError(FormatContext(path_) + ", dataset " + name + ": " + Hdf5Error());
      }
    }
  }
  return AppendTable(DeviceInfoSchema(), m.devices.data(), m.devices.size(), "meta");
}

Status TraceWriter::AppendTable(const TableSchema& schema, const void* records, uint64_t count,
                                std::string_view group) {
  int64_t g = -1;
  AON_RETURN_IF_ERROR(EnsureGroup(group, &g));
  Hid grp = Group(static_cast<hid_t>(g));
  const std::string ctx = FormatContext(path_) + ", dataset /" + Join(group, schema.name);
  Hid ds;
  if (H5Lexists(grp.get(), schema.name.c_str(), H5P_DEFAULT) > 0) {
    ds = Dataset(H5Dopen2(grp.get(), schema.name.c_str(), H5P_DEFAULT));
  } else {
    hsize_t dims[1] = {0}, maxdims[1] = {H5S_UNLIMITED};
    Hid space = Space(H5Screate_simple(1, dims, maxdims));
    Hid dcpl = Plist(H5Pcreate(H5P_DATASET_CREATE));
    hsize_t chunk[1] = {std::max<hsize_t>(1, options_.chunk_records)};
    H5Pset_chunk(dcpl.get(), 1, chunk);
    if (options_.deflate_level > 0) {
      H5Pset_shuffle(dcpl.get());
      H5Pset_deflate(dcpl.get(), static_cast<unsigned>(options_.deflate_level));
    }
    if (options_.checksum) H5Pset_fletcher32(dcpl.get());
    Hid disk = DiskType(schema);
    ds = Dataset(H5Dcreate2(grp.get(), schema.name.c_str(), disk.get(), space.get(), H5P_DEFAULT,
                            dcpl.get(), H5P_DEFAULT));
  }
  if (!ds.valid()) return IoError(ctx + ": " + Hdf5Error());
  if (count == 0) return Status::Ok();

  Hid space = Space(H5Dget_space(ds.get()));
  hsize_t old_size = 0;
  H5Sget_simple_extent_dims(space.get(), &old_size, nullptr);
  hsize_t new_size[1] = {old_size + count};
  if (H5Dset_extent(ds.get(), new_size) < 0) return IoError(ctx + ": " + Hdf5Error());
  // Rows up to the next chunk boundary go through HDF5, which merges them into
  // the partly filled chunk; whole chunks from there on are written directly.
  const uint64_t chunk_rows = std::max<uint64_t>(1, options_.chunk_records);
  partial_chunk_bytes_[ctx] =
      (old_size + count) % chunk_rows != 0 ? chunk_rows * schema.record_size : 0;
  const uint64_t head =
      std::endian::native != std::endian::little
          ? count
          : std::min<uint64_t>(count, (chunk_rows - old_size % chunk_rows) % chunk_rows);
  if (head > 0) {
    Hid file_space = Space(H5Dget_space(ds.get()));
    hsize_t start[1] = {old_size}, n[1] = {head};
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, n, nullptr);
    Hid mem_space = Space(H5Screate_simple(1, n, nullptr));
    Hid mem = MemoryType(schema);
    Hid dxpl = TransferProperties(head * schema.record_size);
    if (H5Dwrite(ds.get(), mem.get(), mem_space.get(), file_space.get(), dxpl.get(), records) < 0) {
      return IoError(ctx + ": " + Hdf5Error());
    }
  }
  if (head == count) return Status::Ok();
  return WriteChunks(static_cast<int64_t>(ds.get()), schema,
                     static_cast<const uint8_t*>(records) + head * schema.record_size,
                     old_size + head, count - head, ctx);
}

// What a writer keeps between appends of whole chunks: per compressing thread,
// a deflater and the buffers of the chunks it has in hand.
struct TraceWriter::ChunkScratch {
  struct Worker {
    explicit Worker(int level) : deflater(level) {}
    chunk_codec::ChunkBuffer packed;
    chunk_codec::ChunkBuffer trial;  // a trial chunk's other stream
    chunk_codec::Deflater deflater;
  };
  // At level 1, per table: the run-length encoder, or the library's match
  // finder where that was found clearly smaller (counter tables, whose rows
  // cycle through a few counters: runs miss those repeats). The first chunk of
  // a table and every kTrialEvery-th after it go through both, and the smaller
  // stream is written.
  static constexpr uint64_t kTrialEvery = 64;
  struct Trial {
    bool decided = false;  // a trial has been made
    bool matching = false;
    uint64_t until_trial = 0;  // chunks before the next trial
  };
  std::unordered_map<std::string, Trial> trials;  // by table (its context string)
  ChunkScratch(int level, unsigned threads) {
    for (unsigned i = 0; i < std::max(1u, threads); ++i) workers.emplace_back(level);
    if (threads > 1) helpers = std::make_unique<HelperThreads>(threads - 1);
  }
  std::deque<Worker> workers;
  std::unique_ptr<HelperThreads> helpers;  // kept for every append (threads > 1)
  // Output of one round: chunk i of the round in compressed[i].
  std::vector<chunk_codec::ChunkBuffer> compressed;
};

void TraceWriter::ChunkScratchDeleter::operator()(ChunkScratch* s) const { delete s; }

// Whole chunks go in rounds of (threads x kChunksPerThread) chunks: the threads
// pack and compress the round's chunks, each taking the next one left, then
// this thread hands the round's chunks to HDF5 in order. Memory: a round's
// compressed chunks (at most its packed size) and one packed chunk per thread.
Status TraceWriter::WriteChunks(int64_t dataset, const TableSchema& schema, const uint8_t* rows,
                                uint64_t first, uint64_t count, const std::string& ctx) {
  constexpr uint64_t kChunksPerThread = 2;
  const hid_t ds = static_cast<hid_t>(dataset);
  const unsigned threads = std::max(1u, options_.compress_threads);
  if (scratch_ == nullptr) scratch_.reset(new ChunkScratch(options_.deflate_level, threads));
  ChunkScratch& s = *scratch_;
  const chunk_codec::RowLayout layout = chunk_codec::LayoutOf(schema);
  const uint64_t chunk_rows = std::max<uint64_t>(1, options_.chunk_records);
  const bool deflate = options_.deflate_level > 0;  // then shuffle + deflate (AppendTable)
  const uint64_t chunks = (count + chunk_rows - 1) / chunk_rows;
  const uint64_t per_round = deflate ? threads * kChunksPerThread : 1;
  s.compressed.resize(per_round);
  // How each chunk of a round is compressed: by the level's deflater, the
  // match finder, or both (a trial: the smaller one is kept).
  enum class How : uint8_t { kLevel, kMatching, kTrial };
  std::vector<How> how(per_round, How::kLevel);
  std::vector<char> matching_won(per_round, 0);
  ChunkScratch::Trial* trial =
      options_.deflate_level == 1 ? &s.trials[ctx] : nullptr;  // the run-length level only
  for (uint64_t round = 0, in_round = 0; round < chunks; round += in_round) {
    // A table's first trial goes alone, so that the chunks after it follow it.
    in_round = std::min(trial != nullptr && !trial->decided ? 1 : per_round, chunks - round);
    for (uint64_t c = 0; c < in_round && trial != nullptr; ++c) {
      how[c] = trial->until_trial == 0 ? How::kTrial
               : trial->matching       ? How::kMatching
                                       : How::kLevel;
      trial->until_trial =
          trial->until_trial == 0 ? ChunkScratch::kTrialEvery - 1 : trial->until_trial - 1;
    }
    // Chunk `c` of the round by worker `w`: packed (and compressed) into
    // compressed[c]; false when a compressor could not be made.
    auto make = [&](unsigned w, uint64_t c) {
      ChunkScratch::Worker& worker = s.workers[w];
      const uint64_t done = (round + c) * chunk_rows;
      const uint64_t n = std::min(chunk_rows, count - done);
      chunk_codec::ChunkBuffer& packed = deflate ? worker.packed : s.compressed[c];
      packed.resize(chunk_rows * layout.packed_bytes);
      chunk_codec::PackChunk(layout, rows + done * schema.record_size, n, chunk_rows, deflate,
                             packed.data());
      if (!deflate) return true;
      chunk_codec::Deflater& d = worker.deflater;
      switch (how[c]) {
        case How::kLevel:
          return d.Compress(packed.data(), packed.size(), &s.compressed[c]);
        case How::kMatching:
          return d.CompressMatching(packed.data(), packed.size(), &s.compressed[c]);
        case How::kTrial:
          if (!d.Compress(packed.data(), packed.size(), &s.compressed[c]) ||
              !d.CompressMatching(packed.data(), packed.size(), &worker.trial)) {
            return false;
          }
          // The match finder only when clearly smaller (it costs ~3x the time).
          matching_won[c] = worker.trial.size() < s.compressed[c].size() * 15 / 16;
          if (matching_won[c]) std::swap(s.compressed[c], worker.trial);
          return true;
      }
      return false;
    };
    const unsigned used = static_cast<unsigned>(std::min<uint64_t>(threads, in_round));
    std::vector<char> ok(used, 1);
    // Each thread takes the next chunk when done with its last: a thread that
    // starts late (two CPUs, three busy threads) leaves its chunks to the others.
    std::atomic<uint64_t> next{0};
    auto share = [&](unsigned w) {
      for (uint64_t c = next.fetch_add(1, std::memory_order_relaxed); c < in_round;
           c = next.fetch_add(1, std::memory_order_relaxed)) {
        ok[w] = ok[w] && make(w, c);
        if (ok[w] && options_.checksum) chunk_codec::AppendChecksum(&s.compressed[c]);
      }
    };
    if (!RunShares(used, share, s.helpers.get()) ||
        std::find(ok.begin(), ok.end(), 0) != ok.end()) {
      return IoError(ctx + ": cannot compress a chunk (out of memory)");
    }
    for (uint64_t c = 0; c < in_round && trial != nullptr; ++c) {
      if (how[c] != How::kTrial) continue;
      trial->matching = matching_won[c] != 0;
      trial->decided = true;
    }
    for (uint64_t c = 0; c < in_round; ++c) {
      hsize_t offset[1] = {first + (round + c) * chunk_rows};
      const chunk_codec::ChunkBuffer& chunk = s.compressed[c];
      if (H5Dwrite_chunk(ds, H5P_DEFAULT, 0, offset, chunk.size(), chunk.data()) < 0) {
        return IoError(ctx + ": " + Hdf5Error());
      }
    }
  }
  return Status::Ok();
}

Status TraceWriter::CreateVirtualTable(const TableSchema& schema, uint64_t rows,
                                       std::span<const VirtualPiece> pieces,
                                       std::string_view group) {
  int64_t g = -1;
  AON_RETURN_IF_ERROR(EnsureGroup(group, &g));
  Hid grp = Group(static_cast<hid_t>(g));
  const std::string ctx = FormatContext(path_) + ", virtual dataset /" + Join(group, schema.name);
  if (H5Lexists(grp.get(), schema.name.c_str(), H5P_DEFAULT) > 0) {
    return InvalidArgument(ctx + " already exists");
  }
  hsize_t dims[1] = {rows};
  Hid space = Space(H5Screate_simple(1, dims, nullptr));
  Hid dcpl = Plist(H5Pcreate(H5P_DATASET_CREATE));
  for (const VirtualPiece& p : pieces) {
    if (p.count == 0) continue;
    if (p.first + p.count > rows) return InvalidArgument(ctx + ": a piece ends past its rows");
    hsize_t start[1] = {p.first}, count[1] = {p.count};
    Hid vspace = Space(H5Screate_simple(1, dims, nullptr));
    H5Sselect_hyperslab(vspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
    // The source dataset's extent is not known here; select the piece's rows of
    // an unlimited 1-D space, which HDF5 resolves against the real dataset.
    hsize_t src_dims[1] = {p.source_first + p.count}, src_max[1] = {H5S_UNLIMITED};
    Hid sspace = Space(H5Screate_simple(1, src_dims, src_max));
    hsize_t src_start[1] = {p.source_first};
    H5Sselect_hyperslab(sspace.get(), H5S_SELECT_SET, src_start, nullptr, count, nullptr);
    if (H5Pset_virtual(dcpl.get(), vspace.get(), p.file.c_str(), p.dataset.c_str(), sspace.get()) <
        0) {
      return IoError(ctx + ": mapping " + p.file + ":" + p.dataset + ": " + Hdf5Error());
    }
  }
  Hid disk = DiskType(schema);
  Hid ds = Dataset(H5Dcreate2(grp.get(), schema.name.c_str(), disk.get(), space.get(), H5P_DEFAULT,
                              dcpl.get(), H5P_DEFAULT));
  if (!ds.valid()) return IoError(ctx + ": " + Hdf5Error());
  return Status::Ok();
}

Status TraceWriter::WriteStrings(const StringTable& strings) {
  return AppendStrings(strings.strings());
}

// Appends to a 1-D extendable array dataset, creating it on first use.
static Status AppendArray(hid_t group, const char* name, hid_t mem_type, hid_t file_type,
                          const void* data, uint64_t n, uint64_t chunk, int deflate,
                          bool checksum) {
  Hid ds;
  if (H5Lexists(group, name, H5P_DEFAULT) > 0) {
    ds = Dataset(H5Dopen2(group, name, H5P_DEFAULT));
  } else {
    hsize_t dims[1] = {0}, maxdims[1] = {H5S_UNLIMITED};
    Hid space = Space(H5Screate_simple(1, dims, maxdims));
    Hid dcpl = Plist(H5Pcreate(H5P_DATASET_CREATE));
    hsize_t chunk_dims[1] = {chunk};
    H5Pset_chunk(dcpl.get(), 1, chunk_dims);
    if (deflate > 0) {
      H5Pset_shuffle(dcpl.get());
      H5Pset_deflate(dcpl.get(), static_cast<unsigned>(deflate));
    }
    if (checksum) H5Pset_fletcher32(dcpl.get());
    ds = Dataset(
        H5Dcreate2(group, name, file_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
  }
  if (!ds.valid()) return IoError(std::string("dataset '") + name + "': " + Hdf5Error());
  if (n == 0) return Status::Ok();
  Hid space = Space(H5Dget_space(ds.get()));
  hsize_t old_size = 0;
  H5Sget_simple_extent_dims(space.get(), &old_size, nullptr);
  hsize_t new_size[1] = {old_size + n};
  if (H5Dset_extent(ds.get(), new_size) < 0) {
    return IoError(std::string("extending '") + name + "': " + Hdf5Error());
  }
  Hid file_space = Space(H5Dget_space(ds.get()));
  hsize_t start[1] = {old_size}, count[1] = {n};
  H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
  Hid mem_space = Space(H5Screate_simple(1, count, nullptr));
  if (H5Dwrite(ds.get(), mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, data) < 0) {
    return IoError(std::string("appending to '") + name + "': " + Hdf5Error());
  }
  return Status::Ok();
}

Status TraceWriter::AppendStrings(std::span<const std::string> strings) {
  std::vector<uint8_t> data;
  std::vector<uint64_t> offsets;
  offsets.reserve(strings.size());
  for (const std::string& s : strings) {
    offsets.push_back(strings_bytes_ + data.size());
    data.insert(data.end(), s.begin(), s.end());
    data.push_back(0);
  }
  int64_t g = -1;
  AON_RETURN_IF_ERROR(EnsureGroup("strings", &g));
  Hid grp = Group(static_cast<hid_t>(g));
  const std::string ctx = FormatContext(path_);
  AON_RETURN_IF_ERROR(AppendArray(grp.get(), "data", H5T_NATIVE_UINT8, H5T_STD_U8LE, data.data(),
                                  data.size(), 1 << 16, options_.deflate_level, options_.checksum)
                          .WithContext(ctx));
  AON_RETURN_IF_ERROR(AppendArray(grp.get(), "offsets", H5T_NATIVE_UINT64, H5T_STD_U64LE,
                                  offsets.data(), offsets.size(), 4096, options_.deflate_level,
                                  options_.checksum)
                          .WithContext(ctx));
  strings_bytes_ += data.size();
  return Status::Ok();
}

Status TraceWriter::Flush() {
  if (file_ < 0) return InvalidArgument(FormatContext(path_) + " is already finished");
  if (H5Fflush(static_cast<hid_t>(file_), H5F_SCOPE_GLOBAL) < 0) {
    return IoError("flushing " + FormatContext(path_ + ".partial") + ": " + Hdf5Error());
  }
  return Status::Ok();
}

Status TraceWriter::Reserve(uint64_t bytes) {
  if (file_ < 0) return InvalidArgument(FormatContext(path_) + " is already finished");
  if (reserve_unsupported_) return Status::Ok();
  // HDF5's metadata (chunk indexes, heaps, attributes) beside the data, and
  // what deflate can add to a chunk that does not compress.
  constexpr uint64_t kMetadataRoom = 64 << 10;
  struct stat st {};
  haddr_t eoa = 0;
  if (fstat(reserve_fd_, &st) != 0 || H5Fget_eoa(static_cast<hid_t>(file_), &eoa) < 0) {
    return IoError("cannot size " + FormatContext(path_ + ".partial"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  // Each table's partly filled chunk may be stored once more (a deflated chunk
  // that did not compress is a little larger than its rows).
  uint64_t rewrites = 0;
  for (const auto& [table, chunk_bytes] : partial_chunk_bytes_)
    rewrites += chunk_bytes + chunk_bytes / 32 + 64;
  const uint64_t end =
      std::max<uint64_t>(size, eoa) + bytes + bytes / 32 + rewrites + kMetadataRoom;
  // [size, reserved_end_) is allocated already (by earlier calls).
  const uint64_t from = std::max(size, reserved_end_);
  if (end <= from) return Status::Ok();
  if (fallocate(reserve_fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(from),
                static_cast<off_t>(end - from)) != 0) {
    const int e = errno;
    if (e == EOPNOTSUPP || e == ENOSYS) {
      reserve_unsupported_ = true;
      return Status::Ok();
    }
    const char* name = e == ENOSPC ? "ENOSPC" : e == EDQUOT ? "EDQUOT" : e == EIO ? "EIO" : "";
    return Status(StatusCode::kIoError,
                  "no room for " + std::to_string(end - from) + " more bytes of " +
                      FormatContext(path_ + ".partial") + ": " + std::strerror(e) +
                      (*name != 0 ? std::string(" (") + name + ")" : std::string()));
  }
  reserved_end_ = end;
  return Status::Ok();
}

// The room reserved past the file's end, unused, goes back to the file system.
void TraceWriter::GiveBackRoom() {
  if (reserve_fd_ < 0) return;
  struct stat st {};
  if (fstat(reserve_fd_, &st) == 0 && reserved_end_ > static_cast<uint64_t>(st.st_size)) {
    (void)fallocate(reserve_fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, st.st_size,
                    static_cast<off_t>(reserved_end_ - st.st_size));
  }
  close(reserve_fd_);
  reserve_fd_ = -1;
}

Status TraceWriter::Finish() {
  if (finished_) return Status::Ok();
  Status st;
  ForEachRankFileRecordType([&](auto tag) {
    using T = decltype(tag);
    if (!st.ok()) return;
    if (merged_records_ && RecordTraits<T>::kScope != KindScope::kTimeline) return;
    const TableSchema& schema = merged_records_ ? MergedSchemaOf<T>() : RecordTraits<T>::Schema();
    st = AppendTable(schema, nullptr, 0);
  });
  AON_RETURN_IF_ERROR(st);
  hid_t f = static_cast<hid_t>(file_);
  file_ = -1;
  if (H5Fclose(f) < 0)
    return IoError("closing " + FormatContext(path_ + ".partial") + ": " + Hdf5Error());
  GiveBackRoom();
  if (std::rename((open_path_ + ".partial").c_str(), open_path_.c_str()) != 0) {
    return ErrnoStatus("renaming " + path_ + ".partial to its final name", errno);
  }
  finished_ = true;
  return Status::Ok();
}

}  // namespace aon
