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

// The figure of the whole map at `level` over the prompt and decode steps 1..steps.
viz::Figure figure_from_capture(const capture::CaptureView& view, int layer, int head, int level, std::int64_t steps, bool log_scale,
                                MapView map_view = MapView::kEffective);

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
