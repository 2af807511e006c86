// Chat formatting in C++ (no template engine): ChatML as Qwen3 and SmolLM2 use it (docs/design.md §4).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace luka {

struct TokenizerConfig;

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;
};

struct ChatOptions {
  bool add_generation_prompt = true;  // end with "<|im_start|>assistant\n"
  bool enable_thinking = false;       // hybrid-thinking models only; false appends an empty think block
  // Inserted as the system message when the conversation does not start with one (SmolLM2's
  // template does this); see default_system_prompt.
  std::optional<std::string> default_system;
};

// The system prompt a ChatML template inserts when the first message is not a system message,
// e.g. SmolLM2's "You are a helpful AI assistant named SmolLM, trained by Hugging Face". Found as
// the literal '<|im_start|>system\n...<|im_end|>' inside a `!= 'system'` branch of the template.
std::optional<std::string> default_system_prompt(const TokenizerConfig& config);

// True when the model's chat template knows `enable_thinking` (Qwen3 hybrid models).
bool is_hybrid_thinking(const TokenizerConfig& config);

// "<|im_start|>role\ncontent<|im_end|>\n" per message, then the generation prompt; for hybrid
// thinking models with enable_thinking=false the prompt is followed by "<think>\n\n</think>\n\n".
std::string format_chatml(const std::vector<ChatMessage>& messages, const ChatOptions& options,
                          bool hybrid_thinking);

}  // namespace luka
