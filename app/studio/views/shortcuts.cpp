// Keyboard shortcuts. Printable keys are read as typed characters (so "?" and "[" follow the
// keyboard layout), the others as GLFW key codes: Dear ImGui 1.86 indexes io.KeysDown by the
// backend's key codes.
#include "app/studio/views/shortcuts.h"

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <vector>

#include "app/figures/capture_figure.h"
#include "core/util/error.h"

namespace luka::studio {

namespace {

// Keys pressed by press_key(), released after the frame that sees them.
std::vector<int>& injected_keys() {
  static std::vector<int> keys;
  return keys;
}

// Keys released after the last frame: no frame has seen them up yet.
std::vector<int>& released_keys() {
  static std::vector<int> keys;
  return keys;
}

struct NamedKey {
  const char* name;
  int code;
};
constexpr NamedKey kNamedKeys[] = {{"space", GLFW_KEY_SPACE}, {"f1", GLFW_KEY_F1},     {"escape", GLFW_KEY_ESCAPE}, {"up", GLFW_KEY_UP},
                                   {"down", GLFW_KEY_DOWN},   {"left", GLFW_KEY_LEFT}, {"right", GLFW_KEY_RIGHT}};

// The selectable layers or heads: those the capture recorded, else (layers, no capture yet)
// every layer of the config.
std::vector<int> choices(const UiState& ui, bool layers) {
  if (const auto view = ui.controller.view()) {
    const capture::Layout lay = view->summary().layout;
    std::vector<int> v = layers ? lay.layers : lay.heads;
    std::sort(v.begin(), v.end());
    return v;
  }
  std::vector<int> v;
  if (layers)
    for (int l = 0; l < static_cast<int>(ui.controller.config().layers.size()); ++l) v.push_back(l);
  return v;
}

// The next (dir > 0) or previous choice after `current`; stays at the ends.
int neighbour(const std::vector<int>& sorted, int current, int dir) {
  if (sorted.empty()) return current;
  if (dir > 0) {
    const auto it = std::upper_bound(sorted.begin(), sorted.end(), current);
    return it == sorted.end() ? sorted.back() : *it;
  }
  const auto it = std::lower_bound(sorted.begin(), sorted.end(), current);
  return it == sorted.begin() ? sorted.front() : *(it - 1);
}

// Run, pause or resume, as the prompt panel's Run / Pause / Resume buttons (whichever is offered).
void run_or_pause(UiState& ui) {
  const Status s = ui.controller.status();
  if (s.state == RunState::kPaused) {
    ui.controller.resume();
  } else if (s.state == RunState::kRunning) {
    ui.controller.pause();
  } else if (s.state != RunState::kLoading && !s.model_summary.empty() && !s.replay) {
    ui.controller.run(run_request(ui, false));
  }
}

void step(UiState& ui) {
  const RunState s = ui.controller.status().state;
  if (s == RunState::kRunning || s == RunState::kPaused) ui.controller.step();
}

void set_view(UiState& ui, figures::MapView v) { ui.heatmap.view = v; }

// One shortcut: the keys that trigger it (a GLFW key code, or typed characters), what the help
// overlay says, and the action. The overlay is drawn from this table, so it cannot go stale.
struct Shortcut {
  int code;           // GLFW key code, or 0
  const char* chars;  // typed characters that trigger it, or ""
  const char* keys;   // as the help lists them
  const char* what;
  void (*act)(UiState&);
};

const Shortcut kShortcuts[] = {
    {GLFW_KEY_SPACE, "", "Space", "run / pause / resume", run_or_pause},
    {0, "sS", "S", "one decode step (pauses a run)", step},
    {GLFW_KEY_DOWN, "]", "Down  ]", "next layer", [](UiState& ui) { ui.selection.layer = neighbour(choices(ui, true), ui.selection.layer, +1); }},
    {GLFW_KEY_UP, "[", "Up  [", "previous layer", [](UiState& ui) { ui.selection.layer = neighbour(choices(ui, true), ui.selection.layer, -1); }},
    {GLFW_KEY_RIGHT, ".", "Right  .", "next head", [](UiState& ui) { ui.selection.head = neighbour(choices(ui, false), ui.selection.head, +1); }},
    {GLFW_KEY_LEFT, ",", "Left  ,", "previous head", [](UiState& ui) { ui.selection.head = neighbour(choices(ui, false), ui.selection.head, -1); }},
    {0, "lL", "L", "log / linear colour scale", [](UiState& ui) { ui.heatmap.log_scale = !ui.heatmap.log_scale; }},
    {0, "1", "1", "effective view", [](UiState& ui) { set_view(ui, figures::MapView::kEffective); }},
    {0, "2", "2", "dense view", [](UiState& ui) { set_view(ui, figures::MapView::kDense); }},
    {0, "3", "3", "difference view", [](UiState& ui) { set_view(ui, figures::MapView::kDifference); }},
    {0, "fF", "F", "fit the map to the panel", [](UiState& ui) { ui.heatmap.fit(); }},
    {GLFW_KEY_F1, "?", "F1  ?", "show / hide this help", [](UiState& ui) { ui.window.show_shortcuts = !ui.window.show_shortcuts; }},
    {GLFW_KEY_ESCAPE, "", "Esc", "close this help", [](UiState& ui) { ui.window.show_shortcuts = false; }},
};

void draw_help(UiState& ui) {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.5f), ImGuiCond_Always,
                          ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowBgAlpha(0.96f);
  static bool was_open = false;  // brought to the front when it opens, not every frame
  if (!was_open) ImGui::SetNextWindowFocus();
  was_open = true;
  bool open = true;
  if (ImGui::Begin("Keyboard shortcuts", &open,
                   ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings)) {
    if (ImGui::BeginTable("keys", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
      for (const Shortcut& s : kShortcuts) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(s.keys);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(s.what);
      }
      ImGui::EndTable();
    }
    ImGui::TextDisabled("Keys do nothing while a text field is being edited.");
  }
  ImGui::End();
  if (!open) ui.window.show_shortcuts = false;
  was_open = ui.window.show_shortcuts;
}

}  // namespace

void update_shortcuts(UiState& ui) {
  ImGuiIO& io = ImGui::GetIO();
  if (!io.WantTextInput && !io.KeyCtrl && !io.KeyAlt && !io.KeySuper) {
    for (const Shortcut& s : kShortcuts) {
      bool pressed = s.code != 0 && ImGui::IsKeyPressed(s.code, false);
      for (const ImWchar c : io.InputQueueCharacters)
        for (const char* k = s.chars; *k; ++k) pressed |= c == static_cast<ImWchar>(*k);
      if (pressed) s.act(ui);
    }
  }
  for (const int code : injected_keys()) io.KeysDown[code] = false;
  released_keys().swap(injected_keys());
  injected_keys().clear();
  if (ui.window.show_shortcuts) draw_help(ui);
}

bool press_key(const std::string& name) {
  ImGuiIO& io = ImGui::GetIO();
  for (const NamedKey& k : kNamedKeys)
    if (name == k.name) {
      const std::vector<int>& released = released_keys();
      if (std::find(released.begin(), released.end(), k.code) != released.end()) return false;
      io.KeysDown[k.code] = true;
      injected_keys().push_back(k.code);
      return true;
    }
  if (name.size() == 1 && name[0] > ' ' && name[0] < 0x7F) {
    io.AddInputCharacter(static_cast<unsigned>(name[0]));
    return true;
  }
  fail("key", "unknown key '" + name + "' (space, f1, escape, up, down, left, right, or one printable character)");
}

}  // namespace luka::studio
