#include "viz/line_plot.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/util/error.h"
#include "viz/render_file.h"

namespace luka::viz {

namespace {

// Ten well-separated line colours (Tableau's 10, in RGB).
constexpr double kPalette[10][3] = {{0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
                                    {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498},
                                    {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812}};

std::string tick_text(double v, double step) {
  char buf[32];
  const int decimals = step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

void text_at(cairo_t* cr, const std::string& s, double x, double y, double align_x, double align_y) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  cairo_move_to(cr, x - align_x * e.width - e.x_bearing, y - align_y * e.height - e.y_bearing);
  cairo_show_text(cr, s.c_str());
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  // The step of 1, 2 or 5 times a power of ten whose tick count is closest to the target.
  const int e0 = static_cast<int>(std::floor(std::log10((hi - lo) / std::max(1, target))));
  int best_m = 1, best_e = e0;
  double best = std::numeric_limits<double>::infinity();
  for (int e = e0 - 1; e <= e0 + 1; ++e)
    for (const int m : {1, 2, 5}) {
      const double count = (hi - lo) / (m * std::pow(10.0, e));
      if (std::abs(count - target) < best) best = std::abs(count - target), best_m = m, best_e = e;
    }
  // Tick n is n * m * 10^e, computed so that 0.6 is 6 / 10, not 3 * 0.2.
  const auto tick = [&](long long n) {
    return best_e < 0 ? static_cast<double>(n * best_m) / std::pow(10.0, -best_e) : static_cast<double>(n * best_m) * std::pow(10.0, best_e);
  };
  const double step = best_m * std::pow(10.0, best_e);
  std::vector<double> out;
  for (long long n = static_cast<long long>(std::ceil(lo / step - 1e-9)); tick(n) <= hi + step * 1e-9; ++n) out.push_back(tick(n));
  return out;
}

void write_line_plot(const LinePlot& p, const std::filesystem::path& path) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const LineSeries& s : p.series)
    for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) {
        x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
        y0 = std::min(y0, s.y[i]), y1 = std::max(y1, s.y[i]);
      }
  if (!std::isfinite(x0)) fail(path.string(), "the plot has no finite point");
  if (p.reference_y && std::isfinite(*p.reference_y)) y0 = std::min(y0, *p.reference_y), y1 = std::max(y1, *p.reference_y);
  const bool categorical = !p.x_categories.empty();
  if (categorical) x0 = -0.5, x1 = static_cast<double>(p.x_categories.size()) - 0.5;
  if (x1 - x0 < 1e-12) x0 -= 0.5, x1 += 0.5;
  if (y1 - y0 < 1e-12) y0 -= std::max(1e-6, std::abs(y0) * 0.05), y1 += std::max(1e-6, std::abs(y1) * 0.05);
  const double ypad = (y1 - y0) * 0.06, xpad = categorical ? 0 : (x1 - x0) * 0.04;
  y0 -= ypad, y1 += ypad, x0 -= xpad, x1 += xpad;

  render_file(path, p.width, p.height, p.title, [&](cairo_t* cr) {
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    // Legend width from the longest label.
    cairo_set_font_size(cr, 10);
    double legend_w = 0;
    for (const LineSeries& s : p.series) {
      cairo_text_extents_t e;
      cairo_text_extents(cr, s.label.c_str(), &e);
      legend_w = std::max(legend_w, e.x_advance);
    }
    legend_w = std::min(legend_w + 34, p.width * 0.4);
    const double left = 66, right = p.width - 16 - legend_w, top = p.subtitle.empty() ? 32 : 42, bottom = p.height - 52;
    const auto X = [&](double v) { return left + (v - x0) / (x1 - x0) * (right - left); };
    const auto Y = [&](double v) { return bottom - (v - y0) / (y1 - y0) * (bottom - top); };

    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cairo_set_font_size(cr, 13);
    text_at(cr, p.title, p.width / 2, 13, 0.5, 0.5);
    if (!p.subtitle.empty()) {
      cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
      cairo_set_font_size(cr, 9.5);
      text_at(cr, p.subtitle, p.width / 2, 28, 0.5, 0.5);
    }
    // Grid, ticks and tick labels.
    cairo_set_font_size(cr, 10);
    cairo_set_line_width(cr, 0.5);
    const std::vector<double> yt = nice_ticks(y0, y1, 6);
    const double ystep = yt.size() > 1 ? yt[1] - yt[0] : 1;
    for (const double v : yt) {
      cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
      cairo_move_to(cr, left, Y(v));
      cairo_line_to(cr, right, Y(v));
      cairo_stroke(cr);
      cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
      text_at(cr, tick_text(v, ystep), left - 6, Y(v), 1, 0.5);
    }
    std::vector<std::pair<double, std::string>> xt;
    if (categorical) {
      for (std::size_t i = 0; i < p.x_categories.size(); ++i) xt.emplace_back(static_cast<double>(i), p.x_categories[i]);
    } else {
      const std::vector<double> t = nice_ticks(x0, x1, 6);
      const double xstep = t.size() > 1 ? t[1] - t[0] : 1;
      for (const double v : t) xt.emplace_back(v, tick_text(v, xstep));
    }
    for (const auto& [v, label] : xt) {
      cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
      cairo_move_to(cr, X(v), top);
      cairo_line_to(cr, X(v), bottom);
      cairo_stroke(cr);
      cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
      text_at(cr, label, X(v), bottom + 6, 0.5, 0);
    }
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, left, top, right - left, bottom - top);
    cairo_stroke(cr);
    cairo_set_font_size(cr, 11);
    text_at(cr, p.x_label, (left + right) / 2, p.height - 14, 0.5, 0.5);
    cairo_save(cr);
    cairo_translate(cr, 16, (top + bottom) / 2);
    cairo_rotate(cr, -M_PI / 2);
    text_at(cr, p.y_label, 0, 0, 0.5, 0.5);
    cairo_restore(cr);

    cairo_save(cr);
    cairo_rectangle(cr, left, top, right - left, bottom - top);
    cairo_clip(cr);
    if (p.reference_y && std::isfinite(*p.reference_y)) {
      const double dash[] = {5, 3};
      cairo_set_dash(cr, dash, 2, 0);
      cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
      cairo_set_line_width(cr, 1);
      cairo_move_to(cr, left, Y(*p.reference_y));
      cairo_line_to(cr, right, Y(*p.reference_y));
      cairo_stroke(cr);
      cairo_set_dash(cr, nullptr, 0, 0);
    }
    for (std::size_t k = 0; k < p.series.size(); ++k) {
      const LineSeries& s = p.series[k];
      const double* c = kPalette[k % 10];
      cairo_set_source_rgb(cr, c[0], c[1], c[2]);
      cairo_set_line_width(cr, 1.8);
      bool pen = false;
      for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
        if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) {
          pen = false;
          continue;
        }
        if (pen)
          cairo_line_to(cr, X(s.x[i]), Y(s.y[i]));
        else
          cairo_move_to(cr, X(s.x[i]), Y(s.y[i]));
        pen = true;
      }
      cairo_stroke(cr);
      for (std::size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
        if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) {
          cairo_arc(cr, X(s.x[i]), Y(s.y[i]), 3, 0, 2 * M_PI);
          cairo_fill(cr);
        }
    }
    // The reference's label over the series, on a pale box so a line through it stays readable.
    if (p.reference_y && std::isfinite(*p.reference_y) && !p.reference_label.empty()) {
      cairo_set_font_size(cr, 9.5);
      cairo_text_extents_t e;
      cairo_text_extents(cr, p.reference_label.c_str(), &e);
      const double x = left + 4, y = Y(*p.reference_y) - 3;
      cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
      cairo_rectangle(cr, x - 2, y - e.height - 2, e.width + 4, e.height + 4);
      cairo_fill(cr);
      cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
      text_at(cr, p.reference_label, x, y, 0, 1);
    }
    cairo_restore(cr);

    // Legend.
    cairo_set_font_size(cr, 10);
    double ly = top + 6;
    for (std::size_t k = 0; k < p.series.size(); ++k) {
      const double* c = kPalette[k % 10];
      cairo_set_source_rgb(cr, c[0], c[1], c[2]);
      cairo_set_line_width(cr, 1.8);
      cairo_move_to(cr, right + 10, ly + 5);
      cairo_line_to(cr, right + 28, ly + 5);
      cairo_stroke(cr);
      cairo_arc(cr, right + 19, ly + 5, 2.5, 0, 2 * M_PI);
      cairo_fill(cr);
      cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
      std::string label = p.series[k].label;
      for (cairo_text_extents_t e;; label = label.substr(0, label.size() - 4) + "...") {
        cairo_text_extents(cr, label.c_str(), &e);
        if (e.x_advance <= p.width - right - 36 || label.size() <= 8) break;
      }
      text_at(cr, label, right + 32, ly + 5, 0, 0.5);
      ly += 16;
    }
  });
}

}  // namespace luka::viz
