// Colormaps for attention heatmaps, designed in OKLab (a perceptual colour space): a sequential
// map whose lightness rises strictly from near-black to pale yellow ("ember", for attention
// mass), and a diverging map from blue through near-white to red ("balance", for differences),
// each a 256-entry table. Lightness that changes monotonically and evenly is what lets a reader
// compare values by eye; a hue sweep that goes dark-bright-dark (rainbow) would not.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace luka::viz {

struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
};

struct OkLab {
  double L = 0, a = 0, b = 0;
};

// sRGB (gamma-encoded 8-bit) <-> OKLab. to_srgb clamps out-of-gamut colours channel-wise.
OkLab to_oklab(Rgb c);
Rgb to_srgb(const OkLab& c);

enum class ColormapId { kEmber, kBalance };

class Colormap {
 public:
  static const Colormap& get(ColormapId id);
  static const Colormap& by_name(const std::string& name);  // "ember", "balance"; throws luka::Error

  const char* name() const { return name_; }
  const std::array<Rgb, 256>& table() const { return table_; }
  // The table entry for t in [0, 1] (clamped): index round(t * 255). NaN gives entry 0.
  Rgb at(double t) const;
  static int index(double t);

 private:
  Colormap(const char* name, std::array<Rgb, 256> table) : name_(name), table_(table) {}
  const char* name_;
  std::array<Rgb, 256> table_;
};

// Maps values to [0, 1]: linearly between vmin and vmax, or on a log10 axis (vmin > 0; values
// at or below vmin map to 0). Diverging scales map [-vmax, vmax] with 0 in the middle.
struct ColorScale {
  enum Kind { kLinear, kLog, kSymmetric };
  Kind kind = kLinear;
  double vmin = 0, vmax = 1;
  double normalize(double v) const;
  // Throws luka::Error for a scale that maps nothing (vmax <= vmin, log with vmin <= 0, ...).
  void validate() const;
};

}  // namespace luka::viz
