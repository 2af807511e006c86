// Clustered mode of the LuKA step on the GPU (pairs with core/luka/cpu/clustered.cpp,
// docs/design.md §5.4): split-K attention over the cover (summaries, then the raw tail), the pages
// each selection unit refines, their children, the finalize with the refinement correction, and
// the effective rows and accumulators.
//
// Index of this file:
//   [SECTION] split: logits over the summaries and the raw tail
//   [SECTION] select: the pages to refine
//   [SECTION] children of the refined pages
//   [SECTION] finalize: the output and the effective rows
//   [SECTION] scatter: the per-token accumulators
//   [SECTION] the launch plan and the entry point

#include "kernels/cuda/luka_decode.h"

#include "kernels/cuda/luka/step.cuh"

namespace luka::cuda {
namespace {

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// [SECTION] split: logits over the summaries and the raw tail

struct ClusteredSplitParams {
  const void* q;
  const void* k;
  const void* v;
  long long hs, ts;
  const void* sk;
  const void* sv;
  const float* sb;
  long long pcap;
  int P, E, n, group, splits, per_split, K;
  float scale;
  float* logits;    // [H, n]: cover entries, summaries first
  float* parts;     // [H, splits, D + 2]
  int* cand_idx;    // [H, splits, K]: page indices, −1 where the split has fewer summaries
};

// Block (KV head, split) over cover entries [j0, j1): summaries j < P, raw token E + j − P after.
// Each warp takes every kWarps-th entry; a KV head's summaries and tail are read once for its G
// query heads. With K > 0 each head then keeps the split's K largest summary logits. MAXG ≥
// group sizes the per-head register arrays.
template <class T, class S, int PER, int MAXG>
__global__ void __launch_bounds__(kWarps * 32) clustered_split_kernel(ClusteredSplitParams p) {
  constexpr int D = PER * 32;
  const int g = blockIdx.x, split = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int j0 = split * p.per_split, j1 = min(p.n, j0 + p.per_split);
  const T* q = static_cast<const T*>(p.q);
  float qr[MAXG][PER], m[MAXG], l[MAXG], acc[MAXG][PER];
  for (int gg = 0; gg < MAXG; ++gg) {
    m[gg] = kEmptyMax;
    l[gg] = 0.f;
    for (int i = 0; i < PER; ++i) {
      acc[gg][i] = 0.f;
      qr[gg][i] = gg < p.group ? to_float(q[(g * p.group + gg) * D + lane + 32 * i]) * p.scale : 0.f;
    }
  }
  const T* kh = static_cast<const T*>(p.k) + g * p.hs;
  const T* vh = static_cast<const T*>(p.v) + g * p.hs;
  const S* skh = static_cast<const S*>(p.sk) + g * p.pcap * D;
  const S* svh = static_cast<const S*>(p.sv) + g * p.pcap * D;
  // kUnroll entries' rows are loaded before any is used, so their loads are in flight together;
  // each warp still takes its entries in ascending order.
  for (int j = j0 + warp; j < j1; j += kUnroll * kWarps) {
    float kr[kUnroll][PER], vr[kUnroll][PER], bias[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int ju = j + u * kWarps;
      bias[u] = 0.f;
      if (ju >= j1) {
        for (int i = 0; i < PER; ++i) kr[u][i] = vr[u][i] = 0.f;
      } else if (ju < p.P) {
        for (int i = 0; i < PER; ++i) {
          kr[u][i] = to_float(skh[static_cast<long long>(ju) * D + lane + 32 * i]);
          vr[u][i] = to_float(svh[static_cast<long long>(ju) * D + lane + 32 * i]);
        }
        bias[u] = p.sb[g * p.pcap + ju];
      } else {
        const long long t = p.E + (ju - p.P);
        for (int i = 0; i < PER; ++i) {
          kr[u][i] = to_float(kh[t * p.ts + lane + 32 * i]);
          vr[u][i] = to_float(vh[t * p.ts + lane + 32 * i]);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int ju = j + u * kWarps;
      if (ju >= j1) break;
#pragma unroll
      for (int gg = 0; gg < MAXG; ++gg) {  // unrolled so the per-head arrays stay in registers
        if (gg >= p.group) break;
        float s = 0.f;
        for (int i = 0; i < PER; ++i) s += qr[gg][i] * kr[u][i];
        s = warp_sum(s) + bias[u];
        if (lane == 0) p.logits[static_cast<long long>(g * p.group + gg) * p.n + ju] = s;
        online_update(s, vr[u], m[gg], l[gg], acc[gg], PER);
      }
    }
  }
  __shared__ WarpMerge<PER> sm;
  store_state<PER, MAXG>(sm, p.group, m, l, acc);
  __syncthreads();  // also makes the block's logits visible to all its threads
  if (warp == 0)
    for (int gg = 0; gg < p.group; ++gg)
      merge_state<PER>(sm, gg, p.parts + (static_cast<long long>(g * p.group + gg) * p.splits + split) * (D + 2));
  if (p.K == 0) return;
  // Split-local top-K summaries per head: K rounds of a warp argmax (ties to the lower page).
  const int c1 = min(j1, p.P);
  for (int gg = warp; gg < p.group; gg += kWarps) {
    const int h = g * p.group + gg;
    const float* lg = p.logits + static_cast<long long>(h) * p.n;
    int taken[kMaxCand];
    for (int r = 0; r < p.K; ++r) {
      float best = neg_inf();
      int bi = INT_MAX;
      for (int j = j0 + lane; j < c1; j += 32) {
        bool used = false;
        for (int u = 0; u < r; ++u) used |= taken[u] == j;
        const float x = lg[j];
        if (!used && (x > best || (x == best && j < bi))) {
          best = x;
          bi = j;
        }
      }
      for (int o = 16; o > 0; o >>= 1) {
        const float ob = __shfl_xor_sync(0xffffffffu, best, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ob > best || (ob == best && oi < bi)) {
          best = ob;
          bi = oi;
        }
      }
      taken[r] = bi;
      if (lane == 0) {
        p.cand_idx[(static_cast<long long>(h) * p.splits + split) * p.K + r] = bi == INT_MAX ? -1 : bi;
      }
    }
  }
}

// [SECTION] select: the pages to refine

struct SelectParams {
  const float* logits;
  const float* parts;
  int n, splits, D, P, heads, group, share;
  int rule;               // RefineRule
  float epsilon;
  int pick_count;         // top_k / top_frac: how many the rule takes (host computed)
  double top_p;
  int first;
  const int* cand_idx;    // fast top_k path when K > 0
  int K;
  int sorted;             // 1: sort all pages (top_frac, top_p, large top_k)
  int sort_size;          // power of two ≥ P
  float* ml;              // [H, 2]: (max, sum) of each head's cover softmax
  float* alpha_out;       // optional [H, P]
  unsigned char* pick;    // [units, P]
  float* cscore;          // [units, C]
  int* cidx;
  int* refined;           // [H, max_refined]
  int* count;             // [H]
  int* slot_of;           // [H, P]: slot of a refined page, −1 otherwise
  int max_refined;
};

// Block u (a selection unit): each head's softmax normalizer from the split partials, the pages
// the rule refines (score = max over the unit's heads of α), then slots in ascending page order.
__global__ void __launch_bounds__(kSelectThreads) clustered_select_kernel(SelectParams p) {
  extern __shared__ unsigned long long keys[];  // sort path only
  __shared__ float sM[kMaxUnitHeads], sL[kMaxUnitHeads];
  __shared__ int scratch[32];
  __shared__ float red_val[32];
  __shared__ int red_idx[32];
  const int u = blockIdx.x, tid = threadIdx.x, lane = tid % 32, warp = tid / 32, warps = blockDim.x / 32;
  int h0, hn;
  unit_heads(p.share, u, p.heads, p.group, &h0, &hn);
  for (int i = warp; i < hn; i += warps) {
    const int h = h0 + i;
    const float* base = p.parts + static_cast<long long>(h) * p.splits * (p.D + 2);
    float M = kEmptyMax;
    for (int s = lane; s < p.splits; s += 32) M = fmaxf(M, base[s * (p.D + 2)]);
    M = warp_max(M);
    float L = 0.f;
    for (int s = lane; s < p.splits; s += 32)
      if (base[s * (p.D + 2) + 1] != 0.f) L += base[s * (p.D + 2) + 1] * expf(base[s * (p.D + 2)] - M);
    L = warp_sum(L);
    if (lane == 0) {
      sM[i] = M;
      sL[i] = L;
      p.ml[2 * h] = M;
      p.ml[2 * h + 1] = L;
    }
  }
  __syncthreads();
  const auto alpha = [&](int i, int page) { return expf(p.logits[static_cast<long long>(h0 + i) * p.n + page] - sM[i]) / sL[i]; };
  const auto score = [&](int page) {
    float s = 0.f;
    for (int i = 0; i < hn; ++i) s = fmaxf(s, alpha(i, page));
    return s;
  };
  if (p.alpha_out)
    for (long long x = tid; x < static_cast<long long>(hn) * p.P; x += blockDim.x) {
      const int i = static_cast<int>(x / p.P), page = static_cast<int>(x % p.P);
      p.alpha_out[static_cast<long long>(h0 + i) * p.P + page] = alpha(i, page);
    }
  unsigned char* pick = p.pick + static_cast<long long>(u) * p.P;
  for (int page = tid; page < p.P; page += blockDim.x) pick[page] = page < p.first ? 1 : 0;
  __syncthreads();

  if (p.rule == static_cast<int>(RefineRule::kThreshold)) {
    for (int page = tid; page < p.P; page += blockDim.x)
      if (score(page) > p.epsilon) pick[page] = 1;
  } else if (p.K > 0) {
    // Fast top_k: the unit's pages among its heads' split-local candidates.
    const int C = hn * p.splits * p.K;
    float* cs = p.cscore + static_cast<long long>(u) * C;
    int* ci = p.cidx + static_cast<long long>(u) * C;
    for (int c = tid; c < C; c += blockDim.x) {
      const int i = c / (p.splits * p.K);
      const int idx = p.cand_idx[static_cast<long long>(h0 + i) * p.splits * p.K + c % (p.splits * p.K)];
      ci[c] = idx;
      cs[c] = idx >= 0 ? score(idx) : -1.f;
    }
    __syncthreads();
    for (int r = 0; r < p.pick_count; ++r) {
      float best = -1.f;
      int bi = INT_MAX;
      for (int c = tid; c < C; c += blockDim.x)
        if (cs[c] >= 0.f && (cs[c] > best || (cs[c] == best && ci[c] < bi))) {
          best = cs[c];
          bi = ci[c];
        }
      for (int o = 16; o > 0; o >>= 1) {
        const float ob = __shfl_xor_sync(0xffffffffu, best, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ob > best || (ob == best && oi < bi)) {
          best = ob;
          bi = oi;
        }
      }
      if (lane == 0) {
        red_val[warp] = best;
        red_idx[warp] = bi;
      }
      __syncthreads();
      if (tid == 0) {
        for (int w = 1; w < warps; ++w)
          if (red_val[w] > red_val[0] || (red_val[w] == red_val[0] && red_idx[w] < red_idx[0])) {
            red_val[0] = red_val[w];
            red_idx[0] = red_idx[w];
          }
      }
      __syncthreads();
      const int winner = red_idx[0];
      __syncthreads();
      if (winner == INT_MAX) break;  // fewer candidates than pages to pick
      if (tid == 0) pick[winner] = 1;
      for (int c = tid; c < C; c += blockDim.x)
        if (ci[c] == winner) cs[c] = -1.f;
      __syncthreads();
    }
  } else if (p.sorted) {
    // Sort every page by (score descending, page ascending) in shared memory.
    for (int i = tid; i < p.sort_size; i += blockDim.x)
      keys[i] = i < p.P ? (static_cast<unsigned long long>(~__float_as_uint(score(i))) << 32) | static_cast<unsigned>(i)
                        : ~0ull;
    __syncthreads();
    for (int k = 2; k <= p.sort_size; k <<= 1)
      for (int j = k >> 1; j > 0; j >>= 1) {
        for (int i = tid; i < p.sort_size; i += blockDim.x) {
          const int x = i ^ j;
          if (x > i) {
            const unsigned long long a = keys[i], b = keys[x];
            if ((a > b) == ((i & k) == 0)) {
              keys[i] = b;
              keys[x] = a;
            }
          }
        }
        __syncthreads();
      }
    if (p.rule == static_cast<int>(RefineRule::kTopP)) {
      if (tid == 0) {
        double cum = 0;
        for (int i = 0; i < p.P && cum < p.top_p; ++i) {
          pick[keys[i] & 0xffffffffu] = 1;
          cum += __uint_as_float(~static_cast<unsigned>(keys[i] >> 32));
        }
      }
    } else {
      for (int i = tid; i < min(p.pick_count, p.P); i += blockDim.x) pick[keys[i] & 0xffffffffu] = 1;
    }
  }
  __syncthreads();

  // Slots in ascending page order, shared by the unit's heads.
  int offset = 0;
  for (int base = 0; base < p.P; base += blockDim.x) {
    const int page = base + tid;
    const int f = page < p.P ? pick[page] : 0;
    int total;
    const int pos = block_exclusive_scan(f, &total, scratch);
    if (page < p.P) {
      const int slot = offset + pos;
      for (int i = 0; i < hn; ++i) {
        const long long h = h0 + i;
        p.slot_of[h * p.P + page] = f && slot < p.max_refined ? slot : -1;
        if (f && slot < p.max_refined) p.refined[h * p.max_refined + slot] = page;
      }
    }
    offset += total;
  }
  if (tid < hn) p.count[h0 + tid] = min(offset, p.max_refined);
}

// [SECTION] children of the refined pages

struct ChildrenParams {
  const void* q;
  const void* k;
  const void* v;
  long long hs, ts;
  int group, E, max_refined;
  float scale;
  const int* refined;
  const int* count;
  const int* page_start;
  float* child_logits;  // [H, E]
  float* child_parts;   // [H, max_refined, D + 2]
};

// Block (head, slot): the raw tokens of one refined page — their logits and their own softmax
// state (m, l, acc) for the correction.
template <class T, int PER>
__global__ void __launch_bounds__(kWarps * 32) clustered_children_kernel(ChildrenParams p) {
  constexpr int D = PER * 32;
  const int slot = blockIdx.x, h = blockIdx.y;  // slots in x: up to P of them
  if (slot >= p.count[h]) return;
  const int g = h / p.group;
  const int page = p.refined[static_cast<long long>(h) * p.max_refined + slot];
  const int s = p.page_start[page], e = p.page_start[page + 1];
  attend_one_head<T, PER>(
      static_cast<const T*>(p.q) + h * D, p.scale, static_cast<const T*>(p.k) + g * p.hs, static_cast<const T*>(p.v) + g * p.hs,
      p.ts, s, e, [](int j) { return static_cast<long long>(j); },
      [&](long long t, float x) { p.child_logits[static_cast<long long>(h) * p.E + t] = x; },
      p.child_parts + (static_cast<long long>(h) * p.max_refined + slot) * (D + 2));
}

// [SECTION] finalize: the output and the effective rows

struct FinalizeParams {
  const float* parts;
  int splits, D, n, P, group, max_refined, math;
  const float* ml;
  const float* logits;
  const int* refined;
  const int* count;
  const int* slot_of;
  const float* child_parts;
  const void* sv;
  long long pcap;
  void* out;
  float* norm;  // [H, 2]: (max, 1/sum) that turn a logit into its effective weight
};

// Block h: the output with the refinement correction. Mass-preserving: refined summaries'
// values give way to their children's, weighted by α. Exact: one softmax over unrefined
// summaries, children and raw tail, its sum taken directly (no cancellation).
template <class T, class S>
__global__ void clustered_finalize_kernel(FinalizeParams p) {
  __shared__ float red[32];
  __shared__ float sZ;
  const int h = blockIdx.x, g = h / p.group, tid = threadIdx.x;
  const int cnt = p.count[h];
  const float M = p.ml[2 * h], L = p.ml[2 * h + 1];
  const float* cp = p.child_parts + static_cast<long long>(h) * p.max_refined * (p.D + 2);
  const int* ref = p.refined + static_cast<long long>(h) * p.max_refined;
  const float* lg = p.logits + static_cast<long long>(h) * p.n;
  const bool exact = p.math == static_cast<int>(RefineMath::kExact);
  float Mn = M;
  if (exact)
    for (int c = 0; c < cnt; ++c)
      if (cp[c * (p.D + 2) + 1] != 0.f) Mn = fmaxf(Mn, cp[c * (p.D + 2)]);
  float Z = L;
  if (exact) {
    float z = 0.f;
    for (int j = tid; j < p.n; j += blockDim.x)
      if (j >= p.P || p.slot_of[static_cast<long long>(h) * p.P + j] < 0) z += expf(lg[j] - Mn);
    for (int c = tid; c < cnt; c += blockDim.x) z += cp[c * (p.D + 2) + 1] * expf(cp[c * (p.D + 2)] - Mn);
    z = warp_sum(z);
    if (tid % 32 == 0) red[tid / 32] = z;
    __syncthreads();
    if (tid == 0) {
      float s = 0.f;
      for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) s += red[w];
      sZ = s;
    }
    __syncthreads();
    Z = sZ;
  }
  const float* base = p.parts + static_cast<long long>(h) * p.splits * (p.D + 2);
  const S* svh = static_cast<const S*>(p.sv) + g * p.pcap * p.D;
  for (int d = tid; d < p.D; d += blockDim.x) {
    float num = 0.f;
    for (int s = 0; s < p.splits; ++s) {
      const float* part = base + s * (p.D + 2);
      if (part[1] != 0.f) num += part[2 + d] * __expf(part[0] - Mn);
    }
    float children = 0.f;
    for (int c = 0; c < cnt; ++c) {
      const int page = ref[c];
      const float w = expf(lg[page] - Mn);
      num -= w * to_float(svh[static_cast<long long>(page) * p.D + d]);
      const float* part = cp + c * (p.D + 2);
      if (part[1] == 0.f) continue;
      if (exact)
        children += part[2 + d] * expf(part[0] - Mn);
      else
        children += (w / L) * (part[2 + d] / part[1]);
    }
    const float o = exact ? (num + children) / Z : num / L + children;
    static_cast<T*>(p.out)[h * p.D + d] = from_float<T>(o);
  }
  if (tid == 0) {
    p.norm[2 * h] = Mn;
    p.norm[2 * h + 1] = 1.f / Z;
  }
}

// [SECTION] scatter: the per-token accumulators

struct ScatterParams {
  const float* logits;
  int n, P, E, group, max_refined, D, math;
  long long tokens;
  const int* page_start;
  const int* slot_of;
  const float* norm;
  const float* child_logits;
  const float* child_parts;
  const float* spread;
  long long spread_ld;
  float* eff;
  float* importance;
  float* h2o;
  long long ld;
  float decay;
};

// Block (KV head, chunk of tokens): each token's effective weight per query head — raw tail by
// its logit, refined children by theirs, an unrefined page's weight spread over its tokens —
// then the accumulators, in a fixed order (no atomics).
__global__ void clustered_scatter_kernel(ScatterParams p) {
  const int g = blockIdx.x;
  const long long t = static_cast<long long>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (t >= p.tokens) return;
  int page = -1;
  if (t < p.E) {  // the last page starting at or before t
    int lo = 0, hi = p.P - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (p.page_start[mid] <= t) lo = mid; else hi = mid - 1;
    }
    page = lo;
  }
  float sum = 0.f;
  for (int j = 0; j < p.group; ++j) {
    const int h = g * p.group + j;
    const float Mn = p.norm[2 * h], inv = p.norm[2 * h + 1];
    const float* lg = p.logits + static_cast<long long>(h) * p.n;
    float w;
    if (page < 0) {
      w = expf(lg[p.P + (t - p.E)] - Mn) * inv;
    } else {
      const int slot = p.slot_of[static_cast<long long>(h) * p.P + page];
      const float child = slot >= 0 ? p.child_logits[static_cast<long long>(h) * p.E + t] : 0.f;
      if (slot < 0) {
        w = expf(lg[page] - Mn) * inv * p.spread[g * p.spread_ld + t];
      } else if (p.math == static_cast<int>(RefineMath::kExact)) {
        w = expf(child - Mn) * inv;
      } else {
        const float* part = p.child_parts + (static_cast<long long>(h) * p.max_refined + slot) * (p.D + 2);
        w = expf(lg[page] - Mn) * inv * (expf(child - part[0]) / part[1]);
      }
    }
    add_h2o(w, h, t, p.eff, p.tokens, p.h2o, p.ld, p.decay);
    sum = __fadd_rn(sum, w);
  }
  p.importance[g * p.ld + t] = rules::importance_update(p.importance[g * p.ld + t], sum, p.group);
}

// [SECTION] the launch plan and the entry point

// The clustered call's sizes and workspace carve-up (a null base: a dry run for the size).
struct ClusteredPlan {
  int P = 0, E = 0, R = 0, n = 0, splits = 0, per_split = 0, K = 0, units = 0, max_refined = 0, pick_count = 0;
  bool sorted = false;
  int sort_size = 1;
  float *logits = nullptr, *parts = nullptr, *ml = nullptr, *cscore = nullptr, *child_logits = nullptr,
        *child_parts = nullptr, *norm = nullptr, *alpha = nullptr;
  int *cand_idx = nullptr, *cidx = nullptr, *refined = nullptr, *count = nullptr, *slot_of = nullptr;
  unsigned char* pick = nullptr;
  std::size_t bytes = 0;
};

// Every size below grows with P, E and R, so a plan for the largest of each bounds the workspace
// of any step up to them (clustered_workspace_bound).
ClusteredPlan plan_clustered(const ClusteredDecodeArgs& a, std::int64_t P, std::int64_t E, std::int64_t R, void* workspace) {
  ClusteredPlan pl;
  const DecodeCommon& c = a.c;
  const std::int64_t H = c.heads, D = c.kv.head_dim, G = c.heads / std::max<std::int64_t>(c.kv.kv_heads, 1);
  pl.P = static_cast<int>(P);
  pl.E = static_cast<int>(E);
  pl.R = static_cast<int>(R);
  pl.n = pl.P + pl.R;
  pl.splits = choose_splits(pl.n, c.splits, c.kv.kv_heads);
  pl.per_split = (pl.n + pl.splits - 1) / pl.splits;
  pl.units = a.share == Selection::kPerHead ? static_cast<int>(H) : a.share == Selection::kPerGroup ? static_cast<int>(c.kv.kv_heads) : 1;
  const int first = static_cast<int>(std::min<std::int64_t>(a.always_refine_first, pl.P));
  if (a.rule == RefineRule::kTopK) {
    pl.pick_count = static_cast<int>(std::min<std::int64_t>(a.top_k, pl.P));
  } else if (a.rule == RefineRule::kTopFrac) {
    pl.pick_count = static_cast<int>(rules::top_frac_count(a.top_frac, pl.P, false));
  }
  pl.K = a.rule == RefineRule::kTopK && a.top_k <= kMaxCand ? std::max(pl.pick_count, 0) : 0;
  pl.sorted = pl.P > 0 && (a.rule == RefineRule::kTopP || (a.rule != RefineRule::kThreshold && pl.K == 0 && pl.pick_count > 0));
  while (pl.sorted && pl.sort_size < pl.P) pl.sort_size <<= 1;
  pl.max_refined = (a.rule == RefineRule::kTopK || a.rule == RefineRule::kTopFrac) ? std::min(pl.P, pl.pick_count + first) : pl.P;
  pl.max_refined = std::max(pl.max_refined, 1);
  const std::int64_t unit_heads = a.share == Selection::kPerHead ? 1 : a.share == Selection::kPerGroup ? G : H;
  Bump b(workspace);
  pl.logits = b.take<float>(H * pl.n);
  pl.parts = b.take<float>(H * pl.splits * (D + 2));
  pl.cand_idx = b.take<int>(H * pl.splits * pl.K);
  pl.ml = b.take<float>(2 * H);
  pl.norm = b.take<float>(2 * H);
  pl.pick = b.take<unsigned char>(static_cast<std::int64_t>(pl.units) * pl.P);
  pl.cscore = b.take<float>(pl.units * unit_heads * pl.splits * pl.K);
  pl.cidx = b.take<int>(pl.units * unit_heads * pl.splits * pl.K);
  pl.refined = a.refined ? a.refined : b.take<int>(H * pl.max_refined);
  pl.count = a.refined_count ? a.refined_count : b.take<int>(H);
  pl.slot_of = b.take<int>(H * pl.P);
  pl.child_logits = b.take<float>(H * pl.E);
  pl.child_parts = b.take<float>(H * pl.max_refined * (D + 2));
  pl.bytes = b.bytes();
  return pl;
}

ClusteredPlan plan_clustered(const ClusteredDecodeArgs& a, void* workspace) {
  return plan_clustered(a, a.s.pages, a.s.paged_end, a.c.kv.tokens - a.s.paged_end, workspace);
}

}  // namespace

std::int64_t clustered_max_refined(const ClusteredDecodeArgs& a) { return plan_clustered(a, nullptr).max_refined; }
std::size_t clustered_workspace_bytes(const ClusteredDecodeArgs& a) { return plan_clustered(a, nullptr).bytes; }

std::size_t clustered_workspace_bound(const ClusteredDecodeArgs& a, std::int64_t tokens, std::int64_t pages) {
  return plan_clustered(a, pages, tokens, tokens, nullptr).bytes;
}

std::string clustered_decode(const ClusteredDecodeArgs& a, void* workspace, std::size_t workspace_bytes, void* stream) {
  const DecodeCommon& c = a.c;
  if (std::string e = check_common(c); !e.empty()) return e;
  const Summaries& sm = a.s;
  if (sm.pages < 0 || sm.paged_end < 0 || sm.paged_end > c.kv.tokens) return "pages outside the context";
  if (sm.pages > 0 && (!sm.k || !sm.v || !sm.bias || !sm.page_start || !sm.spread || sm.capacity < sm.pages ||
                       sm.spread_ld < sm.paged_end))
    return "summaries missing or smaller than the pages";
  if (sm.pages == 0 && sm.paged_end != 0) return "paged_end without pages";
  if (sm.type != ElemType::kF32 && sm.type != c.kv.type) return "summaries must be fp32 or the cache's type";
  if (a.share == Selection::kPerLayer && c.heads > kMaxUnitHeads) return "too many heads for a shared selection";
  if (a.top_k < 0 || a.always_refine_first < 0) return "negative top_k or always_refine_first";
  ClusteredPlan pl = plan_clustered(a, workspace);
  if (pl.sorted && pl.P > kMaxSortedPages)
    return "the " + std::string(a.rule == RefineRule::kTopP ? "top_p" : a.rule == RefineRule::kTopFrac ? "top_frac" : "top_k > 8") +
           " rule handles at most " + std::to_string(kMaxSortedPages) + " pages on the GPU (this layer has " +
           std::to_string(pl.P) + ")";
  if (!workspace || workspace_bytes < pl.bytes) return "workspace missing or too small";
  const auto s = static_cast<cudaStream_t>(stream);
  const int H = static_cast<int>(c.heads), KV = static_cast<int>(c.kv.kv_heads), G = H / KV, D = static_cast<int>(c.kv.head_dim);

  ClusteredSplitParams sp{c.q, c.kv.k, c.kv.v, c.kv.head_stride, c.kv.token_stride, sm.k, sm.v, sm.bias, sm.capacity,
                          pl.P, pl.E, pl.n, G, pl.splits, pl.per_split, pl.K, c.scale, pl.logits, pl.parts, pl.cand_idx};
  SelectParams se{};
  se.logits = pl.logits;
  se.parts = pl.parts;
  se.n = pl.n;
  se.splits = pl.splits;
  se.D = D;
  se.P = pl.P;
  se.heads = H;
  se.group = G;
  se.share = static_cast<int>(a.share);
  se.rule = static_cast<int>(a.rule);
  se.epsilon = static_cast<float>(a.epsilon);
  se.pick_count = pl.pick_count;
  se.top_p = a.top_p;
  se.first = static_cast<int>(std::min<std::int64_t>(a.always_refine_first, pl.P));
  se.cand_idx = pl.cand_idx;
  se.K = pl.K;
  se.sorted = pl.sorted;
  se.sort_size = pl.sort_size;
  se.ml = pl.ml;
  se.alpha_out = a.summary_mass;
  se.pick = pl.pick;
  se.cscore = pl.cscore;
  se.cidx = pl.cidx;
  se.refined = pl.refined;
  se.count = pl.count;
  se.slot_of = pl.slot_of;
  se.max_refined = pl.max_refined;
  ChildrenParams cp{c.q, c.kv.k, c.kv.v, c.kv.head_stride, c.kv.token_stride, G, pl.E, pl.max_refined, c.scale,
                    pl.refined, pl.count, sm.page_start, pl.child_logits, pl.child_parts};
  FinalizeParams fp{pl.parts, pl.splits, D, pl.n, pl.P, G, pl.max_refined, static_cast<int>(a.math), pl.ml, pl.logits,
                    pl.refined, pl.count, pl.slot_of, pl.child_parts, sm.v, sm.capacity, c.out, pl.norm};
  ScatterParams sc{pl.logits, pl.n, pl.P, pl.E, G, pl.max_refined, D, static_cast<int>(a.math), c.kv.tokens, sm.page_start,
                   pl.slot_of, pl.norm, pl.child_logits, pl.child_parts, sm.spread, sm.spread_ld, c.effective,
                   c.acc.importance, c.acc.h2o, c.acc.ld, c.acc.decay};
  const std::size_t sort_bytes = pl.sorted ? static_cast<std::size_t>(pl.sort_size) * sizeof(unsigned long long) : 0;

  std::string err = by_type(c.kv.type, [&](auto tag) {
    using T_ = decltype(tag);
    const auto with_summary = [&](auto stag) {
      using S_ = decltype(stag);
      return by_dim(c.kv.head_dim, [&](auto per) {
        constexpr int PER = decltype(per)::value;
        const dim3 grid(static_cast<unsigned>(KV), static_cast<unsigned>(pl.splits));
        if (G <= 2) clustered_split_kernel<T_, S_, PER, 2><<<grid, kWarps * 32, 0, s>>>(sp);
        else if (G <= 4) clustered_split_kernel<T_, S_, PER, 4><<<grid, kWarps * 32, 0, s>>>(sp);
        else clustered_split_kernel<T_, S_, PER, kMaxGroup><<<grid, kWarps * 32, 0, s>>>(sp);
        if (pl.P > 0) {
          if (sort_bytes > 48 * 1024) {
            const cudaError_t e = cudaFuncSetAttribute(clustered_select_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(sort_bytes));
            if (e != cudaSuccess) return std::string("shared memory for sorting ") + std::to_string(pl.P) + " pages: " + cudaGetErrorString(e);
          }
          clustered_select_kernel<<<static_cast<unsigned>(pl.units), kSelectThreads, sort_bytes, s>>>(se);
          clustered_children_kernel<T_, PER>
              <<<dim3(static_cast<unsigned>(pl.max_refined), static_cast<unsigned>(H)), kWarps * 32, 0, s>>>(cp);
        } else {
          // No pages: the select kernel still derives the normalizers (and zero refined counts).
          clustered_select_kernel<<<static_cast<unsigned>(pl.units), kSelectThreads, 0, s>>>(se);
        }
        clustered_finalize_kernel<T_, S_><<<static_cast<unsigned>(H), 128, 0, s>>>(fp);
        return std::string();
      });
    };
    if (sm.type == ElemType::kF32) return with_summary(float{});
    return with_summary(T_{});
  });
  if (!err.empty()) return err;
  dim3 grid(static_cast<unsigned>(KV), static_cast<unsigned>((c.kv.tokens + kChunk - 1) / kChunk));
  clustered_scatter_kernel<<<grid, kChunk, 0, s>>>(sc);
  return launch_error();
}

}  // namespace luka::cuda
