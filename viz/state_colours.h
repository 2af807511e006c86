// Colours of a token's state in a decode step's cover (the Studio's cover timeline and the map's
// overlays), indexed by capture::CoverState. Chosen apart from the topic palette
// (default_topic_colour) and from each other in OKLab, so a refined page never reads as a topic;
// tests/viz/test_state_colours.cpp measures the distances.
#pragma once

#include <array>

#include "viz/colormap.h"

namespace luka::viz {

struct StateColour {
  const char* name;
  Rgb rgb;
};

inline constexpr std::array<StateColour, 6> kCoverStateColours = {{
    {"absent", {24, 24, 28}},
    {"summarized", {60, 60, 110}},
    {"refined", {130, 80, 255}},
    {"raw", {235, 235, 235}},
    {"heavy hitter", {170, 20, 60}},
    {"dropped", {55, 55, 62}},
}};

inline constexpr Rgb kRefinedColour = kCoverStateColours[2].rgb;
inline constexpr Rgb kHeavyHitterColour = kCoverStateColours[4].rgb;
// Comparing two runs, the cover timeline's mark for a token whose state differs between them at a
// step: a hue no state, topic or control has.
inline constexpr Rgb kStateDiffersColour{40, 230, 230};
// Kascade: the keys a step's top-k set holds on the map, and the reuse arrows of the layer strip.
inline constexpr Rgb kKascadeColour{140, 205, 255};

}  // namespace luka::viz
