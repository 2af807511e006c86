// Small multiples: every recorded head of the selected layer (head grid), or the selected head in
// every recorded layer (layer strip), each a coarse thumbnail of the full map in the current view.
// Clicking a thumbnail selects it and returns to the map. Under each, the head's scores.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "app/figures/capture_figure.h"
#include "app/studio/views/ui_state.h"
#include "viz/heatmap.h"
#include "viz/state_colours.h"

namespace luka::studio {

namespace {

// Kascade's reuse on the layer strip: an arrow from each anchor's thumbnail to every layer that
// attended its top-k sets at the last step, arched over the thumbnails' top edges. Arrows of the
// hovered or selected layer are drawn bold, the others faint.
void draw_reuse_arrows(UiState& ui, const std::vector<int>& items, const std::vector<int>& sources, const std::vector<ImVec4>& rects,
                       int hovered, int selected_layer) {
  if (sources.size() != items.size()) return;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  // Arcs stay below the first row's labels' top, off the panel's controls.
  float top = 1e30f;
  for (const ImVec4& r : rects)
    if (r.z > r.x) top = std::min(top, r.y);
  top -= ImGui::GetTextLineHeightWithSpacing();
  const viz::Rgb c = viz::kKascadeColour;
  for (std::size_t to = 0; to < items.size(); ++to) {
    const int source = sources[to];
    if (source < 0 || source == items[to]) continue;
    const auto from = static_cast<std::size_t>(std::find(items.begin(), items.end(), source) - items.begin());
    if (from >= items.size()) continue;  // the anchor is not recorded
    const ImVec4 a = rects[from], b = rects[to];
    if (a.z <= a.x || b.z <= b.x) continue;  // a thumbnail without an image
    const bool bold = static_cast<int>(to) == hovered || static_cast<int>(from) == hovered || items[to] == selected_layer ||
                      items[from] == selected_layer;
    const ImU32 colour = IM_COL32(c.r, c.g, c.b, bold ? 255 : 80);
    const float thickness = bold ? 2.5f : 1.5f;
    const ImVec2 p0((a.x + a.z) / 2, a.y + 4), p3((b.x + b.z) / 2, b.y + 4);
    const float lift = std::clamp(0.15f * std::hypot(p3.x - p0.x, p3.y - p0.y), 12.f, 28.f);
    const float arc = std::max(top, std::min(p0.y, p3.y) - lift);
    const ImVec2 p1(p0.x, arc), p2(p3.x, arc);
    dl->AddBezierCubic(p0, p1, p2, p3, colour, thickness);
    // The head points down into the reusing layer's thumbnail.
    const float h = bold ? 9.f : 7.f;
    dl->AddTriangleFilled(ImVec2(p3.x, p3.y + 1), ImVec2(p3.x - h * 0.55f, p3.y - h), ImVec2(p3.x + h * 0.55f, p3.y - h), colour);
    ui.mark_drawn("reuse_arrow/" + std::to_string(source) + "->" + std::to_string(items[to]), p0.x, p0.y, p3.x, p3.y, bold ? "bold" : "faint");
  }
}

// Reads and renders the thumbnails of `items` (heads of the selected layer, or layers of the
// selected head) off the UI thread, at `level`, as the map's view and scale show them; and, for
// layers, which Kascade anchor each attended at the last step.
void request_thumbnails(UiState& ui, bool heads, const std::vector<int>& items, int level, std::int64_t steps) {
  HeatmapView& hv = ui.heatmap;
  const figures::MapView map_view = hv.view;
  std::shared_ptr<const capture::CaptureView> shared = ui.controller.view();
  const int fixed = heads ? ui.selection.layer : ui.selection.head;
  const bool log = hv.log_scale;
  const double log_min = hv.log_min;
  const std::string name = heads ? "thumbnails of layer " + std::to_string(fixed) + "'s heads" : "thumbnails of head " + std::to_string(fixed) + " by layer";
  hv.thumbs_job.start(ui.tasks, name, [shared, items, heads, fixed, level, steps, map_view, log, log_min](TaskContext& ctx) {
    HeatmapView::Thumbnails out;
    std::vector<viz::Image>& images = out.images;
    for (const int item : items) {
      ctx.progress(static_cast<double>(images.size()) / static_cast<double>(items.size()),
                   std::string(heads ? "head " : "layer ") + std::to_string(item));
      ctx.check();
      viz::Image img;
      try {
        const int layer = heads ? fixed : item, head = heads ? item : fixed;
        const figures::FullWindow w = figures::full_window(*shared, layer, head, level, steps, map_view, 0, 0, 1 << 30, 1 << 30);
        viz::HeatmapOptions o = figures::map_view_options(map_view, w.values, log, log_min);
        o.empty = {24, 24, 28};
        img = viz::render_heatmap(w.values.data(), w.rows, w.cols, static_cast<int>(w.cols), static_cast<int>(w.rows), o);
      } catch (const std::exception&) {
      }
      images.push_back(std::move(img));
      int source = -1;
      if (!heads && steps > 0) {
        try {
          const capture::StepMetrics m = shared->metrics(steps, item);
          if (m.mode == capture::kModeKascade) source = m.kascade_source;
        } catch (const std::exception&) {
        }
      }
      out.sources.push_back(source);
    }
    return out;
  });
}

}  // namespace

void draw_thumbnails(UiState& ui, const capture::CaptureView& view, bool heads) {
  HeatmapView& hv = ui.heatmap;
  const capture::Summary sum = view.summary();
  const capture::Layout& lay = sum.layout;
  const std::vector<int>& items = heads ? lay.heads : lay.layers;
  // The finest stored level with at most 128 cells per side.
  const std::int64_t steps = sum.complete_steps, n = lay.prompt_tokens + steps;
  int level = lay.levels.back();
  for (auto it = lay.levels.rbegin(); it != lay.levels.rend(); ++it)
    if (capture::level_size(n, *it) <= 128) level = *it;
  const std::string key = std::to_string(reinterpret_cast<std::uintptr_t>(&view)) + "/" + (heads ? "h" : "l") + std::to_string(heads ? ui.selection.layer : ui.selection.head) +
                          "/" + std::to_string(steps) + "/" + choice_word(hv.view) + "/" + std::to_string(hv.log_scale) + "/" + std::to_string(level);
  // The thumbnails are read and rendered off the UI thread; the old ones stay up meanwhile.
  if (hv.thumbs_key != key && !hv.thumbs_job.active()) {
    hv.thumbs_key = key;
    request_thumbnails(ui, heads, items, level, steps);
  }
  if (auto done = hv.thumbs_job.take()) {
    HeatmapView::Thumbnails got = done->value ? std::move(*done->value) : HeatmapView::Thumbnails{};
    const std::vector<viz::Image> images = got.images.size() == items.size() ? std::move(got.images) : std::vector<viz::Image>(items.size());
    hv.thumb_sources = got.sources.size() == items.size() ? std::move(got.sources) : std::vector<int>(items.size(), -1);
    hv.thumbs.clear();
    for (const viz::Image& img : images) {
      auto tex = std::make_unique<Texture>();
      if (!img.rgba.empty()) tex->upload(img);
      hv.thumbs.push_back(std::move(tex));
    }
  }
  if (hv.thumbs.size() != items.size()) {
    ImGui::TextDisabled("reading thumbnails...");
    return;
  }
  // Each thumbnail's head scores (prefill rows) underneath: sink, entropy, previous token.
  const auto& scores = head_scores(ui, ui.controller.view());
  const auto score_line = [&](int layer, int head) -> std::string {
    if (!scores.value) return "";
    for (const capture::HeadScoreRow& r : scores.value->heads)
      if (r.layer == layer && r.head == head) {
        const capture::PatternScores& p = r.prefill.rows > 0 ? r.prefill : r.decode;
        char buf[96];
        std::snprintf(buf, sizeof buf, "sink %.2f H %.1f prev %.2f", p.sink, p.entropy, p.previous_token);
        return buf;
      }
    return "";
  };
  // The column count that gives the largest thumbnails with every cell (label, image, score line)
  // inside the panel: a cell is at least as wide as its score line, so columns never overflow.
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const int count = static_cast<int>(items.size());
  const ImGuiStyle& style = ImGui::GetStyle();
  const float gap = style.ItemSpacing.x, line = ImGui::GetTextLineHeightWithSpacing();
  struct Fit {
    int columns = 1;
    float side = 0, cell_w = 0;
  };
  // Under each image its label and, with `scores`, its score line; without, the scores show on hover.
  const auto fit = [&](bool scores) {
    const float text_w = ImGui::CalcTextSize(scores ? "sink 0.00 H 0.0 prev 0.00" : "layer 00 <- 00 *").x;
    const float text_h = (scores ? 2 : 1) * line + style.ItemSpacing.y + 2;
    Fit f;
    f.cell_w = avail.x;
    for (int c = 1; c <= count; ++c) {
      const float w = (avail.x - gap * static_cast<float>(c - 1)) / static_cast<float>(c);
      if (c > 1 && w < text_w) break;
      const int rows = (count + c - 1) / c;
      const float side_c = std::min(w - 2, (avail.y - static_cast<float>(rows) * text_h) / static_cast<float>(rows));
      if (side_c > f.side) f.side = side_c, f.columns = c, f.cell_w = w;
    }
    return f;
  };
  const Fit with_scores = fit(true), without = fit(false);
  const bool show_scores = with_scores.side >= 48 || with_scores.side >= 0.75f * without.side;
  const Fit& chosen = show_scores ? with_scores : without;
  const int columns = chosen.columns;
  const float side = std::max(24.f, chosen.side), cell_w = chosen.cell_w;
  const float base_x = ImGui::GetCursorPosX();
  std::vector<ImVec4> rects(static_cast<std::size_t>(count), ImVec4(0, 0, 0, 0));  // each thumbnail's image (x0, y0, x1, y1)
  int hovered = -1;
  for (int i = 0; i < count; ++i) {
    if (i % columns) ImGui::SameLine(base_x + static_cast<float>(i % columns) * (cell_w + gap));
    ImGui::BeginGroup();
    const bool selected = heads ? items[i] == ui.selection.head : items[i] == ui.selection.layer;
    const int source = !heads && static_cast<std::size_t>(i) < hv.thumb_sources.size() ? hv.thumb_sources[static_cast<std::size_t>(i)] : -1;
    if (source >= 0 && source != items[i]) {
      // Kascade reuse: the anchor whose top-k this layer attended at the last step.
      ImGui::Text("layer %d%s", items[i], selected ? " *" : "");
      ImGui::SameLine();
      ImGui::TextColored(ImVec4(0.55f, 0.8f, 1.f, 1.f), "<- %d", source);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("kascade: attends to the top-k keys layer %d chose at this step", source);
    } else if (source >= 0) {
      ImGui::Text("layer %d%s", items[i], selected ? " *" : "");
      ImGui::SameLine();
      ImGui::TextColored(ImVec4(0.55f, 0.8f, 1.f, 1.f), "anchor");
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("kascade anchor: chooses its top-k keys from its own attention");
    } else {
      ImGui::Text("%s %d%s", heads ? "head" : "layer", items[i], selected ? " *" : "");
    }
    ImGui::PushID(i);
    if (hv.thumbs[static_cast<std::size_t>(i)]->valid() &&
        ImGui::ImageButton(hv.thumbs[static_cast<std::size_t>(i)]->id(), ImVec2(side, side), ImVec2(0, 0), ImVec2(1, 1), 1)) {
      if (heads) ui.selection.head = items[i];
      else ui.selection.layer = items[i];
      hv.mode = MapMode::kMap;
    }
    if (hv.thumbs[static_cast<std::size_t>(i)]->valid()) {
      const ImVec2 r0 = ImGui::GetItemRectMin(), r1 = ImGui::GetItemRectMax();
      ui.mark_drawn("thumbnail/" + std::to_string(i), r0.x, r0.y, r1.x, r1.y);
      rects[static_cast<std::size_t>(i)] = ImVec4(r0.x, r0.y, r1.x, r1.y);
      if (ImGui::IsItemHovered()) hovered = i;
    }
    ImGui::PopID();
    const std::string scores_text = score_line(heads ? ui.selection.layer : items[i], heads ? items[i] : ui.selection.head);
    if (show_scores) {
      ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.7f, 0.7f, 0.75f, 1.f));
      ImGui::TextUnformatted(scores_text.empty() ? "scores..." : scores_text.c_str());
      ImGui::PopStyleColor();
    } else if (hovered == i && !scores_text.empty()) {
      ImGui::SetTooltip("%s", scores_text.c_str());
    }
    ImGui::EndGroup();
  }
  if (!heads) draw_reuse_arrows(ui, items, hv.thumb_sources, rects, hovered, ui.selection.layer);
}

}  // namespace luka::studio
