#include "app/studio/views/style.h"

#include <imgui.h>

#include <cstring>

#include "viz/ui_colours.h"

namespace luka::studio {
namespace {

// The style slot of a viz::kUiColours role.
int slot(const char* name) {
  for (int i = 0; i < ImGuiCol_COUNT; ++i)
    if (std::strcmp(ImGui::GetStyleColorName(i), name) == 0) return i;
  return -1;
}

}  // namespace

void apply_style() {
  ImGui::StyleColorsDark();
  ImVec4* colours = ImGui::GetStyle().Colors;
  for (const viz::UiColour& c : viz::kUiColours) {
    const int i = slot(c.name);
    if (i >= 0) colours[i] = ImVec4(c.rgb.r / 255.f, c.rgb.g / 255.f, c.rgb.b / 255.f, 1.f);
  }
}

}  // namespace luka::studio
