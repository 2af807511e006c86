// Lined mode of the LuKA step on the GPU (pairs with core/luka/cpu/lined.cpp, docs/design.md §5.3):
// the heavy hitters selected from h2o_score on the device, then split-K attention over the cover
// of heavy hitters and recent window.
#include "kernels/cuda/luka_decode.h"

#include "kernels/cuda/luka/step.cuh"

namespace luka::cuda {
namespace {

__global__ void fill_kernel(float* __restrict__ x, long long n, float value) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    x[i] = value;
}

// Block h: merges the splits of head h into out[h, :] and norm[h] = (max, 1/sum). Dynamic
// shared memory: combine_shared_bytes(splits).
template <class T>
__global__ void combine_kernel(const float* __restrict__ parts, T* __restrict__ out, float* __restrict__ norm, int splits, int D) {
  extern __shared__ float weight[];
  const int h = blockIdx.x;
  detail::combine_splits<T>(parts + static_cast<long long>(h) * splits * (D + 2), splits, D, out + h * D, norm + 2 * h, weight);
}

struct LinedSelectParams {
  const float* h2o;
  long long ld;
  int heads, group, share, outside, m;
  float* score;     // [units, outside] (units of several heads)
  int* heavy;       // [units, m]
  int* heavy_out;   // optional [H, m]
};

// Block u: the m largest unit scores over [0, outside) by a 4-pass radix select on the fp32 bits
// (scores are ≥ 0), then those positions in ascending order, ties to the lower position.
__global__ void __launch_bounds__(kLinedSelectThreads) lined_select_kernel(LinedSelectParams p) {
  __shared__ unsigned hist[256];
  __shared__ unsigned prefix_s, remaining_s;
  __shared__ int scratch[32];
  const int u = blockIdx.x, tid = threadIdx.x;
  int h0, hn;
  unit_heads(p.share, u, p.heads, p.group, &h0, &hn);
  const float* score = p.h2o + static_cast<long long>(h0) * p.ld;
  if (hn > 1) {
    float* sc = p.score + static_cast<long long>(u) * p.outside;
    for (int t = tid; t < p.outside; t += blockDim.x) {
      float s = 0.f;
      for (int i = 0; i < hn; ++i) s = __fadd_rn(s, p.h2o[static_cast<long long>(h0 + i) * p.ld + t]);
      sc[t] = s;
    }
    __syncthreads();
    score = sc;
  }
  int* heavy = p.heavy + static_cast<long long>(u) * p.m;
  const auto emit = [&](int i, int t) {
    heavy[i] = t;
    if (p.heavy_out)
      for (int j = 0; j < hn; ++j) p.heavy_out[static_cast<long long>(h0 + j) * p.m + i] = t;
  };
  if (p.m >= p.outside) {
    for (int t = tid; t < p.outside; t += blockDim.x) emit(t, t);
    return;
  }
  unsigned prefix = 0, mask = 0;
  if (tid == 0) remaining_s = static_cast<unsigned>(p.m);
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = tid; b < 256; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    for (int t = tid; t < p.outside; t += blockDim.x) {
      const unsigned key = __float_as_uint(score[t]);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (tid == 0) {
      unsigned cum = 0, remaining = remaining_s;
      int b = 255;
      for (; b > 0; --b) {
        if (cum + hist[b] >= remaining) break;
        cum += hist[b];
      }
      remaining_s = remaining - cum;
      prefix_s = prefix | (static_cast<unsigned>(b) << shift);
    }
    __syncthreads();
    prefix = prefix_s;
    mask |= 255u << shift;
  }
  const unsigned v = prefix, ties_wanted = remaining_s;
  int out = 0, ties = 0;
  for (int base = 0; base < p.outside; base += blockDim.x) {
    const int t = base + tid;
    const unsigned key = t < p.outside ? __float_as_uint(score[t]) : 0u;
    const int is_tie = t < p.outside && key == v;
    int tie_total;
    const int tie_rank = ties + block_exclusive_scan(is_tie, &tie_total, scratch);
    const int take = t < p.outside && (key > v || (is_tie && tie_rank < static_cast<int>(ties_wanted)));
    int take_total;
    const int pos = out + block_exclusive_scan(take, &take_total, scratch);
    if (take) emit(pos, t);
    out += take_total;
    ties += tie_total;
  }
}

struct LinedAttentionParams {
  const void* q;
  const void* k;
  const void* v;
  long long hs, ts, tokens;
  int group, heads, share, outside, m, n, splits, per_split;
  float scale;
  const int* heavy;     // [units, m]
  float* logit_tok;     // [H, tokens], −inf outside the cover
  float* parts;         // [H, splits, D + 2]
};

// Block (head, split) over the head's cover entries: heavy hitters j < m, window after.
template <class T, int PER>
__global__ void __launch_bounds__(kWarps * 32) lined_attention_kernel(LinedAttentionParams p) {
  constexpr int D = PER * 32;
  const int h = blockIdx.x, split = blockIdx.y, g = h / p.group;
  const int unit = p.share == static_cast<int>(Selection::kPerHead) ? h : p.share == static_cast<int>(Selection::kPerGroup) ? g : 0;
  const int* heavy = p.heavy + static_cast<long long>(unit) * p.m;
  const int j0 = split * p.per_split, j1 = min(p.n, j0 + p.per_split);
  attend_one_head<T, PER>(
      static_cast<const T*>(p.q) + h * D, p.scale, static_cast<const T*>(p.k) + g * p.hs, static_cast<const T*>(p.v) + g * p.hs,
      p.ts, j0, j1, [&](int j) { return j < p.m ? static_cast<long long>(heavy[j]) : static_cast<long long>(p.outside) + (j - p.m); },
      [&](long long t, float x) { p.logit_tok[static_cast<long long>(h) * p.tokens + t] = x; },
      p.parts + (static_cast<long long>(h) * p.splits + split) * (D + 2));
}

struct LinedPlan {
  int outside = 0, m = 0, n = 0, splits = 0, per_split = 0, units = 0;
  float *score = nullptr, *logit_tok = nullptr, *parts = nullptr, *norm = nullptr;
  int* heavy = nullptr;
  std::size_t bytes = 0;
};

// outside = tokens - window, m = heavy hitters, n = m + window; every size grows with T,
// outside, m and n (lined_workspace_bound).
LinedPlan plan_lined(const LinedDecodeArgs& a, std::int64_t T, std::int64_t outside, std::int64_t m, std::int64_t n,
                     void* workspace) {
  LinedPlan pl;
  const DecodeCommon& c = a.c;
  const std::int64_t H = c.heads, D = c.kv.head_dim;
  pl.outside = static_cast<int>(outside);
  pl.m = static_cast<int>(m);
  pl.n = static_cast<int>(n);
  pl.splits = choose_splits(pl.n, c.splits, c.heads);
  pl.per_split = (pl.n + pl.splits - 1) / pl.splits;
  pl.units = a.share == Selection::kPerHead ? static_cast<int>(H) : a.share == Selection::kPerGroup ? static_cast<int>(c.kv.kv_heads) : 1;
  Bump b(workspace);
  pl.score = b.take<float>(static_cast<std::int64_t>(pl.units) * pl.outside);
  pl.heavy = b.take<int>(static_cast<std::int64_t>(pl.units) * pl.m);
  pl.logit_tok = b.take<float>(H * T);
  pl.parts = b.take<float>(H * pl.splits * (D + 2));
  pl.norm = b.take<float>(2 * H);
  pl.bytes = b.bytes();
  return pl;
}

LinedPlan plan_lined(const LinedDecodeArgs& a, void* workspace) {
  const std::int64_t T = a.c.kv.tokens;
  return plan_lined(a, T, T - a.window, a.heavy, a.heavy + a.window, workspace);
}

}  // namespace

std::size_t lined_workspace_bytes(const LinedDecodeArgs& a) { return plan_lined(a, nullptr).bytes; }

std::size_t lined_workspace_bound(const LinedDecodeArgs& a, std::int64_t tokens) {
  return plan_lined(a, tokens, tokens, tokens, tokens, nullptr).bytes;
}

std::string lined_decode(const LinedDecodeArgs& a, void* workspace, std::size_t workspace_bytes, void* stream) {
  const DecodeCommon& c = a.c;
  if (std::string e = check_common(c); !e.empty()) return e;
  const std::int64_t T = c.kv.tokens;
  if (a.window < 0 || a.window > T) return "window must be in [0, tokens]";
  if (a.heavy < 0 || a.heavy > T - a.window) return "heavy must be in [0, tokens - window]";
  if (a.window + a.heavy < 1) return "empty cover (window 0 and no heavy hitters)";
  const LinedPlan pl = plan_lined(a, workspace);
  if (!workspace || workspace_bytes < pl.bytes) return "workspace missing or too small";
  const auto s = static_cast<cudaStream_t>(stream);
  fill_kernel<<<static_cast<unsigned>(std::min<std::int64_t>((c.heads * T + 255) / 256, 4096)), 256, 0, s>>>(
      pl.logit_tok, c.heads * T, -INFINITY);
  if (pl.m > 0) {
    LinedSelectParams sp{c.acc.h2o, c.acc.ld, static_cast<int>(c.heads), static_cast<int>(c.heads / c.kv.kv_heads),
                         static_cast<int>(a.share), pl.outside, pl.m, pl.score, pl.heavy, a.heavy_out};
    lined_select_kernel<<<static_cast<unsigned>(pl.units), kLinedSelectThreads, 0, s>>>(sp);
  }
  LinedAttentionParams ap{c.q, c.kv.k, c.kv.v, c.kv.head_stride, c.kv.token_stride, T,
                          static_cast<int>(c.heads / c.kv.kv_heads), static_cast<int>(c.heads), static_cast<int>(a.share),
                          pl.outside, pl.m, pl.n, pl.splits, pl.per_split, c.scale, pl.heavy, pl.logit_tok, pl.parts};
  std::string err = by_type(c.kv.type, [&](auto tag) {
    using T_ = decltype(tag);
    return by_dim(c.kv.head_dim, [&](auto per) {
      lined_attention_kernel<T_, decltype(per)::value>
          <<<dim3(static_cast<unsigned>(c.heads), static_cast<unsigned>(pl.splits)), kWarps * 32, 0, s>>>(ap);
      combine_kernel<T_><<<static_cast<unsigned>(c.heads), 128, detail::combine_shared_bytes(pl.splits), s>>>(
          pl.parts, static_cast<T_*>(c.out), pl.norm, pl.splits, static_cast<int>(c.kv.head_dim));
      return std::string();
    });
  });
  if (!err.empty()) return err;
  launch_accumulate(c, pl.logit_tok, pl.norm, s);
  return launch_error();
}

}  // namespace luka::cuda
