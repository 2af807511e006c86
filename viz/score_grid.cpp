#include "viz/score_grid.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/util/error.h"
#include "viz/render_file.h"

namespace luka::viz {

namespace {

// Fixed sizes (points): the layout depends on counts only.
constexpr double kCellW = 46, kCellH = 22;
constexpr double kLeft = 78;     // row labels and the y-axis title, left of each panel
constexpr double kTop = 42;      // the figure's title
constexpr double kCaption = 16;  // a panel's title above it
constexpr double kBottom = 40;   // column labels and the x-axis title below each panel
constexpr double kGap = 18;      // between panels
constexpr double kBar = 90;      // the colour bar and its labels, right of the panels
const Rgb kMissing{221, 221, 221};

std::size_t rows_of(const ScoreGrid& g) { return g.row_labels.size(); }
std::size_t cols_of(const ScoreGrid& g) { return g.col_labels.size(); }
int panel_columns(const ScoreGrid& g) {
  return std::max(1, std::min(g.columns, static_cast<int>(std::max<std::size_t>(1, g.panels.size()))));
}
double panel_w(const ScoreGrid& g) { return kLeft + kCellW * static_cast<double>(cols_of(g)) + kGap; }
double panel_h(const ScoreGrid& g) { return kCaption + kCellH * static_cast<double>(rows_of(g)) + kBottom + kGap; }

void text_at(cairo_t* cr, const std::string& s, double x, double y, double align_x, double align_y) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  cairo_move_to(cr, x - align_x * e.width - e.x_bearing, y - align_y * e.height - e.y_bearing);
  cairo_show_text(cr, s.c_str());
}

void draw(cairo_t* cr, const ScoreGrid& g) {
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  cairo_set_font_size(cr, 13);
  text_at(cr, g.title, 16, 24, 0, 0.5);
  const std::size_t rows = rows_of(g), cols = cols_of(g);
  char buf[64];
  for (std::size_t p = 0; p < g.panels.size(); ++p) {
    const ScoreGridPanel& panel = g.panels[p];
    const GridRect first = score_grid_cell(g, p, 0, 0);
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    cairo_set_font_size(cr, 10);
    text_at(cr, panel.title, first.x, first.y - 4, 0, 1);  // its bottom 4 points above the cells
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c) {
        const GridRect cell = score_grid_cell(g, p, r, c);
        const float v = panel.values[r * cols + c];
        const Rgb colour = score_grid_colour(g, v);
        cairo_set_source_rgb(cr, colour.r / 255.0, colour.g / 255.0, colour.b / 255.0);
        cairo_rectangle(cr, cell.x, cell.y, cell.w, cell.h);
        cairo_fill(cr);
        // The number in a colour that reads on the cell: dark on light cells, light on dark ones.
        const double light = to_oklab(colour).L;
        if (light > 0.6)
          cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        else
          cairo_set_source_rgb(cr, 0.95, 0.95, 0.95);
        if (std::isnan(v))
          std::snprintf(buf, sizeof buf, "-");
        else
          std::snprintf(buf, sizeof buf, g.value_format, static_cast<double>(v));
        cairo_set_font_size(cr, 8);
        text_at(cr, buf, cell.x + cell.w / 2, cell.y + cell.h / 2, 0.5, 0.5);
      }
    // Thin white lines between cells, a frame around the panel.
    cairo_set_source_rgb(cr, 0.35, 0.35, 0.35);
    cairo_set_line_width(cr, 0.6);
    cairo_rectangle(cr, first.x, first.y, kCellW * static_cast<double>(cols), kCellH * static_cast<double>(rows));
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_set_font_size(cr, 8);
    for (std::size_t r = 0; r < rows; ++r) {
      const GridRect cell = score_grid_cell(g, p, r, 0);
      text_at(cr, g.row_labels[r], cell.x - 4, cell.y + cell.h / 2, 1, 0.5);
    }
    for (std::size_t c = 0; c < cols; ++c) {
      const GridRect cell = score_grid_cell(g, p, rows - 1, c);
      text_at(cr, g.col_labels[c], cell.x + cell.w / 2, cell.y + cell.h + 4, 0.5, 0);
    }
    cairo_set_font_size(cr, 9);
    const double bottom = first.y + kCellH * static_cast<double>(rows);
    text_at(cr, g.x_label, first.x + kCellW * static_cast<double>(cols) / 2, bottom + 18, 0.5, 0);
    cairo_save(cr);
    cairo_translate(cr, first.x - kLeft + 12, first.y + kCellH * static_cast<double>(rows) / 2);
    cairo_rotate(cr, -M_PI / 2);
    text_at(cr, g.y_label, 0, 0, 0.5, 0.5);
    cairo_restore(cr);
  }
  // The colour bar, the height of one panel's cells.
  const double bx = score_grid_width(g) - kBar + 10, by = kTop + kCaption;
  const double bh = std::max(60.0, kCellH * static_cast<double>(rows));
  const auto& table = g.colormap->table();
  for (int i = 0; i < 256; ++i) {
    const Rgb c = table[static_cast<std::size_t>(255 - i)];
    cairo_set_source_rgb(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0);
    cairo_rectangle(cr, bx, by + bh * i / 256.0, 12, bh / 256.0 + 0.6);
    cairo_fill(cr);
  }
  cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
  cairo_set_font_size(cr, 8);
  const double lo = g.scale.kind == ColorScale::kSymmetric ? -g.scale.vmax : g.scale.vmin;
  for (int i = 0; i <= 4; ++i) {
    const double v = lo + (g.scale.vmax - lo) * i / 4;
    std::snprintf(buf, sizeof buf, "%.3g", v);
    text_at(cr, buf, bx + 15, by + bh * (1 - g.scale.normalize(v)), 0, 0.5);
  }
  cairo_save(cr);
  cairo_translate(cr, bx + 52, by + bh / 2);
  cairo_rotate(cr, M_PI / 2);
  text_at(cr, g.scale_label, 0, 0, 0.5, 0.5);
  cairo_restore(cr);
}

}  // namespace

GridRect score_grid_cell(const ScoreGrid& g, std::size_t panel, std::size_t row, std::size_t col) {
  const int per_row = panel_columns(g);
  const double px = 8 + static_cast<double>(static_cast<int>(panel) % per_row) * panel_w(g);
  const double py = kTop + static_cast<double>(static_cast<int>(panel) / per_row) * panel_h(g);
  return {px + kLeft + kCellW * static_cast<double>(col), py + kCaption + kCellH * static_cast<double>(row), kCellW,
          kCellH};
}

double score_grid_width(const ScoreGrid& g) { return 8 + panel_columns(g) * panel_w(g) + kBar; }

double score_grid_height(const ScoreGrid& g) {
  const int per_row = panel_columns(g);
  const int panel_rows = (static_cast<int>(g.panels.size()) + per_row - 1) / per_row;
  return kTop + std::max(1, panel_rows) * panel_h(g);
}

Rgb score_grid_colour(const ScoreGrid& g, float value) {
  if (std::isnan(value)) return kMissing;
  return g.colormap->at(g.scale.normalize(static_cast<double>(value)));
}

void write_score_grid(const ScoreGrid& g, const std::filesystem::path& path) {
  if (g.panels.empty() || g.row_labels.empty() || g.col_labels.empty()) fail(path.string(), "nothing to draw");
  for (const ScoreGridPanel& p : g.panels)
    if (p.values.size() != g.row_labels.size() * g.col_labels.size())
      fail(path.string(), "panel '" + p.title + "' has " + std::to_string(p.values.size()) + " values for " +
                              std::to_string(g.row_labels.size()) + " x " + std::to_string(g.col_labels.size()) +
                              " cells");
  g.scale.validate();
  render_file(path, score_grid_width(g), score_grid_height(g), g.title, [&](cairo_t* cr) { draw(cr, g); });
}

}  // namespace luka::viz
