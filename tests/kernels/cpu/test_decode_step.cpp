// The fused one-row ops (kernels/cpu/decode_step) against the unfused decoder's ATen formulas on
// random data: RMSNorm, q/k norm + RoPE, the RoPE tables, and the linear jobs with their
// epilogues (store with bias, residual add, SwiGLU), dense fp32/bf16 and GGUF blocks.
//
// Tolerances: fp32 results may differ from ATen by the order of fp32 sums (a few ulp); bf16 by one
// bf16 ulp where a sum's rounding lands on the other side of a bf16 tie (checked to be rare).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <ATen/ATen.h>

#include "kernels/common/fused_ops.h"
#include "kernels/cpu/decode_step.h"
#include "kernels/cpu/quant_gemv.h"

namespace luka::cpu {
namespace {

using gguf::GgmlType;

at::ScalarType scalar(StepDtype dt) { return dt == StepDtype::kF32 ? at::kFloat : at::kBFloat16; }

at::Tensor rand_tensor(std::vector<std::int64_t> shape, StepDtype dt, std::uint64_t seed, double scale = 1.0) {
  at::manual_seed(seed);
  return (at::randn(shape, at::kFloat) * scale).to(scalar(dt)).contiguous();
}

// The decoder's unfused RMSNorm (core/model/decoder.cpp).
at::Tensor aten_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor var = xf.pow(2).mean(-1, true);
  return w * (xf * at::rsqrt(var + eps)).to(x.scalar_type());
}

// Largest difference in units of the dtype's spacing at the reference's magnitude.
double max_ulps(const at::Tensor& got, const at::Tensor& ref, StepDtype dt) {
  const at::Tensor g = got.to(at::kDouble), r = ref.to(at::kDouble);
  const double eps = dt == StepDtype::kF32 ? 1.0 / (1 << 23) : 1.0 / (1 << 7);
  const at::Tensor spacing = at::clamp_min(r.abs(), 1e-30) * eps;
  return ((g - r).abs() / spacing).max().item<double>();
}

class DecodeStepOps : public ::testing::TestWithParam<StepDtype> {};

TEST_P(DecodeStepOps, RmsNormRowIsTheDecodersRmsNorm) {
  const StepDtype dt = GetParam();
  for (const std::int64_t n : {1, 17, 64, 576, 1024}) {
    const at::Tensor x = rand_tensor({n}, dt, 1 + n, 3.0), w = rand_tensor({n}, dt, 2 + n);
    at::Tensor y = at::empty({n}, x.options());
    rms_norm_row(x.const_data_ptr(), w.const_data_ptr(), 1e-6f, n, y.mutable_data_ptr(), dt);
    const at::Tensor ref = aten_rms_norm(x, w, 1e-6);
    if (dt == StepDtype::kF32) {
      EXPECT_LE(max_ulps(y, ref, dt), 8) << "n " << n;
    } else {
      EXPECT_LE(max_ulps(y, ref, dt), 1.01) << "n " << n;  // at most one bf16 step
      EXPECT_GE(at::eq(y, ref).to(at::kFloat).mean().item<double>(), 0.97) << "n " << n;
    }
  }
}

TEST_P(DecodeStepOps, NormRopeHeadsIsQkNormThenRotateHalf) {
  const StepDtype dt = GetParam();
  const std::int64_t heads = 3, d = 64, half = d / 2, pos = 1234;
  std::vector<float> inv(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i) inv[static_cast<std::size_t>(i)] = static_cast<float>(std::pow(1e6, -2.0 * i / d));
  std::vector<float> cos(static_cast<std::size_t>(half)), sin(static_cast<std::size_t>(half));
  rope_tables(pos, inv.data(), half, dt, cos.data(), sin.data());
  // The tables as transformers builds them: fp32 angles, cos/sin of cat(freqs, freqs), cast.
  const at::Tensor freqs = at::tensor(static_cast<float>(pos)) * at::from_blob(inv.data(), {half}, at::kFloat);
  const at::Tensor emb = at::cat({freqs, freqs});
  const at::Tensor ct = emb.cos().to(scalar(dt)), st = emb.sin().to(scalar(dt));
  EXPECT_LE(max_ulps(at::from_blob(cos.data(), {half}, at::kFloat), ct.narrow(0, 0, half), dt), 1.01);
  EXPECT_LE(max_ulps(at::from_blob(sin.data(), {half}, at::kFloat), st.narrow(0, 0, half), dt), 1.01);
  // Ours from the ATen tables, so the check below is of the rotation alone.
  const at::Tensor cf = ct.narrow(0, 0, half).to(at::kFloat).contiguous(), sf = st.narrow(0, 0, half).to(at::kFloat).contiguous();
  for (const bool norm : {false, true}) {
    const at::Tensor x = rand_tensor({heads, d}, dt, 7, 2.0), w = rand_tensor({d}, dt, 8);
    at::Tensor got = x.clone();
    norm_rope_heads(got.mutable_data_ptr(), heads, d, norm ? w.const_data_ptr() : nullptr, 1e-6f, cf.const_data_ptr<float>(),
                    sf.const_data_ptr<float>(), dt);
    at::Tensor q = norm ? aten_rms_norm(x, w, 1e-6) : x;
    const at::Tensor rot = at::cat({-q.narrow(-1, half, half), q.narrow(-1, 0, half)}, -1);
    const at::Tensor ref = q * ct + rot * st;
    EXPECT_LE(max_ulps(got, ref, dt), dt == StepDtype::kF32 ? 64 : 1.01) << "norm " << norm;
    if (dt == StepDtype::kBF16) EXPECT_GE(at::eq(got, ref).to(at::kFloat).mean().item<double>(), 0.97);
  }
}

TEST_P(DecodeStepOps, DenseJobsAreLinearResidualAndSwiGlu) {
  const StepDtype dt = GetParam();
  const GgmlType type = dt == StepDtype::kF32 ? GgmlType::kF32 : GgmlType::kBF16;
  const std::int64_t in = 96, a = 80, b = 16, inter = 33;
  const at::Tensor x = rand_tensor({in}, dt, 11);
  const at::Tensor wa = rand_tensor({a, in}, dt, 12, 0.1), wb = rand_tensor({b, in}, dt, 13, 0.1);
  const at::Tensor bias = rand_tensor({b}, dt, 14);
  const at::Tensor wg = rand_tensor({inter, in}, dt, 15, 0.1), wu = rand_tensor({inter, in}, dt, 16, 0.1);
  const at::Tensor resid = rand_tensor({a}, dt, 17);
  at::Tensor ya = at::empty({a}, x.options()), yb = at::empty({b}, x.options()), act = at::empty({inter}, x.options());
  at::Tensor yr = resid.clone();
  const auto weight = [&](const at::Tensor& w, const at::Tensor* bi) {
    RowWeight r;
    r.data = w.const_data_ptr();
    r.type = type;
    r.out = w.size(0);
    r.in = w.size(1);
    r.bias = bi ? bi->const_data_ptr() : nullptr;
    return r;
  };
  RowJob jobs[4];
  jobs[0] = {weight(wa, nullptr), {}, Epilogue::kStore, ya.mutable_data_ptr()};
  jobs[1] = {weight(wb, &bias), {}, Epilogue::kStore, yb.mutable_data_ptr()};
  jobs[2] = {weight(wg, nullptr), weight(wu, nullptr), Epilogue::kSwiGlu, act.mutable_data_ptr()};
  jobs[3] = {weight(wa, nullptr), {}, Epilogue::kResidual, yr.mutable_data_ptr()};
  RowScratch scratch;
  run_rows(jobs, 4, x.const_data_ptr(), dt, scratch);
  const at::Tensor xr = x.unsqueeze(0);
  const at::Tensor ra = at::linear(xr, wa)[0], rb = at::linear(xr, wb, bias)[0];
  const at::Tensor ract = (at::silu(at::linear(xr, wg)) * at::linear(xr, wu))[0];
  const at::Tensor rres = resid + ra;
  const double tol = dt == StepDtype::kF32 ? 2e-5 : 1e-2;  // fp32 sums in another order; bf16 one step
  EXPECT_LE((ya.to(at::kFloat) - ra.to(at::kFloat)).abs().max().item<double>(), tol);
  EXPECT_LE((yb.to(at::kFloat) - rb.to(at::kFloat)).abs().max().item<double>(), tol);
  EXPECT_LE((act.to(at::kFloat) - ract.to(at::kFloat)).abs().max().item<double>(), tol);
  EXPECT_LE((yr.to(at::kFloat) - rres.to(at::kFloat)).abs().max().item<double>(), 2 * tol);
  // The residual job used its own output as the stream: exactly resid + (the stored product).
  if (dt == StepDtype::kF32) EXPECT_TRUE(at::equal(yr, resid + ya));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DecodeStepOps, ::testing::Values(StepDtype::kF32, StepDtype::kBF16),
                         [](const auto& info) { return info.param == StepDtype::kF32 ? std::string("fp32") : std::string("bf16"); });

// Random GGUF blocks: byte patterns with finite fp16 scales (0x3C00 = 1.0 scaled down).
std::vector<std::uint8_t> random_blocks(GgmlType type, std::int64_t rows, std::int64_t in, std::uint64_t seed) {
  const std::int64_t bytes = quant_row_bytes(type, in) * rows;
  std::vector<std::uint8_t> v(static_cast<std::size_t>(bytes));
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  // Every fp16 field becomes a small finite scale: overwrite the scale positions per type.
  const std::int64_t bb = type == GgmlType::kQ4_K   ? 144
                          : type == GgmlType::kQ6_K ? 210
                          : type == GgmlType::kQ8_0 ? 34
                          : type == GgmlType::kQ4_1 ? 20
                                                    : 18;  // bytes per block
  const std::int64_t blocks = bytes / bb;
  for (std::int64_t k = 0; k < blocks; ++k) {
    std::uint8_t* p = v.data() + k * bb;
    const auto put = [&](std::uint8_t* at) {
      const std::uint16_t h = static_cast<std::uint16_t>(0x2000 + (rng() % 0x0800));  // about 0.008 to 0.016
      at[0] = static_cast<std::uint8_t>(h & 0xFF);
      at[1] = static_cast<std::uint8_t>(h >> 8);
    };
    if (type == GgmlType::kQ6_K) {
      put(p + 208);
    } else {
      put(p);
      if (type == GgmlType::kQ4_1 || type == GgmlType::kQ4_K) put(p + 2);
    }
  }
  return v;
}

// Quantized jobs read the blocks with the same row kernel as quant_gemv (one quantization of the
// input shared by every job of its block size): the stored outputs equal quant_gemv's exactly.
TEST(DecodeStepQuantized, JobsEqualQuantGemvRowForRow) {
  const std::int64_t in = 512, out = 37;
  at::manual_seed(21);
  const at::Tensor x = at::randn({in}, at::kFloat).contiguous();
  std::vector<std::vector<std::uint8_t>> storage;
  std::vector<at::Tensor> ys;
  std::vector<RowJob> jobs;
  const GgmlType types[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K};
  for (const GgmlType t : types) storage.push_back(random_blocks(t, out, in, 100 + static_cast<int>(t)));
  for (std::size_t i = 0; i < 5; ++i) {
    ys.push_back(at::empty({out}, at::kFloat));
    RowJob j;
    j.weight = {storage[i].data(), types[i], out, in, nullptr};
    j.y = ys.back().mutable_data_ptr();
    jobs.push_back(j);
  }
  RowScratch scratch;
  run_rows(jobs.data(), jobs.size(), x.const_data_ptr(), StepDtype::kF32, scratch);
  for (std::size_t i = 0; i < 5; ++i) {
    std::vector<float> ref(static_cast<std::size_t>(out));
    quant_gemv(types[i], storage[i].data(), out, in, x.const_data_ptr<float>(), ref.data());
    EXPECT_TRUE(at::equal(ys[i], at::from_blob(ref.data(), {out}, at::kFloat))) << gguf::type_name(types[i]);
    EXPECT_GT(ys[i].abs().max().item<float>(), 0.0f);
  }
}

TEST(DecodeStepQuantized, RefusesMismatchedJobs) {
  const at::Tensor w = at::zeros({4, 32}, at::kFloat), w2 = at::zeros({4, 64}, at::kFloat), y = at::empty({4}, at::kFloat);
  RowJob jobs[2];
  jobs[0] = {{w.const_data_ptr(), GgmlType::kF32, 4, 32, nullptr}, {}, Epilogue::kStore, y.data_ptr()};
  jobs[1] = {{w2.const_data_ptr(), GgmlType::kF32, 4, 64, nullptr}, {}, Epilogue::kStore, y.data_ptr()};
  RowScratch scratch;
  const at::Tensor x = at::zeros({64}, at::kFloat);
  EXPECT_THROW(run_rows(jobs, 2, x.const_data_ptr(), StepDtype::kF32, scratch), std::invalid_argument);
  jobs[1].weight = {w.const_data_ptr(), GgmlType::kBF16, 4, 32, nullptr};
  EXPECT_THROW(run_rows(jobs, 2, x.const_data_ptr(), StepDtype::kF32, scratch), std::invalid_argument);
}

// The shared element math on values whose results are known exactly.
TEST(FusedOps, ElementMathOnKnownValues) {
  EXPECT_EQ(fused::RoundBF16{}(1.0f + 1.0f / 256), 1.0f);           // a tie rounds to even
  EXPECT_EQ(fused::RoundBF16{}(1.0f + 3.0f / 256), 1.0f + 1.0f / 64);  // the other tie, up to even
  EXPECT_EQ(fused::bf16_bits(std::nanf("")), 0x7fc0);
  EXPECT_FLOAT_EQ(fused::rms_inverse(4.0f * 4, 4, 0.0f), 0.5f);        // x = (2,2,2,2): rms 2
  float lo = 0, hi = 0;
  fused::rope_pair(1.0f, 0.0f, 0.0f, 1.0f, lo, hi, fused::RoundF32{});  // a quarter turn
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
  EXPECT_FLOAT_EQ(fused::silu(0.0f), 0.0f);
  EXPECT_FLOAT_EQ(fused::swiglu(2.0f, 3.0f, fused::RoundF32{}), 3.0f * 2.0f / (1.0f + std::exp(-2.0f)));
  EXPECT_EQ(fused::residual_out(1.0f, 2.0f, 0.5f, fused::RoundF32{}), 3.5f);
}

}  // namespace
}  // namespace luka::cpu
