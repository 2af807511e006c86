// Line plots (viz/line_plot.h): tick choice, and a drawn plot whose lines, markers and reference
// line land where the data says.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "core/util/error.h"
#include "viz/line_plot.h"
#include "viz/png.h"

namespace fs = std::filesystem;
using luka::viz::nice_ticks;

TEST(LinePlot, NiceTicksAreOneTwoFiveSteps) {
  EXPECT_EQ(nice_ticks(0, 1, 5), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1.0}));
  EXPECT_EQ(nice_ticks(23.1, 31.7, 4), (std::vector<double>{24, 26, 28, 30}));
  EXPECT_EQ(nice_ticks(-0.5, 0.5, 2), (std::vector<double>{-0.5, 0, 0.5}));
  const auto big = nice_ticks(167849, 170620, 6);
  ASSERT_GE(big.size(), 3u);
  EXPECT_DOUBLE_EQ(big[1] - big[0], 500);
  EXPECT_EQ(nice_ticks(3, 3, 5), (std::vector<double>{3}));
}

TEST(LinePlot, LinesMarkersAndReferenceLandOnTheData) {
  const fs::path dir = fs::path(LUKA_TEST_WORK) / "viz";
  fs::create_directories(dir);
  luka::viz::LinePlot p;
  p.title = "perplexity against top_frac";
  p.x_label = "top_frac";
  p.y_label = "perplexity";
  p.series = {{"mean", {0, 0.5, 1}, {40, 30, 26}}, {"attention_weighted", {0, 0.5, 1}, {29, 26, 25.5}}};
  p.reference_y = 25.472;
  p.reference_label = "dense";
  const fs::path png = dir / "line_plot.png";
  luka::viz::write_line_plot(p, png);
  const luka::viz::Image img = luka::viz::read_png(png);
  ASSERT_EQ(img.width, static_cast<int>(p.width * 2));
  ASSERT_EQ(img.height, static_cast<int>(p.height * 2));
  // Count pixels of the two series' colours (Tableau blue, orange) and of the reference grey.
  int blue = 0, orange = 0;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      const std::uint8_t* px = &img.rgba[(static_cast<std::size_t>(y) * img.width + x) * 4];
      if (std::abs(px[0] - 31) < 6 && std::abs(px[1] - 119) < 6 && std::abs(px[2] - 180) < 6) ++blue;
      if (std::abs(px[0] - 255) < 6 && std::abs(px[1] - 127) < 6 && std::abs(px[2] - 14) < 6) ++orange;
    }
  EXPECT_GT(blue, 500);
  EXPECT_GT(orange, 500);
  for (const char* ext : {".svg", ".pdf"}) {
    luka::viz::write_line_plot(p, dir / (std::string("line_plot") + ext));
    EXPECT_GT(fs::file_size(dir / (std::string("line_plot") + ext)), 1000u) << ext;
  }
  p.series = {{"nan", {0}, {std::nan("")}}};
  p.reference_y.reset();
  EXPECT_THROW(luka::viz::write_line_plot(p, dir / "empty.png"), luka::Error);
  EXPECT_THROW(luka::viz::write_line_plot(p, dir / "plot.gif"), luka::Error);
}
