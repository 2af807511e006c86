// Looking at the Studio's screenshots from tests: pixels of a colour or colormap, differences
// between two shots, and where the frame drew things (the script's print_geometry lines).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "viz/colormap.h"
#include "viz/png.h"

namespace luka::test {

inline std::uint32_t rgb_of(const viz::Rgb& p) { return (std::uint32_t{p.r} << 16) | (std::uint32_t{p.g} << 8) | p.b; }

// Pixels of exactly `rgb` inside the rectangle [x0, x1) x [y0, y1).
inline std::size_t count_colour(const viz::Image& img, std::uint32_t rgb, int x0, int y0, int x1, int y1) {
  std::size_t n = 0;
  for (int y = std::max(y0, 0); y < std::min(y1, img.height); ++y)
    for (int x = std::max(x0, 0); x < std::min(x1, img.width); ++x) n += rgb_of(img.pixel(x, y)) == rgb;
  return n;
}

// The colormap's index of a pixel (the first entry of that colour), or -1 when the pixel is not
// one of its entries.
inline int colormap_index(const viz::Rgb& p, viz::ColormapId id) {
  static const auto index = [](viz::ColormapId which) {
    std::unordered_map<std::uint32_t, int> m;
    const auto& table = viz::Colormap::get(which).table();
    for (int i = 0; i < 256; ++i) m.emplace(rgb_of(table[static_cast<std::size_t>(i)]), i);
    return m;
  };
  static const std::unordered_map<std::uint32_t, int> ember = index(viz::ColormapId::kEmber), balance = index(viz::ColormapId::kBalance);
  const auto& m = id == viz::ColormapId::kEmber ? ember : balance;
  const auto it = m.find(rgb_of(p));
  return it == m.end() ? -1 : it->second;
}

// Pixels inside [x0, x1) x [y0, y1) that are entries of the colormap.
inline std::size_t count_colormap(const viz::Image& img, viz::ColormapId id, int x0, int y0, int x1, int y1) {
  std::size_t n = 0;
  for (int y = std::max(y0, 0); y < std::min(y1, img.height); ++y)
    for (int x = std::max(x0, 0); x < std::min(x1, img.width); ++x) n += colormap_index(img.pixel(x, y), id) >= 0;
  return n;
}

// Number of pixels that differ between two screenshots of the same size.
inline std::size_t differing_pixels(const viz::Image& x, const viz::Image& y) {
  EXPECT_EQ(x.width, y.width);
  EXPECT_EQ(x.height, y.height);
  std::size_t n = 0;
  for (std::size_t i = 0; i + 3 < std::min(x.rgba.size(), y.rgba.size()); i += 4)
    n += x.rgba[i] != y.rgba[i] || x.rgba[i + 1] != y.rgba[i + 1] || x.rgba[i + 2] != y.rgba[i + 2];
  return n;
}

inline std::size_t differing_pixels(const std::filesystem::path& a, const std::filesystem::path& b) {
  return differing_pixels(viz::read_png(a), viz::read_png(b));
}

struct Rect {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  std::string text;  // what a cell with a value says (a rect line's `text ...`)
  bool contains(double x, double y, double margin = 0) const { return x >= x0 - margin && x < x1 + margin && y >= y0 - margin && y < y1 + margin; }
};

// The `rect NAME x0 .. y0 .. x1 .. y1 .. [text TEXT]` lines of the script's print_geometry calls,
// one map per call, in order.
inline std::vector<std::map<std::string, Rect>> drawn_rects(const std::string& out) {
  std::vector<std::map<std::string, Rect>> calls;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("print_geometry ", 0) == 0) calls.emplace_back();
    if (line.rfind("rect ", 0) != 0 || calls.empty()) continue;
    std::istringstream words(line.substr(5));
    std::string name, key;
    Rect r;
    words >> name >> key >> r.x0 >> key >> r.y0 >> key >> r.x1 >> key >> r.y1;
    if (words >> key && key == "text") std::getline(words >> std::ws, r.text);
    calls.back()[name] = r;
  }
  return calls;
}

}  // namespace luka::test
