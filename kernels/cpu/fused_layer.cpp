#include "kernels/cpu/fused_layer.h"

#include <stdexcept>
#include <string>

#include "kernels/common/fused_ops.h"

namespace luka::cpu {

namespace {

using fused::ElemDtype;

float load(const void* p, std::int64_t i, ElemDtype dt) {
  return dt == ElemDtype::kF32 ? static_cast<const float*>(p)[i]
                               : fused::bf16_value(static_cast<const std::uint16_t*>(p)[i]);
}
// Stores a value already rounded to the dtype (exact for bf16).
void store(void* p, std::int64_t i, float v, ElemDtype dt) {
  if (dt == ElemDtype::kF32)
    static_cast<float*>(p)[i] = v;
  else
    static_cast<std::uint16_t*>(p)[i] = fused::bf16_bits(v);
}

void require(const std::string& why) {
  if (!why.empty()) throw std::invalid_argument(why);
}

template <class R>
void norm_as(const fused::NormArgs& a, R round) {
  for (std::int64_t r = 0; r < a.rows; ++r) {
    const std::int64_t base = r * a.n;
    if (a.add)
      for (std::int64_t i = 0; i < a.n; ++i)
        store(a.x, base + i, fused::residual_add(load(a.x, base + i, a.dtype), load(a.add, base + i, a.dtype), round),
              a.dtype);
    const float ss = block_sum(a.n, kNormThreads, [&](std::int64_t i) {
      const float v = load(a.x, base + i, a.dtype);
      return v * v;
    });
    const float inv = fused::rms_inverse(ss, a.n, a.eps);
    for (std::int64_t i = 0; i < a.n; ++i)
      store(a.out, base + i, fused::rms_apply(load(a.x, base + i, a.dtype), inv, load(a.weight, i, a.dtype), round),
            a.dtype);
  }
}

template <class R>
void qkv_as(const fused::QkvArgs& a, R round) {
  const std::int64_t D = a.head_dim, half = D / 2, pos = *a.position;
  const std::int64_t threads = (half + 31) / 32 * 32;
  const bool norm = a.q_norm != nullptr, append = pos >= 0 && pos < a.capacity;
  for (std::int64_t h = 0; h < a.heads + 2 * a.kv_heads; ++h) {
    const fused::QkvRole role = fused::qkv_role(h, a.heads, a.kv_heads);
    const std::int64_t in = h * D;
    if (role == fused::QkvRole::kValue) {
      if (!append) continue;
      const std::int64_t g = h - a.heads - a.kv_heads;
      for (std::int64_t d = 0; d < D; ++d)
        store(a.v_cache, fused::cache_offset(g, pos, d, a.head_stride, a.token_stride), load(a.qkv, in + d, a.dtype),
              a.dtype);
      continue;
    }
    float inv = 0.0f;
    if (norm) {
      const float ss = block_sum(half, threads, [&](std::int64_t i) {
        const float lo = load(a.qkv, in + i, a.dtype), hi = load(a.qkv, in + half + i, a.dtype);
        return lo * lo + hi * hi;
      });
      inv = fused::rms_inverse(ss, D, a.eps);
    }
    const void* w = role == fused::QkvRole::kQuery ? a.q_norm : a.k_norm;
    // Read the whole head first: q_out may be qkv itself.
    float lo[fused::kMaxQkvHeadDim / 2], hi[fused::kMaxQkvHeadDim / 2];
    for (std::int64_t i = 0; i < half; ++i)
      fused::norm_rope_pair(load(a.qkv, in + i, a.dtype), load(a.qkv, in + half + i, a.dtype), norm, inv,
                            norm ? load(w, i, a.dtype) : 0.0f, norm ? load(w, half + i, a.dtype) : 0.0f, a.cos[i],
                            a.sin[i], lo[i], hi[i], round);
    for (std::int64_t i = 0; i < half; ++i) {
      if (role == fused::QkvRole::kQuery) {
        store(a.q_out, in + i, lo[i], a.dtype);
        store(a.q_out, in + half + i, hi[i], a.dtype);
      } else if (append) {
        const std::int64_t g = h - a.heads;
        store(a.k_cache, fused::cache_offset(g, pos, i, a.head_stride, a.token_stride), lo[i], a.dtype);
        store(a.k_cache, fused::cache_offset(g, pos, half + i, a.head_stride, a.token_stride), hi[i], a.dtype);
      }
    }
  }
}

template <class R>
void swiglu_as(const fused::SwigluArgs& a, R round) {
  for (std::int64_t i = 0; i < a.intermediate; ++i)
    store(a.out, i,
          fused::swiglu(load(a.gate_up, i, a.dtype), load(a.gate_up, a.intermediate + i, a.dtype), round), a.dtype);
}

}  // namespace

void residual_rms_norm(const fused::NormArgs& args) {
  require(fused::check(args));
  if (args.dtype == ElemDtype::kF32)
    norm_as(args, fused::RoundF32{});
  else
    norm_as(args, fused::RoundBF16{});
}

void rope_tables(const fused::RopeTableArgs& args) {
  require(fused::check(args));
  for (std::int64_t i = 0; i < args.half; ++i) {
    if (args.dtype == ElemDtype::kF32)
      fused::rope_table_entry(*args.position, args.inv_freq[i], args.cos[i], args.sin[i], fused::RoundF32{});
    else
      fused::rope_table_entry(*args.position, args.inv_freq[i], args.cos[i], args.sin[i], fused::RoundBF16{});
  }
}

void qkv_norm_rope(const fused::QkvArgs& args) {
  require(fused::check(args));
  if (args.dtype == ElemDtype::kF32)
    qkv_as(args, fused::RoundF32{});
  else
    qkv_as(args, fused::RoundBF16{});
}

void swiglu(const fused::SwigluArgs& args) {
  require(fused::check(args));
  if (args.dtype == ElemDtype::kF32)
    swiglu_as(args, fused::RoundF32{});
  else
    swiglu_as(args, fused::RoundBF16{});
}

}  // namespace luka::cpu
