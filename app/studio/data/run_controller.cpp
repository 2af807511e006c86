// Index of this file:
//   [SECTION] the controller's lanes, status and snapshots
//   [SECTION] the model: load, hold, cancel
//   [SECTION] captures: replay and save as
//   [SECTION] run control: pause, step, stop, the held prefill
//   [SECTION] a live run on the model lane

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
#include "core/run/static_step.h"
#include "core/luka/luka_attention.h"
#include "core/model/decoder.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/error.h"
#include "core/util/version.h"

namespace luka::studio {

namespace {

// The layers whose mode differs between two configs, as --schedule entries at `step`
// ("step=7:layers=15:mode=lined"), one per new mode; empty when no mode changed.
std::string mode_switches(const LukaConfig& before, const LukaConfig& after, std::int64_t step) {
  std::map<std::string, std::string> layers;  // new mode -> its layers, "3,15"
  for (std::size_t l = 0; l < after.layers.size() && l < before.layers.size(); ++l)
    if (after.layers[l].mode != before.layers[l].mode) {
      std::string& list = layers[luka::to_string(after.layers[l].mode)];
      list += (list.empty() ? "" : ",") + std::to_string(l);
    }
  std::string out;
  for (const auto& [mode, list] : layers)
    out += (out.empty() ? "" : ";") + ("step=" + std::to_string(step) + ":layers=" + list + ":mode=" + mode);
  return out;
}

// The keys `luka capture` writes, and the Studio's own: chat and the live config changes. The
// mode switches go in `schedule` as --schedule entries, so that `luka capture --schedule` can run
// them again; `live_changes` holds each config applied during the run in full.
nlohmann::json generation_of(const RunRequest& r, std::int64_t n, std::int64_t context_tokens) {
  const bool free = r.free_text.has_value();
  const std::string titled = r.prompt.title.empty() ? "" : " '" + r.prompt.title + "'";
  nlohmann::json generation = {{"prompt", free ? std::string("studio: free text")
                                               : "studio: interwoven prompt" + titled + " (pattern " + r.prompt.pattern + ")"},
                               {"prompt_tokens", n},
                               {"max_new_tokens", r.max_new_tokens},
                               {"temperature", r.sampling.temperature},
                               {"top_k", r.sampling.top_k},
                               {"top_p", r.sampling.top_p},
                               {"chat", r.chat},
                               {"ignore_eos", r.ignore_stop_tokens},
                               {"schedule", ""},
                               {"live_changes", nlohmann::json::array()}};
  if (r.query_agnostic) generation["query_agnostic_context_tokens"] = context_tokens;  // prefilled before the question
  if (const std::string asked = free ? std::string() : question_topic_label(r.prompt); !asked.empty())
    generation["question_topic"] = asked;  // the Topics tab's default decode topic
  return generation;
}

// What a run needs beyond the model (its KV cache, the live capture's maps and spill), against
// what the machine has: "" when it fits, else why not.
std::string over_budget(const Model& model, const capture::Layout& layout, std::int64_t n, std::int64_t max_new_tokens) {
  const ModelConfig& mc = model.config();
  const std::uint64_t elem = model.dtype() == DType::kF32 ? 4 : 2;
  const std::uint64_t kv_per_token = 2 * static_cast<std::uint64_t>(mc.num_layers * mc.num_kv_heads * mc.head_dim) * elem;
  const RunBudget budget = estimate_run(layout, static_cast<int>(mc.num_heads), n, max_new_tokens, kv_per_token,
                                        capture::LiveCapture::kDefaultMapMemory);
  const std::filesystem::path folder = capture::LiveCapture::spill_folder();
  return check_budget(budget, available_memory(), free_disk(folder), folder.string());
}

}  // namespace

// [SECTION] the controller's lanes, status and snapshots

// A run's capture pipeline into `live`, with its work on the model's threads; on the GPU the
// steps are compressed off the host thread, which bounds a step there (it launches every kernel).
std::unique_ptr<capture::CapturePipeline> live_pipeline(capture::LiveCapture& live, const Backend& device) {
  auto pipeline = std::make_unique<capture::CapturePipeline>(std::vector<capture::CaptureSink*>{&live});
  pipeline->set_parallel(capture::model_parallel_for());
  if (device.is_cuda()) pipeline->set_step_encoding(capture::CapturePipeline::StepEncoding::kWriter);
  return pipeline;
}

const char* to_string(RunState s) {
  switch (s) {
    case RunState::kNoModel: return "no model";
    case RunState::kLoading: return "loading";
    case RunState::kReady: return "ready";
    case RunState::kRunning: return "running";
    case RunState::kPaused: return "paused";
    case RunState::kError: return "error";
  }
  return "?";
}

RunController::RunController(TaskManager& tasks) : tasks_(tasks), impl_(std::make_unique<Impl>()) {}

RunController::RunController() : own_tasks_(std::make_unique<TaskManager>()), tasks_(*own_tasks_), impl_(std::make_unique<Impl>()) {}

RunController::~RunController() {
  std::vector<Task> mine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
    paused_ = false;
    mine = model_tasks_;
  }
  mine.push_back(save_task_);
  stop_ = true;
  cv_.notify_all();
  // Jobs not started yet are skipped; the running ones see quit_ or the cancel and return. They
  // use this object, so it outlives them.
  for (const Task& t : mine) t.cancel();
  for (const Task& t : mine) t.wait();
}

Task RunController::post(std::string name, std::function<void(TaskContext&)> job, bool listed) {
  TaskOptions o;
  o.lane = kModelLane;
  o.listed = listed;
  o.cancellable = false;  // stop() and cancel_load() are the model's cancel
  Task t = tasks_.submit(
      std::move(name),
      [this, job = std::move(job)](TaskContext& ctx) {
        try {
          job(ctx);
        } catch (const TaskCancelled&) {
        } catch (const std::exception& e) {
          const std::string what = first_line(e.what());
          set_status([&](Status& s) {
            s.state = impl_->model ? RunState::kError : RunState::kNoModel;
            s.message = what;
            s.error = what;
          });
        }
      },
      std::function<void(TaskResult<void>)>(), o);
  std::lock_guard<std::mutex> lock(mu_);
  model_tasks_.erase(std::remove_if(model_tasks_.begin(), model_tasks_.end(), [](const Task& x) { return x.finished(); }), model_tasks_.end());
  model_tasks_.push_back(t);
  return t;
}

void RunController::set_status(const std::function<void(Status&)>& f) {
  std::lock_guard<std::mutex> lock(mu_);
  f(status_);
}

Status RunController::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

std::shared_ptr<const capture::CaptureView> RunController::view() const {
  std::lock_guard<std::mutex> lock(mu_);
  return view_;
}

std::string RunController::output() const {
  std::lock_guard<std::mutex> lock(mu_);
  return output_;
}

bool RunController::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_.state == RunState::kLoading || status_.state == RunState::kRunning || status_.state == RunState::kPaused ||
         std::any_of(model_tasks_.begin(), model_tasks_.end(), [](const Task& t) { return !t.finished(); });
}

LukaConfig RunController::config() const {
  std::lock_guard<std::mutex> lock(mu_);
  return config_;
}

void RunController::set_layer_mode(int layer, AttentionMode mode) {
  std::lock_guard<std::mutex> lock(mu_);
  if (status_.replay) return;  // the capture's modes, until leave_replay()
  if (layer < 0 || static_cast<std::size_t>(layer) >= config_.layers.size()) return;
  config_.layers[static_cast<std::size_t>(layer)].mode = mode;
  // A Kascade layer whose source is no longer a Kascade anchor becomes an anchor itself.
  for (std::size_t l = 0; l < config_.layers.size(); ++l) {
    KascadeConfig& k = config_.layers[l].kascade;
    if (config_.layers[l].mode != AttentionMode::kKascade || k.source < 0) continue;
    const LayerConfig& source = config_.layers[static_cast<std::size_t>(k.source)];
    if (source.mode != AttentionMode::kKascade || source.kascade.source >= 0) k.source = -1;
  }
  config_dirty_ = true;
}

void RunController::set_config(const LukaConfig& config) {
  std::lock_guard<std::mutex> lock(mu_);
  if (status_.replay) return;
  config_ = config;
  config_dirty_ = true;
}

const char* to_string(StepEngine e) {
  switch (e) {
    case StepEngine::kDecoder:
      return "decoder";
    case StepEngine::kStatic:
      return "static step";
    case StepEngine::kGraph:
      return "CUDA graph";
  }
  return "?";
}

void RunController::set_step_engine(StepEngine engine) {
  std::lock_guard<std::mutex> lock(mu_);
  step_engine_ = engine;
}

StepEngine RunController::step_engine() const {
  std::lock_guard<std::mutex> lock(mu_);
  return step_engine_;
}

// [SECTION] the model: load, hold, cancel

void RunController::load_model(const std::filesystem::path& path, const LoadOptions& options, const DeviceRequest& request) {
  set_status([&](Status& s) {
    s.state = RunState::kLoading;
    s.message = "loading " + path.string();
  });
  load_task_ = post("loading " + path.string(), [this, path, options, request](TaskContext& ctx) {
    ctx.progress(-1, "loading " + path.filename().string());
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !hold_load_; });  // hold_load(): nothing but release_load() ends it
    }
    std::string note;
    std::shared_ptr<const Backend> device = open_backend(request, &note);
    LoadOptions placed = options;
    device->place(placed);
    auto tokenizer = std::make_unique<Tokenizer>(Tokenizer::load(path));
    auto model = Model::load(path, placed);
    if (ctx.cancelled()) {
      set_status([&](Status& s) {
        s.state = impl_->model ? RunState::kReady : RunState::kNoModel;
        s.message = "load of " + path.string() + " cancelled";
      });
      return;
    }
    const ModelConfig& c = model->config();
    impl_->model = model;
    impl_->tokenizer = std::move(tokenizer);
    impl_->device = device;
    impl_->model_path = path.string();
    {
      std::lock_guard<std::mutex> lock(mu_);
      // During a replay the layers show the capture's config; leave_replay() fits it to the model.
      if (!status_.replay) {
        config_ = LukaConfig::preset("dense", c.num_layers);
        config_dirty_ = true;
      }
    }
    set_status([&](Status& s) {
      // A capture being replayed stays on screen (and the run controls off) until leave_replay().
      Status kept = s;
      s = Status{};
      if (kept.replay) {
        s.replay = true;
        s.capture = kept.capture;
        s.prompt_tokens = kept.prompt_tokens;
        s.steps_done = kept.steps_done;
        s.steps_total = kept.steps_total;
      }
      s.saving = kept.saving;
      s.save_progress = kept.save_progress;
      s.save_failed = kept.save_failed;
      s.save_message = kept.save_message;
      s.saved_path = kept.saved_path;
      s.state = RunState::kReady;
      s.source = path.string();
      s.model_summary = c.model_type + ", " + std::to_string(c.num_layers) + " layers, " + std::to_string(c.num_heads) + "/" +
                        std::to_string(c.num_kv_heads) + " heads, " + luka::to_string(model->dtype()) +
                        (model->weight_format() == WeightFormat::kQuantized ? " (quantized weights)" : "") + ", on " + device->name();
      s.device = device->description();
      s.message = "model loaded (" + note + ")";
    });
  });
}

void RunController::hold_load() {
  std::lock_guard<std::mutex> lock(mu_);
  hold_load_ = true;
}

void RunController::release_load() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hold_load_ = false;
  }
  cv_.notify_all();
}

bool RunController::load_pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return load_task_.valid() && !load_task_.finished();
}

void RunController::cancel_load() {
  load_task_.cancel();  // a load not started yet never starts; one running is discarded when done
  set_status([&](Status& s) {
    if (s.state != RunState::kLoading) return;
    s.state = impl_->model ? RunState::kReady : RunState::kNoModel;
    s.message = "cancelling the load (it finishes in the background and is discarded)";
  });
}

// [SECTION] captures: replay and save as

void RunController::open_capture(const std::filesystem::path& path) {
  {
    // A run in progress ends first (the worker opens the file after it).
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.state == RunState::kRunning || status_.state == RunState::kPaused) {
      stop_ = true;
      paused_ = false;
    }
  }
  cv_.notify_all();
  post("opening " + path.filename().string(), [this, path](TaskContext& ctx) {
    ctx.progress(-1, path.string());
    std::shared_ptr<const capture::CaptureView> file = capture::CaptureFile::open(path);
    const capture::Summary sum = file->summary();
    {
      std::lock_guard<std::mutex> lock(mu_);
      view_ = file;
      output_.clear();
      for (const capture::Token& t : file->tokens())
        if (t.generated) output_ += t.piece;
      status_.replay = true;
      status_.source = path.string();
      status_.capture = path.string();
      status_.prompt_tokens = sum.layout.prompt_tokens;
      status_.steps_done = status_.steps_total = sum.complete_steps;
      status_.message = "replaying " + path.filename().string() + (sum.finished ? "" : " (cut off)");
      if (status_.state == RunState::kNoModel || status_.state == RunState::kError) status_.state = impl_->model ? RunState::kReady : RunState::kNoModel;
      try {
        config_ = LukaConfig::from_json(sum.manifest.luka_config, sum.layout.num_layers, "capture");
      } catch (const Error&) {
      }
    }
  }, /*listed=*/true);
}

void RunController::leave_replay() {
  post("leaving the replay", [this](TaskContext&) {
    const std::int64_t layers = impl_->model ? impl_->model->config().num_layers : 0;
    std::lock_guard<std::mutex> lock(mu_);
    if (!status_.replay) return;
    view_.reset();
    output_.clear();
    const std::string file = std::filesystem::path(status_.capture).filename().string();
    status_.replay = false;
    status_.capture.clear();
    status_.source = impl_->model_path;
    status_.prompt_tokens = status_.steps_done = status_.steps_total = 0;
    status_.message = "left the replay of " + file;
    // The capture's config runs next where it fits the model; a capture of another model's
    // layers gives way to the model's default.
    if (layers > 0 && static_cast<std::int64_t>(config_.layers.size()) != layers) {
      config_ = LukaConfig::preset("dense", layers);
      config_dirty_ = true;
    }
  });
}

void RunController::save_capture(const std::filesystem::path& path) {
  std::shared_ptr<const capture::CaptureView> view;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto refuse = [&](const std::string& why) {
      status_.save_failed = true;
      status_.save_message = why;
    };
    if (status_.saving) return refuse("a save is in progress: wait for it, or cancel it");
    if (!view_) return refuse("nothing to save: run a prompt or open a capture first");
    if (status_.state == RunState::kRunning && !status_.replay) return refuse("the run is computing: pause or stop it, then save");
    if (path.empty()) return refuse("give the capture a file name");
    view = view_;
    status_.saving = true;
    status_.save_failed = false;
    status_.save_progress = 0;
    status_.save_message = "saving " + path.string();
  }
  TaskOptions o;
  o.lane = kIoLane;
  o.listed = false;  // the prompt panel shows it, under its Save button
  save_task_ = tasks_.submit("saving " + path.filename().string(), [this, view, path](TaskContext& ctx) {
    capture::SaveOptions options;
    options.cancel = ctx.cancel_flag();
    options.progress = [this, &ctx](double f) {
      ctx.progress(f);
      set_status([&](Status& s) { s.save_progress = f; });
    };
    try {
      const capture::SaveResult r = capture::save_view(*view, path, options);
      char size[32];
      std::snprintf(size, sizeof size, "%.1f MB", static_cast<double>(r.bytes) / 1e6);
      set_status([&](Status& s) {
        s.saving = false;
        s.save_progress = 1;
        s.saved_path = path.string();
        s.save_message = "saved " + path.filename().string() + " (" + std::to_string(r.steps) + " steps, " + std::to_string(r.tokens) + " tokens, " + size + ")";
      });
    } catch (const std::exception& e) {
      const std::string what = first_line(e.what());
      set_status([&](Status& s) {
        s.saving = false;
        s.save_failed = true;
        s.save_message = "save failed: " + what;
      });
    }
  }, std::function<void(TaskResult<void>)>(), o);
}

void RunController::cancel_save() { save_task_.cancel(); }

// [SECTION] run control: pause, step, stop, the held prefill

void RunController::pause() {
  std::lock_guard<std::mutex> lock(mu_);
  paused_ = true;
}

void RunController::resume() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = false;
  }
  cv_.notify_all();
}

void RunController::step() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = true;
    ++step_credit_;
  }
  cv_.notify_all();
}

void RunController::stop() {
  stop_ = true;
  resume();
}

void RunController::hold_prefill(double fraction) {
  std::lock_guard<std::mutex> lock(mu_);
  hold_prefill_at_ = fraction;
}

void RunController::release_prefill() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hold_prefill_at_ = -1;
  }
  cv_.notify_all();
}

void RunController::run(const RunRequest& request) {
  stop_ = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = request.start_paused;
    step_credit_ = 0;
    status_.state = RunState::kRunning;
    status_.message = "starting";
  }
  post("run", [this, request](TaskContext& ctx) { run_job(request, ctx); });
}

// [SECTION] a live run on the model lane

// The run loop's observer: records the run into the live capture, shows the text, and waits
// between steps while paused (a step() grants one step); live mode changes go to the loop.
struct RunController::LiveRun final : capture::RecordingObserver {
  RunController& controller;
  capture::CapturePipeline& pipeline;
  const Tokenizer& tok;
  RunLoop& loop;
  const Backend& device;
  TaskContext& task;
  std::int64_t steps_total;
  capture::LiveCapture& live_capture;
  nlohmann::json& generation;
  LiveRun(RunController& s, capture::CaptureRecorder& r, capture::CapturePipeline& p, const Tokenizer& t, RunLoop& l, const Backend& d, TaskContext& c,
          std::int64_t total, capture::LiveCapture& live, nlohmann::json& g)
      : RecordingObserver(&r, [&t](std::int32_t id) { return t.token_bytes(id); }), controller(s), pipeline(p), tok(t), loop(l),
        device(d), task(c), steps_total(total), live_capture(live), generation(g) {}
  // A config applied before `step`: in the manifest's generation (its schedule and live changes).
  void note_change(std::int64_t step, const LukaConfig& before, const LukaConfig& after) {
    std::string& schedule = generation["schedule"].get_ref<std::string&>();
    const std::string switches = mode_switches(before, after, step);
    if (!switches.empty()) schedule += (schedule.empty() ? "" : ";") + switches;
    generation["live_changes"].push_back({{"step", step}, {"luka_config", nlohmann::json::parse(after.to_json())}});
    live_capture.set_generation(generation.dump());
  }
  void prefill_end(std::int64_t tokens, double seconds) override {
    RecordingObserver::prefill_end(tokens, seconds);
    controller.set_status([](Status& s) { s.prefill_fraction = -1; });
  }
  bool token(const ChosenToken& t) override {
    if (!RecordingObserver::token(t) || controller.stop_) return false;
    std::lock_guard<std::mutex> lock(controller.mu_);
    controller.output_ += pending.back().piece;
    return true;
  }
  bool before_step(std::int64_t step) override {
    std::unique_lock<std::mutex> lock(controller.mu_);
    if (controller.paused_ && controller.step_credit_ == 0) {
      controller.status_.state = RunState::kPaused;
      controller.status_.message = "paused after step " + std::to_string(step - 1);
    }
    controller.cv_.wait(lock, [&] { return !controller.paused_ || controller.step_credit_ > 0 || controller.stop_ || controller.quit_; });
    if (controller.stop_ || controller.quit_) return false;
    if (controller.step_credit_ > 0) --controller.step_credit_;
    controller.status_.state = RunState::kRunning;
    controller.status_.message = "decode step " + std::to_string(step);
    if (controller.config_dirty_) {
      controller.config_dirty_ = false;
      if (const std::string why = device.supports(controller.config_); why.empty()) {
        note_change(step, loop.config(), controller.config_);
        loop.request_config(controller.config_);
      } else {  // e.g. a CPU-only option on the GPU: the run keeps its config and says why
        controller.config_ = loop.config();
        controller.status_.message = "not applied on " + device.name() + ": " + why;
      }
    }
    return true;
  }
  void after_step(std::int64_t step, double seconds) override {
    RecordingObserver::after_step(step, seconds);
    pipeline.drain();  // the view shows each step as soon as it is done
    controller.set_status([&](Status& s) { s.steps_done = step; });
    task.progress(steps_total > 0 ? static_cast<double>(step) / static_cast<double>(steps_total) : -1, "decode step " + std::to_string(step));
  }
};

void RunController::run_job(RunRequest r, TaskContext& ctx) {
  if (!impl_->model) fail("studio", "load a model first");
  const Model& model = *impl_->model;
  const Tokenizer& tok = *impl_->tokenizer;
  // Free text has no segments; an interwoven prompt is assembled with its segments' spans. An
  // empty prompt is refused, never replaced by another.
  const bool free = r.free_text.has_value();
  if (free && r.free_text->find_first_not_of(" \t\r\n") == std::string::npos)
    fail("studio", "the free-text prompt is empty: type a prompt, or switch to the interwoven prompt");
  const AssembledPrompt a = free ? AssembledPrompt{*r.free_text, {}} : assemble(r.prompt);
  if (a.text.find_first_not_of(" \t\r\n") == std::string::npos) fail("studio", "the prompt's segments are empty: give them text");
  const std::vector<PromptSegment> no_segments;
  const TokenizedPrompt prompt = tokenize_prompt(tok, a.text, free ? no_segments : r.prompt.segments, a.spans, r.chat, "");
  const std::int64_t n = static_cast<std::int64_t>(prompt.ids.size());
  check_context(model.config().max_position_embeddings, 0, n, r.max_new_tokens);
  std::int64_t context_tokens = 0;  // query-agnostic: the ids before the question
  if (r.query_agnostic) {
    const std::string question = free ? std::string() : r.prompt.question;
    if (question.find_first_not_of(" \t\r\n") == std::string::npos)
      fail("studio", "a query-agnostic run needs the prompt builder's question: the context is compressed before it");
    context_tokens = eval::context_token_count(tok, prompt.text, prompt.text.rfind(question), prompt.ids);
  }

  Decoder decoder(impl_->model);
  LukaConfig cfg = config();
  if (static_cast<std::int64_t>(cfg.layers.size()) != model.config().num_layers) {  // a replayed capture's config, of another model
    cfg = LukaConfig::preset("dense", model.config().num_layers);
    std::lock_guard<std::mutex> lock(mu_);
    config_ = cfg;
  }
  const auto layers = impl_->device->install_luka(decoder, cfg);
  set_token_texts(layers, tok.all_token_bytes());
  {
    std::lock_guard<std::mutex> lock(mu_);
    config_dirty_ = false;
  }
  capture::RecordSpec spec;
  spec.map_cap = 4096;
  if (!r.record.empty()) {
    spec = capture::RecordSpec::parse(r.record);
    if (r.record.find("map_cap") == std::string::npos) spec.map_cap = 4096;
  }
  const capture::Layout layout = capture::make_layout(model, cfg, spec, n, n + r.max_new_tokens);
  // Refused (the last view stays) unless the user runs it anyway.
  if (const std::string why = over_budget(model, layout, n, r.max_new_tokens); !why.empty() && !r.force) {
    set_status([&](Status& st) {
      st.state = RunState::kReady;
      st.message = why;
      st.refused_for_resources = true;
    });
    return;
  }
  set_status([](Status& st) { st.refused_for_resources = false; });
  capture::Manifest manifest = capture::make_manifest(model, tok, cfg);
  manifest.device = impl_->device->name();
  manifest.tool_version = LUKA_VERSION;
  manifest.git_revision = git_revision();
  manifest.record = spec.to_string();
  manifest.seed = static_cast<std::int64_t>(r.sampling.seed);
  nlohmann::json generation = generation_of(r, n, context_tokens);
  manifest.generation = generation.dump();
  if (!r.calibration.empty()) {
    try {  // another model's calibration stays out of the capture (the Head scores tab says so)
      const eval::Calibration c = eval::parse_calibration(r.calibration, "calibration");
      if (c.num_layers == model.config().num_layers && c.num_heads == model.config().num_heads) manifest.calibration = r.calibration;
    } catch (const Error&) {
    }
  }
  auto live = std::make_shared<capture::LiveCapture>();
  auto pipeline = live_pipeline(*live, *impl_->device);
  std::vector<capture::Token> prompt_tokens;
  for (std::int64_t i = 0; i < n; ++i)
    prompt_tokens.push_back({prompt.ids[static_cast<std::size_t>(i)], tok.token_bytes(prompt.ids[static_cast<std::size_t>(i)]), false,
                             prompt.segment[static_cast<std::size_t>(i)]});
  pipeline->begin(manifest, layout, std::move(prompt_tokens), prompt.segments);
  capture::CaptureRecorder recorder(*pipeline, layout, layers);
  recorder.set_prefill_split(context_tokens);
  {
    std::lock_guard<std::mutex> lock(mu_);
    view_ = live;
    output_.clear();
    status_.replay = false;
    status_.capture.clear();
    status_.source = impl_->model_path;
    status_.prompt_tokens = n;
    status_.steps_done = 0;
    status_.steps_total = r.max_new_tokens - 1;
    status_.message = "prefill of " + std::to_string(n) + " tokens";
    status_.prefill_fraction = 0;
  }

  // Prefill progress, with the time left extrapolated from the time so far.
  const auto prefill_start = std::chrono::steady_clock::now();
  recorder.set_prefill_progress([this, n, prefill_start, &ctx](double f) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - prefill_start).count();
    char text[160];
    if (f > 0.02 && f < 1) std::snprintf(text, sizeof text, "prefill of %lld tokens: %.0f%%, about %.0f s left", static_cast<long long>(n), 100 * f,
                                         elapsed * (1 - f) / f);
    else std::snprintf(text, sizeof text, "prefill of %lld tokens: %.0f%%", static_cast<long long>(n), 100 * f);
    ctx.progress(f, text);
    std::unique_lock<std::mutex> lock(mu_);
    status_.prefill_fraction = f;
    status_.message = text;
    if (hold_prefill_at_ >= 0 && f >= hold_prefill_at_ && f < 1) {
      status_.prefill_held = true;
      cv_.wait(lock, [&] { return hold_prefill_at_ < 0 || stop_ || quit_; });
      status_.prefill_held = false;
    }
  });
  RunLoop loop(decoder, layers, cfg);
  const std::shared_ptr<const Backend> device = impl_->device;
  loop.set_sampler_factory([device](const SamplingParams& p) { return device->sampler(p); });
  const std::string engine_note = use_step_engine(loop, *device, r.sampling.temperature);
  LiveRun live_run(*this, recorder, *pipeline, tok, loop, *device, ctx, r.max_new_tokens - 1, *live, generation);
  RunSettings run;
  run.max_new_tokens = r.max_new_tokens;
  run.sampling = r.sampling;
  if (!r.ignore_stop_tokens) run.stop_ids = stop_token_ids(model.config().eos_token_ids, tok);
  run.probabilities = true;
  run.context_tokens = context_tokens;
  const std::int64_t steps = loop.run(prompt.ids, run, &live_run).decode_steps;
  std::vector<capture::Token> pending = std::move(live_run.pending);
  pipeline->finish(std::move(pending));
  set_status([&](Status& s) {
    s.state = RunState::kReady;
    s.steps_done = steps;
    s.message = (stop_ ? "stopped after " + std::to_string(steps) + " steps" : "done: " + std::to_string(steps) + " decode steps") +
                engine_note;
  });
}

// The step engine chosen for the runs, set on `loop`; returns what the status adds (a run that
// samples takes the decoder's step, since the engines choose greedily).
std::string RunController::use_step_engine(RunLoop& loop, const Backend& device, double temperature) {
  const StepEngine engine = step_engine();
  if (engine == StepEngine::kDecoder) return "";
  if (temperature > 0)
    return std::string(" (the decoder's step: the ") + to_string(engine) + " chooses greedily, this run samples)";
  if (engine == StepEngine::kGraph) {
    std::string why;
    DecodeEngineFactory graph = device.graph_engine(&why);
    if (!graph) fail("studio", "--graph: " + why);
    loop.set_decode_engine(std::move(graph));
  } else {
    if (device.is_cuda()) fail("studio", "--static-step runs on the CPU; on a GPU the static step runs recorded: --graph");
    loop.set_decode_engine(static_step_engine());
  }
  return std::string(" (") + to_string(engine) + ")";
}

}  // namespace luka::studio
