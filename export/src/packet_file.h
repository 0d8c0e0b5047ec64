// One Perfetto trace file being written: a perfetto.protos.Trace whose packets
// are TracePacket{compressed_packets}, each holding a zlib stream of whole
// TracePackets (up to about chunk_bytes of them). Perfetto's trace processor
// (and so ui.perfetto.dev) inflates such packets in place, in order, on the
// same packet sequence: it is the framing Perfetto's own tracing service writes
// with compression on. Perfetto asks that each such packet stay under 512 KB.
//
// Why chunks and not one gzip stream: chunks are independent, so they are
// compressed on helper threads in parallel while the caller encodes the next
// packets, and each chunk's compressed size is exact once it is done (a gzip
// stream gives a size only at its flush points). The caller's file-size limit
// is checked against exact sizes plus a worst-case bound for what is not yet
// compressed (Fits), and it waits for the chunks in flight before deciding
// against them: where files split depends on the input alone, never on the
// threads' timing.
//
// Compression: aon/format/zlib_stream.h (libdeflate, about twice zlib's speed
// at level 1 for the same size; zlib when AON was built without it).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "aon/base/status.h"
#include "output_file.h"

namespace aon::merge {

class PacketFile {
 public:
  // `level`: 0 (stored) .. 9 (smallest; libdeflate allows up to 12); `threads`
  // compressing threads (at least one).
  static StatusOr<std::unique_ptr<PacketFile>> Create(const std::string& path, int level,
                                                      size_t chunk_bytes, unsigned threads);
  ~PacketFile();  // without Commit the .partial file is removed
  PacketFile(const PacketFile&) = delete;
  PacketFile& operator=(const PacketFile&) = delete;

  // Whether the file, with `more` bytes of packets added and finished now,
  // would be at most `limit` bytes: the exact size of every chunk begun so far
  // plus a worst-case bound for the chunk that `more` would end in.
  bool Fits(size_t more, uint64_t limit);
  // Appends whole TracePackets (each field 1 of Trace, as encoded).
  Status Write(std::string_view packets);
  // Compresses what is left, writes it and renames the file into place;
  // returns its size in bytes.
  StatusOr<uint64_t> Commit();

  // The worst-case framed size of a chunk of `plain` bytes.
  static uint64_t FramedBound(size_t plain);

 private:
  struct Chunk {
    std::string plain, packed;
    bool done = false;  // under mu_
  };
  PacketFile(std::unique_ptr<AtomicTextFile> file, int level, size_t chunk_bytes);
  void Submit();
  // Writes the finished chunks at the front, in file order; with `all`, waits
  // for every chunk in flight first. Returns a compressing thread's error.
  Status WriteDone(bool all);
  void Work();
  void Stop();

  std::unique_ptr<AtomicTextFile> file_;
  int level_;
  size_t chunk_bytes_;
  size_t max_in_flight_ = 4;

  // The caller's thread.
  std::string pending_;
  uint64_t written_ = 0;                          // exact bytes of the chunks written
  uint64_t in_flight_bound_ = 0;                  // FramedBound of the chunks in flight
  std::deque<std::unique_ptr<Chunk>> in_flight_;  // file order

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  // Under mu_.
  std::deque<Chunk*> queue_;
  bool stop_ = false;
  std::string error_;
};

}  // namespace aon::merge
