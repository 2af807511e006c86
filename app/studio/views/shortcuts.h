// Keyboard shortcuts: run/pause, step, layer and head, log scale, views, fit, and a help overlay
// that lists them (F1 or ?). They act on UiState and the RunController as the panels' buttons do.
#pragma once

#include <string>

#include "app/studio/views/ui_state.h"

namespace luka::studio {

// Acts on this frame's key presses (none while a text field has the keyboard) and draws the help
// overlay when it is open. Call once per frame, after the panels: the overlay goes on top.
void update_shortcuts(UiState& ui);

// For scripts: presses a key for the next frame. `name` is space, f1, escape, up, down, left,
// right, or one printable character (typed, as a keyboard would: l, f, 1, ?, [ ...).
// Returns false, pressing nothing, when the same named key was released after the last frame:
// Dear ImGui tells a new press only from a frame that saw the key up, so the caller presses it
// again after the next frame. Throws luka::Error for any other name.
bool press_key(const std::string& name);

}  // namespace luka::studio
