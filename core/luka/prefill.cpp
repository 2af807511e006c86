#include "core/luka/prefill.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/util/error.h"

namespace luka {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}  // namespace

at::Tensor aten_prefill(const AttentionInputs& in, const PrefillMask& mask, double decay, int layer,
                        const LukaLayer::PrefillObserver& observer, int pool_level, at::Tensor importance, at::Tensor h2o) {
  const std::int64_t H = in.q.size(0), n = in.q.size(1), D = in.q.size(2), KV = in.k.size(0), T = in.k.size(1);
  const std::int64_t G = in.group_size;
  const at::TensorOptions floats = in.q.options().dtype(at::kFloat), longs = in.q.options().dtype(at::kLong);
  const at::Tensor qf = in.q.to(at::kFloat);
  const at::Tensor kf = in.k.to(at::kFloat), vf = in.v.to(at::kFloat);
  const bool near = mask.near_window >= 0;  // DAR: near keys from the raw cache
  const at::Tensor near_kf = near ? mask.near_k.to(at::kFloat) : at::Tensor(), near_vf = near ? mask.near_v.to(at::kFloat) : at::Tensor();
  at::Tensor out = at::empty({H, n, D}, floats);
  const at::Tensor key_pos = at::arange(T, longs).view({1, T});
  // On a device the blocks are pooled before they travel, in query blocks of 256 or of one pooled
  // cell's height when that is more. On the CPU they go at level 0: the capture's half pyramid
  // pools them faster than ATen's max_pool2d (a 4K-token capture of every layer's map: 25 s
  // against 34 s, bench/results/captures-cpu.md).
  if (in.q.is_cpu()) pool_level = 0;
  const std::int64_t kChunk = observer ? std::max<std::int64_t>(256, std::int64_t{1} << pool_level) : 256;
  pool_level = aligned_pool_level(pool_level, in.q_pos0, kChunk);
  for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const std::int64_t m = std::min(kChunk, n - i0);
    const at::Tensor query_pos = at::arange(in.q_pos0 + i0, in.q_pos0 + i0 + m, longs).view({m, 1});
    at::Tensor hidden = key_pos.gt(query_pos);  // [m, T]
    at::Tensor uniform;                         // fixed window: [m, 1], rows that see nothing causally
    if (mask.fixed) {
      const std::int64_t start = T - mask.window;
      uniform = query_pos.lt(start);
      hidden = key_pos.lt(start).logical_or(hidden.logical_and(uniform.logical_not()));
    } else if (mask.sparse) {
      hidden = hidden.logical_or(key_pos.ge(32).logical_and(key_pos.le(query_pos - mask.window)));
    }
    const at::Tensor close = near ? key_pos.ge(query_pos - mask.near_window).logical_or(key_pos.lt(mask.near_first)) : at::Tensor();  // [m, T]
    for (std::int64_t g = 0; g < KV; ++g) {
      const at::Tensor qg = qf.narrow(0, g * G, G).narrow(1, i0, m);                    // [G, m, D]
      at::Tensor scores = at::matmul(qg, kf[g].transpose(0, 1)).mul_(in.scale);         // [G, m, T]
      if (near) scores = at::where(close.unsqueeze(0), at::matmul(qg, near_kf[g].transpose(0, 1)).mul_(in.scale), scores);
      if (uniform.defined()) scores.masked_fill_(uniform.unsqueeze(0), 0.0);
      scores.masked_fill_(hidden.unsqueeze(0), kNegInf);
      const at::Tensor probs = at::softmax(scores, -1);
      if (near) {
        const at::Tensor c = close.unsqueeze(0).to(at::kFloat);
        out.narrow(0, g * G, G).narrow(1, i0, m).copy_(at::matmul(probs * (1 - c), vf[g]) + at::matmul(probs * c, near_vf[g]));
      } else {
        out.narrow(0, g * G, G).narrow(1, i0, m).copy_(at::matmul(probs, vf[g]));
      }
      if (observer) observe_prefill_block(observer, pool_level, layer, in.q_pos0 + i0, g * G, probs);
      add_prefill_probs(probs, g, decay, importance, h2o);
    }
  }
  return out.transpose(0, 1).reshape({n, H * D}).to(in.q.scalar_type());
}

int aligned_pool_level(int level, std::int64_t q_pos0, std::int64_t block) {
  while (level > 0 && ((q_pos0 | block) & ((std::int64_t{1} << level) - 1)) != 0) --level;
  return level;
}

void observe_prefill_block(const LukaLayer::PrefillObserver& observer, int pool_level, int layer, std::int64_t q0,
                           std::int64_t head0, const at::Tensor& probs) {
  if (pool_level == 0) {
    observer(layer, q0, head0, probs.is_cpu() ? probs.contiguous() : probs.cpu().contiguous());
    return;
  }
  const std::int64_t p = std::int64_t{1} << pool_level;
  if (q0 % p != 0)
    fail("luka layer " + std::to_string(layer), "prefill block at query " + std::to_string(q0) + " does not start on a pooled cell of " +
                                                    std::to_string(p) + " rows");
  // Ceil mode: the last cell of a row or column pools what exists (probabilities are >= 0, so
  // the padding max_pool2d leaves out changes nothing).
  const at::Tensor pooled = at::max_pool2d(probs.to(at::kFloat), {p, p}, {p, p}, {0, 0}, {1, 1}, /*ceil_mode=*/true);
  observer(layer, q0, head0, pooled.is_cpu() ? pooled.contiguous() : pooled.cpu().contiguous());
}

void add_prefill_probs(const at::Tensor& probs, std::int64_t g, double decay, at::Tensor importance, at::Tensor h2o) {
  const std::int64_t G = probs.size(0), m = probs.size(1);
  importance[g].add_(probs.sum(at::IntArrayRef{0, 1}).div_(static_cast<double>(G)));  // group mean
  for (std::int64_t j = 0; j < G; ++j) {
    at::Tensor row = h2o[g * G + j];
    if (decay == 1.0) {
      row.add_(probs[j].sum(0));
    } else {  // sequential decay over the queries of the chunk
      for (std::int64_t i = 0; i < m; ++i) row.mul_(decay).add_(probs[j][i]);
    }
  }
}

}  // namespace luka
