#include "kernels/cpu/gemv.h"

#include <immintrin.h>

#include <cstdint>

#include <ATen/Parallel.h>

namespace luka::cpu {

namespace {

// One weight row at a time, two accumulators over the input: a single sequential stream per
// thread. Interleaving several rows (independent accumulators per row) measured at less than half
// the read bandwidth on Zen 4, where row-at-a-time reaches it (bench/results/decode-cpu.md).

__attribute__((target("avx512f,avx512bw,avx512bf16"))) void gemv_bf16(const c10::BFloat16* w,
                                                                        const c10::BFloat16* x,
                                                                        const c10::BFloat16* bias,
                                                                        c10::BFloat16* y, std::int64_t in,
                                                                        std::int64_t o0, std::int64_t o1) {
  const std::int64_t pairs = in / 64 * 64;
  const std::int64_t full = in / 32 * 32;
  const __mmask32 tail_mask = static_cast<__mmask32>((std::uint64_t{1} << (in - full)) - 1);
#define load(p) ((__m512bh)_mm512_loadu_si512(p))
#define load_tail(p) ((__m512bh)_mm512_maskz_loadu_epi16(tail_mask, p))
  for (std::int64_t o = o0; o < o1; ++o) {
    const c10::BFloat16* r = w + o * in;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    std::int64_t i = 0;
    for (; i < pairs; i += 64) {
      a0 = _mm512_dpbf16_ps(a0, load(r + i), load(x + i));
      a1 = _mm512_dpbf16_ps(a1, load(r + i + 32), load(x + i + 32));
    }
    if (i < full) a0 = _mm512_dpbf16_ps(a0, load(r + i), load(x + i));
    if (full < in) a1 = _mm512_dpbf16_ps(a1, load_tail(r + full), load_tail(x + full));
    const float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    y[o] = c10::BFloat16(s + (bias ? static_cast<float>(bias[o]) : 0.0f));
  }
#undef load
#undef load_tail
}

__attribute__((target("avx512f"))) void gemv_f32(const float* w, const float* x, const float* bias, float* y,
                                                 std::int64_t in, std::int64_t o0, std::int64_t o1) {
  const std::int64_t pairs = in / 32 * 32;
  const std::int64_t full = in / 16 * 16;
  const __mmask16 tail_mask = static_cast<__mmask16>((1u << (in - full)) - 1);
  for (std::int64_t o = o0; o < o1; ++o) {
    const float* r = w + o * in;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    std::int64_t i = 0;
    for (; i < pairs; i += 32) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + i), _mm512_loadu_ps(x + i), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(r + i + 16), _mm512_loadu_ps(x + i + 16), a1);
    }
    if (i < full) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(r + i), _mm512_loadu_ps(x + i), a0);
    if (full < in)
      a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail_mask, r + full), _mm512_maskz_loadu_ps(tail_mask, x + full), a1);
    y[o] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) + (bias ? bias[o] : 0.0f);
  }
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
