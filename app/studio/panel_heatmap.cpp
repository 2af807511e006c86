// Heatmap view of the selected layer and head, in the effective, dense or difference view, in one
// of two layouts:
// - the full query x key map: the prefill map from the capture's max-pooled pyramid, then one row
//   per decode step, read for the visible window only (the level is chosen so a cell covers at
//   least a pixel each way, and only the visible cells are read);
// - decode rows: a step x key map where each decode step gets a readable height and the prefill
//   is collapsed into one row (its last query), for the question the modes differ on: what did
//   compression change at each step. It is the default for the dense and difference views, with
//   the colour range fitted to the rows shown.
// Wheel zooms around the cursor, dragging pans, hovering shows both tokens, the value and (decode
// rows) the step's cover; token labels, topic bands and a legend run along the axes.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "app/figures/capture_figure.h"
#include "app/studio/choice_widgets.h"
#include "app/studio/method_presets.h"
#include "app/studio/ui_state.h"
#include "captures/reader.h"
#include "core/luka/config.h"
#include "core/util/error.h"
#include "viz/heatmap.h"
#include "viz/state_colours.h"

namespace luka::studio {
namespace {

// A token or label as drawn: partial UTF-8 as its bytes, at most `max_chars` characters.
std::string printable(const std::string& piece, std::size_t max_chars = 40) { return token_label(piece, max_chars); }

// Writes what the map shows — one layer and head, or the head grid / layer strip — as a figure;
// returns "wrote PATH" or the error. Safe on any thread: it takes its inputs by value.
std::string write_view_figure(std::shared_ptr<const capture::CaptureView> view, int layer, int head, figures::MapView mv, MapMode mode, bool log,
                              const std::filesystem::path& path) {
  try {
    if (!view) fail("export", "nothing to export: run a prompt or open a capture");
    const capture::Summary sum = view->summary();
    if (mode != MapMode::kMap)
      viz::write_grid_figure(figures::grid_from_capture(*view, mode == MapMode::kHeadGrid, layer, head, sum.complete_steps, log, mv), path);
    else
      viz::write_figure(figures::figure_from_capture(*view, layer, head, figures::default_figure_level(sum.layout), sum.complete_steps, log, mv),
                        path);
    return "wrote " + path.string();
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace

void export_figure(UiState& ui, const std::filesystem::path& path) {
  ui.notice = write_view_figure(ui.controller.view(), ui.selection.layer, ui.selection.head, ui.heatmap.view, ui.heatmap.mode, ui.heatmap.log_scale, path);
}

namespace {

// The Export buttons write in the background; the outcome shows when it is done.
void export_in_background(UiState& ui, const std::filesystem::path& path) {
  if (ui.map.export_job.active()) return;  // one at a time
  ui.notice = "writing " + path.string() + "...";
  ui.map.export_job.start(ui.tasks, "export " + path.filename().string(),
                      [view = ui.controller.view(), layer = ui.selection.layer, head = ui.selection.head, kind = ui.heatmap.view, mode = ui.heatmap.mode,
                       log = ui.heatmap.log_scale, path] { return write_view_figure(view, layer, head, kind, mode, log, path); });
}

// The figure path, Export PNG / SVG / PDF buttons, and the outcome of the last export.
void export_row(UiState& ui) {
  ImGui::SetNextItemWidth(260);
  ImGui::InputText("##figure", &ui.map.figure_path);
  for (const char* ext : {".png", ".svg", ".pdf"}) {
    ImGui::SameLine();
    if (ImGui::Button((std::string("Export ") + (ext + 1)).c_str())) {
      std::filesystem::path p = ui.map.figure_path;
      p.replace_extension(ext);
      export_in_background(ui, p);
    }
  }
  if (auto done = ui.map.export_job.take()) ui.notice = done->value ? *done->value : done->cancelled ? "export cancelled" : done->error;
  if (!ui.notice.empty()) {
    ImGui::SameLine();
    ImGui::TextUnformatted(ui.notice.c_str());
  }
}

// Margins around the map: query labels on the left, the topic band, key labels below.
constexpr float kBand = 8.f, kLabelWidth = 92.f;

ImU32 rgb(const viz::Rgb& c, int alpha = 255) { return IM_COL32(c.r, c.g, c.b, alpha); }
// The decode boundary and the selected step: light grey and white, apart from every topic colour.
const ImU32 kBoundary = IM_COL32(200, 200, 210, 200);
const ImU32 kMark = IM_COL32(255, 255, 255, 230);  // the found token

// Token labels along an axis, thinned so none overlaps the one before: `at(i)` is the screen
// coordinate of token i's centre, [lo, hi) the visible span, `gap` the room a label needs.
template <class At, class Draw>
void thinned_labels(std::int64_t first, std::int64_t last, float gap, At at, Draw draw) {
  float next = -1e30f;
  for (std::int64_t i = std::max<std::int64_t>(first, 0); i < last; ++i) {
    const float p = at(i);
    if (p < next) continue;
    if (draw(i, p)) next = p + gap;
  }
}

// Key labels under a canvas, centred on their columns and thinned so none overlaps the one before:
// keys [key0, key0 + span) of `keys`, at screen x sx(key).
template <class Sx, class Text>
void draw_key_labels(ImDrawList* dl, double key0, double span, std::int64_t keys, ImVec2 origin, ImVec2 canvas_max, const Sx& sx, const Text& text) {
  const auto first = static_cast<std::int64_t>(std::max(0.0, std::floor(key0)));
  const auto last = std::min<std::int64_t>(keys, static_cast<std::int64_t>(std::ceil(key0 + span)) + 1);
  float next = -1e30f;
  for (std::int64_t i = first; i < last; ++i) {
    const float x = sx(i + 0.5);
    const std::string s = text(i);
    const float w = ImGui::CalcTextSize(s.c_str()).x;
    if (x - w / 2 < std::max(next, origin.x - 4) || x + w / 2 > canvas_max.x + 4) continue;
    dl->AddText(ImVec2(x - w / 2, canvas_max.y + 2), IM_COL32(170, 170, 180, 255), s.c_str());
    next = x + w / 2 + 8;
  }
}

// What the selected decode step's cover holds, in words (the decode-rows hover).
std::vector<std::string> describe_cover(const capture::CaptureView& view, std::int64_t step, int layer, int head) {
  std::vector<std::string> out;
  const capture::StepMetrics m = view.metrics(step, layer);
  const capture::Layout lay = view.summary().layout;
  char line[256];
  std::snprintf(line, sizeof line, "step %lld, layer %d: %s over %lld tokens", static_cast<long long>(step), layer, capture::mode_name(m.mode),
                static_cast<long long>(m.tokens));
  out.push_back(line);
  if (!lay.covers) {
    out.push_back("(covers were not recorded)");
    return out;
  }
  const std::vector<std::uint8_t> cover = view.cover(step, layer, head);
  std::int64_t count[6] = {0, 0, 0, 0, 0, 0};
  for (const std::uint8_t c : cover)
    if (c < 6) ++count[c];
  if (m.mode == capture::kModeClustered) {
    const std::vector<std::uint8_t> states = view.page_states(step, layer, head);
    const std::vector<capture::PageInfo> pages = view.pages(layer);
    std::int64_t summarized = 0;
    std::string refined;
    for (std::size_t p = 0; p < states.size(); ++p) {
      if (states[p] == capture::kPageSummarized) ++summarized;
      if (states[p] == capture::kPageRefined && p < pages.size()) {
        if (refined.size() < 120)
          refined += (refined.empty() ? "" : ", ") + std::to_string(pages[p].start) + "-" + std::to_string(pages[p].end - 1) +
                     (pages[p].members.empty() ? "" : " (" + std::to_string(pages[p].members.size()) + " tokens)");
        else if (refined.back() != '.')
          refined += ", ...";
      }
    }
    std::snprintf(line, sizeof line, "%lld pages summarized (%lld tokens)", static_cast<long long>(summarized),
                  static_cast<long long>(count[capture::kSummarized]));
    out.push_back(line);
    std::snprintf(line, sizeof line, "%lld tokens in refined pages%s%s", static_cast<long long>(count[capture::kRefined]),
                  refined.empty() ? "" : ": ", refined.c_str());
    out.push_back(line);
    std::snprintf(line, sizeof line, "%lld raw tokens (the tail)", static_cast<long long>(count[capture::kRaw]));
    out.push_back(line);
  } else if (m.mode == capture::kModeKascade || m.mode == capture::kModePress || m.mode == capture::kModeQuest) {
    std::snprintf(line, sizeof line, "%lld tokens attended exactly (%s), %lld left out", static_cast<long long>(count[capture::kRaw]),
                  m.mode == capture::kModeKascade ? "the top-k set" : m.mode == capture::kModePress ? "kept by the press" : "Quest's pages and window",
                  static_cast<long long>(count[capture::kDropped]));
    out.push_back(line);
  } else if (m.mode == capture::kModeLined) {
    std::snprintf(line, sizeof line, "%lld heavy hitters, %lld tokens in the recent window, %lld dropped",
                  static_cast<long long>(count[capture::kHeavy]), static_cast<long long>(count[capture::kRaw]),
                  static_cast<long long>(count[capture::kDropped]));
    out.push_back(line);
  } else {
    std::snprintf(line, sizeof line, "every token attended exactly (%lld)", static_cast<long long>(count[capture::kRaw]));
    out.push_back(line);
  }
  return out;
}

// Applies a finished fetch to the view's texture and bookkeeping.
void take_result(HeatmapView& hv, MapResult got) {
  if (got.error.empty()) {
    if (!got.image.rgba.empty()) hv.texture.upload(got.image);
    hv.values = std::move(got.values);
    hv.diff_max = got.diff_max;
    hv.scale = got.scale;
    hv.error.clear();
  } else {
    hv.error = got.error;
  }
  const MapRequest& r = got.request;
  hv.fetched_view = r.view.get();
  hv.fetched_layer = r.layer;
  hv.fetched_head = r.head;
  hv.fetched_level = r.level;
  hv.fetched_r0 = r.r0;
  hv.fetched_c0 = r.c0;
  hv.fetched_rows = r.rows;
  hv.fetched_cols = r.cols;
  hv.fetched_log = r.log;
  hv.fetched_steps = r.steps;
  hv.fetched_view_kind = r.kind;
  hv.fetched_decode_rows = r.decode_rows;
  hv.fetched_first = r.first;
  hv.fetched_last = r.last;
  hv.fetched_pool = r.pool_level;
}

// What a canvas draws from: the capture, its map state (texture, fetcher, zoom) and the caches of
// its reads. The main map uses the UiState's; the compare canvas its own. `minus`: draw this
// capture's effective attention minus that one's.
struct Canvas {
  std::shared_ptr<const capture::CaptureView> view;
  std::shared_ptr<const capture::CaptureView> minus;
  HeatmapView& hv;
  Cached<std::vector<capture::Token>>& tokens;
  Cached<std::vector<capture::Segment>>& segments;
  Cached<MapOverlay>& overlay;
  Cached<std::vector<std::string>>& row_cover;
  bool labels = true;  // query / step labels on the left
  // A fitted map refits to its own capture as it grows; the compare canvas keeps the main one's
  // scale instead (copy_view), so that A and B stay aligned.
  bool fits = true;
};

// Topic bands along the top (keys) and, for the full map, the left (queries).
void draw_bands(ImDrawList* dl, const std::vector<capture::Segment>& segments, ImVec2 top, ImVec2 left, float x_max, float y_max,
                const std::function<float(double)>& sx, const std::function<float(double)>* sy) {
  for (const capture::Segment& seg : segments) {
    const unsigned int col = parse_colour(seg.colour);
    const float a = std::max(sx(seg.begin), left.x + kBand + 2), b = std::min(sx(seg.end), x_max);
    if (b > a) dl->AddRectFilled(ImVec2(a, top.y), ImVec2(b, top.y + kBand), col);
    if (sy) {
      const float c = std::max((*sy)(seg.begin), top.y + kBand + 2), d = std::min((*sy)(seg.end), y_max);
      if (d > c) dl->AddRectFilled(ImVec2(left.x, c), ImVec2(left.x + kBand, d), col);
    }
  }
}

// The full query x key map in the canvas [origin, origin + size).
void draw_full_map(UiState& ui, Canvas& cv, const capture::Summary& sum, ImVec2 top_left, ImVec2 origin, ImVec2 size) {
  HeatmapView& hv = cv.hv;
  const auto& view = cv.view;
  const capture::Layout& lay = sum.layout;
  const std::int64_t steps = sum.complete_steps;
  const std::int64_t n = lay.prompt_tokens + steps;  // the map: prompt queries, then one per decode step
  if (hv.tokens_per_pixel <= 0 || hv.tokens_per_pixel_y <= 0 || (hv.fitted && cv.fits)) {
    hv.tokens_per_pixel = static_cast<double>(n) / size.x;
    hv.tokens_per_pixel_y = static_cast<double>(n) / size.y;
    hv.x0 = hv.y0 = 0;
    hv.fitted = true;
  }
  ImGui::SetCursorScreenPos(origin);
  ImGui::PushID(&cv.hv);  // comparing, A's and B's canvases are two items: one ID would share their drags
  ImGui::InvisibleButton("canvas", size);
  ImGui::PopID();
  const bool hovered = ImGui::IsItemHovered();
  const ImGuiIO& io = ImGui::GetIO();
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {
    hv.x0 -= io.MouseDelta.x * hv.tokens_per_pixel;
    hv.y0 -= io.MouseDelta.y * hv.tokens_per_pixel_y;
    hv.fitted = false;
  }
  if (hovered && io.MouseWheel != 0) {
    const double mx = hv.x0 + (io.MousePos.x - origin.x) * hv.tokens_per_pixel;
    const double my = hv.y0 + (io.MousePos.y - origin.y) * hv.tokens_per_pixel_y;
    const double f = std::pow(0.8, io.MouseWheel);
    const double tx = std::clamp(hv.tokens_per_pixel * f, 1.0 / 64, 2.0 * n / size.x);
    hv.tokens_per_pixel_y = std::clamp(hv.tokens_per_pixel_y * tx / hv.tokens_per_pixel, 1.0 / 64, 2.0 * n / size.y);
    hv.tokens_per_pixel = tx;
    hv.x0 = mx - (io.MousePos.x - origin.x) * hv.tokens_per_pixel;
    hv.y0 = my - (io.MousePos.y - origin.y) * hv.tokens_per_pixel_y;
    hv.fitted = false;
  }
  const double span_x = size.x * hv.tokens_per_pixel, span_y = size.y * hv.tokens_per_pixel_y;
  if (hv.center_on_found && hv.found >= 0) {
    hv.x0 = static_cast<double>(hv.found) + 0.5 - span_x / 2;
    hv.y0 = static_cast<double>(hv.found) + 0.5 - span_y / 2;
    hv.center_on_found = false;
    hv.fitted = false;
  }
  hv.x0 = std::clamp(hv.x0, -span_x / 2, n - span_x / 2);
  hv.y0 = std::clamp(hv.y0, -span_y / 2, n - span_y / 2);

  // The level: the finest stored one whose cells cover at least a pixel each way, so every cell
  // is drawn and, being a max over its tokens, no sink or needle is lost when zoomed out.
  const double tpp = std::max(hv.tokens_per_pixel, hv.tokens_per_pixel_y);
  int level = lay.levels.back();
  for (auto it = lay.levels.rbegin(); it != lay.levels.rend(); ++it)
    if (std::ldexp(1.0, *it) >= tpp) level = *it;
  const double cell = std::ldexp(1.0, level);  // tokens per cell
  const std::int64_t cells = capture::level_size(n, level);
  const auto clamp_cell = [&](double v) { return std::clamp<std::int64_t>(static_cast<std::int64_t>(v), 0, cells); };
  const std::int64_t c0 = clamp_cell(std::floor(hv.x0 / cell)), c1 = clamp_cell(std::ceil((hv.x0 + span_x) / cell));
  const std::int64_t r0 = clamp_cell(std::floor(hv.y0 / cell)), r1 = clamp_cell(std::ceil((hv.y0 + span_y) / cell));
  hv.geometry = {false, origin.x, origin.y, size.x, size.y, hv.x0, hv.tokens_per_pixel, hv.y0, hv.tokens_per_pixel_y};
  const bool live_prefill = !sum.finished && steps == 0;
  MapRequest want;
  want.view = view;
  want.layer = ui.selection.layer;
  want.head = ui.selection.head;
  want.level = level;
  want.kind = hv.view;
  want.steps = steps;
  want.r0 = r0;
  want.c0 = c0;
  want.rows = r1 - r0;
  want.cols = c1 - c0;
  want.log = hv.log_scale;
  want.log_min = hv.log_min;
  want.minus = cv.minus;
  if (r1 > r0 && c1 > c0 && (!hv.requested || !want.same_window(*hv.requested) || (live_prefill && ImGui::GetFrameCount() % 15 == 0))) {
    hv.fetcher.request(ui.tasks, want);  // a live map fills in during the prefill: ask again now and then
    hv.requested = want;
  }
  if (auto got = hv.fetcher.poll(ui.tasks)) take_result(hv, std::move(*got));
  const bool showing = hv.texture.valid() && !hv.fetched_decode_rows;  // the texture may still hold the other layout
  const double fetched_cell = std::ldexp(1.0, hv.fetched_level);

  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 canvas_max(origin.x + size.x, origin.y + size.y);
  dl->AddRectFilled(origin, canvas_max, IM_COL32(24, 24, 28, 255));
  const std::function<float(double)> sx = [&](double t) { return static_cast<float>(origin.x + (t - hv.x0) / hv.tokens_per_pixel); };
  const std::function<float(double)> sy = [&](double t) { return static_cast<float>(origin.y + (t - hv.y0) / hv.tokens_per_pixel_y); };
  dl->PushClipRect(origin, canvas_max, true);
  if (showing) {
    const ImVec2 a(sx(hv.fetched_c0 * fetched_cell), sy(hv.fetched_r0 * fetched_cell));
    // Every cell at its tokens' place: the last one of a level may reach past the map's edge (it
    // holds fewer than `cell` tokens); the canvas clips it. Stretching the image to the edge
    // instead would shift the cells before it by up to a cell.
    const ImVec2 b(sx((hv.fetched_c0 + hv.fetched_cols) * fetched_cell), sy((hv.fetched_r0 + hv.fetched_rows) * fetched_cell));
    dl->AddImage(hv.texture.id(), a, b);
    if (ui.timing.first_map_ms < 0) ui.timing.first_map_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ui.timing.started).count();
  }
  // The decode boundary: queries (rows) and keys (columns) from the first generated token on.
  if (steps > 0) {
    const double b = static_cast<double>(lay.prompt_tokens);
    dl->AddLine(ImVec2(origin.x, sy(b)), ImVec2(canvas_max.x, sy(b)), kBoundary, 1.f);
    dl->AddLine(ImVec2(sx(b), origin.y), ImVec2(sx(b), canvas_max.y), kBoundary, 1.f);
    dl->AddText(ImVec2(std::max(origin.x, sx(0)) + 4, sy(b) + 2), kBoundary, "decode");
  }
  const std::string ck = capture_key(view.get());
  // Overlays at the selected decode step: the page grid, and on that step's query row the refined
  // pages (violet) and heavy hitters (crimson) of the selected head.
  if (hv.overlays && steps > 0 && lay.covers) {
    const std::int64_t s = ui.selection.step > 0 ? std::min<std::int64_t>(ui.selection.step, steps) : steps;
    try {
      const std::string okey = ck + "/" + std::to_string(s) + "/" + std::to_string(ui.selection.layer) + "/" + std::to_string(ui.selection.head);
      const auto& ov = cv.overlay.get(ui.tasks, okey, [view, s, layer = ui.selection.layer, head = ui.selection.head] {
        MapOverlay o;
        o.pages = view->pages(layer);
        o.refined = view->refined_pages(s, layer, head);
        o.heavy = view->heavy_hitters(s, layer, head);
        const std::int8_t mode = view->metrics(s, layer).mode;
        o.clustered = mode == capture::kModeClustered;
        // Kascade's top-k set, and the tokens a press or Quest kept (those they left out show as
        // the gaps between the ticks, and as `dropped` in the cover timeline).
        if (mode == capture::kModeKascade || mode == capture::kModePress || mode == capture::kModeQuest) {
          const std::vector<std::uint8_t> cover = view->cover(s, layer, head);
          for (std::size_t t = 0; t < cover.size(); ++t)
            if (cover[t] == capture::kRaw) o.selected.push_back(static_cast<std::int64_t>(t));
        }
        return o;
      });
      if (!cv.overlay.fresh(okey)) throw Error("overlay not read yet");  // never draw another step's overlay
      const auto& pages = ov.pages;
      // Page starts as a grid, for pages that hold a run of tokens (SemantiCache's clusters and
      // raw tokens interleave, so they draw only as refined runs), where the layer ran clustered:
      // the other modes keep pages only to switch to clustered at once.
      const auto first_run = std::find_if(pages.begin(), pages.end(), [](const capture::PageInfo& p) { return p.members.empty() && !p.raw; });
      const double page_px = first_run == pages.end() ? 0 : (first_run->end - first_run->start) / hv.tokens_per_pixel;
      if (ov.clustered && page_px >= 8) {  // a grid any denser would hide the map
        std::int64_t lines = 0;
        for (const capture::PageInfo& p : pages) {
          if (p.created_step >= s || !p.members.empty()) continue;
          const float x = sx(static_cast<double>(p.start));
          dl->AddLine(ImVec2(x, sy(p.start)), ImVec2(x, sy(static_cast<double>(n))), IM_COL32(120, 140, 170, 90));
          ++lines;
        }
        ui.mark_drawn("page_grid", origin.x, origin.y, canvas_max.x, canvas_max.y, std::to_string(lines));
      }
      const double q = static_cast<double>(lay.prompt_tokens + s - 1);
      const float y0 = sy(q), y1 = std::max(sy(q + 1), y0 + 3.f);
      dl->AddRect(ImVec2(sx(0), y0 - 1), ImVec2(sx(q + 1), y1 + 1), IM_COL32(255, 255, 255, 160));
      for (const std::int64_t p : ov.refined) {
        for (const auto& [b, e] : pages.at(static_cast<std::size_t>(p)).runs())
          dl->AddRect(ImVec2(sx(static_cast<double>(b)), y0 - 3), ImVec2(sx(static_cast<double>(e)), y1 + 3), rgb(viz::kRefinedColour), 0, 0, 2);
      }
      for (const std::int64_t t : ov.heavy) {
        const float x = sx(t + 0.5);
        dl->AddLine(ImVec2(x, y0 - 6), ImVec2(x, y1 + 6), rgb(viz::kHeavyHitterColour), 1.5f);
      }
      // Kascade: the keys of the step's top-k set; a press or Quest: the keys it kept; ticks above
      // and below the query's row (marked kascade_keys for scripts, whichever the mode).
      for (const std::int64_t t : ov.selected) {
        const float x = sx(t + 0.5);
        dl->AddLine(ImVec2(x, y0 - 7), ImVec2(x, y0 - 2), rgb(viz::kKascadeColour), 1.5f);
        dl->AddLine(ImVec2(x, y1 + 2), ImVec2(x, y1 + 7), rgb(viz::kKascadeColour), 1.5f);
      }
      if (!ov.selected.empty())
        ui.mark_drawn("kascade_keys", sx(static_cast<double>(ov.selected.front())), y0 - 7, sx(static_cast<double>(ov.selected.back() + 1)), y1 + 7,
                      std::to_string(ov.selected.size()));
    } catch (const std::exception&) {
    }
  }
  // The found token's row and column, and the row that produced the generated token under the
  // cursor in the output panel.
  if (hv.found >= 0 && hv.found < n) {
    const auto f = static_cast<double>(hv.found);
    dl->AddRect(ImVec2(sx(f), origin.y), ImVec2(std::max(sx(f + 1), sx(f) + 2), canvas_max.y), kMark, 0, 0, 1.5f);
    dl->AddRect(ImVec2(origin.x, sy(f)), ImVec2(canvas_max.x, std::max(sy(f + 1), sy(f) + 2)), kMark, 0, 0, 1.5f);
  }
  if (ui.timeline.track) {  // tracked tokens: their columns, and their rows while they are prompt queries
    const auto a = static_cast<double>(ui.timeline.track->begin), b = static_cast<double>(std::min(ui.timeline.track->end, n));
    dl->AddRect(ImVec2(sx(a), origin.y), ImVec2(std::max(sx(b), sx(a) + 2), canvas_max.y), kMark, 0, 0, 1.f);
    dl->AddRect(ImVec2(origin.x, sy(a)), ImVec2(canvas_max.x, std::max(sy(b), sy(a) + 2)), kMark, 0, 0, 1.f);
  }
  if (ui.selection.hover_token > 0 && ui.selection.hover_token <= n) {
    const auto q = static_cast<double>(ui.selection.hover_token - 1);
    dl->AddRectFilled(ImVec2(origin.x, sy(q)), ImVec2(canvas_max.x, std::max(sy(q + 1), sy(q) + 2)), IM_COL32(255, 255, 255, 90));
  }
  dl->PopClipRect();
  if (live_prefill) {  // not data yet: say so, with the prefill's progress, over the empty map
    const Status st = ui.controller.status();
    const std::string msg = (st.prefill_fraction >= 0 ? st.message : std::string("computing the prefill")) + " (rows fill in as layers finish)";
    const ImVec2 ts = ImGui::CalcTextSize(msg.c_str());
    const ImVec2 p(origin.x + std::max(4.f, (size.x - ts.x) / 2), origin.y + 12);
    dl->AddRectFilled(ImVec2(p.x - 8, p.y - 4), ImVec2(p.x + ts.x + 8, p.y + ts.y + 10), IM_COL32(0, 0, 0, 210), 4.f);
    dl->AddText(p, IM_COL32(255, 255, 255, 255), msg.c_str());
    ui.map.computing = msg;
    ui.mark_drawn("prefill_bar", p.x, p.y + ts.y + 3, p.x + ts.x, p.y + ts.y + 7);  // the whole track; filled to the fraction
    if (st.prefill_fraction >= 0)
      dl->AddRectFilled(ImVec2(p.x, p.y + ts.y + 3), ImVec2(p.x + ts.x * static_cast<float>(std::clamp(st.prefill_fraction, 0.0, 1.0)), p.y + ts.y + 7),
                        IM_COL32(230, 230, 235, 255));
  }
  // Topic bands and token labels on both axes.
  const auto& segments = cv.segments.get(ui.tasks, ck, [view] { return view->segments(); });
  draw_bands(dl, segments, ImVec2(origin.x, top_left.y), ImVec2(origin.x - kBand - 2, origin.y), canvas_max.x, canvas_max.y, sx, cv.labels ? &sy : nullptr);
  const auto& tokens = cv.tokens.get(ui.tasks, ck, [view] { return view->tokens(); });
  const auto piece = [&](std::int64_t i, std::size_t max_chars) {
    return i < static_cast<std::int64_t>(tokens.size()) ? printable(tokens[static_cast<std::size_t>(i)].piece, max_chars) : std::string("...");
  };
  const ImU32 label_colour = IM_COL32(170, 170, 180, 255);
  const float line = ImGui::GetTextLineHeight();
  if (!tokens.empty() && cv.labels) {
    const auto first_row = static_cast<std::int64_t>(std::max(0.0, std::floor(hv.y0)));
    const auto last_row = std::min<std::int64_t>(n, static_cast<std::int64_t>(std::ceil(hv.y0 + span_y)) + 1);
    thinned_labels(first_row, last_row, line, [&](std::int64_t i) { return sy(i + 0.5); }, [&](std::int64_t i, float y) {
      if (y < origin.y || y > canvas_max.y) return false;
      std::string s = piece(i, 10);
      for (std::size_t keep = 9; keep > 1 && ImGui::CalcTextSize(s.c_str()).x > kLabelWidth - 6; --keep) s = piece(i, keep);  // byte escapes are wide
      const float w = ImGui::CalcTextSize(s.c_str()).x;
      dl->AddText(ImVec2(origin.x - kBand - 6 - w, y - line / 2), label_colour, s.c_str());
      return true;
    });
  }
  if (!tokens.empty()) draw_key_labels(dl, hv.x0, span_x, n, origin, canvas_max, sx, [&](std::int64_t i) { return piece(i, 10); });

  // Hover: query and key tokens and the value under the cursor.
  const auto map_view = hv.view;
  if (hovered && showing) {
    const auto q = static_cast<std::int64_t>(std::floor(hv.y0 + (io.MousePos.y - origin.y) * hv.tokens_per_pixel_y));
    const auto k = static_cast<std::int64_t>(std::floor(hv.x0 + (io.MousePos.x - origin.x) * hv.tokens_per_pixel));
    if (q >= 0 && q < n && k >= 0 && k < n) {
      const std::int64_t r = q / static_cast<std::int64_t>(fetched_cell) - hv.fetched_r0, c = k / static_cast<std::int64_t>(fetched_cell) - hv.fetched_c0;
      ImGui::BeginTooltip();
      ImGui::Text("query %lld  '%s'", static_cast<long long>(q), piece(q, 40).c_str());
      ui.map.tooltip = "query " + std::to_string(q) + " key " + std::to_string(k) + "\n";
      ImGui::Text("key   %lld  '%s'", static_cast<long long>(k), piece(k, 40).c_str());
      if (k > q) {
        ImGui::TextUnformatted("(masked: key after query)");
      } else if (r >= 0 && c >= 0 && r < hv.fetched_rows && c < hv.fetched_cols &&
                 static_cast<std::size_t>(r * hv.fetched_cols + c) < hv.values.size()) {
        const float v = hv.values[static_cast<std::size_t>(r * hv.fetched_cols + c)];
        const char* what = map_view == figures::MapView::kDifference ? "effective - dense" : "attention";
        if (std::isnan(v)) ImGui::TextUnformatted("no dense row at this step (shadow off)");
        else if (hv.fetched_level == 0) ImGui::Text("%s %.6g", what, v);
        else ImGui::Text("%s, max over %gx%g tokens: %.6g", what, fetched_cell, fetched_cell, v);
        if (q >= lay.prompt_tokens) ImGui::Text("decode step %lld", static_cast<long long>(q - lay.prompt_tokens + 1));
      }
      ImGui::EndTooltip();
    }
  }
}

// Decode rows in the canvas [origin, origin + size): the collapsed prefill row on top, the
// boundary, then one row per decode step.
void draw_decode_rows(UiState& ui, Canvas& cv, const capture::Summary& sum, ImVec2 top_left, ImVec2 origin, ImVec2 size) {
  HeatmapView& hv = cv.hv;
  const auto& view = cv.view;
  const capture::Layout& lay = sum.layout;
  const std::int64_t steps = sum.complete_steps;
  const std::int64_t n = lay.prompt_tokens, keys = n + steps;
  const float strip = 14.f, gap = 6.f;
  const ImVec2 rows_origin(origin.x, origin.y + strip + gap);
  const float rows_h = std::max(8.f, size.y - strip - gap);
  if (hv.rows_keys_per_pixel <= 0 || (hv.rows_fitted && cv.fits)) {
    hv.rows_keys_per_pixel = static_cast<double>(keys) / size.x;
    hv.rows_x0 = 0;
    hv.rows_fitted = true;
  }
  if (hv.row_px <= 0) hv.row_px = std::clamp(static_cast<double>(rows_h) / static_cast<double>(steps), 3.0, 28.0);
  const double visible_steps = rows_h / hv.row_px;
  const double max_y0 = std::max(0.0, static_cast<double>(steps) - visible_steps);
  if (hv.rows_follow) hv.rows_y0 = max_y0;  // a live run shows its newest steps
  ImGui::SetCursorScreenPos(origin);
  ImGui::PushID(&cv.hv);  // comparing, A's and B's canvases are two items: one ID would share their drags
  ImGui::InvisibleButton("canvas", size);
  ImGui::PopID();
  const bool hovered = ImGui::IsItemHovered();
  const ImGuiIO& io = ImGui::GetIO();
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {
    hv.rows_x0 -= io.MouseDelta.x * hv.rows_keys_per_pixel;
    hv.rows_y0 -= io.MouseDelta.y / hv.row_px;
    hv.rows_follow = false;
    hv.rows_fitted = false;
  }
  if (hovered && io.MouseWheel != 0) {
    const double mx = hv.rows_x0 + (io.MousePos.x - origin.x) * hv.rows_keys_per_pixel;
    hv.rows_keys_per_pixel = std::clamp(hv.rows_keys_per_pixel * std::pow(0.8, io.MouseWheel), 1.0 / 64, 2.0 * keys / size.x);
    hv.rows_x0 = mx - (io.MousePos.x - origin.x) * hv.rows_keys_per_pixel;
    hv.rows_fitted = false;
  }
  const double span = size.x * hv.rows_keys_per_pixel;
  if (hv.center_on_found && hv.found >= 0) {
    hv.rows_x0 = static_cast<double>(hv.found) + 0.5 - span / 2;
    hv.center_on_found = false;
    hv.rows_fitted = false;
  }
  hv.rows_x0 = std::clamp(hv.rows_x0, -span / 2, keys - span / 2);
  hv.rows_y0 = std::clamp(hv.rows_y0, 0.0, max_y0);
  if (hv.rows_y0 >= max_y0 - 1e-9) hv.rows_follow = true;

  hv.geometry = {true, rows_origin.x, rows_origin.y, size.x, rows_h, hv.rows_x0, hv.rows_keys_per_pixel, hv.rows_y0, 1.0 / hv.row_px};
  // Keys pooled so a column covers at least a pixel; the visible columns and steps only.
  int pool = 0;
  while (std::ldexp(1.0, pool) < hv.rows_keys_per_pixel && pool < 30) ++pool;
  const double per_col = std::ldexp(1.0, pool);
  const std::int64_t cols = (keys + static_cast<std::int64_t>(per_col) - 1) / static_cast<std::int64_t>(per_col);
  const auto clamp_col = [&](double v) { return std::clamp<std::int64_t>(static_cast<std::int64_t>(v), 0, cols); };
  const std::int64_t c0 = clamp_col(std::floor(hv.rows_x0 / per_col)), c1 = clamp_col(std::ceil((hv.rows_x0 + span) / per_col));
  const std::int64_t first = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(hv.rows_y0)) + 1, 1, steps);
  const std::int64_t last = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(hv.rows_y0 + visible_steps)), first, steps);
  MapRequest want;
  want.view = view;
  want.layer = ui.selection.layer;
  want.head = ui.selection.head;
  want.kind = hv.view;
  want.steps = steps;
  want.decode_rows = true;
  want.first = first;
  want.last = last;
  want.pool_level = pool;
  want.c0 = c0;
  want.cols = c1 - c0;
  want.log = hv.log_scale;
  want.log_min = hv.log_min;
  want.minus = cv.minus;
  if (c1 > c0 && (!hv.requested || !want.same_window(*hv.requested))) {
    hv.fetcher.request(ui.tasks, want);
    hv.requested = want;
  }
  if (auto got = hv.fetcher.poll(ui.tasks)) take_result(hv, std::move(*got));
  const bool showing = hv.texture.valid() && hv.fetched_decode_rows && hv.fetched_cols > 0;

  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 canvas_max(origin.x + size.x, origin.y + size.y);
  dl->AddRectFilled(origin, canvas_max, IM_COL32(24, 24, 28, 255));
  const std::function<float(double)> sx = [&](double t) { return static_cast<float>(origin.x + (t - hv.rows_x0) / hv.rows_keys_per_pixel); };
  const auto sy = [&](double step_index) { return static_cast<float>(rows_origin.y + (step_index - hv.rows_y0) * hv.row_px); };  // top of step index+1
  dl->PushClipRect(origin, canvas_max, true);
  if (showing) {
    const double fcell = std::ldexp(1.0, hv.fetched_pool);
    const float xa = sx(hv.fetched_c0 * fcell), xb = sx((hv.fetched_c0 + hv.fetched_cols) * fcell);  // as in the full map
    const float rows_total = static_cast<float>(hv.fetched_last - hv.fetched_first + 2);  // + the prefill row
    dl->AddImage(hv.texture.id(), ImVec2(xa, origin.y), ImVec2(xb, origin.y + strip), ImVec2(0, 0), ImVec2(1, 1.f / rows_total));
    dl->PushClipRect(rows_origin, canvas_max, true);
    dl->AddImage(hv.texture.id(), ImVec2(xa, sy(static_cast<double>(hv.fetched_first - 1))), ImVec2(xb, sy(static_cast<double>(hv.fetched_last))),
                 ImVec2(0, 1.f / rows_total), ImVec2(1, 1));
    // The selected step.
    const std::int64_t s = ui.selection.step > 0 ? std::min<std::int64_t>(ui.selection.step, steps) : steps;
    dl->AddRect(ImVec2(origin.x, sy(static_cast<double>(s - 1)) - 1), ImVec2(canvas_max.x, sy(static_cast<double>(s)) + 1), IM_COL32(255, 255, 255, 170));
    // The row that produced the generated token under the cursor in the output panel.
    if (ui.selection.hover_token > n && ui.selection.hover_token <= keys) {
      const auto q = static_cast<double>(ui.selection.hover_token - n - 1);
      dl->AddRectFilled(ImVec2(origin.x, sy(q)), ImVec2(canvas_max.x, sy(q + 1)), IM_COL32(255, 255, 255, 90));
    }
    dl->PopClipRect();
    if (ui.timing.first_map_ms < 0) ui.timing.first_map_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ui.timing.started).count();
  }
  if (ui.timeline.track && ui.timeline.track->begin < keys) {  // tracked tokens' columns
    const auto a = static_cast<double>(ui.timeline.track->begin), b = static_cast<double>(std::min(ui.timeline.track->end, keys));
    dl->AddRect(ImVec2(sx(a), origin.y), ImVec2(std::max(sx(b), sx(a) + 2), canvas_max.y), kMark, 0, 0, 1.f);
  }
  if (hv.found >= 0 && hv.found < keys) {  // the found token's column
    const auto f = static_cast<double>(hv.found);
    dl->AddRect(ImVec2(sx(f), origin.y), ImVec2(std::max(sx(f + 1), sx(f) + 2), canvas_max.y), kMark, 0, 0, 1.5f);
  }
  if (ui.selection.hover_token == n) dl->AddRectFilled(origin, ImVec2(canvas_max.x, origin.y + strip), IM_COL32(255, 255, 255, 90));
  // The boundary between the collapsed prefill and the decode steps, and where generated keys start.
  dl->AddLine(ImVec2(origin.x, origin.y + strip + gap / 2), ImVec2(canvas_max.x, origin.y + strip + gap / 2), kBoundary, 1.f);
  dl->AddLine(ImVec2(sx(static_cast<double>(n)), rows_origin.y), ImVec2(sx(static_cast<double>(n)), canvas_max.y), kBoundary, 1.f);
  dl->PopClipRect();

  // Labels: the prefill row and thinned step labels on the left (step number and its query
  // token), thinned key labels below, topic bands along the top.
  const std::string ck = capture_key(view.get());
  const auto& tokens = cv.tokens.get(ui.tasks, ck, [view] { return view->tokens(); });
  const auto piece = [&](std::int64_t i, std::size_t max_chars) {
    return i >= 0 && i < static_cast<std::int64_t>(tokens.size()) ? printable(tokens[static_cast<std::size_t>(i)].piece, max_chars) : std::string("...");
  };
  const ImU32 label_colour = IM_COL32(170, 170, 180, 255);
  const float line = ImGui::GetTextLineHeight();
  const float label_right = origin.x - 6;
  if (cv.labels) {
    const char* p = "prefill";
    dl->AddText(ImVec2(label_right - ImGui::CalcTextSize(p).x, origin.y + strip / 2 - line / 2), label_colour, p);
  }
  if (cv.labels) thinned_labels(first, last + 1, line, [&](std::int64_t s) { return sy(static_cast<double>(s) - 0.5); }, [&](std::int64_t s, float y) {
    if (y < rows_origin.y || y > canvas_max.y) return false;
    std::string text = std::to_string(s) + " " + piece(n + s - 1, 6);
    for (std::size_t keep = 5; keep > 1 && ImGui::CalcTextSize(text.c_str()).x > kLabelWidth + kBand - 4; --keep)
      text = std::to_string(s) + " " + piece(n + s - 1, keep);
    dl->AddText(ImVec2(label_right - ImGui::CalcTextSize(text.c_str()).x, y - line / 2), label_colour, text.c_str());
    return true;
  });
  draw_key_labels(dl, hv.rows_x0, span, keys, origin, canvas_max, sx, [&](std::int64_t i) { return piece(i, 10); });
  const auto& segments = cv.segments.get(ui.tasks, ck, [view] { return view->segments(); });
  draw_bands(dl, segments, ImVec2(origin.x, top_left.y), ImVec2(origin.x - kBand - 2, origin.y), canvas_max.x, canvas_max.y, sx, nullptr);

  // Hover: the step and key, the value, and the step's cover. A click selects the step.
  if (hovered && showing) {
    const float my = io.MousePos.y;
    const auto k = static_cast<std::int64_t>(std::floor(hv.rows_x0 + (io.MousePos.x - origin.x) * hv.rows_keys_per_pixel));
    const bool in_prefill = my < origin.y + strip;
    const std::int64_t s = in_prefill ? 0 : static_cast<std::int64_t>(std::floor(hv.rows_y0 + (my - rows_origin.y) / hv.row_px)) + 1;
    const std::int64_t fcell = std::int64_t{1} << hv.fetched_pool;
    const std::int64_t c = k / fcell - hv.fetched_c0;
    const std::int64_t r = in_prefill ? 0 : s - hv.fetched_first + 1;
    if (k >= 0 && k < keys && (in_prefill || (s >= 1 && s <= steps))) {
      ImGui::BeginTooltip();
      if (in_prefill) ImGui::Text("prefill, collapsed: query %lld '%s' (the last prompt token; every mode alike)", static_cast<long long>(n - 1),
                                  piece(n - 1, 40).c_str());
      else ImGui::Text("decode step %lld: query %lld '%s'", static_cast<long long>(s), static_cast<long long>(n + s - 1), piece(n + s - 1, 40).c_str());
      ui.map.tooltip = in_prefill ? "prefill\n" : "decode step " + std::to_string(s) + "\n";
      ImGui::Text("key %lld  '%s'", static_cast<long long>(k), piece(k, 40).c_str());
      const std::int64_t query = in_prefill ? n - 1 : n + s - 1;
      const auto rows_have = hv.fetched_last - hv.fetched_first + 2;
      if (k > query) {
        ImGui::TextUnformatted("(masked: key after query)");
      } else if (c >= 0 && c < hv.fetched_cols && r >= 0 && r < rows_have && static_cast<std::size_t>(r * hv.fetched_cols + c) < hv.values.size()) {
        const float v = hv.values[static_cast<std::size_t>(r * hv.fetched_cols + c)];
        const char* what = hv.view == figures::MapView::kDifference ? "effective - dense" : "attention";
        if (std::isnan(v)) ImGui::TextUnformatted("no dense row at this step (shadow off)");
        else if (fcell == 1) ImGui::Text("%s %.6g", what, v);
        else ImGui::Text("%s, max over %lld keys: %.6g", what, static_cast<long long>(fcell), v);
      }
      if (!in_prefill) {
        const std::string key = ck + "/" + std::to_string(s) + "/" + std::to_string(ui.selection.layer) + "/" + std::to_string(ui.selection.head);
        const auto& lines = cv.row_cover.get(ui.tasks, key, [view, s, layer = ui.selection.layer, head = ui.selection.head] { return describe_cover(*view, s, layer, head); });
        if (cv.row_cover.fresh(key)) {
          ImGui::Separator();
          for (const std::string& l : lines) {
            ImGui::TextUnformatted(l.c_str());
            ui.map.tooltip += l + "\n";
          }
        }
        if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) ui.selection.step = s;
      }
      ImGui::EndTooltip();
    }
  }
}

// Tick positions and labels of a colour scale, as fractions of the bar.
std::vector<std::pair<float, std::string>> scale_ticks(const viz::ColorScale& sc) {
  std::vector<std::pair<float, std::string>> out;
  char buf[32];
  if (sc.kind == viz::ColorScale::kLog) {
    const double lo = std::log10(sc.vmin), hi = std::log10(sc.vmax);
    for (double e = std::ceil(lo - 1e-9); e <= hi + 1e-9; e += 1) {
      std::snprintf(buf, sizeof buf, "1e%d", static_cast<int>(e));
      out.push_back({static_cast<float>((e - lo) / (hi - lo)), buf});
    }
    if (out.empty() || out.back().first < 0.85f) {
      std::snprintf(buf, sizeof buf, "%.2g", sc.vmax);
      out.push_back({1.f, buf});
    }
  } else if (sc.kind == viz::ColorScale::kSymmetric) {
    std::snprintf(buf, sizeof buf, "%+.2g", -sc.vmax);
    out.push_back({0.f, buf});
    out.push_back({0.5f, "0"});
    std::snprintf(buf, sizeof buf, "%+.2g", sc.vmax);
    out.push_back({1.f, buf});
  } else {
    for (int i = 0; i <= 2; ++i) {
      std::snprintf(buf, sizeof buf, "%.2g", sc.vmin + (sc.vmax - sc.vmin) * i / 2);
      out.push_back({i / 2.f, buf});
    }
  }
  return out;
}

// Below the map: the ticked colour bar, the topic legend, the level and layout, then export.
void draw_footer(UiState& ui, bool rows_layout, int level) {
  HeatmapView& hv = ui.heatmap;
  const auto map_view = hv.view;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const bool diff = map_view == figures::MapView::kDifference;
  const float w = 200, h = 10;
  // A ticked colour bar at the cursor, and the room it takes.
  const auto bar = [&](viz::ColormapId id, const viz::ColorScale& scale) {
    const auto& table = viz::Colormap::get(id).table();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    for (int i = 0; i < 256; ++i)
      dl->AddRectFilled(ImVec2(p.x + w * i / 256.f, p.y + 2), ImVec2(p.x + w * (i + 1) / 256.f + 0.5f, p.y + 2 + h),
                        rgb(table[static_cast<std::size_t>(i)]));
    const ImU32 tick = IM_COL32(200, 200, 205, 255);
    float last_end = -1e30f;
    for (const auto& [f, text] : scale_ticks(scale)) {
      const float x = p.x + w * f;
      dl->AddLine(ImVec2(x, p.y + 2 + h), ImVec2(x, p.y + 5 + h), tick);
      const float tw = ImGui::CalcTextSize(text.c_str()).x;
      const float tx = std::clamp(x - tw / 2, p.x - 4, p.x + w - tw + 30);
      if (tx < last_end) continue;
      dl->AddText(ImGui::GetFont(), ImGui::GetFontSize() * 0.85f, ImVec2(tx, p.y + 5 + h), tick, text.c_str());
      last_end = tx + tw + 4;
    }
    ImGui::Dummy(ImVec2(w + 30, h + 18));
  };
  bar(diff ? viz::ColormapId::kBalance : viz::ColormapId::kEmber, hv.scale);
  ImGui::SameLine();
  // Comparing as B - A: that canvas's own diverging bar, with its own range.
  if (ui.compare.view && ui.compare.difference) {
    bar(viz::ColormapId::kBalance, ui.compare.map.scale);
    const ImVec2 a = ImGui::GetItemRectMin();
    ui.mark_drawn("difference_colour_bar", a.x, a.y + 2, a.x + w, a.y + 2 + h);
    ImGui::SameLine();
    ImGui::TextUnformatted("B - A  |");
    ImGui::SameLine();
  }
  const char* what = diff ? "effective - dense" : hv.log_scale ? "attention, log" : "attention";
  if (rows_layout) ImGui::Text("%s  |  decode rows, keys max over %d  |  layer %d head %d", what, 1 << std::clamp(hv.fetched_pool, 0, 30), ui.selection.layer, ui.selection.head);
  else ImGui::Text("%s  |  full map, level %d (%d tokens/cell)  |  layer %d head %d", what, level, 1 << std::clamp(level, 0, 30), ui.selection.layer, ui.selection.head);
  if (!hv.error.empty()) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(1.f, 0.5f, 0.5f, 1.f), "%s", hv.error.c_str());
  }
  // The topic legend: one swatch per topic (colour and label), in prompt order.
  const std::string ck = capture_key(ui.controller.view().get());
  const auto view = ui.controller.view();
  const auto& segments = ui.segments.get(ui.tasks, ck, [view] { return view->segments(); });
  std::vector<std::string> seen;
  bool first = true;
  for (const capture::Segment& seg : segments) {
    const std::string id = seg.colour + "\t" + seg.label;
    if (std::find(seen.begin(), seen.end(), id) != seen.end()) continue;
    seen.push_back(id);
    if (!first) ImGui::SameLine(0, 14);
    first = false;
    const ImVec2 q = ImGui::GetCursorScreenPos();
    const float line = ImGui::GetTextLineHeight();
    dl->AddRectFilled(ImVec2(q.x, q.y + 2), ImVec2(q.x + line - 4, q.y + line - 2), parse_colour(seg.colour));
    ImGui::Dummy(ImVec2(line, line));
    ImGui::SameLine(0, 2);
    ImGui::TextUnformatted(printable(seg.label, 28).c_str());
  }
}

// "find": a token search; Enter (or Next) jumps to the next token whose text contains it and
// marks its row and column on the map.
void search_box(UiState& ui, const std::shared_ptr<const capture::CaptureView>& view) {
  HeatmapView& hv = ui.heatmap;
  ImGui::SetNextItemWidth(140);
  bool go = ImGui::InputTextWithHint("##find", "find token", &hv.search, ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  go |= ImGui::Button("Next");
  if (go) run_search(ui, *view);
  if (!hv.search_note.empty()) {
    ImGui::SameLine();
    ImGui::TextUnformatted(hv.search_note.c_str());
  }
}

// The right canvas follows the left: the same window, layout, view and marks.
void copy_view(const HeatmapView& from, HeatmapView& to) {
  to.x0 = from.x0;
  to.y0 = from.y0;
  to.tokens_per_pixel = from.tokens_per_pixel;
  to.tokens_per_pixel_y = from.tokens_per_pixel_y;
  to.fitted = from.fitted;
  to.layout = from.layout;
  to.rows_x0 = from.rows_x0;
  to.rows_keys_per_pixel = from.rows_keys_per_pixel;
  to.rows_y0 = from.rows_y0;
  to.row_px = from.row_px;
  to.rows_follow = from.rows_follow;
  to.rows_fitted = from.rows_fitted;
  to.log_scale = from.log_scale;
  to.log_min = from.log_min;
  to.view = from.view;
  to.overlays = from.overlays;
  to.found = from.found;
}

// "compare": a second capture beside the map, or the difference of the two. B is a capture file,
// or a second run of A's tokens under another config (Run B), shown as it computes.
void compare_box(UiState& ui) {
  CompareState& c = ui.compare;
  const Status st = ui.controller.status();
  if (const auto b = ui.controller.compare_view(); b && b != c.adopted) {
    c.adopted = b;
    c.adopted_for = ui.controller.view();
    c.view = b;
    c.path.clear();
    c.note = st.compare.label + " (A's tokens)";
    ui.heatmap.fit();
    c.map.fit();
  }
  if (c.view && c.view == c.adopted && ui.controller.view() != c.adopted_for) {  // a new A: B ran other tokens
    c.view.reset();
    c.note.clear();
    ui.heatmap.fit();
  }
  ImGui::SetNextItemWidth(150);
  const bool enter = ImGui::InputTextWithHint("##compare", "compare with .h5", &c.path, ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if (ImGui::Button(c.view ? "Close" : "Compare") || enter) {
    if (c.view && !enter) c.path.clear();
    open_compare(ui);
  }
  ImGui::SameLine();
  ImGui::BeginDisabled(st.compare.running);
  if (ImGui::Button("Run B")) ImGui::OpenPopup("run_b");
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("B: the prompt and A's generated tokens run again under another config,\n"
                      "so both maps attend from the same queries and differ by their attention alone");
  if (ImGui::BeginPopup("run_b")) {
    ImGui::TextDisabled("run A's tokens again under");
    for (const std::string& choice : compare_choices(ui))
      if (ImGui::Selectable(choice.c_str())) run_compare(ui, choice);
    ImGui::EndPopup();
  }
  if (c.view) {
    ImGui::SameLine();
    ImGui::Checkbox("B-A", &c.difference);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("the right canvas shows B - A: red where B attends more, blue where A does");
  }
  if (st.compare.running) {
    ImGui::SameLine();
    ImGui::TextDisabled("B: step %lld/%lld", static_cast<long long>(st.compare.steps_done), static_cast<long long>(st.compare.steps_total));
  } else if (st.compare.failed) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(1.f, 0.5f, 0.5f, 1.f), "%s", st.compare.message.c_str());
  } else if (!c.view && !c.note.empty()) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(1.f, 0.5f, 0.5f, 1.f), "%s", c.note.c_str());
  }
}

}  // namespace

std::vector<std::string> compare_choices(const UiState& ui) {
  std::vector<std::string> v = {"layers panel", "dense", "lined", "clustered", "paper", "kascade", "semanticache"};
  for (const MethodPreset& m : method_presets()) v.push_back(m.name);
  v.push_back("mixed(" + std::to_string(ui.layers.mixed_a) + "," + std::to_string(ui.layers.mixed_b) + ")");
  return v;
}

void run_compare(UiState& ui, const std::string& choice) {
  const LukaConfig current = ui.controller.config();
  LukaConfig cfg = current;
  if (choice != "layers panel") {
    try {
      cfg = LukaConfig::preset(choice, static_cast<std::int64_t>(current.layers.size()));
    } catch (const std::exception& e) {
      ui.notice = e.what();
      return;
    }
  }
  ui.controller.run_compare(cfg, choice == "layers panel" ? describe_modes(cfg) : choice);
}

void open_compare(UiState& ui) {
  CompareState& c = ui.compare;
  ui.heatmap.fit();  // the map's canvas changes width
  c.map.fit();
  c.view.reset();
  c.note.clear();
  c.opening.cancel();
  c.opening = {};
  if (c.path.find_first_not_of(' ') == std::string::npos) return;
  // Opened on the I/O lane, not here: the UI keeps drawing (take_compare takes the outcome).
  c.note = "opening " + std::filesystem::path(c.path).filename().string() + "...";
  TaskOptions io;
  io.lane = "io";
  const std::string path = c.path;
  c.opening.start(ui.tasks, "opening B: " + std::filesystem::path(path).filename().string(),
                  [path] { return std::shared_ptr<const capture::CaptureView>(capture::CaptureFile::open(path)); }, io);
}

void take_compare(UiState& ui) {
  CompareState& c = ui.compare;
  if (auto r = c.opening.take()) {
    if (r->value) {
      c.view = std::move(*r->value);
      c.note = std::filesystem::path(c.path).filename().string();
    } else {
      c.note = r->cancelled ? "" : r->error;
    }
  }
}

void run_search(UiState& ui, const capture::CaptureView& view) {
  HeatmapView& hv = ui.heatmap;
  const std::vector<capture::Token> tokens = view.tokens();
  hv.found = find_token(tokens, hv.search, hv.found);
  if (hv.found < 0) {
    hv.search_note = hv.search.empty() ? "" : "not found";
    return;
  }
  hv.search_note = "token " + std::to_string(hv.found) + " '" + token_label(tokens[static_cast<std::size_t>(hv.found)].piece, 16) + "'";
  hv.center_on_found = true;
}

void draw_heatmap_panel(UiState& ui) {
  // The output panel (drawn after this one) sets the hovered token again while it is hovered; it
  // is read here, then cleared on every way out, the small multiples' and the empty panel's too,
  // so a highlight never outlives the hover.
  struct ClearHover {
    UiState& ui;
    ~ClearHover() { ui.selection.hover_token = -1; }
  } clear_hover{ui};
  HeatmapView& hv = ui.heatmap;
  ui.map.tooltip.clear();
  ui.map.computing.clear();
  take_compare(ui);
  const auto view = ui.controller.view();
  if (!view) {
    ImGui::TextDisabled("run a prompt or open a capture to see attention maps");
    return;
  }
  const capture::Summary sum = view->summary();
  const capture::Layout& lay = sum.layout;
  if (lay.levels.empty() || lay.prompt_tokens == 0) {
    ImGui::TextDisabled("this capture has no prefill maps");
    return;
  }
  // Another capture: a new run, or a file of another prompt length, starts fitted to the panel;
  // a file of the same length keeps the zoom (the same prompt, compared or reopened). The first
  // view after start keeps the zoom the session restored.
  if (hv.zoom_view.lock() != view) {
    if (hv.zoom_seen && (!ui.controller.status().replay || lay.prompt_tokens != hv.zoom_prompt)) hv.fit();
    hv.zoom_view = view;
    hv.zoom_seen = true;
    hv.zoom_prompt = lay.prompt_tokens;
  }
  // Selection: recorded layers and heads only.
  if (!std::binary_search(lay.layers.begin(), lay.layers.end(), ui.selection.layer)) ui.selection.layer = lay.layers.front();
  if (!std::binary_search(lay.heads.begin(), lay.heads.end(), ui.selection.head)) ui.selection.head = lay.heads.front();
  ImGui::SetNextItemWidth(110);
  ImGui::SliderInt("layer", &ui.selection.layer, lay.layers.front(), lay.layers.back());
  ImGui::SameLine();
  ImGui::SetNextItemWidth(90);
  ImGui::SliderInt("head", &ui.selection.head, lay.heads.front(), lay.heads.back());
  ImGui::SameLine();
  // The decode step every panel shows (the rows' marked step, the layers table, the timeline),
  // here as well as under the output, so a replay can be stepped through from the map.
  if (sum.complete_steps > 0) {
    const std::int64_t shown = ui.selection.step > 0 ? std::min<std::int64_t>(ui.selection.step, sum.complete_steps) : sum.complete_steps;
    int step = static_cast<int>(shown);
    ImGui::SetNextItemWidth(110);
    if (ImGui::SliderInt("step##map", &step, 1, static_cast<int>(sum.complete_steps))) ui.selection.step = step;
    ui.mark_item_drawn("map_step");
    ui.drawn["map_step"].text = std::to_string(step);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("the decode step the panels show (drag; the output tab has the same slider)");
    ImGui::SameLine();
  }
  ImGui::Checkbox("log", &hv.log_scale);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(110);
  static const char* kViews[] = {"effective", "dense", "difference"};
  choice_combo("##view", hv.view, kViews);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(120);
  static const char* kLayouts[] = {"auto layout", "full map", "decode rows"};
  choice_combo("##layout", hv.layout, kLayouts);
  ImGui::SameLine();
  if (ImGui::Button("Fit")) hv.fit();
  ImGui::SameLine();
  ImGui::Checkbox("overlays", &hv.overlays);
  ImGui::SameLine();
  if (ImGui::SmallButton("keys (F1)")) ui.window.show_shortcuts = true;
  choice_radio("map", hv.mode, MapMode::kMap);
  ImGui::SameLine();
  choice_radio("heads", hv.mode, MapMode::kHeadGrid);
  ImGui::SameLine();
  choice_radio("layers", hv.mode, MapMode::kLayerStrip);
  ImGui::SameLine(0, 24);
  search_box(ui, view);
  ImGui::SameLine(0, 24);
  compare_box(ui);
  if (hv.mode != MapMode::kMap) {
    export_row(ui);  // the small multiples as one figure
    draw_thumbnails(ui, *view, hv.mode == MapMode::kHeadGrid);
    return;
  }
  const std::int64_t steps = sum.complete_steps;
  // Comparing as B - A, A takes the difference's layout too: the two canvases stay aligned.
  const bool differencing = ui.compare.view && ui.compare.difference;
  const bool auto_rows = hv.view != figures::MapView::kEffective || differencing;
  const bool rows_layout = steps > 0 && (hv.layout == MapLayout::kDecodeRows || (hv.layout == MapLayout::kAuto && auto_rows));

  // The canvas fills the panel less the label margins and the footer.
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const ImVec2 top_left = ImGui::GetCursorScreenPos();
  const float label_h = ImGui::GetTextLineHeight() + 4;
  const ImVec2 origin(top_left.x + kLabelWidth + kBand + 2, top_left.y + kBand + 2);
  // The footer: the colour bar's row, the legend and the export row.
  const ImGuiStyle& style = ImGui::GetStyle();
  const float footer = 28 + style.ItemSpacing.y + ImGui::GetTextLineHeightWithSpacing() + ImGui::GetFrameHeightWithSpacing() + 6;
  const ImVec2 size(std::max(64.f, avail.x - kLabelWidth - kBand - 6), std::max(64.f, avail.y - kBand - 2 - label_h - footer));
  int level = lay.levels.back();
  CompareState& cmp = ui.compare;
  if (!cmp.view) {
    Canvas main{view, nullptr, hv, ui.tokens, ui.segments, ui.map.overlay, ui.map.row_cover};
    if (rows_layout) draw_decode_rows(ui, main, sum, top_left, origin, size);
    else draw_full_map(ui, main, sum, top_left, origin, size);
  } else {
    // Two canvases side by side, the right one following the left's zoom, layer, head and view.
    const float gap = 14;
    const ImVec2 half((size.x - gap) / 2, size.y);
    Canvas main{view, nullptr, hv, ui.tokens, ui.segments, ui.map.overlay, ui.map.row_cover};
    capture::Summary a_sum = sum, b_sum = cmp.view->summary();
    std::string why;
    if (cmp.difference) {
      a_sum.complete_steps = b_sum.complete_steps = std::min(sum.complete_steps, b_sum.complete_steps);
      b_sum = a_sum;
    }
    const capture::Layout& bl = cmp.view->summary().layout;
    if (!std::binary_search(bl.layers.begin(), bl.layers.end(), ui.selection.layer) || !std::binary_search(bl.heads.begin(), bl.heads.end(), ui.selection.head))
      why = "layer " + std::to_string(ui.selection.layer) + " head " + std::to_string(ui.selection.head) + " is not recorded in " + cmp.note;
    else if (bl.levels.empty())
      why = cmp.note + " has no prefill maps";
    const bool b_rows = b_sum.complete_steps > 0 && rows_layout;  // one layout for both canvases
    if (rows_layout) draw_decode_rows(ui, main, sum, top_left, origin, half);
    else draw_full_map(ui, main, sum, top_left, origin, half);
    const ImVec2 b_origin(origin.x + half.x + gap, origin.y);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    if (why.empty()) {
      copy_view(hv, cmp.map);
      if (cmp.difference) cmp.map.view = figures::MapView::kDifference;
      // B - A: one sign everywhere (the fidelity table's Δ and the cover timeline's too).
      Canvas right{cmp.view,     cmp.difference ? view : nullptr, cmp.map, cmp.tokens, cmp.segments, cmp.overlay,
                   cmp.row_cover, false, false};
      const ImVec2 b_top_left(b_origin.x - kBand - 2, top_left.y);
      if (b_rows) draw_decode_rows(ui, right, b_sum, b_top_left, b_origin, half);
      else draw_full_map(ui, right, b_sum, b_top_left, b_origin, half);
      const figures::MapView kind = hv.view;
      copy_view(cmp.map, hv);  // a pan or zoom on the right moves the left too
      hv.view = kind;
    } else {
      dl->AddText(ImVec2(b_origin.x + 8, b_origin.y + 8), IM_COL32(255, 160, 160, 255), why.c_str());
    }
    // Which capture each side shows.
    // A replayed file by its name, a run by its layers' modes at its start.
    const Status st = ui.controller.status();
    std::string a_title = "A: " + std::filesystem::path(st.capture.empty() ? st.source : st.capture).filename().string();
    if (!st.replay) {
      try {
        a_title = "A: " + describe_modes(LukaConfig::from_json(sum.manifest.luka_config, sum.layout.num_layers, "capture"));
      } catch (const Error&) {
      }
    }
    const std::string b_title = cmp.difference ? "B - A (red: B attends more), B: " + cmp.note : "B: " + cmp.note;
    for (const auto& [x, text] : {std::pair{origin.x, a_title}, std::pair{b_origin.x, b_title}}) {
      const ImVec2 ts = ImGui::CalcTextSize(text.c_str());
      dl->AddRectFilled(ImVec2(x + 4, origin.y + 4), ImVec2(x + 12 + ts.x, origin.y + 8 + ts.y), IM_COL32(0, 0, 0, 190), 3.f);
      dl->AddText(ImVec2(x + 8, origin.y + 6), IM_COL32(255, 255, 255, 255), text.c_str());
    }
  }
  if (!rows_layout && hv.fetched_level >= 0) level = hv.fetched_level;  // -1 until the first window arrives
  ImGui::SetCursorScreenPos(ImVec2(top_left.x, origin.y + size.y + label_h + 2));
  draw_footer(ui, rows_layout, level);
  export_row(ui);  // the current layer and head (the same figure `luka export` draws)
}

}  // namespace luka::studio
