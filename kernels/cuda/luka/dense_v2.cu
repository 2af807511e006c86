#include "kernels/cuda/luka/dense_v2.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>

namespace luka::cuda::v2 {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTile = 16;   // tokens per pipeline stage
constexpr int kStages = 4;  // stages in flight: 4 × 16 rows × (K + V) = 32 KB at D = 128, bf16
constexpr int kMaxSplits = 64;
constexpr int kCombineThreads = 256;
constexpr int kCombineTokens = 2048;  // tokens per combine block for the accumulators

__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
template <class T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half from_f<__half>(float x) {
  return __float2half_rn(x);
}

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// 16 bytes global → shared without a register round trip (sm_80+); the L1 is bypassed (.cg): each
// row is read once.
__device__ __forceinline__ void copy16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void wait_groups() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Copies tile `tile` of [t0, t1) (K and V rows) into its stage and commits the group; a tile
// past the end commits an empty group, which keeps the wait count uniform.
template <class T, int D>
__device__ __forceinline__ void issue_tile(T (*stage)[2][kTile][D], const T* kh, const T* vh, int tile, int n_tiles,
                                           int t0, int t1, long long token_stride) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  if (tile < n_tiles) {
    const int base = t0 + tile * kTile;
    for (int c = threadIdx.x; c < 2 * kTile * kChunks; c += kThreads) {
      const int which = c / (kTile * kChunks), r = (c / kChunks) % kTile, chunk = c % kChunks;
      if (base + r < t1)
        copy16(&stage[tile % kStages][which][r][chunk * 8], (which ? vh : kh) + (base + r) * token_stride + chunk * 8);
    }
  }
  commit();
}

// Block (split, KV head): the group's G heads over the split's tokens. The K and V rows of a tile
// of kTile tokens are copied by every thread (16 bytes each) into stage (tile mod kStages), kStages
// − 1 tiles ahead of the one computed. Warp w computes tokens w, w + kWarps, … of the tile; lane l
// holds dims [l·PER, (l+1)·PER). Each warp keeps an online softmax per head; the warps merge
// through shared memory (reusing the stages) and the split's state (m, l, acc[D]) goes out.
template <class T, int D, int G>
__global__ void __launch_bounds__(kThreads, 1)
    dense_v2_split_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          float* __restrict__ ws, float* __restrict__ logits, int tokens, int splits,
                          long long head_stride, long long token_stride, float scale) {
  constexpr int PER = D / 32;
  __shared__ __align__(16) T stage[kStages][2][kTile][D];
  const int split = blockIdx.x, kv = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int per_split = (tokens + splits - 1) / splits;
  const int t0 = min(tokens, split * per_split), t1 = min(tokens, t0 + per_split);
  const int n_tiles = (t1 - t0 + kTile - 1) / kTile;
  const T* kh = k + kv * head_stride;
  const T* vh = v + kv * head_stride;

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
  for (int s = 0; s < kStages - 1; ++s) issue_tile<T, D>(stage, kh, vh, s, n_tiles, t0, t1, token_stride);
  for (int tile = 0; tile < n_tiles; ++tile) {
    issue_tile<T, D>(stage, kh, vh, tile + kStages - 1, n_tiles, t0, t1, token_stride);
    wait_groups<kStages - 1>();
    __syncthreads();
    const int base = t0 + tile * kTile, buf = tile % kStages;
    for (int r = warp; r < kTile && base + r < t1; r += kWarps) {
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
        const float s = warp_sum(dot);
        if (logits && lane == 0) logits[static_cast<long long>(kv * G + j) * tokens + base + r] = s;
        const float mn = fmaxf(m[j], s), corr = expf(m[j] - mn), p = expf(s - mn);
        l[j] = l[j] * corr + p;
#pragma unroll
        for (int i = 0; i < PER; ++i) acc[j][i] = acc[j][i] * corr + p * vr[i];
        m[j] = mn;
      }
    }
    __syncthreads();  // the stage is refilled by the next issue
  }
  wait_groups<0>();
  __syncthreads();
  // Merge the warps: [warp][head] records of (m, l, acc[D]) in the stage memory.
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
  for (int e = threadIdx.x; e < G * D; e += kThreads) {
    const int j = e / D, d = e % D;
    float M = -FLT_MAX;
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, rec[(w * G + j) * (D + 2)]);
    float L = 0.0f, A = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float* r = rec + (w * G + j) * (D + 2);
      const float f = expf(r[0] - M);
      L += r[1] * f;
      A += r[2 + d] * f;
    }
    float* out = ws + (static_cast<long long>(kv * G + j) * splits + split) * (D + 2);
    if (d == 0) {
      out[0] = M;
      out[1] = L;
    }
    out[2 + d] = A;
  }
}

// Block (KV head, token chunk): the group's heads' max and sum over the splits (warp j: head j);
// chunk 0 writes the outputs; with logits every chunk adds p = exp(logit − M)/Z of its tokens to
// h2o (times add_scale) and the group mean to importance.
template <class T, int D, int G>
__global__ void __launch_bounds__(kCombineThreads)
    dense_v2_combine_kernel(const float* __restrict__ ws, const float* __restrict__ logits, T* __restrict__ out,
                            float* __restrict__ h2o, float* __restrict__ importance, long long acc_stride,
                            float add_scale, int tokens, int splits) {
  __shared__ float Ms[G], invZ[G];
  const int kv = blockIdx.x, chunk = blockIdx.y, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp < G) {
    const float* st = ws + static_cast<long long>(kv * G + warp) * splits * (D + 2);
    float M = -FLT_MAX;
    for (int s = lane; s < splits; s += 32) M = fmaxf(M, st[s * (D + 2)]);
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    float Z = 0.0f;
    for (int s = lane; s < splits; s += 32) Z += st[s * (D + 2) + 1] * expf(st[s * (D + 2)] - M);
    Z = warp_sum(Z);
    if (lane == 0) {
      Ms[warp] = M;
      invZ[warp] = Z > 0.0f ? 1.0f / Z : 0.0f;
    }
  }
  __syncthreads();
  if (chunk == 0) {
    for (int e = threadIdx.x; e < G * D; e += kCombineThreads) {
      const int j = e / D, d = e % D;
      const float* st = ws + static_cast<long long>(kv * G + j) * splits * (D + 2);
      float A = 0.0f;
      for (int s = 0; s < splits; ++s) A += st[s * (D + 2) + 2 + d] * expf(st[s * (D + 2)] - Ms[j]);
      out[(kv * G + j) * D + d] = from_f<T>(A * invZ[j]);
    }
  }
  if (!logits) return;
  const int c0 = chunk * kCombineTokens, c1 = min(tokens, c0 + kCombineTokens);
  for (int t = c0 + threadIdx.x; t < c1; t += kCombineThreads) {
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < G; ++j) {
      const int h = kv * G + j;
      const float p = expf(logits[static_cast<long long>(h) * tokens + t] - Ms[j]) * invZ[j];
      if (h2o) h2o[h * acc_stride + t] += add_scale == 1.0f ? p : p * add_scale;
      sum += p;
    }
    if (importance) importance[kv * acc_stride + t] += sum / static_cast<float>(G);
  }
}

template <class T, int D, int G>
void launch(const DenseArgs& a, int splits, cudaStream_t s) {
  dense_v2_split_kernel<T, D, G><<<dim3(splits, static_cast<unsigned>(a.kv_heads)), kThreads, 0, s>>>(
      static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v), a.workspace, a.logits,
      static_cast<int>(a.tokens), splits, a.head_stride, a.token_stride, a.scale);
  const int chunks = a.logits ? static_cast<int>((a.tokens + kCombineTokens - 1) / kCombineTokens) : 1;
  dense_v2_combine_kernel<T, D, G>
      <<<dim3(static_cast<unsigned>(a.kv_heads), std::max(chunks, 1)), kCombineThreads, 0, s>>>(
          a.workspace, a.logits, static_cast<T*>(a.out), a.h2o, a.importance, a.acc_stride, a.add_scale,
          static_cast<int>(a.tokens), splits);
}

template <class T, int D>
bool by_group(const DenseArgs& a, int splits, cudaStream_t s) {
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
bool by_dim(const DenseArgs& a, int splits, cudaStream_t s) {
  if (a.head_dim == 64) return by_group<T, 64>(a, splits, s);
  if (a.head_dim == 128) return by_group<T, 128>(a, splits, s);
  return false;
}

}  // namespace

// About two waves of a 132-SM GPU, each split at least two tiles.
std::int64_t dense_v2_splits(std::int64_t kv_heads, std::int64_t tokens, int requested) {
  const std::int64_t most = std::max<std::int64_t>(1, (tokens + 2 * kTile - 1) / (2 * kTile));
  if (requested > 0) return std::min<std::int64_t>({requested, most, kMaxSplits});
  const std::int64_t want = (264 + kv_heads - 1) / std::max<std::int64_t>(kv_heads, 1);
  return std::clamp<std::int64_t>(std::min(want, most), 1, kMaxSplits);
}

std::int64_t dense_v2_workspace_floats(std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim,
                                       std::int64_t tokens, int splits) {
  return heads * dense_v2_splits(kv_heads, tokens, splits) * (head_dim + 2);
}

std::string dense_v2(const DenseArgs& a, void* stream) {
  if (a.heads <= 0 || a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    return "dense_v2: heads must be a multiple of kv_heads";
  const std::int64_t G = a.heads / a.kv_heads;
  if (G != 1 && G != 2 && G != 4 && G != 8)
    return "dense_v2: " + std::to_string(G) + " query heads per KV head (1, 2, 4 or 8)";
  if (a.head_dim != 64 && a.head_dim != 128) return "dense_v2: head_dim " + std::to_string(a.head_dim) + " (64 or 128)";
  if (a.tokens <= 0 || a.tokens > (std::int64_t{1} << 30)) return "dense_v2: tokens " + std::to_string(a.tokens);
  if (!a.q || !a.k || !a.v || !a.out || !a.workspace) return "dense_v2: a null pointer among q, k, v, out, workspace";
  if (a.head_stride % 8 || a.token_stride % 8 || reinterpret_cast<std::uintptr_t>(a.k) % 16 ||
      reinterpret_cast<std::uintptr_t>(a.v) % 16)
    return "dense_v2: K/V rows must be 16-byte aligned (strides a multiple of 8 elements)";
  if ((a.h2o || a.importance) && (!a.logits || a.acc_stride < a.tokens))
    return "dense_v2: accumulators need logits and acc_stride >= tokens";
  const int splits = static_cast<int>(dense_v2_splits(a.kv_heads, a.tokens, a.splits));
  const auto s = static_cast<cudaStream_t>(stream);
  const bool ok = a.bf16 ? by_dim<__nv_bfloat16>(a, splits, s) : by_dim<__half>(a, splits, s);
  if (!ok) return "dense_v2: unsupported shape";
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("dense_v2: ") + cudaGetErrorString(e);
}

}  // namespace luka::cuda::v2
