// The fused per-layer recipes (kernels/common/fused_ops.h) through their CPU twins
// (kernels/cpu/fused_layer.h) against an independent ATen composition of the unfused ops, as the
// decoder runs them (core/model/decoder.cpp, Hugging Face's order): the residual add then RMSNorm,
// the RoPE tables, q/k norm + RoPE + KV append over a fused q|k|v row (with and without q/k norm,
// query heads written in place), SwiGLU over a fused gate|up row.
//
// Tolerances: fp32 differs from ATen only by the order of the norm's sum and by rsqrt against
// 1/sqrt: 1e-6 of the row's largest magnitude. bf16 rounds at the same points as ATen's bf16 ops;
// where the fp32 value before a rounding differs by that order it may land one bf16 step away:
// at most one step, and at least 97% of the values equal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <ATen/ATen.h>

#include "kernels/common/fused_layer.h"
#include "kernels/cpu/fused_layer.h"

namespace luka::cpu {
namespace {

using fused::ElemDtype;

at::ScalarType scalar(ElemDtype dt) { return dt == ElemDtype::kF32 ? at::kFloat : at::kBFloat16; }

at::Tensor rand_tensor(std::vector<std::int64_t> shape, ElemDtype dt, std::uint64_t seed, double scale = 1.0) {
  at::manual_seed(seed);
  return (at::randn(shape, at::kFloat) * scale).to(scalar(dt)).contiguous();
}

at::Tensor aten_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  const at::Tensor xf = x.to(at::kFloat);
  return w * (xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps)).to(x.scalar_type());
}

// got against ref: the tolerances of the header.
void expect_close(const at::Tensor& got, const at::Tensor& ref, ElemDtype dt, const std::string& what) {
  ASSERT_EQ(got.sizes(), ref.sizes()) << what;
  const at::Tensor g = got.to(at::kDouble), r = ref.to(at::kDouble);
  if (dt == ElemDtype::kF32) {
    const double scale = std::max(1e-30, r.abs().max().item<double>());
    EXPECT_LE((g - r).abs().max().item<double>() / scale, 1e-6) << what;
    return;
  }
  const at::Tensor step = at::clamp_min(r.abs(), 1e-30) / 128.0;  // one bf16 step at the value's magnitude
  EXPECT_LE(((g - r).abs() / step).max().item<double>(), 1.01) << what;
  EXPECT_GE(at::eq(got, ref).to(at::kFloat).mean().item<double>(), 0.97) << what;
}

class FusedLayerRecipes : public ::testing::TestWithParam<ElemDtype> {};

TEST_P(FusedLayerRecipes, ResidualRmsNormIsTheAddThenTheDecodersNorm) {
  const ElemDtype dt = GetParam();
  for (const std::int64_t n : {1, 33, 256, 1024, 2560}) {
    for (const bool residual : {false, true}) {
      const std::int64_t rows = 2;
      const at::Tensor x0 = rand_tensor({rows, n}, dt, 3 + n, 3.0), add = rand_tensor({rows, n}, dt, 4 + n);
      const at::Tensor w = rand_tensor({n}, dt, 5 + n);
      at::Tensor x = x0.clone(), out = at::empty_like(x0);
      fused::NormArgs a;
      a.dtype = dt;
      a.x = x.mutable_data_ptr();
      a.add = residual ? add.const_data_ptr() : nullptr;
      a.weight = w.const_data_ptr();
      a.out = out.mutable_data_ptr();
      a.rows = rows;
      a.n = n;
      residual_rms_norm(a);
      const at::Tensor sum = residual ? x0 + add : x0;  // an ATen op of the dtype: rounded once
      EXPECT_TRUE(at::equal(x, sum)) << "the residual stream written back, n " << n;
      expect_close(out, aten_rms_norm(sum, w, 1e-6), dt, "norm n " + std::to_string(n));
    }
  }
}

// transformers' tables: fp32 angles of cat(freqs, freqs), cos/sin, cast to the dtype.
std::vector<at::Tensor> aten_tables(std::int64_t pos, const at::Tensor& inv_freq, ElemDtype dt) {
  const at::Tensor freqs = at::tensor(static_cast<float>(pos)) * inv_freq;
  const at::Tensor emb = at::cat({freqs, freqs});
  return {emb.cos().to(scalar(dt)), emb.sin().to(scalar(dt))};
}

at::Tensor inverse_frequencies(std::int64_t d) {
  return at::pow(1e6, -at::arange(0, d, 2, at::kDouble) / static_cast<double>(d)).to(at::kFloat);
}

TEST_P(FusedLayerRecipes, RopeTablesAreTransformersTables) {
  const ElemDtype dt = GetParam();
  const std::int64_t d = 128, half = d / 2;
  const at::Tensor inv = inverse_frequencies(d);
  for (const std::int64_t pos : {0, 1, 4095, 32767}) {
    std::vector<float> cos(half), sin(half);
    fused::RopeTableArgs a;
    a.dtype = dt;
    a.position = &pos;
    a.inv_freq = inv.const_data_ptr<float>();
    a.cos = cos.data();
    a.sin = sin.data();
    a.half = half;
    rope_tables(a);
    const auto t = aten_tables(pos, inv, dt);
    // ATen's vectorised cos/sin may differ from the C library's by an fp32 ulp: compare in fp32.
    const double tol = dt == ElemDtype::kF32 ? 4e-7 : 1.0 / 128;
    EXPECT_LE((at::from_blob(cos.data(), {half}, at::kFloat) - t[0].narrow(0, 0, half).to(at::kFloat)).abs().max()
                  .item<double>(), tol) << pos;
    EXPECT_LE((at::from_blob(sin.data(), {half}, at::kFloat) - t[1].narrow(0, 0, half).to(at::kFloat)).abs().max()
                  .item<double>(), tol) << pos;
  }
}

// One q|k|v row through the recipe against q_norm/k_norm, apply_rotary_pos_emb and the cache
// writes of the unfused decoder; positions left alone keep their sentinel.
void check_qkv(ElemDtype dt, bool norm, bool in_place, std::int64_t pos, std::int64_t capacity) {
  const std::int64_t H = 4, KV = 2, D = 64, half = D / 2;
  const at::Tensor qkv0 = rand_tensor({H + 2 * KV, D}, dt, 21 + pos, 2.0);
  const at::Tensor qn = rand_tensor({D}, dt, 22), kn = rand_tensor({D}, dt, 23);
  const at::Tensor inv = inverse_frequencies(D);
  const auto t = aten_tables(pos, inv, dt);
  const at::Tensor cf = t[0].narrow(0, 0, half).to(at::kFloat).contiguous();
  const at::Tensor sf = t[1].narrow(0, 0, half).to(at::kFloat).contiguous();
  at::Tensor qkv = qkv0.clone(), q_sep = at::empty({H, D}, qkv0.options());
  at::Tensor kc = at::full({KV, capacity, D}, 7.0, qkv0.options()), vc = kc.clone();
  fused::QkvArgs a;
  a.dtype = dt;
  a.qkv = qkv.const_data_ptr();
  a.q_out = in_place ? qkv.mutable_data_ptr() : q_sep.mutable_data_ptr();
  a.q_norm = norm ? qn.const_data_ptr() : nullptr;
  a.k_norm = norm ? kn.const_data_ptr() : nullptr;
  a.cos = cf.const_data_ptr<float>();
  a.sin = sf.const_data_ptr<float>();
  a.position = &pos;
  a.k_cache = kc.mutable_data_ptr();
  a.v_cache = vc.mutable_data_ptr();
  a.head_stride = capacity * D;
  a.token_stride = D;
  a.capacity = capacity;
  a.heads = H;
  a.kv_heads = KV;
  a.head_dim = D;
  qkv_norm_rope(a);

  const auto rotate = [&](const at::Tensor& x) {
    const at::Tensor rot = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
    return x * t[0] + rot * t[1];
  };
  const at::Tensor q = qkv0.narrow(0, 0, H), k = qkv0.narrow(0, H, KV), v = qkv0.narrow(0, H + KV, KV);
  const std::string what = std::string(norm ? "q/k norm" : "no norm") + (in_place ? ", in place" : "");
  expect_close(in_place ? qkv.narrow(0, 0, H) : q_sep, rotate(norm ? aten_rms_norm(q, qn, 1e-6) : q), dt, "q, " + what);
  at::Tensor k_ref = at::full({KV, capacity, D}, 7.0, qkv0.options()), v_ref = k_ref.clone();
  if (pos < capacity) {
    k_ref.select(1, pos).copy_(rotate(norm ? aten_rms_norm(k, kn, 1e-6) : k));
    v_ref.select(1, pos).copy_(v);
  }
  expect_close(kc, k_ref, dt, "key cache, " + what);
  EXPECT_TRUE(at::equal(vc, v_ref)) << "value cache, " << what;
}

TEST_P(FusedLayerRecipes, QkvNormRopeAppendIsQkNormRotateHalfAndTheCacheWrites) {
  for (const bool norm : {false, true})
    for (const bool in_place : {false, true}) check_qkv(GetParam(), norm, in_place, 5, 9);
  check_qkv(GetParam(), true, false, 0, 1);
}

TEST_P(FusedLayerRecipes, QkvPastTheCapacityAppendsNothing) { check_qkv(GetParam(), true, true, 9, 9); }

TEST_P(FusedLayerRecipes, SwigluOfTheConcatenatedRowIsSiluGateTimesUp) {
  const ElemDtype dt = GetParam();
  for (const std::int64_t I : {1, 100, 3072}) {
    const at::Tensor gu = rand_tensor({2 * I}, dt, 31 + I, 3.0);
    at::Tensor out = at::empty({I}, gu.options());
    fused::SwigluArgs a;
    a.dtype = dt;
    a.gate_up = gu.const_data_ptr();
    a.out = out.mutable_data_ptr();
    a.intermediate = I;
    swiglu(a);
    expect_close(out, at::silu(gu.narrow(0, 0, I)) * gu.narrow(0, I, I), dt, "I " + std::to_string(I));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedLayerRecipes, ::testing::Values(ElemDtype::kF32, ElemDtype::kBF16),
                         [](const auto& info) { return info.param == ElemDtype::kF32 ? "f32" : "bf16"; });

TEST(FusedLayerArgs, MisuseIsRefusedWithTheReason) {
  fused::QkvArgs a;
  EXPECT_THROW(qkv_norm_rope(a), std::invalid_argument);
  float buf[64] = {};
  std::int64_t pos = 0;
  a.qkv = a.q_out = a.k_cache = a.v_cache = buf;
  a.cos = a.sin = buf;
  a.position = &pos;
  a.heads = 3;
  a.kv_heads = 2;
  a.head_dim = 4;
  a.capacity = 1;
  a.token_stride = a.head_stride = 4;
  EXPECT_EQ(fused::check(a), "qkv: heads must be a multiple of kv_heads");
  a.heads = 2;
  a.head_dim = 3;
  EXPECT_NE(fused::check(a).find("head_dim must be even"), std::string::npos);
  a.head_dim = 4;
  a.q_norm = buf;
  EXPECT_EQ(fused::check(a), "qkv: q_norm and k_norm go together");
  fused::NormArgs n;
  n.x = n.out = buf;
  n.weight = buf;
  n.add = buf;
  n.n = 4;
  EXPECT_EQ(fused::check(n), "norm: out may not alias x when a residual is added");
}

}  // namespace
}  // namespace luka::cpu
