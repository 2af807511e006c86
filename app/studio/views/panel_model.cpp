// Model panel: the checkpoint or GGUF file, the device (auto, cpu or a listed GPU), compute dtype
// and threads, load and status.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>

#include "app/studio/views/choice_widgets.h"
#include "app/studio/views/ui_state.h"
#include "core/device/device.h"
#include "core/model/dtype.h"

namespace luka::studio {

DeviceChoices list_devices() {
  DeviceChoices c;
  c.values = {"auto", "cpu"};
  c.labels = {"auto", "cpu"};
  std::string why;
  for (const GpuInfo& g : list_gpus(&why)) {
    c.values.push_back("cuda:" + std::to_string(g.index));
    c.labels.push_back(describe(g));
  }
  if (c.values.size() == 2) c.note = why;
  return c;
}

void draw_model_panel(UiState& ui) {
  const Status s = ui.controller.status();
  ImGui::InputText("##model", &ui.model.path);
  ImGui::SameLine();
  const bool busy = ui.controller.busy();
  ImGui::BeginDisabled(busy);
  if (ImGui::Button("Load")) {
    ui.controller.load_model(ui.model.path, load_options(ui), parse_device(ui.model.device));
  }
  ImGui::EndDisabled();
  // Device: auto and cpu at once, the GPUs once the plugin has listed them.
  const DeviceChoices& d = ui.model.devices.get(ui.tasks, "gpus", [] { return list_devices(); }, "listing the GPUs");
  std::vector<std::string> values = d.values.empty() ? std::vector<std::string>{"auto", "cpu"} : d.values;
  std::vector<std::string> labels = d.labels.empty() ? std::vector<std::string>{"auto", "cpu"} : d.labels;
  if (std::find(values.begin(), values.end(), ui.model.device) == values.end()) {  // --device cuda:N before the list is in
    values.push_back(ui.model.device);
    labels.push_back(ui.model.device);
  }
  ImGui::SetNextItemWidth(240);
  const std::size_t chosen = static_cast<std::size_t>(std::find(values.begin(), values.end(), ui.model.device) - values.begin());
  if (ImGui::BeginCombo("device", labels[chosen].c_str())) {
    for (std::size_t i = 0; i < values.size(); ++i)
      if (ImGui::Selectable(labels[i].c_str(), i == chosen)) ui.model.device = values[i];
    ImGui::EndCombo();
  }
  if (!d.note.empty() && ImGui::IsItemHovered()) ImGui::SetTooltip("no GPU listed: %s", d.note.c_str());
  ImGui::SetNextItemWidth(80);
  static const char* kDtypes[] = {"fp32", "bf16", "fp16"};
  choice_combo("dtype", ui.model.dtype, kDtypes);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(90);
  ImGui::InputInt("threads (0: all)", &ui.model.threads);
  ui.model.threads = std::max(0, std::min(ui.model.threads, 256));
  ImGui::SetNextItemWidth(120);
  static const char* kWeights[] = {"dequantized", "quantized", "auto"};
  choice_combo("weights", ui.model.weights, kWeights);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("a GGUF file's linear weights at the next Load: quantized keeps only their GGUF blocks, read as\n"
                      "stored (8-bit activations in decode steps); dequantized decodes them into the dtype, the exact\n"
                      "reference; auto is quantized for such a file on the CPU (luka info shows both footprints)");
  // The summary and the status wrap: a load error is read whole, not cut at the panel's edge.
  ImGui::TextWrapped("%s", s.model_summary.empty() ? "no model loaded" : s.model_summary.c_str());
  if (!s.device.empty() && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", s.device.c_str());
  // Red for an error, also one that left no model (a failed load): "[no model] PATH: no such file".
  const bool failed = s.state == RunState::kError || (!s.error.empty() && s.message == s.error);
  const std::string state = std::string("[") + to_string(s.state) + "]", status = state + " " + s.message;
  // A run's or a load's progress: a thin bar, and its status as wrapped text under it (in a bar
  // the text was cut at the bar's end, and read poorly over the fill).
  if (s.state == RunState::kRunning || s.state == RunState::kPaused || s.state == RunState::kLoading) {
    const bool loading = s.state == RunState::kLoading;
    const float done = s.steps_total > 0 ? static_cast<float>(s.steps_done) / static_cast<float>(s.steps_total) : 0.f;
    const float f = loading ? -0.3f * static_cast<float>(ImGui::GetTime()) : done;
    ImGui::ProgressBar(f, ImVec2(-1, 5), "");
    const std::string label =
        loading ? status : status + " (" + std::to_string(s.steps_done) + " / " + std::to_string(s.steps_total) + " steps)";
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.9f, 0.9f, 0.92f, 1));
    ImGui::TextWrapped("%s", label.c_str());
    ImGui::PopStyleColor();
  } else {
    ImGui::Dummy(ImVec2(1, 5));  // where the bar is while a run or load goes: the panel keeps its height
    ImGui::PushStyleColor(ImGuiCol_Text, failed ? ImVec4(0.9f, 0.3f, 0.3f, 1) : ImVec4(0.7f, 0.7f, 0.7f, 1));
    ImGui::TextWrapped("%s", status.c_str());
    ImGui::PopStyleColor();
  }
  const ImVec2 t0 = ImGui::GetItemRectMin(), t1 = ImGui::GetItemRectMax();
  ui.mark_drawn("model_status", t0.x, t0.y, t1.x, t1.y, state + (failed ? " red" : ""));
  if (s.state == RunState::kLoading) {
    ImGui::SameLine();
    if (ImGui::SmallButton("Cancel")) ui.controller.cancel_load();
  }
  {
    const ImVec2 w0 = ImGui::GetWindowPos(), c0 = ImGui::GetWindowContentRegionMin(), c1 = ImGui::GetWindowContentRegionMax();
    ui.mark_drawn("model_panel", w0.x + c0.x, w0.y + c0.y, w0.x + c1.x, w0.y + c1.y);  // its content region
  }
  // The height the next frame gives the panel: all of this, and the window's bottom padding.
  ui.window.model_height = ImGui::GetCursorPosY() - ImGui::GetStyle().ItemSpacing.y + ImGui::GetStyle().WindowPadding.y;
}

}  // namespace luka::studio
