#include "core/luka/prefill.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "core/util/error.h"

namespace luka {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
std::atomic<bool> device_tiled{false};
}  // namespace

void set_device_tiled_prefill(bool on) { device_tiled = on; }
bool device_tiled_prefill() { return device_tiled; }

at::Tensor aten_prefill(const AttentionInputs& in, const PrefillMask& mask, double decay, int layer,
                        const LukaLayer::PrefillObserver& observer, int pool_level, at::Tensor importance,
                        at::Tensor h2o) {
  if (mask.causal() && (in.q.is_cpu() || device_tiled_prefill()))
    return tiled_prefill(in, decay, layer, observer, pool_level, std::move(importance), std::move(h2o));
  return exact_prefill(in, mask, decay, layer, observer, pool_level, std::move(importance), std::move(h2o));
}

at::Tensor exact_prefill(const AttentionInputs& in, const PrefillMask& mask, double decay, int layer,
                         const LukaLayer::PrefillObserver& observer, int pool_level, at::Tensor importance,
                         at::Tensor h2o) {
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
      if (mask.left_out.defined()) scores.masked_fill_(mask.left_out[g].view({1, 1, T}), kNegInf);
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

namespace {

// ATen's fused attention with each row's log-sum-exp, q [B, h, L, D] against k, v [B, h, S, D]:
// the output [B, h, L, D] and the log-sum-exp [B, h, L] (fp32). CPU: the flash kernel; CUDA: flash
// in 16-bit, the memory-efficient kernel otherwise (its log-sum-exp is padded to a multiple of 32).
std::pair<at::Tensor, at::Tensor> sdpa_with_lse(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                bool causal, double scale) {
  if (q.is_cpu()) {
    auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, std::nullopt, scale);
    return {out, lse};
  }
  const bool half = q.scalar_type() == at::kHalf || q.scalar_type() == at::kBFloat16;
  if (half && q.size(-1) % 8 == 0 && q.size(-1) <= 256) {
    const auto r = at::_scaled_dot_product_flash_attention(q, k, v, 0.0, causal, false, scale);
    return {std::get<0>(r), std::get<1>(r)};
  }
  const auto r = at::_scaled_dot_product_efficient_attention(q, k, v, std::nullopt, true, 0.0, causal, scale);
  return {std::get<0>(r), std::get<1>(r).narrow(-1, 0, q.size(2))};
}

}  // namespace

std::pair<at::Tensor, at::Tensor> prefill_attention(const AttentionInputs& in) {
  const std::int64_t H = in.q.size(0), n = in.q.size(1), D = in.q.size(2), KV = in.k.size(0), P = in.q_pos0;
  const std::int64_t G = in.group_size;
  // The CPU computes in fp32 as the exact form does; CUDA's flash kernel takes the cache's 16 bits.
  const at::ScalarType type = in.q.is_cpu() || in.q.scalar_type() == at::kDouble ? at::kFloat : in.q.scalar_type();
  const at::Tensor q = in.q.to(type).contiguous();
  // The new keys: a square causal block, each KV head repeated for its group's query heads.
  const at::Tensor k_new = in.k.narrow(1, P, n).to(type).repeat_interleave(G, 0);
  const at::Tensor v_new = in.v.narrow(1, P, n).to(type).repeat_interleave(G, 0);
  auto [out, lse] = sdpa_with_lse(q.unsqueeze(0), k_new.unsqueeze(0), v_new.unsqueeze(0), true, in.scale);
  out = out.squeeze(0).to(at::kFloat);
  lse = lse.squeeze(0).to(at::kFloat);
  if (P == 0) return {out, lse};
  // The cached keys, seen whole by every new query: a group's queries side by side ([KV, G·n, D])
  // against its KV head, so the cache is read as it is.
  const at::Tensor qc = q.view({KV, G * n, D}).unsqueeze(0);
  auto [out_c, lse_c] = sdpa_with_lse(qc, in.k.narrow(1, 0, P).to(type).unsqueeze(0),
                                      in.v.narrow(1, 0, P).to(type).unsqueeze(0), false, in.scale);
  out_c = out_c.squeeze(0).reshape({H, n, D}).to(at::kFloat);
  lse_c = lse_c.squeeze(0).reshape({H, n}).to(at::kFloat);
  const at::Tensor merged = at::logaddexp(lse, lse_c);
  out = out.mul_((lse - merged).exp_().unsqueeze(-1)).add_(out_c.mul_((lse_c - merged).exp_().unsqueeze(-1)));
  return {out, merged};
}

void add_prefill_tiles(const AttentionInputs& in, const at::Tensor& lse, double decay, int layer,
                       const LukaLayer::PrefillObserver& observer, int pool_level, at::Tensor importance,
                       at::Tensor h2o) {
  const std::int64_t n = in.q.size(1), KV = in.k.size(0), T = in.k.size(1), G = in.group_size;
  const at::TensorOptions floats = in.q.options().dtype(at::kFloat), longs = in.q.options().dtype(at::kLong);
  const std::int64_t kChunk = observer ? std::max<std::int64_t>(256, std::int64_t{1} << pool_level) : 256;
  pool_level = aligned_pool_level(pool_level, in.q_pos0, kChunk);
  const std::int64_t pool = std::int64_t{1} << pool_level;
  const std::int64_t kTile = std::max<std::int64_t>(512, pool);  // a multiple of the pool: cells never straddle
  // Decay: query i of n leaves h2o·decay^n + Σ_i decay^(n-1-i)·p_i, the exact form's sequence summed
  // in any order.
  at::Tensor weights;  // [1, n, 1]
  if (decay != 1.0) {
    h2o.mul_(std::pow(decay, static_cast<double>(n)));
    weights =
        at::pow(at::full({n}, decay, floats.dtype(at::kDouble)), at::arange(n - 1, -1, -1, floats.dtype(at::kDouble)))
            .to(at::kFloat)
            .view({1, n, 1});
  }
  const at::Tensor qf = in.q.to(at::kFloat);
  for (std::int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const std::int64_t m = std::min(kChunk, n - i0), seen = in.q_pos0 + i0 + m;  // keys < seen are visible
    const at::Tensor query_pos = at::arange(in.q_pos0 + i0, seen, longs).view({m, 1});
    for (std::int64_t g = 0; g < KV; ++g) {
      const at::Tensor qg = qf.narrow(0, g * G, G).narrow(1, i0, m);                 // [G, m, D]
      const at::Tensor lg = lse.narrow(0, g * G, G).narrow(1, i0, m).unsqueeze(-1);  // [G, m, 1]
      at::Tensor block;  // the observed block, at the pool's level
      if (observer) block = at::zeros({G, (m + pool - 1) / pool, (T + pool - 1) / pool}, floats);
      for (std::int64_t t0 = 0; t0 < seen; t0 += kTile) {
        const std::int64_t w = std::min(kTile, T - t0);
        at::Tensor p =
            at::matmul(qg, in.k[g].narrow(0, t0, w).to(at::kFloat).transpose(0, 1)).mul_(in.scale);  // [G, m, w]
        if (t0 + w > in.q_pos0 + i0 + 1)
          p.masked_fill_(at::arange(t0, t0 + w, longs).view({1, w}).gt(query_pos).unsqueeze(0), kNegInf);
        p.sub_(lg).exp_();
        importance[g].narrow(0, t0, w).add_(p.sum(at::IntArrayRef{0, 1}).div_(static_cast<double>(G)));
        at::Tensor rows = h2o.narrow(0, g * G, G).narrow(1, t0, w);
        rows.add_(weights.defined() ? (p * weights.narrow(1, i0, m)).sum(1) : p.sum(1));
        if (!observer) continue;
        if (pool == 1) {
          block.narrow(2, t0, w).copy_(p);
        } else {
          block.narrow(2, t0 / pool, (w + pool - 1) / pool)
              .copy_(at::max_pool2d(p, {pool, pool}, {pool, pool}, {0, 0}, {1, 1}, /*ceil_mode=*/true));
        }
      }
      if (observer) observe_prefill_block(observer, 0, layer, in.q_pos0 + i0, g * G, block);
    }
  }
}

at::Tensor tiled_prefill(const AttentionInputs& in, double decay, int layer,
                         const LukaLayer::PrefillObserver& observer, int pool_level, at::Tensor importance,
                         at::Tensor h2o) {
  const std::int64_t H = in.q.size(0), n = in.q.size(1), D = in.q.size(2);
  if (in.q.is_cpu()) pool_level = 0;  // as the exact form: the capture pools halves faster on the CPU
  const auto [out, lse] = prefill_attention(in);
  add_prefill_tiles(in, lse, decay, layer, observer, pool_level, std::move(importance), std::move(h2o));
  return out.transpose(0, 1).reshape({n, H * D}).to(in.q.scalar_type());
}

}  // namespace luka
