// The Studio's own colours (buttons, frames, tabs, grabs, check marks...), neutral slate greys
// chosen apart from every topic colour (default_topic_colour) and cover-state colour in OKLab, so
// no control reads as a topic or a state; tests/viz/test_state_colours.cpp measures the distances.
// Opaque: what the screen shows is the colour itself.
#pragma once

#include <array>

#include "viz/colormap.h"

namespace luka::viz {

struct UiColour {
  const char* name;  // the Dear ImGui role it fills
  Rgb rgb;
};

inline constexpr std::array<UiColour, 30> kUiColours = {{
    {"FrameBg", {38, 40, 46}},          {"FrameBgHovered", {52, 55, 63}},     {"FrameBgActive", {64, 68, 78}},
    {"TitleBg", {24, 25, 29}},          {"TitleBgActive", {34, 36, 42}},      {"TitleBgCollapsed", {24, 25, 29}},
    {"Button", {52, 55, 63}},           {"ButtonHovered", {70, 74, 86}},      {"ButtonActive", {88, 93, 108}},
    {"Header", {48, 51, 59}},           {"HeaderHovered", {66, 70, 82}},      {"HeaderActive", {82, 87, 101}},
    {"SliderGrab", {104, 110, 128}},    {"SliderGrabActive", {124, 130, 150}}, {"CheckMark", {200, 196, 186}},
    {"Tab", {38, 40, 46}},              {"TabHovered", {70, 74, 86}},         {"TabActive", {60, 64, 74}},
    {"TabUnfocused", {32, 34, 39}},     {"TabUnfocusedActive", {48, 51, 59}}, {"Separator", {60, 63, 72}},
    {"SeparatorHovered", {82, 87, 101}}, {"SeparatorActive", {100, 106, 122}}, {"ResizeGrip", {52, 55, 63}},
    {"ResizeGripHovered", {70, 74, 86}}, {"ResizeGripActive", {88, 93, 108}},  {"TextSelectedBg", {80, 85, 100}},
    {"PlotHistogram", {200, 200, 208}}, {"NavHighlight", {200, 196, 186}},    {"TableHeaderBg", {44, 47, 54}},
}};

// Differences B - A in the Studio's compare mode (the fidelity tab's Δ columns), coloured by sign:
// warm sand where B is higher, cool slate where it is lower. Muted like the controls, apart from
// every topic colour and from each other (tests/viz/test_state_colours.cpp); the sign is also in
// the text, so the colour is a second cue, not the only one.
inline constexpr Rgb kDeltaHigher{220, 188, 150};
inline constexpr Rgb kDeltaLower{165, 185, 215};

}  // namespace luka::viz
