// A decode step that runs outside Decoder::decode (issue 44): the static step on reserved
// buffers (core/run/static_step.h), or that step recorded once as a CUDA graph and replayed
// (core/run/graphed_step.h, in the CUDA plugin). The run loop (core/run/run_loop.h) takes one for
// greedy runs: after the decoder's prefill the engine takes its caches over, and each step feeds
// the last chosen token and chooses the next on the engine's device.
#pragma once

#include <cstdint>
#include <cstdio>
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
  // Before decode step `step` (1-based): the layers' configs changed to `layers` (a --schedule
  // entry or a live change, which the decoder's LuKA layers have already taken). The engine
  // continues the sequence under them from the next step, as Decoder::decode would; it throws
  // luka::Error naming a change it cannot continue under. describe() reports what each change
  // cost.
  virtual void change(std::int64_t step, const std::vector<LayerConfig>& layers) = 0;
  // How the steps were issued, for --verbose.
  virtual std::string describe() const = 0;
};

// What a config change cost a decode engine: re-planning its step (reserving what the new
// configs need; the caches and LuKA state carried over) and, for a recorded step, recording it
// again at the next step.
struct EngineChange {
  std::int64_t step = 0;        // the decode step it came before
  std::string kind;             // to_string(StepChange): "none", "recapture", "replan"
  double plan_seconds = 0;      // the new step made and the state carried over
  double record_seconds = -1;   // the graph recorded again (-1: nothing is recorded)
};
// "before step 5: recapture, re-planned in 4.1 ms, recorded in 210.3 ms; ...", "" for none.
inline std::string describe_changes(const std::vector<EngineChange>& changes) {
  std::string out;
  for (const EngineChange& c : changes) {
    char line[160];
    std::snprintf(line, sizeof line, "%sbefore step %lld: %s, re-planned in %.1f ms", out.empty() ? "" : "; ",
                  static_cast<long long>(c.step), c.kind.c_str(), 1e3 * c.plan_seconds);
    out += line;
    if (c.record_seconds >= 0) {
      std::snprintf(line, sizeof line, ", recorded in %.1f ms", 1e3 * c.record_seconds);
      out += line;
    }
  }
  return out;
}

// Makes an engine for a run of `prompt_tokens` then at most `max_new_tokens` steps, on `decoder`'s
// model with its LuKA layer configs (empty: plain attention). Throws luka::Error naming what the
// engine cannot run.
using DecodeEngineFactory = std::function<std::unique_ptr<DecodeEngine>(
    const Decoder& decoder, std::int64_t prompt_tokens, std::int64_t max_new_tokens, const std::vector<LayerConfig>& layers)>;

}  // namespace luka
