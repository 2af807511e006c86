// The prompt options shared by capture (and later the Studio's CLI entry): --prompt STR,
// --prompt-file F (plain text, or an interwoven prompt .json), --segments FILE (a segment table
// for a plain prompt), --wikisalad FILE --example N, --chat/--system. Produces the token ids,
// each token's segment and the token-level segment table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "captures/capture.h"
#include "core/prompt/interwoven_prompt.h"

namespace luka {
class Tokenizer;
}

namespace luka::cli {

class ArgParser;

void add_prompt_options(ArgParser& args);
extern const char* const kPromptOptionsHelp;

struct PromptInput {
  std::string text;    // what is tokenized (after chat formatting)
  std::string source;  // how it was given, for the manifest
  std::vector<std::int32_t> ids;
  std::vector<std::int32_t> segment;            // per token, -1 outside every segment
  std::vector<capture::Segment> segments;       // token spans
};

PromptInput build_prompt(const ArgParser& args, const Tokenizer& tokenizer);

// Tokenizes `body` (optionally as a chat turn) and gives each token its segment from the byte
// `spans` of `segments` in body. Shared by build_prompt and the Studio.
PromptInput tokenize_prompt(const Tokenizer& tokenizer, const std::string& body, const std::vector<PromptSegment>& segments,
                            const std::vector<SegmentSpan>& spans, bool chat, const std::string& system);

}  // namespace luka::cli
