#include "kernels/cuda/luka_decode.h"

#include <algorithm>
#include <climits>
#include <cmath>

#include "kernels/common/luka_rules.h"
#include "kernels/cuda/common.cuh"

namespace luka::cuda {
namespace {

using detail::Bump;
using detail::from_float;
using detail::kEmptyMax;
using detail::launch_error;
using detail::to_float;
using detail::warp_max;
using detail::warp_sum;

constexpr int kWarps = 4;             // warps per block in the attention kernels
constexpr int kMaxGroup = 8;          // query heads per KV head
constexpr int kEntriesPerSplit = 256;
constexpr int kMaxSplits = 64;
constexpr int kUnroll = 4;            // cover entries whose K/V rows a warp loads at once
constexpr int kMaxCand = 8;           // split-local top-k candidates per head (fast top_k path)
constexpr int kMaxUnitHeads = 128;    // heads sharing one selection
constexpr int kSelectThreads = 256;
constexpr int kLinedSelectThreads = 512;
constexpr int kChunk = 256;           // tokens per block in the accumulation kernels

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// rows: the blocks of one split (KV heads for clustered, heads for lined).
int choose_splits(std::int64_t entries, int requested, std::int64_t rows) {
  return detail::split_count(entries, requested, rows, kEntriesPerSplit, kMaxSplits);
}

// --- accumulators ---------------------------------------------------------------------------

// One head's effective weight w of token t: the optional effective row, then h2o_score (the
// update the CPU core makes, rules::h2o_update).
__device__ __forceinline__ void add_h2o(float w, int h, long long t, float* eff, long long tokens, float* h2o, long long ld,
                                        float decay) {
  if (eff) eff[h * tokens + t] = w;
  float* p = h2o + h * ld + t;
  *p = rules::h2o_update(*p, w, decay);
}

// Block (KV head g, chunk of tokens): w = exp(logit - max) / sum per query head of the group,
// from token-indexed logits [H, tokens] (−inf: outside the cover) and norm [H, 2] = (max, 1/sum).
__global__ void softmax_accumulate_kernel(const float* __restrict__ logits, const float* __restrict__ norm,
                                          float* __restrict__ eff, float* __restrict__ importance, float* __restrict__ h2o,
                                          long long ld, float decay, int group, long long tokens) {
  const int g = blockIdx.x;
  const long long t = static_cast<long long>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  float sum = 0.f;
  for (int j = 0; j < group; ++j) {
    const int h = g * group + j;
    const float w = expf(logits[h * tokens + t] - norm[2 * h]) * norm[2 * h + 1];
    add_h2o(w, h, t, eff, tokens, h2o, ld, decay);
    sum = __fadd_rn(sum, w);
  }
  importance[g * ld + t] = rules::importance_update(importance[g * ld + t], sum, group);
}

__global__ void fill_kernel(float* __restrict__ x, long long n, float value) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    x[i] = value;
}

// --- block-wide helpers ---------------------------------------------------------------------

// Exclusive prefix sum of x over the block (blockDim a multiple of 32, at most 1024); *total is
// the block's sum. `scratch` holds 32 ints of shared memory.
__device__ int block_exclusive_scan(int x, int* total, int* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  int inc = x;
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += y;
  }
  if (lane == 31) scratch[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    int w = lane < warps ? scratch[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += y;
    }
    scratch[lane] = w;
  }
  __syncthreads();
  const int base = warp > 0 ? scratch[warp - 1] : 0;
  *total = scratch[warps - 1];
  __syncthreads();
  return base + inc - x;
}

// Merges the kWarps per-warp online-softmax states of G heads through shared memory and writes
// the block's partial (m, l, acc[D]) per head to part(g) (warp 0 only).
template <int PER>
struct WarpMerge {
  static constexpr int D = PER * 32;
  float m[kWarps][kMaxGroup], l[kWarps][kMaxGroup], acc[kWarps][kMaxGroup][D];
};

template <int PER, int MAXG = kMaxGroup>
__device__ __forceinline__ void store_state(WarpMerge<PER>& sm, int group, const float* m, const float* l, const float (*acc)[PER]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int g = 0; g < MAXG; ++g) {
    if (g >= group) break;
    if (lane == 0) {
      sm.m[warp][g] = m[g];
      sm.l[warp][g] = l[g];
    }
    for (int i = 0; i < PER; ++i) sm.acc[warp][g][lane + 32 * i] = acc[g][i];
  }
}

// After __syncthreads: warp 0 folds the warps' states of head slot g into part[0..D+2).
template <int PER>
__device__ void merge_state(const WarpMerge<PER>& sm, int g, float* part) {
  const int lane = threadIdx.x % 32;
  float M = kEmptyMax;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sm.m[w][g]);
  float L = 0.f, out[PER];
  for (int i = 0; i < PER; ++i) out[i] = 0.f;
  for (int w = 0; w < kWarps; ++w) {
    const float f = sm.m[w][g] == kEmptyMax ? 0.f : __expf(sm.m[w][g] - M);
    L += sm.l[w][g] * f;
    for (int i = 0; i < PER; ++i) out[i] += sm.acc[w][g][lane + 32 * i] * f;
  }
  if (lane == 0) {
    part[0] = M;
    part[1] = L;
  }
  for (int i = 0; i < PER; ++i) part[2 + lane + 32 * i] = out[i];
}

__device__ __forceinline__ void online_update(float s, const float* vr, float& m, float& l, float* acc, int per) {
  const float mn = fmaxf(m, s);
  const float corr = __expf(m - mn), p = __expf(s - mn);
  l = l * corr + p;
  for (int i = 0; i < per; ++i) acc[i] = acc[i] * corr + p * vr[i];
  m = mn;
}

// Block h: merges the splits of head h into out[h, :] and norm[h] = (max, 1/sum). Dynamic
// shared memory: combine_shared_bytes(splits).
template <class T>
__global__ void combine_kernel(const float* __restrict__ parts, T* __restrict__ out, float* __restrict__ norm, int splits, int D) {
  extern __shared__ float weight[];
  const int h = blockIdx.x;
  detail::combine_splits<T>(parts + static_cast<long long>(h) * splits * (D + 2), splits, D, out + h * D, norm + 2 * h, weight);
}

// ===== clustered ============================================================================

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

__device__ __forceinline__ void unit_heads(int share, int u, int heads, int group, int* first, int* count) {
  if (share == static_cast<int>(Selection::kPerHead)) {
    *first = u;
    *count = 1;
  } else if (share == static_cast<int>(Selection::kPerGroup)) {
    *first = u * group;
    *count = group;
  } else {
    *first = 0;
    *count = heads;
  }
}

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

// One query head of a block over entries j = j0 + warp, j0 + warp + kWarps, ... < j1, the entry's
// token being token(j): each logit goes to logit_out(t) (lane 0), and warp 0 writes the block's
// merged online-softmax state (m, l, acc[D]) to part.
template <class T, int PER, class TokenOf, class LogitOut>
__device__ void attend_one_head(const T* q, float scale, const T* kh, const T* vh, long long ts, int j0, int j1,
                                TokenOf token, LogitOut logit_out, float* part) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float qr[PER], acc[1][PER], m[1] = {kEmptyMax}, l[1] = {0.f};
  for (int i = 0; i < PER; ++i) {
    qr[i] = to_float(q[lane + 32 * i]) * scale;
    acc[0][i] = 0.f;
  }
  for (int j = j0 + warp; j < j1; j += kUnroll * kWarps) {  // loads of kUnroll entries in flight, as above
    long long t[kUnroll];
    float kr[kUnroll][PER], vr[kUnroll][PER];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int ju = j + u * kWarps;
      t[u] = ju < j1 ? token(ju) : 0;
      for (int i = 0; i < PER; ++i) {
        kr[u][i] = ju < j1 ? to_float(kh[t[u] * ts + lane + 32 * i]) : 0.f;
        vr[u][i] = ju < j1 ? to_float(vh[t[u] * ts + lane + 32 * i]) : 0.f;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (j + u * kWarps >= j1) break;
      float x = 0.f;
      for (int i = 0; i < PER; ++i) x += qr[i] * kr[u][i];
      x = warp_sum(x);
      if (lane == 0) logit_out(t[u], x);
      online_update(x, vr[u], m[0], l[0], acc[0], PER);
    }
  }
  __shared__ WarpMerge<PER> sm;
  store_state<PER>(sm, 1, m, l, acc);
  __syncthreads();
  if (warp == 0) merge_state<PER>(sm, 0, part);
}

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

// ===== lined ================================================================================

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

// ===== prefill ==============================================================================

constexpr int kKeyTile = 32;  // keys per block in the column pass (one per lane)

struct PrefillParams {
  const void* q;
  const void* k;
  const void* v;
  long long hs, ts;
  int heads, group, queries, tokens, q_pos0, pool;
  float scale;
  void* out;             // [queries, H * D]
  float* stats;          // [H, queries, 2]: (max, sum) of each query's softmax
  float* importance;
  float* h2o;
  long long ld;
  float* pooled;         // [H, rows, cols] or null
  int rows, cols;
};

// Block (KV head, query): the online softmax of the group's query heads over keys 0 .. pos.
template <class T, int PER>
__global__ void __launch_bounds__(kWarps * 32) prefill_rows_kernel(PrefillParams p) {
  constexpr int D = PER * 32;
  const int i = blockIdx.x, g = blockIdx.y;  // queries in x: up to 2^31 of them
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int keys = min(p.tokens, p.q_pos0 + i + 1);
  const T* q = static_cast<const T*>(p.q);
  float qr[kMaxGroup][PER], m[kMaxGroup], l[kMaxGroup], acc[kMaxGroup][PER];
#pragma unroll
  for (int gg = 0; gg < kMaxGroup; ++gg) {
    m[gg] = kEmptyMax;
    l[gg] = 0.f;
    for (int j = 0; j < PER; ++j) {
      acc[gg][j] = 0.f;
      qr[gg][j] = gg < p.group ? to_float(q[(static_cast<long long>(g * p.group + gg) * p.queries + i) * D + lane + 32 * j]) * p.scale : 0.f;
    }
  }
  const T* kh = static_cast<const T*>(p.k) + g * p.hs;
  const T* vh = static_cast<const T*>(p.v) + g * p.hs;
  for (int t = warp; t < keys; t += kWarps) {
    float kr[PER], vr[PER];
    for (int j = 0; j < PER; ++j) {
      kr[j] = to_float(kh[static_cast<long long>(t) * p.ts + lane + 32 * j]);
      vr[j] = to_float(vh[static_cast<long long>(t) * p.ts + lane + 32 * j]);
    }
#pragma unroll
    for (int gg = 0; gg < kMaxGroup; ++gg) {
      if (gg >= p.group) break;
      float s = 0.f;
      for (int j = 0; j < PER; ++j) s += qr[gg][j] * kr[j];
      online_update(warp_sum(s), vr, m[gg], l[gg], acc[gg], PER);
    }
  }
  __shared__ WarpMerge<PER> sm;
  __shared__ float part[D + 2];
  store_state<PER>(sm, p.group, m, l, acc);
  __syncthreads();
  if (warp != 0) return;
  for (int gg = 0; gg < p.group; ++gg) {
    merge_state<PER>(sm, gg, part);
    __syncwarp();
    const int h = g * p.group + gg;
    T* o = static_cast<T*>(p.out) + (static_cast<long long>(i) * p.heads + h) * D;
    for (int j = 0; j < PER; ++j) o[lane + 32 * j] = from_float<T>(part[2 + lane + 32 * j] / part[1]);
    if (lane == 0) {
      p.stats[(static_cast<long long>(h) * p.queries + i) * 2] = part[0];
      p.stats[(static_cast<long long>(h) * p.queries + i) * 2 + 1] = part[1];
    }
    __syncwarp();
  }
}

// Block (KV head, tile of 32 keys; lane = key): every query that sees the tile, by chunks of
// C = max(pool, kWarps) rows (warps take rows in turn). Probabilities are summed per key over the
// queries in a fixed order (per warp, then warps in order) and max-pooled through shared memory
// into the pooled cells, flushed with atomicMax on the fp32 bits (exact, order-independent:
// probabilities are ≥ 0).
template <class T, int PER>
__global__ void __launch_bounds__(kWarps * 32) prefill_columns_kernel(PrefillParams p) {
  constexpr int D = PER * 32;
  constexpr int kCellRows = kWarps;  // row cells per chunk at most (pool < kWarps)
  __shared__ float ks[kKeyTile][D + 1];
  __shared__ float qs[kWarps][kMaxGroup][D];
  __shared__ unsigned cell[kMaxGroup][kCellRows][kKeyTile];
  __shared__ float colsum[kWarps][kMaxGroup][kKeyTile];
  const int t0 = blockIdx.x * kKeyTile, g = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, tid = threadIdx.x;
  const T* kh = static_cast<const T*>(p.k) + g * p.hs;
  for (int x = tid; x < kKeyTile * D; x += blockDim.x) {
    const int r = x / D, d = x % D;
    ks[r][d] = t0 + r < p.tokens ? to_float(kh[static_cast<long long>(t0 + r) * p.ts + d]) : 0.f;
  }
  float cs[kMaxGroup];
#pragma unroll
  for (int gg = 0; gg < kMaxGroup; ++gg) cs[gg] = 0.f;
  const int t = t0 + lane;
  const int first = max(0, t0 - p.q_pos0);  // the first query that sees key t0
  const int C = max(p.pool, kWarps);
  const T* q = static_cast<const T*>(p.q);
  for (int r0 = first / C * C; r0 < p.queries; r0 += C) {
    if (p.pooled)
      for (int x = tid; x < kMaxGroup * kCellRows * kKeyTile; x += blockDim.x) (&cell[0][0][0])[x] = 0u;
    __syncthreads();
    for (int i = r0 + warp; i < min(r0 + C, p.queries); i += kWarps) {
      if (i < first) continue;
      for (int gg = 0; gg < p.group; ++gg)
        for (int d = lane; d < D; d += 32)
          qs[warp][gg][d] = to_float(q[(static_cast<long long>(g * p.group + gg) * p.queries + i) * D + d]) * p.scale;
      __syncwarp();
      const bool visible = t < p.tokens && t <= p.q_pos0 + i;
#pragma unroll
      for (int gg = 0; gg < kMaxGroup; ++gg) {
        if (gg >= p.group) break;
        float s = 0.f;
        for (int d = 0; d < D; ++d) s += qs[warp][gg][d] * ks[lane][d];
        const float* st = p.stats + (static_cast<long long>(g * p.group + gg) * p.queries + i) * 2;
        const float prob = visible ? expf(s - st[0]) / st[1] : 0.f;
        cs[gg] += prob;
        if (p.pooled) atomicMax(&cell[gg][(i - r0) / p.pool][lane], __float_as_uint(prob));
      }
      __syncwarp();
    }
    __syncthreads();
    if (p.pooled) {
      // Cells of this chunk: C / pool row cells × (32 / pool, or 1) column cells.
      const int row_cells = C / p.pool, col_width = min(p.pool, kKeyTile), col_cells = kKeyTile / col_width;
      for (int x = tid; x < p.group * row_cells * col_cells; x += blockDim.x) {
        const int gg = x / (row_cells * col_cells), rc = (x / col_cells) % row_cells, cc = x % col_cells;
        const int row = r0 / p.pool + rc, col = (t0 + cc * col_width) / p.pool;
        if (row >= p.rows || col >= p.cols) continue;
        unsigned v = 0;
        for (int j = 0; j < col_width; ++j) v = max(v, cell[gg][rc][cc * col_width + j]);
        atomicMax(reinterpret_cast<unsigned*>(p.pooled) + (static_cast<long long>(g * p.group + gg) * p.rows + row) * p.cols + col, v);
      }
      __syncthreads();
    }
  }
#pragma unroll
  for (int gg = 0; gg < kMaxGroup; ++gg)
    if (gg < p.group) colsum[warp][gg][lane] = cs[gg];
  __syncthreads();
  if (warp != 0 || t >= p.tokens) return;
  float imp = 0.f;
  for (int gg = 0; gg < p.group; ++gg) {
    float sum = 0.f;
    for (int w = 0; w < kWarps; ++w) sum += colsum[w][gg][lane];
    float* h = p.h2o + static_cast<long long>(g * p.group + gg) * p.ld + t;
    *h = __fadd_rn(*h, sum);
    imp = __fadd_rn(imp, sum);
  }
  p.importance[g * p.ld + t] = rules::importance_update(p.importance[g * p.ld + t], imp, p.group);
}

// ===== page compression =====================================================================

struct CompressParams {
  const void* k;
  const void* v;
  long long hs, ts;
  int D;
  const float* importance;
  long long importance_ld;
  const int* page_start;
  int first_page, compressor, layer, zero_v, bias;
  float tau;
  unsigned long long seed;
  void* sum_k;
  void* sum_v;
  float* sum_bias;
  long long capacity;
  float* spread;
  long long spread_ld;
};

// Block (KV head, page): weights π over the page (mean, softmax(importance/τ) or one seeded
// token), the summary key/value Σ π_i k_i, Σ π_i v_i in fp32, its bias and spread.
template <class T, class S>
__global__ void compress_kernel(CompressParams p) {
  __shared__ float w[kMaxPageTokens];
  __shared__ float bias_s;
  const int page = p.first_page + blockIdx.x, g = blockIdx.y, tid = threadIdx.x;  // pages in x: many of them
  const int s = p.page_start[page], e = p.page_start[page + 1], L = e - s;
  if (tid == 0) {  // the per-element math the CPU core uses (rules::)
    const auto c = static_cast<Compressor>(p.compressor);
    const int pick = c == Compressor::kRandom ? rules::seeded_pick(p.seed, p.layer, s, g, L) : 0;
    const float* imp = c == Compressor::kAttentionWeighted ? p.importance + g * p.importance_ld + s : nullptr;
    rules::compressor_weights(c, imp, L, p.tau, pick, w);
    bias_s = rules::summary_bias(static_cast<SummaryBias>(p.bias), w, L);
    for (int i = 0; i < L; ++i) p.spread[g * p.spread_ld + s + i] = rules::spread_weight(c, w, i, L);
  }
  __syncthreads();
  const T* kh = static_cast<const T*>(p.k) + g * p.hs;
  const T* vh = static_cast<const T*>(p.v) + g * p.hs;
  S* sk = static_cast<S*>(p.sum_k) + (g * p.capacity + page) * p.D;
  S* sv = static_cast<S*>(p.sum_v) + (g * p.capacity + page) * p.D;
  for (int d = tid; d < p.D; d += blockDim.x) {
    float ak = 0.f, av = 0.f;
    for (int i = 0; i < L; ++i) {
      ak += w[i] * to_float(kh[static_cast<long long>(s + i) * p.ts + d]);
      av += w[i] * to_float(vh[static_cast<long long>(s + i) * p.ts + d]);
    }
    sk[d] = from_float<S>(ak);
    sv[d] = from_float<S>(p.zero_v ? 0.f : av);
  }
  if (tid == 0) p.sum_bias[g * p.capacity + page] = bias_s;
}

// ===== host side ============================================================================

std::string check_common(const DecodeCommon& c) {
  const KvView& kv = c.kv;
  if (c.heads <= 0 || kv.kv_heads <= 0 || kv.tokens <= 0 || kv.head_dim <= 0) return "empty sizes";
  if (c.heads % kv.kv_heads != 0) return "heads must be a multiple of kv_heads";
  if (c.heads / kv.kv_heads > kMaxGroup) return "more than 8 query heads per KV head";
  if (kv.head_dim != 64 && kv.head_dim != 128) return "head_dim " + std::to_string(kv.head_dim) + " is not supported (64, 128)";
  if (!c.q || !kv.k || !kv.v || !c.out) return "a null pointer";
  if (!c.acc.importance || !c.acc.h2o || c.acc.ld < kv.tokens) return "accumulators missing or shorter than the context";
  if (kv.tokens >= (std::int64_t{1} << 31)) return "too many tokens";
  return {};
}

template <class F>
std::string by_type(ElemType t, F&& f) {
  switch (t) {
    case ElemType::kF32: return f(float{});
    case ElemType::kF16: return f(__half{});
    case ElemType::kBF16: return f(__nv_bfloat16{});
  }
  return "unknown element type";
}

template <class F>
std::string by_dim(std::int64_t d, F&& f) {
  if (d == 64) return f(std::integral_constant<int, 2>{});
  if (d == 128) return f(std::integral_constant<int, 4>{});
  return "head_dim " + std::to_string(d) + " is not supported (64, 128)";
}

void launch_accumulate(const DecodeCommon& c, const float* logits, const float* norm, cudaStream_t stream) {
  const int group = static_cast<int>(c.heads / c.kv.kv_heads);
  dim3 grid(static_cast<unsigned>(c.kv.kv_heads), static_cast<unsigned>((c.kv.tokens + kChunk - 1) / kChunk));
  softmax_accumulate_kernel<<<grid, kChunk, 0, stream>>>(logits, norm, c.effective, c.acc.importance, c.acc.h2o, c.acc.ld,
                                                         c.acc.decay, group, c.kv.tokens);
}

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

// ---- dense ----------------------------------------------------------------------------------

std::size_t luka_dense_workspace_bytes(const DecodeCommon& a) {
  Bump b(nullptr);
  b.take<float>(decode_attention_workspace_floats(a.heads, a.kv.kv_heads, a.kv.head_dim, a.kv.tokens, a.splits));
  b.take<float>(a.heads * a.kv.tokens);
  b.take<float>(2 * a.heads);
  return b.bytes();
}

std::string luka_dense_decode(const DecodeCommon& a, void* workspace, std::size_t workspace_bytes, void* stream) {
  if (std::string e = check_common(a); !e.empty()) return e;
  if (!workspace || workspace_bytes < luka_dense_workspace_bytes(a)) return "workspace missing or too small";
  Bump b(workspace);
  DecodeAttentionArgs d;
  d.type = a.kv.type;
  d.q = a.q;
  d.k = a.kv.k;
  d.v = a.kv.v;
  d.out = a.out;
  d.heads = a.heads;
  d.kv_heads = a.kv.kv_heads;
  d.tokens = a.kv.tokens;
  d.head_dim = a.kv.head_dim;
  d.head_stride = a.kv.head_stride;
  d.token_stride = a.kv.token_stride;
  d.scale = a.scale;
  d.splits = a.splits;
  d.workspace = b.take<float>(decode_attention_workspace_floats(a.heads, a.kv.kv_heads, a.kv.head_dim, a.kv.tokens, a.splits));
  d.logits = b.take<float>(a.heads * a.kv.tokens);
  d.norm = b.take<float>(2 * a.heads);
  if (std::string e = dense_decode_attention(d, stream); !e.empty()) return e;
  launch_accumulate(a, d.logits, d.norm, static_cast<cudaStream_t>(stream));
  return launch_error();
}

// ---- lined ----------------------------------------------------------------------------------

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

// ---- clustered ------------------------------------------------------------------------------

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

// ---- prefill --------------------------------------------------------------------------------

std::size_t prefill_workspace_bytes(const PrefillArgs& a) {
  Bump b(nullptr);
  b.take<float>(2 * a.heads * a.queries);
  return b.bytes();
}

std::string prefill_attention(const PrefillArgs& a, void* workspace, std::size_t workspace_bytes, void* stream) {
  DecodeCommon c;
  c.kv = a.kv;
  c.q = a.q;
  c.out = a.out;
  c.heads = a.heads;
  c.acc = a.acc;
  if (std::string e = check_common(c); !e.empty()) return e;
  if (a.queries <= 0 || a.q_pos0 < 0 || a.q_pos0 + a.queries != a.kv.tokens) return "queries must be the cache's last tokens";
  if (a.acc.decay != 1.0f) return "the prefill kernel accumulates without decay (decay 1)";
  if (a.pool < 1 || (a.pool & (a.pool - 1)) != 0) return "pool must be a power of two";
  if (!workspace || workspace_bytes < prefill_workspace_bytes(a)) return "workspace missing or too small";
  const auto s = static_cast<cudaStream_t>(stream);
  const int H = static_cast<int>(a.heads), KV = static_cast<int>(a.kv.kv_heads);
  const int rows = static_cast<int>((a.queries + a.pool - 1) / a.pool), cols = static_cast<int>((a.kv.tokens + a.pool - 1) / a.pool);
  if (a.pooled)
    if (const cudaError_t e = cudaMemsetAsync(a.pooled, 0, static_cast<std::size_t>(H) * rows * cols * sizeof(float), s); e != cudaSuccess)
      return cudaGetErrorString(e);
  Bump b(workspace);
  PrefillParams p{a.q, a.kv.k, a.kv.v, a.kv.head_stride, a.kv.token_stride, H, H / KV, static_cast<int>(a.queries),
                  static_cast<int>(a.kv.tokens), static_cast<int>(a.q_pos0), static_cast<int>(a.pool), a.scale, a.out,
                  b.take<float>(2 * a.heads * a.queries), a.acc.importance, a.acc.h2o, a.acc.ld, a.pooled, rows, cols};
  std::string err = by_type(a.kv.type, [&](auto tag) {
    using T_ = decltype(tag);
    return by_dim(a.kv.head_dim, [&](auto per) {
      constexpr int PER = decltype(per)::value;
      prefill_rows_kernel<T_, PER><<<dim3(static_cast<unsigned>(a.queries), static_cast<unsigned>(KV)), kWarps * 32, 0, s>>>(p);
      prefill_columns_kernel<T_, PER>
          <<<dim3(static_cast<unsigned>((a.kv.tokens + kKeyTile - 1) / kKeyTile), static_cast<unsigned>(KV)), kWarps * 32, 0, s>>>(p);
      return std::string();
    });
  });
  if (!err.empty()) return err;
  return launch_error();
}

// ---- page compression -----------------------------------------------------------------------

std::string compress_pages(const CompressArgs& a, void* stream) {
  if (a.count == 0) return {};
  if (a.count < 0 || a.first_page < 0 || a.kv.kv_heads <= 0 || a.kv.head_dim <= 0) return "bad sizes";
  if (a.max_page_tokens < 1 || a.max_page_tokens > kMaxPageTokens)
    return "pages must hold 1 to " + std::to_string(kMaxPageTokens) + " tokens on the GPU";
  if (!a.kv.k || !a.kv.v || !a.page_start || !a.sum_k || !a.sum_v || !a.sum_bias || !a.spread) return "a null pointer";
  if (a.compressor == Compressor::kAttentionWeighted && (!a.importance || !(a.tau > 0))) return "attention_weighted needs importance and tau > 0";
  if (a.first_page + a.count > a.capacity) return "summary capacity too small";
  if (a.summary_type != ElemType::kF32 && a.summary_type != a.kv.type) return "summaries must be fp32 or the cache's type";
  CompressParams p{a.kv.k, a.kv.v, a.kv.head_stride, a.kv.token_stride, static_cast<int>(a.kv.head_dim), a.importance,
                   a.importance_ld, a.page_start, static_cast<int>(a.first_page), static_cast<int>(a.compressor), a.layer,
                   a.zero_v ? 1 : 0, static_cast<int>(a.bias), a.tau, a.seed, a.sum_k, a.sum_v, a.sum_bias, a.capacity,
                   a.spread, a.spread_ld};
  const auto s = static_cast<cudaStream_t>(stream);
  dim3 grid(static_cast<unsigned>(a.count), static_cast<unsigned>(a.kv.kv_heads));
  std::string err = by_type(a.kv.type, [&](auto tag) {
    using T_ = decltype(tag);
    if (a.summary_type == ElemType::kF32)
      compress_kernel<T_, float><<<grid, 128, 0, s>>>(p);
    else
      compress_kernel<T_, T_><<<grid, 128, 0, s>>>(p);
    return std::string();
  });
  if (!err.empty()) return err;
  return launch_error();
}

}  // namespace luka::cuda
