// Score grids: small multiples of a categorical heatmap, one panel per method, each cell a score
// coloured on one scale and printed in the cell; labelled rows and columns. The needle-in-a-haystack
// figure is one (depth on the y-axis, context length on the x-axis, one panel per preset). Written as
// PNG, SVG or PDF by the extension, through the same renderer as the attention figures.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "viz/colormap.h"

namespace luka::viz {

struct ScoreGridPanel {
  std::string title;
  std::vector<float> values;  // [rows][cols], row-major; NaN: no result (drawn grey, "-")
};

struct ScoreGrid {
  std::string title, x_label, y_label, scale_label;
  std::vector<std::string> row_labels, col_labels;  // rows top to bottom, columns left to right
  std::vector<ScoreGridPanel> panels;
  int columns = 3;  // panels per row of the figure
  const Colormap* colormap = &Colormap::get(ColormapId::kEmber);
  ColorScale scale{ColorScale::kLinear, 0, 100};
  const char* value_format = "%.0f";  // the number printed in each cell
};

// Where things are drawn, in points. The layout depends only on the numbers of rows, columns,
// panels and `columns` (not on the labels' text), so a reader of the file can find every cell.
struct GridRect {
  double x = 0, y = 0, w = 0, h = 0;
};
GridRect score_grid_cell(const ScoreGrid& grid, std::size_t panel, std::size_t row, std::size_t col);
double score_grid_width(const ScoreGrid& grid);
double score_grid_height(const ScoreGrid& grid);

// The colour a cell of `value` is filled with (NaN: the grey of a missing result).
Rgb score_grid_colour(const ScoreGrid& grid, float value);

// Throws luka::Error naming the file for an unknown extension, a write failure, or a grid with no
// panels or whose panels' values do not have rows x cols entries.
void write_score_grid(const ScoreGrid& grid, const std::filesystem::path& path);

}  // namespace luka::viz
