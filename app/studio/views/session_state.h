// The Studio's last session, restored at the next start: the model, the prompt, the LuKA config,
// the run settings, the selection, the map's view and zoom, and the panel sizes. Kept in
// session.json in the user's config folder (beside recent.json; the interwoven prompt in
// session-prompt.json, in the prompt file format). Like the recent list it is a convenience: a
// missing or corrupt file restores nothing and says why, and a value out of range is skipped.
// Settings that are one of a few values are written as words (choices.h: "dtype": "bf16", the
// map's "view": "dense"); the numbers a version 1 file holds for them are read too.
#pragma once

#include <filesystem>
#include <string>

#include "app/studio/views/ui_state.h"

namespace luka::studio {

// session.json under $XDG_CONFIG_HOME/luka-studio or ~/.config/luka-studio; empty when neither
// variable is set.
std::filesystem::path default_session_file();

// Writes the session (and the prompt beside it). Throws luka::Error naming the file when it
// cannot be written.
void save_session(const UiState& ui, const std::filesystem::path& file);

// Restores what the file holds into `ui`; the LuKA config waits in ui.layers.pending_config until a
// model with that many layers is loaded. Returns "" or why nothing (or not everything) was
// restored.
std::string load_session(UiState& ui, const std::filesystem::path& file);

// Applies ui.layers.pending_config once the loaded model has as many layers (called every frame).
void apply_pending_config(UiState& ui);

}  // namespace luka::studio
