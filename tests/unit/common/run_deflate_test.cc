// AON's run-length deflate encoder (format/src/run_deflate.h): every stream it
// writes must inflate, through zlib (what HDF5's deflate filter and h5py use)
// and through AON's own inflater, to exactly the input, whatever the input:
// runs at every length around deflate's limits and block boundaries, noise
// (stored blocks), symbol frequencies that need the 15-bit code length limit,
// and random mixtures of those.
#include "run_deflate.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "aon/format/records.h"
#include "aon/format/trace_file.h"
#include "chunk_codec.h"
#include "trace_test_util.h"

namespace aon::chunk_codec {
namespace {

// Deflates `in` and checks what a reader of the stream sees. Returns the
// stream's size.
size_t RoundTrip(const std::vector<uint8_t>& in, const std::string& what) {
  SCOPED_TRACE(what + " (" + std::to_string(in.size()) + " bytes)");
  ChunkBuffer stream;
  std::vector<uint16_t> scratch;
  RunDeflate(in.data(), in.size(), &stream, &scratch);
  EXPECT_GE(stream.size(), 6u);
  if (stream.size() < 2) return stream.size();
  EXPECT_EQ((stream[0] * 256 + stream[1]) % 31, 0) << "zlib header check";
  // zlib, given room for one byte more than the input: the stream must end
  // exactly there, with a matching Adler-32.
  std::vector<uint8_t> back(in.size() + 1, 0xA5);
  uLongf size = back.size();
  EXPECT_EQ(uncompress(back.data(), &size, stream.data(), stream.size()), Z_OK);
  EXPECT_EQ(size, in.size());
  back.resize(std::min<size_t>(size, in.size()));
  EXPECT_TRUE(back == in) << "zlib inflated other bytes";
  // AON's inflater (libdeflate where built with it), as a merge reads chunks.
  std::vector<uint8_t> again(in.size() + 1, 0x5A);
  Inflater inflater;
  EXPECT_TRUE(inflater.InflateExact(stream.data(), stream.size(), again.data(), in.size()));
  again.resize(in.size());
  EXPECT_TRUE(again == in) << "AON's inflater inflated other bytes";
  // The same encoder again, with its scratch reused: the same stream.
  ChunkBuffer twice;
  RunDeflate(in.data(), in.size(), &twice, &scratch);
  EXPECT_TRUE(std::equal(stream.begin(), stream.end(), twice.begin(), twice.end()));
  return stream.size();
}

TEST(RunDeflate, EmptyAndTinyInputs) {
  RoundTrip({}, "empty");
  RoundTrip({7}, "one byte");
  RoundTrip({7, 7}, "two equal bytes");
  RoundTrip({7, 7, 7}, "three equal bytes");
  RoundTrip({7, 7, 7, 7}, "four equal bytes: a literal and a match of 3");
  RoundTrip({1, 2, 3, 4, 5}, "five different bytes");
}

// Runs of one byte at every length around a match's minimum (3) and maximum
// (258), and around the 16 KiB blocks the encoder cuts.
TEST(RunDeflate, RunsAtEveryBoundary) {
  for (size_t len : {size_t{2}, size_t{3}, size_t{4}, size_t{5}, size_t{9}, size_t{10}, size_t{11},
                     size_t{257}, size_t{258}, size_t{259}, size_t{260}, size_t{261}, size_t{262},
                     size_t{516}, size_t{517}, size_t{518}, size_t{1000}}) {
    std::vector<uint8_t> in = {1, 2};
    in.insert(in.end(), len, 9);
    in.push_back(3);
    in.insert(in.end(), len, 0);
    RoundTrip(in, "runs of " + std::to_string(len));
  }
  for (size_t at : {size_t{16384 - 300}, size_t{16384 - 258}, size_t{16384 - 3}, size_t{16384 - 1},
                    size_t{16384}, size_t{16385}, size_t{32768 - 2}}) {
    std::vector<uint8_t> in(at, 0);
    for (size_t i = 0; i < at; ++i) in[i] = static_cast<uint8_t>(i * 7 % 251);
    in.insert(in.end(), 600, 42);  // a run across the block boundary
    in.insert(in.end(), 20000, 0);
    RoundTrip(in, "a run from byte " + std::to_string(at));
  }
  // One value throughout: runs only, a few bits per 258 bytes.
  const std::vector<uint8_t> constant(1 << 20, 0);
  EXPECT_LT(RoundTrip(constant, "1 MiB of zeros"), size_t{1} << 12);
}

// Noise does not compress: stored blocks, at most a few bytes per block more.
TEST(RunDeflate, NoiseIsStored) {
  std::mt19937_64 rng(1);
  for (size_t n : {size_t{100}, size_t{16383}, size_t{16384}, size_t{70000}, size_t{300000}}) {
    std::vector<uint8_t> in(n);
    for (uint8_t& b : in) b = static_cast<uint8_t>(rng());
    const size_t size = RoundTrip(in, "noise");
    EXPECT_LE(size, n + 6 + 6 * (n / 16384 + 1));
  }
}

// Symbol counts that grow like the Fibonacci numbers give an unlimited Huffman
// code as deep as there are symbols: the encoder must cut it to deflate's 15
// bits and keep it complete (zlib refuses an over- or under-subscribed code).
// 19 symbols with counts 1, 1, 2, ..., 4181 (10,945 bytes) fit in one block
// and want 18 bits.
TEST(RunDeflate, CodeLengthLimit) {
  std::vector<uint64_t> left = {1, 1};
  while (left.size() < 19) left.push_back(left[left.size() - 1] + left[left.size() - 2]);
  // Round robin over the symbols left, so that neighbours differ (literals,
  // not runs) until only the most frequent one is left.
  std::vector<uint8_t> in;
  for (bool any = true; any;) {
    any = false;
    for (size_t s = 0; s < left.size(); ++s) {
      if (left[s] == 0) continue;
      in.push_back(static_cast<uint8_t>(s * 13 + 1));
      --left[s];
      any = true;
    }
  }
  ASSERT_EQ(in.size(), 10945u);
  RoundTrip(in, "Fibonacci symbol counts");
  std::vector<uint8_t> twice = in;
  twice.insert(twice.end(), in.begin(), in.end());
  twice.insert(twice.end(), in.begin(), in.end());
  RoundTrip(twice, "three times, across blocks");
}

// What a shuffled chunk looks like: planes of 4096 bytes, constant, slowly
// stepping, few values, or noise; compresses about as well as zlib's level 1.
TEST(RunDeflate, ShuffledPlanes) {
  std::mt19937_64 rng(2);
  std::vector<uint8_t> in;
  for (int plane = 0; plane < 64; ++plane) {
    const int kind = plane % 4;
    for (int i = 0; i < 4096; ++i) {
      switch (kind) {
        case 0:
          in.push_back(0);
          break;
        case 1:
          in.push_back(static_cast<uint8_t>(plane + i / 700));
          break;
        case 2:
          in.push_back(static_cast<uint8_t>(rng() % 16));
          break;
        default:
          in.push_back(static_cast<uint8_t>(rng()));
          break;
      }
    }
  }
  const size_t size = RoundTrip(in, "shuffled planes");
  // Within 10 % of zlib's level 1 on the same bytes.
  std::vector<uint8_t> z(compressBound(in.size()));
  uLongf z_size = z.size();
  ASSERT_EQ(compress2(z.data(), &z_size, in.data(), in.size(), 1), Z_OK);
  EXPECT_LT(size, in.size() / 2);
  EXPECT_LE(size, z_size + z_size / 10) << "zlib level 1: " << z_size;
}

// Random inputs made of pieces: runs of random lengths, noise over small and
// large alphabets, repeats of earlier bytes.
TEST(RunDeflate, RandomMixtures) {
  std::mt19937_64 rng(3);
  for (int seed = 0; seed < 300; ++seed) {
    std::vector<uint8_t> in;
    const size_t target = rng() % 3 == 0 ? rng() % 200 : rng() % 120000;
    while (in.size() < target) {
      const size_t len = 1 + rng() % (rng() % 2 ? 8 : 700);
      switch (rng() % 4) {
        case 0:
          in.insert(in.end(), len, static_cast<uint8_t>(rng()));
          break;
        case 1: {
          const unsigned alphabet = 1 + static_cast<unsigned>(rng() % 6);
          for (size_t i = 0; i < len; ++i) in.push_back(static_cast<uint8_t>(rng() % alphabet));
          break;
        }
        case 2:
          for (size_t i = 0; i < len; ++i) in.push_back(static_cast<uint8_t>(rng()));
          break;
        default:
          for (size_t i = 0; i < len && !in.empty(); ++i) in.push_back(in[rng() % in.size()]);
          break;
      }
    }
    RoundTrip(in, "mixture " + std::to_string(seed));
    if (HasFailure()) break;
  }
}

// The deflater at level 1 is this encoder; other levels the library's, which
// read each other's streams.
TEST(RunDeflate, DeflaterLevels) {
  std::vector<uint8_t> in(50000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>((i / 300) * 13);
  ChunkBuffer direct;
  std::vector<uint16_t> scratch;
  RunDeflate(in.data(), in.size(), &direct, &scratch);
  for (int level : {1, 2, 6}) {
    Deflater d(level);
    ChunkBuffer out;
    ASSERT_TRUE(d.Compress(in.data(), in.size(), &out));
    if (level == 1) {
      EXPECT_TRUE(std::equal(out.begin(), out.end(), direct.begin(), direct.end()));
    }
    std::vector<uint8_t> back(in.size());
    Inflater inflater;
    ASSERT_TRUE(inflater.InflateExact(out.data(), out.size(), back.data(), back.size()));
    EXPECT_TRUE(back == in) << "level " << level;
  }
}

// At level 1 a writer tries the library's match finder against the run-length
// encoder on a table's first chunk (and every 64th): counter samples, whose
// rows cycle through a few metrics and GPUs, repeat at distances runs miss
// (here the match finder's streams are under half the size). Every stored
// chunk, of every table, must be within 1/15 of the better encoder on its bytes.
TEST(RunDeflate, WritersTryTheMatchFinderPerTable) {
  aon::testing::TempDir dir;
  const std::string path = dir.File("timeline.h5");
  constexpr size_t kRows = 4096 * 6;
  std::vector<CounterRecord> counters(kRows);
  std::vector<KernelRecord> kernels(kRows);
  std::mt19937_64 rng(5);
  for (size_t i = 0; i < kRows; ++i) {
    CounterRecord& c = counters[i];
    c = CounterRecord{};
    const size_t sample = i / 12, metric = i % 6, gpu = (i / 6) % 2;
    c.start_ns = 1'000'000'000 + sample * 1'000'000;
    c.end_ns = c.start_ns + 1'000'000;
    c.value = static_cast<double>((sample * 7 + metric * 13) % 50) * 1.5;
    c.gpu_uuid_hi = 0x1234567800000000ull + gpu;
    c.gpu_uuid_lo = 0x9abcdef000000000ull + gpu;
    c.device = static_cast<uint32_t>(gpu);
    c.metric = static_cast<uint16_t>(metric);
    c.source = 1;
    KernelRecord& k = kernels[i];
    k = KernelRecord{};
    k.start_ns = 1'000'000'000 + i * 5000 + rng() % 64;
    k.end_ns = k.start_ns + 4000;
    k.correlation_id = static_cast<uint32_t>(i + 1);
  }
  {
    auto writer = TraceWriter::Create(path, FileKind::kRank,
                                      {.deflate_level = 1, .chunk_records = 4096});
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    AON_ASSERT_OK((*writer)->Append<CounterRecord>(counters));
    AON_ASSERT_OK((*writer)->Append<KernelRecord>(kernels));
    AON_ASSERT_OK((*writer)->Finish());
  }
  // Each stored chunk against what either encoder makes of its bytes.
  auto encoders_on = [&](const char* table) {
    std::vector<std::pair<size_t, size_t>> out;  // (stored, smaller of the two encoders)
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t ds = H5Dopen2(f, table, H5P_DEFAULT);
    const hid_t type = H5Dget_type(ds);
    const size_t raw = 4096 * H5Tget_size(type);
    for (hsize_t row = 0; row < kRows; row += 4096) {
      hsize_t offset[1] = {row}, size = 0;
      EXPECT_GE(H5Dget_chunk_storage_size(ds, offset, &size), 0);
      std::vector<uint8_t> stored(size), bytes(raw);
      uint32_t mask = 0;
      EXPECT_GE(H5Dread_chunk(ds, H5P_DEFAULT, offset, &mask, stored.data()), 0);
      uLongf n = raw;
      EXPECT_EQ(uncompress(bytes.data(), &n, stored.data(), stored.size()), Z_OK);
      ChunkBuffer runs, matching;
      std::vector<uint16_t> scratch;
      RunDeflate(bytes.data(), bytes.size(), &runs, &scratch);
      Deflater d(1);
      EXPECT_TRUE(d.CompressMatching(bytes.data(), bytes.size(), &matching));
      out.push_back({stored.size(), std::min(runs.size(), matching.size())});
      if (table == std::string("/records/counters")) {
        EXPECT_LT(matching.size() * 16, runs.size() * 15) << "the match finder is clearly smaller";
      }
    }
    H5Tclose(type);
    H5Dclose(ds);
    H5Fclose(f);
    return out;
  };
  for (const char* table : {"/records/counters", "/records/kernels"}) {
    SCOPED_TRACE(table);
    for (const auto& [stored, best] : encoders_on(table)) {
      EXPECT_LE(stored * 15, best * 16) << "stored " << stored << " bytes, best " << best;
    }
  }
}

}  // namespace
}  // namespace aon::chunk_codec
