// The tiled LuKA prefill on a GPU (issue 44's flash-class prefill): ATen's CUDA SDPA kernels
// (memory-efficient in fp32, flash in bf16) give the outputs and each row's log-sum-exp, then the
// pass over key tiles recomputes the probabilities into the accumulators and the pooled map. Held
// against causal attention by its formula in fp64 on the same (16-bit rounded) inputs, at the
// Qwen3-0.6B head shape among others, with continuations and a decay, and the pooled map against
// the formula's probabilities pooled whole. Until this passes on a GPU, aten_prefill keeps the
// exact form there (set_device_tiled_prefill). Skips without a CUDA device (scripts/gpu_run.sh
// graph runs it).
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "core/luka/prefill.h"
#include "kernels/cuda/device.h"

namespace luka {
namespace {

struct Shape {
  std::int64_t heads, kv_heads, dim, cached, fresh;
};

// max |a − b| / (1 + max |b|), on b's device.
double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor bd = b.to(at::kDouble);
  return (a.to(b.device(), at::kDouble) - bd).abs().max().item<double>() / (1.0 + bd.abs().max().item<double>());
}

bool have_gpu() { return cuda::device_count() > 0 && at::hasCUDA(); }

class TiledPrefillCuda : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(TiledPrefillCuda, OutputsAccumulatorsAndPooledMapsEqualTheFormula) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: the GPU's SDPA kernels are not run here";
  c10::InferenceMode guard;
  const at::ScalarType dtype = GetParam();
  const bool bf16 = dtype == at::kBFloat16;
  // The tolerances: fp32 sums in another order; bf16 rounds the output to 8 bits of mantissa and
  // the kernels take the 16-bit inputs (the reference takes the same rounded inputs in fp64).
  const double out_tol = bf16 ? 2e-2 : 1e-4, acc_tol = bf16 ? 1e-2 : 1e-4;
  const std::vector<Shape> shapes = {{4, 4, 16, 0, 37},     {8, 2, 32, 0, 300},    {8, 2, 64, 200, 333},
                                     {16, 8, 128, 0, 4096}, {16, 8, 128, 3000, 1096}};
  std::uint64_t seed = 11;
  for (const Shape& s : shapes)
    for (const double decay : {1.0, 0.95}) {
      SCOPED_TRACE("H" + std::to_string(s.heads) + " KV" + std::to_string(s.kv_heads) + " D" + std::to_string(s.dim) +
                   " cached " + std::to_string(s.cached) + " fresh " + std::to_string(s.fresh) + " decay " +
                   std::to_string(decay));
      at::manual_seed(++seed);
      const std::int64_t T = s.cached + s.fresh, n = s.fresh, G = s.heads / s.kv_heads;
      const auto on_gpu = at::TensorOptions().device(at::kCUDA).dtype(dtype);
      const at::Tensor q = at::randn({s.heads, n, s.dim}).to(on_gpu), k = at::randn({s.kv_heads, T, s.dim}).to(on_gpu),
                       v = at::randn({s.kv_heads, T, s.dim}).to(on_gpu);
      AttentionInputs in;
      in.q = q;
      in.k = k;
      in.v = v;
      in.q_pos0 = s.cached;
      in.group_size = G;
      in.scale = 1.0 / std::sqrt(static_cast<double>(s.dim));
      const auto f32 = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
      at::Tensor importance = at::zeros({s.kv_heads, T}, f32), h2o = at::zeros({s.heads, T}, f32);
      std::vector<std::tuple<std::int64_t, std::int64_t, at::Tensor>> blocks;
      const int level = 3;
      const at::Tensor out = tiled_prefill(
          in, decay, 0,
          [&](int, std::int64_t q0, std::int64_t h0, const at::Tensor& p) { blocks.emplace_back(q0, h0, p.cpu()); }, level,
          importance, h2o);
      // The formula in fp64, on the GPU too (the 4K shape is 68 GFLOP).
      const at::Tensor kd = k.to(at::kDouble).repeat_interleave(G, 0), vd = v.to(at::kDouble).repeat_interleave(G, 0);
      at::Tensor scores = at::matmul(q.to(at::kDouble), kd.transpose(1, 2)) * in.scale;
      const auto longs = at::TensorOptions().device(q.device()).dtype(at::kLong);
      const at::Tensor future = at::arange(T, longs).view({1, T}).gt(at::arange(s.cached, T, longs).view({n, 1}));
      scores.masked_fill_(future.unsqueeze(0), -INFINITY);
      const at::Tensor probs = at::softmax(scores, -1);
      const at::Tensor want_out = at::matmul(probs, vd).transpose(0, 1).reshape({n, s.heads * s.dim});
      const at::Tensor want_importance = probs.sum(1).view({s.kv_heads, G, T}).mean(1);
      const auto doubles = at::TensorOptions().device(q.device()).dtype(at::kDouble);
      const at::Tensor w = at::pow(at::full({n}, decay, doubles), at::arange(n - 1, -1, -1, doubles));
      const at::Tensor want_h2o = (probs * w.view({1, n, 1})).sum(1);
      EXPECT_LT(rel_diff(out, want_out), out_tol);
      EXPECT_LT(rel_diff(importance, want_importance), acc_tol);
      EXPECT_LT(rel_diff(h2o, want_h2o), acc_tol);
      // The pooled map, laid out whole, against the formula's probabilities pooled whole at the
      // blocks' level (the level asked, aligned to the prefill's first position; a layer may hand
      // a finer one, which the blocks' width tells).
      ASSERT_FALSE(blocks.empty());
      std::int64_t pool = 1;
      while ((T + pool - 1) / pool > std::get<2>(blocks.front()).size(2)) pool *= 2;
      EXPECT_LE(pool, std::int64_t{1} << aligned_pool_level(level, s.cached, std::max<std::int64_t>(256, 1 << level)));
      const at::Tensor expect =
          at::max_pool2d(probs.to(at::kFloat), {pool, pool}, {pool, pool}, {0, 0}, {1, 1}, true).to(at::kCPU);
      at::Tensor got = at::full(expect.sizes(), -1.0, at::kFloat);
      for (const auto& [q0, h0, b] : blocks)
        got.narrow(0, h0, b.size(0)).narrow(1, (q0 - s.cached) / pool, b.size(1)).copy_(b);
      EXPECT_LT(rel_diff(got, expect), acc_tol);
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TiledPrefillCuda, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const auto& info) { return std::string(info.param == at::kFloat ? "fp32" : "bf16"); });

}  // namespace
}  // namespace luka
