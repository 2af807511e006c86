// Chat formatting in C++ (no template engine): ChatML as Qwen3 and SmolLM2 use it (DESIGN.md §4).
#pragma once

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
};

// True when the model's chat template knows `enable_thinking` (Qwen3 hybrid models).
bool is_hybrid_thinking(const TokenizerConfig& config);

// "<|im_start|>role\ncontent<|im_end|>\n" per message, then the generation prompt; for hybrid
// thinking models with enable_thinking=false the prompt is followed by "<think>\n\n</think>\n\n".
std::string format_chatml(const std::vector<ChatMessage>& messages, const ChatOptions& options,
                          bool hybrid_thinking);

}  // namespace luka
