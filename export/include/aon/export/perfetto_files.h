// The files of a Perfetto trace: their size limits, what each file holds, and the names of
// its parts and index. Shared by the export's entry point (perfetto_trace.h) and the writer
// below it (export/src/perfetto_writer.h), which defines them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace aon::merge {

inline constexpr uint64_t kDefaultPerfettoFileBytes = uint64_t{1} << 30;
// Smaller files would hold little besides their track descriptors.
inline constexpr uint64_t kMinPerfettoFileBytes = 4096;

struct PerfettoFileInfo {
  std::string path;
  uint64_t bytes = 0;     // compressed, as written
  uint64_t events = 0;    // slices, instants and counter samples
  uint64_t first_ns = 0;  // earliest event start in the file (timeline clock)
  uint64_t last_ns = 0;   // latest event start
};

// The file after `path` holding part `part` (0: `path` itself):
// "trace.pftrace" -> "trace.00001.pftrace"; "x.bin" -> "x.bin.00001".
std::string PerfettoPartPath(const std::string& path, size_t part);
// "trace.pftrace" -> "trace.index.json"; "x.bin" -> "x.bin.index.json".
std::string PerfettoIndexPath(const std::string& path);
}  // namespace aon::merge
