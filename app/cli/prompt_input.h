// The prompt options of `luka capture`: --prompt STR,
// --prompt-file F (plain text, or an interwoven prompt .json), --segments FILE (a segment table
// for a plain prompt), --wikisalad FILE --example N, --chat/--system. Produces the token ids,
// each token's segment and the token-level segment table.
#pragma once

#include <cstddef>
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

// `max_tokens`: see tokenize_prompt (encoding stops past it; the result is then incomplete).
PromptInput build_prompt(const ArgParser& args, const Tokenizer& tokenizer, std::size_t max_tokens = SIZE_MAX);

// The most prompt tokens that leave room for `max_new_tokens` in a context of `context`
// (check_context's rule: the last new token is not fed).
std::size_t prompt_token_limit(std::int64_t context, std::int64_t max_new_tokens);

// check_context for a prompt built with a limit: an incomplete prompt is refused as "more than
// N tokens", the rest as check_context does.
void check_prompt_context(const PromptInput& prompt, std::int64_t context, std::int64_t max_new_tokens);

}  // namespace luka::cli
