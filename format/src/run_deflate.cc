#include "run_deflate.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <numeric>

#ifdef AON_HAVE_LIBDEFLATE
#include <libdeflate.h>
#else
#include <zlib.h>
#endif

namespace aon::chunk_codec {
namespace {

// Input bytes per deflate block: each block gets its own Huffman codes, fitted
// to the planes it holds (a shuffled 4096-row chunk has a plane every 4 KiB).
// Chosen by measurement (bench/RESULTS.md, "Timeline deflate").
constexpr size_t kBlockBytes = 16384;
constexpr unsigned kMaxRun = 258;  // deflate's longest match
constexpr unsigned kLitLenSymbols = 286;
constexpr unsigned kEndOfBlock = 256;
// A token: a literal byte (< 256) or kMatchBase + the length of a match at
// distance 1 (3..258).
constexpr uint16_t kMatchBase = 256;

// RFC 1951, 3.2.5: the length symbols (257 + i), their extra bits and their
// first lengths.
constexpr uint8_t kLengthExtraBits[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                          2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
struct LengthCode {
  uint16_t symbol;
  uint8_t extra_bits;
  uint16_t extra_value;
};
constexpr std::array<LengthCode, kMaxRun + 1> MakeLengthCodes() {
  constexpr uint16_t kFirst[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                   31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
  std::array<LengthCode, kMaxRun + 1> t{};
  for (unsigned s = 0; s < 29; ++s) {
    const unsigned last = s == 28 ? 258 : kFirst[s + 1] - 1u;
    for (unsigned len = kFirst[s]; len <= last; ++len) {
      t[len] = {static_cast<uint16_t>(257 + s), kLengthExtraBits[s],
                static_cast<uint16_t>(len - kFirst[s])};
    }
  }
  return t;
}
constexpr std::array<LengthCode, kMaxRun + 1> kLengthCodes = MakeLengthCodes();

// The order in which the code-length code's lengths are sent (RFC 1951, 3.2.7).
constexpr uint8_t kCodeLengthOrder[19] = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                          11, 4,  12, 3, 13, 2, 14, 1, 15};

// Huffman code lengths of at most `limit` bits for symbols [0, n) with
// frequencies `freq`, into `len`. The code is always complete (every deflate
// decoder insists on that): with a single used symbol, a second one gets a
// code as well.
void BuildLengths(const uint32_t* freq, unsigned n, unsigned limit, uint8_t* len) {
  std::fill(len, len + n, 0);
  struct Node {
    uint64_t weight;
    int parent;
  };
  std::array<Node, 2 * kLitLenSymbols> nodes{};
  std::array<uint16_t, kLitLenSymbols> order{};  // used symbols by rising frequency
  unsigned used = 0;
  for (unsigned s = 0; s < n; ++s) {
    if (freq[s] > 0) order[used++] = static_cast<uint16_t>(s);
  }
  if (used < 2) {
    const unsigned a = used == 1 ? order[0] : 0;
    len[a] = 1;
    len[a == 0 ? 1 : 0] = 1;
    return;
  }
  std::sort(order.begin(), order.begin() + used,
            [&](uint16_t a, uint16_t b) { return freq[a] != freq[b] ? freq[a] < freq[b] : a < b; });
  // Two queues: leaves in rising weight, then the internal nodes as they are
  // made (also in rising weight). Leaf i is node i; internal nodes follow.
  for (unsigned i = 0; i < used; ++i) nodes[i] = {freq[order[i]], -1};
  unsigned leaf = 0, inner = used, made = used;
  auto take = [&]() {
    if (leaf < used && (inner == made || nodes[leaf].weight <= nodes[inner].weight)) return leaf++;
    return inner++;
  };
  while (made < 2 * used - 1) {
    const unsigned a = take(), b = take();
    nodes[made] = {nodes[a].weight + nodes[b].weight, -1};
    nodes[a].parent = nodes[b].parent = static_cast<int>(made);
    ++made;
  }
  // Depths, root first (a parent always comes after its children).
  std::array<uint8_t, 2 * kLitLenSymbols> depth{};
  std::array<unsigned, 64> count{};  // codes per length
  for (unsigned x = made - 1; x-- > 0;) {
    depth[x] = static_cast<uint8_t>(depth[static_cast<unsigned>(nodes[x].parent)] + 1);
  }
  for (unsigned i = 0; i < used; ++i) ++count[std::min<unsigned>(depth[i], limit)];
  // Codes deeper than the limit were cut to it: the Kraft sum (in units of
  // 2^-limit) now exceeds 1. Move codes one level down from the deepest level
  // above the limit until it is 1 or just under, then shorten codes at the
  // limit (each adds one unit) until it is exactly 1.
  uint64_t kraft = 0;
  for (unsigned l = 1; l <= limit; ++l) kraft += uint64_t{count[l]} << (limit - l);
  const uint64_t full = uint64_t{1} << limit;
  while (kraft > full) {
    unsigned l = limit - 1;
    while (count[l] == 0) --l;
    --count[l];
    ++count[l + 1];
    kraft -= uint64_t{1} << (limit - l - 1);
  }
  while (kraft < full) {
    // The deepest code whose shortening does not overshoot (there are codes at
    // the limit: the ones cut to it, which the loop above never moves).
    unsigned l = limit;
    while (l > 1 && (count[l] == 0 || (uint64_t{1} << (limit - l)) > full - kraft)) --l;
    --count[l];
    ++count[l - 1];
    kraft += uint64_t{1} << (limit - l);
  }
  // The shortest codes to the most frequent symbols.
  unsigned i = used;
  for (unsigned l = 1; l <= limit; ++l) {
    for (unsigned c = 0; c < count[l]; ++c) len[order[--i]] = static_cast<uint8_t>(l);
  }
}

// Canonical codes for `len` (RFC 1951, 3.2.2), bit-reversed: deflate sends a
// Huffman code's first bit first, into the low bits of the stream.
void BuildCodes(const uint8_t* len, unsigned n, uint16_t* code) {
  std::array<uint16_t, 17> count{}, next{};
  for (unsigned s = 0; s < n; ++s) ++count[len[s]];
  count[0] = 0;
  uint16_t c = 0;
  for (unsigned l = 1; l <= 16; ++l) {
    c = static_cast<uint16_t>((c + count[l - 1]) << 1);
    next[l] = c;
  }
  for (unsigned s = 0; s < n; ++s) {
    if (len[s] == 0) {
      code[s] = 0;
      continue;
    }
    const unsigned v = next[len[s]]++;
    unsigned r = 0;
    for (unsigned b = 0; b < len[s]; ++b) r |= ((v >> b) & 1u) << (len[s] - 1 - b);
    code[s] = static_cast<uint16_t>(r);
  }
}

// Little-endian bits into a buffer sized beforehand.
class BitWriter {
 public:
  explicit BitWriter(uint8_t* p) : p_(p) {}
  // k <= 32 bits of v (higher bits zero).
  void Put(uint64_t v, unsigned k) {
    acc_ |= v << n_;
    n_ += k;
    if (n_ >= 32) {
      for (unsigned b = 0; b < 4; ++b) p_[b] = static_cast<uint8_t>(acc_ >> (8 * b));
      p_ += 4;
      acc_ >>= 32;
      n_ -= 32;
    }
  }
  // Pads to a byte boundary and writes out every whole byte.
  void AlignToByte() {
    Put(0, (8 - n_ % 8) % 8);
    while (n_ > 0) {
      *p_++ = static_cast<uint8_t>(acc_);
      acc_ >>= 8;
      n_ -= 8;
    }
  }
  void Bytes(const uint8_t* b, size_t n) {  // after AlignToByte
    std::memcpy(p_, b, n);
    p_ += n;
  }
  uint8_t* at() const { return p_; }

 private:
  uint8_t* p_;
  uint64_t acc_ = 0;
  unsigned n_ = 0;
};

// in[from, to) as tokens into `tokens`, counting symbols into `freq`. A byte
// equal to the one before it starts a match at distance 1 when at least three
// such bytes follow in a row (the first byte of a block may match the last of
// the block before: the window spans blocks).
size_t Tokenize(const uint8_t* in, size_t from, size_t to, uint16_t* tokens, uint32_t* freq) {
  size_t t = 0;
  size_t i = from;
  if (i == 0 && i < to) {
    tokens[t++] = in[0];
    ++freq[in[0]];
    ++i;
  }
  while (i < to) {
    const uint8_t prev = in[i - 1];
    if (in[i] != prev || i + 2 >= to || in[i + 1] != prev || in[i + 2] != prev) {
      tokens[t++] = in[i];
      ++freq[in[i]];
      ++i;
      continue;
    }
    const size_t most = std::min<size_t>(kMaxRun, to - i);
    size_t run = 3;
    // Eight bytes at a time: the first that differs ends the run.
    const uint64_t same = 0x0101010101010101ull * prev;
    while (run + 8 <= most) {
      uint64_t word;
      std::memcpy(&word, in + i + run, 8);
      const uint64_t diff = word ^ same;
      if (diff != 0) {
        run += static_cast<size_t>(std::endian::native == std::endian::little
                                       ? std::countr_zero(diff) / 8
                                       : std::countl_zero(diff) / 8);
        break;
      }
      run += 8;
    }
    if (run + 8 > most) {
      while (run < most && in[i + run] == prev) ++run;
    }
    tokens[t++] = static_cast<uint16_t>(kMatchBase + run);
    ++freq[kLengthCodes[run].symbol];
    i += run;
  }
  return t;
}

// The code-length sequence of a block's two codes, run-length coded with
// symbols 16-18 (RFC 1951, 3.2.7): (symbol, extra value) pairs.
struct LengthRuns {
  std::array<uint8_t, kLitLenSymbols + 32> symbol;
  std::array<uint8_t, kLitLenSymbols + 32> extra;
  unsigned n = 0;
};
void EncodeLengths(const uint8_t* lens, unsigned count, LengthRuns* out, uint32_t* freq) {
  auto put = [&](unsigned s, unsigned e) {
    out->symbol[out->n] = static_cast<uint8_t>(s);
    out->extra[out->n] = static_cast<uint8_t>(e);
    ++out->n;
    ++freq[s];
  };
  for (unsigned i = 0; i < count;) {
    const uint8_t v = lens[i];
    unsigned run = 1;
    while (i + run < count && lens[i + run] == v) ++run;
    i += run;
    if (v == 0) {
      while (run >= 11) {
        const unsigned k = std::min(run, 138u);
        put(18, k - 11);
        run -= k;
      }
      if (run >= 3) {
        put(17, run - 3);
        run = 0;
      }
    } else {
      put(v, 0);
      --run;
      while (run >= 3) {
        const unsigned k = std::min(run, 6u);
        put(16, k - 3);
        run -= k;
      }
    }
    for (; run > 0; --run) put(v, 0);
  }
}

uint32_t Adler32(const uint8_t* in, size_t n) {
#ifdef AON_HAVE_LIBDEFLATE
  return libdeflate_adler32(1, in, n);
#else
  uint32_t a = 1;
  while (n > 0) {  // zlib's adler32 takes at most 4 GiB a call
    const auto k = static_cast<uInt>(std::min<size_t>(n, uInt{1} << 30));
    a = static_cast<uint32_t>(adler32(a, in, k));
    in += k;
    n -= k;
  }
  return a;
#endif
}

// One block, in[from, to), as dynamic Huffman or, when smaller, stored.
void WriteBlock(const uint8_t* in, size_t from, size_t to, bool last, BitWriter& w,
                uint16_t* tokens) {
  std::array<uint32_t, kLitLenSymbols> freq{};
  const size_t ntokens = Tokenize(in, from, to, tokens, freq.data());
  freq[kEndOfBlock] = 1;
  std::array<uint8_t, kLitLenSymbols + 2> lens{};  // literal/length, then distance
  BuildLengths(freq.data(), kLitLenSymbols, 15, lens.data());
  unsigned hlit = kLitLenSymbols;
  while (hlit > 257 && lens[hlit - 1] == 0) --hlit;
  // Distances: only distance 1 (code 0) is used; codes 0 and 1 of one bit
  // each make the code complete.
  constexpr unsigned kHdist = 2;
  std::array<uint8_t, kLitLenSymbols + kHdist> all{};
  std::copy(lens.begin(), lens.begin() + hlit, all.begin());
  all[hlit] = 1;
  all[hlit + 1] = 1;

  LengthRuns runs;
  std::array<uint32_t, 19> cl_freq{};
  EncodeLengths(all.data(), hlit + kHdist, &runs, cl_freq.data());
  std::array<uint8_t, 19> cl_len{};
  BuildLengths(cl_freq.data(), 19, 7, cl_len.data());
  unsigned hclen = 19;
  while (hclen > 4 && cl_len[kCodeLengthOrder[hclen - 1]] == 0) --hclen;

  // Sizes in bits: the dynamic block, against the same bytes stored.
  uint64_t bits = 3 + 5 + 5 + 4 + 3 * hclen;
  for (unsigned r = 0; r < runs.n; ++r) {
    const unsigned s = runs.symbol[r];
    bits += cl_len[s] + (s == 16 ? 2 : s == 17 ? 3 : s == 18 ? 7 : 0);
  }
  for (unsigned s = 0; s < kLitLenSymbols; ++s) bits += uint64_t{freq[s]} * lens[s];
  for (unsigned s = 257; s < kLitLenSymbols; ++s) {
    bits += uint64_t{freq[s]} * (kLengthExtraBits[s - 257] + 1u);  // + the distance's bit
  }
  const size_t n = to - from;
  const uint64_t stored_bits = (n / 65535 + 1) * (3 + 7 + 32) + 8 * uint64_t{n};
  if (bits >= stored_bits) {
    for (size_t at = from; at < to || at == from;) {
      const size_t k = std::min<size_t>(65535, to - at);
      w.Put(last && at + k == to ? 1 : 0, 1);
      w.Put(0, 2);  // stored
      w.AlignToByte();
      w.Put(k, 16);
      w.Put(~k & 0xffffu, 16);
      w.AlignToByte();
      w.Bytes(in + at, k);
      at += k;
      if (k == 0) break;
    }
    return;
  }

  std::array<uint16_t, kLitLenSymbols> code{};
  BuildCodes(lens.data(), kLitLenSymbols, code.data());
  std::array<uint16_t, 19> cl_code{};
  BuildCodes(cl_len.data(), 19, cl_code.data());
  w.Put(last ? 1 : 0, 1);
  w.Put(2, 2);  // dynamic Huffman
  w.Put(hlit - 257, 5);
  w.Put(kHdist - 1, 5);
  w.Put(hclen - 4, 4);
  for (unsigned i = 0; i < hclen; ++i) w.Put(cl_len[kCodeLengthOrder[i]], 3);
  for (unsigned r = 0; r < runs.n; ++r) {
    const unsigned s = runs.symbol[r];
    w.Put(cl_code[s], cl_len[s]);
    if (s >= 16) w.Put(runs.extra[r], s == 16 ? 2 : s == 17 ? 3 : 7);
  }
  BitWriter local = w;  // in registers for the loop, not behind a reference
  for (size_t t = 0; t < ntokens; ++t) {
    const uint16_t tok = tokens[t];
    if (tok < kMatchBase) {
      local.Put(code[tok], lens[tok]);
      continue;
    }
    const LengthCode& lc = kLengthCodes[tok - kMatchBase];
    const unsigned l = lens[lc.symbol];
    // The length's code, its extra bits, then distance code 0: one 0 bit.
    local.Put(code[lc.symbol] | (uint64_t{lc.extra_value} << l), l + lc.extra_bits + 1);
  }
  local.Put(code[kEndOfBlock], lens[kEndOfBlock]);
  w = local;
}

}  // namespace

void RunDeflate(const uint8_t* in, size_t n, ChunkBuffer* out, std::vector<uint16_t>* scratch) {
  const size_t blocks = std::max<size_t>(1, (n + kBlockBytes - 1) / kBlockBytes);
  // At most every block stored, plus each block's header and padding, plus the
  // zlib header and trailer and the bit writer's last word.
  out->resize(2 + n + blocks * 16 + 4 + 8);
  scratch->resize(kBlockBytes);
  (*out)[0] = 0x78;  // deflate, 32 KiB window
  (*out)[1] = 0x01;  // fastest; (0x78 * 256 + 0x01) % 31 == 0
  BitWriter w(out->data() + 2);
  for (size_t b = 0; b < blocks; ++b) {
    const size_t from = b * kBlockBytes, to = std::min(n, from + kBlockBytes);
    WriteBlock(in, from, to, b + 1 == blocks, w, scratch->data());
  }
  w.AlignToByte();
  uint8_t* p = w.at();
  const uint32_t adler = Adler32(in, n);
  for (int s = 24; s >= 0; s -= 8) *p++ = static_cast<uint8_t>(adler >> s);
  out->resize(static_cast<size_t>(p - out->data()));
}

}  // namespace aon::chunk_codec
