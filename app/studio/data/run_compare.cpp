// Run B of the Studio's compare: the prompt and A's generated tokens run again under another
// config, into a capture of its own shown beside A's as it computes (RunController::run_compare).
#include "app/studio/data/run_controller.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "app/studio/data/run_budget.h"
#include "app/studio/data/run_controller_impl.h"
#include "captures/live.h"
#include "captures/reader.h"
#include "captures/recorder.h"
#include "captures/save_view.h"
#include "captures/pipeline.h"
#include "core/eval/calibration.h"
#include "core/eval/niah.h"
#include "core/generate/sampler.h"
#include "core/prompt/tokenized_prompt.h"
#include "core/run/run_loop.h"
#include "core/luka/luka_attention.h"
#include "core/model/decoder.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"
#include "core/util/version.h"

namespace luka::studio {

std::shared_ptr<const capture::CaptureView> RunController::compare_view() const {
  std::lock_guard<std::mutex> lock(mu_);
  return compare_view_;
}

void RunController::run_compare(const LukaConfig& config, const std::string& label) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::string why;
    if (status_.state == RunState::kNoModel || status_.state == RunState::kLoading) why = "load a model first";
    else if (status_.state == RunState::kRunning || status_.state == RunState::kPaused) why = "the run is not over: stop it or let it finish first";
    else if (!view_) why = "run a prompt or open a capture first";
    else if (status_.compare.running) why = "a compare run is in progress";
    status_.compare.label = label;
    status_.compare.failed = !why.empty();
    if (!why.empty()) {
      status_.compare.message = "B not run: " + why;
      return;
    }
    status_.compare.running = true;
    status_.compare.steps_done = status_.compare.steps_total = 0;
    status_.compare.message = "B (" + label + "): starting";
  }
  stop_ = false;
  post("compare run (" + label + ")", [this, config](TaskContext& ctx) {
    try {
      compare_job(config, ctx);
    } catch (const std::exception& e) {
      const std::string what = first_line(e.what());
      set_status([&](Status& s) {
        s.compare.running = false;
        s.compare.failed = true;
        s.compare.message = "B (" + s.compare.label + ") failed: " + what;
      });
    }
  }, /*listed=*/true);
}

void RunController::compare_job(const LukaConfig& config, TaskContext& ctx) {
  if (!impl_->model) fail("studio", "load a model first");
  const Model& model = *impl_->model;
  const Tokenizer& tok = *impl_->tokenizer;
  const std::shared_ptr<const capture::CaptureView> a = view();
  if (!a) fail("studio", "run a prompt or open a capture first");
  const capture::Summary sum = a->summary();
  const ModelConfig& mc = model.config();
  // The tokens must mean the same to this model, and the layers and heads must be there to record.
  capture::Manifest manifest = capture::make_manifest(model, tok, config);
  if (sum.manifest.tokenizer_hash != manifest.tokenizer_hash)
    fail("studio", "the view's tokens come from another tokenizer than the loaded model's");
  if (sum.layout.num_layers != mc.num_layers || sum.layout.num_heads != mc.num_heads || sum.layout.num_kv_heads != mc.num_kv_heads)
    fail("studio", "the view is of a model with other layers or heads than the loaded one");
  if (static_cast<std::int64_t>(config.layers.size()) != mc.num_layers)
    fail("studio", "config B has " + std::to_string(config.layers.size()) + " layers, the model " + std::to_string(mc.num_layers));
  if (const std::string why = impl_->device->supports(config); !why.empty()) fail("studio", "config B on " + impl_->device->name() + ": " + why);
  std::vector<capture::Token> prompt_tokens;
  std::vector<std::int32_t> prompt_ids, forced;
  for (const capture::Token& t : a->tokens()) {
    if (t.generated) {
      forced.push_back(t.id);
    } else {
      if (!forced.empty()) fail("studio", "the view's prompt continues after its generated tokens");
      prompt_ids.push_back(t.id);
      prompt_tokens.push_back(t);
    }
  }
  if (forced.empty()) fail("studio", "the view generated no tokens: there are no decode steps to compare");
  const std::int64_t n = static_cast<std::int64_t>(prompt_ids.size()), m = static_cast<std::int64_t>(forced.size());
  check_context(mc.max_position_embeddings, 0, n, m);

  Decoder decoder(impl_->model);
  const auto layers = impl_->device->install_luka(decoder, config);
  set_token_texts(layers, tok.all_token_bytes());
  capture::RecordSpec spec;
  try {
    spec = capture::RecordSpec::parse(sum.manifest.record);
  } catch (const Error&) {
    spec.map_cap = 4096;
  }
  const capture::Layout layout = capture::make_layout(model, config, spec, n, n + m);
  manifest.device = impl_->device->name();
  manifest.tool_version = LUKA_VERSION;
  manifest.git_revision = git_revision();
  manifest.record = spec.to_string();
  manifest.generation = nlohmann::json{{"teacher_forcing", "the generated tokens of the view it is compared with"},
                                       {"compared_with", status().source},
                                       {"max_new_tokens", m}}.dump();
  auto live = std::make_shared<capture::LiveCapture>();
  auto pipeline = live_pipeline(*live, *impl_->device);
  pipeline->begin(manifest, layout, std::move(prompt_tokens), a->segments());
  capture::CaptureRecorder recorder(*pipeline, layout, layers);
  set_status([&](Status& s) {
    s.compare.steps_total = m - 1;
    s.compare.message = "B (" + s.compare.label + "): prefill of " + std::to_string(n) + " tokens";
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    compare_view_ = live;
  }

  // Records B's steps; ends at stop() or when the Studio closes.
  struct Observer final : capture::RecordingObserver {
    RunController& controller;
    capture::CapturePipeline& pipeline;
    TaskContext& task;
    std::int64_t steps_total;
    Observer(RunController& s, capture::CaptureRecorder& r, capture::CapturePipeline& p, const Tokenizer& t, TaskContext& c, std::int64_t total)
        : RecordingObserver(&r, [&t](std::int32_t id) { return t.token_bytes(id); }), controller(s), pipeline(p), task(c),
          steps_total(total) {}
    bool ended() const {
      std::lock_guard<std::mutex> lock(controller.mu_);
      return controller.stop_ || controller.quit_;
    }
    bool token(const ChosenToken& t) override {
      RecordingObserver::token(t);  // teacher-forced: no stop token ends B
      return !ended();
    }
    bool before_step(std::int64_t) override { return !ended(); }
    void after_step(std::int64_t step, double seconds) override {
      RecordingObserver::after_step(step, seconds);
      pipeline.drain();
      controller.set_status([&](Status& s) {
        s.compare.steps_done = step;
        s.compare.message = "B (" + s.compare.label + "): step " + std::to_string(step) + " of " + std::to_string(steps_total);
      });
      task.progress(steps_total > 0 ? static_cast<double>(step) / static_cast<double>(steps_total) : -1, "B: step " + std::to_string(step));
    }
  };
  RunLoop loop(decoder, layers, config);
  Observer obs(*this, recorder, *pipeline, tok, ctx, m - 1);
  RunSettings run;
  run.max_new_tokens = m;
  run.forced = forced;
  run.probabilities = true;
  const std::int64_t steps = loop.run(prompt_ids, run, &obs).decode_steps;
  pipeline->finish(std::move(obs.pending));
  set_status([&](Status& s) {
    s.compare.running = false;
    s.compare.steps_done = steps;
    s.compare.message = "B (" + s.compare.label + "): " + std::to_string(steps) + (steps < m - 1 ? " steps, stopped" : " steps") +
                        ", A's tokens fed to it";
  });
}

}  // namespace luka::studio
