// The element math of the decoder's fused one-row ops, defined once for the CPU decode step
// (kernels/cpu/decode_step) and for device kernels: RMSNorm's scale, RoPE's rotation, SwiGLU, and
// the epilogues that fold a bias and the residual add into a GEMV's output.
//
// Each function reproduces the unfused decoder (core/model/decoder.cpp, itself Hugging Face's
// order of operations) including where it rounds to the compute dtype: `R` is a rounding functor
// float -> float that rounds to the compute dtype (the identity for fp32, round-to-nearest-even
// to bf16 for bf16), applied wherever an ATen op of the unfused path would write a tensor of that
// dtype. The arithmetic itself is fp32, as ATen's CPU kernels do for bf16 operands.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/common/luka_rules.h"  // LUKA_HD

namespace luka::fused {

// fp32: nothing to round.
struct RoundF32 {
  LUKA_HD float operator()(float x) const { return x; }
};

// bf16, round to nearest even (every NaN becomes the quiet NaN 0x7FC0), as c10::BFloat16 rounds.
LUKA_HD inline std::uint16_t bf16_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
LUKA_HD inline float bf16_value(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
struct RoundBF16 {
  LUKA_HD float operator()(float x) const { return bf16_value(bf16_bits(x)); }
};

// [SECTION] RMSNorm: y_i = R(w_i · R(x_i · r)), r = 1 / sqrt(mean(x²) + eps)
// The sum of squares is the one reduction; a kernel computes it in any order and passes it here.
LUKA_HD inline float rms_inverse(float sum_of_squares, std::int64_t n, float eps) {
  return 1.0f / std::sqrt(sum_of_squares / static_cast<float>(n) + eps);
}
template <class R>
LUKA_HD inline float rms_apply(float x, float inverse, float weight, R round) {
  return round(weight * round(x * inverse));
}

// The residual add folded into the RMSNorm after it (the step's residual stream x and the output
// y of the layer that feeds it, already rounded): x <- R(x + y) is written back, and the norm then
// reads the new x. The sum of squares is taken over the rounded values, as the unfused decoder's
// norm reads the tensor the add wrote.
template <class R>
LUKA_HD inline float residual_add(float x, float y, R round) {
  return round(x + y);
}

// [SECTION] RoPE, rotate-half (NEOX) style over the full head dim
// For i < D/2, the pair (x_i, x_{i+D/2}) with the angle of frequency i:
//   lo = R(R(x_i · cos) + R(-x_{i+D/2} · sin)),  hi = R(R(x_{i+D/2} · cos) + R(x_i · sin)),
// where cos and sin are already rounded to the compute dtype (transformers casts the tables).
template <class R>
LUKA_HD inline void rope_pair(float x_lo, float x_hi, float cos_v, float sin_v, float& lo, float& hi, R round) {
  lo = round(round(x_lo * cos_v) + round(-x_hi * sin_v));
  hi = round(round(x_hi * cos_v) + round(x_lo * sin_v));
}
// The angle of frequency `inv_freq` at position `pos`, in fp32 as transformers computes it.
LUKA_HD inline float rope_angle(std::int64_t pos, float inv_freq) { return static_cast<float>(pos) * inv_freq; }
// One entry of the position's tables: cos and sin of the angle in fp32, rounded to the compute
// dtype once (transformers casts the tables). A device's cosf/sinf may differ from the host's by
// an ulp or two of fp32 before the rounding.
template <class R>
LUKA_HD inline void rope_table_entry(std::int64_t pos, float inv_freq, float& cos_v, float& sin_v, R round) {
  const float a = rope_angle(pos, inv_freq);
  cos_v = round(std::cos(a));
  sin_v = round(std::sin(a));
}

// [SECTION] q/k norm + RoPE + KV append, one head of the fused q|k|v row
// The q, k and v projections come out of one GEMM as a row of heads + 2·kv_heads vectors of
// head_dim values: q heads first, then k, then v. A q or k head takes the per-head RMSNorm (when
// the model has q_norm / k_norm; `inverse` from rms_inverse over the head's raw values) and then
// RoPE, pair by pair; a k head goes to the key cache at the step's position, a v head unchanged to
// the value cache. The unfused decoder writes the normed head (a tensor) before rotating it, so
// the norm's output is rounded before RoPE reads it.
enum class QkvRole { kQuery, kKey, kValue };
LUKA_HD inline QkvRole qkv_role(std::int64_t head, std::int64_t heads, std::int64_t kv_heads) {
  return head < heads ? QkvRole::kQuery : head < heads + kv_heads ? QkvRole::kKey : QkvRole::kValue;
}
// The pair (x_lo, x_hi) = (x_i, x_{i+D/2}) of a q or k head: normed when `norm`, then rotated.
template <class R>
LUKA_HD inline void norm_rope_pair(float x_lo, float x_hi, bool norm, float inverse, float w_lo, float w_hi,
                                   float cos_v, float sin_v, float& lo, float& hi, R round) {
  if (norm) {
    x_lo = rms_apply(x_lo, inverse, w_lo, round);
    x_hi = rms_apply(x_hi, inverse, w_hi, round);
  }
  rope_pair(x_lo, x_hi, cos_v, sin_v, lo, hi, round);
}
// Element offset of (kv head g, position t, dim d) in a cache of the given strides.
LUKA_HD inline std::int64_t cache_offset(std::int64_t g, std::int64_t t, std::int64_t d, std::int64_t head_stride,
                                         std::int64_t token_stride) {
  return g * head_stride + t * token_stride + d;
}

// [SECTION] SwiGLU: R(R(silu(R(gate))) · R(up)), gate and up the raw fp32 dot products (+ bias)
LUKA_HD inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
template <class R>
LUKA_HD inline float swiglu(float gate, float up, R round) {
  return round(round(silu(round(gate))) * round(up));
}
// The gate and up projections come out of one GEMM as one row gate|up of 2·I values: element i of
// the product is swiglu(gate_up[i], gate_up[I + i]) (both already rounded by the GEMM, and rounding
// a rounded value again changes nothing).

// [SECTION] GEMV epilogues (acc: the row's fp32 dot product)
// A linear layer's output: R(acc + bias).
template <class R>
LUKA_HD inline float linear_out(float acc, float bias, R round) {
  return round(acc + bias);
}
// The residual add folded into the layer that feeds it: x + R(acc + bias), rounded.
template <class R>
LUKA_HD inline float residual_out(float residual, float acc, float bias, R round) {
  return round(residual + round(acc + bias));
}

}  // namespace luka::fused
