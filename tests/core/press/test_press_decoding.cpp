// Press mode's compression during decoding (press_interval, press_target_size; core/luka/cpu/press.cpp)
// against NVIDIA kvpress 0.5.5's DecodingPress end to end (tests/fixtures/kvpress_decoding_reference.py,
// made at test time; skipped with the reason without kvpress): the six random Qwen3 and Llama
// checkpoints of kvpress_reference.py, the prompt uncompressed, the continuation and kvpress's own
// greedy tokens decoded one at a time with every layer compressing every `interval` steps to
// `target_size`. After every step each KV head's kept positions must be kvpress's (where no two
// scores tie), the final cache's row order too, and the logits within 1e-4 (fp32). TOVA with
// interval 1 is TOVA's own per-step eviction. Each step's cover (LukaStep::selected) is what the
// previous step kept and the step's own position, so the evictions show in the cover timeline.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <nlohmann/json.hpp>

#include "core/luka/config.h"
#include "core/luka/luka_attention.h"
#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/util/npy.h"
#include "tests/core/press/kvpress_fixture.h"

namespace fs = std::filesystem;
using namespace luka;

namespace {

constexpr double kLogitTolerance = 1e-4;  // fp32, as the issue asks

at::Tensor load(const fs::path& path) { return luka::test::load_npy_tensor(path); }

fs::path reference_dir(std::string& why) {
  return luka::test::kvpress_reference_dir("kvpress_decoding_reference.py", "kvpress_decoding",
                                           "kvpress DecodingPress reference", why);
}

std::vector<std::int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<std::int32_t>>(); }

LayerConfig layer_of(const nlohmann::json& c) {
  LukaConfig one;
  one.layers.resize(1);
  one.set({0}, "mode", "press");
  one.set({0}, "press_method", c["method"].get<std::string>());
  one.set({0}, "compression_ratio", "0");
  one.set({0}, "press_interval", std::to_string(c["interval"].get<int>()));
  one.set({0}, "press_target_size", std::to_string(c["target_size"].get<int>()));
  LayerConfig l = one.layers[0];
  const nlohmann::json& p = c["params"];
  l.press.n_sink = p.value("n_sink", l.press.n_sink);
  l.press.window_size = p.value("window_size", l.press.window_size);
  l.press.kernel_size = p.value("kernel_size", l.press.kernel_size);
  l.press.n_future_positions = p.value("n_future_positions", l.press.n_future_positions);
  l.press.use_covariance = p.value("use_covariance", l.press.use_covariance);
  l.press.use_vnorm = p.value("use_vnorm", l.press.use_vnorm);
  l.press.epsilon = p.value("epsilon", l.press.epsilon);
  l.press.seed = p.value("seed", l.press.seed);
  return l;
}

std::vector<std::int32_t> greedy_of(const at::Tensor& logits) {
  std::vector<std::int32_t> out;
  for (std::int64_t i = 0; i + 1 < logits.size(0); ++i)
    out.push_back(static_cast<std::int32_t>(logits[i].argmax().item<std::int64_t>()));
  return out;
}

std::vector<std::int64_t> ones_of(const at::Tensor& row) {
  std::vector<std::int64_t> out;
  for (std::int64_t t = 0; t < row.size(0); ++t)
    if (row[t].item<float>() > 0.5f) out.push_back(t);
  return out;
}

class PressDecoding : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    dir_ = reference_dir(why);
    if (dir_.empty()) GTEST_SKIP() << why;
    manifest_ = nlohmann::json::parse(std::ifstream(dir_ / "manifest.json"));
  }
  fs::path dir_;
  nlohmann::json manifest_;
};

TEST_F(PressDecoding, KeptSetsAndLogitsEqualKvpressDecodingPress) {
  std::map<std::string, std::shared_ptr<const Model>> models;
  std::map<std::string, nlohmann::json> model_json;
  for (const auto& m : manifest_["models"]) model_json[m["name"]] = m;
  double worst = 0;
  int cases = 0, compared = 0;
  std::vector<std::string> tie_cases;
  for (const auto& c : manifest_["cases"]) {
    const std::string name = c["model"], case_name = c["case"];
    SCOPED_TRACE(name + "/" + case_name);
    const nlohmann::json& m = model_json.at(name);
    auto& model = models[name];
    if (!model) model = Model::load(dir_ / name / "checkpoint", LoadOptions{DType::kF32, 0});
    const std::int64_t L = model->config().num_layers;
    LukaConfig config;
    config.layers.assign(static_cast<std::size_t>(L), layer_of(c));
    const at::Tensor ref = load(dir_ / name / case_name / "logits.npy");
    const at::Tensor kept = load(dir_ / name / case_name / "kept.npy");  // [steps, layers, kv, positions]
    const at::Tensor rows = load(dir_ / name / case_name / "rows.npy");  // [layers, kv, n]
    Decoder d(model);
    const auto layers = install_luka(d, config);
    d.prefill(ids_of(m["prompt_ids"]));
    std::vector<std::int32_t> steps = ids_of(m["continuation_ids"]);
    const std::vector<std::int32_t> greedy = greedy_of(ref);
    const std::size_t continuation = steps.size();
    steps.insert(steps.end(), greedy.begin(), greedy.end());
    ASSERT_EQ(static_cast<std::int64_t>(steps.size()), kept.size(0));
    std::vector<at::Tensor> logits;
    bool same = true, above_layer0 = true;  // every set equal; every set of layers 1 and up
    // Per layer and KV head, what the last step kept: the whole prompt before the first step.
    std::vector<std::int64_t> prompt(static_cast<std::size_t>(d.position()));
    std::iota(prompt.begin(), prompt.end(), 0);
    const std::vector<std::vector<std::int64_t>> whole(static_cast<std::size_t>(kept.size(2)), prompt);
    std::vector<std::vector<std::vector<std::int64_t>>> before(static_cast<std::size_t>(L), whole);
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const at::Tensor out = d.decode(steps[i]);
      if (i + 1 >= continuation) logits.push_back(out.to(at::kFloat).flatten());
      for (std::int64_t l = 0; l < L; ++l) {
        const auto& layer = dynamic_cast<const LukaAttention&>(*layers[static_cast<std::size_t>(l)]);
        const auto& held = layer.press_rows();
        ASSERT_EQ(static_cast<std::int64_t>(held.size()), kept.size(2));
        for (std::size_t h = 0; h < held.size(); ++h) {
          std::vector<std::int64_t> ours = held[h];
          std::sort(ours.begin(), ours.end());
          const bool equal = ours == ones_of(kept[static_cast<std::int64_t>(i)][l][static_cast<std::int64_t>(h)]);
          same &= equal;
          above_layer0 &= equal || l == 0;
          // The step's cover: what the previous step kept (the whole prompt at first) and itself.
          std::vector<std::int64_t> cover = before[static_cast<std::size_t>(l)][h];
          cover.push_back(d.position() - 1);
          const auto& selected = layer.last_step().selected;
          EXPECT_EQ(selected[h * selected.size() / held.size()], cover) << "layer " << l << " step " << i;
        }
        for (std::size_t h = 0; h < held.size(); ++h) {
          before[static_cast<std::size_t>(l)][h] = held[h];
          std::sort(before[static_cast<std::size_t>(l)][h].begin(), before[static_cast<std::size_t>(l)][h].end());
        }
        if (i + 1 == steps.size())
          for (std::size_t h = 0; h < held.size(); ++h) {
            std::vector<std::int64_t> order;
            for (std::int64_t j = 0; j < rows.size(2); ++j)
              order.push_back(static_cast<std::int64_t>(rows[l][static_cast<std::int64_t>(h)][j].item<float>()));
            // SnapKV pads its window's rows with one equal score, which torch.topk puts first in
            // no stated order: those rows are compared as a set, the rest row by row.
            const std::size_t tied = c["method"] == "snapkv" ? c["params"]["window_size"].get<std::size_t>() : 0;
            std::vector<std::int64_t> ours = held[h];
            std::sort(ours.begin(), ours.begin() + static_cast<std::ptrdiff_t>(std::min(tied, ours.size())));
            std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(std::min(tied, order.size())));
            same &= ours == order;
          }
      }
    }
    ++cases;
    // Sets (or a row order) decided by tied scores: streaming_llm's scores are all 1 or 0, and
    // torch.topk orders equal scores in no stated way; such a case is counted, not compared.
    if (!same) {
      tie_cases.push_back(name + "/" + case_name);
      const std::string method = c["method"];
      // Knorm: a token id that occurs twice has the same key in layer 0 at both positions up to
      // RoPE, which keeps norms, so its two scores tie there; the layers above differ nowhere.
      if (method == "knorm") EXPECT_TRUE(above_layer0);
      // Only these two methods' scores tie: streaming_llm's are all 1 or 0.
      EXPECT_TRUE(method == "knorm" || method == "streaming_llm");
      continue;
    }
    ++compared;
    const double err = (at::stack(logits) - ref).abs().max().item<double>();
    worst = std::max(worst, err);
    EXPECT_LE(err, kLogitTolerance);
  }
  std::string ties;
  for (const std::string& t : tie_cases) ties += " " + t;
  std::printf(
      "[kvpress DecodingPress] %d cases: %d with every step's kept sets and the final row order equal to kvpress's, "
      "their logits within %.3g of kvpress's at worst; cases with a set decided by tied scores:%s\n",
      cases, compared, worst, ties.empty() ? " none" : ties.c_str());
  EXPECT_GE(cases, 40);
  EXPECT_GE(compared, 24);  // tova (both intervals), random, snapkv and expected_attention on every checkpoint
}

}  // namespace
