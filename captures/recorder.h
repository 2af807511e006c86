// Turns a running model's LuKA state into capture records (the LibTorch side of captures): the
// prefill attention of the recorded layers as it is computed, and after every decode step each
// recorded layer's LukaStep — mode, effective rows, cover, refined pages, fidelity, new pages.
// Runs on the model thread; the CapturePipeline does the rest on its I/O thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "captures/capture.h"
#include "captures/pipeline.h"
#include "core/luka/luka_layer.h"

namespace luka {
class Model;
class Tokenizer;
}  // namespace luka

namespace luka::capture {

// The recorded layers, heads and levels for a model, a LuKA config and a prompt length;
// `max_tokens` (prompt + new tokens, 0 if not known) sets the chunking of the step rows.
Layout make_layout(const Model& model, const LukaConfig& config, const RecordSpec& spec, std::int64_t prompt_tokens,
                   std::int64_t max_tokens = 0);

// Model identity for the manifest: path, architecture, config JSON, hashes of the weights'
// headers and the tokenizer source, dtype; the caller fills generation, seed, record and device.
// Runs a CapturePipeline's producer-side work on LibTorch's intra-op threads (the model's cores).
ParallelFor model_parallel_for();

// `created` is the time of the call (utc_timestamp).
Manifest make_manifest(const Model& model, const Tokenizer& tokenizer, const LukaConfig& config);
// Now, in UTC, as ISO 8601 to the second ("2026-11-29T04:05:06Z"): the manifest's `created`.
std::string utc_timestamp();

class CaptureRecorder {
 public:
  // `layers`: every layer's LukaLayer (install_luka's result, on any device), in layer order.
  CaptureRecorder(CapturePipeline& pipeline, Layout layout, std::vector<std::shared_ptr<LukaLayer>> layers);
  ~CaptureRecorder();

  // Before the prefill: observe the recorded layers' attention while the prompt runs.
  void start_prefill();
  // After it: stop observing and close the prefill part.
  void end_prefill();
  // Called on the model thread as the prefill's recorded rows arrive, with the fraction of them
  // done (rows over recorded layers, 0..1), for progress displays.
  void set_prefill_progress(std::function<void(double)> progress) { prefill_progress_ = std::move(progress); }
  // A query-agnostic prompt (RunSettings::context_tokens) is prefilled in two forwards: the first
  // `context_tokens` rows see only those keys. Before start_prefill; 0: one forward.
  void set_prefill_split(std::int64_t context_tokens) { prefill_split_ = context_tokens; }
  // After decode step `step` (1-based): `new_tokens` are the tokens appended since the last
  // record, the step's query token first.
  void record_step(std::int64_t step, std::vector<Token> new_tokens);
  // The model thread's time in record_step over the run so far (the pipeline's share included).
  double step_seconds() const { return step_seconds_; }

 private:
  CapturePipeline& pipeline_;
  Layout layout_;
  std::vector<std::shared_ptr<LukaLayer>> layers_;
  std::vector<std::size_t> pages_reported_;  // per recorded layer
  std::vector<std::uint16_t> halves_;        // prefill rows being handed over (reused)
  std::function<void(double)> prefill_progress_;
  std::vector<std::int64_t> prefill_rows_done_;  // per model layer: prompt rows handed over
  std::int64_t prefill_split_ = 0;               // set_prefill_split
  double step_seconds_ = 0;
};

}  // namespace luka::capture
