// The heatmap panel's decode rows (heatmap_canvas.h): a step x key map, each decode step a readable
// row, the prefill collapsed into one, and the hovered step's cover in words.
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
namespace {

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

}  // namespace

namespace {

// One frame of the decode rows: the canvas, the collapsed prefill strip above the rows, the sizes
// in keys and steps, key to screen x and step to screen y, and the steps in view.
struct RowsFrame {
  ImVec2 origin, size, canvas_max, rows_origin;
  float strip = 14.f, gap = 6.f, rows_h = 0;
  std::int64_t n = 0, keys = 0, steps = 0;  // prompt tokens, all keys, decode steps
  double span = 0, visible_steps = 0;
  std::int64_t first = 1, last = 1;       // the steps in view
  std::function<float(double)> sx;        // key -> x
  std::function<float(double)> sy;        // step index -> the top of step index + 1
};

// Fit (on first sight, or while fitted), the row height, following a live run's newest steps,
// drag to pan, wheel to zoom the keys about the cursor, a jump to the found token. Returns
// whether the canvas is hovered.
bool rows_input(HeatmapView& hv, const Canvas& cv, const RowsFrame& f) {
  if (hv.rows_keys_per_pixel <= 0 || (hv.rows_fitted && cv.fits)) {
    hv.rows_keys_per_pixel = static_cast<double>(f.keys) / f.size.x;
    hv.rows_x0 = 0;
    hv.rows_fitted = true;
  }
  if (hv.row_px <= 0) hv.row_px = std::clamp(static_cast<double>(f.rows_h) / static_cast<double>(f.steps), 3.0, 28.0);
  const double max_y0 = std::max(0.0, static_cast<double>(f.steps) - f.rows_h / hv.row_px);
  if (hv.rows_follow) hv.rows_y0 = max_y0;  // a live run shows its newest steps
  ImGui::SetCursorScreenPos(f.origin);
  ImGui::PushID(&cv.hv);  // comparing, A's and B's canvases are two items: one ID would share their drags
  ImGui::InvisibleButton("canvas", f.size);
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
    const double mx = hv.rows_x0 + (io.MousePos.x - f.origin.x) * hv.rows_keys_per_pixel;
    hv.rows_keys_per_pixel = std::clamp(hv.rows_keys_per_pixel * std::pow(0.8, io.MouseWheel), 1.0 / 64, 2.0 * f.keys / f.size.x);
    hv.rows_x0 = mx - (io.MousePos.x - f.origin.x) * hv.rows_keys_per_pixel;
    hv.rows_fitted = false;
  }
  const double span = f.size.x * hv.rows_keys_per_pixel;
  if (hv.center_on_found && hv.found >= 0) {
    hv.rows_x0 = static_cast<double>(hv.found) + 0.5 - span / 2;
    hv.center_on_found = false;
    hv.rows_fitted = false;
  }
  hv.rows_x0 = std::clamp(hv.rows_x0, -span / 2, f.keys - span / 2);
  hv.rows_y0 = std::clamp(hv.rows_y0, 0.0, max_y0);
  if (hv.rows_y0 >= max_y0 - 1e-9) hv.rows_follow = true;
  return hovered;
}

// Keys pooled so a column covers at least a pixel; the visible columns and steps asked for when
// they changed, and a finished read taken.
void rows_fetch(UiState& ui, Canvas& cv, const RowsFrame& f) {
  HeatmapView& hv = cv.hv;
  hv.geometry = {true, f.rows_origin.x, f.rows_origin.y, f.size.x, f.rows_h, hv.rows_x0, hv.rows_keys_per_pixel, hv.rows_y0, 1.0 / hv.row_px};
  int pool = 0;
  while (std::ldexp(1.0, pool) < hv.rows_keys_per_pixel && pool < 30) ++pool;
  const double per_col = std::ldexp(1.0, pool);
  const std::int64_t cols = (f.keys + static_cast<std::int64_t>(per_col) - 1) / static_cast<std::int64_t>(per_col);
  const auto clamp_col = [&](double v) { return std::clamp<std::int64_t>(static_cast<std::int64_t>(v), 0, cols); };
  const std::int64_t c0 = clamp_col(std::floor(hv.rows_x0 / per_col)), c1 = clamp_col(std::ceil((hv.rows_x0 + f.span) / per_col));
  MapRequest want = canvas_request(ui, cv, f.steps);
  want.decode_rows = true;
  want.first = f.first;
  want.last = f.last;
  want.pool_level = pool;
  want.c0 = c0;
  want.cols = c1 - c0;
  if (c1 > c0 && (!hv.requested || !want.same_window(*hv.requested))) {
    hv.fetcher.request(ui.tasks, want);
    hv.requested = want;
  }
  if (auto got = hv.fetcher.poll(ui.tasks)) take_result(hv, std::move(*got));
}

// The rows read (the prefill strip, then the steps), the selected step, the row of the generated
// token under the cursor in the output panel, the tracked and found tokens' columns, and the
// boundaries between prefill and decode.
void draw_rows(UiState& ui, const HeatmapView& hv, ImDrawList* dl, const RowsFrame& f, bool showing) {
  const auto& sx = f.sx;
  const auto& sy = f.sy;
  dl->AddRectFilled(f.origin, f.canvas_max, IM_COL32(24, 24, 28, 255));
  dl->PushClipRect(f.origin, f.canvas_max, true);
  if (showing) {
    const double fcell = std::ldexp(1.0, hv.fetched_pool);
    const float xa = sx(hv.fetched_c0 * fcell), xb = sx((hv.fetched_c0 + hv.fetched_cols) * fcell);  // as in the full map
    const float rows_total = static_cast<float>(hv.fetched_last - hv.fetched_first + 2);  // + the prefill row
    dl->AddImage(hv.texture.id(), ImVec2(xa, f.origin.y), ImVec2(xb, f.origin.y + f.strip), ImVec2(0, 0), ImVec2(1, 1.f / rows_total));
    dl->PushClipRect(f.rows_origin, f.canvas_max, true);
    dl->AddImage(hv.texture.id(), ImVec2(xa, sy(static_cast<double>(hv.fetched_first - 1))), ImVec2(xb, sy(static_cast<double>(hv.fetched_last))),
                 ImVec2(0, 1.f / rows_total), ImVec2(1, 1));
    // The selected step.
    const std::int64_t s = ui.selection.step > 0 ? std::min<std::int64_t>(ui.selection.step, f.steps) : f.steps;
    dl->AddRect(ImVec2(f.origin.x, sy(static_cast<double>(s - 1)) - 1), ImVec2(f.canvas_max.x, sy(static_cast<double>(s)) + 1), IM_COL32(255, 255, 255, 170));
    // The row that produced the generated token under the cursor in the output panel.
    if (ui.selection.hover_token > f.n && ui.selection.hover_token <= f.keys) {
      const auto q = static_cast<double>(ui.selection.hover_token - f.n - 1);
      dl->AddRectFilled(ImVec2(f.origin.x, sy(q)), ImVec2(f.canvas_max.x, sy(q + 1)), IM_COL32(255, 255, 255, 90));
    }
    dl->PopClipRect();
    if (ui.timing.first_map_ms < 0) ui.timing.first_map_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ui.timing.started).count();
  }
  if (ui.timeline.track && ui.timeline.track->begin < f.keys) {  // tracked tokens' columns
    const auto a = static_cast<double>(ui.timeline.track->begin), b = static_cast<double>(std::min(ui.timeline.track->end, f.keys));
    dl->AddRect(ImVec2(sx(a), f.origin.y), ImVec2(std::max(sx(b), sx(a) + 2), f.canvas_max.y), kMark, 0, 0, 1.f);
  }
  if (hv.found >= 0 && hv.found < f.keys) {  // the found token's column
    const auto t = static_cast<double>(hv.found);
    dl->AddRect(ImVec2(sx(t), f.origin.y), ImVec2(std::max(sx(t + 1), sx(t) + 2), f.canvas_max.y), kMark, 0, 0, 1.5f);
  }
  if (ui.selection.hover_token == f.n) dl->AddRectFilled(f.origin, ImVec2(f.canvas_max.x, f.origin.y + f.strip), IM_COL32(255, 255, 255, 90));
  // The boundary between the collapsed prefill and the decode steps, and where generated keys start.
  dl->AddLine(ImVec2(f.origin.x, f.origin.y + f.strip + f.gap / 2), ImVec2(f.canvas_max.x, f.origin.y + f.strip + f.gap / 2), kBoundary, 1.f);
  dl->AddLine(ImVec2(sx(static_cast<double>(f.n)), f.rows_origin.y), ImVec2(sx(static_cast<double>(f.n)), f.canvas_max.y), kBoundary, 1.f);
  dl->PopClipRect();
}

// Hover: the step and key, the value, and the step's cover. A click selects the step.
void rows_tooltip(UiState& ui, Canvas& cv, const RowsFrame& f, const std::string& ck,
                  const std::function<std::string(std::int64_t, std::size_t)>& piece) {
  const HeatmapView& hv = cv.hv;
  const ImGuiIO& io = ImGui::GetIO();
  const float my = io.MousePos.y;
  const auto k = static_cast<std::int64_t>(std::floor(hv.rows_x0 + (io.MousePos.x - f.origin.x) * hv.rows_keys_per_pixel));
  const bool in_prefill = my < f.origin.y + f.strip;
  const std::int64_t s = in_prefill ? 0 : static_cast<std::int64_t>(std::floor(hv.rows_y0 + (my - f.rows_origin.y) / hv.row_px)) + 1;
  const std::int64_t fcell = std::int64_t{1} << hv.fetched_pool;
  const std::int64_t c = k / fcell - hv.fetched_c0;
  const std::int64_t r = in_prefill ? 0 : s - hv.fetched_first + 1;
  const std::int64_t n = f.n;
  if (k < 0 || k >= f.keys || !(in_prefill || (s >= 1 && s <= f.steps))) return;
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
    const auto& view = cv.view;
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

}  // namespace

// Decode rows in the canvas [origin, origin + size): the collapsed prefill row on top, the
// boundary, then one row per decode step.
void draw_decode_rows(UiState& ui, Canvas& cv, const capture::Summary& sum, ImVec2 top_left, ImVec2 origin, ImVec2 size) {
  HeatmapView& hv = cv.hv;
  const auto& view = cv.view;
  RowsFrame f;
  f.origin = origin;
  f.size = size;
  f.canvas_max = ImVec2(origin.x + size.x, origin.y + size.y);
  f.rows_origin = ImVec2(origin.x, origin.y + f.strip + f.gap);
  f.rows_h = std::max(8.f, size.y - f.strip - f.gap);
  f.n = sum.layout.prompt_tokens;
  f.steps = sum.complete_steps;
  f.keys = f.n + f.steps;
  const bool hovered = rows_input(hv, cv, f);
  f.span = size.x * hv.rows_keys_per_pixel;
  f.visible_steps = f.rows_h / hv.row_px;
  f.first = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(hv.rows_y0)) + 1, 1, f.steps);
  f.last = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(hv.rows_y0 + f.visible_steps)), f.first, f.steps);
  f.sx = [&hv, origin](double t) { return static_cast<float>(origin.x + (t - hv.rows_x0) / hv.rows_keys_per_pixel); };
  f.sy = [&hv, top = f.rows_origin.y](double step_index) { return static_cast<float>(top + (step_index - hv.rows_y0) * hv.row_px); };
  rows_fetch(ui, cv, f);
  const bool showing = hv.texture.valid() && hv.fetched_decode_rows && hv.fetched_cols > 0;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  draw_rows(ui, hv, dl, f, showing);

  // Labels: the prefill row and thinned step labels on the left (step number and its query
  // token), thinned key labels below, topic bands along the top.
  const std::string ck = capture_key(view.get());
  const auto& tokens = cv.tokens.get(ui.tasks, ck, [view] { return view->tokens(); });
  const std::function<std::string(std::int64_t, std::size_t)> piece = [&](std::int64_t i, std::size_t max_chars) {
    return i >= 0 && i < static_cast<std::int64_t>(tokens.size()) ? printable(tokens[static_cast<std::size_t>(i)].piece, max_chars) : std::string("...");
  };
  const ImU32 label_colour = IM_COL32(170, 170, 180, 255);
  const float line = ImGui::GetTextLineHeight();
  const float label_right = origin.x - 6;
  if (cv.labels) {
    const char* p = "prefill";
    dl->AddText(ImVec2(label_right - ImGui::CalcTextSize(p).x, origin.y + f.strip / 2 - line / 2), label_colour, p);
    thinned_labels(f.first, f.last + 1, line, [&](std::int64_t s) { return f.sy(static_cast<double>(s) - 0.5); }, [&](std::int64_t s, float y) {
      if (y < f.rows_origin.y || y > f.canvas_max.y) return false;
      std::string text = std::to_string(s) + " " + piece(f.n + s - 1, 6);
      for (std::size_t keep = 5; keep > 1 && ImGui::CalcTextSize(text.c_str()).x > kLabelWidth + kBand - 4; --keep)
        text = std::to_string(s) + " " + piece(f.n + s - 1, keep);
      dl->AddText(ImVec2(label_right - ImGui::CalcTextSize(text.c_str()).x, y - line / 2), label_colour, text.c_str());
      return true;
    });
  }
  draw_key_labels(dl, hv.rows_x0, f.span, f.keys, origin, f.canvas_max, f.sx, [&](std::int64_t i) { return piece(i, 10); });
  const auto& segments = cv.segments.get(ui.tasks, ck, [view] { return view->segments(); });
  draw_bands(dl, segments, ImVec2(origin.x, top_left.y), ImVec2(origin.x - kBand - 2, origin.y), f.canvas_max.x, f.canvas_max.y, f.sx, nullptr);
  if (hovered && showing) rows_tooltip(ui, cv, f, ck, piece);
}

}  // namespace luka::studio::heatmap
