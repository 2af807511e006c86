// Dense causal attention on CPU (the default per-layer attention). GQA-aware without repeating
// K/V: the query heads of one group are stacked so each KV head is read once.
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

namespace luka::cpu {

// q: [n_heads, n_new, head_dim] (contiguous); k, v: [n_kv_heads, T, head_dim] (each head's rows
// contiguous; views into a longer cache are fine). Query i sits at absolute position q_pos0 + i
// and sees keys 0 .. q_pos0 + i. Scores are computed in q's dtype and scaled there (as Hugging
// Face eager does), softmax runs in fp32 and is cast back before the product with V.
// Prompts longer than 1024 tokens are processed in chunks of 1024 queries (bounded memory).
// The decode step (one query that sees the whole cache) goes through dense_decode_attention
// instead, which keeps fp32 from the scores to the output (decode_attention.h).
// Returns [n_new, n_heads * head_dim] in q's dtype.
at::Tensor dense_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  std::int64_t q_pos0, double scale);

}  // namespace luka::cpu
