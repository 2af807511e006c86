#include "app/studio/views/ui_state.h"

#include <imgui.h>

#include <algorithm>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "app/studio/views/emoji_glyphs.h"
#include "core/util/text_file.h"
#include "viz/token_text.h"

namespace luka::studio {

bool background_idle(const UiState& ui) { return ui.tasks.unfinished() == ui.tasks.unfinished(kModelLane); }

std::string capture_key(const capture::CaptureView* view) {
  if (!view) return "none";
  const capture::Summary s = view->summary();
  return std::to_string(reinterpret_cast<std::uintptr_t>(view)) + "/" + std::to_string(s.complete_steps) + "/" +
         std::to_string(s.num_tokens) + "/" + std::to_string(s.finished);
}

std::string token_label(const std::string& piece, std::size_t max_chars) {
  viz::TokenTextOptions o;
  o.max_chars = max_chars;
  o.max_code_point = IM_UNICODE_CODEPOINT_MAX;  // 0xFFFF: Debian's Dear ImGui has 16-bit ImWchar
  o.substitutes = &emoji_substitutes();          // but the emoji the atlas holds at private-use points
  o.visual_order = true;  // ImGui neither shapes Arabic nor lays out right-to-left text
  return viz::token_text(piece, o);
}

namespace {

viz::TokenTextOptions display_options() {
  viz::TokenTextOptions o;
  o.max_code_point = IM_UNICODE_CODEPOINT_MAX;
  o.substitutes = &emoji_substitutes();
  return o;
}

}  // namespace

const std::vector<viz::VisualLine>& display_lines(DisplayTextCache& cache, const std::string& text, float width) {
  const std::pair<int, std::string> key(static_cast<int>(width), text);
  if (const auto it = cache.lines.find(key); it != cache.lines.end()) return it->second;
  if (cache.lines.size() > 256) cache.lines.clear();  // texts of runs and widths gone by
  const auto measure = [](std::string_view s) { return ImGui::CalcTextSize(s.data(), s.data() + s.size()).x; };
  return cache.lines[key] = viz::display_lines(text, measure, static_cast<float>(key.first), display_options());
}

std::string draw_display_text(DisplayTextCache& cache, const std::string& text) { return draw_display_text(cache, text, 0, nullptr); }

std::string draw_display_text(DisplayTextCache& cache, const std::string& text, std::size_t max_lines, bool* clipped) {
  const float width = std::max(1.f, ImGui::GetContentRegionAvail().x);
  const std::vector<viz::VisualLine>& lines = display_lines(cache, text, width);
  const bool clip = max_lines > 0 && lines.size() > max_lines;
  if (clipped) *clipped = clip;
  const std::size_t n = clip ? max_lines : lines.size();
  std::string drawn;
  for (std::size_t i = 0; i < n; ++i) {
    std::string line = lines[i].text;
    if (clip && i + 1 == n) {
      // The ellipsis at the line's reading end; characters come off that end until it fits.
      static const std::string kEllipsis = "\xE2\x80\xA6";
      const auto with_ellipsis = [&] { return lines[i].right_to_left ? kEllipsis + " " + line : line + " " + kEllipsis; };
      while (!line.empty() && ImGui::CalcTextSize(with_ellipsis().c_str()).x > width) {
        if (lines[i].right_to_left) {
          std::size_t k = 1;
          while (k < line.size() && (static_cast<unsigned char>(line[k]) & 0xC0) == 0x80) ++k;
          line.erase(0, k);
        } else {
          std::size_t k = line.size() - 1;
          while (k > 0 && (static_cast<unsigned char>(line[k]) & 0xC0) == 0x80) --k;
          line.erase(k);
        }
      }
      line = with_ellipsis();
    }
    if (lines[i].right_to_left) {
      const float w = ImGui::CalcTextSize(line.c_str()).x;
      ImGui::SetCursorPosX(ImGui::GetCursorPosX() + std::max(0.f, width - w));
    }
    ImGui::TextUnformatted(line.c_str());
    drawn += (i ? "\n" : "") + line;
  }
  return drawn;
}

void UiState::mark_item_drawn(const std::string& name) {
  const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
  mark_drawn(name, a.x, a.y, b.x, b.y);
}

void UiState::mark_drawn(const std::string& name, float x0, float y0, float x1, float y1, std::string text) {
  drawn[name] = {x0, y0, x1, y1, ImGui::GetFrameCount(), std::move(text)};
}

LoadOptions load_options(const UiState& ui) {
  LoadOptions o;
  o.dtype = ui.model.dtype;
  o.threads = ui.model.threads;
  o.weights = ui.model.weights;
  return o;
}

RunRequest run_request(const UiState& ui, bool paused, bool force) {
  RunRequest r;
  r.prompt = ui.prompt.interwoven;
  r.chat = ui.prompt.chat;
  r.query_agnostic = ui.prompt.query_agnostic && ui.prompt.mode == PromptMode::kInterwoven;
  r.max_new_tokens = ui.run.max_new_tokens;
  r.start_paused = paused;
  r.sampling = ui.run.sampling;
  if (ui.prompt.mode == PromptMode::kFreeText) r.free_text = ui.prompt.free_text;
  r.record = ui.run.record;
  r.force = force;
  r.calibration = ui.run.calibration;
  return r;
}

void attach_calibration(UiState& ui, const std::filesystem::path& file) {
  const std::string text = read_text_file(file, "calibration file");
  eval::parse_calibration(text, file.string());
  ui.run.calibration = nlohmann::json::parse(text).dump();
  ui.run.calibration_path = file.string();
}

std::shared_ptr<const eval::Calibration> view_calibration(UiState& ui, const capture::CaptureView& view) {
  // The manifest never changes while a capture grows: the view, its creation time and the text's
  // length name it (capture_key would parse again at every step).
  const capture::Summary sum = view.summary();  // by value
  const capture::Manifest& m = sum.manifest;
  const std::string key = std::to_string(reinterpret_cast<std::uintptr_t>(&view)) + "/" + m.created + "/" + std::to_string(m.calibration.size());
  if (key != ui.analysis.calibration_of) {
    ui.analysis.calibration_of = key;
    ui.analysis.calibration_table.reset();
    ui.analysis.calibration_error.clear();
    const std::string& text = m.calibration;
    if (!text.empty()) {
      try {
        ui.analysis.calibration_table = std::make_shared<const eval::Calibration>(eval::parse_calibration(text, "the capture's calibration"));
      } catch (const std::exception& e) {
        ui.analysis.calibration_error = e.what();
      }
    }
  }
  return ui.analysis.calibration_table;
}

void set_track(UiState& ui, const capture::CaptureView& view) {
  ui.timeline.track.reset();
  ui.timeline.track_note.clear();
  if (ui.timeline.track_spec.find_first_not_of(' ') == std::string::npos) return;
  try {
    ui.timeline.track = capture::parse_track(ui.timeline.track_spec, view.tokens(), view.segments());
    ui.timeline.track_note = "tokens " + std::to_string(ui.timeline.track->begin) + "-" + std::to_string(ui.timeline.track->end - 1);
  } catch (const std::exception& e) {
    ui.timeline.track_note = e.what();
  }
}

std::int64_t find_token(const std::vector<capture::Token>& tokens, const std::string& text, std::int64_t after) {
  if (text.empty() || tokens.empty()) return -1;
  const auto lower = [](std::string s) {
    for (char& c : s)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return s;
  };
  const std::string needle = lower(text);
  const auto n = static_cast<std::int64_t>(tokens.size());
  for (std::int64_t k = 1; k <= n; ++k) {
    const std::int64_t i = ((after + k) % n + n) % n;
    if (lower(token_label(tokens[static_cast<std::size_t>(i)].piece)).find(needle) != std::string::npos) return i;
  }
  return -1;
}

}  // namespace luka::studio
