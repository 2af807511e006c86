#include "captures/pyramid.h"

#include <algorithm>

#include "captures/half.h"
#include "core/util/error.h"

namespace luka::capture {

PyramidBuilder::PyramidBuilder(int layer, int heads, std::int64_t n, std::vector<int> stored,
                               std::function<std::int64_t(int)> band_rows, std::function<void(MapRows&&)> emit)
    : layer_(layer), heads_(heads), n_(n), emit_(std::move(emit)) {
  if (stored.empty() || n <= 0) fail("pyramid", "nothing to build");
  top_ = *std::max_element(stored.begin(), stored.end());
  levels_.resize(static_cast<std::size_t>(top_) + 1);
  for (int k = 0; k <= top_; ++k) {
    Level& L = levels_[k];
    L.size = level_size(n, k);
    L.stored = std::find(stored.begin(), stored.end(), k) != stored.end();
    if (L.stored) {
      L.band = std::max<std::int64_t>(1, std::min(band_rows(k), L.size));
      L.band_buf.assign(static_cast<std::size_t>(heads_ * L.band * L.size), 0.f);
    }
    if (k < top_) L.carry.assign(static_cast<std::size_t>(heads_ * L.size), 0.f);
  }
}

void PyramidBuilder::add_rows(std::int64_t row0, std::int64_t m, const float* data) {
  if (row0 != next_row_ || m <= 0 || row0 + m > n_) fail("pyramid", "rows out of order");
  next_row_ += m;
  push(0, m, data);
}

void PyramidBuilder::flush_band(int k) {
  Level& L = levels_[k];
  if (L.band_fill == 0) return;
  MapRows out;
  out.layer = layer_;
  out.level = k;
  out.row0 = L.band_row0;
  out.rows = L.band_fill;
  out.cols = std::min(L.size, L.band_row0 + L.band_fill);
  out.data.resize(static_cast<std::size_t>(heads_ * out.rows * out.cols));
  for (int h = 0; h < heads_; ++h)
    for (std::int64_t r = 0; r < out.rows; ++r)
      floats_to_halves(L.band_buf.data() + (h * L.band + r) * L.size, out.data.data() + (h * out.rows + r) * out.cols,
                       static_cast<std::size_t>(out.cols));
  L.band_row0 += L.band_fill;
  L.band_fill = 0;
  emit_(std::move(out));
}

void PyramidBuilder::push(int k, std::int64_t m, const float* data) {
  Level& L = levels_[k];
  const std::int64_t S = L.size;
  if (L.stored) {
    for (std::int64_t done = 0; done < m;) {
      const std::int64_t take = std::min(m - done, L.band - L.band_fill);
      for (int h = 0; h < heads_; ++h)
        std::copy_n(data + (h * m + done) * S, take * S, L.band_buf.data() + (h * L.band + L.band_fill) * S);
      L.band_fill += take;
      done += take;
      if (L.band_fill == L.band) flush_band(k);
    }
  }
  const std::int64_t first_row = L.rows_in;
  L.rows_in += m;
  if (k == top_) return;

  // Pair rows (2i, 2i+1) into row i of level k+1; the last row of an odd-sized level stands alone.
  const std::int64_t S2 = levels_[k + 1].size;
  const bool last_block = L.rows_in == S;
  std::int64_t avail = m + (L.has_carry ? 1 : 0);
  const std::int64_t out_rows = last_block ? (avail + 1) / 2 : avail / 2;
  std::vector<float> next(static_cast<std::size_t>(heads_ * std::max<std::int64_t>(out_rows, 0) * S2), 0.f);
  (void)first_row;
  for (int h = 0; h < heads_; ++h) {
    // The i-th input row of this block, counting the carried row first.
    const auto row = [&](std::int64_t i) -> const float* {
      if (L.has_carry) return i == 0 ? L.carry.data() + h * S : data + (h * m + i - 1) * S;
      return data + (h * m + i) * S;
    };
    for (std::int64_t i = 0; i < out_rows; ++i) {
      const float* a = row(2 * i);
      const float* b = 2 * i + 1 < avail ? row(2 * i + 1) : nullptr;
      float* o = next.data() + (h * out_rows + i) * S2;
      for (std::int64_t j = 0; j < S2; ++j) {
        const std::int64_t c0 = 2 * j, c1 = 2 * j + 1;
        float v = a[c0];
        if (c1 < S) v = std::max(v, a[c1]);
        if (b) {
          v = std::max(v, b[c0]);
          if (c1 < S) v = std::max(v, b[c1]);
        }
        o[j] = v;
      }
    }
  }
  const bool odd_left = !last_block && (avail % 2 == 1);
  if (odd_left) {
    for (int h = 0; h < heads_; ++h) {
      const float* src = L.has_carry ? (avail - 1 == 0 ? L.carry.data() + h * S : data + (h * m + avail - 2) * S)
                                     : data + (h * m + avail - 1) * S;
      std::copy_n(src, S, L.carry.data() + h * S);
    }
  }
  L.has_carry = odd_left;
  if (out_rows > 0) push(k + 1, out_rows, next.data());
}

void PyramidBuilder::finish() {
  if (next_row_ != n_) fail("pyramid", "finish before all rows arrived");
  for (int k = 0; k <= top_; ++k)
    if (levels_[k].stored) flush_band(k);
}

}  // namespace luka::capture
