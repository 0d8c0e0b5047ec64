// Fuzz target: the input is a rank file, and aon-merge reads it.
//
// A rank file is input the merge must survive whatever it holds (merge/README.md,
// "A rank file is input, and may be crafted"). Each input is written into a
// job directory of its own (under $TMPDIR, made once per process) as
// rank-00000.h5, and, when the input's last byte is odd, as
// rank-00000.h5.partial instead (a killed collector's file: the salvage path).
// Then the real merge runs on that directory, as aon-merge does: the file is
// opened and checked, its metadata, string table and every record table are
// read, NCCL records resolved, records sorted and the timeline written (also
// into the directory). Any error Status is a fine answer; a crash, a sanitizer
// report, a leak, a hang or an allocation past libFuzzer's limits is a finding,
// and so is an HDF5 object left open (LeakSanitizer cannot see those: HDF5's
// registry still holds them), checked here after every input.
#include <hdf5.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "aon/merge/merge.h"

namespace {

namespace fs = std::filesystem;

// The job directory, made once per process and removed at exit.
class JobDir {
 public:
  JobDir() {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/aon-rank-fuzz-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("rank_file_fuzz: mkdtemp");
      std::abort();
    }
    path_ = tmpl;
  }
  ~JobDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

  // Empties the directory and writes `data` as its one rank file.
  void Hold(const uint8_t* data, size_t size) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(path_, ec)) fs::remove_all(entry.path(), ec);
    const bool partial = size > 0 && (data[size - 1] & 1) != 0;
    const std::string file = path_ + (partial ? "/rank-00000.h5.partial" : "/rank-00000.h5");
    FILE* f = std::fopen(file.c_str(), "wb");
    if (f == nullptr || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
      std::perror(("rank_file_fuzz: writing " + file).c_str());
      std::abort();
    }
  }

 private:
  std::string path_;
};

// HDF5 objects open in any file: files, groups, datasets, attributes, named
// datatypes (what an identifier left open keeps alive: an open rank file, most
// of all).
ssize_t OpenObjects() { return H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static JobDir dir;
  dir.Hold(data, size);
  aon::merge::MergeOptions options;
  options.job_dir = dir.path();
  // A small budget: the records of a large declared table are sorted in rounds,
  // which re-read the file (the path a big job takes).
  options.memory_budget_bytes = uint64_t{1} << 20;
  // The timeline is not what is tested: small chunks, no compression, so that
  // writing it costs little next to reading the input.
  options.write_options = {.deflate_level = 0, .chunk_records = 64};
  options.output_batch_records = 1024;
  options.open_in_child = false;  // libFuzzer must see the open code's coverage and crashes
  aon::merge::MergeReport report;
  const ssize_t before = OpenObjects();
  (void)aon::merge::MergeJob(options, &report);
  if (const ssize_t after = OpenObjects(); after != before) {
    std::fprintf(stderr, "rank_file_fuzz: the merge left %zd HDF5 objects open\n", after - before);
    std::abort();
  }
  return 0;
}
