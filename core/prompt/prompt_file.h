// The interwoven prompt file (docs/prompt-format.md): topics with labels and colours, segments in a
// pattern, an optional question; assets/prompts/demo.json is one.
#pragma once

#include <filesystem>

#include "core/prompt/interwoven_prompt.h"

namespace luka {

// Throws luka::Error naming the file, the field and the problem for any bad input.
InterwovenPrompt load_prompt_file(const std::filesystem::path& file);
// The same for the file's text; `file` names it in errors and its stem is the default title.
InterwovenPrompt parse_prompt_file(const std::string& text, const std::filesystem::path& file);

// Writes `prompt` in the same format (load_prompt_file reads it back equal). Each pattern letter
// is a topic; its label and colour come from its first segment. Throws luka::Error naming the
// file when the prompt is inconsistent (pattern length, letters outside A-Z, a topic whose
// segments disagree on label or colour, an empty segment) or the file cannot be written.
void save_prompt_file(const InterwovenPrompt& prompt, const std::filesystem::path& file);

// Lays the segments out in a new pattern: the k-th occurrence of a letter takes that topic's k-th
// segment (in their current order). Throws luka::Error when the pattern is not letters A-Z, names
// a topic the prompt lacks, or asks for more segments of a topic than it has.
void apply_pattern(InterwovenPrompt& prompt, const std::string& pattern);

}  // namespace luka
