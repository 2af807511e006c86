// Prompt panel: the interwoven-prompt builder — segments coloured by topic, each with its topic
// letter, label and text; add, move up, remove; re-lay out in a pattern (ABAB, AABB, ABCABC...);
// load a WikiSalad example; open and save prompt files — then the question, chat formatting, and
// Run / Pause / Step / Stop.
#include <imgui.h>
#include <algorithm>
#include <optional>
#include <imgui_stdlib.h>

#include "app/studio/ui_state.h"
#include "core/prompt/prompt_file.h"
#include "core/prompt/wikisalad.h"

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

namespace {

// A segment takes its topic's label and colour (from another segment of that topic, or defaults).
void set_topic(InterwovenPrompt& p, std::size_t i, char letter) {
  p.pattern[i] = letter;
  for (std::size_t j = 0; j < p.segments.size(); ++j)
    if (j != i && p.pattern[j] == letter) {
      p.segments[i].label = p.segments[j].label;
      p.segments[i].colour = p.segments[j].colour;
      return;
    }
  p.segments[i].label = std::string("Topic ") + letter;
  p.segments[i].colour = default_topic_colour(topic_index(letter));
}

void builder(UiState& ui) {
  InterwovenPrompt& p = ui.prompt;
  if (p.pattern != ui.pattern_shown) ui.pattern_edit = ui.pattern_shown = p.pattern;
  if (ImGui::Button("+ segment")) {
    const char letter = p.pattern.empty() ? 'A' : p.pattern.back() == 'A' ? 'B' : 'A';
    p.segments.push_back({"", "", "New text."});
    p.pattern += letter;
    set_topic(p, p.segments.size() - 1, letter);
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(90);
  ImGui::InputText("##pattern", &ui.pattern_edit);
  ImGui::SameLine();
  if (ImGui::Button("Apply pattern")) {
    try {
      apply_pattern(p, ui.pattern_edit);
      ui.prompt_notice = "pattern " + p.pattern;
    } catch (const std::exception& e) {
      ui.prompt_notice = e.what();
    }
  }
  ImGui::SetNextItemWidth(200);
  ImGui::InputText("##wikisalad", &ui.wikisalad_path);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(70);
  ImGui::InputInt("##example", &ui.wikisalad_example, 1);
  ImGui::SameLine();
  if (ImGui::Button("WikiSalad")) {
    try {
      p = from_wikisalad(ui.wikisalad_path, ui.wikisalad_example);
      ui.prompt_notice = "WikiSalad example " + std::to_string(ui.wikisalad_example) + ": " + p.pattern;
    } catch (const std::exception& e) {
      ui.prompt_notice = e.what();
    }
  }
  ImGui::SetNextItemWidth(200);
  ImGui::InputText("##promptfile", &ui.prompt_path);
  ImGui::SameLine();
  if (ImGui::Button("Open")) {
    try {
      p = load_prompt_file(ui.prompt_path);
      ui.prompt_notice = "opened " + ui.prompt_path;
    } catch (const std::exception& e) {
      ui.prompt_notice = e.what();
    }
  }
  ImGui::SameLine();
  if (ImGui::Button("Save")) {
    try {
      save_prompt_file(p, ui.prompt_path);
      ui.prompt_notice = "saved " + ui.prompt_path;
    } catch (const std::exception& e) {
      ui.prompt_notice = e.what();
    }
  }
  if (!ui.prompt_notice.empty()) ImGui::TextWrapped("%s", ui.prompt_notice.c_str());
}

}  // namespace

void draw_segments(UiState& ui);
void run_controls(UiState& ui);

void draw_prompt_panel(UiState& ui) {
  run_controls(ui);  // first, so Run is always in view
  ImGui::Separator();
  ImGui::RadioButton("interwoven", &ui.free_text_mode, 0);
  ImGui::SameLine();
  ImGui::RadioButton("free text", &ui.free_text_mode, 1);
  if (ui.free_text_mode) {
    ImGui::InputTextMultiline("##free", &ui.free_text, ImVec2(-1, ImGui::GetContentRegionAvail().y - 4));
  } else {
    draw_segments(ui);
  }
}

void draw_segments(UiState& ui) {
  if (!ui.prompt.title.empty()) ImGui::TextWrapped("%s", ui.prompt.title.c_str());
  builder(ui);
  InterwovenPrompt& p = ui.prompt;
  std::size_t remove = p.segments.size(), up = p.segments.size();
  for (std::size_t i = 0; i < p.segments.size(); ++i) {
    PromptSegment& seg = p.segments[i];
    ImGui::PushID(static_cast<int>(i));
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddRectFilled(pos, ImVec2(pos.x + 10, pos.y + 14), parse_colour(seg.colour));
    ImGui::Dummy(ImVec2(12, 14));
    ImGui::SameLine();
    char letter[2] = {i < p.pattern.size() ? p.pattern[i] : 'A', 0};
    ImGui::SetNextItemWidth(34);
    if (ImGui::BeginCombo("##topic", letter, ImGuiComboFlags_NoArrowButton)) {
      for (char c = 'A'; c <= 'F'; ++c)
        if (ImGui::Selectable(std::string(1, c).c_str(), c == letter[0])) set_topic(p, i, c);
      ImGui::EndCombo();
    }
    ImGui::SameLine();
    ImGui::SetNextItemWidth(150);
    if (ImGui::InputText("##label", &seg.label))  // a topic's label is shared by its segments
      for (std::size_t j = 0; j < p.segments.size(); ++j)
        if (p.pattern[j] == p.pattern[i]) p.segments[j].label = seg.label;
    ImGui::SameLine();
    if (ImGui::SmallButton("up") && i > 0) up = i;
    ImGui::SameLine();
    if (ImGui::SmallButton("x") && p.segments.size() > 1) remove = i;
    ImGui::InputTextMultiline("##text", &seg.text, ImVec2(-1, ImGui::GetTextLineHeight() * 4));
    ImGui::PopID();
  }
  if (up < p.segments.size()) {
    std::swap(p.segments[up], p.segments[up - 1]);
    std::swap(p.pattern[up], p.pattern[up - 1]);
  }
  if (remove < p.segments.size()) {
    p.segments.erase(p.segments.begin() + static_cast<std::ptrdiff_t>(remove));
    p.pattern.erase(remove, 1);
  }
  ImGui::TextUnformatted("question");
  ImGui::InputTextMultiline("##question", &ui.prompt.question, ImVec2(-1, ImGui::GetTextLineHeight() * 2));
}

void run_controls(UiState& ui) {
  ImGui::Checkbox("chat format", &ui.chat);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(120);
  ImGui::SliderInt("new tokens", &ui.max_new_tokens, 2, 256);

  // Sampling: greedy at temperature 0.
  ImGui::SetNextItemWidth(90);
  ImGui::InputFloat("temp", &ui.sampling.temperature, 0.1f, 0.5f, "%.2f");
  ui.sampling.temperature = std::max(0.f, ui.sampling.temperature);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(70);
  ImGui::InputInt("top-k", &ui.sampling.top_k, 0);
  ui.sampling.top_k = std::max(0, ui.sampling.top_k);
  ImGui::SetNextItemWidth(90);
  ImGui::SliderFloat("top-p", &ui.sampling.top_p, 0.05f, 1.f, "%.2f");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(70);
  int seed = static_cast<int>(ui.sampling.seed);
  if (ImGui::InputInt("seed", &seed, 0)) ui.sampling.seed = static_cast<std::uint64_t>(std::max(0, seed));

  const Status s = ui.session.status();
  const bool running = s.state == RunState::kRunning || s.state == RunState::kPaused;
  const bool can_run = !running && s.state != RunState::kLoading && !s.model_summary.empty();
  ImGui::BeginDisabled(!can_run);
  const std::optional<std::string> free = ui.free_text_mode ? std::optional<std::string>(ui.free_text) : std::nullopt;
  if (ImGui::Button("Run")) ui.session.run({ui.prompt, ui.chat, ui.max_new_tokens, false, ui.sampling, free});
  ImGui::SameLine();
  if (ImGui::Button("Run paused")) ui.session.run({ui.prompt, ui.chat, ui.max_new_tokens, true, ui.sampling, free});
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
