// Quest as a layer mode (core/luka/cpu/quest.cpp) and live switching to quest and to press mode's
// compression during decoding (core/luka/cpu/press.cpp), through the decoder on the random
// checkpoints. The reference is attention written here in ATen, independent of the modes' code:
// Quest's page bounds from per-page amin/amax and at::topk over them, a masked softmax; Knorm's
// decoding compression from at::linalg_vector_norm and at::topk. Prefill is exact causal
// attention on both sides, so every decode step's logits must agree within 1e-5 (fp32).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>

#include "core/luka/config.h"
#include "core/luka/luka_attention.h"
#include "core/model/decoder.h"
#include "core/model/model.h"

namespace fs = std::filesystem;
using namespace luka;

namespace {

constexpr double kTolerance = 1e-5;

fs::path checkpoint(const std::string& name) { return fs::path(LUKA_TEST_WORK) / "checkpoints" / name; }

// What the reference layer does at a decode step (1 = the first after the prefill).
struct RefStep {
  enum Kind { kDense, kQuest, kKnormDecoding } kind = kDense;
  std::int64_t page_size = 16, pages = 0, window = 1;  // quest
  std::int64_t interval = 1, target = 1;               // knorm decoding
};

// One layer's attention in plain ATen: exact causal at prefill, then per decode step what
// `schedule(step)` says. Knorm decoding keeps, per KV head, the positions it has not evicted;
// it starts the first time the schedule asks for it and counts its steps only while asked.
class ReferenceAttention final : public LayerAttention {
 public:
  explicit ReferenceAttention(std::function<RefStep(std::int64_t)> schedule) : schedule_(std::move(schedule)) {}
  std::vector<std::vector<std::int64_t>> last_attended;  // per query head, ascending

  at::Tensor forward(const AttentionInputs& in) override {
    const std::int64_t H = in.q.size(0), n = in.q.size(1), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
    const at::Tensor q = in.q.to(at::kDouble), k = in.k.to(at::kDouble).repeat_interleave(G, 0),
                     v = in.v.to(at::kDouble).repeat_interleave(G, 0);
    at::Tensor logits = at::matmul(q, k.transpose(1, 2)) * in.scale;  // [H, n, T]
    at::Tensor allowed;                                               // [H, n, T] bool
    if (n > 1) {
      const at::Tensor key = at::arange(T).view({1, T}), query = at::arange(in.q_pos0, in.q_pos0 + n).view({n, 1});
      allowed = key.le(query).unsqueeze(0).expand({H, n, T});
    } else {
      const RefStep s = schedule_(++step_);
      if (s.kind == RefStep::kQuest) {
        allowed = quest_mask(in, s).unsqueeze(1);
      } else if (s.kind == RefStep::kKnormDecoding) {
        allowed = knorm_mask(in, s).unsqueeze(1);
      } else {
        allowed = at::ones({H, 1, T}, at::kBool);
      }
      last_attended.assign(static_cast<std::size_t>(H), {});
      const at::Tensor a = allowed.squeeze(1).contiguous();
      const bool* on = a.const_data_ptr<bool>();
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t t = 0; t < T; ++t)
          if (on[h * T + t]) last_attended[static_cast<std::size_t>(h)].push_back(t);
    }
    const at::Tensor probs = at::softmax(logits.masked_fill(allowed.logical_not(), -INFINITY), -1);
    return at::matmul(probs, v).transpose(0, 1).reshape({n, H * D}).to(in.q.scalar_type());
  }
  void reset() override {
    step_ = knorm_steps_ = 0;
    kept_ = at::Tensor();
  }
  const char* name() const override { return "reference"; }

 private:
  // Quest from the paper: page p bounds q·k by Σ_c max(q_c·min_c, q_c·max_c); the `pages` highest
  // of the pages that begin before the window, and the window.
  static at::Tensor quest_mask(const AttentionInputs& in, const RefStep& s) {
    const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
    const std::int64_t P = (T + s.page_size - 1) / s.page_size, start = std::max<std::int64_t>(0, T - s.window);
    const at::Tensor q = in.q.to(at::kDouble).reshape({H, 1, D});
    const at::Tensor k = in.k.to(at::kDouble).repeat_interleave(G, 0);
    at::Tensor bounds = at::empty({H, P}, at::kDouble);
    for (std::int64_t p = 0; p < P; ++p) {
      const at::Tensor page = k.narrow(1, p * s.page_size, std::min(T, (p + 1) * s.page_size) - p * s.page_size);
      const at::Tensor lo = page.amin(1, true), hi = page.amax(1, true);  // [H, 1, D]
      bounds.select(1, p).copy_(at::maximum(q * lo, q * hi).sum({1, 2}));
    }
    at::Tensor mask = at::zeros({H, T}, at::kBool);
    mask.narrow(1, start, T - start).fill_(true);
    const std::int64_t candidates = (start + s.page_size - 1) / s.page_size;
    const std::int64_t take = std::min(s.pages, candidates);
    if (take > 0) {
      const at::Tensor top = std::get<1>(bounds.narrow(1, 0, candidates).topk(take, 1));
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t i = 0; i < take; ++i) {
          const std::int64_t p = top[h][i].item<std::int64_t>();
          mask[h].narrow(0, p * s.page_size, std::min(T, (p + 1) * s.page_size) - p * s.page_size).fill_(true);
        }
    }
    return mask;
  }

  // kvpress's DecodingPress over KnormPress: the step attends to what is kept and to itself; after
  // the step, every `interval` steps, each KV head keeps its `target` keys of smallest norm.
  at::Tensor knorm_mask(const AttentionInputs& in, const RefStep& s) {
    const std::int64_t H = in.q.size(0), T = in.k.size(1), KV = in.k.size(0), G = in.group_size;
    if (!kept_.defined()) kept_ = at::ones({KV, T - 1}, at::kBool);
    kept_ = at::cat({kept_, at::ones({KV, T - kept_.size(1)}, at::kBool)}, 1);  // positions since are kept
    const at::Tensor mask = kept_.repeat_interleave(G, 0).clone();
    if (++knorm_steps_ >= s.interval) {
      knorm_steps_ = 0;
      const at::Tensor norms = at::linalg_vector_norm(in.k.to(at::kDouble), 2, at::IntArrayRef{-1}, false);  // [KV, T]
      for (std::int64_t g = 0; g < KV; ++g) {
        const at::Tensor held = kept_[g].nonzero().flatten();
        if (held.size(0) <= s.target) continue;
        const at::Tensor keep = held.index_select(0, std::get<1>((-norms[g].index_select(0, held)).topk(s.target)));
        kept_[g].fill_(false);
        kept_[g].index_fill_(0, keep, true);
      }
    }
    (void)H;
    return mask;
  }

  std::function<RefStep(std::int64_t)> schedule_;
  std::int64_t step_ = 0, knorm_steps_ = 0;
  at::Tensor kept_;  // knorm decoding: [KV, T] kept positions
};

std::vector<std::int32_t> ids_for(const Model& m, int n) {
  std::vector<std::int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<std::int32_t>((i * 131 + 17) % m.config().vocab_size));
  return ids;
}

// Logits of every decode step after a prefill of `prompt` ids; before_step(i) runs before step i (1-based).
std::vector<at::Tensor> decode_logits(Decoder& d, const std::vector<std::int32_t>& ids, std::size_t prompt,
                                      const std::function<void(std::int64_t)>& before_step = {}) {
  std::vector<at::Tensor> out;
  d.prefill(std::vector<std::int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(prompt)));
  for (std::size_t i = prompt; i < ids.size(); ++i) {
    if (before_step) before_step(static_cast<std::int64_t>(i - prompt) + 1);
    out.push_back(d.decode(ids[i]));
  }
  return out;
}

double worst(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, (a[i] - b[i]).abs().max().item<double>());
  return w;
}

struct Model_ {
  const char* name;
  int prompt, steps;
};
// GQA 4 over 4 layers (1,024 positions), GQA 2 with tied embeddings, and Llama (GQA 2, llama3 RoPE).
const Model_ kModels[] = {{"qwen3-fp16-sharded", 300, 40}, {"qwen3-tied", 180, 40}, {"llama", 180, 40}};

class QuestMode : public ::testing::Test {
 protected:
  std::shared_ptr<const Model> load(const char* name) {
    const fs::path p = checkpoint(name);
    if (!fs::exists(p / "config.json")) return nullptr;
    return Model::load(p, LoadOptions{DType::kF32, 0});
  }
};

TEST_F(QuestMode, DecodeLogitsAndAttendedPositionsEqualAnAtenReference) {
  int models = 0;
  for (const Model_& m : kModels) {
    const auto model = load(m.name);
    if (!model) continue;
    ++models;
    SCOPED_TRACE(m.name);
    const std::int64_t L = model->config().num_layers;
    const auto ids = ids_for(*model, m.prompt + m.steps);
    // Pages of 8, 5 of them, a window of 12 (not a page multiple, so a page straddles it).
    LukaConfig cfg = LukaConfig::preset("dense", L);
    cfg.apply_override("mode=quest,quest_page_size=8,quest_pages=5,quest_window=12");
    Decoder ours(model), ref(model);
    const auto layers = install_luka(ours, cfg);
    std::vector<std::shared_ptr<ReferenceAttention>> refs;
    for (std::int64_t l = 0; l < L; ++l) {
      refs.push_back(std::make_shared<ReferenceAttention>([](std::int64_t) {
        RefStep s;
        s.kind = RefStep::kQuest;
        s.page_size = 8;
        s.pages = 5;
        s.window = 12;
        return s;
      }));
      ref.set_attention(static_cast<int>(l), refs.back());
    }
    bool same_sets = true;
    std::vector<at::Tensor> a, b;
    ours.prefill(std::vector<std::int32_t>(ids.begin(), ids.begin() + m.prompt));
    ref.prefill(std::vector<std::int32_t>(ids.begin(), ids.begin() + m.prompt));
    for (std::size_t i = static_cast<std::size_t>(m.prompt); i < ids.size(); ++i) {
      a.push_back(ours.decode(ids[i]));
      b.push_back(ref.decode(ids[i]));
      for (std::int64_t l = 0; l < L; ++l)
        same_sets &= layers[static_cast<std::size_t>(l)]->last_step().selected ==
                     refs[static_cast<std::size_t>(l)]->last_attended;
    }
    EXPECT_TRUE(same_sets);
    EXPECT_LE(worst(a, b), kTolerance);
    // Quest's budget: at most 5 pages of 8 and the window of 12 per head.
    for (const auto& set : layers[0]->last_step().selected) EXPECT_LE(set.size(), 5u * 8u + 12u);
    EXPECT_LT(layers[0]->last_step().selected[0].size(), static_cast<std::size_t>(m.prompt));
  }
  if (models == 0) GTEST_SKIP() << "no fixture checkpoints under " << checkpoint("");
}

// A budget that keeps every page attends to every position: dense attention.
TEST_F(QuestMode, KeepingEveryPageEqualsDense) {
  const auto model = load(kModels[0].name);
  if (!model) GTEST_SKIP() << "no fixture checkpoint at " << checkpoint(kModels[0].name);
  const auto ids = ids_for(*model, 260);
  Decoder dense(model), quest(model);
  LukaConfig cfg = LukaConfig::preset("dense", model->config().num_layers);
  install_luka(dense, cfg);
  cfg.apply_override("mode=quest,quest_page_size=16,quest_pages=1000,quest_window=1");
  const auto layers = install_luka(quest, cfg);
  EXPECT_LE(worst(decode_logits(quest, ids, 220), decode_logits(dense, ids, 220)), kTolerance);
  EXPECT_EQ(layers[1]->last_step().selected[0].size(), 260u);
  EXPECT_EQ(layers[1]->last_step().mode, AttentionMode::kQuest);
}

// Live switching: layer 1 to press mode with Knorm compression during decoding (every 3 steps to
// 200 per KV head) from step 5 to 14, then dense, then press again from step 25 (its kept set
// resumes, the positions since added); layer 2 to quest from step 8 to 17 and from step 30. The
// overrides go through LukaConfig as --schedule's do. The reference layers run that schedule from
// the start.
TEST_F(QuestMode, SwitchingToQuestAndPressMidRunAndBackEqualsTheScheduleFromTheStart) {
  const auto model = load(kModels[0].name);
  if (!model) GTEST_SKIP() << "no fixture checkpoint at " << checkpoint(kModels[0].name);
  const std::int64_t L = model->config().num_layers;
  const auto ids = ids_for(*model, 260);
  const auto press_on = [](std::int64_t s) { return (s >= 5 && s < 15) || s >= 25; };
  const auto quest_on = [](std::int64_t s) { return (s >= 8 && s < 18) || s >= 30; };
  const std::map<std::int64_t, std::vector<std::string>> schedule = {
      {5, {"layers=1:mode=press,press_method=knorm,compression_ratio=0,press_interval=3,press_target_size=200"}},
      {8, {"layers=2:mode=quest,quest_page_size=8,quest_pages=4,quest_window=16"}},
      {15, {"layers=1:mode=dense"}},
      {18, {"layers=2:mode=dense"}},
      {25, {"layers=1:mode=press"}},
      {30, {"layers=2:mode=quest"}}};
  LukaConfig cfg = LukaConfig::preset("dense", L);
  Decoder ours(model), ref(model);
  const auto layers = install_luka(ours, cfg);
  for (std::int64_t l = 0; l < L; ++l) {
    ref.set_attention(static_cast<int>(l), std::make_shared<ReferenceAttention>([=](std::int64_t step) {
      RefStep s;
      if (l == 1 && press_on(step)) {
        s.kind = RefStep::kKnormDecoding;
        s.interval = 3;
        s.target = 200;
      } else if (l == 2 && quest_on(step)) {
        s.kind = RefStep::kQuest;
        s.page_size = 8;
        s.pages = 4;
        s.window = 16;
      }
      return s;
    }));
  }
  const auto got = decode_logits(ours, ids, 200, [&](std::int64_t step) {
    const auto it = schedule.find(step);
    if (it == schedule.end()) return;
    for (const std::string& spec : it->second) cfg.apply_override(spec);
    for (std::int64_t l = 0; l < L; ++l)
      layers[static_cast<std::size_t>(l)]->set_config(cfg.layers[static_cast<std::size_t>(l)]);
  });
  const auto expected = decode_logits(ref, ids, 200);
  EXPECT_LE(worst(got, expected), kTolerance);
  // The run ends in press and quest: fewer positions than the 259 there are, so the checks bite.
  EXPECT_EQ(layers[1]->last_step().mode, AttentionMode::kPress);
  EXPECT_LE(layers[1]->last_step().selected[0].size(), 202u);
  EXPECT_EQ(layers[2]->last_step().mode, AttentionMode::kQuest);
  EXPECT_LE(layers[2]->last_step().selected[0].size(), 4u * 8u + 16u);
}

}  // namespace
