// The per-layer attention entry point. The decoder computes Q/K/V, applies norms and RoPE and
// appends K/V to the layer's cache; everything after that goes through one LayerAttention per
// layer, so sparse modes (which keep their own per-layer state) can replace it layer by layer.
#pragma once

#include <cstdint>
#include <memory>

#include <ATen/ATen.h>

namespace luka {

struct AttentionInputs {
  int layer = 0;
  at::Tensor q;  // [n_heads, n_new, head_dim], post q_norm and RoPE, compute dtype, contiguous
  at::Tensor k;  // [n_kv_heads, T, head_dim]: the layer's cache including the new tokens (a view)
  at::Tensor v;  // [n_kv_heads, T, head_dim]
  std::int64_t q_pos0 = 0;      // absolute position of the first new query (T - n_new)
  std::int64_t group_size = 1;  // n_heads / n_kv_heads (query head h uses KV head h / group_size)
  double scale = 1.0;           // 1 / sqrt(head_dim)
  // The token ids at positions 0 .. T-1 (the decoder's sequence so far, the new ones included);
  // null where the caller has none. SemantiCache's delimiter pages read them.
  const std::int32_t* ids = nullptr;
};

class LayerAttention {
 public:
  virtual ~LayerAttention() = default;
  // Returns [n_new, n_heads * head_dim] in q's dtype (the o_proj input).
  virtual at::Tensor forward(const AttentionInputs& in) = 0;
  // A new sequence starts (Decoder::reset): drop any per-sequence state.
  virtual void reset() {}
  // The run will reach `tokens` positions (Decoder::reserve, after reset): allocate per-token state
  // for them now, so no step of the run regrows it.
  virtual void reserve(std::int64_t tokens) { (void)tokens; }
  virtual const char* name() const = 0;
};

// Exact dense causal attention (kernels/cpu/dense_attention).
class DenseAttention final : public LayerAttention {
 public:
  at::Tensor forward(const AttentionInputs& in) override;
  const char* name() const override { return "dense"; }
};

}  // namespace luka
