// Heatmap view: the query x key map of the selected layer and head — the prefill map from the
// capture's max-pooled pyramid, then one row per decode step — in the effective, dense or
// difference view, read for the visible window only: the level is chosen so a cell covers at
// least a pixel, and only the visible cells are read. Wheel zooms around
// the cursor, dragging pans, hovering shows both tokens and the value; topic bands run along
// both axes.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <future>
#include <string>

#include "app/figures/capture_figure.h"
#include "app/studio/ui_state.h"
#include "viz/state_colours.h"
#include "core/util/error.h"
#include "viz/heatmap.h"

namespace luka::studio {
namespace {

std::string printable(const std::string& piece) {
  std::string s;
  for (const unsigned char c : piece) {
    if (c == '\n') s += "\\n";
    else if (c < 32) s += '?';
    else s += static_cast<char>(c);
  }
  return s.size() > 40 ? s.substr(0, 40) + "..." : s;
}

}  // namespace

namespace {

// Writes what the map shows — one layer and head, or the head grid / layer strip — as a figure;
// returns "wrote PATH" or the error. Safe on any thread: it takes its inputs by value.
std::string write_view_figure(std::shared_ptr<const capture::CaptureView> view, int layer, int head, int kind, int mode, bool log,
                              const std::filesystem::path& path) {
  try {
    if (!view) fail("export", "nothing to export: run a prompt or open a capture");
    const capture::Summary sum = view->summary();
    const auto mv = static_cast<figures::MapView>(kind);
    if (mode != 0)
      viz::write_grid_figure(figures::grid_from_capture(*view, mode == 1, layer, head, sum.complete_steps, log, mv), path);
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
  ui.notice = write_view_figure(ui.session.view(), ui.layer, ui.head, ui.heatmap.view, ui.heatmap.mode, ui.heatmap.log_scale, path);
}

namespace {

// The Export buttons write in the background; the outcome shows when it is done.
void export_in_background(UiState& ui, const std::filesystem::path& path) {
  if (ui.export_job.valid()) return;  // one at a time
  ui.notice = "writing " + path.string() + "...";
  ui.export_job = std::async(std::launch::async, write_view_figure, ui.session.view(), ui.layer, ui.head, ui.heatmap.view, ui.heatmap.mode,
                             ui.heatmap.log_scale, path);
}

// The figure path, Export PNG / SVG / PDF buttons, and the outcome of the last export.
void export_row(UiState& ui) {
  ImGui::SetNextItemWidth(260);
  ImGui::InputText("##figure", &ui.figure_path);
  for (const char* ext : {".png", ".svg", ".pdf"}) {
    ImGui::SameLine();
    if (ImGui::Button((std::string("Export ") + (ext + 1)).c_str())) {
      std::filesystem::path p = ui.figure_path;
      p.replace_extension(ext);
      export_in_background(ui, p);
    }
  }
  if (ui.export_job.valid() && ui.export_job.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
    ui.notice = ui.export_job.get();
  if (!ui.notice.empty()) {
    ImGui::SameLine();
    ImGui::TextUnformatted(ui.notice.c_str());
  }
}

}  // namespace

void draw_heatmap_panel(UiState& ui) {
  HeatmapView& hv = ui.heatmap;
  const auto view = ui.session.view();
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
  // Selection: recorded layers and heads only.
  if (!std::binary_search(lay.layers.begin(), lay.layers.end(), ui.layer)) ui.layer = lay.layers.front();
  if (!std::binary_search(lay.heads.begin(), lay.heads.end(), ui.head)) ui.head = lay.heads.front();
  ImGui::SetNextItemWidth(110);
  ImGui::SliderInt("layer", &ui.layer, lay.layers.front(), lay.layers.back());
  ImGui::SameLine();
  ImGui::SetNextItemWidth(90);
  ImGui::SliderInt("head", &ui.head, lay.heads.front(), lay.heads.back());
  ImGui::SameLine();
  ImGui::Checkbox("log", &hv.log_scale);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(110);
  static const char* kViews[] = {"effective", "dense", "difference"};
  ImGui::Combo("##view", &hv.view, kViews, 3);
  ImGui::SameLine();
  if (ImGui::Button("Fit")) hv.tokens_per_pixel = 0;
  ImGui::SameLine();
  ImGui::Checkbox("overlays", &hv.overlays);
  ImGui::SameLine();
  ImGui::RadioButton("map", &hv.mode, 0);
  ImGui::SameLine();
  ImGui::RadioButton("heads", &hv.mode, 1);
  ImGui::SameLine();
  ImGui::RadioButton("layers", &hv.mode, 2);
  if (hv.mode != 0) {
    export_row(ui);  // the small multiples as one figure
    draw_thumbnails(ui, *view, hv.mode == 1);
    return;
  }

  const std::int64_t steps = sum.complete_steps;
  const std::int64_t n = lay.prompt_tokens + steps;  // the map: prompt queries, then one per decode step
  const float band = 8.f;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float side = std::max(64.f, std::min(avail.x, avail.y - 64.f) - band - 4.f);
  const ImVec2 top_left = ImGui::GetCursorScreenPos();
  const ImVec2 origin(top_left.x + band + 2, top_left.y + band + 2);
  if (hv.tokens_per_pixel <= 0) {
    hv.tokens_per_pixel = static_cast<double>(n) / side;
    hv.x0 = hv.y0 = 0;
  }
  // Interaction on the canvas.
  ImGui::SetCursorScreenPos(origin);
  ImGui::InvisibleButton("canvas", ImVec2(side, side));
  const bool hovered = ImGui::IsItemHovered();
  const ImGuiIO& io = ImGui::GetIO();
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {
    hv.x0 -= io.MouseDelta.x * hv.tokens_per_pixel;
    hv.y0 -= io.MouseDelta.y * hv.tokens_per_pixel;
  }
  if (hovered && io.MouseWheel != 0) {
    const double mx = hv.x0 + (io.MousePos.x - origin.x) * hv.tokens_per_pixel;
    const double my = hv.y0 + (io.MousePos.y - origin.y) * hv.tokens_per_pixel;
    hv.tokens_per_pixel = std::clamp(hv.tokens_per_pixel * std::pow(0.8, io.MouseWheel), 1.0 / 64, 2.0 * n / side);
    hv.x0 = mx - (io.MousePos.x - origin.x) * hv.tokens_per_pixel;
    hv.y0 = my - (io.MousePos.y - origin.y) * hv.tokens_per_pixel;
  }
  const double span = side * hv.tokens_per_pixel;
  hv.x0 = std::clamp(hv.x0, -span / 2, n - span / 2);
  hv.y0 = std::clamp(hv.y0, -span / 2, n - span / 2);

  // The level: the finest stored one whose cells cover at least a pixel, so every cell is drawn
  // and, being a max over its tokens, no sink or needle is lost when zoomed out.
  int level = lay.levels.back();
  for (auto it = lay.levels.rbegin(); it != lay.levels.rend(); ++it)
    if (std::ldexp(1.0, *it) >= hv.tokens_per_pixel) level = *it;
  const double cell = std::ldexp(1.0, level);  // tokens per cell
  const std::int64_t size = capture::level_size(n, level);
  const auto map_view = static_cast<figures::MapView>(hv.view);
  const std::int64_t c0 = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(hv.x0 / cell)), 0, size);
  const std::int64_t r0 = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(hv.y0 / cell)), 0, size);
  const std::int64_t c1 = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil((hv.x0 + span) / cell)), 0, size);
  const std::int64_t r1 = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil((hv.y0 + span) / cell)), 0, size);
  const bool live_prefill = !sum.finished && steps == 0;
  // Ask the fetcher (off the UI thread) for the visible window; draw the last one it delivered.
  MapRequest want;
  want.view = view;
  want.layer = ui.layer;
  want.head = ui.head;
  want.level = level;
  want.kind = hv.view;
  want.steps = steps;
  want.r0 = r0;
  want.c0 = c0;
  want.rows = r1 - r0;
  want.cols = c1 - c0;
  want.log = hv.log_scale;
  want.log_min = hv.log_min;
  if (r1 > r0 && c1 > c0 && (!hv.requested || !want.same_window(*hv.requested) || (live_prefill && ImGui::GetFrameCount() % 15 == 0))) {
    hv.fetcher.request(want);  // a live map fills in during the prefill: ask again now and then
    hv.requested = want;
  }
  if (auto got = hv.fetcher.poll()) {
    if (got->error.empty()) {
      if (!got->image.rgba.empty()) hv.texture.upload(got->image);
      hv.values = std::move(got->values);
      hv.diff_max = got->diff_max;
      hv.error.clear();
    } else {
      hv.error = got->error;
    }
    const MapRequest& r = got->request;
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
  }
  // The texture may still show an earlier window (or level) while the new one is read.
  const double fetched_cell = std::ldexp(1.0, hv.fetched_level);

  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 canvas_max(origin.x + side, origin.y + side);
  dl->AddRectFilled(origin, canvas_max, IM_COL32(24, 24, 28, 255));
  dl->PushClipRect(ImVec2(top_left.x, top_left.y), canvas_max, true);
  const auto to_screen_x = [&](double tokens) { return static_cast<float>(origin.x + (tokens - hv.x0) / hv.tokens_per_pixel); };
  const auto to_screen_y = [&](double tokens) { return static_cast<float>(origin.y + (tokens - hv.y0) / hv.tokens_per_pixel); };
  if (hv.texture.valid()) {
    const ImVec2 a(to_screen_x(hv.fetched_c0 * fetched_cell), to_screen_y(hv.fetched_r0 * fetched_cell));
    const ImVec2 b(to_screen_x(std::min<double>((hv.fetched_c0 + hv.fetched_cols) * fetched_cell, n)),
                   to_screen_y(std::min<double>((hv.fetched_r0 + hv.fetched_rows) * fetched_cell, n)));
    // The last cell of a level may hold fewer than `cell` tokens: stretch the image to the map edge.
    dl->AddImage(hv.texture.id(), a, b);
    if (ui.first_map_ms < 0) ui.first_map_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ui.started).count();
  }
  // Topic bands along both axes.
  const std::string ck = capture_key(view.get());
  for (const capture::Segment& seg : ui.segments.get(ck, [view] { return view->segments(); })) {
    const unsigned int col = parse_colour(seg.colour);
    dl->AddRectFilled(ImVec2(to_screen_x(seg.begin), top_left.y), ImVec2(to_screen_x(seg.end), top_left.y + band), col);
    dl->AddRectFilled(ImVec2(top_left.x, to_screen_y(seg.begin)), ImVec2(top_left.x + band, to_screen_y(seg.end)), col);
  }
  // Overlays at the selected decode step: the page grid, and on that step's query row the refined
  // pages (violet) and heavy hitters (crimson) of the selected head.
  if (hv.overlays && steps > 0 && lay.covers) {
    const std::int64_t s = ui.step > 0 ? std::min<std::int64_t>(ui.step, steps) : steps;
    try {
      const std::string okey = ck + "/" + std::to_string(s) + "/" + std::to_string(ui.layer) + "/" + std::to_string(ui.head);
      const auto& ov = ui.overlay.get(okey, [view, s, layer = ui.layer, head = ui.head] {
        UiState::Overlay o;
        o.pages = view->pages(layer);
        o.refined = view->refined_pages(s, layer, head);
        o.heavy = view->heavy_hitters(s, layer, head);
        return o;
      });
      if (!ui.overlay.fresh(okey)) throw Error("overlay not read yet");  // never draw another step's overlay
      const auto& pages = ov.pages;
      const double page_px = pages.empty() ? 0 : (pages.front().end - pages.front().start) / hv.tokens_per_pixel;
      if (page_px >= 8)  // a grid any denser would hide the map
        for (const capture::PageInfo& p : pages) {
          if (p.created_step >= s) continue;
          const float x = to_screen_x(static_cast<double>(p.start));
          dl->AddLine(ImVec2(x, to_screen_y(p.start)), ImVec2(x, to_screen_y(static_cast<double>(n))), IM_COL32(120, 140, 170, 90));
        }
      const double q = static_cast<double>(lay.prompt_tokens + s - 1);
      const float y0 = to_screen_y(q), y1 = std::max(to_screen_y(q + 1), y0 + 3.f);
      dl->AddRect(ImVec2(to_screen_x(0), y0 - 1), ImVec2(to_screen_x(q + 1), y1 + 1), IM_COL32(255, 255, 255, 160));
      for (const std::int64_t p : ov.refined) {
        const capture::PageInfo& pg = pages.at(static_cast<std::size_t>(p));
        dl->AddRect(ImVec2(to_screen_x(pg.start), y0 - 3), ImVec2(to_screen_x(pg.end), y1 + 3), IM_COL32(viz::kRefinedColour.r, viz::kRefinedColour.g, viz::kRefinedColour.b, 255), 0, 0, 2);
      }
      for (const std::int64_t t : ov.heavy) {
        const float x = to_screen_x(t + 0.5);
        dl->AddLine(ImVec2(x, y0 - 6), ImVec2(x, y1 + 6), IM_COL32(viz::kHeavyHitterColour.r, viz::kHeavyHitterColour.g, viz::kHeavyHitterColour.b, 255), 1.5f);
      }
    } catch (const std::exception&) {
    }
  }
  dl->PopClipRect();

  // Hover: query and key tokens and the value under the cursor.
  if (hovered && hv.texture.valid()) {
    const std::int64_t q = static_cast<std::int64_t>(std::floor(hv.y0 + (io.MousePos.y - origin.y) * hv.tokens_per_pixel));
    const std::int64_t k = static_cast<std::int64_t>(std::floor(hv.x0 + (io.MousePos.x - origin.x) * hv.tokens_per_pixel));
    if (q >= 0 && q < n && k >= 0 && k < n) {
      const std::int64_t r = q / static_cast<std::int64_t>(fetched_cell) - hv.fetched_r0, c = k / static_cast<std::int64_t>(fetched_cell) - hv.fetched_c0;
      const auto& tokens = ui.tokens.get(ck, [view] { return view->tokens(); });
      const auto piece = [&](std::int64_t i) {
        return i < static_cast<std::int64_t>(tokens.size()) ? printable(tokens[static_cast<std::size_t>(i)].piece) : std::string("...");
      };
      ImGui::BeginTooltip();
      ImGui::Text("query %lld  '%s'", static_cast<long long>(q), piece(q).c_str());
      ImGui::Text("key   %lld  '%s'", static_cast<long long>(k), piece(k).c_str());
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
  ImGui::SetCursorScreenPos(ImVec2(top_left.x, canvas_max.y + 4));
  char scale_text[64];
  if (map_view == figures::MapView::kDifference) std::snprintf(scale_text, sizeof scale_text, "blue -%.3g .. red +%.3g", hv.diff_max, hv.diff_max);
  else std::snprintf(scale_text, sizeof scale_text, "%s", hv.log_scale ? "log10 1e-4..1" : "linear 0..1");
  // The colour bar: the colormap in use, with its scale's ends.
  {
    const bool diff = map_view == figures::MapView::kDifference;
    const auto& table = viz::Colormap::get(diff ? viz::ColormapId::kBalance : viz::ColormapId::kEmber).table();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float w = 160, h = 10;
    for (int i = 0; i < 256; ++i)
      dl->AddRectFilled(ImVec2(p.x + w * i / 256.f, p.y + 3), ImVec2(p.x + w * (i + 1) / 256.f + 0.5f, p.y + 3 + h),
                        IM_COL32(table[static_cast<std::size_t>(i)].r, table[static_cast<std::size_t>(i)].g, table[static_cast<std::size_t>(i)].b, 255));
    ImGui::Dummy(ImVec2(w, h + 4));
    ImGui::SameLine();
  }
  ImGui::Text("%s  |  layer %d head %d  %s  level %d (%.0f tokens/cell)  %s", scale_text, ui.layer, ui.head, figures::to_string(map_view), level,
              cell, hv.error.c_str());

  export_row(ui);  // the current layer and head (the same figure `luka export` draws)
}

}  // namespace luka::studio
