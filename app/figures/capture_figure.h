// The full query x key map of a capture (prefill map, then one row per decode step) at a pyramid
// level, in the effective, dense or difference view; and the figure of it that `luka export` and
// the Studio's export button both draw.
#pragma once

#include <cstdint>
#include <string>

#include "captures/capture.h"
#include "viz/figure.h"

namespace luka::figures {

enum class MapView { kEffective, kDense, kDifference };
const char* to_string(MapView v);          // "effective", "dense", "difference"
MapView parse_map_view(const std::string& s);  // throws luka::Error

struct FullWindow {
  std::int64_t size = 0;  // cells per side of the full map at this level: ceil((prompt + steps) / 2^level)
  std::int64_t row0 = 0, col0 = 0, rows = 0, cols = 0;
  std::vector<float> values;  // [rows][cols]; NaN where a dense row is missing (shadow off)
};

// Cells [row0, row0 + rows) x [col0, col0 + cols) (clipped) of the map over prompt + `steps`
// tokens at `level`: queries below the prompt length come from the prefill pyramid, later
// queries from decode steps 1..steps, max-pooled to the level (difference: the value of largest
// magnitude). The prefill part of the dense view is the recorded prefill map (exact attention),
// and of the difference view 0.
FullWindow full_window(const capture::CaptureView& view, int layer, int head, int level, std::int64_t steps, MapView map_view,
                       std::int64_t row0, std::int64_t col0, std::int64_t rows, std::int64_t cols);

// Decode rows: steps first..last as rows of a step x key map, each step's keys max-pooled
// `2^pool_level` per column (difference: the value of largest magnitude), columns
// [col0, col0 + cols) clipped to the last step's keys; plus the prefill collapsed into one row,
// the attention of its last query (prompt token n - 1), which every mode computes exactly and
// identically (0 in the difference view). Cells right of a step's last key are NaN, and so is the
// whole row of a step whose dense shadow was off in the dense and difference views (`missing`).
struct DecodeRows {
  std::int64_t first = 1, steps = 0;  // rows: steps first .. first + steps - 1
  std::int64_t pool = 1, col0 = 0, cols = 0;
  std::int64_t keys = 0;              // keys of the last step: prompt + last
  std::vector<float> prefill;         // [cols]
  std::vector<float> values;          // [steps][cols]
  std::vector<std::uint8_t> missing;  // [steps]
};
DecodeRows decode_rows(const capture::CaptureView& view, int layer, int head, MapView map_view, std::int64_t first, std::int64_t last,
                       int pool_level, std::int64_t col0, std::int64_t cols);

// Throws luka::Error unless captures `a` and `b` ran the same prompt (the same prompt token ids),
// so that their maps can be subtracted cell by cell.
void check_comparable(const capture::CaptureView& a, const capture::CaptureView& b);
// a -= b, cell by cell (decode rows read with the same arguments from two comparable captures).
void subtract(DecodeRows& a, const DecodeRows& b);

// The colour scale of decode rows, fitted to the values shown (NaN skipped): linear 0..max, log
// from min(log_min, max / 10) to max, or symmetric to the largest |value| in the difference view.
viz::HeatmapOptions decode_rows_options(MapView map_view, const DecodeRows& rows, bool log_scale, double log_min = 1e-4);

// The figure of the whole map at `level` over the prompt and decode steps 1..steps.
viz::Figure figure_from_capture(const capture::CaptureView& view, int layer, int head, int level, std::int64_t steps, bool log_scale,
                                MapView map_view = MapView::kEffective);

// The comparison of two captures of the same prompt (check_comparable): B − A of their effective
// attention over the prompt and decode steps 1..steps at `level`, cell by cell (NaN where either
// is; at a level above 0, each map's max-pooled cell), on a symmetric scale as wide as the largest |difference|; A's tokens and topics, and both
// runs' modes in the title. What the Studio's export writes while comparing.
viz::Figure comparison_figure(const capture::CaptureView& a, const capture::CaptureView& b, int layer, int head, int level,
                              std::int64_t steps);

// Small multiples of the same map: every recorded head of `layer` (heads = true) or `head` in
// every recorded layer, at the finest stored level of at most 256 cells per side.
viz::GridFigure grid_from_capture(const capture::CaptureView& view, bool heads, int layer, int head, std::int64_t steps, bool log_scale,
                                  MapView map_view = MapView::kEffective);

// Colours for a view of `values`: ember on a log (from log_min) or linear 0..1 scale, or for the
// difference view balance on a symmetric scale as wide as the largest |value|. Causal mask on.
viz::HeatmapOptions map_view_options(MapView view, const std::vector<float>& values, bool log_scale, double log_min = 1e-4);

// The finest stored level of at most `max_cells` cells per side.
int default_figure_level(const capture::Layout& layout, std::int64_t max_cells = 1024);

}  // namespace luka::figures
