// Export of a merged timeline to the Chrome trace-event JSON format, which
// ui.perfetto.dev and chrome://tracing both load.
//
// Mapping (merge/README.md has the details):
//   pid = rank ("rank R @ host", " [SYNTHETIC]" for synthetic sources);
//   GPU work on one track per (device, stream), "GPU <d> stream <s>";
//   CPU work (API calls, NVTX) on the OS thread's track (tid = OS thread id);
//   NCCL on a per-rank "NCCL" track; flows from an API call to the GPU work
//   with the same correlation id.
// ts/dur are microseconds with 3 decimals (exact ns) relative to the timeline's
// earliest start. The file is streamed, never held in memory, and written as
// <json_path>.partial then renamed, so a reader never sees half a file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "aon/status.h"

namespace aon::merge {

struct ChromeTraceStats {
  uint64_t events = 0;  // every event written, metadata events included
  uint64_t flows = 0;   // API -> GPU flow arrows
};

// Reads the timeline at `timeline_path` and writes `json_path`.
Status ExportChromeTrace(const std::string& timeline_path, const std::string& json_path,
                         ChromeTraceStats* stats = nullptr);

// Appends `s` to `out` as a JSON string literal (with the quotes). Control
// characters are escaped; invalid UTF-8 bytes become U+FFFD so that strict
// parsers (Python's json, Perfetto) accept names captured from any process.
void AppendJsonString(std::string* out, std::string_view s);

}  // namespace aon::merge
