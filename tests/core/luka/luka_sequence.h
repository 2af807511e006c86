// A random sequence of one layer's queries and keys/values for the LuKA core's tests, fed step by
// step, with its dense attention in fp64 as the reference.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <utility>

#include "core/model/attention.h"

namespace luka::test {

// A random sequence of queries and keys/values for one layer, fed step by step.
struct Sequence {
  std::int64_t H, KV, D, N;
  at::Tensor q, k, v;  // [H, N, D], [KV, N, D], [KV, N, D]
  Sequence(std::int64_t h, std::int64_t kv, std::int64_t d, std::int64_t n, std::uint64_t seed, double q_scale = 1.5)
      : H(h), KV(kv), D(d), N(n) {
    at::manual_seed(seed);
    q = at::randn({H, N, D}) * q_scale;
    k = at::randn({KV, N, D});
    v = at::randn({KV, N, D});
  }
  AttentionInputs inputs(std::int64_t pos0, std::int64_t n) const {
    AttentionInputs in;
    in.q = q.narrow(1, pos0, n).contiguous();
    in.k = k.narrow(1, 0, pos0 + n);
    in.v = v.narrow(1, 0, pos0 + n);
    in.q_pos0 = pos0;
    in.group_size = H / KV;
    in.scale = 1.0 / std::sqrt(static_cast<double>(D));
    return in;
  }
  // Dense attention of the query at `pos` over keys 0..pos, in fp64: [H, D] and probs [H, pos+1].
  std::pair<at::Tensor, at::Tensor> dense(std::int64_t pos) const {
    const std::int64_t G = H / KV;
    const at::Tensor kk = k.narrow(1, 0, pos + 1).to(at::kDouble).repeat_interleave(G, 0);
    const at::Tensor vv = v.narrow(1, 0, pos + 1).to(at::kDouble).repeat_interleave(G, 0);
    const at::Tensor qq = q.narrow(1, pos, 1).to(at::kDouble);
    const at::Tensor p = at::softmax(at::matmul(qq, kk.transpose(1, 2)).squeeze(1) / std::sqrt(static_cast<double>(D)), -1);
    return {at::matmul(p.unsqueeze(1), vv).squeeze(1), p};
  }
};

}  // namespace luka::test
