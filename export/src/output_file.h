// The merge's JSON outputs are written as every AON file is: through the one
// O_EXCL | O_NOFOLLOW writer, as "<path>.partial" renamed on Commit
// (aon/base/secure_fs.h, AtomicFile).
#pragma once

#include "aon/base/secure_fs.h"

namespace aon::merge {

using AtomicTextFile = AtomicFile;

}  // namespace aon::merge
