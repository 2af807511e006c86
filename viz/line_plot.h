// Line plots of a metric against a parameter, one line per setting of the others (what `luka
// sweep` draws: perplexity against the refined fraction per compressor, as the LuKA paper's
// Figs. 4-5). Written as PNG, SVG or PDF by the extension, like the attention figures.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace luka::viz {

struct LineSeries {
  std::string label;
  std::vector<double> x, y;  // same length; drawn in the order given
};

struct LinePlot {
  std::string title, x_label, y_label;
  std::string subtitle;  // under the title, smaller (e.g. the settings every line shares)
  std::vector<LineSeries> series;
  // Categorical x: when not empty, series' x values are indices into these labels.
  std::vector<std::string> x_categories;
  // A horizontal reference (e.g. dense perplexity), drawn dashed with its label.
  std::optional<double> reference_y;
  std::string reference_label;
  double width = 640, height = 420;  // points
};

// Throws luka::Error naming the file for an unknown extension, a write failure, or a plot with no
// finite point.
void write_line_plot(const LinePlot& plot, const std::filesystem::path& path);

// Tick values for [lo, hi]: about `target` steps of 1, 2 or 5 times a power of ten.
std::vector<double> nice_ticks(double lo, double hi, int target);

}  // namespace luka::viz
