#include "app/studio/views/emoji_glyphs.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#define STB_TRUETYPE_IMPLEMENTATION
#define STBTT_STATIC
#include <stb/stb_truetype.h>

namespace luka::studio {
namespace {

struct Glyph {
  int rect = -1;   // the atlas's custom rectangle
  int index = 0;   // the font's glyph
  int width = 0, height = 0;
};

// The font file and what was registered from it (one font; the Studio loads one).
struct Registry {
  std::vector<unsigned char> data;
  stbtt_fontinfo info{};
  float scale = 0;
  std::vector<Glyph> glyphs;
  std::unordered_map<char32_t, char32_t> substitutes;
};

Registry& registry() {
  static Registry r;
  return r;
}

bool load(const char* path, std::vector<unsigned char>& data, stbtt_fontinfo& info) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !data.empty() && stbtt_InitFont(&info, data.data(), stbtt_GetFontOffsetForIndex(data.data(), 0)) != 0;
}

}  // namespace

float font_ascent(const char* ttf, float pixel_height) {
  std::vector<unsigned char> data;
  stbtt_fontinfo info{};
  if (!load(ttf, data, info)) return 0;
  int ascent = 0, descent = 0, gap = 0;
  stbtt_GetFontVMetrics(&info, &ascent, &descent, &gap);
  // As Dear ImGui's atlas builder rounds it: floor(ascent x scale + 1), then to the pixel.
  return std::round(std::floor(static_cast<float>(ascent) * stbtt_ScaleForPixelHeight(&info, pixel_height) + 1));
}

int add_emoji_glyphs(ImFontAtlas* atlas, ImFont* font, const char* ttf, float pixel_height, float ascent) {
  Registry& r = registry();
  if (!r.glyphs.empty() || !load(ttf, r.data, r.info)) return 0;
  r.scale = stbtt_ScaleForPixelHeight(&r.info, pixel_height);
  // Emoticons, pictographs, transport, supplemental symbols: where emoji live outside the BMP.
  static const char32_t kBlocks[][2] = {{0x1F300, 0x1F5FF}, {0x1F600, 0x1F64F}, {0x1F680, 0x1F6FF}, {0x1F900, 0x1F9FF}, {0x1FA70, 0x1FAFF}};
  char32_t next = 0xE000;
  for (const auto& block : kBlocks)
    for (char32_t cp = block[0]; cp <= block[1] && next <= 0xF8FF; ++cp) {
      const int index = stbtt_FindGlyphIndex(&r.info, static_cast<int>(cp));
      if (index == 0) continue;
      int x0 = 0, y0 = 0, x1 = 0, y1 = 0, advance = 0, bearing = 0;
      stbtt_GetGlyphBitmapBox(&r.info, index, r.scale, r.scale, &x0, &y0, &x1, &y1);
      stbtt_GetGlyphHMetrics(&r.info, index, &advance, &bearing);
      Glyph g;
      g.index = index;
      g.width = std::max(1, x1 - x0);
      g.height = std::max(1, y1 - y0);
      g.rect = atlas->AddCustomRectFontGlyph(font, static_cast<ImWchar>(next), g.width, g.height, static_cast<float>(advance) * r.scale,
                                             ImVec2(static_cast<float>(x0), ascent + static_cast<float>(y0)));
      r.glyphs.push_back(g);
      r.substitutes[cp] = next++;
    }
  return static_cast<int>(r.glyphs.size());
}

void draw_emoji_glyphs(ImFontAtlas* atlas) {
  Registry& r = registry();
  if (r.glyphs.empty()) return;
  unsigned char* pixels = nullptr;
  int width = 0, height = 0;
  atlas->GetTexDataAsRGBA32(&pixels, &width, &height);
  std::vector<unsigned char> coverage;
  for (const Glyph& g : r.glyphs) {
    const ImFontAtlasCustomRect* rect = atlas->GetCustomRectByIndex(g.rect);
    if (!rect->IsPacked()) continue;
    coverage.assign(static_cast<std::size_t>(g.width * g.height), 0);
    stbtt_MakeGlyphBitmap(&r.info, coverage.data(), g.width, g.height, g.width, r.scale, r.scale, g.index);
    for (int y = 0; y < g.height; ++y)
      for (int x = 0; x < g.width; ++x) {
        unsigned char* p = pixels + (static_cast<std::size_t>(rect->Y + y) * static_cast<std::size_t>(width) + rect->X + x) * 4;
        p[0] = p[1] = p[2] = 255;
        p[3] = coverage[static_cast<std::size_t>(y * g.width + x)];
      }
  }
}

const std::unordered_map<char32_t, char32_t>& emoji_substitutes() { return registry().substitutes; }

}  // namespace luka::studio
