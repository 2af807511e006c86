// Publication figures of attention maps with cairo: the heatmap, token labels on both axes
// (thinned to fit), topic bands, a colour bar with ticks and a title; written as PNG, SVG or PDF
// (chosen by the file extension). The Studio's export and `luka export` draw the same figure.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "viz/heatmap.h"

namespace luka::viz {

struct FigureBand {
  std::int64_t begin = 0, end = 0;  // tokens [begin, end)
  std::string colour;               // "#rrggbb"
  std::string label;
};

struct Figure {
  std::string title;
  // The map: rows x cols cells of `cell` tokens each, starting at token (row0, col0) * cell.
  std::vector<float> values;
  std::int64_t rows = 0, cols = 0;
  std::int64_t row0 = 0, col0 = 0;
  double cell = 1;
  std::int64_t tokens = 0;            // map size in tokens (clips the last cell)
  std::vector<std::string> labels;    // a label per token (index = token position), may be empty
  std::vector<FigureBand> bands;      // topic bands on both axes, and a legend of their topics
  // The first decode token (the prompt's length) when the map goes past the prefill: a line on
  // both axes marks it, labelled; -1: none.
  std::int64_t decode_start = -1;
  HeatmapOptions options;             // colormap, scale, causal mask
  std::string scale_label;            // under the colour bar, e.g. "attention (log10)"
  double width = 760, height = 680;   // points (PNG: pixels x 2)
};

// Writes the figure; the format follows the extension (.png, .svg, .pdf). Throws luka::Error
// naming the file for an unknown extension or a write failure.
void write_figure(const Figure& figure, const std::filesystem::path& path);

// Small multiples: each panel's heatmap in a grid cell under its title (a short caption) with its
// topic bands, one colour bar for all (the first panel's colormap and scale, ticked as the single
// figure's), the topic legend and an overall title.
struct GridFigure {
  std::string title;
  std::vector<Figure> panels;
  int columns = 3;
  std::string scale_label;
  double width = 900, height = 760;  // points
};
void write_grid_figure(const GridFigure& grid, const std::filesystem::path& path);

}  // namespace luka::viz
