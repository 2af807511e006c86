#include "viz/heatmap.h"

#include <cmath>

#include "core/util/error.h"

namespace luka::viz {

Rgb Image::pixel(int x, int y) const {
  const std::size_t i = (static_cast<std::size_t>(y) * static_cast<std::size_t>(width) + static_cast<std::size_t>(x)) * 4;
  return {rgba[i], rgba[i + 1], rgba[i + 2]};
}

Image render_heatmap(const float* values, std::int64_t rows, std::int64_t cols, int width, int height,
                     const HeatmapOptions& o) {
  if (rows <= 0 || cols <= 0) fail("heatmap", "empty map window");
  if (width <= 0 || height <= 0 || width > 1 << 14 || height > 1 << 14) fail("heatmap", "image size out of range");
  o.scale.validate();
  Image img;
  img.width = width;
  img.height = height;
  img.rgba.resize(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 4);
  const auto& table = o.colormap->table();
  std::vector<std::int64_t> col_of(static_cast<std::size_t>(width));
  for (int x = 0; x < width; ++x) col_of[static_cast<std::size_t>(x)] = static_cast<std::int64_t>(x) * cols / width;
  for (int y = 0; y < height; ++y) {
    const std::int64_t r = static_cast<std::int64_t>(y) * rows / height;
    const float* row = values + r * cols;
    std::uint8_t* out = img.rgba.data() + static_cast<std::size_t>(y) * static_cast<std::size_t>(width) * 4;
    for (int x = 0; x < width; ++x) {
      const std::int64_t c = col_of[static_cast<std::size_t>(x)];
      const float v = row[c];
      Rgb rgb = o.empty;
      if (!std::isnan(v) && !(o.causal && o.col0 + c > o.row0 + r)) rgb = table[static_cast<std::size_t>(Colormap::index(o.scale.normalize(v)))];
      out[4 * x] = rgb.r;
      out[4 * x + 1] = rgb.g;
      out[4 * x + 2] = rgb.b;
      out[4 * x + 3] = 255;
    }
  }
  return img;
}

}  // namespace luka::viz
