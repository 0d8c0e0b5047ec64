// Writer and reader of AON trace files (per-rank traces and merged timelines).
// The layout is described in trace_format.h and docs/trace-format.md.
//
// Writing is crash-consistent at the file level: a writer creates "<path>.partial"
// (mode 0600) and only Finish() renames it to <path>, so a file under its final
// name is always complete. Nothing here throws; HDF5's own error printing is
// silenced and its innermost message is folded into the returned Status.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "aon/base/helper_threads.h"
#include "aon/base/secure_fs.h"
#include "aon/base/status.h"
#include "aon/format/records.h"
#include "aon/format/string_table.h"
#include "aon/format/trace_format.h"

namespace aon {

// One piece of a virtual table: rows [source_first, source_first + count) of
// dataset `dataset` in file `file` appear as rows [first, first + count) of the
// virtual table. A relative `file` is found next to the virtual table's file.
struct VirtualPiece {
  std::string file;
  std::string dataset;  // e.g. "/records/kernels"
  uint64_t source_first = 0;
  uint64_t first = 0;
  uint64_t count = 0;
};

struct WriteOptions {
  int deflate_level = 4;           // 0 disables compression
  uint64_t chunk_records = 16384;  // records per HDF5 chunk
  // Threads that pack and compress the whole chunks of one append (this one
  // among them); HDF5 is called from the appending thread only. 1: none.
  unsigned compress_threads = 1;
  // Every chunk of every table carries a Fletcher-32 checksum (HDF5's filter,
  // checked on every read): a damaged chunk is named, not read as records.
  bool checksum = true;
};

// Starts the HDF5 library now, without the exit handler it registers at its
// first use (which closes every open file and would run before a handler the
// process registered earlier): for a process whose own exit handler finishes
// files a thread of it writes (the rank agent, after its collector died). If
// HDF5 is in use already, its handler stays (it was registered before).
void StartHdf5WithoutExitHandler();

// The timeline a command line names: a job directory's timeline.h5, or the
// path itself (every tool takes either).
std::string TimelinePathOf(const std::string& job_dir_or_file);

// The name a process writing `rank` gives its file in `dir`: rank-NNNNN.h5, or
// rank-NNNNN.pid<pid>.h5 (then rank-NNNNN.pid<pid>.<n>.h5) when that name or its .partial is taken (a launcher
// process that loaded the agent too, a reused directory, the part of the rank
// a collector that died left there): both are kept.
std::string FreeRankFileName(const HeldDirectory& dir, int rank, int64_t pid);

class TraceWriter {
 public:
  static StatusOr<std::unique_ptr<TraceWriter>> Create(const std::string& path, FileKind kind,
                                                       const WriteOptions& options = {});
  // `name` in a held job directory (aon/base/secure_fs.h): created, written and
  // renamed through the directory's descriptor; path() and messages name it
  // under the directory's path.
  static StatusOr<std::unique_ptr<TraceWriter>> Create(const HeldDirectory& dir,
                                                       std::string_view name, FileKind kind,
                                                       const WriteOptions& options = {});
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  const std::string& path() const { return path_; }

  // May be called again (e.g. at every flush): every attribute is overwritten
  // and the /meta/devices table replaced.
  Status WriteRankMetadata(const RankMetadata& metadata);
  // Attributes of /meta, for metadata other than RankMetadata (timelines). Setting
  // a name again replaces its value (and its type).
  Status SetMetaAttribute(std::string_view name, std::string_view value);
  Status SetMetaAttribute(std::string_view name, int64_t value);
  Status SetMetaAttribute(std::string_view name, uint64_t value);
  Status SetMetaAttribute(std::string_view name, double value);

  // Appends `count` records laid out as `schema` says to the dataset
  // <group>/<schema.name>, creating it on first use.
  Status AppendTable(const TableSchema& schema, const void* records, uint64_t count,
                     std::string_view group = "records");
  template <typename T>
  Status Append(std::span<const T> records) {
    return AppendTable(RecordTraits<T>::Schema(), records.data(), records.size());
  }
  template <typename T>
  Status AppendMerged(std::span<const Merged<T>> records) {
    return AppendTable(MergedSchemaOf<T>(), records.data(), records.size());
  }

  Status WriteStrings(const StringTable& strings);
  // Creates <group>/<schema.name> as an HDF5 virtual dataset of `rows` rows made
  // of `pieces` (the sharded merge: each merge process wrote one time range of
  // the timeline into its own file). Readers see one ordinary table; the source
  // files must stay where the pieces say. Rows no piece covers read as zeros.
  Status CreateVirtualTable(const TableSchema& schema, uint64_t rows,
                            std::span<const VirtualPiece> pieces,
                            std::string_view group = "records");

  // Flushes everything written so far to the .partial file (H5Fflush of the
  // whole file): a reader of the .partial file, after the writer is killed,
  // finds the file as of the last flush.
  Status Flush();
  // Incremental alternative to WriteStrings (never both on one file): appends
  // the next strings in id order; the first call must start with id 0 ("").
  Status AppendStrings(std::span<const std::string> strings);

  // Creates every /records dataset not yet written (empty), closes the file and
  // renames it to its final path. After an error the .partial file stays.
  Status Finish();

  // Makes room for `bytes` more of this file (records and names as they are in
  // memory: a bound on what they take compressed), for HDF5's own metadata and
  // for storing each table's partly filled chunk anew, before anything is
  // written: the disk space is allocated now (fallocate, the file's size
  // unchanged), so that a full disk or a quota refuses this
  // call, naming ENOSPC or EDQUOT, instead of failing a write half done, which
  // can leave the file unreadable. After a refusal the file is as it was and
  // may still be finished. On a file system without fallocate it does nothing
  // (reserving() is then false). Room not used is given back by Finish().
  Status Reserve(uint64_t bytes);
  // What a writer that reserves keeps in hand, beyond its next append, for
  // finishing the file: its metadata, notes and last names (with Reserve's
  // own allowance for HDF5's metadata).
  static constexpr uint64_t kFinishRoom = 64 << 10;
  bool reserving() const { return !reserve_unsupported_; }

 private:
  TraceWriter(std::string path, std::string open_path, FileKind kind, WriteOptions options,
              int64_t file);
  static StatusOr<std::unique_ptr<TraceWriter>> CreateAt(const std::string& path,
                                                         const std::string& open_path,
                                                         FileKind kind, const WriteOptions& options);
  Status EnsureGroup(std::string_view group, int64_t* id);
  // One number attribute of /meta: HDF5's memory and file types (hid_t) of *value.
  Status SetMetaScalar(std::string_view name, int64_t mem_type, int64_t file_type,
                       const void* value);
  // Rows [first, first + count) of a table, from a chunk boundary on, as whole
  // chunks packed and compressed here (format/src/direct_chunk_io.h).
  Status WriteChunks(int64_t dataset, const TableSchema& schema, const uint8_t* rows,
                     uint64_t first, uint64_t count, const std::string& ctx);
  struct ChunkScratch;
  struct ChunkScratchDeleter {
    void operator()(ChunkScratch* s) const;
  };

  std::string path_;       // for messages
  std::string open_path_;  // for system calls: path_, or through a held directory
  FileKind kind_;
  WriteOptions options_;
  int64_t file_ = -1;  // hid_t
  bool finished_ = false;
  bool merged_records_ = false;
  uint64_t strings_bytes_ =
      0;  // bytes in /strings/data so far (AppendStrings)  // timelines hold Merged<T> records
  std::unique_ptr<ChunkScratch, ChunkScratchDeleter> scratch_;  // buffers of WriteChunks
  // Reserve(): the file's descriptor (a duplicate of HDF5's) and the end of the
  // space allocated for it so far.
  int reserve_fd_ = -1;
  uint64_t reserved_end_ = 0;
  bool reserve_unsupported_ = false;
  // Per table (by path): the bytes of its partly filled last chunk when full,
  // 0 when its chunks are whole. HDF5 merges the next rows into that chunk and
  // stores the grown chunk anew (a filtered chunk's size changes), so each
  // append may write that chunk once more beside its new rows: Reserve counts it.
  std::map<std::string, uint64_t> partial_chunk_bytes_;
  void GiveBackRoom();
};

class TraceReader {
 public:
  // Opens and validates the header: HDF5 signature, aon_format_major,
  // aon_file_kind. Errors name the path.
  static StatusOr<std::unique_ptr<TraceReader>> Open(const std::string& path);
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  const std::string& path() const { return path_; }
  FileKind kind() const { return kind_; }
  int format_major() const { return major_; }
  int format_minor() const { return minor_; }

  StatusOr<RankMetadata> ReadRankMetadata() const;
  StatusOr<StringTable> ReadStrings() const;
  StatusOr<std::string> GetMetaString(std::string_view name) const;
  StatusOr<int64_t> GetMetaInt(std::string_view name) const;
  StatusOr<double> GetMetaDouble(std::string_view name) const;

  // Number of records in <group>/<schema.name>.
  StatusOr<uint64_t> TableSize(const TableSchema& schema, std::string_view group = "records") const;
  // Reads records [first, first + count) into `out` (count * schema.record_size bytes).
  // With `visit`, calls (*visit)(rows, n) once for each piece of those rows as
  // soon as the piece is in `out`, on the thread that decoded it: with
  // SetDecodeThreads(n > 1), on several threads at once, for disjoint pieces.
  // A read that fails may have visited (and filled) some of the pieces.
  using RowsVisitor = std::function<void(void* rows, uint64_t n)>;
  Status ReadTable(const TableSchema& schema, uint64_t first, uint64_t count, void* out,
                   std::string_view group = "records", const RowsVisitor* visit = nullptr) const;

  // Threads that inflate and unpack the chunks of one read (this one among
  // them); HDF5 is called from the reading thread only. Default 1: none. With
  // `helpers` (which must outlive this reader's reads) they are taken from
  // there instead of started for every read.
  void SetDecodeThreads(unsigned threads, HelperThreads* helpers = nullptr) {
    decode_threads_ = std::max(1u, threads);
    helpers_ = helpers;
  }

  template <typename T>
  StatusOr<std::vector<T>> ReadAll() const {
    return ReadAllOf<T>(RecordTraits<T>::Schema());
  }
  template <typename T>
  StatusOr<std::vector<Merged<T>>> ReadAllMerged() const {
    return ReadAllOf<Merged<T>>(MergedSchemaOf<T>());
  }
  template <typename R>
  StatusOr<std::vector<R>> ReadAllOf(const TableSchema& schema,
                                     std::string_view group = "records") const {
    AON_ASSIGN_OR_RETURN(uint64_t n, TableSize(schema, group));
    // TableSize bounds n by what the file really stores; a table that is
    // still too large for this machine is this file's error, not an abort.
    std::vector<R> out;
    try {
      out.resize(n);
    } catch (const std::exception&) {
      return Unavailable("trace file '" + path_ + "': " + std::to_string(n) + " rows of /" +
                         std::string(group) + "/" + schema.name + " do not fit in memory");
    }
    AON_RETURN_IF_ERROR(ReadTable(schema, 0, n, out.data(), group));
    return out;
  }

 private:
  TraceReader(std::string path, int64_t file) : path_(std::move(path)), file_(file) {}
  // ReadTable of a table whose chunks are read directly (format/src/direct_chunk_io.h, "Direct
  // chunk I/O"): chunks of `chunk_rows`, shuffled and deflated or unfiltered,
  // each with its checksum when `checksummed`; `stored` = each chunk's stored
  // size, checked.
  Status ReadChunks(int64_t dataset, const TableSchema& schema, uint64_t chunk_rows, bool deflated,
                    bool checksummed, const std::vector<uint64_t>& stored, uint64_t first, uint64_t count, void* out,
                    const std::string& ctx, const RowsVisitor* visit) const;
  struct ChunkScratch;
  struct ChunkScratchDeleter {
    void operator()(ChunkScratch* s) const;
  };

  std::string path_;
  int64_t file_ = -1;
  uint64_t file_bytes_ = 0;  // the file's size when opened: what its datasets can hold
  FileKind kind_ = FileKind::kRank;
  int major_ = 0;
  int minor_ = 0;
  unsigned decode_threads_ = 1;
  HelperThreads* helpers_ = nullptr;
  mutable std::unique_ptr<ChunkScratch, ChunkScratchDeleter> scratch_;  // buffers of ReadChunks
};

}  // namespace aon
