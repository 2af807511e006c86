// The heatmap panel's compare (heatmap_canvas.h): the compare box, B's capture opened on the I/O
// lane or run again from A's tokens, and the right canvas kept aligned with the left.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "app/figures/capture_figure.h"
#include "app/studio/views/choice_widgets.h"
#include "app/studio/data/method_presets.h"
#include "app/studio/views/ui_state.h"
#include "captures/reader.h"
#include "core/luka/config.h"
#include "core/util/error.h"
#include "viz/heatmap.h"
#include "viz/state_colours.h"
#include "app/studio/views/heatmap_canvas.h"

namespace luka::studio::heatmap {

// The right canvas follows the left: the same window, layout, view and marks.
void copy_view(const HeatmapView& from, HeatmapView& to) {
  to.x0 = from.x0;
  to.y0 = from.y0;
  to.tokens_per_pixel = from.tokens_per_pixel;
  to.tokens_per_pixel_y = from.tokens_per_pixel_y;
  to.fitted = from.fitted;
  to.layout = from.layout;
  to.rows_x0 = from.rows_x0;
  to.rows_keys_per_pixel = from.rows_keys_per_pixel;
  to.rows_y0 = from.rows_y0;
  to.row_px = from.row_px;
  to.rows_follow = from.rows_follow;
  to.rows_fitted = from.rows_fitted;
  to.log_scale = from.log_scale;
  to.log_min = from.log_min;
  to.view = from.view;
  to.overlays = from.overlays;
  to.found = from.found;
}

// "compare": a second capture beside the map, or the difference of the two. B is a capture file,
// or a second run of A's tokens under another config (Run B), shown as it computes.
void compare_box(UiState& ui) {
  CompareState& c = ui.compare;
  const Status st = ui.controller.status();
  if (const auto b = ui.controller.compare_view(); b && b != c.adopted) {
    c.adopted = b;
    c.adopted_for = ui.controller.view();
    c.view = b;
    c.path.clear();
    c.note = st.compare.label + " (A's tokens)";
    ui.heatmap.fit();
    c.map.fit();
  }
  if (c.view && c.view == c.adopted && ui.controller.view() != c.adopted_for) {  // a new A: B ran other tokens
    c.view.reset();
    c.note.clear();
    ui.heatmap.fit();
  }
  ImGui::SetNextItemWidth(150);
  const bool enter = ImGui::InputTextWithHint("##compare", "compare with .h5", &c.path, ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if (ImGui::Button(c.view ? "Close" : "Compare") || enter) {
    if (c.view && !enter) c.path.clear();
    open_compare(ui);
  }
  ImGui::SameLine();
  ImGui::BeginDisabled(st.compare.running);
  if (ImGui::Button("Run B")) ImGui::OpenPopup("run_b");
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("B: the prompt and A's generated tokens run again under another config,\n"
                      "so both maps attend from the same queries and differ by their attention alone");
  if (ImGui::BeginPopup("run_b")) {
    ImGui::TextDisabled("run A's tokens again under");
    for (const std::string& choice : compare_choices(ui))
      if (ImGui::Selectable(choice.c_str())) run_compare(ui, choice);
    ImGui::EndPopup();
  }
  if (c.view) {
    ImGui::SameLine();
    ImGui::Checkbox("B-A", &c.difference);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("the right canvas shows B - A: red where B attends more, blue where A does");
  }
  if (st.compare.running) {
    ImGui::SameLine();
    ImGui::TextDisabled("B: step %lld/%lld", static_cast<long long>(st.compare.steps_done), static_cast<long long>(st.compare.steps_total));
  } else if (st.compare.failed) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(1.f, 0.5f, 0.5f, 1.f), "%s", st.compare.message.c_str());
  } else if (!c.view && !c.note.empty()) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(1.f, 0.5f, 0.5f, 1.f), "%s", c.note.c_str());
  }
}

}  // namespace luka::studio::heatmap

namespace luka::studio {

std::vector<std::string> compare_choices(const UiState& ui) {
  std::vector<std::string> v = {"layers panel", "dense", "lined", "clustered", "paper", "kascade", "semanticache"};
  for (const MethodPreset& m : method_presets()) v.push_back(m.name);
  v.push_back("mixed(" + std::to_string(ui.layers.mixed_a) + "," + std::to_string(ui.layers.mixed_b) + ")");
  return v;
}

void run_compare(UiState& ui, const std::string& choice) {
  const LukaConfig current = ui.controller.config();
  LukaConfig cfg = current;
  if (choice != "layers panel") {
    try {
      cfg = LukaConfig::preset(choice, static_cast<std::int64_t>(current.layers.size()));
    } catch (const std::exception& e) {
      ui.notice = e.what();
      return;
    }
  }
  ui.controller.run_compare(cfg, choice == "layers panel" ? describe_modes(cfg) : choice);
}

void open_compare(UiState& ui) {
  CompareState& c = ui.compare;
  ui.heatmap.fit();  // the map's canvas changes width
  c.map.fit();
  c.view.reset();
  c.note.clear();
  c.opening.cancel();
  c.opening = {};
  if (c.path.find_first_not_of(' ') == std::string::npos) return;
  // Opened on the I/O lane, not here: the UI keeps drawing (take_compare takes the outcome).
  c.note = "opening " + std::filesystem::path(c.path).filename().string() + "...";
  TaskOptions io;
  io.lane = "io";
  const std::string path = c.path;
  c.opening.start(ui.tasks, "opening B: " + std::filesystem::path(path).filename().string(),
                  [path] { return std::shared_ptr<const capture::CaptureView>(capture::CaptureFile::open(path)); }, io);
}

void take_compare(UiState& ui) {
  CompareState& c = ui.compare;
  if (auto r = c.opening.take()) {
    if (r->value) {
      c.view = std::move(*r->value);
      c.note = std::filesystem::path(c.path).filename().string();
    } else {
      c.note = r->cancelled ? "" : r->error;
    }
  }
}

}  // namespace luka::studio
