// The decode-step attention kernel against the direct formula softmax(scale · q Kᵀ) V in fp64,
// computed from the same (already rounded) inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/dense_attention.h"
#include "kernels/cpu/vec.h"

namespace luka::cpu {
namespace {

struct Case {
  std::int64_t n_heads, n_kv, head_dim, total;
};

// Reference in fp64: probs [n_heads, T] and output [n_heads, D].
std::pair<at::Tensor, at::Tensor> reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                            double scale) {
  const std::int64_t group = q.size(0) / k.size(0);
  const at::Tensor kd = k.to(at::kDouble).repeat_interleave(group, 0);  // [H, T, D]
  const at::Tensor vd = v.to(at::kDouble).repeat_interleave(group, 0);
  const at::Tensor scores = at::matmul(q.to(at::kDouble), kd.transpose(1, 2)).squeeze(1) * scale;  // [H, T]
  const at::Tensor probs = at::softmax(scores, -1);
  return {probs, at::matmul(probs.unsqueeze(1), vd).squeeze(1)};
}

TEST(DecodeAttention, MatchesDirectFormula) {
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    if (!decode_attention_available(dtype)) GTEST_SKIP() << "no AVX-512 on this CPU";
  }
  c10::InferenceMode guard;
  at::manual_seed(11);
  // Group sizes 1, 2, 3; head_dim below, at and off a multiple of 16; one key only; long caches.
  const Case cases[] = {{4, 4, 128, 1}, {8, 4, 64, 37}, {9, 3, 72, 300}, {6, 2, 20, 5}, {16, 8, 128, 700}};
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    for (const Case& c : cases) {
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
      // K/V as views into a longer cache, as the decoder passes them.
      const at::Tensor k_cache = (2 * at::randn({c.n_kv, c.total + 13, c.head_dim})).to(dtype);
      const at::Tensor v_cache = at::randn({c.n_kv, c.total + 13, c.head_dim}).to(dtype);
      const at::Tensor k = k_cache.narrow(1, 0, c.total), v = v_cache.narrow(1, 0, c.total);
      const at::Tensor q = (2 * at::randn({c.n_heads, 1, c.head_dim})).to(dtype);
      at::Tensor probs;
      const at::Tensor out = dense_decode_attention(q, k, v, scale, &probs);
      ASSERT_EQ(out.sizes(), (at::IntArrayRef{1, c.n_heads * c.head_dim}));
      ASSERT_EQ(out.scalar_type(), dtype);
      const auto [ref_probs, ref_out] = reference(q, k, v, scale);
      // fp32 accumulation over ≤ 128-term dots and ≤ 700-term sums: 1e-5 relative is ample. The
      // bf16 output is rounded once to 8 significant bits: half an ulp is at most 2^-8 of |x|.
      const at::Tensor got = out.to(at::kDouble).view({c.n_heads, c.head_dim});
      const double rel = dtype == at::kFloat ? 1e-5 : std::ldexp(1.0, -8);
      const at::Tensor excess = (got - ref_out).abs() - (rel * ref_out.abs() + 1e-5);
      EXPECT_LE(excess.max().item<double>(), 0.0) << c10::toString(dtype) << " H " << c.n_heads << " KV "
                                                  << c.n_kv << " D " << c.head_dim << " T " << c.total;
      EXPECT_LE((probs.to(at::kDouble) - ref_probs).abs().max().item<double>(), 1e-6);
      // The generic entry point takes the same path for a decode step.
      const at::Tensor via_dense = dense_causal_attention(q, k, v, c.total - 1, scale);
      EXPECT_TRUE(at::equal(via_dense, out));
    }
  }
}

// Prompts longer than the 1024-query chunk (and a chunk that starts after earlier tokens).
TEST(DenseCausalAttention, ChunkedPrefillMatchesDirectFormula) {
  c10::InferenceMode guard;
  at::manual_seed(12);
  const std::int64_t H = 4, KV = 2, D = 16, past = 37, n = 1500, T = past + n;
  const at::Tensor q = at::randn({H, n, D}), k = at::randn({KV, T, D}), v = at::randn({KV, T, D});
  const double scale = 0.25;
  const at::Tensor out = dense_causal_attention(q, k, v, past, scale).view({n, H, D});
  const at::Tensor kd = k.to(at::kDouble).repeat_interleave(2, 0), vd = v.to(at::kDouble).repeat_interleave(2, 0);
  const at::Tensor scores = at::matmul(q.to(at::kDouble), kd.transpose(1, 2)) * scale;  // [H, n, T]
  const at::Tensor hidden = at::arange(T).view({1, T}).gt(at::arange(past, T).view({n, 1}));
  const at::Tensor ref = at::matmul(at::softmax(scores.masked_fill(hidden, -INFINITY), -1), vd);  // [H, n, D]
  EXPECT_LE((out.to(at::kDouble).permute({1, 0, 2}) - ref).abs().max().item<double>(), 1e-5);
}

TEST(DecodeAttention, RejectsInconsistentShapes) {
  c10::InferenceMode guard;
  const at::Tensor q = at::randn({4, 1, 16}), k = at::randn({3, 5, 16}), v = at::randn({3, 5, 16});
  EXPECT_THROW(dense_decode_attention(q, k, v, 1.0), std::invalid_argument);  // 4 heads over 3 KV heads
  EXPECT_THROW(dense_decode_attention(at::randn({3, 2, 16}), k, v, 1.0), std::invalid_argument);  // 2 queries
  EXPECT_THROW(dense_decode_attention(at::randn({3, 1, 16}), k, at::randn({3, 6, 16}), 1.0), std::invalid_argument);
  EXPECT_THROW(dense_decode_attention(at::randn({3, 1, 16}).to(at::kBFloat16), k, v, 1.0), std::invalid_argument);
}

}  // namespace
}  // namespace luka::cpu

namespace luka::cpu {
namespace {

// The cover-row helpers (LuKA's dot products and weighted sums) against fp64 formulas, for fp32
// and bf16 rows and lengths on and off a multiple of 16 and 32.
TEST(VecKernels, DotAndAxpyMatchDirectFormula) {
  at::manual_seed(13);
  for (const std::int64_t d : {1, 15, 16, 33, 64, 72, 128}) {
    const at::Tensor q = at::randn({d});
    const at::Tensor k32 = at::randn({d}), k16 = at::randn({d}).to(at::kBFloat16);
    const double ref32 = (q.to(at::kDouble) * k32.to(at::kDouble)).sum().item<double>();
    const double ref16 = (q.to(at::kDouble) * k16.to(at::kDouble)).sum().item<double>();
    EXPECT_NEAR(dot(q.const_data_ptr<float>(), k32.const_data_ptr<float>(), d), ref32, 1e-5 * (1 + std::abs(ref32))) << d;
    EXPECT_NEAR(dot(q.const_data_ptr<float>(), k16.const_data_ptr<c10::BFloat16>(), d), ref16, 1e-5 * (1 + std::abs(ref16)))
        << d;
    at::Tensor y32 = at::randn({d}), y16 = y32.clone();
    const at::Tensor y0 = y32.to(at::kDouble);
    axpy(0.75f, k32.const_data_ptr<float>(), y32.mutable_data_ptr<float>(), d);
    axpy(-1.5f, k16.const_data_ptr<c10::BFloat16>(), y16.mutable_data_ptr<float>(), d);
    EXPECT_LE((y32.to(at::kDouble) - (y0 + 0.75 * k32.to(at::kDouble))).abs().max().item<double>(), 1e-6) << d;
    EXPECT_LE((y16.to(at::kDouble) - (y0 - 1.5 * k16.to(at::kDouble))).abs().max().item<double>(), 1e-6) << d;
  }
}

// The cover helpers in one call equal the one-row helpers in a loop bit for bit (the lined and
// Kascade paths rely on it), for gathered rows in any order, fp32 and bf16, widths on and off a
// multiple of 16 and past the 128 columns kept in registers; and they match the fp64 formula.
template <typename T>
void expect_gathered_like_rows(std::int64_t d, at::ScalarType dtype) {
  const std::int64_t rows_n = 40, stride = d + 3;  // rows apart by more than d, as in a KV cache
  const at::Tensor store = at::randn({rows_n, stride}).to(dtype);
  const T* rows = store.const_data_ptr<T>();
  const at::Tensor q = at::randn({d});
  const float* qp = q.const_data_ptr<float>();
  const std::vector<std::int64_t> idx = {7, 0, 39, 12, 13, 5, 38, 21, 2};
  const std::int64_t n = static_cast<std::int64_t>(idx.size());
  std::vector<float> one(idx.size()), batch(idx.size());
  for (std::int64_t j = 0; j < n; ++j) one[j] = 0.125f * dot(qp, rows + idx[j] * stride, d);
  gather_dots(qp, rows, stride, idx.data(), n, d, 0.125f, batch.data());
  for (std::int64_t j = 0; j < n; ++j) {
    EXPECT_EQ(batch[j], one[j]) << "d " << d << " row " << j;
    const double ref = 0.125 * (q.to(at::kDouble) * store[idx[j]].narrow(0, 0, d).to(at::kDouble)).sum().item<double>();
    EXPECT_NEAR(batch[j], ref, 1e-5 * (1 + std::abs(ref)));
  }
  const std::vector<float> p = {0.5f, -0.25f, 1.5f, 0.125f, 2.0f, -1.0f, 0.75f, 0.0f, 3.0f};
  const at::Tensor y0 = at::randn({d});
  at::Tensor y_one = y0.clone(), y_batch = y0.clone();
  for (std::int64_t j = 0; j < n; ++j) axpy(p[j], rows + idx[j] * stride, y_one.mutable_data_ptr<float>(), d);
  gather_axpy(p.data(), rows, stride, idx.data(), n, d, y_batch.mutable_data_ptr<float>());
  EXPECT_TRUE(at::equal(y_one, y_batch)) << "d " << d;
  at::Tensor ref = y0.to(at::kDouble);
  for (std::int64_t j = 0; j < n; ++j) ref += p[j] * store[idx[j]].narrow(0, 0, d).to(at::kDouble);
  EXPECT_LE((y_batch.to(at::kDouble) - ref).abs().max().item<double>(), 1e-5) << "d " << d;
}

TEST(VecKernels, GatheredRowsEqualTheOneRowHelpers) {
  at::manual_seed(17);
  for (const std::int64_t d : {1, 15, 16, 33, 64, 128, 130, 300}) {
    expect_gathered_like_rows<float>(d, at::kFloat);
    expect_gathered_like_rows<c10::BFloat16>(d, at::kBFloat16);
  }
}

}  // namespace
}  // namespace luka::cpu
