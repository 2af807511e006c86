// WikiSalad interleaved-topic QA sets (shared/data/wikisalad/*.json): a JSON list of examples with
// "prompt", "questions" and "metadata" {"pattern", ...}. The metadata's character offsets are not
// used (they ignore the segment headers); segments are recomputed from the prompt's
// "# Segment i: Title" header lines, see docs/prompt-format.md.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/prompt/interwoven_prompt.h"

namespace luka {

// Example `example` (0-based) of the file. Segment i is the prompt from its header to the blank
// line before the next header, the embedded "Question i: ..." line included (it asks about that
// segment's article); the last segment runs to the end of the prompt. Topics are the header
// titles, lettered in order of first appearance; the separator is "\n\n" and the question empty,
// so assemble() gives back the prompt byte for byte. Throws luka::Error naming the file and the
// example for an out-of-range index or a malformed file or example.
InterwovenPrompt from_wikisalad(const std::filesystem::path& json_file, int example);

// Every example of the file, in order (one parse for the whole file).
std::vector<InterwovenPrompt> load_wikisalad(const std::filesystem::path& json_file);
// The same for the file's text; `json_file` names it in errors and titles.
std::vector<InterwovenPrompt> parse_wikisalad(const std::string& text, const std::filesystem::path& json_file);

}  // namespace luka
