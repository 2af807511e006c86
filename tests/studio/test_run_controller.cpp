// The Studio's session layer without a window (what the GPU machines can run, having no display):
// load the default model on the device LUKA_TEST_DEVICE names (default auto), run an interwoven prompt,
// switch a layer's mode live while paused, and read the live capture: every step recorded, the
// switched layer's mode from the step after the switch, the device in the manifest; the prefill's
// progress in the status while it runs.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

#include "app/studio/data/run_controller.h"
#include "tests/process_util.h"
#include "captures/capture.h"

namespace luka::studio {
namespace {

namespace fs = std::filesystem;

using luka::test::wait_for;

// The default model, or the one LUKA_TEST_MODEL names (scripts/gpu_run.sh joins it there).
fs::path test_model() {
  const char* env = std::getenv("LUKA_TEST_MODEL");
  return env && *env ? fs::path(env) : fs::path(LUKA_SOURCE_DIR) / "models" / "default";
}
const fs::path kDefaultModel = test_model();

// Loads the test model on the CPU and waits until it is ready.
void load_on_cpu(RunController& s) {
  s.load_model(kDefaultModel, LoadOptions{}, parse_device("cpu"));
  ASSERT_TRUE(wait_for([&] { return !s.busy(); }, 120)) << "load timed out";
  ASSERT_EQ(s.status().state, RunState::kReady) << s.status().message;
}

// Switching a Kascade anchor to another mode leaves its reuse layers nothing to reuse: they become
// anchors themselves, so the next step runs; other layers keep their sources.
TEST(RunController, ALayerSwitchedAwayFromAKascadeAnchorLeavesNoOrphanReuse) {
  RunController s;
  LukaConfig cfg = LukaConfig::preset("dense", 4);
  cfg.apply_override("mode=kascade");
  cfg.apply_override("layers=1,kascade_source=0");
  cfg.apply_override("layers=3,kascade_source=2");
  s.set_config(cfg);
  s.set_layer_mode(2, AttentionMode::kLined);
  const LukaConfig after = s.config();
  EXPECT_EQ(after.layers[2].mode, AttentionMode::kLined);
  EXPECT_EQ(after.layers[3].kascade.source, -1);  // now an anchor
  EXPECT_EQ(after.layers[1].kascade.source, 0);   // its anchor is still one
  EXPECT_NO_THROW(validate_kascade_sources(after));
}

TEST(RunController, LiveSwitchWhilePausedAppliesAtTheNextStepAndIsRecorded) {
  const char* env = std::getenv("LUKA_TEST_DEVICE");
  const std::string device = env && *env ? env : "auto";
  const fs::path model = kDefaultModel;
  if (!fs::exists(model)) GTEST_SKIP() << "no model at " << model << " (scripts/setup.sh installs the default one)";
  RunController s;
  s.load_model(model, LoadOptions{}, parse_device(device));
  ASSERT_TRUE(wait_for([&] { return !s.busy(); }, 120)) << "load timed out";
  ASSERT_EQ(s.status().state, RunState::kReady) << s.status().message;
  if (device != "auto" && device != "cpu") {
    // The summary ends with the device the model runs on: "cuda" resolves to "cuda:N".
    const std::string& summary = s.status().model_summary;
    const std::size_t at = summary.rfind(" on " + device);
    ASSERT_NE(at, std::string::npos) << summary;
    const std::string rest = summary.substr(at + 4 + device.size());
    EXPECT_TRUE(rest.empty() || (device.find(':') == std::string::npos && rest.size() >= 2 && rest[0] == ':' &&
                                 std::all_of(rest.begin() + 1, rest.end(), [](char c) { return c >= '0' && c <= '9'; })))
        << summary;
  }

  InterwovenPrompt prompt;
  prompt.pattern = "ABAB";
  prompt.segments = {{"Tides", "#1f77b4", "The tide rises twice a day along the coast."},
                     {"Bread", "#ff7f0e", "Knead the dough for ten minutes."},
                     {"Tides", "#1f77b4", "Spring tides follow the new and full moon."},
                     {"Bread", "#ff7f0e", "Let the loaf rise in a warm place."}};
  RunRequest r;
  r.prompt = prompt;
  r.max_new_tokens = 9;
  r.start_paused = true;
  s.run(r);
  ASSERT_TRUE(wait_for([&] { return s.status().state == RunState::kPaused || s.status().state == RunState::kError; }, 120));
  ASSERT_EQ(s.status().state, RunState::kPaused) << s.status().message;
  s.step();
  s.step();
  ASSERT_TRUE(wait_for([&] { return s.status().steps_done == 2 && s.status().state == RunState::kPaused; }, 60));
  s.set_layer_mode(1, AttentionMode::kClustered);  // live, while paused: applies to step 3
  s.resume();
  ASSERT_TRUE(wait_for([&] { return !s.busy(); }, 120)) << s.status().message;
  EXPECT_EQ(s.status().steps_done, 8) << s.status().message;

  const auto view = s.view();
  ASSERT_TRUE(view);
  const capture::Summary sum = view->summary();
  EXPECT_EQ(sum.complete_steps, 8);
  if (device == "cpu") EXPECT_EQ(sum.manifest.device, "cpu");
  if (device.rfind("cuda", 0) == 0) EXPECT_EQ(sum.manifest.device.rfind("cuda:", 0), 0u) << sum.manifest.device;
  EXPECT_EQ(view->segments().size(), 4u);
  ASSERT_FALSE(sum.layout.heads.empty());
  for (std::int64_t step = 1; step <= 8; ++step) {
    EXPECT_EQ(view->metrics(step, 1).mode, step <= 2 ? capture::kModeDense : capture::kModeClustered)
        << "layer 1 at step " << step;
    EXPECT_EQ(view->metrics(step, 0).mode, capture::kModeDense) << "layer 0 at step " << step;
    // Every recorded row is a distribution over the step's tokens.
    const std::vector<float> row = view->row(step, 0, sum.layout.heads[0]);
    double total = 0;
    for (const float x : row) total += x;
    EXPECT_NEAR(total, 1.0, 1e-2) << "step " << step;
  }
}

// luka studio --static-step: a live run whose decode steps the static step issues records what the
// decoder's steps record, a live switch while paused included (it reaches the engine before the
// next step): the same tokens, modes and covers, rows within one half-precision step. A run that
// samples takes the decoder's step, and the status says so.
// The controller `s` has its model loaded; `engine` is the step engine compared with the decoder's.
void expect_engine_records_as_the_decoder(RunController& s, StepEngine engine_kind) {
  InterwovenPrompt prompt;
  prompt.pattern = "AB";
  prompt.segments = {{"Tides", "#1f77b4", "The tide rises twice a day along the coast, and spring tides follow the moon."},
                     {"Bread", "#ff7f0e", "Knead the dough for ten minutes, then let the loaf rise in a warm place."}};
  const auto run = [&](StepEngine engine, double temperature) {
    LukaConfig config = LukaConfig::preset("clustered", 30);
    config.apply_override("page_size=4,tail=8,interval=4,top_k=2");
    s.set_config(config);
    s.set_step_engine(engine);
    RunRequest r;
    r.prompt = prompt;
    r.max_new_tokens = 10;
    r.start_paused = true;
    r.ignore_stop_tokens = true;
    r.sampling.temperature = temperature;
    s.run(r);
    EXPECT_TRUE(wait_for([&] { return s.status().state == RunState::kPaused || s.status().state == RunState::kError; }, 120));
    EXPECT_EQ(s.status().state, RunState::kPaused) << s.status().message;
    s.step();
    s.step();
    EXPECT_TRUE(wait_for([&] { return s.status().steps_done == 2 && s.status().state == RunState::kPaused; }, 60));
    s.set_layer_mode(3, AttentionMode::kLined);  // live, while paused: applies to step 3
    s.resume();
    EXPECT_TRUE(wait_for([&] { return !s.busy(); }, 120)) << s.status().message;
    EXPECT_EQ(s.status().steps_done, 9) << s.status().message;
    return s.view();
  };
  const auto eager = run(StepEngine::kDecoder, 0);
  ASSERT_TRUE(eager);
  EXPECT_EQ(s.status().message.find('('), std::string::npos) << s.status().message;
  const auto engine = run(engine_kind, 0);
  ASSERT_TRUE(engine);
  EXPECT_NE(s.status().message.find(std::string("(") + to_string(engine_kind) + ")"), std::string::npos) << s.status().message;
  const capture::Summary a = eager->summary(), b = engine->summary();
  ASSERT_EQ(b.complete_steps, 9);
  ASSERT_EQ(a.complete_steps, b.complete_steps);
  const auto ta = eager->tokens(), tb = engine->tokens();
  ASSERT_EQ(ta.size(), tb.size());
  for (std::size_t i = 0; i < ta.size(); ++i) EXPECT_EQ(ta[i].id, tb[i].id) << "token " << i;
  double diff = 0;
  for (std::int64_t step = 1; step <= a.complete_steps; ++step)
    for (const int layer : a.layout.layers) {
      ASSERT_EQ(engine->metrics(step, layer).mode, eager->metrics(step, layer).mode) << "step " << step << " layer " << layer;
      for (const int head : a.layout.heads) {
        EXPECT_EQ(engine->cover(step, layer, head), eager->cover(step, layer, head)) << "step " << step << " layer " << layer;
        const std::vector<float> x = eager->row(step, layer, head), y = engine->row(step, layer, head);
        ASSERT_EQ(x.size(), y.size());
        for (std::size_t t = 0; t < x.size(); ++t) diff = std::max(diff, static_cast<double>(std::fabs(x[t] - y[t])));
      }
    }
  EXPECT_EQ(engine->metrics(2, 3).mode, capture::kModeClustered);
  EXPECT_EQ(engine->metrics(3, 3).mode, capture::kModeLined) << "the live switch reached the engine";
  EXPECT_LE(diff, 1.0 / 2048);
  run(engine_kind, 0.8);
  EXPECT_NE(s.status().message.find("the decoder's step"), std::string::npos) << s.status().message;
}

TEST(RunController, TheStaticStepRunsALiveSwitchAndRecordsWhatTheDecoderRecords) {
  if (!fs::exists(kDefaultModel)) GTEST_SKIP() << "no model at " << kDefaultModel;
  RunController s;
  load_on_cpu(s);
  expect_engine_records_as_the_decoder(s, StepEngine::kStatic);
}

// The same with the CUDA graph, on the GPU LUKA_TEST_DEVICE names (scripts/gpu_run.sh).
TEST(RunController, TheGraphRunsALiveSwitchAndRecordsWhatTheDecoderRecords) {
  const char* env = std::getenv("LUKA_TEST_DEVICE");
  if (!env || std::string(env).rfind("cuda", 0) != 0) GTEST_SKIP() << "LUKA_TEST_DEVICE names no GPU (the graph records on one)";
  if (!fs::exists(kDefaultModel)) GTEST_SKIP() << "no model at " << kDefaultModel;
  RunController s;
  s.load_model(kDefaultModel, LoadOptions{}, parse_device(env));
  ASSERT_TRUE(wait_for([&] { return !s.busy(); }, 120)) << "load timed out";
  ASSERT_EQ(s.status().state, RunState::kReady) << s.status().message;
  expect_engine_records_as_the_decoder(s, StepEngine::kGraph);
}

// An empty free-text prompt is an error the status line shows; it used to run the interwoven
// demo prompt instead, silently. The same for an interwoven prompt whose segments are empty.
TEST(RunController, EmptyPromptsAreRefusedNotReplaced) {
  if (!fs::exists(kDefaultModel)) GTEST_SKIP() << "no model at " << kDefaultModel << " (scripts/setup.sh installs the default one)";
  RunController s;
  ASSERT_NO_FATAL_FAILURE(load_on_cpu(s));
  RunRequest r;
  r.prompt.pattern = "AB";
  r.prompt.segments = {{"Tides", "#1f77b4", "The tide rises twice a day."}, {"Bread", "#ff7f0e", "Knead the dough."}};
  r.max_new_tokens = 3;
  r.free_text = " \n ";
  s.run(r);
  ASSERT_TRUE(wait_for([&] { return !s.busy(); }, 60));
  EXPECT_EQ(s.status().state, RunState::kError);
  EXPECT_NE(s.status().message.find("the free-text prompt is empty"), std::string::npos) << s.status().message;
  EXPECT_EQ(s.status().steps_done, 0);

  r.free_text.reset();
  for (auto& seg : r.prompt.segments) seg.text.clear();
  s.run(r);
  ASSERT_TRUE(wait_for([&] { return !s.busy(); }, 60));
  EXPECT_EQ(s.status().state, RunState::kError);
  EXPECT_NE(s.status().message.find("the prompt's segments are empty"), std::string::npos) << s.status().message;

  r.free_text = "The capital of France is";  // and a real prompt still runs
  s.run(r);
  ASSERT_TRUE(wait_for([&] { return !s.busy(); }, 120));
  EXPECT_NE(s.status().state, RunState::kError) << s.status().message;
  EXPECT_EQ(s.status().steps_done, 2) << s.status().message;
}

// The prefill's progress as the status reports it (the map's "computing" overlay shows it): held
// at a fraction, the status says how far it is, as a percentage with the time left, while the live
// capture has no step yet; released, the run finishes and the prefill's progress is gone.
TEST(RunController, PrefillProgressIsReportedWhileItRuns) {
  if (!fs::exists(kDefaultModel)) GTEST_SKIP() << "no model at " << kDefaultModel << " (scripts/setup.sh installs the default one)";
  RunController s;
  ASSERT_NO_FATAL_FAILURE(load_on_cpu(s));
  EXPECT_EQ(s.status().prefill_fraction, -1);
  RunRequest r;
  r.free_text = "The tide rises twice a day along the coast, and the harbour pilot waits for the flood before he takes a ship through the narrows.";
  r.max_new_tokens = 3;
  s.hold_prefill(0.5);
  s.run(r);
  ASSERT_TRUE(wait_for([&] { return s.status().prefill_held || !s.busy(); }, 120)) << s.status().message;
  const Status held = s.status();
  ASSERT_TRUE(held.prefill_held) << held.message;
  EXPECT_EQ(held.state, RunState::kRunning);
  EXPECT_GE(held.prefill_fraction, 0.5);
  EXPECT_LT(held.prefill_fraction, 1.0);
  char percent[32];
  std::snprintf(percent, sizeof percent, "%.0f%%, about ", 100 * held.prefill_fraction);
  EXPECT_EQ(held.message.rfind("prefill of " + std::to_string(held.prompt_tokens) + " tokens: ", 0), 0u) << held.message;
  EXPECT_NE(held.message.find(percent), std::string::npos) << held.message;
  EXPECT_EQ(held.message.substr(held.message.size() - 7), " s left") << held.message;
  const auto view = s.view();
  ASSERT_TRUE(view);
  EXPECT_EQ(view->summary().complete_steps, 0);
  EXPECT_FALSE(view->summary().finished);
  s.release_prefill();
  ASSERT_TRUE(wait_for([&] { return !s.busy(); }, 120)) << s.status().message;
  EXPECT_EQ(s.status().steps_done, 2) << s.status().message;
  EXPECT_EQ(s.status().prefill_fraction, -1);
  EXPECT_FALSE(s.status().prefill_held);
}

// B of the compare canvas: A's prompt and generated tokens fed again under another config.
// - Refused without a view, and while A runs.
// - Under A's own config, B reproduces A: the same tokens and probabilities, every row and cover
//   bit for bit.
// - Under dense, B attends from A's queries: its layer-0 rows equal A's dense shadow there (layer
//   0's queries and keys depend on the tokens alone), computed by another path (the shadow beside
//   A's clustered attention).
TEST(RunController, CompareRunFeedsATokensUnderAnotherConfig) {
  if (!fs::exists(kDefaultModel)) GTEST_SKIP() << "no model at " << kDefaultModel << " (scripts/setup.sh installs the default one)";
  RunController s;
  ASSERT_NO_FATAL_FAILURE(load_on_cpu(s));
  const std::int64_t L = static_cast<std::int64_t>(s.config().layers.size());
  s.run_compare(LukaConfig::preset("dense", L), "dense");
  EXPECT_TRUE(s.status().compare.failed);
  EXPECT_NE(s.status().compare.message.find("run a prompt or open a capture first"), std::string::npos) << s.status().compare.message;

  LukaConfig a_cfg = LukaConfig::preset("clustered", L);
  a_cfg.apply_override("dense_shadow=true");
  s.set_config(a_cfg);
  RunRequest r;
  std::string text;  // past the clustered tail, so that pages form
  for (int i = 1; i <= 12; ++i)
    text += "Entry " + std::to_string(i) + ": the keeper lit the lamp at dusk, wound the clockwork and logged the wind. ";
  r.free_text = text;
  r.max_new_tokens = 8;
  r.ignore_stop_tokens = true;
  r.start_paused = true;
  s.run(r);
  ASSERT_TRUE(wait_for([&] { return s.status().state == RunState::kPaused || !s.busy(); }, 120)) << s.status().message;
  s.run_compare(LukaConfig::preset("dense", L), "dense");
  EXPECT_TRUE(s.status().compare.failed);
  EXPECT_NE(s.status().compare.message.find("the run is not over"), std::string::npos) << s.status().compare.message;
  s.resume();
  ASSERT_TRUE(wait_for([&] { return !s.busy(); }, 120)) << s.status().message;
  const auto a = s.view();
  ASSERT_TRUE(a);
  const capture::Summary as = a->summary();
  ASSERT_EQ(as.complete_steps, 7);
  ASSERT_GT(as.layout.prompt_tokens, 200);
  const std::vector<capture::Token> at = a->tokens();

  const auto run_b = [&](const LukaConfig& cfg, const std::string& label) -> std::shared_ptr<const capture::CaptureView> {
    s.run_compare(cfg, label);
    EXPECT_FALSE(s.status().compare.failed) << s.status().compare.message;
    // Generous: a hang fails it, a loaded machine (2 cores shared with other tests) must not.
    EXPECT_TRUE(wait_for([&] { return !s.busy(); }, 600)) << s.status().compare.message;
    const Status st = s.status();
    EXPECT_FALSE(st.compare.running);
    EXPECT_FALSE(st.compare.failed) << st.compare.message;
    EXPECT_EQ(st.compare.steps_done, 7) << st.compare.message;
    EXPECT_EQ(st.compare.label, label);
    const auto b = s.compare_view();
    EXPECT_TRUE(b && b != a);
    return b;
  };
  const auto same_tokens = [&](const capture::CaptureView& b, bool same_probabilities) {
    const std::vector<capture::Token> bt = b.tokens();
    ASSERT_EQ(bt.size(), at.size());
    for (std::size_t i = 0; i < at.size(); ++i) {
      EXPECT_EQ(bt[i].id, at[i].id) << "token " << i;
      EXPECT_EQ(bt[i].generated, at[i].generated) << "token " << i;
      if (same_probabilities && at[i].generated) EXPECT_EQ(bt[i].prob, at[i].prob) << "token " << i;
    }
    EXPECT_EQ(b.summary().complete_steps, as.complete_steps);
    EXPECT_EQ(b.summary().layout.layers, as.layout.layers);
    EXPECT_EQ(b.summary().layout.heads, as.layout.heads);
  };

  // B under A's config: A again.
  const auto same = run_b(a_cfg, "same");
  ASSERT_TRUE(same);
  same_tokens(*same, true);
  EXPECT_EQ(s.view(), a);  // A stays the view
  for (std::int64_t step = 1; step <= 7; ++step)
    for (const int layer : {0, 13, static_cast<int>(L) - 1})
      for (const int head : as.layout.heads) {
        EXPECT_EQ(same->row(step, layer, head), a->row(step, layer, head)) << step << " " << layer << " " << head;
        EXPECT_EQ(same->cover(step, layer, head), a->cover(step, layer, head)) << step << " " << layer << " " << head;
      }

  // B under dense: A's queries, dense attention.
  const auto dense = run_b(LukaConfig::preset("dense", L), "dense");
  ASSERT_TRUE(dense);
  same_tokens(*dense, false);
  double worst = 0;
  std::size_t differing_last = 0;
  for (std::int64_t step = 1; step <= 7; ++step) {
    EXPECT_EQ(dense->metrics(step, 13).mode, capture::kModeDense);
    EXPECT_EQ(a->metrics(step, 13).mode, capture::kModeClustered);
    for (const int head : as.layout.heads) {
      const std::vector<float> b_row = dense->row(step, 0, head), shadow = a->dense_row(step, 0, head);
      ASSERT_EQ(b_row.size(), shadow.size());
      for (std::size_t j = 0; j < b_row.size(); ++j) worst = std::max(worst, std::abs(static_cast<double>(b_row[j]) - shadow[j]));
      if (dense->row(step, static_cast<int>(L) - 1, head) != a->row(step, static_cast<int>(L) - 1, head)) ++differing_last;
    }
  }
  EXPECT_LT(worst, 1e-5);
  EXPECT_GT(differing_last, 0u);  // and the methods differ where compression acts
}

}  // namespace
}  // namespace luka::studio
