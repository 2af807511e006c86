// Rows of widgets that wrap: an item goes on the current line only when it fits before the
// window's edge, else it starts the next one, so nothing is cut off in a narrow panel or a small
// window (the layers panel's parameters, the map's toolbar).
#pragma once

#include <imgui.h>

namespace luka::studio {

// `spacing` before the item when it stays on the line (negative: the style's).
inline void same_line_if_fits(float width, float spacing = -1) {
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  const float gap = spacing < 0 ? ImGui::GetStyle().ItemSpacing.x : spacing;
  if (ImGui::GetItemRectMax().x + gap + width <= right) ImGui::SameLine(0, spacing);
}

// Width of a framed widget of `field` pixels followed by its label.
inline float labelled(float field, const char* label) {
  return field + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(label, nullptr, true).x;
}

inline float button_width(const char* label) {
  return ImGui::CalcTextSize(label, nullptr, true).x + 2 * ImGui::GetStyle().FramePadding.x;
}

// A checkbox's width with its label.
inline float checkbox_width(const char* label) { return labelled(ImGui::GetFrameHeight(), label); }

}  // namespace luka::studio
