// How fast the record chunks of a timeline deflate, and how small, with each
// encoder a timeline can be written with (bench/RESULTS.md, "Timeline
// deflate"): AON's run-length encoder (--compression 1), libdeflate's level 1
// (what level 1 was before it), the deflater's levels 2, 4 and 6, and zlib's
// level 1 (HDF5's own filter). The input is every record chunk of the given
// timeline (or rank file) as the encoders see it: packed, shuffled, inflated
// back from the file. Rounds interleave the encoders; each stream is checked to
// inflate back to its chunk.
//
// usage: aon-bench-deflate FILE.h5 [ROUNDS]
#include <hdf5.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chunk_codec.h"

namespace {

using aon::chunk_codec::ChunkBuffer;
using Chunk = std::vector<uint8_t>;

// Every chunk of every chunked, deflated dataset under /records, inflated.
herr_t Collect(hid_t group, const char* name, const H5L_info_t*, void* data) {
  auto* chunks = static_cast<std::vector<Chunk>*>(data);
  const hid_t ds = H5Dopen2(group, name, H5P_DEFAULT);
  if (ds < 0) return 0;
  const hid_t dcpl = H5Dget_create_plist(ds);
  const hid_t type = H5Dget_type(ds);
  hsize_t dims[1] = {0}, chunk[1] = {0};
  const hid_t space = H5Dget_space(ds);
  H5Sget_simple_extent_dims(space, dims, nullptr);
  hsize_t n = 0;
  if (H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, 1, chunk) == 1 &&
      H5Pget_nfilters(dcpl) == 2 && H5Dget_num_chunks(ds, space, &n) >= 0) {
    const size_t raw = chunk[0] * H5Tget_size(type);
    for (hsize_t c = 0; c < n; ++c) {
      hsize_t offset[1] = {0}, size = 0;
      unsigned mask = 0;
      haddr_t addr = 0;
      if (H5Dget_chunk_info(ds, space, c, offset, &mask, &addr, &size) < 0) continue;
      Chunk stored(size), inflated(raw);
      uint32_t filters = 0;
      uLongf out = raw;
      if (H5Dread_chunk(ds, H5P_DEFAULT, offset, &filters, stored.data()) < 0 ||
          uncompress(inflated.data(), &out, stored.data(), size) != Z_OK || out != raw) {
        std::fprintf(stderr, "aon-bench-deflate: /records/%s: a chunk does not inflate\n", name);
        std::exit(1);
      }
      chunks->push_back(std::move(inflated));
    }
  }
  H5Sclose(space);
  H5Tclose(type);
  H5Pclose(dcpl);
  H5Dclose(ds);
  return 0;
}

struct Codec {
  Codec(std::string n, std::function<void(const Chunk&, ChunkBuffer*)> f)
      : name(std::move(n)), compress(std::move(f)) {}
  std::string name;
  std::function<void(const Chunk&, ChunkBuffer*)> compress;
  std::vector<double> seconds;
  size_t bytes = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: aon-bench-deflate FILE.h5 [ROUNDS]\n");
    return 2;
  }
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const hid_t f = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return 1;
  std::vector<Chunk> chunks;
  const hid_t records = H5Gopen2(f, "/records", H5P_DEFAULT);
  H5Literate(records, H5_INDEX_NAME, H5_ITER_INC, nullptr, Collect, &chunks);
  H5Gclose(records);
  H5Fclose(f);
  size_t raw = 0;
  for (const Chunk& c : chunks) raw += c.size();
  if (chunks.empty()) {
    std::fprintf(stderr, "aon-bench-deflate: %s has no deflated record chunks\n", argv[1]);
    return 1;
  }
  std::printf("%zu chunks, %.1f MB shuffled\n", chunks.size(), static_cast<double>(raw) / 1e6);

  std::vector<Codec> codecs;
  for (int level : {1, 2, 4, 6}) {
    auto d = std::make_shared<aon::chunk_codec::Deflater>(level);
    codecs.emplace_back(level == 1 ? "AON run-length (level 1)" : "level " + std::to_string(level),
                        [d](const Chunk& c, ChunkBuffer* out) {
                          if (!d->Compress(c.data(), c.size(), out)) std::exit(1);
                        });
  }
#ifdef AON_HAVE_LIBDEFLATE
  // The match finder a level-1 writer tries per table (libdeflate's level 1);
  // built without libdeflate it is zlib's level 1, measured below.
  auto matching = std::make_shared<aon::chunk_codec::Deflater>(1);
  codecs.emplace_back("libdeflate level 1", [matching](const Chunk& c, ChunkBuffer* out) {
    if (!matching->CompressMatching(c.data(), c.size(), out)) std::exit(1);
  });
#endif
  codecs.emplace_back("zlib level 1", [](const Chunk& c, ChunkBuffer* out) {
    uLongf n = compressBound(c.size());
    out->resize(n);
    compress2(out->data(), &n, c.data(), c.size(), 1);
    out->resize(n);
  });

  ChunkBuffer out;
  aon::chunk_codec::Inflater inflater;
  Chunk back;
  for (int r = 0; r < rounds; ++r) {
    for (Codec& codec : codecs) {
      codec.bytes = 0;
      double s = 0;
      for (const Chunk& c : chunks) {
        const auto t0 = std::chrono::steady_clock::now();
        codec.compress(c, &out);
        s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        codec.bytes += out.size();
        if (r == 0) {
          back.assign(c.size(), 0);
          if (!inflater.InflateExact(out.data(), out.size(), back.data(), back.size()) ||
              back != c) {
            std::fprintf(stderr, "aon-bench-deflate: %s: a stream does not inflate back\n",
                         codec.name.c_str());
            return 1;
          }
        }
      }
      codec.seconds.push_back(s);
    }
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double reference = median(codecs[0].seconds);
  std::printf("%-26s %9s %22s %8s %9s\n", "encoder", "ratio", "MB/s median [range]", "B/chunk",
              "time x");
  for (const Codec& c : codecs) {
    const auto [lo, hi] = std::minmax_element(c.seconds.begin(), c.seconds.end());
    const double mb = static_cast<double>(raw) / 1e6;
    std::printf("%-26s %8.2fx %8.0f [%5.0f-%5.0f] %8zu %8.2fx\n", c.name.c_str(),
                static_cast<double>(raw) / static_cast<double>(c.bytes), mb / median(c.seconds),
                mb / *hi, mb / *lo, c.bytes / std::max<size_t>(1, chunks.size()),
                median(c.seconds) / reference);
  }
  return 0;
}
