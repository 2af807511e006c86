// Layers panel: presets, the selected layer's parameters, and one row per layer with its mode
// (switchable live: a change takes effect at the next decode step) and what the layer's last
// recorded step cost.
#include <imgui.h>

#include <algorithm>
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
  for (const char* name : {"dense", "lined", "clustered", "paper"}) {
    ImGui::SameLine();
    if (ImGui::SmallButton(name)) ui.session.set_config(LukaConfig::preset(name, L));
  }
  // mixed(a,b): the first a and last b layers lined, the rest clustered.
  ImGui::SameLine();
  ImGui::SetNextItemWidth(28);
  ImGui::DragInt("##mixed_a", &ui.mixed_a, 0.2f, 0, L);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(28);
  ImGui::DragInt("##mixed_b", &ui.mixed_b, 0.2f, 0, L);
  ImGui::SameLine();
  const std::string mixed = "mixed(" + std::to_string(ui.mixed_a) + "," + std::to_string(ui.mixed_b) + ")";
  if (ImGui::SmallButton(mixed.c_str())) {
    try {
      ui.session.set_config(LukaConfig::preset(mixed, L));
    } catch (const std::exception& e) {
      ui.notice = e.what();
    }
  }
  const auto view = ui.session.view();
  std::int64_t last = 0;
  if (view) last = view->summary().complete_steps;
  const std::vector<int> recorded = view ? view->summary().layout.layers : std::vector<int>{};
  // The selected layer's parameters (live, like the mode): the window and heavy-hitter fraction of
  // lined attention; page size, tail, refinement and compressor of clustered attention.
  {
    LayerConfig lc = cfg.layers[static_cast<std::size_t>(std::clamp(ui.layer, 0, L - 1))];
    bool changed = false;
    ImGui::Text("layer %d:", ui.layer);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(70);
    int window = static_cast<int>(lc.lined.window);
    if (ImGui::InputInt("W", &window, 0)) lc.lined.window = std::max(1, window), changed = true;
    ImGui::SameLine();
    ImGui::SetNextItemWidth(70);
    float rho = static_cast<float>(lc.lined.rho);
    if (ImGui::InputFloat("rho", &rho, 0, 0, "%.3f")) lc.lined.rho = std::clamp(rho, 0.001f, 1.f), changed = true;
    ImGui::SameLine();
    ImGui::SetNextItemWidth(60);
    int page = static_cast<int>(lc.clustered.page_size);
    if (ImGui::InputInt("page", &page, 0)) lc.clustered.page_size = std::max(1, page), changed = true;
    ImGui::SetNextItemWidth(60);
    int tail = static_cast<int>(lc.clustered.tail);
    if (ImGui::InputInt("tail", &tail, 0)) lc.clustered.tail = std::max(0, tail), changed = true;
    ImGui::SameLine();
    ImGui::SetNextItemWidth(50);
    int top_k = static_cast<int>(lc.clustered.top_k);
    if (ImGui::InputInt("top_k", &top_k, 0)) lc.clustered.top_k = std::max(0, top_k), changed = true;
    ImGui::SameLine();
    ImGui::SetNextItemWidth(100);
    static const char* kCompressors[] = {"mean", "attn-weighted", "random"};
    int comp = static_cast<int>(lc.clustered.compressor);
    if (ImGui::Combo("##comp", &comp, kCompressors, 3)) lc.clustered.compressor = static_cast<Compressor>(comp), changed = true;
    ImGui::SameLine();
    bool exact = lc.clustered.math == RefineMath::kExact;
    if (ImGui::Checkbox("exact", &exact)) lc.clustered.math = exact ? RefineMath::kExact : RefineMath::kMassPreserving, changed = true;
    if (changed) {
      try {
        validate(lc, ui.layer);
        cfg.layers[static_cast<std::size_t>(ui.layer)] = lc;
        ui.session.set_config(cfg);
      } catch (const std::exception& e) {
        ui.notice = e.what();
      }
    }
  }
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
    const auto& costs = ui.layer_costs.get(capture_key(view.get()) + "/" + std::to_string(L), [view, last, recorded, L] {
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
    static const std::string dash = "-";
    const bool have = costs.size() >= static_cast<std::size_t>(3 * L);  // a read for this capture has arrived
    const std::string& cover = have ? costs[3 * l] : dash;
    const std::string& refined = have ? costs[3 * l + 1] : dash;
    const std::string& ms = have ? costs[3 * l + 2] : dash;
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
