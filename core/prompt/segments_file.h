// The segments file of a plain prompt (`--segments FILE`, docs/prompt-format.md): a JSON list of
// {"label", "colour", "begin", "end"} with byte offsets into the prompt text.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/prompt/interwoven_prompt.h"

namespace luka {

// Segment i is segments[i] (label, colour and its text) at bytes spans[i] of the prompt.
struct SegmentTable {
  std::vector<PromptSegment> segments;
  std::vector<SegmentSpan> spans;
};

// Reads and checks the file against `prompt_text`: every span non-empty, inside the text, on
// UTF-8 character boundaries, in order and not overlapping. A missing colour comes from the
// default palette, one colour per distinct label. Throws luka::Error naming the file, the entry
// and the problem.
SegmentTable load_segments_file(const std::filesystem::path& file, std::string_view prompt_text);
// The same for the file's text; `file` names it in errors.
SegmentTable parse_segments_file(const std::string& text, const std::filesystem::path& file, std::string_view prompt_text);

}  // namespace luka
