#include "kernels/cpu/dense_attention.h"

#include "kernels/cpu/decode_attention.h"

#include <algorithm>
#include <limits>
#include <vector>
#include <stdexcept>
#include <string>

namespace luka::cpu {

at::Tensor dense_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  std::int64_t q_pos0, double scale) {
  const std::int64_t n_heads = q.size(0), n_new = q.size(1), head_dim = q.size(2);
  const std::int64_t n_kv = k.size(0), total = k.size(1);
  if (n_kv <= 0 || n_heads % n_kv != 0 || v.size(0) != n_kv || v.size(1) != total ||
      k.size(2) != head_dim || v.size(2) != head_dim || q_pos0 < 0 || q_pos0 + n_new > total)
    throw std::invalid_argument("dense_causal_attention: inconsistent shapes (q_pos0 " +
                                std::to_string(q_pos0) + ", n_new " + std::to_string(n_new) + ", T " +
                                std::to_string(total) + ")");
  if (n_new == 1 && q_pos0 + 1 == total && k.stride(2) == 1 && v.stride(2) == 1 &&
      k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
      decode_attention_available(q.scalar_type()))
    return dense_decode_attention(q.contiguous(), k, v, scale);
  // Long prompts go in chunks of queries so the score buffer stays O(chunk · T), not O(n · T).
  constexpr std::int64_t kChunk = 1024;
  if (n_new > kChunk) {
    const at::Tensor qc = q.contiguous();
    std::vector<at::Tensor> parts;
    for (std::int64_t i = 0; i < n_new; i += kChunk) {
      const std::int64_t m = std::min(kChunk, n_new - i);
      // Queries i .. i+m-1 see keys up to q_pos0 + i + m - 1: pass exactly those.
      parts.push_back(dense_causal_attention(qc.narrow(1, i, m), k.narrow(1, 0, q_pos0 + i + m),
                                             v.narrow(1, 0, q_pos0 + i + m), q_pos0 + i, scale));
    }
    return at::cat(parts, 0);
  }
  const std::int64_t group = n_heads / n_kv;
  // [n_kv, group * n_new, head_dim]: query heads h = kv * group + g share KV head kv.
  const at::Tensor qg = q.contiguous().view({n_kv, group * n_new, head_dim});
  at::Tensor scores = at::matmul(qg, k.transpose(1, 2));  // [n_kv, group * n_new, T]
  scores.mul_(scale);
  // Key j is hidden from query i when j > q_pos0 + i; nothing is hidden for the last query of a
  // full cache (the usual decode step), so skip the mask there.
  if (q_pos0 + 1 < total) {
    const at::Tensor key_pos = at::arange(total, at::kLong).view({1, total});
    const at::Tensor query_pos = at::arange(q_pos0, q_pos0 + n_new, at::kLong).view({n_new, 1});
    const at::Tensor hidden = key_pos.gt(query_pos);  // [n_new, T]
    scores.view({n_kv, group, n_new, total})
        .masked_fill_(hidden.view({1, 1, n_new, total}), -std::numeric_limits<double>::infinity());
  }
  at::Tensor probs = at::softmax(scores, -1, at::kFloat);
  if (probs.scalar_type() != q.scalar_type()) probs = probs.to(q.scalar_type());
  const at::Tensor out = at::matmul(probs, v);  // [n_kv, group * n_new, head_dim]
  return out.view({n_heads, n_new, head_dim}).transpose(0, 1).reshape({n_new, n_heads * head_dim});
}

}  // namespace luka::cpu
