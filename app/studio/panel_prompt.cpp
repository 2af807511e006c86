// Prompt panel: the interwoven prompt's segments (coloured by topic), the question, chat
// formatting, and Run / Pause / Step / Stop.
#include <imgui.h>
#include <imgui_stdlib.h>

#include "app/studio/ui_state.h"

namespace luka::studio {

unsigned int parse_colour(const std::string& hex) {
  unsigned int r = 128, g = 128, b = 128;
  if (hex.size() == 7 && hex[0] == '#') {
    const unsigned long v = std::stoul(hex.substr(1), nullptr, 16);
    r = (v >> 16) & 255;
    g = (v >> 8) & 255;
    b = v & 255;
  }
  return IM_COL32(r, g, b, 255);
}

void draw_prompt_panel(UiState& ui) {
  if (!ui.prompt.title.empty()) ImGui::TextWrapped("%s", ui.prompt.title.c_str());
  for (std::size_t i = 0; i < ui.prompt.segments.size(); ++i) {
    PromptSegment& seg = ui.prompt.segments[i];
    ImGui::PushID(static_cast<int>(i));
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + 10, p.y + 14), parse_colour(seg.colour));
    ImGui::Dummy(ImVec2(12, 14));
    ImGui::SameLine();
    ImGui::Text("%c  %s", i < ui.prompt.pattern.size() ? ui.prompt.pattern[i] : '?', seg.label.c_str());
    ImGui::InputTextMultiline("##text", &seg.text, ImVec2(-1, ImGui::GetTextLineHeight() * 4));
    ImGui::PopID();
  }
  ImGui::TextUnformatted("question");
  ImGui::InputTextMultiline("##question", &ui.prompt.question, ImVec2(-1, ImGui::GetTextLineHeight() * 2));
  ImGui::Checkbox("chat format", &ui.chat);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(120);
  ImGui::SliderInt("new tokens", &ui.max_new_tokens, 2, 256);

  const Status s = ui.session.status();
  const bool running = s.state == RunState::kRunning || s.state == RunState::kPaused;
  const bool can_run = !running && s.state != RunState::kLoading && !s.model_summary.empty();
  ImGui::BeginDisabled(!can_run);
  if (ImGui::Button("Run")) ui.session.run({ui.prompt, ui.chat, ui.max_new_tokens, false});
  ImGui::SameLine();
  if (ImGui::Button("Run paused")) ui.session.run({ui.prompt, ui.chat, ui.max_new_tokens, true});
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::BeginDisabled(!running);
  if (s.state == RunState::kPaused) {
    if (ImGui::Button("Resume")) ui.session.resume();
  } else if (ImGui::Button("Pause")) {
    ui.session.pause();
  }
  ImGui::SameLine();
  if (ImGui::Button("Step")) ui.session.step();
  ImGui::SameLine();
  if (ImGui::Button("Stop")) ui.session.stop();
  ImGui::EndDisabled();
}

}  // namespace luka::studio
