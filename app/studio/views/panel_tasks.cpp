// The list of background work: every listed task (app/studio/data/tasks.h) that has been waiting or
// running for longer than 0.2 s, newest last, with its progress (a bar when it can tell how far it
// is, a moving block when it cannot) and Cancel. It sits in the window's bottom-right corner over
// the panels, and only while there is such work, so the layout never moves for it. The model's
// load and run, and a save, show their progress where they were started instead.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "app/studio/views/ui_state.h"

namespace luka::studio {
namespace {

constexpr double kShowAfter = 0.2;  // seconds: quicker work never flashes up
constexpr float kBarWidth = 240;

// A progress bar: filled to `fraction`, or (fraction < 0) a block sliding along it.
void bar(double fraction, const std::string& label) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float h = ImGui::GetFrameHeight();
  const ImVec2 q(p.x + kBarWidth, p.y + h);
  const ImGuiStyle& style = ImGui::GetStyle();
  dl->AddRectFilled(p, q, ImGui::GetColorU32(ImGuiCol_FrameBg), style.FrameRounding);
  const ImU32 fill = ImGui::GetColorU32(ImGuiCol_PlotHistogram);
  if (fraction >= 0) {
    dl->AddRectFilled(p, ImVec2(p.x + kBarWidth * static_cast<float>(std::min(fraction, 1.0)), q.y), fill, style.FrameRounding);
  } else {
    const float block = kBarWidth / 4;
    const float x = static_cast<float>(std::fmod(ImGui::GetTime() * 0.8, 1.0)) * (kBarWidth + block) - block;
    dl->AddRectFilled(ImVec2(p.x + std::max(0.f, x), p.y), ImVec2(p.x + std::min(kBarWidth, x + block), q.y), fill, style.FrameRounding);
  }
  const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
  dl->PushClipRect(p, q, true);
  dl->AddText(ImVec2(p.x + std::max(4.f, (kBarWidth - ts.x) / 2), p.y + (h - ts.y) / 2), ImGui::GetColorU32(ImGuiCol_Text), label.c_str());
  dl->PopClipRect();
  ImGui::Dummy(ImVec2(kBarWidth, h));
}

}  // namespace

void draw_task_list(UiState& ui) {
  ui.task_list_drawn.clear();
  std::vector<TaskInfo> shown;
  for (TaskInfo& t : ui.tasks.list())
    if (t.listed && t.seconds >= kShowAfter) shown.push_back(std::move(t));
  if (shown.empty()) return;
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x - 8, vp->WorkPos.y + vp->WorkSize.y - 8), ImGuiCond_Always, ImVec2(1, 1));
  ImGui::SetNextWindowBgAlpha(0.94f);
  const ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings |
                                 ImGuiWindowFlags_NoFocusOnAppearing | ImGuiWindowFlags_NoNav | ImGuiWindowFlags_NoMove;
  if (ImGui::Begin("Background work", nullptr, flags)) {
    ImGui::TextDisabled("background work");
    for (const TaskInfo& t : shown) {
      ImGui::PushID(static_cast<int>(t.id));
      ImGui::TextUnformatted(t.name.c_str());
      if (!t.running) {
        ImGui::SameLine();
        ImGui::TextDisabled("(waiting)");
      }
      char percent[16] = "";
      if (t.fraction >= 0) std::snprintf(percent, sizeof percent, "%.0f%%", 100 * t.fraction);
      const std::string label = t.text.empty() ? percent : t.fraction >= 0 ? t.text + "  " + percent : t.text;
      bar(t.fraction, label);
      ImGui::SameLine();
      if (t.cancelling) {
        ImGui::TextDisabled("cancelling");
      } else if (t.cancellable) {
        if (ImGui::SmallButton("Cancel")) ui.tasks.cancel(t.id);
      }
      ImGui::PopID();
      ui.task_list_drawn += t.name + (label.empty() ? "" : ": " + label) + "\n";
    }
    const ImVec2 a = ImGui::GetWindowPos(), size = ImGui::GetWindowSize();
    ui.mark_drawn("task_list", a.x, a.y, a.x + size.x, a.y + size.y);
  }
  ImGui::End();
}

}  // namespace luka::studio
