// The prompt options of `luka capture`: --prompt STR,
// --prompt-file F (plain text, or an interwoven prompt .json), --segments FILE (a segment table
// for a plain prompt), --wikisalad FILE --example N, --chat/--system. Produces the token ids,
// each token's segment and the token-level segment table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/prompt/tokenized_prompt.h"

namespace luka {
class Tokenizer;
}

namespace luka::cli {

class ArgParser;

void add_prompt_options(ArgParser& args);
extern const char* const kPromptOptionsHelp;

using PromptInput = TokenizedPrompt;

PromptInput build_prompt(const ArgParser& args, const Tokenizer& tokenizer);

}  // namespace luka::cli
