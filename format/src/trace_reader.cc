// TraceReader (aon/format/trace_file.h): HDF5 trace files read through the
// serial HDF5 C API, every file checked as one that may be hostile
// (hostile_file_checks.h), chunks AON wrote read and decoded by AON.
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <optional>
#include <sstream>
#include <variant>

#include "aon/format/trace_file.h"
#include "chunk_codec.h"
#include "direct_chunk_io.h"
#include "hdf5_support.h"
#include "hostile_file_checks.h"

namespace aon {

// aon::format's internal helpers (hdf5_support.h, hostile_file_checks.h,
// direct_chunk_io.h), named unqualified.
using namespace hdf5;

namespace {

// Tables under /meta (devices, rank summaries) have a row per device or rank.
constexpr uint64_t kMaxMetaRows = uint64_t{1} << 24;
// String ids are 32-bit; the table's bytes are read whole into memory.
constexpr uint64_t kMaxStrings = uint64_t{1} << 32;
constexpr uint64_t kMaxStringBytes = uint64_t{4} << 30;

// A whole 1-D integer array (the string table), checked like any table first.
template <typename V>
StatusOr<std::vector<V>> ReadArray(hid_t file, const std::string& name, hid_t mem_type,
                                   uint64_t file_bytes, uint64_t max_rows) {
  AON_ASSIGN_OR_RETURN(CheckedDataset c, OpenChecked(file, name, file_bytes, false, true));
  Hid type = Type(H5Dget_type(c.ds.get()));
  if (H5Tget_class(type.get()) != H5T_INTEGER)
    return DataLoss("dataset " + name + " is not integers");
  if (c.rows > max_rows) {
    return DataLoss("dataset " + name + " declares " + std::to_string(c.rows) +
                    " entries, more than the " + std::to_string(max_rows) + " AON reads: refused");
  }
  AON_RETURN_IF_ERROR(CheckChunksToRead(c.ds.get(), 0, c.rows, H5Tget_size(type.get()), file_bytes,
                                        "dataset " + name));
  std::vector<V> out(c.rows);
  if (c.rows > 0 && H5Dread(c.ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) < 0)
    return DataLoss("reading dataset " + name + ": " + Hdf5Error());
  return out;
}

}  // namespace

TraceReader::~TraceReader() {
  if (file_ >= 0) H5Fclose(static_cast<hid_t>(file_));
}

namespace {

// A rank file is written by the job's user (its agent or collector). One owned
// by anybody else was put there by someone else: it is not this job's, and is
// not read as if it were. "The job's user" is the reader (aon-merge runs as the
// job's user), or, for root, the owner of the directory the file is in.
Status CheckRankFileOwner(const std::string& path, const struct stat& st) {
  uid_t expected = geteuid();
  std::string who = "you";
  if (expected == 0) {
    const size_t slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? std::string(".")
                            : slash == 0               ? "/"
                                                       : path.substr(0, slash);
    struct stat dst {};
    if (stat(dir.c_str(), &dst) != 0) return ErrnoStatus("cannot check the owner of " + dir, errno);
    expected = dst.st_uid;
    who = "the owner of " + dir;
  }
  if (st.st_uid == expected) return Status::Ok();
  return Status(StatusCode::kPermissionDenied,
                FormatContext(path) + " belongs to uid " + std::to_string(st.st_uid) + ", not to " +
                    who + " (uid " + std::to_string(expected) +
                    "): another user's file is not taken as a rank of this job");
}

}  // namespace

StatusOr<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path) {
  SilenceHdf5();
  const std::string ctx = FormatContext(path);
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return ErrnoStatus("cannot open " + ctx, errno);
  if (!S_ISREG(st.st_mode)) return InvalidArgument(ctx + " is not a regular file");
  htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return DataLoss(ctx + " is not an HDF5 file (corrupt, truncated or another format)");
  }
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) {
    const std::string why = Hdf5Error();
    // A file a live writer holds (a running collector's .partial): not damage.
    // (EAGAIN only: a file system without locks fails with another errno.)
    if (why.find("unable to lock file, errno = " + std::to_string(EAGAIN)) != std::string::npos) {
      return Unavailable("cannot open " + ctx +
                         ": another process has it open for writing (HDF5's file lock; with "
                         "HDF5_USE_FILE_LOCKING=FALSE it is read as last flushed): " +
                         why);
    }
    return DataLoss("cannot open " + ctx + " (corrupt or truncated): " + why);
  }
  std::unique_ptr<TraceReader> r(new TraceReader(path, file));
  r->file_bytes_ = static_cast<uint64_t>(st.st_size);

  auto major = ReadNumberAttribute<int64_t>(file, "aon_format_major", H5T_NATIVE_INT64);
  if (!major.ok()) return DataLoss(ctx + " is not an AON trace: " + major.status().message());
  auto minor = ReadNumberAttribute<int64_t>(file, "aon_format_minor", H5T_NATIVE_INT64);
  if (!minor.ok()) return DataLoss(ctx + ": " + minor.status().message());
  // Compared as read: a narrowing cast first would take major 2^32+1 for 1.
  if (*major != kFormatMajor) {
    std::ostringstream msg;
    msg << ctx << " has trace format " << *major << "." << *minor << "; this AON reads format "
        << kFormatMajor << ".x";
    if (*major > kFormatMajor) msg << " (the file is newer: upgrade AON to read it)";
    return Unimplemented(msg.str());
  }
  if (*minor < 0 || *minor > INT_MAX) {
    return DataLoss(ctx + " has trace format minor version " + std::to_string(*minor) +
                    ", out of range");
  }
  r->major_ = kFormatMajor;
  r->minor_ = static_cast<int>(*minor);
  auto kind = ReadStringAttribute(file, "aon_file_kind", r->file_bytes_);
  if (!kind.ok()) return DataLoss(ctx + ": " + kind.status().message());
  if (*kind == FileKindName(FileKind::kRank)) {
    r->kind_ = FileKind::kRank;
    AON_RETURN_IF_ERROR(CheckRankFileOwner(path, st));
  } else if (*kind == FileKindName(FileKind::kTimeline)) {
    r->kind_ = FileKind::kTimeline;
  } else {
    return DataLoss(ctx + " has unknown aon_file_kind '" + *kind + "'");
  }
  return r;
}

namespace {

// /meta, opened only through a hard link (CheckHardLinks).
StatusOr<Hid> OpenMetaGroup(hid_t f, const std::string& path) {
  Status links = CheckHardLinks(f, "/meta");
  if (!links.ok())
    return DataLoss(FormatContext(path) + " has no usable /meta group: " + links.message());
  Hid g = Group(H5Gopen2(f, "/meta", H5P_DEFAULT));
  if (!g.valid()) return DataLoss(FormatContext(path) + ", /meta: " + Hdf5Error());
  return g;
}

}  // namespace

StatusOr<std::string> TraceReader::GetMetaString(std::string_view name) const {
  AON_ASSIGN_OR_RETURN(Hid g, OpenMetaGroup(static_cast<hid_t>(file_), path_));
  auto v = ReadStringAttribute(g.get(), name, file_bytes_);
  if (!v.ok()) return v.status().WithContext(FormatContext(path_) + " /meta");
  return v;
}

StatusOr<int64_t> TraceReader::GetMetaInt(std::string_view name) const {
  AON_ASSIGN_OR_RETURN(Hid g, OpenMetaGroup(static_cast<hid_t>(file_), path_));
  auto v = ReadNumberAttribute<int64_t>(g.get(), name, H5T_NATIVE_INT64);
  if (!v.ok()) return v.status().WithContext(FormatContext(path_) + " /meta");
  return v;
}

StatusOr<double> TraceReader::GetMetaDouble(std::string_view name) const {
  AON_ASSIGN_OR_RETURN(Hid g, OpenMetaGroup(static_cast<hid_t>(file_), path_));
  auto v = ReadNumberAttribute<double>(g.get(), name, H5T_NATIVE_DOUBLE);
  if (!v.ok()) return v.status().WithContext(FormatContext(path_) + " /meta");
  return v;
}

StatusOr<RankMetadata> TraceReader::ReadRankMetadata() const {
  RankMetadata m;
  for (const MetaField& f : RankMetadataFields()) {
    AON_RETURN_IF_ERROR(std::visit(
        [&](auto member) -> Status {
          auto& out = m.*member;
          using V = std::decay_t<decltype(out)>;
          auto missing_ok = [&](const Status& st) {
            // Fields added in a later minor version: an older file lacks them.
            return st.code() == StatusCode::kNotFound && f.since_minor > 0;
          };
          if constexpr (std::is_same_v<V, std::string>) {
            auto v = GetMetaString(f.name);
            if (!v.ok()) return missing_ok(v.status()) ? Status::Ok() : v.status();
            out = std::move(v).value();
          } else if constexpr (std::is_same_v<V, double>) {
            auto v = GetMetaDouble(f.name);
            if (!v.ok()) return missing_ok(v.status()) ? Status::Ok() : v.status();
            out = *v;
          } else {
            auto v = GetMetaInt(f.name);
            if (!v.ok()) return missing_ok(v.status()) ? Status::Ok() : v.status();
            if constexpr (std::is_same_v<V, int32_t>) {
              if (*v < INT32_MIN || *v > INT32_MAX) {
                return DataLoss(FormatContext(path_) + " /meta: attribute '" + f.name +
                                "' = " + std::to_string(*v) + " is out of range");
              }
              out = static_cast<int32_t>(*v);
            } else if constexpr (std::is_same_v<V, bool>) {
              out = *v != 0;
            } else {
              out = static_cast<V>(*v);
            }
          }
          return Status::Ok();
        },
        f.member));
  }
  for (size_t i = 0; i < kRecordKindCount; ++i) {
    // Absent: a kind added in a later minor, or unwritten before 1.11.
    const std::string kind = RecordKindName(static_cast<RecordKind>(i));
    auto d = GetMetaInt("dropped_" + kind);
    m.dropped[i] = d.ok() ? static_cast<uint64_t>(*d) : 0;
    auto u = GetMetaInt("unwritten_" + kind);
    m.unwritten[i] = u.ok() ? std::min(static_cast<uint64_t>(*u), m.dropped[i]) : 0;
  }
  AON_ASSIGN_OR_RETURN(std::string notes, GetMetaString("notes"));
  size_t pos = 0;
  while (pos < notes.size()) {
    size_t nl = notes.find('\n', pos);
    if (nl == std::string::npos) nl = notes.size();
    m.notes.push_back(notes.substr(pos, nl - pos));
    pos = nl + 1;
  }
  AON_ASSIGN_OR_RETURN(m.devices, ReadAllOf<DeviceInfo>(DeviceInfoSchema(), "meta"));
  return m;
}

StatusOr<StringTable> TraceReader::ReadStrings() const {
  hid_t f = static_cast<hid_t>(file_);
  const std::string ctx = FormatContext(path_);
  auto data =
      ReadArray<uint8_t>(f, "/strings/data", H5T_NATIVE_UINT8, file_bytes_, kMaxStringBytes);
  if (!data.ok()) return data.status().WithContext(ctx);
  auto offsets =
      ReadArray<uint64_t>(f, "/strings/offsets", H5T_NATIVE_UINT64, file_bytes_, kMaxStrings);
  if (!offsets.ok()) return offsets.status().WithContext(ctx);
  StringTable table;
  const std::vector<uint8_t>& d = *data;
  const std::vector<uint64_t>& off = *offsets;
  // Never trust offsets: each must start inside the data, after the previous
  // string's terminator, and end with a NUL.
  uint64_t next_min = 0;
  for (size_t i = 0; i < off.size(); ++i) {
    if (off[i] < next_min || off[i] >= d.size()) {
      return DataLoss(ctx + ": string table offset " + std::to_string(i) + " is out of bounds");
    }
    const auto* begin = reinterpret_cast<const char*>(d.data() + off[i]);
    size_t max_len = d.size() - off[i];
    size_t len = strnlen(begin, max_len);
    if (len == max_len)
      return DataLoss(ctx + ": string " + std::to_string(i) + " is not terminated");
    uint32_t id = table.Intern(std::string_view(begin, len));
    // Ids must be dense and in order; a duplicate string would break that.
    if (id != i && !(i == 0 && len == 0)) {
      return DataLoss(ctx + ": string table has a duplicate or misplaced entry at " +
                      std::to_string(i));
    }
    next_min = off[i] + len + 1;
  }
  return table;
}

StatusOr<uint64_t> TraceReader::TableSize(const TableSchema& schema, std::string_view group) const {
  const std::string name = "/" + Join(group, schema.name);
  auto c =
      OpenChecked(static_cast<hid_t>(file_), name, file_bytes_, kind_ == FileKind::kTimeline, true);
  if (!c.ok()) {
    if (c.status().code() == StatusCode::kNotFound) {
      return NotFound(FormatContext(path_) + " has no dataset " + name);
    }
    return c.status().WithContext(FormatContext(path_));
  }
  if (group == "meta" && c->rows > kMaxMetaRows) {
    return DataLoss(FormatContext(path_) + ": dataset " + name + " declares " +
                    std::to_string(c->rows) + " rows, more than the " +
                    std::to_string(kMaxMetaRows) + " AON reads from /meta: refused");
  }
  return c->rows;
}

// What a reader keeps between reads of directly readable chunks.
// Per decoding thread: an inflater and its buffer; per chunk of a round, the
// chunk as stored.
struct TraceReader::ChunkScratch {
  struct Worker {
    chunk_codec::ChunkBuffer inflated;
    chunk_codec::Inflater inflater;
  };
  std::deque<Worker> workers;
  std::vector<chunk_codec::ChunkBuffer> stored;
};

void TraceReader::ChunkScratchDeleter::operator()(ChunkScratch* s) const { delete s; }

// This thread reads the stored chunks through HDF5, one after another, while
// the other threads inflate and unpack the chunks already read into `out`
// (disjoint rows), taking the next one as they finish the last; once every
// chunk is read, this thread decodes too. One thread: read all, then decode.
Status TraceReader::ReadChunks(int64_t dataset, const TableSchema& schema, uint64_t chunk_rows,
                               bool deflated, bool checksummed, const std::vector<uint64_t>& stored, uint64_t first,
                               uint64_t count, void* out, const std::string& ctx,
                               const RowsVisitor* visit) const {
  const hid_t ds = static_cast<hid_t>(dataset);
  const uint64_t first_chunk = first / chunk_rows, last_chunk = (first + count - 1) / chunk_rows;
  const uint64_t chunks = last_chunk + 1 - first_chunk;
  // At most kWindow chunks in hand: a long read goes in windows of them.
  constexpr uint64_t kWindow = 64;
  if (chunks > kWindow) {
    for (uint64_t c = 0; c < chunks; c += kWindow) {
      const uint64_t lo = std::max(first, (first_chunk + c) * chunk_rows);
      const uint64_t hi = std::min(first + count, (first_chunk + c + kWindow) * chunk_rows);
      const std::vector<uint64_t> sizes(
          stored.begin() + static_cast<ptrdiff_t>(c),
          stored.begin() + static_cast<ptrdiff_t>(std::min(chunks, c + kWindow)));
      AON_RETURN_IF_ERROR(ReadChunks(dataset, schema, chunk_rows, deflated, checksummed, sizes, lo,
                                     hi - lo,
                                     static_cast<uint8_t*>(out) + (lo - first) * schema.record_size,
                                     ctx, visit));
    }
    return Status::Ok();
  }
  const unsigned threads =
      deflated ? static_cast<unsigned>(std::clamp<uint64_t>(chunks, 1, decode_threads_)) : 1;
  if (scratch_ == nullptr) scratch_.reset(new ChunkScratch());
  ChunkScratch& s = *scratch_;
  while (s.workers.size() < threads) s.workers.emplace_back();
  if (s.stored.size() < chunks) s.stored.resize(chunks);
  const chunk_codec::RowLayout layout = chunk_codec::LayoutOf(schema);
  const uint64_t chunk_bytes = chunk_rows * layout.packed_bytes;
  auto* dst = static_cast<uint8_t*>(out);

  // `state`: how many chunks of this read are in s.stored (the first ones),
  // plus kDone once reading has ended: every chunk read, or one that cannot be
  // (`unreadable` then says why). Only this thread changes it.
  constexpr uint64_t kDone = uint64_t{1} << 63;
  std::atomic<uint64_t> state{0};
  std::atomic<uint64_t> next{0};  // the next chunk a decoding thread takes
  Status unreadable;
  auto read_all = [&] {
    uint64_t have = 0;
    struct End {  // also when a resize throws: the decoding threads must not wait on
      std::atomic<uint64_t>& state;
      const uint64_t& have;
      bool notify;
      ~End() {
        state.store(have | kDone, std::memory_order_release);
        if (notify) state.notify_all();
      }
    } end{state, have, threads > 1};
    for (; have < chunks; ++have) {
      hsize_t offset[1] = {(first_chunk + have) * chunk_rows};
      // Checked by CheckChunksToRead: stored, inside the file, no filter skipped.
      s.stored[have].resize(stored.at(have));
      uint32_t mask = 0;
      if (H5Dread_chunk(ds, H5P_DEFAULT, offset, &mask, s.stored[have].data()) < 0 || mask != 0) {
        unreadable = DataLoss(ctx + " (corrupt or truncated): the chunk of rows from " +
                              std::to_string(offset[0]) + ": " + Hdf5Error());
        return;
      }
      state.store(have + 1, std::memory_order_release);
      if (threads > 1) state.notify_all();
    }
  };
  // Chunk i by worker w: 0 when decoded, else why not.
  enum Failure : uint8_t { kDecoded, kChecksum, kInflate, kSize };
  auto decode = [&](unsigned w, uint64_t i) -> Failure {
    const uint64_t c = first_chunk + i;
    const uint8_t* chunk = s.stored[i].data();
    size_t size = s.stored[i].size();
    if (checksummed && !chunk_codec::CheckAndStripChecksum(chunk, &size)) return kChecksum;
    if (deflated) {
      ChunkScratch::Worker& worker = s.workers[w];
      worker.inflated.resize(chunk_bytes);
      if (!worker.inflater.InflateExact(chunk, size, worker.inflated.data(), chunk_bytes)) {
        return kInflate;
      }
      chunk = worker.inflated.data();
    } else if (size != chunk_bytes) {
      return kSize;
    }
    const uint64_t lo = std::max(first, c * chunk_rows);
    const uint64_t hi = std::min(first + count, (c + 1) * chunk_rows);
    uint8_t* rows = dst + (lo - first) * schema.record_size;
    chunk_codec::UnpackChunk(layout, chunk, chunk_rows, lo - c * chunk_rows, hi - lo, deflated,
                             rows);
    if (visit != nullptr) (*visit)(rows, hi - lo);
    return kDecoded;
  };
  // Per worker: its first chunk that failed, and why.
  std::vector<std::pair<uint64_t, Failure>> bad(threads, {UINT64_MAX, kDecoded});
  auto share = [&](unsigned w) {
    if (w == 0) read_all();
    for (;;) {
      const uint64_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= chunks) return;
      // Wait until chunk i is read, or reading has ended before it.
      for (uint64_t st = state.load(std::memory_order_acquire); (st & ~kDone) <= i;
           st = state.load(std::memory_order_acquire)) {
        if ((st & kDone) != 0) return;
        state.wait(st, std::memory_order_acquire);
      }
      const Failure f = decode(w, i);
      if (f != kDecoded && bad[w].first == UINT64_MAX) bad[w] = {i, f};
    }
  };
  if (!RunShares(threads, share, helpers_)) {
    return Unavailable(ctx + ": out of memory decoding chunks");
  }
  // The first chunk that went wrong names the error, as when each chunk is
  // read and decoded in turn.
  const auto [worst, why] = *std::min_element(bad.begin(), bad.end());
  if (worst != UINT64_MAX && worst < (state.load() & ~kDone)) {
    const std::string chunk = " (corrupt or truncated): the chunk of rows from " +
                              std::to_string((first_chunk + worst) * chunk_rows);
    switch (why) {
      case kChecksum:
        return DataLoss(ctx + chunk + " fails its checksum (damaged since it was written)");
      case kInflate:
        return DataLoss(ctx + chunk + " does not inflate to " + Bytes(chunk_bytes));
      default:
        return DataLoss(ctx + chunk + " is not " + Bytes(chunk_bytes) + " long");
    }
  }
  return unreadable;
}

Status TraceReader::ReadTable(const TableSchema& schema, uint64_t first, uint64_t count, void* out,
                              std::string_view group, const RowsVisitor* visit) const {
  if (count == 0) return Status::Ok();
  std::string name = "/" + Join(group, schema.name);
  const std::string ctx = FormatContext(path_) + ", dataset " + name;
  // The structural checks again (this may be another dataset than TableSize
  // saw); its extent was checked against its storage by TableSize.
  auto c = OpenChecked(static_cast<hid_t>(file_), name, file_bytes_, kind_ == FileKind::kTimeline,
                       false);
  if (!c.ok()) return c.status().WithContext(FormatContext(path_));
  const Hid& ds = c->ds;
  Hid disk = Type(H5Dget_type(ds.get()));
  if (H5Tget_class(disk.get()) != H5T_COMPOUND) return DataLoss(ctx + " is not a compound table");
  AON_RETURN_IF_ERROR(CheckRowMembers(disk.get(), ctx));
  Hid file_space = Space(H5Dget_space(ds.get()));
  const uint64_t n = c->rows;
  if (first > n || count > n - first) return InvalidArgument(ctx + ": reading past the end");
  std::vector<uint64_t> stored;
  AON_RETURN_IF_ERROR(CheckChunksToRead(ds.get(), first, count, H5Tget_size(disk.get()),
                                        file_bytes_, ctx, &stored));
  if (const std::optional<DirectChunks> direct = DirectlyReadable(ds.get(), disk.get(), schema)) {
    return ReadChunks(ds.get(), schema, direct->chunk_rows, direct->deflated, direct->checksummed,
                      stored, first, count, out, ctx, visit);
  }
  hsize_t start[1] = {first}, cnt[1] = {count};
  H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, cnt, nullptr);
  Hid mem_space = Space(H5Screate_simple(1, cnt, nullptr));
  Hid mem = MemoryType(schema);
  std::memset(out, 0, count * schema.record_size);
  Hid dxpl = TransferProperties(count * schema.record_size);
  if (H5Dread(ds.get(), mem.get(), mem_space.get(), file_space.get(), dxpl.get(), out) < 0) {
    return DataLoss(ctx + " (corrupt or truncated): " + Hdf5Error());
  }
  if (visit != nullptr) (*visit)(out, count);
  return Status::Ok();
}

}  // namespace aon
