// The pieces the LuKA step kernels share (kernels/cuda/luka/{accumulate,dense,lined,clustered,
// prefill,pages}.cu, whose API is kernels/cuda/luka_decode.h): the launch sizes, block-wide scans,
// the online-softmax merge, a head's attention over a list of entries, the selection units, the
// dispatch on element type and head size, and the argument check and accumulator launch every
// mode's step ends with (accumulate.cu). Only those files include it.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <type_traits>

#include "kernels/common/luka_rules.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/luka_decode.h"

namespace luka::cuda {

namespace detail {
// accumulate.cu: what every entry point checks first ("" when the sizes and pointers are usable),
// and the accumulators' update from token-indexed logits and each head's (max, 1/sum).
std::string check_common(const DecodeCommon& c);
void launch_accumulate(const DecodeCommon& c, const float* logits, const float* norm, cudaStream_t stream);
}  // namespace detail

namespace {

using detail::Bump;
using detail::from_float;
using detail::kEmptyMax;
using detail::launch_error;
using detail::to_float;
using detail::warp_max;
using detail::warp_sum;
using detail::check_common;
using detail::launch_accumulate;

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

// rows: the blocks of one split (KV heads for clustered, heads for lined).
inline int choose_splits(std::int64_t entries, int requested, std::int64_t rows) {
  return detail::split_count(entries, requested, rows, kEntriesPerSplit, kMaxSplits);
}

// One head's effective weight w of token t: the optional effective row, then h2o_score (the
// update the CPU core makes, rules::h2o_update).
__device__ __forceinline__ void add_h2o(float w, int h, long long t, float* eff, long long tokens, float* h2o, long long ld,
                                        float decay) {
  if (eff) eff[h * tokens + t] = w;
  float* p = h2o + h * ld + t;
  *p = rules::h2o_update(*p, w, decay);
}

// --- block-wide helpers ---------------------------------------------------------------------

// Exclusive prefix sum of x over the block (blockDim a multiple of 32, at most 1024); *total is
// the block's sum. `scratch` holds 32 ints of shared memory.
__device__ inline int block_exclusive_scan(int x, int* total, int* scratch) {
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

}  // namespace
}  // namespace luka::cuda
