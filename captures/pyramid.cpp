#include "captures/pyramid.h"

#include <algorithm>
#include <string>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/util/half.h"
#include "core/util/error.h"

namespace luka::capture {
namespace {

// Halves ordered as the numbers they encode: flip negatives, set the sign bit of positives.
inline std::uint16_t order_key(std::uint16_t h) { return (h & 0x8000u) ? static_cast<std::uint16_t>(~h) : static_cast<std::uint16_t>(h | 0x8000u); }
inline std::uint16_t half_max(std::uint16_t a, std::uint16_t b) { return order_key(a) >= order_key(b) ? a : b; }

// o[j] = max(a[2j], a[2j+1], b[2j], b[2j+1]) for j < pairs (b == a: a row without a partner).
void pool_pairs(const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* o, std::int64_t pairs) {
  std::int64_t j = 0;
#if defined(__SSE2__)
  // Halves without the sign bit order as the signed 16-bit integers of their bits (NaNs above
  // infinity, as order_key has it), so eight outputs at a time take integer maxima. A negative
  // input sends the row back to the ordered maximum below.
  __m128i signs = _mm_setzero_si128();
  for (; j + 8 <= pairs; j += 8) {
    const __m128i a0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 2 * j));
    const __m128i a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 2 * j + 8));
    const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * j));
    const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * j + 8));
    signs = _mm_or_si128(signs, _mm_or_si128(_mm_or_si128(a0, a1), _mm_or_si128(b0, b1)));
    const __m128i m0 = _mm_max_epi16(a0, b0), m1 = _mm_max_epi16(a1, b1);
    // Each 32-bit lane holds a column pair: the max of its two halves, zero-extended.
    const __m128i p0 = _mm_max_epi16(_mm_srli_epi32(_mm_slli_epi32(m0, 16), 16), _mm_srli_epi32(m0, 16));
    const __m128i p1 = _mm_max_epi16(_mm_srli_epi32(_mm_slli_epi32(m1, 16), 16), _mm_srli_epi32(m1, 16));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + j), _mm_packs_epi32(p0, p1));  // values < 0x8000: exact
  }
  if (_mm_movemask_epi8(signs) & 0xAAAA) j = 0;  // the high byte of a lane had its sign bit set
#endif
  for (; j < pairs; ++j) o[j] = half_max(half_max(a[2 * j], a[2 * j + 1]), half_max(b[2 * j], b[2 * j + 1]));
}

}  // namespace

PyramidBuilder::PyramidBuilder(int heads, std::int64_t n, std::vector<int> stored,
                               std::function<std::int64_t(int)> band_rows, std::function<void(const BandView&)> emit,
                               ParallelFor parallel)
    : heads_(heads), n_(n), emit_(std::move(emit)), parallel_(std::move(parallel)) {
  if (stored.empty() || n <= 0) fail("pyramid", "nothing to build");
  top_ = *std::max_element(stored.begin(), stored.end());
  levels_.resize(static_cast<std::size_t>(top_) + 1);
  for (int k = 0; k <= top_; ++k) {
    Level& L = levels_[k];
    L.size = level_size(n, k);
    L.stored = std::find(stored.begin(), stored.end(), k) != stored.end();
    if (L.stored) L.band = std::max<std::int64_t>(1, std::min(band_rows(k), L.size));
    if (k < top_) L.carry.assign(static_cast<std::size_t>(heads_ * L.size), 0);
  }
}

void PyramidBuilder::add_rows(std::int64_t row0, std::int64_t m, const std::uint16_t* data) { add_level_rows(0, row0, m, data); }

void PyramidBuilder::add_level_rows(int level, std::int64_t row0, std::int64_t m, const std::uint16_t* data) {
  if (level < 0 || level > top_) fail("pyramid", "rows of level " + std::to_string(level) + ", which is not built");
  for (int k = 0; k < level; ++k)
    if (levels_[static_cast<std::size_t>(k)].stored) fail("pyramid", "rows of level " + std::to_string(level) + " above the stored level " + std::to_string(k));
  if (input_level_ >= 0 && input_level_ != level) fail("pyramid", "rows of two levels");
  const Level& L = levels_[static_cast<std::size_t>(level)];
  if (row0 != L.rows_in || m <= 0 || row0 + m > L.size) fail("pyramid", "rows out of order");
  input_level_ = level;
  next_row_ = std::min(n_, (row0 + m) << level);
  push(level, m, data);
}

void PyramidBuilder::add_rows(std::int64_t row0, std::int64_t m, const float* data) {
  std::vector<std::uint16_t> halves(static_cast<std::size_t>(heads_ * std::max<std::int64_t>(m, 0) * n_));
  floats_to_halves(data, halves.data(), halves.size());
  add_rows(row0, m, halves.data());
}

void PyramidBuilder::for_heads(const std::function<void(int)>& body) const {
  parallel_(heads_, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t h = b; h < e; ++h) body(static_cast<int>(h));
  });
}

void PyramidBuilder::emit(int k, std::int64_t row0, std::int64_t rows, const std::uint16_t* data, std::int64_t head_stride) {
  const std::int64_t S = levels_[k].size;
  emit_(BandView{k, row0, rows, std::min(S, row0 + rows), data, head_stride, S});
}

void PyramidBuilder::flush_band(int k) {
  Level& L = levels_[k];
  if (L.band_fill == 0) return;
  emit(k, L.band_row0, L.band_fill, L.band_buf.data(), L.band * L.size);
  L.band_row0 += L.band_fill;
  L.band_fill = 0;
}

void PyramidBuilder::push(int k, std::int64_t m, const std::uint16_t* data) {
  Level& L = levels_[k];
  const std::int64_t S = L.size;
  if (L.stored) {
    for (std::int64_t done = 0; done < m;) {
      if (L.band_fill == 0 && m - done >= L.band) {  // a whole band straight from the input
        emit(k, L.band_row0, L.band, data + done * S, m * S);
        L.band_row0 += L.band;
        done += L.band;
        continue;
      }
      const std::int64_t take = std::min(m - done, L.band - L.band_fill);
      L.band_buf.resize(static_cast<std::size_t>(heads_ * L.band * L.size));  // only for bands split across calls
      for_heads([&](int h) { std::copy_n(data + (h * m + done) * S, take * S, L.band_buf.data() + (h * L.band + L.band_fill) * S); });
      L.band_fill += take;
      done += take;
      if (L.band_fill == L.band) flush_band(k);
    }
  }
  L.rows_in += m;
  if (k == top_) return;

  // Pair rows (2i, 2i+1) into row i of level k+1; the last row of an odd-sized level stands alone.
  // Output row R is zero right of column R (causal input), so only columns 0..R are pooled.
  const std::int64_t S2 = levels_[k + 1].size, R0 = levels_[k + 1].rows_in;
  const bool last_block = L.rows_in == S;
  std::int64_t avail = m + (L.has_carry ? 1 : 0);
  const std::int64_t out_rows = last_block ? (avail + 1) / 2 : avail / 2;
  std::vector<std::uint16_t>& next = L.next;
  next.resize(static_cast<std::size_t>(heads_ * std::max<std::int64_t>(out_rows, 0) * S2));
  for_heads([&](int h) {
    // The i-th input row of this block, counting the carried row first.
    const auto row = [&](std::int64_t i) -> const std::uint16_t* {
      if (L.has_carry) return i == 0 ? L.carry.data() + h * S : data + (h * m + i - 1) * S;
      return data + (h * m + i) * S;
    };
    for (std::int64_t i = 0; i < out_rows; ++i) {
      const std::uint16_t* a = row(2 * i);
      const std::uint16_t* b = 2 * i + 1 < avail ? row(2 * i + 1) : nullptr;
      std::uint16_t* o = next.data() + (h * out_rows + i) * S2;
      const std::int64_t cols = std::min(S2, R0 + i + 1);
      const std::int64_t pairs = std::min(S / 2, cols);  // output columns with both inputs present
      pool_pairs(a, b ? b : a, o, pairs);
      if (pairs < cols) o[pairs] = b ? half_max(a[S - 1], b[S - 1]) : a[S - 1];  // odd size: the last column alone
      std::fill(o + cols, o + S2, std::uint16_t{0});
    }
  });
  const bool odd_left = !last_block && (avail % 2 == 1);
  if (odd_left) {
    for (int h = 0; h < heads_; ++h) {
      const std::uint16_t* src = L.has_carry ? (avail - 1 == 0 ? L.carry.data() + h * S : data + (h * m + avail - 2) * S)
                                     : data + (h * m + avail - 1) * S;
      std::copy_n(src, S, L.carry.data() + h * S);
    }
  }
  L.has_carry = odd_left;
  if (out_rows > 0) push(k + 1, out_rows, next.data());
}

void PyramidBuilder::finish() {
  if (next_row_ != n_) fail("pyramid", "finish before all rows arrived");
  for (int k = 0; k <= top_; ++k) {
    if (levels_[k].stored) flush_band(k);
    for (std::vector<std::uint16_t>* v : {&levels_[k].band_buf, &levels_[k].carry, &levels_[k].next}) std::vector<std::uint16_t>().swap(*v);
  }
}

}  // namespace luka::capture
