// Small multiples: every recorded head of the selected layer (head grid), or the selected head in
// every recorded layer (layer strip), each a coarse thumbnail of the full map in the current view.
// Clicking a thumbnail selects it and returns to the map.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "app/cli/figure_from_capture.h"
#include "app/studio/ui_state.h"
#include "viz/heatmap.h"

namespace luka::studio {

void draw_thumbnails(UiState& ui, const capture::CaptureView& view, bool heads) {
  HeatmapView& hv = ui.heatmap;
  const capture::Summary sum = view.summary();
  const capture::Layout& lay = sum.layout;
  const std::vector<int>& items = heads ? lay.heads : lay.layers;
  const auto map_view = static_cast<cli::MapView>(hv.view);
  // The finest stored level with at most 128 cells per side.
  const std::int64_t steps = sum.complete_steps, n = lay.prompt_tokens + steps;
  int level = lay.levels.back();
  for (auto it = lay.levels.rbegin(); it != lay.levels.rend(); ++it)
    if (capture::level_size(n, *it) <= 128) level = *it;
  const std::string key = std::to_string(reinterpret_cast<std::uintptr_t>(&view)) + "/" + (heads ? "h" : "l") + std::to_string(heads ? ui.layer : ui.head) +
                          "/" + std::to_string(steps) + "/" + std::to_string(hv.view) + "/" + std::to_string(hv.log_scale) + "/" + std::to_string(level);
  if (hv.thumbs_key != key) {
    hv.thumbs.clear();
    for (const int item : items) {
      auto tex = std::make_unique<Texture>();
      try {
        const int layer = heads ? ui.layer : item, head = heads ? item : ui.head;
        const cli::FullWindow w = cli::full_window(view, layer, head, level, steps, map_view, 0, 0, 1 << 30, 1 << 30);
        viz::HeatmapOptions o;
        o.causal = true;
        o.empty = {24, 24, 28};
        if (map_view == cli::MapView::kDifference) {
          float vmax = 0;
          for (const float v : w.values)
            if (!std::isnan(v)) vmax = std::max(vmax, std::abs(v));
          o.colormap = &viz::Colormap::get(viz::ColormapId::kBalance);
          o.scale.kind = viz::ColorScale::kSymmetric;
          o.scale.vmax = std::max(1e-6f, vmax);
        } else if (hv.log_scale) {
          o.scale.kind = viz::ColorScale::kLog;
          o.scale.vmin = hv.log_min;
        }
        tex->upload(viz::render_heatmap(w.values.data(), w.rows, w.cols, static_cast<int>(w.cols), static_cast<int>(w.rows), o));
      } catch (const std::exception&) {
      }
      hv.thumbs.push_back(std::move(tex));
    }
    hv.thumbs_key = key;
  }
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const int count = static_cast<int>(items.size());
  const int columns = std::max(1, static_cast<int>(std::ceil(std::sqrt(count * avail.x / std::max(1.f, avail.y - 60)))));
  const float side = std::max(24.f, std::min((avail.x - 8 * columns) / columns, (avail.y - 70) / std::ceil(count / static_cast<float>(columns)) - 22));
  for (int i = 0; i < count; ++i) {
    if (i % columns) ImGui::SameLine();
    ImGui::BeginGroup();
    const bool selected = heads ? items[i] == ui.head : items[i] == ui.layer;
    ImGui::Text("%s %d%s", heads ? "head" : "layer", items[i], selected ? " *" : "");
    ImGui::PushID(i);
    if (hv.thumbs[static_cast<std::size_t>(i)]->valid() &&
        ImGui::ImageButton(hv.thumbs[static_cast<std::size_t>(i)]->id(), ImVec2(side, side), ImVec2(0, 0), ImVec2(1, 1), 1)) {
      if (heads) ui.head = items[i];
      else ui.layer = items[i];
      hv.mode = 0;
    }
    ImGui::PopID();
    ImGui::EndGroup();
  }
}

}  // namespace luka::studio
