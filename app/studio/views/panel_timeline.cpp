// Cover timeline: decode step (rows) x raw token (columns) for the selected layer and head, each
// cell the token's state in that step's cover — summarized in a page, refined, raw (tail, window
// or dense), heavy hitter, or dropped — so one sees pages form, refinements move and heavy
// hitters persist over a generation. Step numbers run down the left, token positions below, and
// the prompt's topic bands above. Comparing, the other capture's (B's) raster sits under this
// one's (A's), or, with "A ≠ B" on, a raster that marks the cells (step, token) whose state
// differs between the two runs over A's states dimmed; the hover names both states.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <array>
#include <string>

#include "app/studio/views/ui_state.h"
#include "viz/state_colours.h"

namespace luka::studio {
namespace {

// Indexed by capture::CoverState.
const auto& kStates = viz::kCoverStateColours;

// The cover raster of a layer and head, read off the UI thread and uploaded when it arrives.
const TimelineData& timeline_of(TaskManager& tasks, TimelineView& tv, const std::shared_ptr<const capture::CaptureView>& view, std::int64_t S, std::int64_t T, int layer,
                                int head) {
  const std::string key = capture_key(view.get()) + "/" + std::to_string(layer) + "/" + std::to_string(head);
  const TimelineData& data = tv.data.get(tasks, key, [view, S, T, layer, head] {
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
  return data;
}

// A ≠ B over the steps both rasters have (tokens past a run's own count are absent there): the
// differing cells in kStateDiffersColour, the others A's state colour dimmed towards the absent
// background. Rebuilt and uploaded when either raster changes.
const TimelineDifference& difference_of(TimelineDifference& d, const TimelineData& a, const std::string& key_a, const TimelineData& b, const std::string& key_b) {
  const std::string key = key_a + "|" + key_b;
  if (d.key == key) return d;
  d.key = key;
  d.steps = std::min(a.steps, b.steps);
  d.tokens = std::max(a.tokens, b.tokens);
  d.differing = 0;
  viz::Image img;
  img.width = static_cast<int>(d.tokens);
  img.height = static_cast<int>(d.steps);
  img.rgba.assign(static_cast<std::size_t>(d.tokens * d.steps * 4), 255);
  const auto code = [](const TimelineData& x, std::int64_t s, std::int64_t t) {
    return t < x.tokens ? x.codes[static_cast<std::size_t>(s * x.tokens + t)] : std::uint8_t{capture::kAbsent};
  };
  const viz::Rgb bg = kStates[capture::kAbsent].rgb;
  for (std::int64_t s = 0; s < d.steps; ++s)
    for (std::int64_t t = 0; t < d.tokens; ++t) {
      const std::uint8_t ca = code(a, s, t), cb = code(b, s, t);
      viz::Rgb c = viz::kStateDiffersColour;
      if (ca == cb) {
        const viz::Rgb x = kStates[std::min<std::size_t>(ca, 5)].rgb;
        const auto dim = [](std::uint8_t v, std::uint8_t under) { return static_cast<std::uint8_t>((35 * v + 65 * under + 50) / 100); };
        c = {dim(x.r, bg.r), dim(x.g, bg.g), dim(x.b, bg.b)};
      } else {
        ++d.differing;
      }
      std::uint8_t* p = img.rgba.data() + 4 * (s * d.tokens + t);
      p[0] = c.r, p[1] = c.g, p[2] = c.b;
    }
  if (!img.rgba.empty()) d.texture.upload(img);
  return d;
}

}  // namespace

namespace {

// Above the raster: the states' legend, the A ≠ B switch (comparing), and the tracked tokens
// (a span, a text, a segment or the needles) with their states at the step the panels show.
void timeline_header(UiState& ui, const std::shared_ptr<const capture::CaptureView>& view, const TimelineData& data, bool diff) {
  const auto swatch = [](const char* name, viz::Rgb c) {
    ImGui::ColorButton(name, ImVec4(c.r / 255.f, c.g / 255.f, c.b / 255.f, 1), ImGuiColorEditFlags_NoTooltip, ImVec2(12, 12));
  };
  for (const auto& st : kStates) {
    if (&st != &kStates[0]) ImGui::SameLine();
    swatch(st.name, st.rgb);
    ImGui::SameLine();
    ImGui::TextUnformatted(st.name);
  }
  if (ui.compare.view) {
    ImGui::SameLine(0, 24);
    ImGui::Checkbox("A ≠ B", &ui.compare.timeline_difference);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("mark the cells whose state differs between the two runs at the same step and token");
    if (diff) {
      ImGui::SameLine();
      swatch("differs", viz::kStateDiffersColour);
      ui.mark_drawn("timeline_differs_swatch", ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y, ImGui::GetItemRectMax().x, ImGui::GetItemRectMax().y);
      ImGui::SameLine();
      ImGui::TextUnformatted("differs");
    }
  }
  // Tracked tokens: a span or text, marked here and on the map, with their states at the step.
  ImGui::SameLine(0, 24);
  ImGui::SetNextItemWidth(150);
  if (ImGui::InputTextWithHint("##track", "track: 120-135, text:..", &ui.timeline.track_spec, ImGuiInputTextFlags_EnterReturnsTrue)) set_track(ui, *view);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("A-B (token positions), A, text:STRING, segment:LABEL (a prompt segment),\n"
                      "or needle (the needles of a luka eval niah or ruler capture)");
  // A needle-in-a-haystack capture marks its needles as segments: one click tracks them.
  const auto& segments = ui.segments.get(ui.tasks, capture_key(view.get()), [view] { return view->segments(); });
  if (std::any_of(segments.begin(), segments.end(), [](const capture::Segment& s) { return s.label.rfind("needle", 0) == 0; })) {
    ImGui::SameLine();
    if (ImGui::SmallButton("needle")) {
      ui.timeline.track_spec = "needle";
      set_track(ui, *view);
    }
    ui.mark_drawn("track_needle", ImGui::GetItemRectMin().x, ImGui::GetItemRectMin().y, ImGui::GetItemRectMax().x, ImGui::GetItemRectMax().y);
  }
  if (ui.timeline.track && ui.timeline.track->end > data.tokens) ui.timeline.track.reset();  // another run's span
  if (ui.timeline.track) {
    const std::int64_t s = std::clamp<std::int64_t>(ui.selection.step > 0 ? ui.selection.step : data.steps, 1, data.steps);
    std::array<std::int64_t, 6> count{};
    for (std::int64_t t = ui.timeline.track->begin; t < ui.timeline.track->end; ++t) ++count[std::min<std::size_t>(data.codes[static_cast<std::size_t>((s - 1) * data.tokens + t)], 5)];
    ImGui::SameLine();
    ImGui::Text("%s at step %lld: raw %lld, summarized %lld, refined %lld, heavy %lld, dropped %lld", ui.timeline.track_note.c_str(),
                static_cast<long long>(s), static_cast<long long>(count[capture::kRaw]), static_cast<long long>(count[capture::kSummarized]),
                static_cast<long long>(count[capture::kRefined]), static_cast<long long>(count[capture::kHeavy]),
                static_cast<long long>(count[capture::kDropped]));
  } else if (!ui.timeline.track_note.empty()) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(1.f, 0.5f, 0.5f, 1.f), "%s", ui.timeline.track_note.c_str());
  }
}

}  // namespace

void draw_timeline_panel(UiState& ui) {
  ui.timeline.tooltip.clear();
  const auto view = ui.controller.view();
  if (!view) return;
  const capture::Summary sum = view->summary();
  if (!sum.layout.covers || sum.complete_steps == 0) {
    ImGui::TextDisabled(sum.layout.covers ? "no decode steps yet" : "covers were not recorded in this capture");
    return;
  }
  const auto& lay = sum.layout;
  if (!std::binary_search(lay.layers.begin(), lay.layers.end(), ui.selection.layer) || !std::binary_search(lay.heads.begin(), lay.heads.end(), ui.selection.head))
    return;
  TimelineView& tv = ui.timeline.view;
  const TimelineData& data = timeline_of(ui.tasks, tv, view, sum.complete_steps, lay.prompt_tokens + sum.complete_steps, ui.selection.layer, ui.selection.head);
  // Comparing: the other capture's timeline under this one (its own steps), where it records the layer and head.
  const TimelineData* other = nullptr;
  std::string other_note;
  if (ui.compare.view) {
    const capture::Summary b = ui.compare.view->summary();
    if (!b.layout.covers || b.complete_steps == 0) other_note = "B: no covers";
    else if (!std::binary_search(b.layout.layers.begin(), b.layout.layers.end(), ui.selection.layer) ||
             !std::binary_search(b.layout.heads.begin(), b.layout.heads.end(), ui.selection.head))
      other_note = "B: layer " + std::to_string(ui.selection.layer) + " head " + std::to_string(ui.selection.head) + " not recorded";
    else other = &timeline_of(ui.tasks, ui.compare.timeline, ui.compare.view, b.complete_steps, b.layout.prompt_tokens + b.complete_steps, ui.selection.layer, ui.selection.head);
  }
  if (!data.error.empty()) ImGui::TextDisabled("%s", data.error.c_str());
  if (!tv.texture.valid() || data.steps == 0) {
    ImGui::TextDisabled("reading covers...");
    return;
  }
  // Comparing: B's raster under A's, or where the two differ.
  const bool two = other && ui.compare.timeline.texture.valid() && other->steps > 0;
  const bool diff = two && ui.compare.timeline_difference;
  const TimelineDifference* difference = diff ? &difference_of(ui.compare.timeline_diff, data, tv.data.key, *other, ui.compare.timeline.data.key) : nullptr;
  timeline_header(ui, view, data, diff);
  // The raster, with step numbers on the left, token positions below and topic bands above.
  const float band = 6.f, left = 44.f, line = ImGui::GetTextLineHeight();
  const ImVec2 top_left = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const ImVec2 origin(top_left.x + left, top_left.y + band + 2);
  const ImVec2 full(std::max(20.f, avail.x - left - 4), std::max(12.f, avail.y - band - 2 - line - 6));
  const std::int64_t DT = data.tokens, DS = data.steps;  // the raster shown may lag the capture
  // Comparing, B's raster (or A ≠ B) sits under A's on the same token scale.
  const float gap = line + 2;
  const std::int64_t XT = two ? std::max(DT, other->tokens) : DT;
  const ImVec2 size(full.x, two ? (full.y - gap) / 2 : full.y);
  const auto sx = [&](double t) { return origin.x + static_cast<float>(t / static_cast<double>(XT)) * size.x; };
  ImGui::SetCursorScreenPos(origin);
  ImGui::Image(tv.texture.id(), ImVec2(sx(static_cast<double>(DT)) - origin.x, size.y));
  const bool hovered = ImGui::IsItemHovered();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 b_origin(origin.x, origin.y + size.y + gap);
  bool b_hovered = false;
  ui.timeline.lower = {};
  if (two) {
    const std::int64_t lower_tokens = diff ? difference->tokens : other->tokens, lower_steps = diff ? difference->steps : other->steps;
    const std::string title = diff ? "A ≠ B (B: " + ui.compare.note + "): " + std::to_string(difference->differing) + " of " +
                                         std::to_string(difference->tokens * difference->steps) + " cells differ over the " + std::to_string(difference->steps) + " steps both have"
                                   : "B: " + ui.compare.note;
    dl->AddText(ImVec2(origin.x, origin.y + size.y + 1), IM_COL32(200, 200, 205, 255), title.c_str());
    ImGui::SetCursorScreenPos(b_origin);
    const float lower_w = sx(static_cast<double>(lower_tokens)) - origin.x;
    ImGui::Image(diff ? difference->texture.id() : ui.compare.timeline.texture.id(), ImVec2(lower_w, size.y));
    b_hovered = ImGui::IsItemHovered();
    ui.timeline.lower = {diff, b_origin.x, b_origin.y, lower_w, size.y, lower_tokens, lower_steps, ImGui::GetFrameCount()};
    if (diff) ui.mark_drawn("timeline_diff", b_origin.x, b_origin.y, b_origin.x + lower_w, b_origin.y + size.y);  // lower_tokens x lower_steps cells
  } else if (!other_note.empty()) {
    dl->AddText(ImVec2(origin.x + size.x - ImGui::CalcTextSize(other_note.c_str()).x, top_left.y - line - 2), IM_COL32(255, 160, 160, 255), other_note.c_str());
  }
  const float axis_y = (two ? b_origin.y : origin.y) + size.y;
  ui.mark_drawn("timeline", origin.x, origin.y, sx(static_cast<double>(DT)), origin.y + size.y);  // A's raster: DT tokens x DS steps
  ui.mark_drawn("timeline_bands", origin.x, top_left.y, origin.x + size.x, top_left.y + band);
  const auto sy = [&](double s) { return origin.y + static_cast<float>(s / static_cast<double>(DS)) * size.y; };
  const std::string ck = capture_key(view.get());
  for (const capture::Segment& seg : ui.segments.get(ui.tasks, ck, [view] { return view->segments(); }))
    dl->AddRectFilled(ImVec2(sx(static_cast<double>(seg.begin)), top_left.y), ImVec2(sx(static_cast<double>(seg.end)), top_left.y + band),
                      parse_colour(seg.colour));
  const ImU32 axis = IM_COL32(170, 170, 180, 255);
  // Ticks at round numbers at least 60 px (tokens) or a line (steps) apart.
  const auto round_step = [](double min_gap) {  // the smallest 1, 2 or 5 x 10^k at least min_gap
    for (double decade = 1;; decade *= 10)
      for (const double m : {1.0, 2.0, 5.0})
        if (m * decade >= min_gap) return m * decade;
  };
  const double tok_unit = round_step(60.0 * static_cast<double>(XT) / size.x);
  for (double t = 0; t < static_cast<double>(XT); t += tok_unit) {
    const float x = sx(t);
    dl->AddLine(ImVec2(x, axis_y), ImVec2(x, axis_y + 3), axis);
    const std::string text = std::to_string(static_cast<long long>(t));
    dl->AddText(ImVec2(x + 2, axis_y + 1), axis, text.c_str());
  }
  const double step_unit = round_step(line * static_cast<double>(DS) / size.y);
  for (double s = 1; s <= static_cast<double>(DS); s += step_unit) {
    const std::string text = std::to_string(static_cast<long long>(s));
    const float y = sy(s - 0.5);
    dl->AddText(ImVec2(origin.x - 6 - ImGui::CalcTextSize(text.c_str()).x, y - line / 2), axis, text.c_str());
  }
  dl->AddText(ImVec2(top_left.x, axis_y + 1), axis, "step");
  if (ui.timeline.track) {  // the tracked tokens' columns
    const float a = sx(static_cast<double>(ui.timeline.track->begin)), b = std::max(sx(static_cast<double>(ui.timeline.track->end)), a + 2);
    dl->AddRect(ImVec2(a - 1, origin.y - 2), ImVec2(b + 1, axis_y + 2), IM_COL32(255, 255, 255, 230), 0, 0, 1.5f);
  }
  {  // the decode step the panels show (the step slider, the map's rows): its row outlined in A's raster
    const std::int64_t s = std::clamp<std::int64_t>(ui.selection.step > 0 ? ui.selection.step : DS, 1, DS);
    const float y0 = sy(static_cast<double>(s - 1)), y1 = std::max(sy(static_cast<double>(s)), y0 + 2);
    dl->AddRect(ImVec2(origin.x - 2, y0 - 1), ImVec2(sx(static_cast<double>(DT)) + 2, y1 + 1), IM_COL32(255, 255, 255, 200), 0, 0, 1.5f);
    ui.mark_drawn("timeline_step", origin.x, y0, sx(static_cast<double>(DT)), y1, std::to_string(s));
  }
  // Hover: the token's state at that step, in this capture and (comparing) in the other.
  if (hovered || b_hovered) {
    const std::int64_t steps = hovered ? data.steps : ui.timeline.lower.steps;
    const ImVec2 o = hovered ? origin : b_origin;
    const ImVec2 m = ImGui::GetIO().MousePos;
    const auto t = static_cast<std::int64_t>((m.x - o.x) / size.x * static_cast<float>(XT));
    const auto s = static_cast<std::int64_t>((m.y - o.y) / size.y * static_cast<float>(steps));
    const auto code = [&](const TimelineData& x) -> int {  // -1: no such step; past the run's tokens: absent (as A ≠ B counts it)
      if (t < 0 || s < 0 || s >= x.steps) return -1;
      if (t >= x.tokens || static_cast<std::size_t>(s * x.tokens + t) >= x.codes.size()) return capture::kAbsent;
      return std::min<int>(x.codes[static_cast<std::size_t>(s * x.tokens + t)], 5);
    };
    const auto state = [](int c) { return c < 0 ? "-" : kStates[static_cast<std::size_t>(c)].name; };
    std::string& tip = ui.timeline.tooltip;
    tip = "step " + std::to_string(s + 1) + ", token " + std::to_string(t) + ": ";
    if (two) {
      const int ca = code(data), cb = code(*other);
      tip += std::string("A ") + state(ca) + ", B " + state(cb);
      if (diff && b_hovered) tip += ca == cb ? " (same)" : " (differ)";
    } else {
      tip += state(code(data));
    }
    ImGui::SetTooltip("%s", tip.c_str());
  }
}

}  // namespace luka::studio
