// Prompt panel: capture files first (open, save the current view as, recent files), then Run /
// Pause / Step / Stop with chat formatting and sampling, then the interwoven-prompt builder —
// segments coloured by topic, each with its topic letter, label and text; add, move up, remove;
// re-lay out in a pattern (ABAB, AABB, ABCABC...); load a WikiSalad example; open and save prompt
// files — and the question. While a capture is replayed the panel shows the capture's own prompt
// and segments instead, and the run controls are off.
#include <imgui.h>
#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <imgui_stdlib.h>

#include "app/studio/views/choice_widgets.h"
#include "app/studio/views/ui_state.h"
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

// The topics a new segment can take: those in the prompt (with their labels), then the unused
// letters up to F.
std::vector<std::pair<char, std::string>> topic_choices(const InterwovenPrompt& p) {
  std::vector<std::pair<char, std::string>> out;
  for (char c = 'A'; c <= 'F'; ++c) {
    std::string label;
    for (std::size_t j = 0; j < p.segments.size() && j < p.pattern.size(); ++j)
      if (p.pattern[j] == c) {
        label = p.segments[j].label;
        break;
      }
    out.emplace_back(c, label.empty() ? std::string("new topic") : label);
  }
  return out;
}

void builder(UiState& ui) {
  InterwovenPrompt& p = ui.prompt.interwoven;
  if (p.pattern != ui.prompt.pattern_shown) ui.prompt.pattern_edit = ui.prompt.pattern_shown = p.pattern;
  ImGui::SetNextItemWidth(-1);  // on the mode's line (draw_prompt_panel), to the right edge
  ImGui::InputTextWithHint("##title", "title of the prompt", &p.title);
  // "+ segment" offers every topic: the prompt's own by label, and new ones.
  if (ImGui::Button("+ segment")) ImGui::OpenPopup("add_segment");
  if (ImGui::BeginPopup("add_segment")) {
    for (const auto& [letter, label] : topic_choices(p)) {
      const std::string item = std::string(1, letter) + ": " + label;
      if (ImGui::Selectable(item.c_str())) {
        p.segments.push_back({"", "", "New text."});
        p.pattern += letter;
        set_topic(p, p.segments.size() - 1, letter);
        ui.prompt.editing_segment = static_cast<int>(p.segments.size() - 1);
      }
    }
    ImGui::EndPopup();
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(80);
  ImGui::InputText("##pattern", &ui.prompt.pattern_edit);
  ImGui::SameLine();
  if (ImGui::Button("Apply pattern")) {
    try {
      apply_pattern(p, ui.prompt.pattern_edit);
      ui.prompt.notice = "pattern " + p.pattern;
    } catch (const std::exception& e) {
      ui.prompt.notice = e.what();
    }
  }
  ImGui::SameLine();
  if (ImGui::Button("WikiSalad...")) ImGui::OpenPopup("wikisalad");
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("load an example of a WikiSalad file as the prompt");
  if (ImGui::BeginPopup("wikisalad")) {
    ImGui::SetNextItemWidth(320);
    ImGui::InputText("file##wikisalad", &ui.prompt.wikisalad_path);
    ImGui::SetNextItemWidth(120);
    ImGui::InputInt("example", &ui.prompt.wikisalad_example, 1);
    if (ImGui::Button("Load")) {
      try {
        p = from_wikisalad(ui.prompt.wikisalad_path, ui.prompt.wikisalad_example);
        ui.prompt.notice = "WikiSalad example " + std::to_string(ui.prompt.wikisalad_example) + ": " + p.pattern;
      } catch (const std::exception& e) {
        ui.prompt.notice = e.what();
      }
      ImGui::CloseCurrentPopup();
    }
    ImGui::EndPopup();
  }
  const ImGuiStyle& style = ImGui::GetStyle();
  const float buttons = ImGui::CalcTextSize("OpenSave").x + 4 * style.FramePadding.x + 2 * style.ItemSpacing.x;
  ImGui::SetNextItemWidth(std::max(80.f, ImGui::GetContentRegionAvail().x - buttons));
  ImGui::InputTextWithHint("##promptfile", "prompt file (.json)", &ui.prompt.file);
  ImGui::SameLine();
  // "##prompt_file": the capture row above has its own Open, and two items with one ID in a
  // window share their clicks (ImGui gives the press to the first).
  if (ImGui::Button("Open##prompt_file")) {
    try {
      p = load_prompt_file(ui.prompt.file);
      ui.prompt.notice = "opened " + ui.prompt.file;
      ui.prompt.editing_segment = -1;
    } catch (const std::exception& e) {
      ui.prompt.notice = e.what();
    }
  }
  ui.mark_item_drawn("prompt_file_open");
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("open this prompt file (.json) in the builder");
  ImGui::SameLine();
  if (ImGui::Button("Save##prompt_file")) {
    try {
      save_prompt_file(p, ui.prompt.file);
      ui.prompt.notice = "saved " + ui.prompt.file;
    } catch (const std::exception& e) {
      ui.prompt.notice = e.what();
    }
  }
  ui.mark_item_drawn("prompt_file_save");
  // The last action's outcome on one line of its own, there whether or not there is one, so that
  // nothing below moves when a message comes; all of a long one in its tooltip.
  const std::string& notice = ui.prompt.notice;
  const std::string first = notice.substr(0, notice.find('\n'));
  ImGui::TextDisabled("%s", first.empty() ? " " : first.c_str());
  if (!notice.empty() && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", notice.c_str());
}

}  // namespace

void draw_segments(UiState& ui);
void run_controls(UiState& ui);
void run_settings(UiState& ui);
void capture_files(UiState& ui, const Status& s);
void replay_prompt(UiState& ui, const Status& s);

void draw_prompt_panel(UiState& ui) {
  const Status s = ui.controller.status();
  capture_files(ui, s);
  ImGui::Separator();
  // Replay: the run controls show but stay off until the replay is left.
  ui.run.locked = s.replay;
  ImGui::BeginDisabled(s.replay);
  run_controls(ui);  // near the top, so Run is always in view
  ImGui::EndDisabled();
  ImGui::Separator();
  if (s.replay) {
    replay_prompt(ui, s);
    return;
  }
  choice_radio("interwoven", ui.prompt.mode, PromptMode::kInterwoven);
  ImGui::SameLine();
  choice_radio("free text", ui.prompt.mode, PromptMode::kFreeText);
  if (ui.prompt.mode == PromptMode::kFreeText) {
    ui.prompt.shown = ui.prompt.free_text;
    ui.prompt.drawn.clear();
    // The editor holds the text as typed (ImGui neither joins Arabic letters nor lays out right to
    // left); with such text, it is also shown as it reads, read-only, underneath.
    float preview = 0;
    const float line = ImGui::GetTextLineHeightWithSpacing();
    if (viz::has_right_to_left(ui.prompt.free_text)) {
      const auto& lines = display_lines(ui.display_text, ui.prompt.free_text, ImGui::GetContentRegionAvail().x - 2 * ImGui::GetStyle().WindowPadding.x);
      preview = std::min(ImGui::GetContentRegionAvail().y / 2, line * static_cast<float>(lines.size() + 1) + 2 * ImGui::GetStyle().WindowPadding.y);
    }
    ImGui::InputTextMultiline("##free", &ui.prompt.free_text, ImVec2(-1, ImGui::GetContentRegionAvail().y - 4 - preview));
    if (preview > 0) {
      ImGui::TextDisabled("as it reads:");
      ImGui::BeginChild("##free_shown", ImVec2(0, preview - line), true);
      ui.prompt.drawn = draw_display_text(ui.display_text, ui.prompt.free_text);
      ImGui::EndChild();
    }
  } else {
    ui.prompt.shown.clear();
    ui.prompt.drawn.clear();
    for (const PromptSegment& seg : ui.prompt.interwoven.segments) ui.prompt.shown += seg.text + "\n";
    ui.prompt.shown += ui.prompt.interwoven.question;
    // The builder's title field on the mode's line, so that at 1280x800 the segments start high
    // enough for the first two to be in view without scrolling.
    ImGui::SameLine();
    draw_segments(ui);
  }
}

// [SECTION] capture files: open, save as, recent

namespace {

void open_capture_file(UiState& ui, const std::string& path) {
  if (path.empty()) return;
  ui.files.path = path;
  ui.files.open_pending = path;
  ui.controller.open_capture(path);
}

// Why the current view cannot be saved now (empty: it can).
std::string why_not_save(UiState& ui, const Status& s) {
  if (s.saving) return "a save is in progress";
  if (!ui.controller.view()) return "nothing to save: run a prompt or open a capture";
  if (s.state == RunState::kRunning && !s.replay) return "the run is computing: pause or stop it first";
  return "";
}

}  // namespace

void capture_files(UiState& ui, const Status& s) {
  // An open or save asked for earlier: once it has succeeded, its file joins the recent list.
  if (!ui.files.open_pending.empty()) {
    if (s.replay && s.capture == ui.files.open_pending) {
      ui.files.recent.add(ui.files.open_pending);
      ui.files.open_pending.clear();
    } else if (!ui.controller.busy()) {
      ui.files.open_pending.clear();  // it failed: the status line says why
    }
  }
  if (!ui.files.save_pending.empty() && !s.saving) {
    if (!s.save_failed && s.saved_path == ui.files.save_pending) ui.files.recent.add(ui.files.save_pending);
    ui.files.save_pending.clear();
  }

  const ImGuiStyle& style = ImGui::GetStyle();
  const auto button = [&](const char* label) { return ImGui::CalcTextSize(label).x + 2 * style.FramePadding.x; };
  const float recent_w = button("Recent") + ImGui::GetFrameHeight();
  const float buttons = button("Open") + button("Save as") + recent_w + 3 * style.ItemSpacing.x;
  ImGui::SetNextItemWidth(std::max(80.f, ImGui::GetContentRegionAvail().x - buttons));
  ImGui::InputTextWithHint("##capture", "capture file (.h5)", &ui.files.path);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("a capture file to open, or to save the current run or replay as");
  ImGui::SameLine();
  if (ImGui::Button("Open##capture")) open_capture_file(ui, ui.files.path);
  ui.mark_item_drawn("capture_open");
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("replay this capture file (no model needed)");
  ImGui::SameLine();
  const std::string why = why_not_save(ui, s);
  ImGui::BeginDisabled(!why.empty());
  if (ImGui::Button("Save as")) {
    std::error_code ec;
    if (std::filesystem::exists(ui.files.path, ec)) {
      ImGui::OpenPopup("replace capture");
    } else {
      ui.files.save_pending = ui.files.path;
      ui.controller.save_capture(ui.files.path);
    }
  }
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("%s", why.empty() ? "save the run or replay shown as a capture file" : why.c_str());
  if (ImGui::BeginPopup("replace capture")) {
    ImGui::Text("%s exists. Replace it?", ui.files.path.c_str());
    if (ImGui::Button("Replace")) {
      ui.files.save_pending = ui.files.path;
      ui.controller.save_capture(ui.files.path);
      ImGui::CloseCurrentPopup();
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(recent_w);
  ImGui::SetNextWindowSizeConstraints(ImVec2(320, 0), ImVec2(FLT_MAX, ImGui::GetTextLineHeightWithSpacing() * 12));
  if (ImGui::BeginCombo("##recent", "Recent")) {
    const std::vector<std::string> paths = ui.files.recent.paths();  // a copy: opening one reorders the list
    if (paths.empty()) ImGui::TextDisabled("no recent captures");
    for (std::size_t i = 0; i < paths.size(); ++i) {
      ImGui::PushID(static_cast<int>(i));
      if (ImGui::Selectable(paths[i].c_str())) open_capture_file(ui, paths[i]);
      ImGui::PopID();
    }
    if (!ui.files.recent.warning().empty()) ImGui::TextDisabled("%s", ui.files.recent.warning().c_str());
    ImGui::EndCombo();
  }
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("captures opened or saved lately");

  if (s.saving) {
    char label[48];
    std::snprintf(label, sizeof label, "saving %.0f%%", 100 * s.save_progress);
    ImGui::ProgressBar(static_cast<float>(s.save_progress), ImVec2(-button("Cancel") - style.ItemSpacing.x, 0), label);
    ImGui::SameLine();
    if (ImGui::Button("Cancel##save")) ui.controller.cancel_save();
  } else if (!s.save_message.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, s.save_failed ? ImVec4(1.f, 0.55f, 0.45f, 1.f) : ImVec4(0.7f, 0.7f, 0.7f, 1.f));
    ImGui::TextWrapped("%s", s.save_message.c_str());
    ImGui::PopStyleColor();
    if (!s.save_failed && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", s.saved_path.c_str());
  }
}

// [SECTION] replay: the capture's own prompt

namespace {

// `text` on one line: every run of spaces, tabs and line breaks one space, none at the ends.
std::string collapse_white_space(const std::string& text) {
  std::string out;
  bool space = false;
  for (const char c : text) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
      space = !out.empty();
    } else {
      if (space) out += ' ';
      space = false;
      out += c;
    }
  }
  return out;
}

}  // namespace

void replay_prompt(UiState& ui, const Status& s) {
  const std::string file = std::filesystem::path(s.capture).filename().string();
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.95f, 0.8f, 0.45f, 1.f));
  ImGui::TextWrapped("replaying %s: the run and mode controls are off", file.c_str());
  ImGui::PopStyleColor();
  if (ImGui::Button("Leave replay")) ui.controller.leave_replay();
  ImGui::SameLine();
  ImGui::TextDisabled("%s", s.model_summary.empty() ? "then load a model and press Run" : "then edit a prompt and press Run");
  const auto view = ui.controller.view();
  if (!view) return;
  const std::string ck = capture_key(view.get());
  const auto& tokens = ui.tokens.get(ui.tasks, ck, [view] { return view->tokens(); });
  const auto& segments = ui.segments.get(ui.tasks, ck, [view] { return view->segments(); });
  const std::size_t n = std::min<std::size_t>(tokens.size(), static_cast<std::size_t>(std::max<std::int64_t>(0, s.prompt_tokens)));
  ImGui::AlignTextToFramePadding();
  ImGui::Text("prompt: %zu tokens, %zu segments", n, segments.size());
  ImGui::SameLine();
  ImGui::Checkbox("full text", &ui.prompt.replay_full_text);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("each run of the prompt in full (off: at most %zu lines each; hover a run for all of it)", PromptPanel::kReplayRunLines);
  // The prompt in order, in runs of tokens of one segment: a segment's run under its colour and
  // label, the tokens outside segments (chat template, question) dimmed. Each run at most a few
  // lines unless "full text" is on, so the segments of a long prompt stay in view together.
  const std::size_t max_lines = ui.prompt.replay_full_text ? 0 : PromptPanel::kReplayRunLines;
  std::string shown, drawn;
  // At least a few lines tall: in a short panel the panel scrolls rather than the prompt vanishing.
  ImGui::BeginChild("##capture_prompt", ImVec2(0, std::max(ImGui::GetContentRegionAvail().y, 8 * ImGui::GetTextLineHeightWithSpacing())), false);
  const auto run_text = [&](const std::string& text, const char* title) {
    // Compact, a run's line breaks read as spaces, and a run of only white space (the breaks
    // between segments) is left out.
    const std::string compact = max_lines ? collapse_white_space(text) : text;
    if (compact.empty()) return;
    ImGui::BeginGroup();
    bool clipped = false;
    drawn += draw_display_text(ui.display_text, compact, max_lines, &clipped) + "\n";
    ImGui::EndGroup();
    if (clipped && ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      if (title) ImGui::TextUnformatted(title);
      const float width = 36 * ImGui::GetFontSize();
      for (const viz::VisualLine& line : display_lines(ui.display_text, text, width)) ImGui::TextUnformatted(line.text.c_str());
      ImGui::EndTooltip();
    }
  };
  for (std::size_t i = 0; i < n;) {
    const std::int32_t seg = tokens[i].segment;
    std::string text;
    std::size_t j = i;
    for (; j < n && tokens[j].segment == seg; ++j) text += tokens[j].piece;
    shown += text;
    if (seg >= 0 && static_cast<std::size_t>(seg) < segments.size()) {
      const capture::Segment& g = segments[static_cast<std::size_t>(seg)];
      const ImVec2 pos = ImGui::GetCursorScreenPos();
      ImGui::GetWindowDrawList()->AddRectFilled(pos, ImVec2(pos.x + 10, pos.y + 14), parse_colour(g.colour));
      ImGui::Dummy(ImVec2(12, 14));
      ImGui::SameLine();
      // The label shortened (ending in an ellipsis) until the token range fits beside it.
      char range[64];
      std::snprintf(range, sizeof range, "  tokens %zu-%zu", i, j - 1);
      const float room = ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize(range).x;
      const std::string full = token_label(g.label);
      std::string label = full;
      if (ImGui::CalcTextSize(full.c_str()).x > room) {
        // The most characters that fit, by bisection: a few label builds a frame, not one per character.
        std::size_t fits = 2, wide = full.size();
        while (wide - fits > 1) {
          const std::size_t mid = (fits + wide) / 2;
          (ImGui::CalcTextSize(token_label(g.label, mid).c_str()).x > room ? wide : fits) = mid;
        }
        label = token_label(g.label, fits);
      }
      ImGui::TextUnformatted((label + range).c_str());
      run_text(text, (full + range).c_str());
    } else {
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
      run_text(text, nullptr);
      ImGui::PopStyleColor();
    }
    i = j;
  }
  ImGui::EndChild();
  ui.prompt.shown = shown;
  ui.prompt.drawn = drawn;
}

void draw_segments(UiState& ui) {
  builder(ui);
  InterwovenPrompt& p = ui.prompt.interwoven;
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
    // The text wrapped to the panel; a click on it edits it (ImGui's editor does not wrap lines).
    if (ui.prompt.editing_segment == static_cast<int>(i)) {
      ImGui::SameLine();
      if (ImGui::SmallButton("done")) ui.prompt.editing_segment = -1;
      ImGui::InputTextMultiline("##text", &seg.text, ImVec2(-1, ImGui::GetTextLineHeight() * 5));
    } else {
      ImGui::TextWrapped("%s", seg.text.empty() ? "(empty: click to write)" : seg.text.c_str());
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("click to edit");
      if (ImGui::IsItemClicked()) ui.prompt.editing_segment = static_cast<int>(i);
    }
    ImGui::PopID();
  }
  if (up < p.segments.size()) {
    std::swap(p.segments[up], p.segments[up - 1]);
    std::swap(p.pattern[up], p.pattern[up - 1]);
    ui.prompt.editing_segment = -1;
  }
  if (remove < p.segments.size()) {
    p.segments.erase(p.segments.begin() + static_cast<std::ptrdiff_t>(remove));
    p.pattern.erase(remove, 1);
    ui.prompt.editing_segment = -1;
  }
  ImGui::TextUnformatted("question");
  // The topic the question asks about: the Topics tab measures decode leakage against it.
  {
    std::string letters;
    for (const char c : p.pattern)
      if (letters.find(c) == std::string::npos) letters += c;
    if (p.question_topic != 0 && letters.find(p.question_topic) == std::string::npos) p.question_topic = 0;
    const std::string shown = p.question_topic != 0 ? std::string("about ") + p.question_topic : "about: last";
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ImGui::CalcTextSize("about: last").x + ImGui::GetFrameHeight() + 2 * ImGui::GetStyle().FramePadding.x);
    if (ImGui::BeginCombo("##question_topic", shown.c_str())) {
      if (ImGui::Selectable("the last segment's topic", p.question_topic == 0)) p.question_topic = 0;
      for (const char c : letters) {
        const std::size_t i = p.pattern.find(c);
        const std::string item = std::string(1, c) + " " + (i < p.segments.size() ? p.segments[i].label : std::string());
        if (ImGui::Selectable(item.c_str(), p.question_topic == c)) p.question_topic = c;
      }
      ImGui::EndCombo();
    }
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("the topic the question asks about: the Topics tab measures decode leakage against it\n"
                        "(saved in the prompt file as question_topic; default: the last segment's topic)");
  }
  // The query-agnostic box goes on the question's line when it fits there.
  const char* const agnostic = "context first (query-agnostic)";
  ImGui::SameLine();
  if (ImGui::GetContentRegionAvail().x < ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(agnostic).x)
    ImGui::NewLine();
  ImGui::Checkbox(agnostic, &ui.prompt.query_agnostic);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Prefill the segments before the question, as kvpress evaluates: a press layer compresses\n"
                      "the context alone, and the question attends only to what it kept.");
  ImGui::InputTextMultiline("##question", &ui.prompt.interwoven.question, ImVec2(-1, ImGui::GetTextLineHeight() * 2));
}

void run_controls(UiState& ui) {
  const Status s = ui.controller.status();
  // Replay: only the buttons, off, so that the capture's prompt below has the room. Otherwise the
  // settings fold under one line that sums them up, so the prompt's segments stay in view.
  if (!s.replay) {
    const SamplingParams& sp = ui.run.sampling;
    char sampling[96] = "greedy";
    if (sp.temperature > 0)
      std::snprintf(sampling, sizeof sampling, "T %.2f, top-k %d, top-p %.2f, seed %llu", static_cast<double>(sp.temperature),
                    sp.top_k, static_cast<double>(sp.top_p), static_cast<unsigned long long>(sp.seed));
    char head[160];
    std::snprintf(head, sizeof head, "run settings: %d new tokens, %s%s###run_settings", ui.run.max_new_tokens, sampling,
                  ui.prompt.chat ? ", chat" : "");
    if (ImGui::CollapsingHeader(head)) run_settings(ui);
  }
  const bool running = s.state == RunState::kRunning || s.state == RunState::kPaused;
  const bool can_run = !running && s.state != RunState::kLoading && !s.model_summary.empty();
  ImGui::BeginDisabled(!can_run);
  const auto request = [&](bool paused, bool force) { return run_request(ui, paused, force); };
  if (ImGui::Button("Run")) ui.controller.run(request(false, false));
  ImGui::SameLine();
  if (ImGui::Button("Run paused")) ui.controller.run(request(true, false));
  ImGui::EndDisabled();
  // A run refused for memory or disk: the numbers are in the status line; offer the ways out.
  if (s.refused_for_resources && can_run) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.f, 0.75f, 0.45f, 1.f));
    ImGui::TextWrapped("%s", s.message.c_str());
    ImGui::PopStyleColor();
    if (ImGui::Button("Run anyway")) ui.controller.run(request(false, true));
    ImGui::SameLine();
    if (ImGui::Button("Record every 4th layer")) {
      std::string layers;
      for (std::size_t l = 0; l < ui.controller.config().layers.size(); l += 4) layers += (layers.empty() ? "" : ",") + std::to_string(l);
      ui.run.record = "layers=" + layers;
      ui.controller.run(request(false, false));
    }
    ImGui::SameLine();
    if (ImGui::Button("Maps up to 1024")) {
      ui.run.record = "map_cap=1024";
      ui.controller.run(request(false, false));
    }
  }
  ImGui::SameLine();
  ImGui::BeginDisabled(!running);
  if (s.state == RunState::kPaused) {
    if (ImGui::Button("Resume")) ui.controller.resume();
  } else if (ImGui::Button("Pause")) {
    ui.controller.pause();
  }
  ImGui::SameLine();
  if (ImGui::Button("Step")) ui.controller.step();
  ImGui::SameLine();
  if (ImGui::Button("Stop")) ui.controller.stop();
  ImGui::EndDisabled();
}

// Chat formatting, the number of new tokens and sampling.
void run_settings(UiState& ui) {
  ImGui::Checkbox("chat format", &ui.prompt.chat);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(120);
  ImGui::SliderInt("new tokens", &ui.run.max_new_tokens, 2, 256);

  // Sampling: greedy at temperature 0.
  ImGui::SetNextItemWidth(90);
  ImGui::InputFloat("temp", &ui.run.sampling.temperature, 0.1f, 0.5f, "%.2f");
  ui.run.sampling.temperature = std::max(0.f, ui.run.sampling.temperature);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(70);
  ImGui::InputInt("top-k", &ui.run.sampling.top_k, 0);
  ui.run.sampling.top_k = std::max(0, ui.run.sampling.top_k);
  ImGui::SetNextItemWidth(90);
  ImGui::SliderFloat("top-p", &ui.run.sampling.top_p, 0.05f, 1.f, "%.2f");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(70);
  int seed = static_cast<int>(ui.run.sampling.seed);
  if (ImGui::InputInt("seed", &seed, 0)) ui.run.sampling.seed = static_cast<std::uint64_t>(std::max(0, seed));
  ImGui::SetNextItemWidth(180);
  ImGui::InputTextWithHint("record", "all layers, maps to 4096", &ui.run.record);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("what the run records, as luka capture --record: e.g. layers=0-7;map_cap=1024 (empty: every layer and head)");
}

}  // namespace luka::studio
