#include "packet_file.h"

#include <algorithm>
#include <exception>

#include "aon/format/zlib_stream.h"
#include "proto_wire.h"

namespace aon::merge {

namespace {

// Trace.packet (field 1) and TracePacket.compressed_packets (field 50), both
// length-delimited.
constexpr uint32_t kTracePacket = 1;
constexpr uint32_t kCompressedPackets = 50;

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, ++n;
  return n;
}

// The compressed_packets field of `packed` bytes, and the Trace.packet around it.
uint64_t InnerSize(uint64_t packed) {
  return VarintSize(uint64_t{kCompressedPackets} << 3 | 2) + VarintSize(packed) + packed;
}
uint64_t FramedSize(uint64_t packed) {
  const uint64_t inner = InnerSize(packed);
  return VarintSize(uint64_t{kTracePacket} << 3 | 2) + VarintSize(inner) + inner;
}

}  // namespace

uint64_t PacketFile::FramedBound(size_t plain) { return FramedSize(ZlibCompressor::Bound(plain)); }

PacketFile::PacketFile(std::unique_ptr<AtomicTextFile> file, int level, size_t chunk_bytes)
    : file_(std::move(file)), level_(level), chunk_bytes_(std::max<size_t>(chunk_bytes, 1)) {}

StatusOr<std::unique_ptr<PacketFile>> PacketFile::Create(const std::string& path, int level,
                                                         size_t chunk_bytes, unsigned threads) {
  AON_ASSIGN_OR_RETURN(auto file, AtomicTextFile::Create(path));
  auto out = std::unique_ptr<PacketFile>(new PacketFile(std::move(file), level, chunk_bytes));
  threads = std::max(threads, 1u);
  // Enough chunks in flight that every thread has one and the next is ready.
  out->max_in_flight_ = 2 * size_t{threads} + 1;
  try {
    for (unsigned i = 0; i < threads; ++i)
      out->workers_.emplace_back([p = out.get()] { p->Work(); });
  } catch (const std::exception& e) {
    if (out->workers_.empty()) {
      return Internal("'" + path + "': cannot start a compressing thread: " + e.what());
    }
  }
  return out;
}

PacketFile::~PacketFile() { Stop(); }

void PacketFile::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

void PacketFile::Work() {
  try {
    ZlibCompressor compressor(level_);
    for (;;) {
      Chunk* chunk = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopped
        chunk = queue_.front();
        queue_.pop_front();
      }
      chunk->packed.resize(ZlibCompressor::Bound(chunk->plain.size()));
      const size_t n =
          compressor.Compress(chunk->plain.data(), chunk->plain.size(), chunk->packed.data());
      chunk->packed.resize(n);
      const bool ok = n > 0;
      std::lock_guard<std::mutex> lock(mu_);
      if (!ok && error_.empty()) error_ = "the compressor failed";
      chunk->done = true;
      done_cv_.notify_all();
    }
  } catch (const std::exception& e) {  // out of memory
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.empty()) error_ = std::string("compressing: ") + e.what();
    // The chunks this thread would have taken are left to the others; a chunk
    // it held stays not done, and the caller's wait sees the error instead.
    done_cv_.notify_all();
  }
}

bool PacketFile::Fits(size_t more, uint64_t limit) {
  const uint64_t tail = pending_.size() + more == 0 ? 0 : FramedBound(pending_.size() + more);
  if (written_ + in_flight_bound_ + tail <= limit) return true;
  // Only the exact sizes of the chunks in flight can tell: wait for them. (An
  // error here is Commit's to report; the bound then stays as it was.)
  if (!WriteDone(/*all=*/true).ok()) return written_ + in_flight_bound_ + tail <= limit;
  return written_ + tail <= limit;
}

Status PacketFile::Write(std::string_view packets) {
  pending_.append(packets);
  if (pending_.size() < chunk_bytes_) return Status::Ok();
  // Finished chunks are written as each new one is handed over (not on every
  // Write: that would take the lock for every event).
  Submit();
  return WriteDone(/*all=*/false);
}

void PacketFile::Submit() {
  auto chunk = std::make_unique<Chunk>();
  chunk->plain.swap(pending_);
  pending_.reserve(chunk_bytes_ + (chunk_bytes_ >> 2));
  in_flight_bound_ += FramedBound(chunk->plain.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(chunk.get());
  }
  work_cv_.notify_one();
  in_flight_.push_back(std::move(chunk));
}

Status PacketFile::WriteDone(bool all) {
  std::string frame;
  while (!in_flight_.empty()) {
    Chunk& chunk = *in_flight_.front();
    {
      std::unique_lock<std::mutex> lock(mu_);
      const bool must_wait = all || in_flight_.size() > max_in_flight_;
      if (must_wait) done_cv_.wait(lock, [&] { return chunk.done || !error_.empty(); });
      if (!error_.empty()) return Internal("'" + file_->path() + "': " + error_);
      if (!chunk.done) break;
    }
    frame.clear();
    const uint64_t packed = chunk.packed.size();
    proto::AppendVarint(&frame, uint64_t{kTracePacket} << 3 | 2);
    proto::AppendVarint(&frame, InnerSize(packed));
    proto::AppendVarint(&frame, uint64_t{kCompressedPackets} << 3 | 2);
    proto::AppendVarint(&frame, packed);
    file_->Write(frame);
    file_->Write(chunk.packed);
    written_ += frame.size() + packed;
    in_flight_bound_ -= FramedBound(chunk.plain.size());
    in_flight_.pop_front();
  }
  return Status::Ok();
}

StatusOr<uint64_t> PacketFile::Commit() {
  if (!pending_.empty()) Submit();
  Status s = WriteDone(/*all=*/true);
  Stop();
  AON_RETURN_IF_ERROR(s);
  AON_RETURN_IF_ERROR(file_->Commit());
  return written_;
}

}  // namespace aon::merge
