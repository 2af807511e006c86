#include "kernels/cpu/gemv.h"

#include <cstdint>

#include <ATen/Parallel.h>

#include "kernels/cpu/row_dot.h"

namespace luka::cpu {

namespace {

__attribute__((target("avx512f,avx512bw,avx512bf16"))) void gemv_bf16(const c10::BFloat16* w, const c10::BFloat16* x,
                                                                        const c10::BFloat16* bias, c10::BFloat16* y,
                                                                        std::int64_t in, std::int64_t o0, std::int64_t o1) {
  for (std::int64_t o = o0; o < o1; ++o)
    y[o] = c10::BFloat16(detail::dot_bf16_avx512(w + o * in, x, in) + (bias ? static_cast<float>(bias[o]) : 0.0f));
}

__attribute__((target("avx512f"))) void gemv_f32(const float* w, const float* x, const float* bias, float* y, std::int64_t in,
                                                 std::int64_t o0, std::int64_t o1) {
  for (std::int64_t o = o0; o < o1; ++o) y[o] = detail::dot_f32_avx512(w + o * in, x, in) + (bias ? bias[o] : 0.0f);
}

}  // namespace

bool fast_gemv_available(at::ScalarType dtype) {
  static const bool f32 = __builtin_cpu_supports("avx512f");
  static const bool bf16 = f32 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16");
  if (dtype == at::kFloat) return f32;
  if (dtype == at::kBFloat16) return bf16;
  return false;
}

at::Tensor linear_row(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  const at::ScalarType dt = w.scalar_type();
  const bool fits = x.dim() == 2 && x.size(0) == 1 && w.dim() == 2 && x.size(1) == w.size(1) &&
                    x.scalar_type() == dt && w.is_contiguous() && (!b.defined() || (b.scalar_type() == dt && b.is_contiguous())) &&
                    fast_gemv_available(dt);
  if (!fits) return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
  const std::int64_t out = w.size(0), in = w.size(1);
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty({1, out}, x.options());
  // Rows split over threads in blocks of at least 64 rows (1 row = `in` weights to stream).
  const std::int64_t grain = 64;
  if (dt == at::kBFloat16) {
    const auto* wp = w.const_data_ptr<c10::BFloat16>();
    const auto* xp = xc.const_data_ptr<c10::BFloat16>();
    const auto* bp = b.defined() ? b.const_data_ptr<c10::BFloat16>() : nullptr;
    auto* yp = y.mutable_data_ptr<c10::BFloat16>();
    at::parallel_for(0, out, grain, [&](std::int64_t o0, std::int64_t o1) { gemv_bf16(wp, xp, bp, yp, in, o0, o1); });
  } else {
    const float* wp = w.const_data_ptr<float>();
    const float* xp = xc.const_data_ptr<float>();
    const float* bp = b.defined() ? b.const_data_ptr<float>() : nullptr;
    float* yp = y.mutable_data_ptr<float>();
    at::parallel_for(0, out, grain, [&](std::int64_t o0, std::int64_t o1) { gemv_f32(wp, xp, bp, yp, in, o0, o1); });
  }
  return y;
}

}  // namespace luka::cpu
