// Captures of kvpress's press mode and Quest (core/luka/cpu/press.cpp, quest.cpp) on a small random
// checkpoint, recorded by the CaptureRecorder as `luka capture` and the Studio record: each step's
// stored mode is the layer's, and its cover is the set the layer kept — compared, step by step and
// head by head, with the layer's own state read at that step (press: its kept prompt positions and,
// with compression during decoding, its rows; Quest: the positions it attended) — after the file
// round-trips through the reader, and again through h5py (check_capture.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "captures/pipeline.h"
#include "captures/reader.h"
#include "captures/recorder.h"
#include "captures/writer.h"
#include "core/luka/luka_attention.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/press/press.h"
#include "core/run/run_loop.h"
#include "core/util/sha256.h"
#include "tests/core/model/test_util.h"
#include "tests/process_util.h"

namespace fs = std::filesystem;

namespace luka::capture {
namespace {

using Set = std::vector<std::int64_t>;  // positions, ascending

// Per step (index step - 1), per model layer, per query head: a set of positions.
using Sets = std::vector<std::vector<std::vector<Set>>>;

// A run of `prompt` plus `max_new` tokens (greedy) under `config`, recorded to `out` (every layer
// and head), and what the layers held at each decode step: the positions each head attended
// (LukaStep::selected) and, from each layer's own state, the set it kept (`expected`, filled by
// `kept_by_state` after the step's attention, before the recorder reads the step).
struct MethodRun {
  Sets attended, expected;
  std::int64_t prompt_tokens = 0, steps = 0;
};

using KeptByState = std::function<Set(const LukaAttention& layer, std::int64_t step, std::int64_t T, std::int64_t head, std::int64_t group)>;

MethodRun record_run(const fs::path& model_dir, const LukaConfig& config, const std::vector<std::int32_t>& prompt, std::int64_t max_new,
                     const fs::path& out, const KeptByState& kept_by_state) {
  const auto model = Model::load(model_dir, LoadOptions{DType::kF32, 0});
  Decoder decoder(model);
  const auto layers = install_luka(decoder, config);
  const ModelConfig& mc = model->config();
  const std::int64_t n = static_cast<std::int64_t>(prompt.size());

  Manifest manifest;
  manifest.model_path = model_dir.string();
  manifest.architecture = mc.model_type;
  manifest.model_config = "{}";
  manifest.weights_hash = sha256_file(model_dir / "model.safetensors");
  manifest.tokenizer_hash = manifest.weights_hash;  // the checkpoint has no tokenizer
  manifest.luka_config = config.to_json();
  manifest.generation = "{}";
  manifest.device = "cpu";
  manifest.dtype = "f32";
  manifest.tool_version = "test";
  manifest.git_revision = "test";
  manifest.created = utc_timestamp();
  RecordSpec spec;
  manifest.record = spec.to_string();
  const Layout layout = make_layout(*model, config, spec, n, n + max_new);

  CaptureWriter writer(out);
  CapturePipeline pipeline({&writer});
  pipeline.set_parallel(model_parallel_for());
  std::vector<Token> prompt_tokens;
  for (const std::int32_t id : prompt) prompt_tokens.push_back({id, "t" + std::to_string(id) + " ", false, -1});
  pipeline.begin(manifest, layout, std::move(prompt_tokens), {});
  CaptureRecorder recorder(pipeline, layout, layers);

  struct Observer final : RunObserver {
    CaptureRecorder* recorder = nullptr;
    const std::vector<std::shared_ptr<LukaLayer>>* layers = nullptr;
    const KeptByState* kept = nullptr;
    std::int64_t group = 1;
    MethodRun run;
    std::vector<Token> pending;
    void prefill_begin(std::int64_t) override { recorder->start_prefill(); }
    void prefill_end(std::int64_t, double) override { recorder->end_prefill(); }
    bool token(const ChosenToken& t) override {
      pending.push_back({t.id, "t" + std::to_string(t.id) + " ", true, -1, static_cast<float>(t.probability)});
      return !t.stop;
    }
    void after_step(std::int64_t step, double) override {
      auto& attended = run.attended.emplace_back();
      auto& expected = run.expected.emplace_back();
      for (const auto& layer : *layers) {
        const LukaStep& ls = layer->last_step();
        attended.push_back(ls.selected);
        auto& per_head = expected.emplace_back();
        const auto* la = dynamic_cast<const LukaAttention*>(layer.get());
        for (std::int64_t h = 0; h < static_cast<std::int64_t>(ls.selected.size()); ++h)
          per_head.push_back(la ? (*kept)(*la, step, ls.tokens, h, group) : Set{});
      }
      recorder->record_step(step, std::move(pending));
      pending.clear();
      run.steps = step;
    }
  } observer;
  observer.recorder = &recorder;
  observer.layers = &layers;
  observer.kept = &kept_by_state;
  observer.group = mc.num_heads / mc.num_kv_heads;
  observer.run.prompt_tokens = n;

  RunLoop loop(decoder, layers, config);
  RunSettings settings;
  settings.max_new_tokens = max_new;
  settings.probabilities = true;
  loop.run(prompt, settings, &observer);
  pipeline.finish(std::move(observer.pending));
  return observer.run;
}

std::vector<std::int32_t> test_prompt(int n, int vocab) {
  std::vector<std::int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 53 + 7) % vocab);
  return ids;
}

// The positions of `cover` coded `code`.
Set positions(const std::vector<std::uint8_t>& cover, std::uint8_t code) {
  Set out;
  for (std::size_t t = 0; t < cover.size(); ++t)
    if (cover[t] == code) out.push_back(static_cast<std::int64_t>(t));
  return out;
}

// Every step, layer and head of `file`: the mode stored is `modes[layer]`, the cover codes only
// raw and dropped, its raw positions the layer's attended set and the set its state kept, and
// cover_size their count.
void expect_covers(const CaptureFile& file, const MethodRun& run, const std::vector<std::int8_t>& modes) {
  const Summary s = file.summary();
  ASSERT_TRUE(s.finished);
  ASSERT_EQ(s.complete_steps, run.steps);
  ASSERT_GT(run.steps, 0);
  for (std::int64_t step = 1; step <= run.steps; ++step) {
    const auto& attended = run.attended[static_cast<std::size_t>(step - 1)];
    const auto& expected = run.expected[static_cast<std::size_t>(step - 1)];
    for (const int layer : s.layout.layers) {
      const StepMetrics m = file.metrics(step, layer);
      EXPECT_EQ(m.mode, modes[static_cast<std::size_t>(layer)]) << "step " << step << " layer " << layer;
      EXPECT_EQ(mode_name(m.mode), std::string(mode_name(modes[static_cast<std::size_t>(layer)])));
      EXPECT_EQ(m.tokens, run.prompt_tokens + step);
      for (std::size_t j = 0; j < s.layout.heads.size(); ++j) {
        const int head = s.layout.heads[j];
        const std::vector<std::uint8_t> cover = file.cover(step, layer, head);
        ASSERT_EQ(static_cast<std::int64_t>(cover.size()), m.tokens);
        const Set raw = positions(cover, kRaw), dropped = positions(cover, kDropped);
        EXPECT_EQ(raw.size() + dropped.size(), cover.size()) << "codes other than raw and dropped at step " << step << " layer " << layer;
        const Set& want = expected[static_cast<std::size_t>(layer)][static_cast<std::size_t>(head)];
        EXPECT_EQ(raw, want) << "step " << step << " layer " << layer << " head " << head;
        EXPECT_EQ(raw, attended[static_cast<std::size_t>(layer)][static_cast<std::size_t>(head)]) << "step " << step << " layer " << layer;
        EXPECT_EQ(m.cover_size[j], static_cast<std::int32_t>(raw.size()));
      }
    }
  }
}

// check_capture.py: the documented h5py example, and the cover codes of every step by mode.
void expect_h5py_check(const fs::path& file, std::int64_t steps) {
  const fs::path python = LUKA_PYTHON;
  if (!fs::exists(python)) {
    std::printf("note: no %s; the h5py check is skipped\n", python.c_str());
    return;
  }
  const auto r = luka::test::run_program(python.string(), {(fs::path(LUKA_SOURCE_DIR) / "tests/captures/check_capture.py").string(), file.string(),
                                                            "--expect-steps", std::to_string(steps), "--expect-finished", "1"},
                                         luka::test::test_dir("capture_methods"));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("check_capture: OK"), std::string::npos) << r.out;
}

TEST(CaptureMethods, PressAndQuestLayersRecordTheirModeAndKeptSets) {
  // Layer 0: SnapKV keeping half the prompt (a window of 8 queries); layer 1: Quest with pages of
  // 4, the 2 best pages and a window of 4. GQA 2: the two heads of a KV head share a press set.
  const fs::path dir = test::checkpoint("qwen3-tied");
  const std::int64_t layers = 2;
  LukaConfig config = LukaConfig::preset("dense", layers);
  config.apply_override("layer=0,mode=press,press_method=snapkv,compression_ratio=0.5,press_window=8");
  config.apply_override("layer=1,mode=quest,quest_page_size=4,quest_pages=2,quest_window=4");
  const std::vector<std::int32_t> prompt = test_prompt(40, 512);
  const std::int64_t n = static_cast<std::int64_t>(prompt.size());
  const fs::path out = luka::test::test_dir("capture_methods") / "press_quest.h5";
  const MethodRun run = record_run(dir, config, prompt, 8, out, [n](const LukaAttention& la, std::int64_t, std::int64_t T, std::int64_t h, std::int64_t G) {
    if (la.layer() == 1) return la.last_step().selected[static_cast<std::size_t>(h)];  // Quest's step set is its state
    // Press: the KV head's kept prompt positions, then every position from the prompt's end on.
    EXPECT_EQ(la.press_prompt(), n);
    Set s = la.press_kept().at(static_cast<std::size_t>(h / G));
    for (std::int64_t t = n; t < T; ++t) s.push_back(t);
    return s;
  });
  const auto file = CaptureFile::open(out);
  expect_covers(*file, run, {kModePress, kModeQuest});

  // What the sets are, beside being the layers': the press keeps kvpress's budget of the prompt,
  // the same for both heads of a KV head; Quest attends to its window and at most 2 pages besides,
  // and leaves the rest out.
  press::Budget budget;
  budget.compression_ratio = 0.5;
  for (std::int64_t step = 1; step <= run.steps; ++step) {
    const std::int64_t T = n + step;
    for (const int head : {0, 1, 2, 3}) {
      const Set kept = positions(file->cover(step, 0, head), kRaw);
      EXPECT_EQ(std::count_if(kept.begin(), kept.end(), [n](std::int64_t t) { return t < n; }), budget.kept(n));
      EXPECT_EQ(kept, positions(file->cover(step, 0, head ^ 1), kRaw)) << "heads " << head << " and " << (head ^ 1) << " share a KV head";
      const Set quest = positions(file->cover(step, 1, head), kRaw);
      for (std::int64_t t = T - 4; t < T; ++t) EXPECT_TRUE(std::binary_search(quest.begin(), quest.end(), t)) << "window position " << t;
      EXPECT_LE(static_cast<std::int64_t>(quest.size()), 4 + 2 * 4);
      EXPECT_GT(static_cast<std::int64_t>(positions(file->cover(step, 1, head), kDropped).size()), 0);
    }
  }
  expect_h5py_check(out, run.steps);
}

TEST(CaptureMethods, CompressionDuringDecodingShowsAsEvictionsAtItsSteps) {
  // Every layer Knorm with compression during decoding: the prompt's cache kept whole (ratio 0),
  // then every 2 steps cut to 30 positions per KV head. The cover at each step is the layer's rows
  // (kvpress's cache) as the step found them, with the step's own position.
  const fs::path dir = test::checkpoint("qwen3-tied");
  LukaConfig config = LukaConfig::preset("dense", 2);
  config.apply_override("layers=all,mode=press,press_method=knorm,compression_ratio=0,press_interval=2,press_target_size=30");
  const std::vector<std::int32_t> prompt = test_prompt(32, 512);
  const std::int64_t n = static_cast<std::int64_t>(prompt.size());
  const fs::path out = luka::test::test_dir("capture_methods") / "decoding.h5";
  // The rows after the previous step's compression, per layer; the prompt's kept set before step 1.
  std::vector<std::vector<Set>> rows_before(2);
  const MethodRun run = record_run(dir, config, prompt, 10, out, [&](const LukaAttention& la, std::int64_t, std::int64_t T, std::int64_t h, std::int64_t G) {
    auto& before = rows_before[static_cast<std::size_t>(la.layer())];
    if (before.empty()) {  // step 1: the prompt, kept whole
      before = la.press_kept();
      for (auto& set : before)
        for (std::int64_t t = la.press_prompt(); t < T - 1; ++t) set.push_back(t);
    }
    Set s = before.at(static_cast<std::size_t>(h / G));
    s.push_back(T - 1);
    std::sort(s.begin(), s.end());
    if (h + 1 == static_cast<std::int64_t>(la.last_step().cover_size.size())) before = la.press_rows();  // the last head read: what the next step finds
    return s;
  });
  const auto file = CaptureFile::open(out);
  expect_covers(*file, run, {kModePress, kModePress});
  // Nothing is evicted before the first compression (after step 2); from then on, every step
  // attends to at most 30 + 2 positions, and what is evicted stays out.
  for (std::int64_t step = 1; step <= run.steps; ++step) {
    const Set dropped = positions(file->cover(step, 0, 0), kDropped);
    if (step <= 2) {
      EXPECT_TRUE(dropped.empty()) << "step " << step;
    } else {
      EXPECT_FALSE(dropped.empty()) << "step " << step;
      EXPECT_LE(n + step - static_cast<std::int64_t>(dropped.size()), 30 + 2) << "step " << step;
    }
    if (step > 1) {
      const Set earlier = positions(file->cover(step - 1, 0, 0), kDropped);
      EXPECT_TRUE(std::includes(dropped.begin(), dropped.end(), earlier.begin(), earlier.end())) << "step " << step;
    }
  }
  expect_h5py_check(out, run.steps);
}

}  // namespace
}  // namespace luka::capture
