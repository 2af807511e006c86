// A decode step that runs outside Decoder::decode (issue 44): the static step on reserved
// buffers (core/run/static_step.h), or that step recorded once as a CUDA graph and replayed
// (core/run/graphed_step.h, in the CUDA plugin). The run loop (core/run/run_loop.h) takes one for
// greedy runs: after the decoder's prefill the engine takes its caches over, and each step feeds
// the last chosen token and chooses the next on the engine's device.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/luka/config.h"

namespace at {
class Tensor;
}

namespace luka {

class Decoder;

class DecodeEngine {
 public:
  virtual ~DecodeEngine() = default;
  // After decoder.prefill(prompt): copies its caches (and LuKA state) in; `first` is the token
  // chosen from the prefill's logits, the one the first step feeds.
  virtual void start(Decoder& decoder, const std::vector<std::int32_t>& prompt, std::int32_t first) = 0;
  // One decode step; returns the token it chose (greedy).
  virtual std::int32_t step() = 0;
  // The last step's logits (float32 [vocab], on the engine's device; a view: copy it to keep it).
  virtual at::Tensor logits() const = 0;
  // How the steps were issued, for --verbose.
  virtual std::string describe() const = 0;
};

// Makes an engine for a run of `prompt_tokens` then at most `max_new_tokens` steps, on `decoder`'s
// model with its LuKA layer configs (empty: plain attention). Throws luka::Error naming what the
// engine cannot run.
using DecodeEngineFactory = std::function<std::unique_ptr<DecodeEngine>(
    const Decoder& decoder, std::int64_t prompt_tokens, std::int64_t max_new_tokens, const std::vector<LayerConfig>& layers)>;

}  // namespace luka
