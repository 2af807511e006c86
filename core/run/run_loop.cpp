#include "core/run/run_loop.h"

#include <algorithm>
#include <chrono>
#include <set>

#include <ATen/ATen.h>

#include "core/luka/luka_layer.h"
#include "core/model/decoder.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"

namespace luka {

const char* to_string(StopReason reason) {
  switch (reason) {
    case StopReason::kStopToken: return "stop_token";
    case StopReason::kMaxTokens: return "max_tokens";
    case StopReason::kObserver: return "observer";
  }
  return "?";
}

void check_context(std::int64_t context, std::int64_t position, std::int64_t prompt_tokens, std::int64_t max_new_tokens) {
  // The last chosen token is not fed: the cache holds at most position + prompt + max_new - 1.
  if (position + prompt_tokens + max_new_tokens - 1 <= context) return;
  fail("run", "the prompt (" + std::to_string(prompt_tokens) + " tokens" +
                  (position > 0 ? " after " + std::to_string(position) : std::string()) + ") plus " +
                  std::to_string(max_new_tokens) + " new tokens exceeds the model's context of " + std::to_string(context) + " tokens");
}

std::vector<std::int32_t> stop_token_ids(const std::vector<std::int64_t>& model_eos_ids, const Tokenizer& tokenizer) {
  std::set<std::int32_t> ids;
  for (const std::int64_t id : model_eos_ids) ids.insert(static_cast<std::int32_t>(id));
  if (const auto im_end = tokenizer.token_id("<|im_end|>")) ids.insert(*im_end);
  if (tokenizer.config().eos_token)
    if (const auto eos = tokenizer.token_id(*tokenizer.config().eos_token)) ids.insert(*eos);
  return {ids.begin(), ids.end()};
}

RunLoop::RunLoop(Decoder& decoder, std::vector<std::shared_ptr<LukaLayer>> layers, LukaConfig config)
    : decoder_(decoder), layers_(std::move(layers)), sampler_factory_(make_cpu_sampler), config_(std::move(config)) {}

void RunLoop::request_config(const LukaConfig& config) {
  std::lock_guard<std::mutex> lock(mu_);
  requested_ = config;
}

LukaConfig RunLoop::config() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requested_ ? *requested_ : config_;
}

void RunLoop::apply(const LukaConfig& config) {
  for (const auto& layer : layers_) layer->set_config(config.layers.at(static_cast<std::size_t>(layer->layer())));
  std::lock_guard<std::mutex> lock(mu_);
  config_ = config;
}

RunResult RunLoop::run(const std::vector<std::int32_t>& prompt, const RunSettings& s, RunObserver* observer) {
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  RunObserver none;
  RunObserver& obs = observer ? *observer : none;
  if (s.max_new_tokens < 0) fail("run", "max_new_tokens must be >= 0");
  if (!s.forced.empty() && static_cast<std::int64_t>(s.forced.size()) < s.max_new_tokens)
    fail("run", "teacher forcing needs a token for each of the max_new_tokens");
  check_schedule(config(), s.schedule);
  if (s.context_tokens < 0 || s.context_tokens > static_cast<std::int64_t>(prompt.size()))
    fail("run", "the context of " + std::to_string(s.context_tokens) + " tokens is not part of the prompt's " +
                    std::to_string(prompt.size()));
  if (engine_factory_) {
    if (!s.forced.empty() || !s.reset)
      fail("run", "the static decode step runs a new sequence without teacher forcing");
    if (s.sampling.temperature > 0)
      fail("run", "the static decode step chooses greedily: sampling at temperature " +
                      std::to_string(s.sampling.temperature) + " needs the decoder's step");
  }
  engine_description_.clear();
  RunResult result;
  result.prompt_tokens = static_cast<std::int64_t>(prompt.size());
  check_context(decoder_.model().config().max_position_embeddings, s.reset ? 0 : decoder_.position(), result.prompt_tokens,
                s.max_new_tokens);
  if (s.reset) decoder_.reset();
  const std::unique_ptr<TokenSampler> sampler = s.forced.empty() ? sampler_factory_(s.sampling) : nullptr;
  if (s.max_new_tokens == 0) return result;
  // The whole run's context at once: no step regrows the caches.
  decoder_.reserve(decoder_.position() + result.prompt_tokens + s.max_new_tokens);

  at::Tensor logits;
  if (!prompt.empty()) {
    obs.prefill_begin(result.prompt_tokens);
    const auto t0 = Clock::now();
    const auto split = static_cast<std::ptrdiff_t>(s.context_tokens);
    if (split > 0 && split < static_cast<std::ptrdiff_t>(prompt.size())) {
      decoder_.prefill(std::vector<std::int32_t>(prompt.begin(), prompt.begin() + split), /*all_logits=*/false);
      logits = decoder_.prefill(std::vector<std::int32_t>(prompt.begin() + split, prompt.end()), /*all_logits=*/false);
    } else {
      logits = decoder_.prefill(prompt, /*all_logits=*/false);
    }
    result.prefill_seconds = seconds(t0, Clock::now());
    obs.prefill_end(result.prompt_tokens, result.prefill_seconds);
  } else if (s.forced.empty()) {
    fail("run", "nothing to sample from: an empty prompt needs teacher forcing");
  }

  std::unique_ptr<DecodeEngine> engine;
  std::int32_t engine_token = -1;
  if (engine_factory_ && s.max_new_tokens > 1) {
    std::vector<LayerConfig> layers;
    if (!layers_.empty()) layers = config().layers;
    engine = engine_factory_(decoder_, result.prompt_tokens, s.max_new_tokens, layers);
  }
  // After a run through the engine the decoder's caches stand at the prompt: a later run starts anew.
  struct ResetAfter {
    Decoder* decoder = nullptr;
    ~ResetAfter() {
      if (decoder) decoder->reset();
    }
  } reset_after{engine ? &decoder_ : nullptr};

  for (std::int64_t index = 0;; ++index) {
    ChosenToken t;
    t.index = index;
    if (logits.defined()) obs.logits(index, logits);
    if (engine && index > 0) {
      t.id = engine_token;  // chosen on the engine's device, greedily
      if (s.probabilities) t.probability = at::softmax(logits.to(at::kDouble), 0)[t.id].item<double>();
      t.stop = std::binary_search(s.stop_ids.begin(), s.stop_ids.end(), t.id);
    } else if (!s.forced.empty()) {
      t.id = s.forced[static_cast<std::size_t>(index)];
      if (s.probabilities && logits.defined())
        t.probability = at::softmax(logits.to(at::kDouble), 0)[t.id].item<double>();
    } else {
      t.id = sampler->sample(logits, s.probabilities ? &t.probability : nullptr);
      t.stop = std::binary_search(s.stop_ids.begin(), s.stop_ids.end(), t.id);
    }
    const bool go_on = obs.token(t);
    if (t.stop) {
      result.stop_reason = StopReason::kStopToken;
      result.stop_id = t.id;
      break;
    }
    result.ids.push_back(t.id);
    if (!go_on) {
      result.stop_reason = StopReason::kObserver;
      break;
    }
    if (static_cast<std::int64_t>(result.ids.size()) >= s.max_new_tokens) {
      result.stop_reason = StopReason::kMaxTokens;
      break;
    }
    // Decode step `step` feeds this token: scheduled changes for it, then a live one — also one
    // requested while the observer waited before the step (the Studio, paused).
    const std::int64_t step = index + 1;
    for (const ScheduleEntry& e : s.schedule) {
      if (e.step != step) continue;
      LukaConfig next = config();
      next.apply_override(e.override_spec);
      apply(next);
      if (engine) engine->change(step, next.layers);
      obs.config_changed(step, e.override_spec, next);
    }
    const auto apply_live = [&] {
      std::optional<LukaConfig> live;
      {
        std::lock_guard<std::mutex> lock(mu_);
        live.swap(requested_);
      }
      if (!live) return;
      apply(*live);
      if (engine) engine->change(step, live->layers);
      obs.config_changed(step, "live", *live);
    };
    apply_live();
    if (!obs.before_step(step)) {
      result.stop_reason = StopReason::kObserver;
      break;
    }
    apply_live();
    const auto t1 = Clock::now();
    if (engine) {
      if (step == 1) engine->start(decoder_, prompt, t.id);
      engine_token = engine->step();  // reads the token back: the step's time includes its end
      logits = engine->logits();
    } else {
      logits = decoder_.decode(t.id);
    }
    const double dt = seconds(t1, Clock::now());
    result.decode_seconds += dt;
    ++result.decode_steps;
    obs.after_step(step, dt);
  }
  if (engine) engine_description_ = engine->describe();
  return result;
}

}  // namespace luka
