// Index of this file:
//   [SECTION] deflate's tables and Huffman code lengths
//   [SECTION] the bit writer and its AVX-512 literal coder
//   [SECTION] runs: finding them
//   [SECTION] writing blocks: stored, matches, literals
//   [SECTION] the dynamic block's header
//   [SECTION] the entry points

#include "captures/rle_deflate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include <libdeflate.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace luka::capture {
namespace {

constexpr std::size_t kMaxBlock = std::size_t{1} << 16;  // input bytes per block
constexpr std::size_t kMaxStored = 65535;                 // bytes per stored block (RFC 1951 §3.2.4)
constexpr int kMaxBits = 15;                              // code lengths in deflate
constexpr int kMaxLiteralBits = 14;                       // ours for literal/length codes: four fit one 56-bit write
constexpr int kMaxCodeLengthBits = 7;                     // the code-length code
constexpr int kEndOfBlock = 256;
constexpr int kLitLenSymbols = 286;
constexpr int kDistanceSymbols = 2;  // only distance 1 (code 0) is used; code 1 completes the code
constexpr int kCodeLengthSymbols = 19;
constexpr int kCodeLengthOrder[kCodeLengthSymbols] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

constexpr int kLengthExtraBits[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};

// [SECTION] deflate's tables and Huffman code lengths

// The length symbol, its extra bits and their value for each match length 3..258 (§3.2.5).
struct LengthCode {
  std::uint16_t symbol = 0;
  std::uint8_t extra_bits = 0;
  std::uint8_t extra = 0;
};
const std::array<LengthCode, 259>& length_codes() {
  static const std::array<LengthCode, 259> table = [] {
    constexpr int base[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                              31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
    std::array<LengthCode, 259> t{};
    for (int k = 0; k < 29; ++k) {
      const int end = k == 28 ? 259 : k == 27 ? 258 : base[k + 1];  // 258 has its own symbol (285)
      for (int len = base[k]; len < end; ++len)
        t[static_cast<std::size_t>(len)] = {static_cast<std::uint16_t>(257 + k), static_cast<std::uint8_t>(kLengthExtraBits[k]),
                                            static_cast<std::uint8_t>(len - base[k])};
    }
    return t;
  }();
  return table;
}

// Code lengths of a prefix code for `freq` no longer than `max_bits`: Huffman's code (a
// two-queue construction over the used symbols sorted by frequency), and where that is deeper,
// lengths capped at max_bits with the code made complete again by lengthening the longest codes
// that still fit (the least frequent symbols keep the longest codes). A single used symbol is
// paired with an unused one so that every code is complete.
void code_lengths(const std::uint32_t* freq, int n, int max_bits, std::uint8_t* lengths) {
  // The used symbols sorted by (frequency, symbol), as one 64-bit key each.
  std::array<std::uint64_t, kLitLenSymbols> keys;
  int m = 0;
  for (int s = 0; s < n; ++s) {  // without a branch: an unused symbol's key is overwritten by the next
    lengths[s] = 0;
    keys[static_cast<std::size_t>(m)] = std::uint64_t{freq[s]} << 16 | static_cast<std::uint64_t>(s);
    m += freq[s] != 0;
  }
  if (m == 0) return;
  if (m == 1) {
    const int s = static_cast<int>(keys[0] & 0xffff);
    lengths[s] = 1;
    lengths[s == 0 ? 1 : 0] = 1;
    return;
  }
  std::sort(keys.begin(), keys.begin() + m);
  // Nodes 0..m-1 are the sorted leaves, m..2m-2 the internal nodes in creation order (their
  // weights never decrease, so the two smallest are always at the fronts of the two queues).
  std::array<std::uint64_t, 2 * kLitLenSymbols> weight;  // nodes 0 .. 2m-2 are all written
  std::array<std::uint16_t, 2 * kLitLenSymbols> parent;  // nodes 0 .. 2m-3
  for (int i = 0; i < m; ++i) weight[static_cast<std::size_t>(i)] = keys[static_cast<std::size_t>(i)] >> 16;
  int next_leaf = 0, next_internal = m;
  auto take = [&](int created) {
    if (next_leaf < m && (next_internal >= created || weight[static_cast<std::size_t>(next_leaf)] <= weight[static_cast<std::size_t>(next_internal)]))
      return next_leaf++;
    return next_internal++;
  };
  for (int k = m; k < 2 * m - 1; ++k) {
    const int a = take(k), b = take(k);
    weight[static_cast<std::size_t>(k)] = weight[static_cast<std::size_t>(a)] + weight[static_cast<std::size_t>(b)];
    parent[static_cast<std::size_t>(a)] = parent[static_cast<std::size_t>(b)] = static_cast<std::uint16_t>(k);
  }
  // Depths from the root down; leaves counted per depth (capped at max_bits).
  std::array<std::uint16_t, 2 * kLitLenSymbols> d{};
  int count[kMaxBits + 1] = {};
  bool capped = false;
  for (int k = 2 * m - 3; k >= 0; --k) {
    d[static_cast<std::size_t>(k)] = static_cast<std::uint16_t>(d[parent[static_cast<std::size_t>(k)]] + 1);
    if (k < m) {
      const int depth = d[static_cast<std::size_t>(k)];
      capped |= depth > max_bits;
      ++count[std::min(depth, max_bits)];
    }
  }
  if (capped) {
    // Capping made the Kraft sum exceed 1. Each step lowers it by one unit of 2^-max_bits and
    // keeps the leaf count: a leaf leaves length max_bits, and the longest shorter code becomes
    // two codes one bit longer.
    std::uint64_t kraft = 0;  // in units of 2^-max_bits
    for (int len = 1; len <= max_bits; ++len) kraft += static_cast<std::uint64_t>(count[len]) << (max_bits - len);
    while (kraft > (std::uint64_t{1} << max_bits)) {
      --count[max_bits];
      for (int len = max_bits - 1; len > 0; --len)
        if (count[len]) {
          --count[len];
          count[len + 1] += 2;
          break;
        }
      --kraft;
    }
  }
  // The least frequent leaves (first in sorted order) take the longest lengths.
  for (int len = max_bits, i = 0; len >= 1; --len)
    for (int c = 0; c < count[len]; ++c, ++i) lengths[keys[static_cast<std::size_t>(i)] & 0xffff] = static_cast<std::uint8_t>(len);
}

constexpr std::array<std::uint8_t, 256> kReversedByte = [] {
  std::array<std::uint8_t, 256> t{};
  for (int v = 0; v < 256; ++v)
    for (int b = 0; b < 8; ++b) t[static_cast<std::size_t>(v)] |= static_cast<std::uint8_t>(((v >> b) & 1) << (7 - b));
  return t;
}();

// Canonical codes (§3.2.2), bit-reversed because deflate sends Huffman codes from their first bit.
void canonical_codes(const std::uint8_t* lengths, int n, std::uint16_t* codes) {
  int count[kMaxBits + 1] = {};
  for (int s = 0; s < n; ++s) ++count[lengths[s]];
  count[0] = 0;
  int next[kMaxBits + 1] = {};
  for (int bits = 1, code = 0; bits <= kMaxBits; ++bits) {
    code = (code + count[bits - 1]) << 1;
    next[bits] = code;
  }
  for (int s = 0; s < n; ++s) {
    const int len = lengths[s];
    if (!len) continue;
    const unsigned code = static_cast<unsigned>(next[len]++);
    const unsigned reversed = (static_cast<unsigned>(kReversedByte[code & 0xff]) << 8 | kReversedByte[code >> 8]) >> (16 - len);
    codes[s] = static_cast<std::uint16_t>(reversed);
  }
}

// [SECTION] the bit writer and its AVX-512 literal coder

// Deflate's bit order: least significant bit first. Every put stores the whole 64-bit buffer
// (little-endian) and advances by the complete bytes in it, so there is no branch per code; the
// output needs 8 bytes of slack.
class BitWriter {
 public:
  explicit BitWriter(std::uint8_t* out) : out_(out) {}
  void put(std::uint64_t bits, int n) {  // n <= 56: at most 63 bits pending
    buf_ |= bits << fill_;
    fill_ += n;
    store();
  }
  // Pads to a byte boundary with zero bits.
  void align() {
    if (fill_ > 0) fill_ = 8;
    store();
  }
  void bytes(const std::uint8_t* p, std::size_t n) {  // only when aligned
    if (n == 0) return;  // p may be null for an empty block
    std::memcpy(out_ + pos_, p, n);
    pos_ += n;
  }
  int fill() const { return fill_; }
  std::size_t size() const { return pos_; }

 private:
  void store() {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    std::memcpy(out_ + pos_, &buf_, 8);
#else
    for (int b = 0; b < 8; ++b) out_[pos_ + static_cast<std::size_t>(b)] = static_cast<std::uint8_t>(buf_ >> (8 * b));
#endif
    const int whole = fill_ >> 3;
    pos_ += static_cast<std::size_t>(whole);
    buf_ >>= 8 * whole;
    fill_ &= 7;
  }
  std::uint8_t* out_;
  std::size_t pos_ = 0;
  std::uint64_t buf_ = 0;
  int fill_ = 0;
};

#if defined(__x86_64__)
// GCC 12 warns about the undefined pass-through operand inside AVX-512 shift intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Literal codes for AVX-512 (VBMI): the low and high code bytes and the length of each byte
// value, as three 256-byte tables in four registers each.
struct alignas(64) LiteralTables {
  std::uint8_t lo[256], hi[256], len[256];
};

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline __m512i lookup256(__m512i x, __mmask64 upper, const std::uint8_t* t) {
  const __m512i a = _mm512_permutex2var_epi8(_mm512_load_si512(t), x, _mm512_load_si512(t + 64));
  const __m512i b = _mm512_permutex2var_epi8(_mm512_load_si512(t + 128), x, _mm512_load_si512(t + 192));
  return _mm512_mask_blend_epi8(upper, a, b);
}

// Four codes per 64-bit lane: c0 | c1 << l0 | c2 << (l0 + l1) | c3 << (l0 + l1 + l2), from the
// codes and lengths of four symbols as 16-bit words of each lane.
__attribute__((target("avx512f,avx512bw"))) inline void join_four(__m512i code, __m512i len, __m512i& bits, __m512i& count) {
  const __m512i low16 = _mm512_set1_epi32(0xffff), low32 = _mm512_set1_epi64(0xffffffff);
  const __m512i len_even = _mm512_and_si512(len, low16);
  const __m512i pair_len = _mm512_add_epi32(len_even, _mm512_srli_epi32(len, 16));
  const __m512i pair = _mm512_or_si512(_mm512_and_si512(code, low16), _mm512_sllv_epi32(_mm512_srli_epi32(code, 16), len_even));
  const __m512i pair_len_even = _mm512_and_si512(pair_len, low32);
  count = _mm512_add_epi64(pair_len_even, _mm512_srli_epi64(pair_len, 32));
  bits = _mm512_or_si512(_mm512_and_si512(pair, low32), _mm512_sllv_epi64(_mm512_srli_epi64(pair, 32), pair_len_even));
}

// The literal codes of p[0, n) (n <= 64) as 16 groups of four, in order: bits[k] holds the codes
// of p[4k .. 4k+3] (none past n), count[k] their total length.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline void literal_groups(const std::uint8_t* p, std::size_t n, const LiteralTables& t,
                                                                              std::uint64_t* bits, std::uint8_t* count) {
  const __mmask64 valid = n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
  const __m512i x = _mm512_maskz_loadu_epi8(valid, p);
  const __mmask64 upper = _mm512_movepi8_mask(x);
  // Past n: no code and no length.
  const __m512i lo = _mm512_maskz_mov_epi8(valid, lookup256(x, upper, t.lo)), hi = _mm512_maskz_mov_epi8(valid, lookup256(x, upper, t.hi));
  const __m512i len = _mm512_maskz_mov_epi8(valid, lookup256(x, upper, t.len));
  const __m512i zero = _mm512_setzero_si512();
  // Unpacking works within 128-bit lanes: `a` holds symbols 16j + 0..7 of lane j, `b` 16j + 8..15.
  __m512i bits_a, count_a, bits_b, count_b;
  join_four(_mm512_unpacklo_epi8(lo, hi), _mm512_unpacklo_epi8(len, zero), bits_a, count_a);
  join_four(_mm512_unpackhi_epi8(lo, hi), _mm512_unpackhi_epi8(len, zero), bits_b, count_b);
  const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0), second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  _mm512_storeu_si512(bits, _mm512_permutex2var_epi64(bits_a, first, bits_b));
  _mm512_storeu_si512(bits + 8, _mm512_permutex2var_epi64(bits_a, second, bits_b));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(count), _mm512_cvtepi64_epi8(_mm512_permutex2var_epi64(count_a, first, count_b)));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(count + 8), _mm512_cvtepi64_epi8(_mm512_permutex2var_epi64(count_a, second, count_b)));
}
#pragma GCC diagnostic pop
#endif

// [SECTION] runs: finding them

// A run: `length` copies of the byte before `at` (a match at distance 1, length kMinMatch..258).
struct Match {
  std::uint32_t at;
  std::uint32_t length;
};

// Byte counts in four interleaved tables, so that repeated bytes do not wait on each other's
// increments; or, with a stride above 1, every stride-th byte counted stride times (the position
// carries over from one add to the next, so short stretches are sampled evenly too).
struct ByteCounts {
  std::uint32_t part[4][256] = {};
  std::size_t stride = 1, skip = 0;
  void add(const std::uint8_t* p, std::size_t n) {
    std::size_t i = 0;
    if (stride > 1) {
      for (i = skip; i < n; i += stride) part[0][p[i]] += static_cast<std::uint32_t>(stride);
      skip = i - n;
      return;
    }
    for (; i + 4 <= n; i += 4) {
      ++part[0][p[i]];
      ++part[1][p[i + 1]];
      ++part[2][p[i + 2]];
      ++part[3][p[i + 3]];
    }
    for (; i < n; ++i) ++part[0][p[i]];
  }
  void sum_into(std::uint32_t* freq) const {
    for (int b = 0; b < 256; ++b) freq[b] += part[0][b] + part[1][b] + part[2][b] + part[3][b];
  }
};

// The smallest and largest byte of p[0, n) (the compiler vectorizes the loop).
std::pair<std::uint8_t, std::uint8_t> byte_range(const std::uint8_t* p, std::size_t n) {
  std::uint8_t lo = 255, hi = 0;
  for (std::size_t i = 0; i < n; ++i) {
    lo = std::min(lo, p[i]);
    hi = std::max(hi, p[i]);
  }
  return {lo, hi};
}

// Blocks of at least this many bytes count every kCountStride-th literal, and every byte value
// between the block's smallest and largest byte is given a count of at least 1, so each literal
// present has a code. On the map chunks of a run: 11% less encoding time for 0.1% more bytes;
// step-row blocks are mostly smaller and counted in full.
constexpr std::size_t kSampledBlock = 16384;
constexpr std::size_t kCountStride = 4;

// Length of the run of `value` starting at p, at most `longest`.
std::size_t run_length(const std::uint8_t* p, std::uint8_t value, std::size_t longest) {
  std::size_t len = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const std::uint64_t pattern = 0x0101010101010101ull * value;
  for (; len + 8 <= longest; len += 8) {
    std::uint64_t word;
    std::memcpy(&word, p + len, 8);
    if (const std::uint64_t diff = word ^ pattern) return len + static_cast<std::size_t>(__builtin_ctzll(diff)) / 8;
  }
#endif
  while (len < longest && p[len] == value) ++len;
  return len;
}

// The shortest run coded as a match: on the attention maps a shorter one costs more bits than
// its literals (a length code, its extra bits and the distance code against a few bits per
// byte of a skewed alphabet), and every match splits the literals that are written 64 at a
// time. Against matches from 3 bytes: map chunks 0.2% smaller and about 12% faster to code.
constexpr std::size_t kMinMatch = 8;

// The matches of in[begin, end) and the symbol counts of the block: a match wherever at least
// kMinMatch bytes repeat the byte before them (so a run costs one literal, then matches);
// every other byte is a literal, counted between the matches (sampled in large blocks, above).
// Matches stay inside the block.
void find_matches(const std::uint8_t* in, std::size_t begin, std::size_t end, std::vector<Match>& matches,
                  std::uint32_t* freq) {
  const auto& lengths = length_codes();
  matches.clear();
  std::size_t i = std::max<std::size_t>(begin, 1);
  while (i + kMinMatch <= end) {
#if defined(__SSE2__)
    // 57 candidate starts at once: bit k of `same` says in[i+k-1] == in[i+k], and a match can
    // start at i+k when bits k .. k+7 are all set.
    static_assert(kMinMatch == 8, "the scan below tests eight bytes");
    if (i + 64 <= end) {
      std::uint64_t same = 0;
      for (int q = 0; q < 4; ++q) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i - 1 + 16 * q));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 16 * q));
        same |= std::uint64_t{static_cast<std::uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(a, b)))} << (16 * q);
      }
      std::uint64_t start = same & (same >> 1);
      start &= start >> 2;
      start &= start >> 4;
      start &= (std::uint64_t{1} << 57) - 1;  // bits 57.. would need bits past 63
      if (start == 0) {
        i += 57;
        continue;
      }
      i += static_cast<std::size_t>(__builtin_ctzll(start));
    } else
#endif
    if (run_length(in + i, in[i - 1], kMinMatch) < kMinMatch) {
      ++i;
      continue;
    }
    const std::uint8_t value = in[i - 1];
    const std::size_t len = kMinMatch + run_length(in + i + kMinMatch, value, std::min<std::size_t>(258, end - i) - kMinMatch);
    matches.push_back({static_cast<std::uint32_t>(i - begin), static_cast<std::uint32_t>(len)});
    ++freq[lengths[len].symbol];
    i += len;
  }
  ByteCounts literals;
  const bool sampled = end - begin >= kSampledBlock;
  if (sampled) literals.stride = kCountStride;
  std::size_t at = begin;
  for (const Match& m : matches) {
    literals.add(in + at, begin + m.at - at);
    at = begin + m.at + m.length;
  }
  literals.add(in + at, end - at);
  literals.sum_into(freq);
  if (sampled) {  // a literal the sample missed still needs a code
    const auto [lo, hi] = byte_range(in + begin, end - begin);
    for (int v = lo; v <= hi; ++v) freq[v] = std::max<std::uint32_t>(freq[v], 1);
  }
}

// [SECTION] writing blocks: stored, matches, literals

// Bits of a stored block (or blocks, above 65,535 bytes) of n bytes starting at bit offset `fill`.
std::uint64_t stored_bits(std::size_t n, int fill) {
  std::uint64_t bits = 0;
  do {
    const std::size_t piece = std::min(n, kMaxStored);
    bits += 3 + static_cast<std::uint64_t>((8 - (fill + 3) % 8) % 8) + 32 + 8 * static_cast<std::uint64_t>(piece);
    fill = 0;
    n -= piece;
  } while (n > 0);
  return bits;
}

void put_stored(BitWriter& w, const std::uint8_t* p, std::size_t n, bool last) {
  do {
    const std::size_t piece = std::min(n, kMaxStored);
    n -= piece;
    w.put(last && n == 0 ? 1 : 0, 1);
    w.put(0, 2);
    w.align();
    const std::uint8_t header[4] = {static_cast<std::uint8_t>(piece), static_cast<std::uint8_t>(piece >> 8),
                                    static_cast<std::uint8_t>(~piece), static_cast<std::uint8_t>(~piece >> 8)};
    w.bytes(header, 4);
    w.bytes(p, piece);
    p += piece;
  } while (n > 0);
}

// A match as one write: length code, its extra bits, then distance code 0 (canonical code 0,
// one bit).
inline void put_match(BitWriter& w, std::uint32_t length, const std::uint16_t* codes, const std::uint8_t* lengths) {
  const LengthCode& c = length_codes()[length];
  const int code_len = lengths[c.symbol];
  w.put(codes[c.symbol] | (static_cast<std::uint64_t>(c.extra) << code_len), code_len + c.extra_bits + 1);
}

// Literals two to a write (at most 28 bits).
inline void put_literals(BitWriter& w, const std::uint8_t* p, std::size_t n, const std::uint32_t* literal) {
  std::size_t at = 0;
  for (; at + 2 <= n; at += 2) {
    const std::uint32_t a = literal[p[at]], b = literal[p[at + 1]];
    const int la = static_cast<int>(a >> 16);
    w.put((a & 0xffff) | (std::uint64_t{b & 0xffff} << la), la + static_cast<int>(b >> 16));
  }
  if (at < n) w.put(literal[p[at]] & 0xffff, static_cast<int>(literal[p[at]] >> 16));
}

// The block's symbols after its header: literals and matches in order, then the end of block.
// The writer's state lives in a local copy for the loop: its byte stores cannot alias a local
// whose address is not taken, so the state stays in registers.
void put_symbols(BitWriter& w, const std::uint8_t* p, std::size_t n, const std::vector<Match>& matches, const std::uint16_t* codes,
                 const std::uint8_t* lengths) {
  std::uint32_t literal[256];  // code | length << 16
  for (int v = 0; v < 256; ++v) literal[v] = codes[v] | static_cast<std::uint32_t>(lengths[v]) << 16;
  BitWriter lw = w;
  std::size_t at = 0;
  for (const Match& m : matches) {
    put_literals(lw, p + at, m.at - at, literal);
    put_match(lw, m.length, codes, lengths);
    at = m.at + m.length;
  }
  put_literals(lw, p + at, n - at, literal);
  lw.put(codes[kEndOfBlock], lengths[kEndOfBlock]);
  w = lw;
}

#if defined(__x86_64__)
// Literals 64 at a time: codes looked up in registers and joined four to a write (at most 56
// bits, since literal codes are at most 14 bits); short stretches as in put_literals.
__attribute__((target("avx512f,avx512bw,avx512vbmi,bmi2"))) inline void put_literals_avx512(BitWriter& w, const std::uint8_t* p, std::size_t n,
                                                                                        const LiteralTables& t, const std::uint32_t* literal) {
  if (n < 16) {
    put_literals(w, p, n, literal);
    return;
  }
  alignas(64) std::uint64_t bits[16];
  std::uint8_t count[16];
  for (std::size_t at = 0; at < n; at += 64) {
    const std::size_t k = std::min<std::size_t>(64, n - at);
    literal_groups(p + at, k, t, bits, count);
    // Read the groups back from memory rather than let the compiler extract each lane from the
    // registers: the loads are cheaper than the extracts (about 5% of the whole encoder).
    asm volatile("" : : "r"(bits), "r"(count) : "memory");
    if (k == 64) {
      for (int g = 0; g < 16; ++g) w.put(bits[g], count[g]);
    } else {
      for (std::size_t g = 0; g < (k + 3) / 4; ++g) w.put(bits[g], count[g]);
    }
  }
}

// put_symbols with the literals 64 at a time; the same bytes.
__attribute__((target("avx512f,avx512bw,avx512vbmi,bmi2"))) void put_symbols_avx512(BitWriter& w, const std::uint8_t* p, std::size_t n,
                                                                                const std::vector<Match>& matches,
                                                                                const std::uint16_t* codes, const std::uint8_t* lengths) {
  LiteralTables t;
  std::uint32_t literal[256];
  for (int v = 0; v < 256; ++v) {
    t.lo[v] = static_cast<std::uint8_t>(codes[v]);
    t.hi[v] = static_cast<std::uint8_t>(codes[v] >> 8);
    t.len[v] = lengths[v];
    literal[v] = codes[v] | static_cast<std::uint32_t>(lengths[v]) << 16;
  }
  BitWriter lw = w;
  std::size_t at = 0;
  for (const Match& m : matches) {
    put_literals_avx512(lw, p + at, m.at - at, t, literal);
    put_match(lw, m.length, codes, lengths);
    at = m.at + m.length;
  }
  put_literals_avx512(lw, p + at, n - at, t, literal);
  lw.put(codes[kEndOfBlock], lengths[kEndOfBlock]);
  w = lw;
}

bool cpu_has_avx512() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi") &&
           __builtin_cpu_supports("bmi2");
  }();
  return yes;
}
#else
bool cpu_has_avx512() { return false; }
void put_symbols_avx512(BitWriter& w, const std::uint8_t* p, std::size_t n, const std::vector<Match>& matches, const std::uint16_t* codes,
                        const std::uint8_t* lengths) {
  put_symbols(w, p, n, matches, codes, lengths);
}
#endif

// [SECTION] the dynamic block's header

// The code lengths of both alphabets as code-length symbols (§3.2.7): 0-15 literally, 16 repeats
// the previous length 3-6 times, 17 and 18 give 3-10 and 11-138 zeros.
struct CodeLengthSymbol {
  std::uint8_t symbol;
  std::uint8_t extra;
};
std::size_t run_length_code_lengths(const std::uint8_t* lengths, int n, CodeLengthSymbol* out) {
  std::size_t k = 0;
  for (int i = 0; i < n;) {
    const std::uint8_t v = lengths[i];
    int run = 1;
    while (i + run < n && lengths[i + run] == v) ++run;
    i += run;
    if (v == 0) {
      while (run >= 11) {
        const int r = std::min(run, 138);
        out[k++] = {18, static_cast<std::uint8_t>(r - 11)};
        run -= r;
      }
      if (run >= 3) {
        out[k++] = {17, static_cast<std::uint8_t>(run - 3)};
        run = 0;
      }
    } else {
      out[k++] = {v, 0};
      --run;
      while (run >= 3) {
        const int r = std::min(run, 6);
        out[k++] = {16, static_cast<std::uint8_t>(r - 3)};
        run -= r;
      }
    }
    while (run-- > 0) out[k++] = {v, 0};
  }
  return k;
}

constexpr int kCodeLengthExtraBits[kCodeLengthSymbols] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 3, 7};

// Whether a block is (nearly) uniformly distributed bytes without runs, like the low byte plane of
// non-zero halves: no code gains more than about 3% on it. Decided from a sample of about 2,048
// evenly spaced bytes so that such a block is stored without the full analysis. A sample
// underestimates the entropy (by about 0.1 bit per byte at this size), so the test errs towards
// coding.
bool looks_incompressible(const std::uint8_t* p, std::size_t n) {
  if (n < 4096) return false;
  constexpr std::size_t kSamples = 2048;
  // c * log2(c) for every count a sample can reach (fewer than 2 * kSamples).
  static const std::vector<float> c_log_c = [] {
    std::vector<float> t(2 * kSamples);
    for (std::size_t c = 1; c < t.size(); ++c) t[c] = static_cast<float>(static_cast<double>(c) * std::log2(static_cast<double>(c)));
    return t;
  }();
  const std::size_t stride = n / kSamples;
  std::uint32_t count[256] = {};
  std::size_t sampled = 0, repeats = 0;
  // Runs (the run-length code may gain) show early: the first eighth of the sample decides them.
  for (std::size_t i = 1, checked = kSamples / 8; i < n; i += stride, ++sampled) {
    ++count[p[i]];
    repeats += p[i] == p[i - 1];
    if (sampled == checked && repeats * 64 > sampled) return false;
  }
  if (repeats * 64 > sampled) return false;
  double sum = 0;
  for (const std::uint32_t c : count) sum += c_log_c[c];
  const double bits_per_byte = std::log2(static_cast<double>(sampled)) - sum / static_cast<double>(sampled);
  return bits_per_byte > 7.75;
}

// One block of in[begin, end): a dynamic-Huffman block, or a stored one when that is no larger
// (or when a sample says it would barely be smaller).
void put_block(BitWriter& w, const std::uint8_t* in, std::size_t begin, std::size_t end, bool last,
               std::vector<Match>& matches, bool avx512) {
  const std::size_t n = end - begin;
  if (looks_incompressible(in + begin, n)) {
    put_stored(w, in + begin, n, last);
    return;
  }
  std::array<std::uint32_t, kLitLenSymbols> freq{};
  find_matches(in, begin, end, matches, freq.data());
  freq[kEndOfBlock] = 1;

  std::uint8_t lengths[kLitLenSymbols + kDistanceSymbols] = {};
  code_lengths(freq.data(), kLitLenSymbols, kMaxLiteralBits, lengths);
  lengths[kLitLenSymbols + 0] = 1;  // distance 1
  lengths[kLitLenSymbols + 1] = 1;  // unused; makes the distance code complete, as inflate requires
  int lit_count = kLitLenSymbols;
  while (lit_count > 257 && lengths[lit_count - 1] == 0) --lit_count;
  // The two alphabets' lengths form one sequence for the run-length code.
  std::uint8_t sequence[kLitLenSymbols + kDistanceSymbols];
  std::copy(lengths, lengths + lit_count, sequence);
  std::copy(lengths + kLitLenSymbols, lengths + kLitLenSymbols + kDistanceSymbols, sequence + lit_count);
  CodeLengthSymbol cl[kLitLenSymbols + kDistanceSymbols];
  const std::size_t cl_count = run_length_code_lengths(sequence, lit_count + kDistanceSymbols, cl);
  std::array<std::uint32_t, kCodeLengthSymbols> cl_freq{};
  for (std::size_t k = 0; k < cl_count; ++k) ++cl_freq[cl[k].symbol];
  std::uint8_t cl_lengths[kCodeLengthSymbols] = {};
  code_lengths(cl_freq.data(), kCodeLengthSymbols, kMaxCodeLengthBits, cl_lengths);
  int cl_sent = kCodeLengthSymbols;
  while (cl_sent > 4 && cl_lengths[kCodeLengthOrder[cl_sent - 1]] == 0) --cl_sent;

  std::uint64_t bits = 3 + 5 + 5 + 4 + 3 * static_cast<std::uint64_t>(cl_sent);
  for (int s = 0; s < kCodeLengthSymbols; ++s)
    bits += cl_freq[static_cast<std::size_t>(s)] * static_cast<std::uint64_t>(cl_lengths[s] + kCodeLengthExtraBits[s]);
  for (int s = 0; s < kLitLenSymbols; ++s) bits += freq[static_cast<std::size_t>(s)] * static_cast<std::uint64_t>(lengths[s]);
  for (int k = 0; k < 29; ++k)  // extra bits of the length symbols, plus one bit for the distance
    bits += freq[static_cast<std::size_t>(257 + k)] * static_cast<std::uint64_t>(kLengthExtraBits[k] + 1);
  if (bits >= stored_bits(n, w.fill())) {
    put_stored(w, in + begin, n, last);
    return;
  }

  std::uint16_t codes[kLitLenSymbols] = {};
  canonical_codes(lengths, kLitLenSymbols, codes);
  std::uint16_t cl_codes[kCodeLengthSymbols] = {};
  canonical_codes(cl_lengths, kCodeLengthSymbols, cl_codes);
  w.put(last ? 1 : 0, 1);
  w.put(2, 2);  // dynamic Huffman
  w.put(static_cast<std::uint64_t>(lit_count - 257), 5);
  w.put(kDistanceSymbols - 1, 5);
  w.put(static_cast<std::uint64_t>(cl_sent - 4), 4);
  for (int k = 0; k < cl_sent; ++k) w.put(cl_lengths[kCodeLengthOrder[k]], 3);
  for (std::size_t k = 0; k < cl_count; ++k) {
    w.put(cl_codes[cl[k].symbol], cl_lengths[cl[k].symbol]);
    if (const int extra = kCodeLengthExtraBits[cl[k].symbol]) w.put(cl[k].extra, extra);
  }
  if (avx512)
    put_symbols_avx512(w, in + begin, n, matches, codes, lengths);
  else
    put_symbols(w, in + begin, n, matches, codes, lengths);
}

}  // namespace

// [SECTION] the entry points

std::size_t rle_zlib_bound(std::size_t n, std::size_t plane) {
  if (plane == 0) plane = std::max<std::size_t>(n, 1);
  // Each block is at most its stored size (up to two stored pieces of 6 bytes' overhead), plus
  // the zlib header and checksum and 8 bytes of slack for the writer's whole-word stores.
  const std::size_t blocks = n / kMaxBlock + n / plane + 2;
  return 2 + n + 12 * blocks + 4 + 8;
}

bool rle_avx512_available() { return cpu_has_avx512(); }

std::size_t rle_zlib_compress(const std::uint8_t* in, std::size_t n, std::size_t plane, std::uint8_t* out, bool allow_avx512) {
  const bool avx512 = allow_avx512 && cpu_has_avx512();
  if (plane == 0) plane = std::max<std::size_t>(n, 1);
  BitWriter w(out);
  const std::uint8_t header[2] = {0x78, 0x01};  // deflate, 32 KiB window, fastest; (0x7801 % 31 == 0)
  w.bytes(header, 2);
  thread_local std::vector<Match> matches;
  if (n == 0) {
    put_stored(w, in, 0, true);
  } else {
    for (std::size_t begin = 0; begin < n;) {
      const std::size_t plane_end = std::min(n, (begin / plane + 1) * plane);
      const std::size_t end = std::min(plane_end, begin + kMaxBlock);
      put_block(w, in, begin, end, end == n, matches, avx512);
      begin = end;
    }
  }
  w.align();
  const std::uint32_t adler = libdeflate_adler32(1, in, n);
  const std::uint8_t trailer[4] = {static_cast<std::uint8_t>(adler >> 24), static_cast<std::uint8_t>(adler >> 16),
                                   static_cast<std::uint8_t>(adler >> 8), static_cast<std::uint8_t>(adler)};
  w.bytes(trailer, 4);
  return w.size();
}

}  // namespace luka::capture
