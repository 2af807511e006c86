// Generation loop: prefill the prompt, then sample and decode until a stop id, the token limit,
// or the streaming callback says stop. LibTorch-free header (Decoder is only declared).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/generate/sampler.h"

namespace luka {

class Decoder;
class Tokenizer;

enum class StopReason { kStopToken, kMaxTokens, kCallback };
const char* to_string(StopReason reason);  // "stop_token", "max_tokens", "callback"

struct GenerateOptions {
  int max_new_tokens = 256;
  SamplingParams sampling;
  std::vector<std::int32_t> stop_ids;  // e.g. the config's EOS ids plus <|im_end|>
  bool reset = true;                   // start a new sequence (false: continue after position())
};

struct GenerateResult {
  std::vector<std::int32_t> ids;  // new tokens, the stop token excluded
  std::int64_t prompt_tokens = 0;
  StopReason stop_reason = StopReason::kMaxTokens;
  std::int32_t stop_id = -1;      // the stop token when stop_reason == kStopToken
  double prefill_seconds = 0;     // prompt forward pass (yields the first new token)
  double decode_seconds = 0;      // all decode() steps
  std::int64_t decode_steps = 0;  // decode() calls, for tokens/s = decode_steps / decode_seconds
};

// The ids that end a generation: the model config's EOS ids, <|im_end|> when the tokenizer has
// it, and the tokenizer config's eos_token; ascending, without repeats.
std::vector<std::int32_t> stop_token_ids(const std::vector<std::int64_t>& model_eos_ids, const Tokenizer& tokenizer);

// Called for each new token (not for the stop token); return false to stop.
using TokenCallback = std::function<bool(std::int32_t id)>;

// Throws luka::Error from the decoder (ids outside the vocabulary, prompt too long, ...).
GenerateResult generate(Decoder& decoder, const std::vector<std::int32_t>& prompt, const GenerateOptions& options,
                        const TokenCallback& on_token = {});

}  // namespace luka
