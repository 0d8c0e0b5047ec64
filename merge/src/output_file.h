// A text output written as "<path>.partial" and renamed to <path> on Commit, so
// that a reader (or a re-run) never sees half a file under the final name.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "aon/status.h"

namespace aon::merge {

class AtomicTextFile {
 public:
  // Creates <path>.partial with mode 0600, replacing a stale one but never
  // following a symlink.
  static StatusOr<std::unique_ptr<AtomicTextFile>> Create(const std::string& path);
  ~AtomicTextFile();  // without Commit, removes the .partial file
  AtomicTextFile(const AtomicTextFile&) = delete;
  AtomicTextFile& operator=(const AtomicTextFile&) = delete;

  // Buffered; the first write error is reported by Commit.
  void Write(std::string_view text);
  Status Commit();

  const std::string& path() const { return path_; }

 private:
  AtomicTextFile(std::string path, std::FILE* file);

  std::string path_;
  std::string partial_;
  std::FILE* file_ = nullptr;
  int write_errno_ = 0;
};

}  // namespace aon::merge
