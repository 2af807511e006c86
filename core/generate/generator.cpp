#include "core/generate/generator.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "core/model/decoder.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"

namespace luka {

const char* to_string(StopReason reason) {
  switch (reason) {
    case StopReason::kStopToken: return "stop_token";
    case StopReason::kMaxTokens: return "max_tokens";
    case StopReason::kCallback: return "callback";
  }
  return "?";
}

std::vector<std::int32_t> stop_token_ids(const std::vector<std::int64_t>& model_eos_ids, const Tokenizer& tokenizer) {
  std::set<std::int32_t> ids;
  for (const std::int64_t id : model_eos_ids) ids.insert(static_cast<std::int32_t>(id));
  if (const auto im_end = tokenizer.token_id("<|im_end|>")) ids.insert(*im_end);
  if (tokenizer.config().eos_token)
    if (const auto eos = tokenizer.token_id(*tokenizer.config().eos_token)) ids.insert(*eos);
  return {ids.begin(), ids.end()};
}

GenerateResult generate(Decoder& decoder, const std::vector<std::int32_t>& prompt, const GenerateOptions& options,
                        const TokenCallback& on_token) {
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  if (options.max_new_tokens < 0) fail("generate", "max_new_tokens must be >= 0");
  GenerateResult result;
  result.prompt_tokens = static_cast<std::int64_t>(prompt.size());
  if (options.reset) decoder.reset();
  Sampler sampler(options.sampling);
  if (options.max_new_tokens == 0) return result;

  const auto t0 = Clock::now();
  at::Tensor logits = decoder.prefill(prompt, /*all_logits=*/false);
  result.prefill_seconds = seconds(t0, Clock::now());

  const auto is_stop = [&](std::int32_t id) {
    return std::find(options.stop_ids.begin(), options.stop_ids.end(), id) != options.stop_ids.end();
  };
  for (;;) {
    const at::Tensor l = logits.contiguous();
    const std::int32_t id = sampler.sample(l.data_ptr<float>(), l.numel());
    if (is_stop(id)) {
      result.stop_reason = StopReason::kStopToken;
      result.stop_id = id;
      break;
    }
    result.ids.push_back(id);
    if (on_token && !on_token(id)) {
      result.stop_reason = StopReason::kCallback;
      break;
    }
    if (static_cast<int>(result.ids.size()) >= options.max_new_tokens) {
      result.stop_reason = StopReason::kMaxTokens;
      break;
    }
    const auto t1 = Clock::now();
    logits = decoder.decode(id);
    result.decode_seconds += seconds(t1, Clock::now());
    ++result.decode_steps;
  }
  return result;
}

}  // namespace luka
