// Fuzz target: the input is a rank's ring (header + ring, aon/ipc/shm_ring.h) as a
// hostile process sharing the memory could have written it, and the node
// collector consumes it.
//
// The input becomes the contents of a memory file (made once per process) of
// the size a ring region has: the ring is the smallest power of two from
// kMinRingBytes that holds the input's bytes past the header, at most 64 KiB;
// bytes the input does not give read as zeros. The collector's path then runs on
// it as it does on a ring handed over a socket: Region::Attach (the header's
// checks), Consumer::Drain until nothing new comes (Collector::DrainToEnd),
// every entry taken by the collector's RingIntake into RecordBatches with a
// flight-mode FlightWatch, the producer's counters read, and the string table
// the collector would write (with the placeholders of a finished rank). Any
// error Status is a fine answer; a crash, a sanitizer report, a read outside
// the region, a hang or a huge allocation is a finding.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "aon/ipc/record_batches.h"
#include "aon/ipc/shm_ring.h"
#include "flight_watch.h"
#include "ring_intake.h"

namespace {

using namespace aon;

constexpr uint64_t kMaxRingBytes = 64 * 1024;

int RegionFile() {
  static const int fd = [] {
    const int f = memfd_create("aon-ring-fuzz", MFD_CLOEXEC);
    if (f < 0) {
      std::perror("ring_fuzz: memfd_create");
      std::abort();
    }
    return f;
  }();
  return fd;
}

// Makes `data` the region's bytes, sized as described above.
void HoldRegion(const uint8_t* data, size_t size) {
  const size_t past_header = size > ring::kHeaderBytes ? size - ring::kHeaderBytes : 0;
  uint64_t ring_bytes = ring::kMinRingBytes;
  while (ring_bytes < past_header && ring_bytes < kMaxRingBytes) ring_bytes <<= 1;
  const uint64_t region_bytes = ring::kHeaderBytes + ring_bytes;
  const size_t n = std::min<size_t>(size, region_bytes);
  const int fd = RegionFile();
  if (ftruncate(fd, 0) != 0 || ftruncate(fd, static_cast<off_t>(region_bytes)) != 0 ||
      pwrite(fd, data, n, 0) != static_cast<ssize_t>(n)) {
    std::perror("ring_fuzz: writing the region");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  HoldRegion(data, size);
  auto region = ring::Region::Attach(dup(RegionFile()));
  if (!region.ok()) return 0;
  ring::Consumer consumer(*region);
  collector::RingIntake intake;
  collector::FlightWatch watch(collector::FlightWatchOptions{});
  RecordBatches batches;
  uint64_t now_ns = 1'000'000'000;
  for (int round = 0; round < 1000; ++round) {
    const uint64_t before = intake.records();
    auto drained = consumer.Drain([&](const ring::Entry& e) {
      // A trigger moves the window to the file: here it is let go.
      if (!intake.Take(e, batches, &watch, now_ns).empty()) batches.Release();
    });
    now_ns += 20'000'000;
    if (!drained.ok() || intake.records() == before) break;
  }
  (void)watch.Check(now_ns + 3600'000'000'000);
  // What Collector::Finalize reads of the producer, and the strings it writes.
  (void)consumer.Backlog();
  for (size_t slot = 0; slot < ring::kDropSlots; ++slot) (void)consumer.Dropped(slot);
  (void)consumer.ProducerFinished();
  intake.Written(intake.Unwritten(false).size());
  (void)intake.Unwritten(true);
  return 0;
}
