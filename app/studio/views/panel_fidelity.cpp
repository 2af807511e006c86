// Fidelity and cost: per layer at the selected decode step — mode, KL(dense ‖ effective), recall,
// top-32 overlap and relative output error (means over the recorded heads; the dense shadow must
// be on), cover size, refined pages (means over the heads) and attention time. Comparing, each
// metric gets a Δ column: the compared capture's (B) value minus this one's (A) at the same step
// and layer, coloured by its sign (viz::kDeltaHigher, kDeltaLower), B's value and A's on hover.
#include <imgui.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "app/studio/views/ui_state.h"
#include "viz/ui_colours.h"

namespace luka::studio {
namespace {

struct MetricColumn {
  const char* name;    // the header
  const char* key;     // scripts: the fidelity_delta/LAYER/KEY cell
  const char* format;  // of a value; its Δ adds a sign
  const char* delta_format;
};

constexpr MetricColumn kMetrics[LayerFidelity::kCount] = {
    {"KL", "kl", "%.4g", "%+.4g"},          {"recall", "recall", "%.4g", "%+.4g"},    {"top-32", "top32", "%.4g", "%+.4g"},
    {"rel. L2", "rel_l2", "%.4g", "%+.4g"}, {"cover", "cover", "%.4g", "%+.4g"},      {"refined", "refined", "%.4g", "%+.4g"},
    {"ms", "ms", "%.3f", "%+.3f"},
};

std::string format(const char* f, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The layers' rows at a step, read off the UI thread. Fidelity means over the heads where the
// shadow ran; cover and refined pages means over every recorded head.
std::vector<LayerFidelity> read_fidelity(const capture::CaptureView& v, std::int64_t step, const std::vector<int>& layers) {
  const capture::Summary sum = v.summary();
  std::vector<LayerFidelity> out(layers.size());
  for (std::size_t li = 0; li < layers.size(); ++li) {
    LayerFidelity& f = out[li];
    capture::StepMetrics m;
    try {
      m = v.metrics(step, layers[li]);
    } catch (const std::exception&) {  // not recorded there (or no such step)
      continue;
    }
    const std::size_t H = m.cover_size.size();
    if (H == 0) continue;
    f.recorded = true;
    f.mode = m.mode;
    double mean[4] = {0, 0, 0, 0}, cover = 0;
    int n = 0;
    for (std::size_t h = 0; h < H; ++h) {
      cover += m.cover_size[h];
      if (std::isnan(m.fidelity[h * 4])) continue;
      for (int c = 0; c < 4; ++c) mean[c] += m.fidelity[h * 4 + static_cast<std::size_t>(c)];
      ++n;
    }
    if (n)
      for (int c = 0; c < 4; ++c) f.value[c] = mean[c] / n;
    f.value[LayerFidelity::kCover] = cover / static_cast<double>(H);
    f.value[LayerFidelity::kMs] = m.seconds * 1e3;
    if (sum.layout.covers) {
      try {
        double refined = 0;
        for (const int head : sum.layout.heads) refined += static_cast<double>(v.refined_pages(step, layers[li], head).size());
        f.value[LayerFidelity::kRefined] = refined / static_cast<double>(sum.layout.heads.size());
      } catch (const std::exception&) {
      }
    }
  }
  return out;
}

ImVec4 colour(const viz::Rgb& c) { return ImVec4(c.r / 255.f, c.g / 255.f, c.b / 255.f, 1.f); }

}  // namespace

void draw_fidelity_panel(UiState& ui) {
  const auto view = ui.controller.view();
  if (!view) return;
  const capture::Summary sum = view->summary();
  if (sum.complete_steps == 0) {
    ImGui::TextDisabled("no decode steps yet");
    return;
  }
  const std::int64_t step = ui.selection.step > 0 ? std::min<std::int64_t>(ui.selection.step, sum.complete_steps) : sum.complete_steps;
  LukaConfig cfg = ui.controller.config();
  bool shadow = !cfg.layers.empty() && cfg.layers.front().dense_shadow;
  // Live only: a replay's steps are computed already.
  const bool replay = ui.controller.status().replay;
  ImGui::BeginDisabled(replay);
  if (ImGui::Checkbox("dense shadow (from the next step)", &shadow)) {
    for (auto& l : cfg.layers) l.dense_shadow = shadow;
    ui.controller.set_config(cfg);
  }
  ImGui::EndDisabled();
  if (replay && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("live runs only: the replayed capture's steps are computed already");
  ImGui::SameLine();
  ImGui::TextDisabled("step %lld; means over %zu heads", static_cast<long long>(step), sum.layout.heads.size());
  // Comparing: the other capture's numbers at the same step and layers, differenced with these.
  const auto other = ui.compare.view;
  const bool two = other != nullptr;
  if (two) {
    ImGui::SameLine();
    ImGui::TextDisabled("| Δ = B − A, B: %s", ui.compare.note.c_str());
    ImGui::SameLine();
    ImGui::TextColored(colour(viz::kDeltaHigher), "B higher");
    ImGui::SameLine();
    ImGui::TextColored(colour(viz::kDeltaLower), "B lower");
  }
  const int columns = 2 + (two ? 1 : 0) + LayerFidelity::kCount * (two ? 2 : 1);
  if (!ImGui::BeginTable("fidelity", columns, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX | ImGuiTableFlags_SizingFixedFit,
                         ImVec2(-1, ImGui::GetContentRegionAvail().y)))
    return;
  ImGui::TableSetupScrollFreeze(1, 1);
  ImGui::TableSetupColumn("layer");
  ImGui::TableSetupColumn(two ? "A mode" : "mode");
  if (two) ImGui::TableSetupColumn("B mode");
  std::string headers[LayerFidelity::kCount];
  for (int c = 0; c < LayerFidelity::kCount; ++c) {
    ImGui::TableSetupColumn(kMetrics[c].name);
    if (two) ImGui::TableSetupColumn((headers[c] = std::string("Δ ") + kMetrics[c].name).c_str());
  }
  ImGui::TableHeadersRow();
  const std::vector<int> layers = sum.layout.layers;
  const auto& all = ui.fidelity.layers.get(ui.tasks, capture_key(view.get()) + "/" + std::to_string(step), [view, step, layers] { return read_fidelity(*view, step, layers); });
  static const std::vector<LayerFidelity> none;
  const auto& all_b = two ? ui.compare.fidelity.get(ui.tasks, capture_key(other.get()) + "/" + capture_key(view.get()) + "/" + std::to_string(step),
                                                    [other, step, layers] { return read_fidelity(*other, step, layers); })
                          : none;
  for (std::size_t li = 0; li < layers.size() && li < all.size(); ++li) {
    const int layer = layers[li];
    const LayerFidelity& a = all[li];
    if (!a.recorded) continue;
    const LayerFidelity* b = two && li < all_b.size() && all_b[li].recorded ? &all_b[li] : nullptr;
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("%d", layer);
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(capture::mode_name(a.mode));
    if (two) {
      ImGui::TableNextColumn();
      if (b) ImGui::TextUnformatted(capture::mode_name(b->mode));
      else ImGui::TextDisabled("-");
    }
    for (int c = 0; c < LayerFidelity::kCount; ++c) {
      const double va = a.value[c];
      ImGui::TableNextColumn();
      if (!std::isnan(va)) ImGui::TextUnformatted(format(kMetrics[c].format, va).c_str());
      else ImGui::TextDisabled("-");
      if (!two) continue;
      ImGui::TableNextColumn();
      const double vb = b ? b->value[c] : LayerFidelity::kNaN;
      if (std::isnan(va) || std::isnan(vb)) {
        ImGui::TextDisabled("-");
        continue;
      }
      const double d = vb - va;
      const std::string text = format(kMetrics[c].delta_format, d);
      if (d > 0) ImGui::TextColored(colour(viz::kDeltaHigher), "%s", text.c_str());
      else if (d < 0) ImGui::TextColored(colour(viz::kDeltaLower), "%s", text.c_str());
      else ImGui::TextUnformatted(text.c_str());
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("layer %d %s: B %s − A %s", layer, kMetrics[c].name, format(kMetrics[c].format, vb).c_str(), format(kMetrics[c].format, va).c_str());
      const ImVec2 t0 = ImGui::GetItemRectMin(), t1 = ImGui::GetItemRectMax();
      const ImVec2 c0 = ImGui::GetWindowDrawList()->GetClipRectMin(), c1 = ImGui::GetWindowDrawList()->GetClipRectMax();
      if (t0.y >= c0.y && t1.y <= c1.y && t0.x >= c0.x && t1.x <= c1.x)  // the whole cell's text in view
        ui.mark_drawn("fidelity_delta/" + std::to_string(layer) + "/" + kMetrics[c].key, t0.x, t0.y, t1.x, t1.y, text);
    }
  }
  ImGui::EndTable();
}

}  // namespace luka::studio
