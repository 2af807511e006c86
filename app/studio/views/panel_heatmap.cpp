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
#include "app/studio/views/choice_widgets.h"
#include "app/studio/views/flow_layout.h"
#include "app/studio/data/method_presets.h"
#include "app/studio/views/ui_state.h"
#include "captures/reader.h"
#include "core/luka/config.h"
#include "core/util/error.h"
#include "viz/heatmap.h"
#include "viz/state_colours.h"
#include "app/studio/views/heatmap_canvas.h"

namespace luka::studio {

using namespace heatmap;  // the canvas pieces the panel draws with (heatmap_canvas.h)

namespace {


// Writes what the map shows — one layer and head, the head grid / layer strip, or, comparing with
// `b`, B − A of the two (as `luka export --compare`) — as a figure; returns "wrote PATH" or the
// error. Safe on any thread: it takes its inputs by value.
std::string write_view_figure(std::shared_ptr<const capture::CaptureView> view, int layer, int head, figures::MapView mv, MapMode mode, bool log,
                              const std::filesystem::path& path, std::shared_ptr<const capture::CaptureView> b = nullptr) {
  try {
    if (!view) fail("export", "nothing to export: run a prompt or open a capture");
    const capture::Summary sum = view->summary();
    if (b && mode == MapMode::kMap) {
      const std::int64_t steps = std::min(sum.complete_steps, b->summary().complete_steps);
      viz::write_figure(figures::comparison_figure(*view, *b, layer, head, figures::default_figure_level(sum.layout), steps), path);
      return "wrote " + path.string() + " (B - A)";
    }
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
  ui.notice = write_view_figure(ui.controller.view(), ui.selection.layer, ui.selection.head, ui.heatmap.view, ui.heatmap.mode, ui.heatmap.log_scale,
                                path, ui.compare.view);
}

namespace {

// The Export buttons write in the background; the outcome shows when it is done.
void export_in_background(UiState& ui, const std::filesystem::path& path) {
  if (ui.map.export_job.active()) return;  // one at a time
  ui.notice = "writing " + path.string() + "...";
  ui.map.export_job.start(ui.tasks, "export " + path.filename().string(),
                      [view = ui.controller.view(), layer = ui.selection.layer, head = ui.selection.head, kind = ui.heatmap.view, mode = ui.heatmap.mode,
                       log = ui.heatmap.log_scale, path, b = ui.compare.view] { return write_view_figure(view, layer, head, kind, mode, log, path, b); });
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

}  // namespace

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

namespace {

// The map's toolbar: layer, head and step sliders (recorded layers and heads only), scale, view,
// layout, fit, overlays, the grid choice, search and compare.
void map_toolbar(UiState& ui, const std::shared_ptr<const capture::CaptureView>& view, const capture::Summary& sum) {
  HeatmapView& hv = ui.heatmap;
  const capture::Layout& lay = sum.layout;
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
  same_line_if_fits(checkbox_width("overlays"));  // a narrow window wraps the row instead of cutting it off
  ImGui::Checkbox("overlays", &hv.overlays);
  same_line_if_fits(button_width("keys (F1)"));
  if (ImGui::SmallButton("keys (F1)")) ui.window.show_shortcuts = true;
  ui.mark_item_drawn("map_keys_button");
  const float spacing = ImGui::GetStyle().ItemSpacing.x;
  same_line_if_fits(checkbox_width("map") + checkbox_width("heads") + checkbox_width("layers") + 2 * spacing);
  choice_radio("map", hv.mode, MapMode::kMap);
  ImGui::SameLine();
  choice_radio("heads", hv.mode, MapMode::kHeadGrid);
  ImGui::SameLine();
  choice_radio("layers", hv.mode, MapMode::kLayerStrip);
  same_line_if_fits(140 + spacing + button_width("Next"), 24);
  search_box(ui, view);
  same_line_if_fits(150 + 2 * spacing + button_width("Compare") + button_width("Run B"), 24);
  compare_box(ui);
}

// Comparing: A and B side by side in [origin, origin + size), the right canvas following the
// left's zoom, layer, head and view (or showing B - A), each titled with what it shows.
void draw_compare_canvases(UiState& ui, const std::shared_ptr<const capture::CaptureView>& view, const capture::Summary& sum,
                           bool rows_layout, ImVec2 top_left, ImVec2 origin, ImVec2 size) {
  HeatmapView& hv = ui.heatmap;
  CompareState& cmp = ui.compare;
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

}  // namespace

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
  map_toolbar(ui, view, sum);
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
  if (!ui.compare.view) {
    Canvas main{view, nullptr, hv, ui.tokens, ui.segments, ui.map.overlay, ui.map.row_cover};
    if (rows_layout) draw_decode_rows(ui, main, sum, top_left, origin, size);
    else draw_full_map(ui, main, sum, top_left, origin, size);
  } else {
    draw_compare_canvases(ui, view, sum, rows_layout, top_left, origin, size);
  }
  if (!rows_layout && hv.fetched_level >= 0) level = hv.fetched_level;  // -1 until the first window arrives
  ImGui::SetCursorScreenPos(ImVec2(top_left.x, origin.y + size.y + label_h + 2));
  draw_footer(ui, rows_layout, level);
  export_row(ui);  // the current layer and head (the same figure `luka export` draws)
}

}  // namespace luka::studio
