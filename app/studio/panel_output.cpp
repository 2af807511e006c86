// Output panel: the generated text, and the effective attention row of the selected layer and
// head at a decode step (a slider scrubs the steps, live or replayed).
#include <imgui.h>

#include <algorithm>
#include <string>

#include "app/studio/ui_state.h"
#include "viz/heatmap.h"

namespace luka::studio {

void draw_output_panel(UiState& ui) {
  const auto view = ui.session.view();
  ImGui::TextWrapped("%s", ui.session.output().c_str());
  if (!view) return;
  const capture::Summary sum = view->summary();
  if (sum.complete_steps == 0) return;
  int step = static_cast<int>(ui.step > 0 ? std::min<std::int64_t>(ui.step, sum.complete_steps) : sum.complete_steps);
  ImGui::SetNextItemWidth(-80);
  if (ImGui::SliderInt("step", &step, 1, static_cast<int>(sum.complete_steps))) ui.step = step;
  if (!sum.layout.rows) return;
  try {
    const capture::StepMetrics m = view->metrics(step, ui.layer);
    const std::vector<float> row = view->row(step, ui.layer, ui.head);
    ImGui::Text("step %d, layer %d (%s), head %d: effective attention over %lld tokens", step, ui.layer, capture::mode_name(m.mode),
                ui.head, static_cast<long long>(m.tokens));
    viz::HeatmapOptions o;
    o.scale.kind = viz::ColorScale::kLog;
    o.scale.vmin = 1e-4;
    const int w = static_cast<int>(std::max(1.f, ImGui::GetContentRegionAvail().x));
    static Texture strip;
    strip.upload(viz::render_heatmap(row.data(), 1, static_cast<std::int64_t>(row.size()), w, 1, o));
    ImGui::Image(strip.id(), ImVec2(static_cast<float>(w), 16));
  } catch (const std::exception& e) {
    ImGui::TextDisabled("%s", e.what());
  }
}

}  // namespace luka::studio
