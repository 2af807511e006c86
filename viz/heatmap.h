// Heatmap images from map windows: each pixel takes the colour of the map value it covers
// (nearest sample, no blending, so single tokens stay crisp when zoomed in). The Studio uploads
// these as textures; figure export draws them into PNG, SVG and PDF.
#pragma once

#include <cstdint>
#include <vector>

#include "viz/colormap.h"

namespace luka::viz {

struct Image {
  int width = 0, height = 0;
  std::vector<std::uint8_t> rgba;  // row-major, top row first, 4 bytes per pixel
  Rgb pixel(int x, int y) const;
};

// `values` is [rows][cols] row-major. Pixel (x, y) shows value [y * rows / height][x * cols / width]
// (integer division). NaN values and cells above the diagonal of a causal map (when
// `causal_row0`/`causal_col0` are given, with `scale` tokens per cell) show `empty`.
struct HeatmapOptions {
  const Colormap* colormap = &Colormap::get(ColormapId::kEmber);
  ColorScale scale;
  Rgb empty{255, 255, 255};
  bool causal = false;           // mask cells whose key lies after their query
  std::int64_t row0 = 0, col0 = 0;  // the window's position in the map, for the causal mask
};
Image render_heatmap(const float* values, std::int64_t rows, std::int64_t cols, int width, int height,
                     const HeatmapOptions& options);

}  // namespace luka::viz
