#include "core/model/attention.h"

#include <algorithm>
#include <limits>

#include "kernels/cpu/dense_attention.h"

namespace luka {

namespace {

// Device-generic causal attention on ATen ops (the GPU model's default attention before LuKA is
// installed): scores and softmax in fp32, chunks of 1024 queries.
at::Tensor aten_causal_attention(const AttentionInputs& in) {
  const std::int64_t H = in.q.size(0), n = in.q.size(1), D = in.q.size(2), T = in.k.size(1);
  const at::Tensor k = in.k.to(at::kFloat).repeat_interleave(in.group_size, 0);
  const at::Tensor v = in.v.to(at::kFloat).repeat_interleave(in.group_size, 0);
  const at::TensorOptions longs = at::TensorOptions().dtype(at::kLong).device(in.q.device());
  at::Tensor out = at::empty({H, n, D}, in.q.options().dtype(at::kFloat));
  for (std::int64_t i0 = 0; i0 < n; i0 += 1024) {
    const std::int64_t m = std::min<std::int64_t>(1024, n - i0);
    at::Tensor s = at::matmul(in.q.narrow(1, i0, m).to(at::kFloat), k.transpose(1, 2)).mul_(in.scale);  // [H, m, T]
    const at::Tensor hidden = at::arange(T, longs).view({1, T}).gt(at::arange(in.q_pos0 + i0, in.q_pos0 + i0 + m, longs).view({m, 1}));
    s.masked_fill_(hidden.unsqueeze(0), -std::numeric_limits<float>::infinity());
    out.narrow(1, i0, m).copy_(at::matmul(at::softmax(s, -1), v));
  }
  return out.transpose(0, 1).reshape({n, H * D}).to(in.q.scalar_type());
}

}  // namespace

at::Tensor DenseAttention::forward(const AttentionInputs& in) {
  if (!in.q.is_cpu()) return aten_causal_attention(in);
  return cpu::dense_causal_attention(in.q, in.k, in.v, in.q_pos0, in.scale);
}

}  // namespace luka
