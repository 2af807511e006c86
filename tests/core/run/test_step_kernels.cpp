// The per-layer seam of the decode step (core/run/step_kernels): the launch plan of one layer and
// of a whole step against the count written out by hand; the q|k|v and gate|up weights
// concatenated at load against the separate projections (fp32, bit for bit); a fused op's refusal
// named. The static step runs every step through the seam (tests/core/run/test_static_step.cpp,
// with either kind of ops against Decoder::decode).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/run/step_kernels.h"
#include "core/util/error.h"

namespace luka {
namespace {

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

// The fused ops on CPU tensors (the kernels' twins): a dtype they do not run, and the buffers they
// need missing, are refused by name before any op; a launcher's refusal names the op.
TEST(FusedStepKernels, RefusesWhatTheKernelsCannotRunByName) {
  ModelShape m;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  m.intermediate = 96;
  m.layers = 1;
  m.vocab = 32;
  const at::Tensor inv_freq = at::ones({8});
  const auto expect_error = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one naming " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const StepTensors f64 = reserve_step_tensors(m, 1e-6, inv_freq, at::TensorOptions().dtype(at::kDouble));
  expect_error([&] { make_cpu_fused_step_kernels(f64); }, "fp32 and bf16 only");
  StepTensors missing = reserve_step_tensors(m, 1e-6, inv_freq, at::TensorOptions().dtype(at::kFloat));
  missing.qkv = at::Tensor();
  expect_error([&] { make_cpu_fused_step_kernels(missing); }, "buffers are not reserved");

  const StepTensors t = reserve_step_tensors(m, 1e-6, inv_freq, at::TensorOptions().dtype(at::kFloat));
  FusedLaunchers refusing = cpu_fused_launchers();
  refusing.name = "test-fused";
  refusing.swiglu = [](const fused::SwigluArgs&) { return std::string("swiglu: refused for the test"); };
  const std::unique_ptr<StepKernels> k = make_fused_step_kernels(t, refusing);
  StepLayer layer;
  layer.gate = at::randn({96, 64});
  layer.up = at::randn({96, 64});
  layer.q = at::randn({64, 64});
  layer.k = at::randn({32, 64});
  layer.v = at::randn({32, 64});
  expect_error([&] { k->mlp_activation(layer); }, "prepare it first");
  k->prepare(layer);
  ASSERT_TRUE(layer.gate_up.weight.defined());
  expect_error([&] { k->mlp_activation(layer); }, "test-fused: swiglu: refused for the test");
}

}  // namespace
}  // namespace luka
