#include "kernels/cpu/decode_attention.h"

#include <immintrin.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/Parallel.h>

namespace luka::cpu {

namespace {

// 16 lanes of fp32 from `n` (≤ 16) values at p; bf16 widens exactly (its bits are the top half).
__attribute__((target("avx512f"))) inline __m512 load16(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m512 load16(const c10::BFloat16* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

__mmask16 lanes(std::int64_t n) { return n >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << n) - 1); }

// scores[g, j] = scale * q_g · k_j for the `group` query heads g of one KV head.
template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void scores_one_kv(const float* q, const T* k, std::int64_t k_stride,
                                                               std::int64_t total, std::int64_t group,
                                                               std::int64_t d, float scale, float* scores) {
  for (std::int64_t j = 0; j < total; ++j) {
    const T* row = k + j * k_stride;
    for (std::int64_t g = 0; g < group; ++g) {
      const float* qg = q + g * d;
      __m512 acc = _mm512_setzero_ps();
      for (std::int64_t i = 0; i < d; i += 16) {
        const __mmask16 m = lanes(d - i);
        acc = _mm512_fmadd_ps(load16(row + i, m), _mm512_maskz_loadu_ps(m, qg + i), acc);
      }
      scores[g * total + j] = _mm512_reduce_add_ps(acc) * scale;
    }
  }
}

// out[g, :] = sum_j p[g, j] v_j for the query heads of one KV head; out is fp32 [group, d].
template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void weighted_v_one_kv(const float* p, const T* v, std::int64_t v_stride,
                                                                   std::int64_t total, std::int64_t group,
                                                                   std::int64_t d, float* out) {
  for (std::int64_t x = 0; x < group * d; ++x) out[x] = 0.0f;
  for (std::int64_t j = 0; j < total; ++j) {
    const T* row = v + j * v_stride;
    for (std::int64_t i = 0; i < d; i += 16) {
      const __mmask16 m = lanes(d - i);
      const __m512 vv = load16(row + i, m);
      for (std::int64_t g = 0; g < group; ++g) {
        float* o = out + g * d + i;
        _mm512_mask_storeu_ps(o, m, _mm512_fmadd_ps(_mm512_set1_ps(p[g * total + j]), vv, _mm512_maskz_loadu_ps(m, o)));
      }
    }
  }
}

template <typename T>
at::Tensor run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale, at::Tensor* probs_out) {
  const std::int64_t n_heads = q.size(0), d = q.size(2), n_kv = k.size(0), total = k.size(1);
  const std::int64_t group = n_heads / n_kv;
  const at::Tensor qf = q.to(at::kFloat).contiguous();  // [n_heads, 1, d]
  at::Tensor scores = at::empty({n_heads, total}, at::kFloat);
  const float* qp = qf.const_data_ptr<float>();
  float* sp = scores.mutable_data_ptr<float>();
  const T* kp = k.const_data_ptr<T>();
  const T* vp = v.const_data_ptr<T>();
  const std::int64_t k_head = k.stride(0), k_row = k.stride(1), v_head = v.stride(0), v_row = v.stride(1);
  const float s = static_cast<float>(scale);
  at::parallel_for(0, n_kv, 1, [&](std::int64_t h0, std::int64_t h1) {
    for (std::int64_t h = h0; h < h1; ++h)
      scores_one_kv(qp + h * group * d, kp + h * k_head, k_row, total, group, d, s, sp + h * group * total);
  });
  const at::Tensor probs = at::softmax(scores, -1);
  const float* pp = probs.const_data_ptr<float>();
  at::Tensor out = at::empty({n_heads, d}, at::kFloat);
  float* op = out.mutable_data_ptr<float>();
  at::parallel_for(0, n_kv, 1, [&](std::int64_t h0, std::int64_t h1) {
    for (std::int64_t h = h0; h < h1; ++h)
      weighted_v_one_kv(pp + h * group * total, vp + h * v_head, v_row, total, group, d, op + h * group * d);
  });
  if (probs_out) *probs_out = probs;
  return out.view({1, n_heads * d}).to(q.scalar_type());
}

}  // namespace

bool decode_attention_available(at::ScalarType dtype) {
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return avx512 && (dtype == at::kFloat || dtype == at::kBFloat16);
}

at::Tensor dense_decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                  at::Tensor* probs) {
  const auto dt = q.scalar_type();
  if (q.dim() != 3 || k.dim() != 3 || v.dim() != 3 || q.size(1) != 1 || k.size(0) <= 0 ||
      q.size(0) % k.size(0) != 0 || v.size(0) != k.size(0) || v.size(1) != k.size(1) || k.size(1) < 1 ||
      k.size(2) != q.size(2) || v.size(2) != q.size(2) || k.stride(2) != 1 || v.stride(2) != 1 ||
      k.scalar_type() != dt || v.scalar_type() != dt || !q.is_contiguous())
    throw std::invalid_argument("dense_decode_attention: inconsistent shapes, strides or dtypes");
  if (!decode_attention_available(dt))
    throw std::invalid_argument(std::string("dense_decode_attention: no vectorised path for ") + c10::toString(dt));
  return dt == at::kFloat ? run<float>(q, k, v, scale, probs) : run<c10::BFloat16>(q, k, v, scale, probs);
}

}  // namespace luka::cpu
