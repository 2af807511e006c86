#include "kernels/cuda/luka/clustered_b.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>

namespace luka::cuda::v2 {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsB = kThreads / 32;
constexpr int kMaxChildren = 256;  // top_k · page_size

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

struct Params {
  bool exact;
  long long page_cap, head_stride, token_stride, acc_stride;
  int pages, page_size, group, head_dim, tokens, paged_end, splits, top_k;
  float scale, page_decay, add_scale;
};

// Kernel B is launched as a programmatic dependent of kernel A (sm_90: cudaLaunchKernelEx with
// programmatic stream serialization), so its blocks are scheduled while A's last blocks drain; each
// block waits here until A's grid has completed and its writes are visible. Launched without the
// attribute, or on an older GPU, the wait returns at once (stream order already holds).
__device__ __forceinline__ void wait_for_kernel_a() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Block h: one query head. Shared: the merged max and sum of A's states, the children's logits,
// and the scalars of the finalize (computed by thread 0: at most kMaxChildren terms).
template <class T>
__global__ void __launch_bounds__(kThreads)
    clustered_b_kernel(Params pr, const T* __restrict__ q, const T* __restrict__ sum_v, const T* __restrict__ k,
                       const T* __restrict__ v, const float* __restrict__ states, const float* __restrict__ logits,
                       const std::int32_t* __restrict__ picks, T* __restrict__ out, float* page_h2o, float* page_imp,
                       float* token_h2o, float* token_imp) {
  __shared__ float child[kMaxChildren];
  __shared__ float sM, sZ, sMx, sZx;  // A's max and sum; the finalize's (exact: over the new cover)
  wait_for_kernel_a();
  const int h = blockIdx.x, g = h / pr.group, D = pr.head_dim, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int P = pr.pages, L = pr.page_size, N = P + pr.tokens - pr.paged_end;
  const float* st = states + static_cast<long long>(h) * pr.splits * (D + 2);
  const float* lg = logits + static_cast<long long>(h) * N;
  const T* kg = k + g * pr.head_stride;
  const T* vg = v + g * pr.head_stride;
  const std::int32_t* pk = picks + h * pr.top_k;
  if (threadIdx.x == 0) {
    float M = -FLT_MAX, Z = 0.0f;
    for (int s = 0; s < pr.splits; ++s) M = fmaxf(M, st[s * (D + 2)]);
    for (int s = 0; s < pr.splits; ++s) Z += st[s * (D + 2) + 1] * expf(st[s * (D + 2)] - M);
    sM = M;
    sZ = Z;
  }
  // Children logits: warp per child token.
  for (int c = warp; c < pr.top_k * L; c += kWarpsB) {
    const int p = pk[c / L];
    float dot = 0.0f;
    if (p >= 0) {
      const T* kr = kg + static_cast<long long>(p * L + c % L) * pr.token_stride;
      for (int d = lane; d < D; d += 32) dot += to_f(q[h * D + d]) * to_f(kr[d]);
    }
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    if (lane == 0) child[c] = dot * pr.scale;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float Mx = sM, Zx = sZ;
    if (pr.exact) {  // one softmax over unrefined summaries, children and the tail
      for (int i = 0; i < pr.top_k; ++i)
        if (pk[i] >= 0)
          for (int c = 0; c < L; ++c) Mx = fmaxf(Mx, child[i * L + c]);
      Zx = sZ * expf(sM - Mx);
      for (int i = 0; i < pr.top_k; ++i) {
        if (pk[i] < 0) continue;
        Zx -= expf(lg[pk[i]] - Mx);
        for (int c = 0; c < L; ++c) Zx += expf(child[i * L + c] - Mx);
      }
    } else {  // mass-preserving: each child's local softmax, kept in child[] as its weight within the page
      for (int i = 0; i < pr.top_k; ++i) {
        if (pk[i] < 0) continue;
        float m = -FLT_MAX, z = 0.0f;
        for (int c = 0; c < L; ++c) m = fmaxf(m, child[i * L + c]);
        for (int c = 0; c < L; ++c) z += expf(child[i * L + c] - m);
        for (int c = 0; c < L; ++c) child[i * L + c] = expf(child[i * L + c] - m) / z;
      }
    }
    sMx = Mx;
    sZx = Zx;
  }
  __syncthreads();
  const float M = sM, invZ = 1.0f / sZ, Mx = sMx, invZx = 1.0f / sZx;
  // A child's weight: exact e^(c − Mx)/Zx; mass α_p · local.
  const auto child_w = [&](int i, int c) {
    return pr.exact ? expf(child[i * L + c] - Mx) * invZx : expf(lg[pk[i]] - M) * invZ * child[i * L + c];
  };
  for (int d = threadIdx.x; d < D; d += kThreads) {
    float A = 0.0f;
    for (int s = 0; s < pr.splits; ++s) A += st[s * (D + 2) + 2 + d] * expf(st[s * (D + 2)] - M);
    // A's sum over every page and the tail, less the refined pages' summaries, plus their children.
    const float ref = pr.exact ? Mx : M;
    float o = pr.exact ? A * expf(M - Mx) : A;
    for (int i = 0; i < pr.top_k; ++i)
      if (pk[i] >= 0) o -= expf(lg[pk[i]] - ref) * to_f(sum_v[(g * pr.page_cap + pk[i]) * D + d]);
    o *= pr.exact ? invZx : invZ;
    for (int i = 0; i < pr.top_k; ++i)
      if (pk[i] >= 0)
        for (int c = 0; c < L; ++c)
          o += child_w(i, c) * to_f(vg[static_cast<long long>(pk[i] * L + c) * pr.token_stride + d]);
    out[h * D + d] = from_f<T>(o);
  }
  if (!page_h2o) return;
  const float inv_g = 1.0f / static_cast<float>(pr.group);
  const auto weight = [&](int e) { return pr.exact ? expf(lg[e] - Mx) * invZx : expf(lg[e] - M) * invZ; };
  for (int p = threadIdx.x; p < P; p += kThreads) {
    bool refined = false;
    for (int i = 0; i < pr.top_k; ++i) refined = refined || pk[i] == p;
    const float w = refined ? 0.0f : weight(p);
    float& a = page_h2o[h * pr.page_cap + p];
    a = (pr.page_decay == 1.0f ? a : a * pr.page_decay) + w;
    atomicAdd(&page_imp[g * pr.page_cap + p], w * inv_g);
  }
  for (int e = P + threadIdx.x; e < N; e += kThreads) {  // the raw tail
    const int t = pr.paged_end + e - P;
    const float w = weight(e);
    token_h2o[h * pr.acc_stride + t] += pr.add_scale == 1.0f ? w : w * pr.add_scale;
    atomicAdd(&token_imp[g * pr.acc_stride + t], w * inv_g);
  }
  for (int c = threadIdx.x; c < pr.top_k * L; c += kThreads) {  // the children
    const int i = c / L;
    if (pk[i] < 0) continue;
    const int t = pk[i] * L + c % L;
    const float w = child_w(i, c % L);
    token_h2o[h * pr.acc_stride + t] += pr.add_scale == 1.0f ? w : w * pr.add_scale;
    atomicAdd(&token_imp[g * pr.acc_stride + t], w * inv_g);
  }
}

// One block per query head; with a.overlap, as a programmatic dependent of the kernel before it on
// the stream (kernel A).
template <class T>
cudaError_t launch_b(const ClusteredBArgs& a, const Params& pr, cudaStream_t stream) {
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = a.overlap ? 1 : 0;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(a.heads));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, clustered_b_kernel<T>, pr, static_cast<const T*>(a.q),
                            static_cast<const T*>(a.sum_v), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
                            a.states, a.logits, a.picks, static_cast<T*>(a.out), a.page_h2o, a.page_imp, a.token_h2o,
                            a.token_imp);
}

}  // namespace

std::string clustered_b(const ClusteredBArgs& a, void* stream) {
  if (a.heads <= 0 || a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    return "clustered_b: heads must be a multiple of kv_heads";
  if (a.top_k < 0 || a.top_k * a.page_size > kMaxChildren) return "clustered_b: top_k · page_size above 256";
  if (a.head_dim <= 0 || a.head_dim > 256 || a.splits <= 0) return "clustered_b: head_dim or splits";
  if (a.pages * a.page_size != a.paged_end) return "clustered_b: pages of page_size must cover [0, paged_end)";
  if (!a.q || !a.k || !a.v || !a.states || !a.logits || !a.out || (a.top_k > 0 && !a.picks) ||
      (a.pages > 0 && !a.sum_v))
    return "clustered_b: a null pointer among the arrays the call needs";
  if (a.page_h2o && (!a.page_imp || !a.token_h2o || !a.token_imp || a.acc_stride < a.tokens))
    return "clustered_b: accumulators need all four arrays and acc_stride >= tokens";
  const Params pr{a.exact,
                  a.page_cap,
                  a.head_stride,
                  a.token_stride,
                  a.acc_stride,
                  static_cast<int>(a.pages),
                  static_cast<int>(a.page_size),
                  static_cast<int>(a.heads / a.kv_heads),
                  static_cast<int>(a.head_dim),
                  static_cast<int>(a.tokens),
                  static_cast<int>(a.paged_end),
                  a.splits,
                  a.top_k,
                  a.scale,
                  a.page_decay,
                  a.add_scale};
  const auto s = static_cast<cudaStream_t>(stream);
  const cudaError_t launched = a.bf16 ? launch_b<__nv_bfloat16>(a, pr, s) : launch_b<__half>(a, pr, s);
  if (launched != cudaSuccess) return std::string("clustered_b: ") + cudaGetErrorString(launched);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("clustered_b: ") + cudaGetErrorString(e);
}

}  // namespace luka::cuda::v2
