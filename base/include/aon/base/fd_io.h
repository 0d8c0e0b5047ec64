// Whole reads and writes on a file descriptor: the one copy of the loops that retry short
// transfers and EINTR. Only read(2), write(2) and errno: safe in a forked child before it
// execs or exits.
#pragma once

#include <cstddef>
#include <string_view>

namespace aon {

// Writes all `n` bytes. False on an error or when the other end is gone (errno says which;
// a write of 0 leaves errno as it was).
bool WriteFull(int fd, const void* buf, size_t n);
inline bool WriteFull(int fd, std::string_view bytes) {
  return WriteFull(fd, bytes.data(), bytes.size());
}

// Reads until `n` bytes, the end of the file or an error; returns how many it read.
size_t ReadUpTo(int fd, void* buf, size_t n);

// Reads exactly `n` bytes: false at an earlier end of file or on an error.
inline bool ReadFull(int fd, void* buf, size_t n) { return ReadUpTo(fd, buf, n) == n; }

}  // namespace aon
