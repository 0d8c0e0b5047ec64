#include "output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace aon::merge {

AtomicTextFile::AtomicTextFile(std::string path, std::FILE* file)
    : path_(std::move(path)), partial_(path_ + ".partial"), file_(file) {}

StatusOr<std::unique_ptr<AtomicTextFile>> AtomicTextFile::Create(const std::string& path) {
  const std::string partial = path + ".partial";
  struct stat st {};
  if (lstat(partial.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      return InvalidArgument("'" + partial + "' exists and is not a regular file");
    }
    unlink(partial.c_str());
  }
  int fd = open(partial.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("cannot create '" + partial + "'", errno);
  std::FILE* f = fdopen(fd, "w");
  if (f == nullptr) {
    int err = errno;
    close(fd);
    unlink(partial.c_str());
    return ErrnoStatus("cannot open '" + partial + "'", err);
  }
  // Large buffer: the trace is written in many small pieces.
  std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
  return std::unique_ptr<AtomicTextFile>(new AtomicTextFile(path, f));
}

AtomicTextFile::~AtomicTextFile() {
  if (file_ != nullptr) {
    std::fclose(file_);
    unlink(partial_.c_str());
  }
}

void AtomicTextFile::Write(std::string_view text) {
  if (file_ == nullptr || write_errno_ != 0 || text.empty()) return;
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) {
    write_errno_ = errno != 0 ? errno : EIO;
  }
}

Status AtomicTextFile::Commit() {
  if (file_ == nullptr) return Internal("'" + path_ + "' was already committed");
  std::FILE* f = file_;
  file_ = nullptr;
  int err = write_errno_;
  if (std::fflush(f) != 0 && err == 0) err = errno;
  if (std::fclose(f) != 0 && err == 0) err = errno;
  if (err != 0) {
    unlink(partial_.c_str());
    return ErrnoStatus("writing '" + partial_ + "'", err);
  }
  if (std::rename(partial_.c_str(), path_.c_str()) != 0) {
    err = errno;
    unlink(partial_.c_str());
    return ErrnoStatus("renaming '" + partial_ + "' to '" + path_ + "'", err);
  }
  return Status::Ok();
}

}  // namespace aon::merge
