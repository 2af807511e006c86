// The heatmap panel's full query x key map (heatmap_canvas.h): the prefill map from the capture's
// max-pooled pyramid, then one row per decode step, read for the visible window only.
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
#include "app/studio/views/choice_widgets.h"
#include "app/studio/data/method_presets.h"
#include "app/studio/views/ui_state.h"
#include "captures/reader.h"
#include "core/luka/config.h"
#include "core/util/error.h"
#include "viz/heatmap.h"
#include "viz/state_colours.h"
#include "app/studio/views/heatmap_canvas.h"

namespace luka::studio::heatmap {

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

namespace {

// One frame of the full map: where the canvas is, the map's size in tokens, and token to screen
// position each way.
struct FullMapFrame {
  ImVec2 origin, size, canvas_max;
  std::int64_t n = 0;          // prompt queries, then one per decode step
  double span_x = 0, span_y = 0;  // tokens in view each way
  std::function<float(double)> sx, sy;
};

// Fit (on first sight, or while fitted), drag to pan, wheel to zoom about the cursor, and a jump
// to the found token; keeps the window over the map. Returns whether the canvas is hovered.
bool full_map_input(HeatmapView& hv, const Canvas& cv, ImVec2 origin, ImVec2 size, std::int64_t n) {
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
  return hovered;
}

// The level to read (the finest stored one whose cells cover at least a pixel each way, so every
// cell is drawn and, being a max over its tokens, no sink or needle is lost when zoomed out), the
// window of cells in view asked for when it changed (and now and then while a live prefill fills
// in), and a finished read taken. Returns the level.
int full_map_fetch(UiState& ui, Canvas& cv, const capture::Summary& sum, const FullMapFrame& f, bool live_prefill) {
  HeatmapView& hv = cv.hv;
  const capture::Layout& lay = sum.layout;
  const double tpp = std::max(hv.tokens_per_pixel, hv.tokens_per_pixel_y);
  int level = lay.levels.back();
  for (auto it = lay.levels.rbegin(); it != lay.levels.rend(); ++it)
    if (std::ldexp(1.0, *it) >= tpp) level = *it;
  const double cell = std::ldexp(1.0, level);  // tokens per cell
  const std::int64_t cells = capture::level_size(f.n, level);
  const auto clamp_cell = [&](double v) { return std::clamp<std::int64_t>(static_cast<std::int64_t>(v), 0, cells); };
  const std::int64_t c0 = clamp_cell(std::floor(hv.x0 / cell)), c1 = clamp_cell(std::ceil((hv.x0 + f.span_x) / cell));
  const std::int64_t r0 = clamp_cell(std::floor(hv.y0 / cell)), r1 = clamp_cell(std::ceil((hv.y0 + f.span_y) / cell));
  hv.geometry = {false, f.origin.x, f.origin.y, f.size.x, f.size.y, hv.x0, hv.tokens_per_pixel, hv.y0, hv.tokens_per_pixel_y};
  MapRequest want = canvas_request(ui, cv, sum.complete_steps);
  want.level = level;
  want.r0 = r0;
  want.c0 = c0;
  want.rows = r1 - r0;
  want.cols = c1 - c0;
  if (r1 > r0 && c1 > c0 && (!hv.requested || !want.same_window(*hv.requested) || (live_prefill && ImGui::GetFrameCount() % 15 == 0))) {
    hv.fetcher.request(ui.tasks, want);  // a live map fills in during the prefill: ask again now and then
    hv.requested = want;
  }
  if (auto got = hv.fetcher.poll(ui.tasks)) take_result(hv, std::move(*got));
  return level;
}

// Overlays at the selected decode step: the page grid, and on that step's query row the refined
// pages (violet) and heavy hitters (crimson) of the selected head, or the keys a Kascade top-k, a
// press or Quest kept.
void draw_step_overlays(UiState& ui, Canvas& cv, ImDrawList* dl, const FullMapFrame& f, const capture::Layout& lay,
                        std::int64_t steps, const std::string& ck) {
  const auto& view = cv.view;
  const std::int64_t s = ui.selection.step > 0 ? std::min<std::int64_t>(ui.selection.step, steps) : steps;
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
  if (!cv.overlay.fresh(okey)) return;  // never draw another step's overlay
  const auto& sx = f.sx;
  const auto& sy = f.sy;
  const auto& pages = ov.pages;
  // Page starts as a grid, for pages that hold a run of tokens (SemantiCache's clusters and raw
  // tokens interleave, so they draw only as refined runs), where the layer ran clustered: the
  // other modes keep pages only to switch to clustered at once.
  const auto first_run = std::find_if(pages.begin(), pages.end(), [](const capture::PageInfo& p) { return p.members.empty() && !p.raw; });
  const double page_px = first_run == pages.end() ? 0 : (first_run->end - first_run->start) / cv.hv.tokens_per_pixel;
  if (ov.clustered && page_px >= 8) {  // a grid any denser would hide the map
    std::int64_t lines = 0;
    for (const capture::PageInfo& p : pages) {
      if (p.created_step >= s || !p.members.empty()) continue;
      const float x = sx(static_cast<double>(p.start));
      dl->AddLine(ImVec2(x, sy(p.start)), ImVec2(x, sy(static_cast<double>(f.n))), IM_COL32(120, 140, 170, 90));
      ++lines;
    }
    ui.mark_drawn("page_grid", f.origin.x, f.origin.y, f.canvas_max.x, f.canvas_max.y, std::to_string(lines));
  }
  const double q = static_cast<double>(lay.prompt_tokens + s - 1);
  const float y0 = sy(q), y1 = std::max(sy(q + 1), y0 + 3.f);
  dl->AddRect(ImVec2(sx(0), y0 - 1), ImVec2(sx(q + 1), y1 + 1), IM_COL32(255, 255, 255, 160));
  for (const std::int64_t p : ov.refined) {
    if (p < 0 || static_cast<std::size_t>(p) >= pages.size()) continue;
    for (const auto& [b, e] : pages[static_cast<std::size_t>(p)].runs())
      dl->AddRect(ImVec2(sx(static_cast<double>(b)), y0 - 3), ImVec2(sx(static_cast<double>(e)), y1 + 3), rgb(viz::kRefinedColour), 0, 0, 2);
  }
  for (const std::int64_t t : ov.heavy) {
    const float x = sx(t + 0.5);
    dl->AddLine(ImVec2(x, y0 - 6), ImVec2(x, y1 + 6), rgb(viz::kHeavyHitterColour), 1.5f);
  }
  // Kascade: the keys of the step's top-k set; a press or Quest: the keys it kept; ticks above and
  // below the query's row (marked kascade_keys for scripts, whichever the mode).
  for (const std::int64_t t : ov.selected) {
    const float x = sx(t + 0.5);
    dl->AddLine(ImVec2(x, y0 - 7), ImVec2(x, y0 - 2), rgb(viz::kKascadeColour), 1.5f);
    dl->AddLine(ImVec2(x, y1 + 2), ImVec2(x, y1 + 7), rgb(viz::kKascadeColour), 1.5f);
  }
  if (!ov.selected.empty())
    ui.mark_drawn("kascade_keys", sx(static_cast<double>(ov.selected.front())), y0 - 7, sx(static_cast<double>(ov.selected.back() + 1)), y1 + 7,
                  std::to_string(ov.selected.size()));
}

// The found token's row and column, the tracked tokens' columns (and rows while they are prompt
// queries), and the row that produced the generated token under the cursor in the output panel.
void draw_marks(const UiState& ui, const HeatmapView& hv, ImDrawList* dl, const FullMapFrame& f) {
  const auto& sx = f.sx;
  const auto& sy = f.sy;
  if (hv.found >= 0 && hv.found < f.n) {
    const auto t = static_cast<double>(hv.found);
    dl->AddRect(ImVec2(sx(t), f.origin.y), ImVec2(std::max(sx(t + 1), sx(t) + 2), f.canvas_max.y), kMark, 0, 0, 1.5f);
    dl->AddRect(ImVec2(f.origin.x, sy(t)), ImVec2(f.canvas_max.x, std::max(sy(t + 1), sy(t) + 2)), kMark, 0, 0, 1.5f);
  }
  if (ui.timeline.track) {
    const auto a = static_cast<double>(ui.timeline.track->begin), b = static_cast<double>(std::min(ui.timeline.track->end, f.n));
    dl->AddRect(ImVec2(sx(a), f.origin.y), ImVec2(std::max(sx(b), sx(a) + 2), f.canvas_max.y), kMark, 0, 0, 1.f);
    dl->AddRect(ImVec2(f.origin.x, sy(a)), ImVec2(f.canvas_max.x, std::max(sy(b), sy(a) + 2)), kMark, 0, 0, 1.f);
  }
  if (ui.selection.hover_token > 0 && ui.selection.hover_token <= f.n) {
    const auto q = static_cast<double>(ui.selection.hover_token - 1);
    dl->AddRectFilled(ImVec2(f.origin.x, sy(q)), ImVec2(f.canvas_max.x, std::max(sy(q + 1), sy(q) + 2)), IM_COL32(255, 255, 255, 90));
  }
}

// No data yet: the prefill's progress over the empty map.
void draw_prefill_progress(UiState& ui, ImDrawList* dl, const FullMapFrame& f) {
  const Status st = ui.controller.status();
  const std::string msg = (st.prefill_fraction >= 0 ? st.message : std::string("computing the prefill")) + " (rows fill in as layers finish)";
  const ImVec2 ts = ImGui::CalcTextSize(msg.c_str());
  const ImVec2 p(f.origin.x + std::max(4.f, (f.size.x - ts.x) / 2), f.origin.y + 12);
  dl->AddRectFilled(ImVec2(p.x - 8, p.y - 4), ImVec2(p.x + ts.x + 8, p.y + ts.y + 10), IM_COL32(0, 0, 0, 210), 4.f);
  dl->AddText(p, IM_COL32(255, 255, 255, 255), msg.c_str());
  ui.map.computing = msg;
  ui.mark_drawn("prefill_bar", p.x, p.y + ts.y + 3, p.x + ts.x, p.y + ts.y + 7);  // the whole track; filled to the fraction
  if (st.prefill_fraction >= 0)
    dl->AddRectFilled(ImVec2(p.x, p.y + ts.y + 3), ImVec2(p.x + ts.x * static_cast<float>(std::clamp(st.prefill_fraction, 0.0, 1.0)), p.y + ts.y + 7),
                      IM_COL32(230, 230, 235, 255));
}

// Hover: query and key tokens and the value under the cursor.
void full_map_tooltip(UiState& ui, const HeatmapView& hv, const FullMapFrame& f, std::int64_t prompt_tokens,
                      const std::function<std::string(std::int64_t, std::size_t)>& piece) {
  const ImGuiIO& io = ImGui::GetIO();
  const double fetched_cell = std::ldexp(1.0, hv.fetched_level);
  const auto q = static_cast<std::int64_t>(std::floor(hv.y0 + (io.MousePos.y - f.origin.y) * hv.tokens_per_pixel_y));
  const auto k = static_cast<std::int64_t>(std::floor(hv.x0 + (io.MousePos.x - f.origin.x) * hv.tokens_per_pixel));
  if (q < 0 || q >= f.n || k < 0 || k >= f.n) return;
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
    const char* what = hv.view == figures::MapView::kDifference ? "effective - dense" : "attention";
    if (std::isnan(v)) ImGui::TextUnformatted("no dense row at this step (shadow off)");
    else if (hv.fetched_level == 0) ImGui::Text("%s %.6g", what, v);
    else ImGui::Text("%s, max over %gx%g tokens: %.6g", what, fetched_cell, fetched_cell, v);
    if (q >= prompt_tokens) ImGui::Text("decode step %lld", static_cast<long long>(q - prompt_tokens + 1));
  }
  ImGui::EndTooltip();
}

}  // namespace

// The full query x key map in the canvas [origin, origin + size).
void draw_full_map(UiState& ui, Canvas& cv, const capture::Summary& sum, ImVec2 top_left, ImVec2 origin, ImVec2 size) {
  HeatmapView& hv = cv.hv;
  const auto& view = cv.view;
  const capture::Layout& lay = sum.layout;
  const std::int64_t steps = sum.complete_steps;
  FullMapFrame f;
  f.origin = origin;
  f.size = size;
  f.canvas_max = ImVec2(origin.x + size.x, origin.y + size.y);
  f.n = lay.prompt_tokens + steps;
  const bool hovered = full_map_input(hv, cv, origin, size, f.n);
  f.span_x = size.x * hv.tokens_per_pixel;
  f.span_y = size.y * hv.tokens_per_pixel_y;
  f.sx = [&hv, origin](double t) { return static_cast<float>(origin.x + (t - hv.x0) / hv.tokens_per_pixel); };
  f.sy = [&hv, origin](double t) { return static_cast<float>(origin.y + (t - hv.y0) / hv.tokens_per_pixel_y); };
  const bool live_prefill = !sum.finished && steps == 0;
  full_map_fetch(ui, cv, sum, f, live_prefill);
  const bool showing = hv.texture.valid() && !hv.fetched_decode_rows;  // the texture may still hold the other layout
  const double fetched_cell = std::ldexp(1.0, hv.fetched_level);

  ImDrawList* dl = ImGui::GetWindowDrawList();
  const auto& sx = f.sx;
  const auto& sy = f.sy;
  dl->AddRectFilled(origin, f.canvas_max, IM_COL32(24, 24, 28, 255));
  dl->PushClipRect(origin, f.canvas_max, true);
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
    dl->AddLine(ImVec2(origin.x, sy(b)), ImVec2(f.canvas_max.x, sy(b)), kBoundary, 1.f);
    dl->AddLine(ImVec2(sx(b), origin.y), ImVec2(sx(b), f.canvas_max.y), kBoundary, 1.f);
    dl->AddText(ImVec2(std::max(origin.x, sx(0)) + 4, sy(b) + 2), kBoundary, "decode");
  }
  const std::string ck = capture_key(view.get());
  if (hv.overlays && steps > 0 && lay.covers) {
    try {
      draw_step_overlays(ui, cv, dl, f, lay, steps, ck);
    } catch (const std::exception&) {  // a step not in the file yet: no overlay this frame
    }
  }
  draw_marks(ui, hv, dl, f);
  dl->PopClipRect();
  if (live_prefill) draw_prefill_progress(ui, dl, f);
  // Topic bands and token labels on both axes.
  const auto& segments = cv.segments.get(ui.tasks, ck, [view] { return view->segments(); });
  draw_bands(dl, segments, ImVec2(origin.x, top_left.y), ImVec2(origin.x - kBand - 2, origin.y), f.canvas_max.x, f.canvas_max.y, sx,
             cv.labels ? &sy : nullptr);
  const auto& tokens = cv.tokens.get(ui.tasks, ck, [view] { return view->tokens(); });
  const std::function<std::string(std::int64_t, std::size_t)> piece = [&](std::int64_t i, std::size_t max_chars) {
    return i < static_cast<std::int64_t>(tokens.size()) ? printable(tokens[static_cast<std::size_t>(i)].piece, max_chars) : std::string("...");
  };
  const ImU32 label_colour = IM_COL32(170, 170, 180, 255);
  const float line = ImGui::GetTextLineHeight();
  if (!tokens.empty() && cv.labels) {
    const auto first_row = static_cast<std::int64_t>(std::max(0.0, std::floor(hv.y0)));
    const auto last_row = std::min<std::int64_t>(f.n, static_cast<std::int64_t>(std::ceil(hv.y0 + f.span_y)) + 1);
    thinned_labels(first_row, last_row, line, [&](std::int64_t i) { return sy(i + 0.5); }, [&](std::int64_t i, float y) {
      if (y < origin.y || y > f.canvas_max.y) return false;
      std::string s = piece(i, 10);
      for (std::size_t keep = 9; keep > 1 && ImGui::CalcTextSize(s.c_str()).x > kLabelWidth - 6; --keep) s = piece(i, keep);  // byte escapes are wide
      const float w = ImGui::CalcTextSize(s.c_str()).x;
      dl->AddText(ImVec2(origin.x - kBand - 6 - w, y - line / 2), label_colour, s.c_str());
      return true;
    });
  }
  if (!tokens.empty()) draw_key_labels(dl, hv.x0, f.span_x, f.n, origin, f.canvas_max, sx, [&](std::int64_t i) { return piece(i, 10); });
  if (hovered && showing) full_map_tooltip(ui, hv, f, lay.prompt_tokens, piece);
}

}  // namespace luka::studio::heatmap
