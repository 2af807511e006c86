// Model panel: the checkpoint or GGUF file, load and status.
#include <imgui.h>
#include <imgui_stdlib.h>

#include "app/studio/ui_state.h"

namespace luka::studio {

void draw_model_panel(UiState& ui) {
  const Status s = ui.session.status();
  ImGui::InputText("##model", &ui.model_path);
  ImGui::SameLine();
  const bool busy = ui.session.busy();
  ImGui::BeginDisabled(busy);
  if (ImGui::Button("Load")) ui.session.load_model(ui.model_path, LoadOptions{});
  ImGui::EndDisabled();
  ImGui::Text("%s", s.model_summary.empty() ? "no model loaded" : s.model_summary.c_str());
  const ImVec4 colour = s.state == RunState::kError ? ImVec4(0.9f, 0.3f, 0.3f, 1) : ImVec4(0.7f, 0.7f, 0.7f, 1);
  ImGui::TextColored(colour, "[%s] %s", to_string(s.state), s.message.c_str());
  if (s.state == RunState::kRunning || s.state == RunState::kPaused) {
    const float f = s.steps_total > 0 ? static_cast<float>(s.steps_done) / static_cast<float>(s.steps_total) : 0.f;
    const std::string label = std::to_string(s.steps_done) + " / " + std::to_string(s.steps_total) + " steps";
    ImGui::ProgressBar(f, ImVec2(-1, 0), label.c_str());
  } else if (s.state == RunState::kLoading) {
    ImGui::ProgressBar(-0.3f * static_cast<float>(ImGui::GetTime()), ImVec2(-1, 0), "loading");
  }
}

}  // namespace luka::studio
