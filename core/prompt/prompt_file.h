// The interwoven prompt file (docs/prompt-format.md): topics with labels and colours, segments in a
// pattern, an optional question; assets/prompts/demo.json is one.
#pragma once

#include <filesystem>

#include "core/prompt/interwoven_prompt.h"

namespace luka {

// Throws luka::Error naming the file, the field and the problem for any bad input.
InterwovenPrompt load_prompt_file(const std::filesystem::path& file);

}  // namespace luka
