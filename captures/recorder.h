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
#include "core/run/run_loop.h"

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

// The run loop's observer that records a run: the recorder's prefill around the run's prefill, and
// each chosen token kept (its bytes and probability) until the decode step that feeds it is
// recorded with it. luka capture, eval's --capture-dir and the Studio's runs (A and B) record
// through it; what each adds (progress, the text, pausing, status) is a class of its own over it,
// calling these first. After the run `pending` holds the tokens chosen after the last step, for
// CapturePipeline::finish. Without a recorder (`luka capture --record none`) it only keeps them.
class RecordingObserver : public RunObserver {
 public:
  // `piece`: a token id's bytes (Tokenizer::token_bytes).
  RecordingObserver(CaptureRecorder* recorder, std::function<std::string(std::int32_t)> piece)
      : recorder_(recorder), piece_(std::move(piece)) {}
  void prefill_begin(std::int64_t tokens) override;
  void prefill_end(std::int64_t tokens, double seconds) override;
  // Keeps the token; false (the run ends) at a stop token, which is kept too.
  bool token(const ChosenToken& t) override;
  void after_step(std::int64_t step, double seconds) override;

  std::vector<Token> pending;

 private:
  CaptureRecorder* recorder_;
  std::function<std::string(std::int32_t)> piece_;
};

}  // namespace luka::capture
