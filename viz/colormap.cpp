#include "viz/colormap.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/util/error.h"

namespace luka::viz {
namespace {

double srgb_to_linear(double c) { return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4); }
double linear_to_srgb(double c) { return c <= 0.0031308 ? 12.92 * c : 1.055 * std::pow(c, 1 / 2.4) - 0.055; }

std::uint8_t to_byte(double v) { return static_cast<std::uint8_t>(std::lround(std::clamp(v, 0.0, 1.0) * 255.0)); }

// A table by piecewise-linear interpolation in OKLab between anchors at evenly spaced positions.
std::array<Rgb, 256> interpolate(const std::vector<OkLab>& anchors) {
  std::array<Rgb, 256> t{};
  const double segments = static_cast<double>(anchors.size() - 1);
  for (int i = 0; i < 256; ++i) {
    const double x = i / 255.0 * segments;
    const std::size_t k = std::min(static_cast<std::size_t>(x), anchors.size() - 2);
    const double f = x - static_cast<double>(k);
    const OkLab& a = anchors[k];
    const OkLab& b = anchors[k + 1];
    t[static_cast<std::size_t>(i)] = to_srgb({a.L + (b.L - a.L) * f, a.a + (b.a - a.a) * f, a.b + (b.b - a.b) * f});
  }
  return t;
}

// Anchors as lightness, chroma and hue (degrees) in OKLab's polar form.
OkLab lch(double L, double C, double h_deg) {
  const double h = h_deg * M_PI / 180.0;
  return {L, C * std::cos(h), C * std::sin(h)};
}

}  // namespace

OkLab to_oklab(Rgb c) {
  const double r = srgb_to_linear(c.r / 255.0), g = srgb_to_linear(c.g / 255.0), b = srgb_to_linear(c.b / 255.0);
  const double l = std::cbrt(0.4122214708 * r + 0.5363325363 * g + 0.0514459929 * b);
  const double m = std::cbrt(0.2119034982 * r + 0.6806995451 * g + 0.1073969566 * b);
  const double s = std::cbrt(0.0883024619 * r + 0.2817188376 * g + 0.6299787005 * b);
  return {0.2104542553 * l + 0.7936177850 * m - 0.0040720468 * s, 1.9779984951 * l - 2.4285922050 * m + 0.4505937099 * s,
          0.0259040371 * l + 0.7827717662 * m - 0.8086757660 * s};
}

Rgb to_srgb(const OkLab& c) {
  const double l = std::pow(c.L + 0.3963377774 * c.a + 0.2158037573 * c.b, 3);
  const double m = std::pow(c.L - 0.1055613458 * c.a - 0.0638541728 * c.b, 3);
  const double s = std::pow(c.L - 0.0894841775 * c.a - 1.2914855480 * c.b, 3);
  const double r = 4.0767416621 * l - 3.3077115913 * m + 0.2309699292 * s;
  const double g = -1.2684380046 * l + 2.6097574011 * m - 0.3413193965 * s;
  const double b = -0.0041960863 * l - 0.7034186147 * m + 1.7076147010 * s;
  return {to_byte(linear_to_srgb(std::clamp(r, 0.0, 1.0))), to_byte(linear_to_srgb(std::clamp(g, 0.0, 1.0))),
          to_byte(linear_to_srgb(std::clamp(b, 0.0, 1.0)))};
}

const Colormap& Colormap::get(ColormapId id) {
  // ember: near-black violet -> purple -> crimson -> orange -> pale yellow, lightness 0.16 -> 0.97.
  static const Colormap ember("ember", interpolate({lch(0.16, 0.05, 290), lch(0.36, 0.14, 315), lch(0.55, 0.18, 15),
                                                     lch(0.75, 0.15, 60), lch(0.97, 0.07, 100)}));
  // balance: blue -> near-white -> red, lightness 0.45 -> 0.97 -> 0.45, equal chroma both sides.
  static const Colormap balance("balance", interpolate({lch(0.45, 0.14, 255), lch(0.72, 0.08, 245), lch(0.97, 0.0, 0),
                                                         lch(0.72, 0.09, 25), lch(0.45, 0.15, 25)}));
  return id == ColormapId::kEmber ? ember : balance;
}

const Colormap& Colormap::by_name(const std::string& name) {
  if (name == "ember") return get(ColormapId::kEmber);
  if (name == "balance") return get(ColormapId::kBalance);
  fail("colormap", "unknown colormap '" + name + "' (ember, balance)");
}

int Colormap::index(double t) {
  if (!(t >= 0)) return 0;  // also NaN
  if (t >= 1) return 255;
  return static_cast<int>(std::lround(t * 255.0));
}

Rgb Colormap::at(double t) const { return table_[static_cast<std::size_t>(index(t))]; }

double ColorScale::normalize(double v) const {
  switch (kind) {
    case kLinear: return (v - vmin) / (vmax - vmin);
    case kLog: return v <= vmin ? 0.0 : (std::log10(v) - std::log10(vmin)) / (std::log10(vmax) - std::log10(vmin));
    case kSymmetric: return 0.5 + 0.5 * v / vmax;
  }
  return 0;
}

void ColorScale::validate() const {
  if (!(vmax > vmin) && kind != kSymmetric) fail("colour scale", "vmax must be above vmin");
  if (kind == kLog && !(vmin > 0)) fail("colour scale", "a log scale needs vmin > 0");
  if (kind == kSymmetric && !(vmax > 0)) fail("colour scale", "a symmetric scale needs vmax > 0");
}

}  // namespace luka::viz
