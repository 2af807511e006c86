// The presets of the field's KV-cache methods (kvpress's presses, compression during decoding,
// Quest; docs/methods.md), as the layers panel and the compare view offer them: each a
// LukaConfig::preset name and what it does in a line.
#pragma once

#include <vector>

namespace luka::studio {

struct MethodPreset {
  const char* name;  // LukaConfig::preset's
  const char* tip;
};

const std::vector<MethodPreset>& method_presets();  // in the order the panels list them

}  // namespace luka::studio
