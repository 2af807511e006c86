// The heatmap panel's canvas pieces, shared by its files (panel_heatmap.cpp: the panel, its footer,
// search and export; heatmap_full_map.cpp: the full query x key map; heatmap_decode_rows.cpp: the
// decode rows; heatmap_compare.cpp: the compare box and B's capture). Not for other panels.
#pragma once

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "app/studio/views/ui_state.h"
#include "captures/reader.h"
#include "viz/heatmap.h"

namespace luka::studio::heatmap {

// A token or label as drawn: partial UTF-8 as its bytes, at most `max_chars` characters.
inline std::string printable(const std::string& piece, std::size_t max_chars = 40) { return token_label(piece, max_chars); }

// Margins around the map: query labels on the left, the topic band, key labels below.
inline constexpr float kBand = 8.f, kLabelWidth = 92.f;

inline ImU32 rgb(const viz::Rgb& c, int alpha = 255) { return IM_COL32(c.r, c.g, c.b, alpha); }
// The decode boundary and the selected step: light grey and white, apart from every topic colour.
inline const ImU32 kBoundary = IM_COL32(200, 200, 210, 200);
inline const ImU32 kMark = IM_COL32(255, 255, 255, 230);  // the found token

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

// A read of the canvas's capture for the selected layer and head, in its view, scale and
// difference (`minus`): the window and level are the layout's to fill in.
inline MapRequest canvas_request(const UiState& ui, const Canvas& cv, std::int64_t steps) {
  MapRequest want;
  want.view = cv.view;
  want.layer = ui.selection.layer;
  want.head = ui.selection.head;
  want.kind = cv.hv.view;
  want.steps = steps;
  want.log = cv.hv.log_scale;
  want.log_min = cv.hv.log_min;
  want.minus = cv.minus;
  return want;
}
// Applies a finished fetch to the view's texture and bookkeeping.
void take_result(HeatmapView& hv, MapResult got);
// Topic bands along the top (keys) and, for the full map, the left (queries).
void draw_bands(ImDrawList* dl, const std::vector<capture::Segment>& segments, ImVec2 top, ImVec2 left, float x_max, float y_max,
                const std::function<float(double)>& sx, const std::function<float(double)>* sy);
// The full query x key map in the canvas [origin, origin + size).
void draw_full_map(UiState& ui, Canvas& cv, const capture::Summary& sum, ImVec2 top_left, ImVec2 origin, ImVec2 size);
// Decode rows in the canvas [origin, origin + size): the collapsed prefill row on top, the
// boundary, then one row per decode step.
void draw_decode_rows(UiState& ui, Canvas& cv, const capture::Summary& sum, ImVec2 top_left, ImVec2 origin, ImVec2 size);
// The right canvas follows the left: the same window, layout, view and marks.
void copy_view(const HeatmapView& from, HeatmapView& to);
// "compare": a second capture beside the map, or the difference of the two.
void compare_box(UiState& ui);

}  // namespace luka::studio::heatmap
