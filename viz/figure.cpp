#include "viz/figure.h"
#include "viz/render_file.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <fstream>
#include <sstream>

#include "core/util/error.h"
#include "core/util/output_file.h"
#include "viz/token_text.h"

namespace luka::viz {
namespace {

struct Rgbf {
  double r, g, b;
};

Rgbf hex(const std::string& s) {
  unsigned v = 0x808080;
  if (s.size() == 7 && s[0] == '#') v = static_cast<unsigned>(std::stoul(s.substr(1), nullptr, 16));
  return {((v >> 16) & 255) / 255.0, ((v >> 8) & 255) / 255.0, (v & 255) / 255.0};
}

// Token pieces as axis labels: printable, short.
// A token on an axis: whole characters only (cairo stops at invalid UTF-8), partial ones as
// their bytes, at most 14 characters.
std::string label_text(const std::string& piece) {
  TokenTextOptions o;
  o.max_chars = 14;
  return token_text(piece, o);
}

// A cairo image of the heatmap (ARGB32, premultiplied; our colours are opaque).
cairo_surface_t* heatmap_surface(const Figure& f) {
  const Image img = render_heatmap(f.values.data(), f.rows, f.cols, static_cast<int>(f.cols), static_cast<int>(f.rows), f.options);
  cairo_surface_t* s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, img.width, img.height);
  cairo_surface_flush(s);
  unsigned char* data = cairo_image_surface_get_data(s);
  const int stride = cairo_image_surface_get_stride(s);
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      const std::uint8_t* p = img.rgba.data() + (static_cast<std::size_t>(y) * img.width + x) * 4;
      auto* out = reinterpret_cast<std::uint32_t*>(data + y * stride) + x;
      *out = 0xff000000u | (std::uint32_t{p[0]} << 16) | (std::uint32_t{p[1]} << 8) | p[2];
    }
  cairo_surface_mark_dirty(s);
  return s;
}

// Maps of at most this many cells are drawn as vector squares, crisp in every SVG and PDF
// renderer; larger ones as an image (marked pixelated in SVG, write_svg_title).
constexpr std::int64_t kVectorCells = 96 * 96;

// The map's cells at (0, 0), `px` points per cell: squares for a small map, else the image
// scaled nearest-neighbour.
void paint_cells(cairo_t* cr, const Figure& f, double px) {
  if (f.rows * f.cols <= kVectorCells) {
    const Image img = render_heatmap(f.values.data(), f.rows, f.cols, static_cast<int>(f.cols), static_cast<int>(f.rows), f.options);
    for (int y = 0; y < img.height; ++y)
      for (int x = 0; x < img.width; ++x) {
        const std::uint8_t* c = img.rgba.data() + (static_cast<std::size_t>(y) * img.width + x) * 4;
        cairo_set_source_rgb(cr, c[0] / 255.0, c[1] / 255.0, c[2] / 255.0);
        // A hair wider than the cell, so that anti-aliased edges leave no seams between cells.
        cairo_rectangle(cr, x * px, y * px, px + 0.05, px + 0.05);
        cairo_fill(cr);
      }
    return;
  }
  cairo_surface_t* img = heatmap_surface(f);
  cairo_save(cr);
  cairo_scale(cr, px, px);
  cairo_set_source_surface(cr, img, 0, 0);
  cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
  cairo_rectangle(cr, 0, 0, static_cast<double>(f.cols), static_cast<double>(f.rows));
  cairo_fill(cr);
  cairo_restore(cr);
  cairo_surface_destroy(img);
}

// The colour bar at (x, y), `w` x `h` points, with ticks and their values on the right: decades
// on a log scale, five even steps otherwise (signed for a symmetric one).
void colour_bar(cairo_t* cr, const HeatmapOptions& options, double x, double y, double w, double h) {
  const auto& table = options.colormap->table();
  for (int i = 0; i < 256; ++i) {
    const Rgb c = table[static_cast<std::size_t>(255 - i)];
    cairo_set_source_rgb(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0);
    cairo_rectangle(cr, x, y + h * i / 256.0, w, h / 256.0 + 0.6);
    cairo_fill(cr);
  }
  cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
  cairo_set_line_width(cr, 0.6);
  cairo_set_font_size(cr, 8);
  const ColorScale& sc = options.scale;
  std::vector<std::pair<double, std::string>> ticks;
  char buf[32];
  if (sc.kind == ColorScale::kLog) {
    for (int e = static_cast<int>(std::ceil(std::log10(sc.vmin))); e <= static_cast<int>(std::floor(std::log10(sc.vmax))); ++e) {
      std::snprintf(buf, sizeof buf, "1e%d", e);
      ticks.push_back({sc.normalize(std::pow(10.0, e)), buf});
    }
  } else {
    const double lo = sc.kind == ColorScale::kSymmetric ? -sc.vmax : sc.vmin;
    for (int i = 0; i <= 4; ++i) {
      const double v = lo + (sc.vmax - lo) * i / 4;
      std::snprintf(buf, sizeof buf, sc.kind == ColorScale::kSymmetric && v > 0 ? "+%.3g" : "%.3g", v);
      ticks.push_back({sc.normalize(v), buf});
    }
  }
  for (const auto& [t, text] : ticks) {
    const double ty = y + h * (1 - t);
    cairo_move_to(cr, x + w, ty);
    cairo_line_to(cr, x + w + 3, ty);
    cairo_stroke(cr);
    cairo_move_to(cr, x + w + 5, ty + 3);
    cairo_show_text(cr, text.c_str());
  }
}

// The topics of the bands, once each in order (colour swatch, label), on one line from (x, y)
// (the text's baseline), at most to `right`.
void legend(cairo_t* cr, const std::vector<FigureBand>& bands, double x, double y, double right) {
  std::vector<std::string> seen;
  cairo_set_font_size(cr, 9);
  for (const FigureBand& b : bands) {
    const std::string id = b.colour + "\t" + b.label;
    if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
    seen.push_back(id);
    const std::string text = label_text(b.label);
    cairo_text_extents_t e;
    cairo_text_extents(cr, text.c_str(), &e);
    if (x + 12 + e.x_advance > right) break;
    const Rgbf c = hex(b.colour);
    cairo_set_source_rgb(cr, c.r, c.g, c.b);
    cairo_rectangle(cr, x, y - 8, 9, 9);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_move_to(cr, x + 12, y);
    cairo_show_text(cr, text.c_str());
    x += 12 + e.x_advance + 12;
  }
}

void draw(cairo_t* cr, const Figure& f) {
  const double W = f.width, H = f.height;
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);

  // Layout: title on top, labels left and below, bands next to the map, colour bar right.
  const double band = 8, label_w = 86, colorbar_w = 14, right = 70, top = 44;
  const double decode_label = f.decode_start > 0 ? 18 : 0;  // "prefill / decode" right of the map
  const double side = std::min(W - label_w - band - colorbar_w - right - 16 - decode_label, H - top - band - label_w - 10);
  const double mx = label_w + band + 4, my = top + band + 4;
  const double t0c = static_cast<double>(f.col0) * f.cell, t0r = static_cast<double>(f.row0) * f.cell;
  const double span_c = std::min<double>(f.cols * f.cell, f.tokens - t0c), span_r = std::min<double>(f.rows * f.cell, f.tokens - t0r);
  const double span = std::max(span_c, span_r);
  const double px = side / span;  // points per token

  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  // The title in one line: smaller type when it would not fit.
  double title_size = 13;
  for (; title_size > 7; title_size -= 0.5) {
    cairo_set_font_size(cr, title_size);
    cairo_text_extents_t e;
    cairo_text_extents(cr, f.title.c_str(), &e);
    if (mx + e.x_advance <= W - 8) break;
  }
  cairo_move_to(cr, mx, 24);
  cairo_show_text(cr, f.title.c_str());

  // The topics' legend under the title.
  legend(cr, f.bands, mx, 38, W - 8);

  // The map: every cell a crisp square.
  cairo_save(cr);
  cairo_rectangle(cr, mx, my, span_c * px, span_r * px);
  cairo_clip(cr);
  cairo_translate(cr, mx, my);
  paint_cells(cr, f, f.cell * px);
  cairo_restore(cr);
  cairo_set_source_rgb(cr, 0.3, 0.3, 0.3);
  cairo_set_line_width(cr, 0.6);
  cairo_rectangle(cr, mx, my, span_c * px, span_r * px);
  cairo_stroke(cr);

  // Topic bands along both axes, clipped to the window.
  for (const FigureBand& b : f.bands) {
    const Rgbf c = hex(b.colour);
    cairo_set_source_rgb(cr, c.r, c.g, c.b);
    const double c0 = std::max(static_cast<double>(b.begin), t0c), c1 = std::min(static_cast<double>(b.end), t0c + span_c);
    if (c1 > c0) cairo_rectangle(cr, mx + (c0 - t0c) * px, my - band - 2, (c1 - c0) * px, band);
    const double r0 = std::max(static_cast<double>(b.begin), t0r), r1 = std::min(static_cast<double>(b.end), t0r + span_r);
    if (r1 > r0) cairo_rectangle(cr, mx - band - 2, my + (r0 - t0r) * px, band, (r1 - r0) * px);
    cairo_fill(cr);
  }

  // Where decoding starts: a dashed line on both axes, labelled at the map's right edge.
  if (f.decode_start > 0) {
    const double d = static_cast<double>(f.decode_start);
    cairo_save(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    cairo_set_line_width(cr, 0.8);
    const double dash[] = {3, 2};
    cairo_set_dash(cr, dash, 2, 0);
    if (d > t0r && d < t0r + span_r) {
      cairo_move_to(cr, mx, my + (d - t0r) * px);
      cairo_line_to(cr, mx + span_c * px, my + (d - t0r) * px);
    }
    if (d > t0c && d < t0c + span_c) {
      cairo_move_to(cr, mx + (d - t0c) * px, my);
      cairo_line_to(cr, mx + (d - t0c) * px, my + span_r * px);
    }
    cairo_stroke(cr);
    cairo_restore(cr);
    if (d > t0r && d < t0r + span_r) {
      cairo_set_font_size(cr, 7.5);
      cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
      const double y = my + (d - t0r) * px;
      cairo_move_to(cr, mx + span_c * px + 3, y - 2);
      cairo_show_text(cr, "prefill");
      cairo_move_to(cr, mx + span_c * px + 3, y + 8);
      cairo_show_text(cr, "decode");
    }
  }

  // Token labels, thinned so they do not overlap (at least 9 points apart).
  cairo_set_font_size(cr, 7);
  cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
  const std::int64_t every = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(9.0 / px)));
  const auto label = [&](std::int64_t t) {
    const std::string piece = t < static_cast<std::int64_t>(f.labels.size()) ? label_text(f.labels[static_cast<std::size_t>(t)]) : "";
    return std::to_string(t) + (piece.empty() ? "" : " " + piece);
  };
  const std::int64_t first_r = static_cast<std::int64_t>(std::ceil(t0r / every)) * every;
  for (std::int64_t t = first_r; t < t0r + span_r; t += every) {
    const std::string s = label(t);
    cairo_text_extents_t e;
    cairo_text_extents(cr, s.c_str(), &e);
    cairo_move_to(cr, mx - band - 6 - e.x_advance, my + (t - t0r + 0.5) * px + 2.5);
    cairo_show_text(cr, s.c_str());
  }
  const std::int64_t first_c = static_cast<std::int64_t>(std::ceil(t0c / every)) * every;
  for (std::int64_t t = first_c; t < t0c + span_c; t += every) {
    const std::string s = label(t);
    cairo_save(cr);
    cairo_move_to(cr, mx + (t - t0c + 0.5) * px + 2.5, my + span_r * px + 6);
    cairo_rotate(cr, M_PI / 2);
    cairo_show_text(cr, s.c_str());
    cairo_restore(cr);
  }
  cairo_set_font_size(cr, 10);
  cairo_move_to(cr, 6, my - band - 6);
  cairo_show_text(cr, "query ↓  key →");

  // Colour bar with ticks (right of the decode label).
  const double bx = mx + side + 16 + decode_label, by = my, bh = side;
  colour_bar(cr, f.options, bx, by, colorbar_w, bh);
  cairo_save(cr);
  cairo_move_to(cr, bx + colorbar_w + 48, by + bh / 2 - 30);
  cairo_rotate(cr, M_PI / 2);
  cairo_show_text(cr, f.scale_label.c_str());
  cairo_restore(cr);
}

// The figure's bytes on their way to the temporary file. cairo's own file output can drop a
// failed write: a PDF cut short by a file-size limit came back CAIRO_STATUS_SUCCESS and was renamed
// into place. Every write and the final flush and close are checked here instead.
struct FigureStream {
  std::FILE* file = nullptr;
  int error = 0;  // errno of the first failed write

  static cairo_status_t write(void* closure, const unsigned char* data, unsigned int length) {
    auto* s = static_cast<FigureStream*>(closure);
    if (s->error == 0 && std::fwrite(data, 1, length, s->file) != length) s->error = errno != 0 ? errno : EIO;
    return s->error == 0 ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
  }
  // Flushes and closes; the errno of the first failure, or 0.
  int close() {
    if (file == nullptr) return error;
    if (std::fflush(file) != 0 && error == 0) error = errno != 0 ? errno : EIO;
    if (std::fclose(file) != 0 && error == 0) error = errno != 0 ? errno : EIO;
    file = nullptr;
    return error;
  }
  ~FigureStream() {
    if (file != nullptr) std::fclose(file);
  }
};

}  // namespace

void render_file(const std::filesystem::path& target, double width, double height, const std::string& title,
                 const std::function<void(cairo_t*)>& paint) {
  const std::string ext = target.extension().string();
  const std::string name = target.string();  // messages name the target; the bytes go to `path`
  if (ext != ".png" && ext != ".svg" && ext != ".pdf") fail(name, "unknown figure format '" + ext + "' (use .png, .svg or .pdf)");
  AtomicOutput file(target);
  const std::filesystem::path& path = file.path();
  FigureStream stream;
  stream.file = std::fopen(path.c_str(), "wb");
  if (stream.file == nullptr) fail(name, std::string("cannot create the figure: ") + std::strerror(errno));
  cairo_surface_t* surface = nullptr;
  if (ext == ".png") {
    surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, static_cast<int>(width * 2), static_cast<int>(height * 2));
  } else if (ext == ".svg") {
    surface = cairo_svg_surface_create_for_stream(FigureStream::write, &stream, width, height);
  } else {
    surface = cairo_pdf_surface_create_for_stream(FigureStream::write, &stream, width, height);
    cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_TITLE, title.c_str());
    cairo_pdf_surface_set_metadata(surface, CAIRO_PDF_METADATA_CREATOR, "LuKA Studio");
  }
  if (cairo_surface_status(surface) != CAIRO_STATUS_SUCCESS) {
    const std::string why = cairo_status_to_string(cairo_surface_status(surface));
    cairo_surface_destroy(surface);
    fail(name, "cannot create the figure: " + why);
  }
  cairo_t* cr = cairo_create(surface);
  if (ext == ".png") cairo_scale(cr, 2, 2);
  paint(cr);
  cairo_destroy(cr);
  cairo_status_t status = CAIRO_STATUS_SUCCESS;
  if (ext == ".png") status = cairo_surface_write_to_png_stream(surface, FigureStream::write, &stream);
  cairo_surface_finish(surface);
  if (status == CAIRO_STATUS_SUCCESS) status = cairo_surface_status(surface);
  cairo_surface_destroy(surface);
  if (const int err = stream.close(); err != 0) fail(name, std::string("cannot write the figure: ") + std::strerror(err));
  if (status != CAIRO_STATUS_SUCCESS) fail(name, std::string("cannot write the figure: ") + cairo_status_to_string(status));
  // cairo draws SVG text as glyph outlines: give the file its title as text, for readers and search.
  if (ext == ".svg") {
    std::string svg;
    {
      std::ifstream in(path, std::ios::binary);
      std::ostringstream ss;
      ss << in.rdbuf();
      svg = ss.str();
    }
    const auto open = svg.find("<svg");
    const auto close = open == std::string::npos ? std::string::npos : svg.find('>', open);
    if (close == std::string::npos) fail(name, "cairo wrote no <svg> element");
    std::string escaped;
    for (const char c : title) escaped += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
    svg.insert(close + 1, "\n<title>" + escaped + "</title>");
    // A map drawn as an image stays in crisp cells in every renderer, not only those that honour
    // cairo's nearest-neighbour filter: each renderer takes the last value it knows.
    const std::string crisp = "image-rendering:optimizeSpeed;image-rendering:crisp-edges;image-rendering:pixelated;";
    for (std::size_t at = svg.find("<image"); at != std::string::npos; at = svg.find("<image", at + 1)) {
      const std::size_t end = svg.find('>', at);
      const std::size_t style = svg.find("style=\"", at);
      if (style != std::string::npos && style < end) svg.insert(style + 7, crisp);
      else svg.insert(at + 6, " style=\"" + crisp + "\"");
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << svg;
    out.close();
    if (!out) fail(name, "cannot write the figure");
  }
  file.commit();
}

namespace {

void draw_grid(cairo_t* cr, const GridFigure& g) {
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
  double title_size = 13;
  for (; title_size > 7; title_size -= 0.5) {
    cairo_set_font_size(cr, title_size);
    cairo_text_extents_t e;
    cairo_text_extents(cr, g.title.c_str(), &e);
    if (16 + e.x_advance <= g.width - 8) break;
  }
  cairo_move_to(cr, 16, 24);
  cairo_show_text(cr, g.title.c_str());
  const int n = static_cast<int>(g.panels.size());
  const int cols = std::max(1, g.columns), rows = (n + cols - 1) / cols;
  legend(cr, g.panels.empty() ? std::vector<FigureBand>{} : g.panels.front().bands, 16, 38, g.width - 8);
  const double left = 16, top = 46, right = 80, gap = 10, caption = 12, band = 5;
  const double cell = std::min((g.width - left - right - gap * (cols - 1)) / cols, (g.height - top - 10 - (gap + caption) * rows) / rows);
  for (int i = 0; i < n; ++i) {
    const Figure& f = g.panels[static_cast<std::size_t>(i)];
    const double x = left + (i % cols) * (cell + gap), y = top + (i / cols) * (cell + gap + caption);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    cairo_set_font_size(cr, 9);
    cairo_move_to(cr, x, y + 9);
    cairo_show_text(cr, f.title.c_str());
    if (f.rows <= 0 || f.cols <= 0) continue;
    const double px = (cell - band) / static_cast<double>(std::max(f.rows, f.cols));
    const double x0 = x + band, y0 = y + caption + band;  // the map, right of and under its bands
    cairo_save(cr);
    cairo_translate(cr, x0, y0);
    paint_cells(cr, f, px);
    cairo_restore(cr);
    cairo_set_source_rgb(cr, 0.4, 0.4, 0.4);
    cairo_set_line_width(cr, 0.5);
    cairo_rectangle(cr, x0, y0, static_cast<double>(f.cols) * px, static_cast<double>(f.rows) * px);
    cairo_stroke(cr);
    // Topic bands along the panel's top (keys) and left (queries), in tokens / f.cell per cell.
    const double per_token = px / f.cell;
    for (const FigureBand& b : f.bands) {
      const Rgbf c = hex(b.colour);
      cairo_set_source_rgb(cr, c.r, c.g, c.b);
      const double a = static_cast<double>(b.begin) * per_token, e = static_cast<double>(b.end) * per_token;
      cairo_rectangle(cr, x0 + a, y0 - band, e - a, band - 1);
      cairo_rectangle(cr, x0 - band, y0 + a, band - 1, e - a);
      cairo_fill(cr);
    }
    if (f.decode_start > 0) {  // where decoding starts, as in the single figure
      const double d = static_cast<double>(f.decode_start) * per_token;
      cairo_save(cr);
      cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
      cairo_set_line_width(cr, 0.6);
      const double dash[] = {2, 1.5};
      cairo_set_dash(cr, dash, 2, 0);
      cairo_move_to(cr, x0, y0 + d);
      cairo_line_to(cr, x0 + static_cast<double>(f.cols) * px, y0 + d);
      cairo_move_to(cr, x0 + d, y0);
      cairo_line_to(cr, x0 + d, y0 + static_cast<double>(f.rows) * px);
      cairo_stroke(cr);
      cairo_restore(cr);
    }
  }
  if (g.panels.empty()) return;
  // One colour bar for all panels (they share the colormap and scale).
  const Figure& f0 = g.panels.front();
  const double bx = left + cols * (cell + gap) + 6, by = top + caption, bh = std::max(60.0, rows * (cell + gap + caption) - gap - caption);
  colour_bar(cr, f0.options, bx, by, 12, bh);
  cairo_save(cr);
  cairo_move_to(cr, bx + 40, by + bh / 2 - 30);
  cairo_rotate(cr, M_PI / 2);
  cairo_show_text(cr, g.scale_label.c_str());
  cairo_restore(cr);
}

}  // namespace

void write_figure(const Figure& f, const std::filesystem::path& path) {
  if (f.rows <= 0 || f.cols <= 0 || f.values.size() != static_cast<std::size_t>(f.rows * f.cols)) fail(path.string(), "nothing to draw");
  render_file(path, f.width, f.height, f.title, [&](cairo_t* cr) { draw(cr, f); });
}

void write_grid_figure(const GridFigure& g, const std::filesystem::path& path) {
  if (g.panels.empty()) fail(path.string(), "nothing to draw");
  render_file(path, g.width, g.height, g.title, [&](cairo_t* cr) { draw_grid(cr, g); });
}

}  // namespace luka::viz
