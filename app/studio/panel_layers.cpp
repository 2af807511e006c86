// Layers panel: one row per layer with its mode (switchable live: the change takes effect at the
// next decode step), and what the layer's last recorded step cost.
#include <imgui.h>

#include <cmath>
#include <string>

#include "app/studio/ui_state.h"

namespace luka::studio {

void draw_layers_panel(UiState& ui) {
  LukaConfig cfg = ui.session.config();
  const int L = static_cast<int>(cfg.layers.size());
  if (L == 0) {
    ImGui::TextDisabled("load a model or open a capture");
    return;
  }
  ImGui::TextUnformatted("preset");
  for (const char* name : {"dense", "lined", "clustered", "mixed(2,2)", "paper"}) {
    ImGui::SameLine();
    if (ImGui::SmallButton(name)) ui.session.set_config(LukaConfig::preset(name, L));
  }
  const auto view = ui.session.view();
  std::int64_t last = 0;
  if (view) last = view->summary().complete_steps;
  const std::vector<int> recorded = view ? view->summary().layout.layers : std::vector<int>{};
  if (!ImGui::BeginTable("layers", 5, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingFixedFit,
                         ImVec2(-1, ImGui::GetContentRegionAvail().y)))
    return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("layer");
  ImGui::TableSetupColumn("mode (live)");
  ImGui::TableSetupColumn("cover");
  ImGui::TableSetupColumn("refined");
  ImGui::TableSetupColumn("ms");
  ImGui::TableHeadersRow();
  static const char* kModes[] = {"D", "L", "C"};
  static const AttentionMode kModeValues[] = {AttentionMode::kDense, AttentionMode::kLined, AttentionMode::kClustered};
  for (int l = 0; l < L; ++l) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const bool selected = l == ui.layer;
    if (ImGui::Selectable(std::to_string(l).c_str(), selected, ImGuiSelectableFlags_None, ImVec2(28, 0))) ui.layer = l;
    ImGui::TableNextColumn();
    ImGui::PushID(l);
    for (int m = 0; m < 3; ++m) {
      if (m) ImGui::SameLine();
      if (ImGui::RadioButton(kModes[m], cfg.layers[static_cast<std::size_t>(l)].mode == kModeValues[m]))
        ui.session.set_layer_mode(l, kModeValues[m]);
    }
    ImGui::PopID();
    // Cost at the last recorded step (read once per step, not per frame).
    const auto& costs = ui.layer_costs.get(capture_key(view.get()) + "/" + std::to_string(L), [&] {
      std::vector<std::string> out(static_cast<std::size_t>(3 * L), "-");
      if (last == 0) return out;
      for (const int rl : recorded) {
        if (rl >= L) continue;
        try {
          const capture::StepMetrics m = view->metrics(last, rl);
          double mean = 0;
          for (const auto c : m.cover_size) mean += c;
          mean /= std::max<std::size_t>(1, m.cover_size.size());
          out[3 * rl] = std::to_string(static_cast<long long>(std::lround(mean))) + "/" + std::to_string(m.tokens);
          out[3 * rl + 2] = std::to_string(m.seconds * 1e3).substr(0, 5);
          if (m.mode == capture::kModeClustered && view->summary().layout.covers)
            out[3 * rl + 1] = std::to_string(view->refined_pages(last, rl, view->summary().layout.heads.front()).size());
        } catch (const std::exception&) {
        }
      }
      return out;
    });
    const std::string& cover = costs[3 * l];
    const std::string& refined = costs[3 * l + 1];
    const std::string& ms = costs[3 * l + 2];
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(cover.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(refined.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(ms.c_str());
  }
  ImGui::EndTable();
}

}  // namespace luka::studio
