// The per-layer seam of the decode step (core/run/step_kernels): the launch plan of one layer and
// of a whole step against the count written out by hand; the q|k|v and gate|up weights
// concatenated at load against the separate projections (fp32, bit for bit); and a whole decode
// step composed through the CPU ops against StaticDecodeStep on the same random Qwen3 (its logits
// and caches bit for bit, over several steps), which is what lets the static step call them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "core/model/decoder.h"
#include "core/model/model.h"
#include "core/model/weights.h"
#include "core/run/static_step.h"
#include "core/run/step_kernels.h"
#include "core/util/error.h"
#include "tests/random_checkpoint.h"

namespace luka {
namespace {

namespace fs = std::filesystem;

TEST(StepLaunches, OneLayerIsTenLaunchesWithNoStandaloneAdd) {
  const std::vector<KernelLaunch> layer = layer_launches(2);
  // norm, q|k|v GEMM, q/k norm + RoPE + append, 2 attention, o GEMM, norm, gate|up GEMM, SwiGLU, down GEMM.
  ASSERT_EQ(layer.size(), 10u);
  EXPECT_LE(layer.size(), kMaxLayerLaunches);
  int gemms = 0, norms = 0, attention = 0, qkv = 0, activation = 0;
  for (const KernelLaunch& k : layer) {
    gemms += k.kind == LaunchKind::kGemm;
    norms += k.kind == LaunchKind::kNorm;
    attention += k.kind == LaunchKind::kAttention;
    qkv += k.kind == LaunchKind::kQkvRope;
    activation += k.kind == LaunchKind::kActivation;
    EXPECT_NE(k.kind, LaunchKind::kStep) << k.what;
  }
  EXPECT_EQ(gemms, 4);
  EXPECT_EQ(norms, 2);
  EXPECT_EQ(attention, 2);
  EXPECT_EQ(qkv, 1);
  EXPECT_EQ(activation, 1);
  EXPECT_EQ(layer.front().kind, LaunchKind::kNorm);
  EXPECT_EQ(layer.back().kind, LaunchKind::kGemm);
  EXPECT_EQ(layer_launches(1).size(), 9u);
  EXPECT_THROW(layer_launches(0), Error);
}

TEST(StepLaunches, AQwen3SmallStepFitsTheGraphsNodeTarget) {
  // Qwen3-0.6B: 28 layers of 10, plus embedding and tables before, and final norm, lm_head,
  // argmax, the id, the step counter and the position after: 2 + 280 + 6 (issue 44: ≤ 300).
  const std::vector<KernelLaunch> step = step_launches(28, 2);
  EXPECT_EQ(step.size(), 288u);
  EXPECT_LE(step.size(), 300u);
  EXPECT_EQ(step_launches(36, 2).size(), 2u + 360u + 6u);  // Qwen3-4B
}

at::Tensor randn(std::vector<std::int64_t> shape, std::uint64_t seed) {
  at::manual_seed(seed);
  return at::randn(shape, at::kFloat);
}

TEST(ConcatenatedProjection, OneProductEqualsTheSeparateProductsBitForBit) {
  const std::int64_t in = 256;
  const at::Tensor q = randn({512, in}, 1), k = randn({128, in}, 2), v = randn({128, in}, 3);
  const at::Tensor h = randn({1, in}, 4);
  const ConcatenatedProjection c = concatenate_projections({q, k, v}, {}, "q|k|v");
  EXPECT_FALSE(c.bias.defined());
  EXPECT_EQ(c.outs, (std::vector<std::int64_t>{512, 128, 128}));
  const at::Tensor fused = at::mm(h, c.weight.t());
  EXPECT_TRUE(at::equal(fused.narrow(1, 0, 512), at::mm(h, q.t())));
  EXPECT_TRUE(at::equal(fused.narrow(1, 512, 128), at::mm(h, k.t())));
  EXPECT_TRUE(at::equal(fused.narrow(1, 640, 128), at::mm(h, v.t())));
}

TEST(ConcatenatedProjection, BiasesConcatenateWithZerosForAPartWithout) {
  const std::int64_t in = 64;
  const at::Tensor g = randn({96, in}, 5), u = randn({96, in}, 6), gb = randn({96}, 7);
  const at::Tensor h = randn({1, in}, 8);
  const ConcatenatedProjection c = concatenate_projections({g, u}, {gb, at::Tensor()}, "gate|up");
  ASSERT_TRUE(c.bias.defined());
  EXPECT_TRUE(at::equal(c.bias.narrow(0, 0, 96), gb));
  EXPECT_TRUE(at::equal(c.bias.narrow(0, 96, 96), at::zeros({96})));
  const at::Tensor fused = at::addmm(c.bias, h, c.weight.t());
  EXPECT_TRUE(at::equal(fused.narrow(1, 0, 96), at::addmm(gb, h, g.t())));
  EXPECT_TRUE(at::equal(fused.narrow(1, 96, 96), at::mm(h, u.t())));
}

TEST(ConcatenatedProjection, PartsThatDisagreeAreRefusedByName) {
  try {
    concatenate_projections({randn({4, 8}, 1), randn({4, 9}, 2)}, {}, "q|k|v");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q|k|v: part 1 differs"), std::string::npos) << e.what();
  }
  EXPECT_THROW(concatenate_projections({randn({4, 8}, 1)}, {randn({3}, 2)}, "gate|up"), Error);
}

// A decode step of the random Qwen3 composed through the CPU ops, with StaticDecodeStep's
// non-layer ops (embedding, masked attention over every reserved key, lm_head, argmax).
class SeamStep {
 public:
  SeamStep(const Decoder& d, std::int64_t context, std::int64_t position, std::int64_t token) {
    const Model& model = d.model();
    const ModelConfig& c = model.config();
    const ModelWeights& w = model.weights();
    t_ = reserve_step_tensors(model_shape(c, 4), c.rms_norm_eps, d.rope_frequencies(), at::TensorOptions(at::kFloat));
    t_.position.fill_(position);
    for (int l = 0; l < c.num_layers; ++l) {
      const LayerWeights& lw = w.layers[static_cast<std::size_t>(l)];
      StepLayer s;
      s.input_norm = lw.input_norm;
      s.post_norm = lw.post_attention_norm;
      s.q_norm = lw.q_norm;
      s.k_norm = lw.k_norm;
      s.q = lw.q_proj, s.k = lw.k_proj, s.v = lw.v_proj, s.o = lw.o_proj;
      s.gate = lw.gate_proj, s.up = lw.up_proj, s.down = lw.down_proj;
      s.q_b = lw.q_bias, s.k_b = lw.k_bias, s.v_b = lw.v_bias, s.o_b = lw.o_bias;
      s.gate_b = lw.gate_bias, s.up_b = lw.up_bias, s.down_b = lw.down_bias;
      s.k_cache = at::zeros({c.num_kv_heads, context, c.head_dim});
      s.v_cache = at::zeros({c.num_kv_heads, context, c.head_dim});
      s.k_cache.narrow(1, 0, position).copy_(d.cache(l).keys());
      s.v_cache.narrow(1, 0, position).copy_(d.cache(l).values());
      prepare_step_layer(s);
      layers_.push_back(s);
    }
    embed_ = w.embed_tokens;
    final_norm_ = w.final_norm;
    lm_head_ = w.lm_head;
    token_ = at::full({1}, token, at::kLong);
    key_positions_ = at::arange(context, at::kLong);
    scale_ = at::full({1}, static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim))));
    kernels_ = make_cpu_step_kernels(t_);
  }

  at::Tensor step() {
    const ModelShape& m = t_.shape;
    const std::int64_t H = m.heads, KV = m.kv_heads, D = m.head_dim, G = H / KV;
    at::index_select_out(t_.x, embed_, 0, token_);
    kernels_->rope_tables();
    const at::Tensor mask = at::gt(key_positions_, t_.position);
    kernels_->norm(layers_[0].input_norm);
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const StepLayer& s = layers_[l];
      const at::Tensor q = kernels_->qkv(s);
      at::Tensor scores = at::bmm(q.view({KV, G, D}), s.k_cache.transpose(1, 2)).view({H, -1});
      scores.mul_(scale_);
      scores.masked_fill_(mask, -std::numeric_limits<double>::infinity());
      const at::Tensor probs = at::_softmax(scores, 1, false);
      const at::Tensor att = at::bmm(probs.view({KV, G, -1}), s.v_cache);
      kernels_->residual_projection_norm(att.view({1, H * D}), s.o, s.o_b, s.post_norm);
      const at::Tensor a = kernels_->mlp_activation(s);
      kernels_->residual_projection_norm(a, s.down, s.down_b,
                                         l + 1 < layers_.size() ? layers_[l + 1].input_norm : final_norm_);
    }
    const at::Tensor logits = at::mm(t_.h, lm_head_.t());
    token_.copy_(logits.argmax(1));
    t_.position.add_(1);
    return logits[0];
  }
  const at::Tensor& k_cache(int l) const { return layers_[static_cast<std::size_t>(l)].k_cache; }
  const at::Tensor& v_cache(int l) const { return layers_[static_cast<std::size_t>(l)].v_cache; }

 private:
  StepTensors t_;
  std::vector<StepLayer> layers_;
  std::unique_ptr<StepKernels> kernels_;
  at::Tensor embed_, final_norm_, lm_head_, token_, key_positions_, scale_;
};

TEST(StepKernelsCpu, AStepThroughTheSeamEqualsTheStaticStepBitForBit) {
  c10::InferenceMode guard;
  const fs::path dir = fs::path(LUKA_TEST_WORK) / ("step-kernels-qwen3-" + std::to_string(::getpid()));
  const std::shared_ptr<const Model> model = Model::load(test::write_random_qwen3(dir), LoadOptions{});
  Decoder d(model);
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 24; ++i) prompt.push_back(static_cast<std::int32_t>((i * 97 + 5) % test::kRandomQwen3Vocab));
  constexpr std::int64_t kSteps = 6;
  const RunLength run{static_cast<std::int64_t>(prompt.size()), kSteps};
  d.reserve(run.context());
  const std::int64_t first = d.prefill(prompt).argmax().item<std::int64_t>();
  SeamStep seam(d, run.context(), run.prompt, first);
  StaticDecodeStep reference(d, run);
  reference.start(d, prompt, static_cast<std::int32_t>(first));
  for (std::int64_t s = 0; s < kSteps; ++s) {
    reference.step();
    const at::Tensor logits = seam.step();
    EXPECT_TRUE(at::equal(logits, reference.logits())) << "step " << s << ": max difference "
                                                       << (logits - reference.logits()).abs().max().item<double>();
  }
  for (int l = 0; l < test::kRandomQwen3Layers; ++l) {
    EXPECT_TRUE(at::equal(seam.k_cache(l), reference.buffer("k_cache", l))) << "layer " << l;
    EXPECT_TRUE(at::equal(seam.v_cache(l), reference.buffer("v_cache", l))) << "layer " << l;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace luka
