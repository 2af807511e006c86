// The Studio's look: Dear ImGui's dark style with its blue accents replaced by the neutral colours
// of viz/ui_colours.h, so that the only saturated colours on screen are data: topics, cover states
// and the colormaps.
#pragma once

namespace luka::studio {

void apply_style();

}  // namespace luka::studio
