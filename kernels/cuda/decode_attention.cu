#include "kernels/cuda/decode_attention.h"

#include "kernels/cuda/common.cuh"

#include <algorithm>
#include <cfloat>

namespace luka::cuda {
namespace {

constexpr int kWarps = 4;          // warps per block in the split kernel
constexpr int kMaxGroup = 8;       // query heads per KV head
constexpr int kTokensPerSplit = 256;
constexpr int kMaxSplits = 64;
constexpr int kUnroll = 4;         // tokens whose K/V rows a warp loads at once

using detail::from_float;
using detail::to_float;
using detail::warp_sum;

// Block (kv head, split): the G query heads of the KV head over tokens [t0, t1). Each warp takes
// every kWarps-th token; lane l holds dims l, l+32, ... (PER = D / 32 of them). Each warp keeps
// an online softmax per query head (running max m, sum l, weighted values acc); the warps are
// merged through shared memory and the split's partials (m, l, acc[D]) go to the workspace.
// MAXG ≥ group sizes the per-head register arrays: a small group leaves registers for more
// resident blocks.
template <class T, int PER, int MAXG>
__global__ void split_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, float* __restrict__ ws,
                             float* __restrict__ logits, int heads, int group, int tokens, int splits, long long head_stride,
                             long long token_stride, float scale) {
  constexpr int D = PER * 32;
  const int kv = blockIdx.x, split = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int per_split = (tokens + splits - 1) / splits;
  const int t0 = split * per_split, t1 = min(tokens, t0 + per_split);

  float qr[MAXG][PER];
#pragma unroll
  for (int g = 0; g < MAXG; ++g)
    for (int i = 0; i < PER; ++i) qr[g][i] = g < group ? to_float(q[(kv * group + g) * D + lane + 32 * i]) * scale : 0.f;
  float m[MAXG], l[MAXG], acc[MAXG][PER];
  for (int g = 0; g < MAXG; ++g) {
    m[g] = -FLT_MAX;
    l[g] = 0.f;
    for (int i = 0; i < PER; ++i) acc[g][i] = 0.f;
  }
  const T* kh = k + kv * head_stride;
  const T* vh = v + kv * head_stride;
  // kUnroll tokens' rows are loaded before any is used, so their loads are in flight together;
  // each warp still takes its tokens in ascending order.
  for (int t = t0 + warp; t < t1; t += kUnroll * kWarps) {
    float kr[kUnroll][PER], vr[kUnroll][PER];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long tu = t + u * kWarps;
      for (int i = 0; i < PER; ++i) {
        kr[u][i] = tu < t1 ? to_float(kh[tu * token_stride + lane + 32 * i]) : 0.f;
        vr[u][i] = tu < t1 ? to_float(vh[tu * token_stride + lane + 32 * i]) : 0.f;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int tu = t + u * kWarps;
      if (tu >= t1) break;
#pragma unroll
      for (int g = 0; g < MAXG; ++g) {  // unrolled so the per-head arrays stay in registers
        if (g >= group) break;
        float s = 0.f;
        for (int i = 0; i < PER; ++i) s += qr[g][i] * kr[u][i];
        s = warp_sum(s);
        if (logits && lane == 0) logits[static_cast<long long>(kv * group + g) * tokens + tu] = s;
        const float mn = fmaxf(m[g], s);
        const float corr = __expf(m[g] - mn), p = __expf(s - mn);
        l[g] = l[g] * corr + p;
        for (int i = 0; i < PER; ++i) acc[g][i] = acc[g][i] * corr + p * vr[u][i];
        m[g] = mn;
      }
    }
  }
  // Merge the warps: warp 0 folds in the others' states.
  __shared__ float sm[kWarps][kMaxGroup], sl[kWarps][kMaxGroup];
  __shared__ float sacc[kWarps][kMaxGroup][D];
#pragma unroll
  for (int g = 0; g < MAXG; ++g) {
    if (g >= group) break;
    if (lane == 0) {
      sm[warp][g] = m[g];
      sl[warp][g] = l[g];
    }
    for (int i = 0; i < PER; ++i) sacc[warp][g][lane + 32 * i] = acc[g][i];
  }
  __syncthreads();
  if (warp != 0) return;
  for (int g = 0; g < group; ++g) {
    float M = -FLT_MAX;
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sm[w][g]);
    float L = 0.f, out[PER];
    for (int i = 0; i < PER; ++i) out[i] = 0.f;
    for (int w = 0; w < kWarps; ++w) {
      const float f = sm[w][g] == -FLT_MAX ? 0.f : __expf(sm[w][g] - M);
      L += sl[w][g] * f;
      for (int i = 0; i < PER; ++i) out[i] += sacc[w][g][lane + 32 * i] * f;
    }
    const int h = kv * group + g;
    float* part = ws + (static_cast<long long>(h) * splits + split) * (D + 2);
    if (lane == 0) {
      part[0] = M;
      part[1] = L;
    }
    for (int i = 0; i < PER; ++i) part[2 + lane + 32 * i] = out[i];
  }
}

// Block h: merges the splits of query head h and writes out[h, :] (and norm[2h .. 2h+1]).
// Dynamic shared memory: combine_shared_bytes(splits).
template <class T>
__global__ void combine_kernel(const float* __restrict__ ws, T* __restrict__ out, float* __restrict__ norm, int splits, int D) {
  extern __shared__ float weight[];
  const int h = blockIdx.x;
  detail::combine_splits<T>(ws + static_cast<long long>(h) * splits * (D + 2), splits, D, out + h * D, norm ? norm + 2 * h : nullptr,
                            weight);
}

int choose_splits(std::int64_t tokens, int requested, std::int64_t kv_heads) {
  return detail::split_count(tokens, requested, kv_heads, kTokensPerSplit, kMaxSplits);
}

template <class T, int PER, int MAXG>
void launch_split(const DecodeAttentionArgs& a, int splits, cudaStream_t stream) {
  const int group = static_cast<int>(a.heads / a.kv_heads);
  dim3 grid(static_cast<unsigned>(a.kv_heads), static_cast<unsigned>(splits));
  split_kernel<T, PER, MAXG><<<grid, kWarps * 32, 0, stream>>>(static_cast<const T*>(a.q), static_cast<const T*>(a.k),
                                                               static_cast<const T*>(a.v), a.workspace, a.logits,
                                                               static_cast<int>(a.heads), group, static_cast<int>(a.tokens),
                                                               splits, a.head_stride, a.token_stride, a.scale);
}

template <class T, int PER>
std::string launch(const DecodeAttentionArgs& a, int splits, cudaStream_t stream) {
  const std::int64_t group = a.heads / a.kv_heads;
  if (group <= 1) launch_split<T, PER, 1>(a, splits, stream);
  else if (group <= 2) launch_split<T, PER, 2>(a, splits, stream);
  else if (group <= 4) launch_split<T, PER, 4>(a, splits, stream);
  else launch_split<T, PER, kMaxGroup>(a, splits, stream);
  combine_kernel<T><<<static_cast<unsigned>(a.heads), 128, detail::combine_shared_bytes(splits), stream>>>(
      a.workspace, static_cast<T*>(a.out), a.norm, splits, static_cast<int>(a.head_dim));
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? std::string() : std::string(cudaGetErrorString(err));
}

template <class T>
std::string dispatch_dim(const DecodeAttentionArgs& a, int splits, cudaStream_t stream) {
  switch (a.head_dim) {
    case 32: return launch<T, 1>(a, splits, stream);
    case 64: return launch<T, 2>(a, splits, stream);
    case 96: return launch<T, 3>(a, splits, stream);
    case 128: return launch<T, 4>(a, splits, stream);
    case 256: return launch<T, 8>(a, splits, stream);
  }
  return "head_dim " + std::to_string(a.head_dim) + " is not supported (32, 64, 96, 128, 256)";
}

}  // namespace

std::int64_t decode_attention_workspace_floats(std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim, std::int64_t tokens,
                                               int splits) {
  return heads * choose_splits(tokens, splits, kv_heads) * (head_dim + 2);
}

std::string dense_decode_attention(const DecodeAttentionArgs& a, void* stream) {
  if (a.heads <= 0 || a.kv_heads <= 0 || a.tokens <= 0 || a.head_dim <= 0) return "empty sizes";
  if (a.heads % a.kv_heads != 0) return "heads must be a multiple of kv_heads";
  if (a.heads / a.kv_heads > kMaxGroup) return "more than 8 query heads per KV head";
  if (!a.q || !a.k || !a.v || !a.out || !a.workspace) return "a null pointer";
  if (a.tokens > (std::int64_t{1} << 30)) return "too many tokens";
  const int splits = choose_splits(a.tokens, a.splits, a.kv_heads);
  const auto s = static_cast<cudaStream_t>(stream);
  switch (a.type) {
    case ElemType::kF32: return dispatch_dim<float>(a, splits, s);
    case ElemType::kF16: return dispatch_dim<__half>(a, splits, s);
    case ElemType::kBF16: return dispatch_dim<__nv_bfloat16>(a, splits, s);
  }
  return "unknown element type";
}

}  // namespace luka::cuda
