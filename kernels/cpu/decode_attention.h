// Dense attention for one new query token against a KV cache: the decode step.
//
// Scores, softmax and the weighted sum of V all run in fp32 from the stored q/K/V values (bf16
// inputs are widened exactly), and the output is rounded once to q's dtype. Each KV head's rows
// are read once for all the query heads of its group.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

namespace luka::cpu {

// True when `dense_decode_attention` has a vectorised path for this dtype on this CPU.
bool decode_attention_available(at::ScalarType dtype);

// q: [n_heads, 1, head_dim] contiguous; k, v: [n_kv_heads, T, head_dim] with contiguous rows
// (views into a longer cache are fine); the query sees all T keys. dtype float or bfloat16,
// the same for q, k and v. If `probs` is given it receives the fp32 attention weights
// [n_heads, T]. Returns [1, n_heads * head_dim] in q's dtype.
at::Tensor dense_decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                  at::Tensor* probs = nullptr);

}  // namespace luka::cpu
