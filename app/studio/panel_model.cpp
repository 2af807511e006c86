// Model panel: the checkpoint or GGUF file, compute dtype and threads, load and status.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>

#include "app/studio/ui_state.h"
#include "core/model/dtype.h"

namespace luka::studio {

void draw_model_panel(UiState& ui) {
  const Status s = ui.session.status();
  ImGui::InputText("##model", &ui.model_path);
  ImGui::SameLine();
  const bool busy = ui.session.busy();
  ImGui::BeginDisabled(busy);
  if (ImGui::Button("Load")) {
    LoadOptions o;
    o.dtype = ui.dtype == 1 ? DType::kBF16 : DType::kF32;
    o.threads = ui.threads;
    ui.session.load_model(ui.model_path, o);
  }
  ImGui::EndDisabled();
  ImGui::SetNextItemWidth(80);
  static const char* kDtypes[] = {"fp32", "bf16"};
  ImGui::Combo("dtype", &ui.dtype, kDtypes, 2);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(90);
  ImGui::InputInt("threads (0: all)", &ui.threads);
  ui.threads = std::max(0, std::min(ui.threads, 256));
  ImGui::Text("%s", s.model_summary.empty() ? "no model loaded" : s.model_summary.c_str());
  const ImVec4 colour = s.state == RunState::kError ? ImVec4(0.9f, 0.3f, 0.3f, 1) : ImVec4(0.7f, 0.7f, 0.7f, 1);
  ImGui::TextColored(colour, "[%s] %s", to_string(s.state), s.message.c_str());
  if (s.state == RunState::kRunning || s.state == RunState::kPaused) {
    const float f = s.steps_total > 0 ? static_cast<float>(s.steps_done) / static_cast<float>(s.steps_total) : 0.f;
    const std::string label = std::to_string(s.steps_done) + " / " + std::to_string(s.steps_total) + " steps";
    ImGui::ProgressBar(f, ImVec2(-1, 0), label.c_str());
  } else if (s.state == RunState::kLoading) {
    ImGui::ProgressBar(-0.3f * static_cast<float>(ImGui::GetTime()), ImVec2(-80, 0), "loading");
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) ui.session.cancel_load();
  }
}

}  // namespace luka::studio
