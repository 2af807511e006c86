// Fidelity and cost: per layer at the selected decode step — mode, KL(dense ‖ effective), recall,
// top-32 overlap and relative output error (means over the recorded heads; the dense shadow must
// be on), cover size and attention time; beside them the same for a compared capture (B).
#include <imgui.h>

#include <cmath>
#include <string>

#include "app/studio/ui_state.h"

namespace luka::studio {

void draw_fidelity_panel(UiState& ui) {
  const auto view = ui.session.view();
  if (!view) return;
  const capture::Summary sum = view->summary();
  if (sum.complete_steps == 0) {
    ImGui::TextDisabled("no decode steps yet");
    return;
  }
  const std::int64_t step = ui.selection.step > 0 ? std::min<std::int64_t>(ui.selection.step, sum.complete_steps) : sum.complete_steps;
  LukaConfig cfg = ui.session.config();
  bool shadow = !cfg.layers.empty() && cfg.layers.front().dense_shadow;
  if (ImGui::Checkbox("dense shadow (from the next step)", &shadow)) {
    for (auto& l : cfg.layers) l.dense_shadow = shadow;
    ui.session.set_config(cfg);
  }
  ImGui::SameLine();
  ImGui::TextDisabled("step %lld; means over %zu heads", static_cast<long long>(step), sum.layout.heads.size());
  // Comparing: the other capture's numbers at the same step and layers, beside these.
  const auto other = ui.compare.view;
  const bool two = other != nullptr;
  if (two) {
    ImGui::SameLine();
    ImGui::TextDisabled("| B: %s", ui.compare.note.c_str());
  }
  if (!ImGui::BeginTable("fidelity", two ? 11 : 7, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingFixedFit,
                         ImVec2(-1, ImGui::GetContentRegionAvail().y)))
    return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (const char* h : {"layer", "mode", "KL", "recall", "top-32", "rel. L2", "cover / ms"}) ImGui::TableSetupColumn(h);
  if (two)
    for (const char* h : {"B mode", "B KL", "B rel. L2", "B cover / ms"}) ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  const std::vector<int> layers = sum.layout.layers;
  const auto read = [layers](std::shared_ptr<const capture::CaptureView> v, std::int64_t s) {
    std::vector<capture::StepMetrics> out;
    for (const int layer : layers) {
      try {
        out.push_back(v->metrics(s, layer));
      } catch (const std::exception&) {  // not recorded there (or no such step)
        out.emplace_back();
      }
    }
    return out;
  };
  const auto& all = ui.fidelity.step_metrics.get(ui.tasks, capture_key(view.get()) + "/" + std::to_string(step), [view, step, read] { return read(view, step); });
  static const std::vector<capture::StepMetrics> none;
  const auto& all_b = two ? ui.compare.step_metrics.get(ui.tasks, capture_key(other.get()) + "/" + std::to_string(step), [other, step, read] { return read(other, step); })
                          : none;
  // Means over the heads with the shadow: KL, recall, top-32, rel. L2 (n = 0: none).
  const auto means = [](const capture::StepMetrics& m, double (&mean)[4]) {
    int n = 0;
    for (std::size_t h = 0; h < m.cover_size.size(); ++h) {
      if (std::isnan(m.fidelity[h * 4])) continue;
      for (int c = 0; c < 4; ++c) mean[c] += m.fidelity[h * 4 + static_cast<std::size_t>(c)];
      ++n;
    }
    for (double& x : mean) x = n ? x / n : NAN;
    return n;
  };
  for (std::size_t li = 0; li < sum.layout.layers.size() && li < all.size(); ++li) {
    const int layer = sum.layout.layers[li];
    const capture::StepMetrics& m = all[li];
    if (m.cover_size.empty()) continue;
    double mean[4] = {0, 0, 0, 0};
    int n = 0;
    const std::size_t H = m.cover_size.size();
    for (std::size_t h = 0; h < H; ++h) {
      if (std::isnan(m.fidelity[h * 4])) continue;
      for (int c = 0; c < 4; ++c) mean[c] += m.fidelity[h * 4 + static_cast<std::size_t>(c)];
      ++n;
    }
    double cover = 0;
    for (const auto c : m.cover_size) cover += c;
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("%d", layer);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(capture::mode_name(m.mode));
    for (int c = 0; c < 4; ++c) {
      ImGui::TableNextColumn();
      if (n) ImGui::Text("%.4g", mean[c] / n);
      else ImGui::TextDisabled("-");
    }
    ImGui::TableNextColumn();
    ImGui::Text("%.0f / %.3f", H ? cover / static_cast<double>(H) : 0.0, m.seconds * 1e3);
    if (two) {
      const capture::StepMetrics& b = li < all_b.size() ? all_b[li] : capture::StepMetrics{};
      ImGui::TableNextColumn();
      if (b.cover_size.empty()) {
        ImGui::TextDisabled("-");
        continue;
      }
      ImGui::TextUnformatted(capture::mode_name(b.mode));
      double bm[4] = {0, 0, 0, 0};
      means(b, bm);
      for (const int c : {0, 3}) {
        ImGui::TableNextColumn();
        if (!std::isnan(bm[c])) ImGui::Text("%.4g", bm[c]);
        else ImGui::TextDisabled("-");
      }
      double bc = 0;
      for (const auto c : b.cover_size) bc += c;
      ImGui::TableNextColumn();
      ImGui::Text("%.0f / %.3f", bc / static_cast<double>(b.cover_size.size()), b.seconds * 1e3);
    }
  }
  ImGui::EndTable();
}

}  // namespace luka::studio
