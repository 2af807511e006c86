// Colormaps and heatmap images: OKLab against Ottosson's published reference values, the
// colormaps' lightness, and heatmap pixels against the colormap of known values.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/util/error.h"
#include "viz/colormap.h"
#include "viz/heatmap.h"

namespace luka::viz {
namespace {

TEST(OkLab, PublishedReferenceValues) {
  // sRGB primaries and white in OKLab, as published with the colour space (to 3 decimals).
  struct Ref {
    Rgb rgb;
    double L, a, b;
  };
  for (const Ref& r : {Ref{{255, 255, 255}, 1.000, 0.000, 0.000}, Ref{{255, 0, 0}, 0.628, 0.225, 0.126},
                       Ref{{0, 255, 0}, 0.866, -0.234, 0.179}, Ref{{0, 0, 255}, 0.452, -0.032, -0.312},
                       Ref{{0, 0, 0}, 0.0, 0.0, 0.0}}) {
    const OkLab lab = to_oklab(r.rgb);
    EXPECT_NEAR(lab.L, r.L, 1e-3);
    EXPECT_NEAR(lab.a, r.a, 1e-3);
    EXPECT_NEAR(lab.b, r.b, 1e-3);
  }
}

TEST(OkLab, RoundTripIsExactOnBytes) {
  for (int r = 0; r < 256; r += 5)
    for (int g = 0; g < 256; g += 5)
      for (int b = 0; b < 256; b += 5) {
        const Rgb c{static_cast<std::uint8_t>(r), static_cast<std::uint8_t>(g), static_cast<std::uint8_t>(b)};
        ASSERT_EQ(to_srgb(to_oklab(c)), c) << r << "," << g << "," << b;
      }
}

TEST(Colormap, EmberLightnessRisesStrictlyAndEvenly) {
  const auto& t = Colormap::get(ColormapId::kEmber).table();
  for (int i = 1; i < 256; ++i) ASSERT_GT(to_oklab(t[i]).L, to_oklab(t[i - 1]).L) << "entry " << i;
  // Even: lightness gained over any 16 entries is within a factor 2 of any other 16 (single
  // entries jitter with 8-bit rounding).
  double lo = 1e9, hi = 0;
  for (int i = 16; i < 256; ++i) {
    const double gain = to_oklab(t[i]).L - to_oklab(t[i - 16]).L;
    lo = std::min(lo, gain);
    hi = std::max(hi, gain);
  }
  EXPECT_LT(hi / lo, 2.0);
  EXPECT_LT(to_oklab(t[0]).L, 0.2);
  EXPECT_GT(to_oklab(t[255]).L, 0.9);
}

TEST(Colormap, BalanceIsLightInTheMiddleAndSymmetricInLightness) {
  const auto& t = Colormap::get(ColormapId::kBalance).table();
  for (int i = 1; i < 128; ++i) EXPECT_GT(to_oklab(t[i]).L, to_oklab(t[i - 1]).L - 1e-9) << i;
  for (int i = 128; i < 255; ++i) EXPECT_GT(to_oklab(t[i]).L, to_oklab(t[i + 1]).L - 1e-9) << i;
  for (int i = 0; i < 128; ++i) EXPECT_NEAR(to_oklab(t[i]).L, to_oklab(t[255 - i]).L, 0.02) << i;
  EXPECT_GT(to_oklab(t[0]).b, -1);  // blue end has negative b, red end positive a
  EXPECT_LT(to_oklab(t[0]).b, 0);
  EXPECT_GT(to_oklab(t[255]).a, 0);
  EXPECT_THROW(Colormap::by_name("rainbow"), Error);
}

TEST(Heatmap, PixelsAreTheColormapOfTheKnownValues) {
  const std::int64_t rows = 7, cols = 5;
  std::vector<float> v(rows * cols);
  std::mt19937 rng(3);
  for (float& x : v) x = std::ldexp(static_cast<float>(rng() % 1000 + 1) / 1000.f, -static_cast<int>(rng() % 12));
  const Colormap& cm = Colormap::get(ColormapId::kEmber);
  for (const bool log : {false, true}) {
    HeatmapOptions o;
    o.scale.kind = log ? ColorScale::kLog : ColorScale::kLinear;
    o.scale.vmin = log ? 1e-3 : 0.0;
    o.scale.vmax = 1.0;
    const Image img = render_heatmap(v.data(), rows, cols, 15, 21, o);  // 3 x 3 pixels per value
    ASSERT_EQ(img.rgba.size(), 15u * 21u * 4u);
    for (int y = 0; y < 21; ++y)
      for (int x = 0; x < 15; ++x) {
        const double value = v[(y / 3) * cols + x / 3];
        // The scale, computed here from its definition.
        double t = log ? (value <= 1e-3 ? 0 : (std::log10(value) + 3) / 3) : value;
        t = std::clamp(t, 0.0, 1.0);
        const Rgb want = cm.table()[static_cast<std::size_t>(std::lround(t * 255))];
        ASSERT_EQ(img.pixel(x, y), want) << "x " << x << " y " << y << " log " << log;
        ASSERT_EQ(img.rgba[(static_cast<std::size_t>(y) * 15 + x) * 4 + 3], 255);
      }
  }
}

TEST(Heatmap, CausalMaskNaNAndDownsampling) {
  std::vector<float> v = {0.5f, 0.5f, NAN, 1.0f};  // 2 x 2 window at map position (10, 10)
  HeatmapOptions o;
  o.causal = true;
  o.row0 = 10;
  o.col0 = 10;
  o.empty = {1, 2, 3};
  const Image img = render_heatmap(v.data(), 2, 2, 2, 2, o);
  const Colormap& cm = Colormap::get(ColormapId::kEmber);
  EXPECT_EQ(img.pixel(0, 0), cm.at(0.5));
  EXPECT_EQ(img.pixel(1, 0), (Rgb{1, 2, 3}));  // key 11 after query 10
  EXPECT_EQ(img.pixel(0, 1), (Rgb{1, 2, 3}));  // NaN
  EXPECT_EQ(img.pixel(1, 1), cm.at(1.0));
  // Fewer pixels than cells: pixel x shows cell x * cols / width.
  std::vector<float> ramp(100);
  for (int i = 0; i < 100; ++i) ramp[i] = i / 99.f;
  const Image small = render_heatmap(ramp.data(), 1, 100, 10, 1, HeatmapOptions{});
  for (int x = 0; x < 10; ++x) EXPECT_EQ(small.pixel(x, 0), cm.at(ramp[x * 10]));
  HeatmapOptions bad;
  bad.scale.kind = ColorScale::kLog;
  bad.scale.vmin = 0;
  EXPECT_THROW(render_heatmap(ramp.data(), 1, 100, 10, 1, bad), Error);
  EXPECT_THROW(render_heatmap(ramp.data(), 0, 100, 10, 1, HeatmapOptions{}), Error);
}

}  // namespace
}  // namespace luka::viz
