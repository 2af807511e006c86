#include "kernels/cuda/luka/clustered_a.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>

namespace luka::cuda::v2 {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTile = 16;
constexpr int kStages = 4;
constexpr int kMaxSplits = 64;
constexpr int kMaxTopK = 8;

__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ void copy16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void wait_groups() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Where entry e's key (which = 0) or value (1) row lies: a page summary for e < P, else a raw tail
// token of the cache.
template <class T>
struct Rows {
  const T *sk, *sv, *k, *v;
  long long page_stride, token_stride;
  int P, E, D;
  __device__ const T* row(int which, int e) const {
    if (e < P) return (which ? sv : sk) + static_cast<long long>(e) * D;
    return (which ? v : k) + static_cast<long long>(E + e - P) * token_stride;
  }
};

template <class T, int D>
__device__ __forceinline__ void issue_tile(T (*stage)[2][kTile][D], const Rows<T>& rows, int tile, int n_tiles, int e0,
                                           int e1) {
  constexpr int kChunks = D / 8;
  if (tile < n_tiles) {
    const int base = e0 + tile * kTile;
    for (int c = threadIdx.x; c < 2 * kTile * kChunks; c += kThreads) {
      const int which = c / (kTile * kChunks), r = (c / kChunks) % kTile, chunk = c % kChunks;
      if (base + r < e1) copy16(&stage[tile % kStages][which][r][chunk * 8], rows.row(which, base + r) + chunk * 8);
    }
  }
  commit();
}

// The last block: per head (warp w: heads w, w + kWarps, …) the top_k pages by logit, ties to the
// lower page, in top_k rounds of a warp argmax over the pages not yet taken (taken pages in shared
// memory, so no per-thread array reaches the stack).
__device__ void select_pages(const float* logits, int heads, int entries, int P, int top_k, std::int32_t* picks,
                             int (*taken)[kMaxTopK]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int h = warp; h < heads; h += kWarps) {
    const float* l = logits + static_cast<long long>(h) * entries;
    for (int i = 0; i < top_k; ++i) {
      float best = -FLT_MAX;
      int at = -1;
      for (int p = lane; p < P; p += 32) {
        bool used = false;
        for (int j = 0; j < i; ++j) used = used || taken[warp][j] == p;
        const float x = __ldcg(l + p);        // written by other blocks: read past this SM's L1
        if (!used && (at < 0 || x > best)) {  // ascending p per lane: ties keep the lower
          best = x;
          at = p;
        }
      }
      for (int o = 16; o > 0; o >>= 1) {
        const float ob = __shfl_xor_sync(0xffffffffu, best, o);
        const int oa = __shfl_xor_sync(0xffffffffu, at, o);
        if (oa >= 0 && (at < 0 || ob > best || (ob == best && oa < at))) {
          best = ob;
          at = oa;
        }
      }
      if (lane == 0) {
        taken[warp][i] = at;
        picks[h * top_k + i] = at;
      }
      __syncwarp();
    }
  }
}

// Block (split, KV head): the G heads of the group over entries [e0, e1) of pages then tail, as
// dense_v2's split kernel over tokens, plus the bias of page entries.
template <class T, int D, int G>
__global__ void __launch_bounds__(kThreads, 1)
    clustered_a_kernel(const T* __restrict__ q, Rows<T> rows, const float* bias, long long page_cap,
                       long long head_stride, int entries, int splits, float scale, int top_k,
                       float* __restrict__ states, float* __restrict__ logits, std::int32_t* __restrict__ picks,
                       unsigned int* counter) {
  constexpr int PER = D / 32;
  __shared__ __align__(16) T stage[kStages][2][kTile][D];
  __shared__ int taken[kWarps][kMaxTopK];
  __shared__ bool last;
  const int split = blockIdx.x, kv = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int per_split = (entries + splits - 1) / splits;
  const int e0 = min(entries, split * per_split), e1 = min(entries, e0 + per_split);
  const int n_tiles = (e1 - e0 + kTile - 1) / kTile;
  rows.sk += kv * page_cap * D;
  rows.sv += kv * page_cap * D;
  rows.k += kv * head_stride;
  rows.v += kv * head_stride;
  const float* b = bias ? bias + kv * page_cap : nullptr;

  float qr[G][PER];
#pragma unroll
  for (int j = 0; j < G; ++j)
#pragma unroll
    for (int i = 0; i < PER; ++i) qr[j][i] = to_f(q[(kv * G + j) * D + lane * PER + i]) * scale;
  float m[G], l[G], acc[G][PER];
#pragma unroll
  for (int j = 0; j < G; ++j) {
    m[j] = -FLT_MAX;
    l[j] = 0.0f;
#pragma unroll
    for (int i = 0; i < PER; ++i) acc[j][i] = 0.0f;
  }
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue_tile<T, D>(stage, rows, s, n_tiles, e0, e1);
  for (int tile = 0; tile < n_tiles; ++tile) {
    issue_tile<T, D>(stage, rows, tile + kStages - 1, n_tiles, e0, e1);
    wait_groups<kStages - 1>();
    __syncthreads();
    const int base = e0 + tile * kTile, buf = tile % kStages;
    for (int r = warp; r < kTile && base + r < e1; r += kWarps) {
      const int e = base + r;
      const float add = e < rows.P && b ? b[e] : 0.0f;
      float kr[PER], vr[PER];
#pragma unroll
      for (int i = 0; i < PER; ++i) {
        kr[i] = to_f(stage[buf][0][r][lane * PER + i]);
        vr[i] = to_f(stage[buf][1][r][lane * PER + i]);
      }
#pragma unroll
      for (int j = 0; j < G; ++j) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < PER; ++i) dot += qr[j][i] * kr[i];
        const float s = warp_sum(dot) + add;
        if (lane == 0) logits[static_cast<long long>(kv * G + j) * entries + e] = s;
        const float mn = fmaxf(m[j], s), corr = expf(m[j] - mn), p = expf(s - mn);
        l[j] = l[j] * corr + p;
#pragma unroll
        for (int i = 0; i < PER; ++i) acc[j][i] = acc[j][i] * corr + p * vr[i];
        m[j] = mn;
      }
    }
    __syncthreads();
  }
  wait_groups<0>();
  __syncthreads();
  float* rec = reinterpret_cast<float*>(&stage[0][0][0][0]);
  static_assert(sizeof(stage) >= sizeof(float) * kWarps * G * (D + 2), "merge records fit in the stages");
#pragma unroll
  for (int j = 0; j < G; ++j) {
    float* r = rec + (warp * G + j) * (D + 2);
    if (lane == 0) {
      r[0] = m[j];
      r[1] = l[j];
    }
#pragma unroll
    for (int i = 0; i < PER; ++i) r[2 + lane * PER + i] = acc[j][i];
  }
  __syncthreads();
  for (int x = threadIdx.x; x < G * D; x += kThreads) {
    const int j = x / D, d = x % D;
    float M = -FLT_MAX;
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, rec[(w * G + j) * (D + 2)]);
    float L = 0.0f, A = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float* r = rec + (w * G + j) * (D + 2);
      const float f = expf(r[0] - M);
      L += r[1] * f;
      A += r[2 + d] * f;
    }
    float* out = states + (static_cast<long long>(kv * G + j) * splits + split) * (D + 2);
    if (d == 0) {
      out[0] = M;
      out[1] = L;
    }
    out[2 + d] = A;
  }
  if (top_k <= 0) return;
  // The last block of the grid selects: every block's logits are visible after its fence.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == gridDim.x * gridDim.y - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  select_pages(logits, static_cast<int>(gridDim.y) * G, entries, rows.P, top_k, picks, taken);
  if (threadIdx.x == 0) *counter = 0u;
}

template <class T, int D, int G>
void launch(const ClusteredAArgs& a, int splits, cudaStream_t s) {
  const Rows<T> rows{static_cast<const T*>(a.sum_k), static_cast<const T*>(a.sum_v), static_cast<const T*>(a.k),
                     static_cast<const T*>(a.v),     a.page_cap * a.head_dim,        a.token_stride,
                     static_cast<int>(a.pages),      static_cast<int>(a.paged_end),  static_cast<int>(a.head_dim)};
  const int entries = static_cast<int>(a.pages + a.tokens - a.paged_end);
  clustered_a_kernel<T, D, G><<<dim3(splits, static_cast<unsigned>(a.kv_heads)), kThreads, 0, s>>>(
      static_cast<const T*>(a.q), rows, a.bias, a.page_cap, a.head_stride, entries, splits, a.scale, a.top_k, a.states,
      a.logits, a.picks, a.counter);
}

template <class T, int D>
bool by_group(const ClusteredAArgs& a, int splits, cudaStream_t s) {
  switch (a.heads / a.kv_heads) {
    case 1:
      launch<T, D, 1>(a, splits, s);
      return true;
    case 2:
      launch<T, D, 2>(a, splits, s);
      return true;
    case 4:
      launch<T, D, 4>(a, splits, s);
      return true;
    case 8:
      launch<T, D, 8>(a, splits, s);
      return true;
    default:
      return false;
  }
}

template <class T>
bool by_dim(const ClusteredAArgs& a, int splits, cudaStream_t s) {
  if (a.head_dim == 64) return by_group<T, 64>(a, splits, s);
  if (a.head_dim == 128) return by_group<T, 128>(a, splits, s);
  return false;
}

}  // namespace

std::int64_t clustered_a_splits(std::int64_t kv_heads, std::int64_t entries, int requested) {
  const std::int64_t most = std::max<std::int64_t>(1, (entries + 2 * kTile - 1) / (2 * kTile));
  if (requested > 0) return std::min<std::int64_t>({requested, most, kMaxSplits});
  const std::int64_t want = (264 + kv_heads - 1) / std::max<std::int64_t>(kv_heads, 1);
  return std::clamp<std::int64_t>(std::min(want, most), 1, kMaxSplits);
}

std::string clustered_a(const ClusteredAArgs& a, void* stream) {
  if (a.heads <= 0 || a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    return "clustered_a: heads must be a multiple of kv_heads";
  const std::int64_t G = a.heads / a.kv_heads;
  if (G != 1 && G != 2 && G != 4 && G != 8)
    return "clustered_a: " + std::to_string(G) + " query heads per KV head (1, 2, 4 or 8)";
  if (a.head_dim != 64 && a.head_dim != 128)
    return "clustered_a: head_dim " + std::to_string(a.head_dim) + " (64 or 128)";
  if (a.pages < 0 || a.pages > a.page_cap || a.paged_end < 0 || a.paged_end > a.tokens ||
      a.pages + a.tokens - a.paged_end <= 0)
    return "clustered_a: pages, page_cap, paged_end and tokens disagree";
  if (a.top_k < 0 || a.top_k > kMaxTopK) return "clustered_a: top_k " + std::to_string(a.top_k) + " (0 to 8)";
  if (!a.q || !a.k || !a.v || !a.states || !a.logits || (a.pages > 0 && (!a.sum_k || !a.sum_v)) ||
      (a.top_k > 0 && (!a.picks || !a.counter)))
    return "clustered_a: a null pointer among the arrays the call needs";
  if (a.head_stride % 8 || a.token_stride % 8 || a.page_cap * a.head_dim % 8)
    return "clustered_a: rows must be 16-byte aligned";
  const int splits = static_cast<int>(clustered_a_splits(a.kv_heads, a.pages + a.tokens - a.paged_end, a.splits));
  const auto s = static_cast<cudaStream_t>(stream);
  const bool ok = a.bf16 ? by_dim<__nv_bfloat16>(a, splits, s) : by_dim<__half>(a, splits, s);
  if (!ok) return "clustered_a: unsupported shape";
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("clustered_a: ") + cudaGetErrorString(e);
}

}  // namespace luka::cuda::v2
