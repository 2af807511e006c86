// Small multiples: every recorded head of the selected layer (head grid), or the selected head in
// every recorded layer (layer strip), each a coarse thumbnail of the full map in the current view.
// Clicking a thumbnail selects it and returns to the map. Under each, the head's scores.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "app/figures/capture_figure.h"
#include "app/studio/ui_state.h"
#include "viz/heatmap.h"

namespace luka::studio {

void draw_thumbnails(UiState& ui, const capture::CaptureView& view, bool heads) {
  HeatmapView& hv = ui.heatmap;
  const capture::Summary sum = view.summary();
  const capture::Layout& lay = sum.layout;
  const std::vector<int>& items = heads ? lay.heads : lay.layers;
  const figures::MapView map_view = hv.view;
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
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const int count = static_cast<int>(items.size());
  const int columns = std::max(1, static_cast<int>(std::ceil(std::sqrt(count * avail.x / std::max(1.f, avail.y - 60)))));
  const float side = std::max(24.f, std::min((avail.x - 8 * columns) / columns, (avail.y - 70) / std::ceil(count / static_cast<float>(columns)) - 40));
  for (int i = 0; i < count; ++i) {
    if (i % columns) ImGui::SameLine();
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
    }
    ImGui::PopID();
    const std::string line = score_line(heads ? ui.selection.layer : items[i], heads ? items[i] : ui.selection.head);
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.7f, 0.7f, 0.75f, 1.f));
    ImGui::TextUnformatted(line.empty() ? "scores..." : line.c_str());
    ImGui::PopStyleColor();
    ImGui::EndGroup();
  }
}

}  // namespace luka::studio
