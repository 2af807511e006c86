// Emoji beyond U+FFFF for Debian's Dear ImGui, whose characters are 16-bit: each emoji a font has
// (Symbola, monochrome) is drawn with stb_truetype into the font atlas as a custom glyph at a
// private-use code point (U+E000 on), and token text (token_label) writes it there. Two steps
// around the atlas build: add() registers the glyphs' rectangles, draw() fills them.
#pragma once

#include <imgui.h>

#include <unordered_map>

namespace luka::studio {

// Registers the emoji of `ttf` in the usual emoji blocks as glyphs of `font`, sized like text of
// `pixel_height`, on a baseline `ascent` pixels below the line's top. Returns how many.
int add_emoji_glyphs(ImFontAtlas* atlas, ImFont* font, const char* ttf, float pixel_height, float ascent);
// After the atlas is built: draws the registered glyphs into its texture (RGBA32).
void draw_emoji_glyphs(ImFontAtlas* atlas);
// Emoji code point -> the private-use code point that shows it (empty before add_emoji_glyphs).
const std::unordered_map<char32_t, char32_t>& emoji_substitutes();

// The ascent in pixels of `ttf` at `pixel_height` as Dear ImGui lays it out (0 if unreadable).
float font_ascent(const char* ttf, float pixel_height);

}  // namespace luka::studio
