// The max-pooled image pyramid of a causal attention map (docs/design.md §6), built while the rows
// stream in: level 0 is the n x n map; level k+1[i][j] is the max of level k over rows 2i, 2i+1
// and columns 2j, 2j+1 (a missing last row or column counts as 0 — maps are probabilities, so
// this is the max of what exists). Max, not mean, so attention sinks and needles survive zooming
// out. Only the stored levels are emitted, in bands of whole chunk rows.
// Works on IEEE halves: rounding to half is monotone, so the max of rounded values is the rounded
// max, and every level equals the half rounding of the fp32 max-pool. The map must be causal
// (zero right of the diagonal, as attention probabilities are): the builder pools only the
// columns up to the diagonal and writes zeros right of it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "captures/capture.h"
#include "captures/chunk_codec.h"

namespace luka::capture {

// A band of rows of one level, as the builder holds it (no copy), valid during the emit call
// only: head h, row row0 + r, column c is data[h * head_stride + r * row_stride + c], c < cols.
struct BandView {
  int level = 0;
  std::int64_t row0 = 0, rows = 0, cols = 0;
  const std::uint16_t* data = nullptr;
  std::int64_t head_stride = 0, row_stride = 0;
};

class PyramidBuilder {
 public:
  // `band_rows(level)`: rows per emitted band (the dataset's chunk rows). Bands carry only the
  // columns left of the band's last row + 1: everything right of the diagonal is zero.
  // `parallel` runs the per-head work (copies, pooling) on several threads.
  PyramidBuilder(int heads, std::int64_t n, std::vector<int> stored, std::function<std::int64_t(int)> band_rows,
                 std::function<void(const BandView&)> emit, ParallelFor parallel = serial_for);

  // Rows [row0, row0 + m) of level 0, [heads][m][n] IEEE half; rows must arrive in order, without gaps.
  void add_rows(std::int64_t row0, std::int64_t m, const std::uint16_t* data);
  // The same from fp32 (rounded to half first).
  void add_rows(std::int64_t row0, std::int64_t m, const float* data);
  // Rows [row0, row0 + m) of level `level` ([heads][m][level size] IEEE half), the input max-pooled
  // already (by the device that computed it): the builder starts there. `level` must not exceed
  // the lowest stored level, and one builder takes rows of one level only.
  void add_level_rows(int level, std::int64_t row0, std::int64_t m, const std::uint16_t* data);
  // Emits what is left; all n rows must have arrived.
  void finish();
  std::int64_t rows_done() const { return next_row_; }

 private:
  struct Level {
    std::int64_t size = 0;   // rows = columns
    bool stored = false;
    std::int64_t band = 0;   // rows per band
    std::int64_t band_row0 = 0;
    std::vector<std::uint16_t> band_buf;  // [heads][band][size], rows band_row0 ..
    std::int64_t band_fill = 0;
    std::vector<std::uint16_t> carry;     // [heads][size]: an unpaired row waiting for its partner
    std::vector<std::uint16_t> next;      // scratch: the rows this level passes to the next
    bool has_carry = false;
    std::int64_t rows_in = 0;     // rows of this level received so far
  };
  void push(int k, std::int64_t m, const std::uint16_t* data);  // m rows of level k, [heads][m][size_k]
  void flush_band(int k);
  void emit(int k, std::int64_t row0, std::int64_t rows, const std::uint16_t* data, std::int64_t head_stride);
  void for_heads(const std::function<void(int)>& body) const;

  int heads_;
  std::int64_t n_;
  int top_;  // the coarsest level computed
  std::vector<Level> levels_;
  std::function<void(const BandView&)> emit_;
  ParallelFor parallel_;
  std::int64_t next_row_ = 0;  // level-0 rows covered so far
  int input_level_ = -1;       // the level rows arrive at (-1: none yet)
};

}  // namespace luka::capture
