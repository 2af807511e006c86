// The one run loop of a model under LuKA attention, shared by `luka generate`, `luka capture`,
// `luka perplexity` and the Studio: the prompt's prefill (or a continuation of the sequence), then
// decode steps, each fed the token sampled (or given, for teacher forcing) from the last logits;
// the scheduled and live config changes applied before the step they name; the stop conditions
// (stop ids, the token budget, an observer). What each command adds — streaming text, captures,
// scoring, pausing — it adds as a RunObserver. The loop is the same on any device: the layers
// and the token sampler come from the caller (core/device picks them).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/device/decode_engine.h"
#include "core/generate/sampler.h"
#include "core/luka/config.h"
#include "core/luka/schedule.h"

namespace at {
class Tensor;
}

namespace luka {

class Decoder;
class LukaLayer;
class Tokenizer;

// Throws luka::Error ("the prompt (N tokens) plus M new tokens exceeds the model's context of C
// tokens") when a run of `prompt_tokens` after `position` tokens, with up to `max_new_tokens`
// chosen, would pass the model's context. The run loop checks it before it starts; callers that
// create files first (captures) check it earlier.
void check_context(std::int64_t context, std::int64_t position, std::int64_t prompt_tokens, std::int64_t max_new_tokens);

enum class StopReason { kStopToken, kMaxTokens, kObserver };
const char* to_string(StopReason reason);  // "stop_token", "max_tokens", "observer"

// A token chosen from the logits of a forward: sampled, or given (teacher forcing).
struct ChosenToken {
  std::int32_t id = 0;
  std::int64_t index = 0;  // 0 for the first token after the prompt
  double probability = std::numeric_limits<double>::quiet_NaN();  // softmax(logits)[id], when asked for
  bool stop = false;       // one of the stop ids: the run ends, the token is not fed
};

class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // Around the prompt's prefill (not called for an empty prompt).
  virtual void prefill_begin(std::int64_t tokens) { (void)tokens; }
  virtual void prefill_end(std::int64_t tokens, double seconds) { (void)tokens, (void)seconds; }
  // The logits (float32 [vocab], on the model's device) the token `index` is chosen from.
  virtual void logits(std::int64_t index, const at::Tensor& logits) { (void)index, (void)logits; }
  // Each chosen token, the stop token included; false ends the run after it (it is not fed).
  virtual bool token(const ChosenToken& token) { return !token.stop; }
  // A scheduled or live change took effect before decode step `step`; `what` says which.
  virtual void config_changed(std::int64_t step, const std::string& what, const LukaConfig& config) {
    (void)step, (void)what, (void)config;
  }
  // Before decode step `step` (1-based) feeds the last token; false ends the run. The Studio
  // waits here while paused.
  virtual bool before_step(std::int64_t step) { (void)step; return true; }
  virtual void after_step(std::int64_t step, double seconds) { (void)step, (void)seconds; }
};

struct RunSettings {
  std::int64_t max_new_tokens = 128;   // tokens chosen at most, the stop token not counted
  SamplingParams sampling;             // greedy by default
  std::vector<std::int32_t> stop_ids;  // ascending (stop_token_ids gives them so)
  std::vector<ScheduleEntry> schedule;
  std::vector<std::int32_t> forced;    // teacher forcing: these tokens are fed, in order, instead of sampled ones
  bool probabilities = false;          // fill ChosenToken::probability
  bool reset = true;                   // a new sequence; false continues at the decoder's position
  // Query-agnostic (kvpress's evaluation): the prompt's first context_tokens ids are prefilled as
  // a forward of their own, so press layers compress them before the rest (the question) is seen,
  // which is prefilled after them. 0: the prompt in one forward.
  std::int64_t context_tokens = 0;
};

struct RunResult {
  std::vector<std::int32_t> ids;  // chosen tokens, the stop token excluded
  std::int64_t prompt_tokens = 0;
  StopReason stop_reason = StopReason::kMaxTokens;
  std::int32_t stop_id = -1;      // the stop token when stop_reason is kStopToken
  double prefill_seconds = 0;     // the prompt's forward pass (yields the first token)
  double decode_seconds = 0;      // all decode steps
  std::int64_t decode_steps = 0;
};

class RunLoop {
 public:
  using SamplerFactory = std::function<std::unique_ptr<TokenSampler>(const SamplingParams&)>;

  // `layers`: the decoder's LuKA layers in layer order (install_luka's result; may be empty for
  // plain attention) and `config`, the config they were installed with.
  RunLoop(Decoder& decoder, std::vector<std::shared_ptr<LukaLayer>> layers = {}, LukaConfig config = {});

  // Where tokens are sampled (default: the CPU sampler; the CUDA plugin gives its own).
  void set_sampler_factory(SamplerFactory factory) { sampler_factory_ = std::move(factory); }
  // Decode steps through `factory`'s engine (core/device/decode_engine.h) instead of
  // Decoder::decode: greedy runs of a new sequence without teacher forcing (run() refuses the
  // rest); scheduled and live changes go to the engine (DecodeEngine::change) after the layers
  // took them. The decoder is reset after such a run: its caches did not advance. An empty
  // factory goes back to Decoder::decode.
  void set_decode_engine(DecodeEngineFactory factory) { engine_factory_ = std::move(factory); }
  // The last run's engine, as it describes itself ("" when the decoder ran the steps).
  const std::string& engine_description() const { return engine_description_; }

  // A live change: every layer takes `config` before the next decode step. Any thread.
  void request_config(const LukaConfig& config);
  // The config in force (with a requested change, the one about to be).
  LukaConfig config() const;

  // Prefills `prompt` (at position 0, or after the sequence so far with reset false) and runs
  // decode steps until a stop id, max_new_tokens, the forced tokens' end or an observer stops it.
  // Throws luka::Error from the decoder or a bad schedule entry (before anything runs).
  RunResult run(const std::vector<std::int32_t>& prompt, const RunSettings& settings, RunObserver* observer = nullptr);

 private:
  void apply(const LukaConfig& config);

  Decoder& decoder_;
  std::vector<std::shared_ptr<LukaLayer>> layers_;
  SamplerFactory sampler_factory_;
  DecodeEngineFactory engine_factory_;
  std::string engine_description_;
  mutable std::mutex mu_;
  LukaConfig config_;
  std::optional<LukaConfig> requested_;
};

// The ids that end a generation: the model config's EOS ids, <|im_end|> when the tokenizer has
// it, and the tokenizer config's eos_token; ascending, without repeats.
std::vector<std::int32_t> stop_token_ids(const std::vector<std::int64_t>& model_eos_ids, const Tokenizer& tokenizer);

}  // namespace luka
