// Cover timeline: decode step (rows) x raw token (columns) for the selected layer and head, each
// cell the token's state in that step's cover — summarized in a page, refined, raw (tail, window
// or dense), heavy hitter, or dropped — so one sees pages form, refinements move and heavy
// hitters persist over a generation.
#include <imgui.h>

#include <algorithm>
#include <string>

#include "app/studio/ui_state.h"
#include "viz/state_colours.h"

namespace luka::studio {
namespace {

// Indexed by capture::CoverState.
const auto& kStates = viz::kCoverStateColours;

}  // namespace

void draw_timeline_panel(UiState& ui) {
  const auto view = ui.session.view();
  if (!view) return;
  const capture::Summary sum = view->summary();
  if (!sum.layout.covers || sum.complete_steps == 0) {
    ImGui::TextDisabled(sum.layout.covers ? "no decode steps yet" : "covers were not recorded in this capture");
    return;
  }
  const auto& lay = sum.layout;
  if (!std::binary_search(lay.layers.begin(), lay.layers.end(), ui.layer) || !std::binary_search(lay.heads.begin(), lay.heads.end(), ui.head))
    return;
  TimelineView& tv = ui.timeline;
  const std::int64_t S = sum.complete_steps, T = lay.prompt_tokens + S;
  const std::string key = capture_key(view.get()) + "/" + std::to_string(ui.layer) + "/" + std::to_string(ui.head);
  const TimelineData& data = tv.data.get(key, [view, S, T, layer = ui.layer, head = ui.head] {
    TimelineData d;
    d.steps = S;
    d.tokens = T;
    d.codes.assign(static_cast<std::size_t>(T * S), capture::kAbsent);
    try {
      for (std::int64_t s = 1; s <= S; ++s) {
        const auto cover = view->cover(s, layer, head);
        std::copy(cover.begin(), cover.end(), d.codes.begin() + (s - 1) * T);
      }
      d.image.width = static_cast<int>(T);
      d.image.height = static_cast<int>(S);
      d.image.rgba.assign(static_cast<std::size_t>(T * S * 4), 255);
      for (std::size_t i = 0; i < d.codes.size(); ++i) {
        const viz::Rgb c = kStates[std::min<std::size_t>(d.codes[i], 5)].rgb;
        d.image.rgba[4 * i] = c.r;
        d.image.rgba[4 * i + 1] = c.g;
        d.image.rgba[4 * i + 2] = c.b;
      }
    } catch (const std::exception& e) {
      d.error = e.what();
    }
    return d;
  });
  if (tv.data.key != tv.uploaded) {  // a new raster arrived
    if (!data.image.rgba.empty()) tv.texture.upload(data.image);
    tv.uploaded = tv.data.key;
  }
  if (!data.error.empty()) ImGui::TextDisabled("%s", data.error.c_str());
  if (!tv.texture.valid() || data.steps == 0) {
    ImGui::TextDisabled("reading covers...");
    return;
  }
  for (const auto& st : kStates) {
    if (&st != &kStates[0]) ImGui::SameLine();
    ImGui::ColorButton(st.name, ImVec4(st.rgb.r / 255.f, st.rgb.g / 255.f, st.rgb.b / 255.f, 1), ImGuiColorEditFlags_NoTooltip, ImVec2(12, 12));
    ImGui::SameLine();
    ImGui::TextUnformatted(st.name);
  }
  const ImVec2 size(ImGui::GetContentRegionAvail().x, std::max(20.f, ImGui::GetContentRegionAvail().y - 4));
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::Image(tv.texture.id(), size);
  if (ImGui::IsItemHovered()) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const std::int64_t DT = data.tokens, DS = data.steps;  // the raster shown may lag the capture
    const std::int64_t t = static_cast<std::int64_t>((m.x - origin.x) / size.x * static_cast<float>(DT));
    const std::int64_t s = static_cast<std::int64_t>((m.y - origin.y) / size.y * static_cast<float>(DS));
    if (t >= 0 && t < DT && s >= 0 && s < DS && static_cast<std::size_t>(s * DT + t) < data.codes.size()) {
      const auto code = data.codes[static_cast<std::size_t>(s * DT + t)];
      ImGui::SetTooltip("step %lld, token %lld: %s", static_cast<long long>(s + 1), static_cast<long long>(t), kStates[std::min<int>(code, 5)].name);
    }
  }
}

}  // namespace luka::studio
