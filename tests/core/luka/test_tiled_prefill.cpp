// The tiled LuKA prefill (outputs and log-sum-exp from ATen's fused SDPA, then a pass over key tiles
// that recomputes the probabilities) against causal attention by its formula in fp64 — softmax of the
// scaled scores, the output, every KV group's mean probability summed over queries and every head's
// decayed sum — and against the exact prefill (probabilities materialized by softmax), on CPU tensors
// in fp32: GQA, several shapes, continuation (the cache's first positions already seen), decay ≠ 1,
// observed and pooled maps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "core/luka/prefill.h"

namespace luka {
namespace {

struct Shape {
  std::int64_t heads, kv_heads, dim, cached, fresh;  // cached: q_pos0; fresh: the new queries
};

struct Case {
  at::Tensor q, k, v;  // [H, n, D], [KV, T, D]
  AttentionInputs in;
  Case(const Shape& s, std::uint64_t seed) {
    at::manual_seed(seed);
    const std::int64_t T = s.cached + s.fresh;
    q = at::randn({s.heads, s.fresh, s.dim});
    k = at::randn({s.kv_heads, T, s.dim});
    v = at::randn({s.kv_heads, T, s.dim});
    in.q = q;
    in.k = k;
    in.v = v;
    in.q_pos0 = s.cached;
    in.group_size = s.heads / s.kv_heads;
    in.scale = 1.0 / std::sqrt(static_cast<double>(s.dim));
  }
};

// Causal attention by its formula in fp64: probabilities [H, n, T] and output [H, n, D].
struct Reference {
  at::Tensor probs, out;
  explicit Reference(const AttentionInputs& in) {
    const std::int64_t n = in.q.size(1), T = in.k.size(1), G = in.group_size;
    const at::Tensor k = in.k.to(at::kDouble).repeat_interleave(G, 0), v = in.v.to(at::kDouble).repeat_interleave(G, 0);
    at::Tensor s = at::matmul(in.q.to(at::kDouble), k.transpose(1, 2)) * in.scale;
    const at::Tensor future = at::arange(T).view({1, T}).gt(at::arange(in.q_pos0, in.q_pos0 + n).view({n, 1}));
    s.masked_fill_(future.unsqueeze(0), -INFINITY);
    probs = at::softmax(s, -1);
    out = at::matmul(probs, v);
  }
  // The accumulators after the prefill from `importance` [KV, T] and `h2o` [H, T]: each KV group's
  // mean probability, and per head h2o·dⁿ + Σᵢ d^(n−1−i)·pᵢ.
  void accumulate(double decay, std::int64_t G, at::Tensor& importance, at::Tensor& h2o) const {
    const std::int64_t H = probs.size(0), n = probs.size(1), T = probs.size(2);
    importance = importance.to(at::kDouble) + probs.sum(1).view({H / G, G, T}).mean(1);
    const at::Tensor w = at::pow(at::full({n}, decay, at::kDouble), at::arange(n - 1, -1, -1, at::kDouble));
    h2o = h2o.to(at::kDouble) * std::pow(decay, static_cast<double>(n)) + (probs * w.view({1, n, 1})).sum(1);
  }
};

// max |a − b| / (1 + max |b|).
double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor bd = b.to(at::kDouble);
  return (a.to(at::kDouble) - bd).abs().max().item<double>() / (1.0 + bd.abs().max().item<double>());
}

// The observed blocks [G, m, T'] laid into one map [H, n', T'] (n' and T' at the blocks' level).
at::Tensor assemble(const std::vector<std::tuple<std::int64_t, std::int64_t, at::Tensor>>& blocks, std::int64_t q_pos0,
                    std::int64_t H, std::int64_t pool) {
  std::int64_t rows = 0, cols = 0;
  for (const auto& [q0, h0, b] : blocks) {
    rows = std::max(rows, (q0 - q_pos0) / pool + b.size(1));
    cols = b.size(2);
  }
  at::Tensor map = at::full({H, rows, cols}, -1.0, at::kFloat);
  for (const auto& [q0, h0, b] : blocks)
    map.narrow(0, h0, b.size(0)).narrow(1, (q0 - q_pos0) / pool, b.size(1)).copy_(b);
  return map;
}

const std::vector<Shape> kShapes = {
    {4, 4, 16, 0, 37},     // MHA, one block, one tile
    {8, 2, 32, 0, 300},    // GQA 4, two query blocks
    {4, 1, 16, 0, 1100},   // GQA 4 over one KV head, three key tiles
    {8, 2, 32, 200, 333},  // continuation
    {6, 3, 8, 600, 50},    // continuation: a short turn after a long cache
    {2, 1, 64, 1, 513},    // continuation from one cached token
};

TEST(TiledPrefill, OutputsAndAccumulatorsEqualCausalAttentionByItsFormula) {
  c10::InferenceMode guard;
  std::uint64_t seed = 1;
  for (const Shape& s : kShapes)
    for (const double decay : {1.0, 0.97}) {
      SCOPED_TRACE("shape H" + std::to_string(s.heads) + " KV" + std::to_string(s.kv_heads) + " cached " +
                   std::to_string(s.cached) + " fresh " + std::to_string(s.fresh) + " decay " + std::to_string(decay));
      const Case c(s, ++seed);
      const std::int64_t T = s.cached + s.fresh;
      // Accumulators that already hold the cache's earlier state.
      const at::Tensor importance0 = at::rand({s.kv_heads, T}), h2o0 = at::rand({s.heads, T});
      at::Tensor importance = importance0.clone(), h2o = h2o0.clone();
      const at::Tensor out = tiled_prefill(c.in, decay, 0, {}, 0, importance, h2o);
      const Reference ref(c.in);
      at::Tensor importance_ref = importance0, h2o_ref = h2o0;
      ref.accumulate(decay, c.in.group_size, importance_ref, h2o_ref);
      EXPECT_LT(rel_diff(out, ref.out.transpose(0, 1).reshape({s.fresh, s.heads * s.dim})), 1e-5);
      EXPECT_LT(rel_diff(importance, importance_ref), 1e-5);
      EXPECT_LT(rel_diff(h2o, h2o_ref), 1e-5);
    }
}

TEST(TiledPrefill, EqualsTheExactPrefillInOutputsAccumulatorsAndObservedBlocks) {
  c10::InferenceMode guard;
  std::uint64_t seed = 100;
  for (const Shape& s : kShapes)
    for (const double decay : {1.0, 0.9}) {
      SCOPED_TRACE("shape H" + std::to_string(s.heads) + " KV" + std::to_string(s.kv_heads) + " cached " +
                   std::to_string(s.cached) + " fresh " + std::to_string(s.fresh) + " decay " + std::to_string(decay));
      const Case c(s, ++seed);
      const std::int64_t T = s.cached + s.fresh;
      const at::Tensor importance0 = at::rand({s.kv_heads, T}), h2o0 = at::rand({s.heads, T});
      using Blocks = std::vector<std::tuple<std::int64_t, std::int64_t, at::Tensor>>;
      Blocks tiled_blocks, exact_blocks;
      const auto observer = [](Blocks* into) {
        return [into](int, std::int64_t q0, std::int64_t h0, const at::Tensor& p) {
          into->emplace_back(q0, h0, p.clone());
        };
      };
      at::Tensor imp_t = importance0.clone(), h2o_t = h2o0.clone(), imp_e = importance0.clone(), h2o_e = h2o0.clone();
      const at::Tensor out_t = tiled_prefill(c.in, decay, 2, observer(&tiled_blocks), 0, imp_t, h2o_t);
      const at::Tensor out_e = exact_prefill(c.in, PrefillMask{}, decay, 2, observer(&exact_blocks), 0, imp_e, h2o_e);
      EXPECT_LT(rel_diff(out_t, out_e), 1e-5);
      EXPECT_LT(rel_diff(imp_t, imp_e), 1e-5);
      EXPECT_LT(rel_diff(h2o_t, h2o_e), 1e-5);
      ASSERT_EQ(tiled_blocks.size(), exact_blocks.size());
      EXPECT_LT(rel_diff(assemble(tiled_blocks, s.cached, s.heads, 1), assemble(exact_blocks, s.cached, s.heads, 1)),
                1e-5);
      // aten_prefill takes the tiled form for plain causal attention.
      at::Tensor imp_a = importance0.clone(), h2o_a = h2o0.clone();
      EXPECT_TRUE(at::equal(aten_prefill(c.in, PrefillMask{}, decay, 2, {}, 0, imp_a, h2o_a), out_t));
    }
}

// The pooled map (what a device hands the capture): each query block's probabilities max-pooled by
// 2^level, tile by tile, equal the formula's probabilities pooled whole.
TEST(TiledPrefill, PooledMapsEqualTheProbabilitiesPooledWhole) {
  c10::InferenceMode guard;
  for (const Shape& s : std::vector<Shape>{{4, 2, 16, 0, 700}, {4, 1, 16, 64, 290}, {2, 2, 8, 0, 1100}})
    for (const int level : {1, 3, 9}) {
      SCOPED_TRACE("cached " + std::to_string(s.cached) + " fresh " + std::to_string(s.fresh) + " level " +
                   std::to_string(level));
      const Case c(s, 7 + level);
      const std::int64_t T = s.cached + s.fresh;
      const auto [out, lse] = prefill_attention(c.in);
      std::vector<std::tuple<std::int64_t, std::int64_t, at::Tensor>> blocks;
      at::Tensor importance = at::zeros({s.kv_heads, T}), h2o = at::zeros({s.heads, T});
      add_prefill_tiles(
          c.in, lse, 1.0, 0,
          [&](int, std::int64_t q0, std::int64_t h0, const at::Tensor& p) { blocks.emplace_back(q0, h0, p.clone()); },
          level, importance, h2o);
      const int used = aligned_pool_level(level, s.cached, std::max<std::int64_t>(256, std::int64_t{1} << level));
      const std::int64_t pool = std::int64_t{1} << used;
      const at::Tensor expect = at::max_pool2d(Reference(c.in).probs.to(at::kFloat), {pool, pool}, {pool, pool}, {0, 0},
                                               {1, 1}, /*ceil_mode=*/true);
      const at::Tensor got = assemble(blocks, s.cached, s.heads, pool);
      ASSERT_EQ(got.sizes(), expect.sizes());
      EXPECT_LT(rel_diff(got, expect), 1e-5);
    }
}

}  // namespace
}  // namespace luka
