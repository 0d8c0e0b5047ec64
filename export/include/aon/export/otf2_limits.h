// What AON's OTF2 archives are made with: the chunk sizes OTF2 allows and the creator an
// archive is recognized by. Shared by the export's entry point (otf2_trace.h) and the writer
// below it (export/src/otf2_writer.cc).
#pragma once

#include <cstdint>

namespace aon::merge {

// OTF2's event chunk sizes (OTF2_CHUNK_SIZE_MIN / _MAX).
inline constexpr uint64_t kOtf2MinChunkBytes = 256 << 10;
inline constexpr uint64_t kOtf2MaxChunkBytes = 16 << 20;
// The archive's creator (OTF2_Archive_SetCreator); an existing archive is
// replaced only when its anchor names it.
inline constexpr const char* kOtf2Creator = "AON (aon-export / aon-merge)";

}  // namespace aon::merge
