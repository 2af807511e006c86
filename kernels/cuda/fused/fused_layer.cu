#include "kernels/cuda/fused/fused_layer.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/fused_ops.h"
#include "kernels/cuda/common.cuh"

namespace luka::cuda::fused {

namespace {

using luka::fused::ElemDtype;
using luka::fused::RoundBF16;
using luka::fused::RoundF32;
using detail::warp_sum;

constexpr int kNormThreads = 256;  // kernels/cpu/fused_layer.h's kNormThreads: the twin sums as these do

// Element access by the dtype's storage: float, or bf16 as its bits (rounded values only).
struct F32 {
  using T = float;
  using Round = RoundF32;
  __device__ static float load(const float* p, long long i) { return p[i]; }
  __device__ static void store(float* p, long long i, float v) { p[i] = v; }
};
struct BF16 {
  using T = __nv_bfloat16;
  using Round = RoundBF16;
  __device__ static float load(const __nv_bfloat16* p, long long i) { return __bfloat162float(p[i]); }
  __device__ static void store(__nv_bfloat16* p, long long i, float v) { p[i] = __float2bfloat16_rn(v); }
};

// The block's sum of each thread's `v`, in the twin's order: a butterfly per warp, then one over
// the warps' sums (zero past the last warp). `sh` holds 32 floats; every thread gets the sum.
__device__ float block_sum(float v, float* sh) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  v = warp_sum(v);
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < warps ? sh[lane] : 0.0f;
    s = warp_sum(s);
    if (lane == 0) sh[32] = s;
  }
  __syncthreads();
  return sh[32];
}

// One block per row: the residual add (written back), the sum of squares, the norm.
template <class E>
__global__ void __launch_bounds__(kNormThreads) residual_rms_norm_kernel(typename E::T* __restrict__ x,
                                                                         const typename E::T* __restrict__ add,
                                                                         const typename E::T* __restrict__ weight,
                                                                         typename E::T* __restrict__ out, long long n,
                                                                         float eps) {
  __shared__ float sh[33];
  const typename E::Round round;
  const long long base = static_cast<long long>(blockIdx.x) * n;
  float ss = 0.0f;
  for (long long i = threadIdx.x; i < n; i += blockDim.x) {
    float v = E::load(x, base + i);
    if (add) {
      v = luka::fused::residual_add(v, E::load(add, base + i), round);
      E::store(x, base + i, v);
    }
    ss += v * v;
  }
  const float inv = luka::fused::rms_inverse(block_sum(ss, sh), n, eps);
  for (long long i = threadIdx.x; i < n; i += blockDim.x)
    E::store(out, base + i, luka::fused::rms_apply(E::load(x, base + i), inv, E::load(weight, i), round));
}

template <class Round>
__global__ void rope_tables_kernel(const std::int64_t* __restrict__ position, const float* __restrict__ inv_freq,
                                   float* __restrict__ cos, float* __restrict__ sin, long long half) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < half) luka::fused::rope_table_entry(*position, inv_freq[i], cos[i], sin[i], Round{});
}

// One block per head of the q|k|v row, one thread per pair (i, i + D/2).
template <class E>
__global__ void __launch_bounds__(luka::fused::kMaxQkvHeadDim / 2) qkv_norm_rope_kernel(
    const typename E::T* qkv, typename E::T* q_out, const typename E::T* __restrict__ q_norm,
    const typename E::T* __restrict__ k_norm, float eps, const float* __restrict__ cos, const float* __restrict__ sin,
    const std::int64_t* __restrict__ position, typename E::T* __restrict__ k_cache, typename E::T* __restrict__ v_cache,
    long long head_stride, long long token_stride, long long capacity, long long heads, long long kv_heads,
    long long D) {
  __shared__ float sh[33];
  const typename E::Round round;
  const long long h = blockIdx.x, half = D / 2, i = threadIdx.x, in = h * D;
  const long long pos = *position;
  const bool append = pos >= 0 && pos < capacity, pair = i < half;
  const luka::fused::QkvRole role = luka::fused::qkv_role(h, heads, kv_heads);
  if (role == luka::fused::QkvRole::kValue) {  // uniform per block: no barrier is skipped by part of it
    if (!append || !pair) return;
    const long long at = luka::fused::cache_offset(h - heads - kv_heads, pos, i, head_stride, token_stride);
    v_cache[at] = qkv[in + i];
    v_cache[at + half] = qkv[in + half + i];
    return;
  }
  const float x_lo = pair ? E::load(qkv, in + i) : 0.0f, x_hi = pair ? E::load(qkv, in + half + i) : 0.0f;
  const bool norm = q_norm != nullptr;
  float inv = 0.0f;
  if (norm) inv = luka::fused::rms_inverse(block_sum(x_lo * x_lo + x_hi * x_hi, sh), D, eps);
  if (!pair) return;
  const typename E::T* w = role == luka::fused::QkvRole::kQuery ? q_norm : k_norm;
  float lo, hi;
  luka::fused::norm_rope_pair(x_lo, x_hi, norm, inv, norm ? E::load(w, i) : 0.0f, norm ? E::load(w, half + i) : 0.0f,
                              cos[i], sin[i], lo, hi, round);
  if (role == luka::fused::QkvRole::kQuery) {
    // Every thread of the block read its pair before the barrier in block_sum; without a norm
    // there is no barrier, but each thread writes only the pair it read.
    E::store(q_out, in + i, lo);
    E::store(q_out, in + half + i, hi);
  } else if (append) {
    const long long at = luka::fused::cache_offset(h - heads, pos, i, head_stride, token_stride);
    E::store(k_cache, at, lo);
    E::store(k_cache, at + half, hi);
  }
}

template <class E>
__global__ void swiglu_kernel(const typename E::T* __restrict__ gate_up, typename E::T* __restrict__ out,
                              long long intermediate) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < intermediate)
    E::store(out, i, luka::fused::swiglu(E::load(gate_up, i), E::load(gate_up, intermediate + i), typename E::Round{}));
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

unsigned blocks_for(long long n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

std::string launched(const char* what) {
  const std::string err = detail::launch_error();
  return err.empty() ? err : std::string(what) + ": " + err;
}

template <class E>
std::string norm_as(const luka::fused::NormArgs& a, cudaStream_t s) {
  using T = typename E::T;
  residual_rms_norm_kernel<E><<<static_cast<unsigned>(a.rows), kNormThreads, 0, s>>>(
      static_cast<T*>(a.x), static_cast<const T*>(a.add), static_cast<const T*>(a.weight), static_cast<T*>(a.out), a.n,
      a.eps);
  return launched("residual_rms_norm");
}

template <class E>
std::string qkv_as(const luka::fused::QkvArgs& a, cudaStream_t s) {
  using T = typename E::T;
  const int threads = static_cast<int>((a.head_dim / 2 + 31) / 32 * 32);
  qkv_norm_rope_kernel<E><<<static_cast<unsigned>(a.heads + 2 * a.kv_heads), threads, 0, s>>>(
      static_cast<const T*>(a.qkv), static_cast<T*>(a.q_out), static_cast<const T*>(a.q_norm),
      static_cast<const T*>(a.k_norm), a.eps, a.cos, a.sin, a.position, static_cast<T*>(a.k_cache),
      static_cast<T*>(a.v_cache), a.head_stride, a.token_stride, a.capacity, a.heads, a.kv_heads, a.head_dim);
  return launched("qkv_norm_rope");
}

}  // namespace

std::string residual_rms_norm(const luka::fused::NormArgs& args, void* stream) {
  if (std::string why = luka::fused::check(args); !why.empty()) return why;
  return args.dtype == ElemDtype::kF32 ? norm_as<F32>(args, as_stream(stream)) : norm_as<BF16>(args, as_stream(stream));
}

std::string rope_tables(const luka::fused::RopeTableArgs& args, void* stream) {
  if (std::string why = luka::fused::check(args); !why.empty()) return why;
  constexpr int threads = 128;
  if (args.dtype == ElemDtype::kF32)
    rope_tables_kernel<RoundF32><<<blocks_for(args.half, threads), threads, 0, as_stream(stream)>>>(
        args.position, args.inv_freq, args.cos, args.sin, args.half);
  else
    rope_tables_kernel<RoundBF16><<<blocks_for(args.half, threads), threads, 0, as_stream(stream)>>>(
        args.position, args.inv_freq, args.cos, args.sin, args.half);
  return launched("rope_tables");
}

std::string qkv_norm_rope(const luka::fused::QkvArgs& args, void* stream) {
  if (std::string why = luka::fused::check(args); !why.empty()) return why;
  return args.dtype == ElemDtype::kF32 ? qkv_as<F32>(args, as_stream(stream)) : qkv_as<BF16>(args, as_stream(stream));
}

std::string swiglu(const luka::fused::SwigluArgs& args, void* stream) {
  if (std::string why = luka::fused::check(args); !why.empty()) return why;
  constexpr int threads = 256;
  using F = F32::T;
  using B = BF16::T;
  if (args.dtype == ElemDtype::kF32)
    swiglu_kernel<F32><<<blocks_for(args.intermediate, threads), threads, 0, as_stream(stream)>>>(
        static_cast<const F*>(args.gate_up), static_cast<F*>(args.out), args.intermediate);
  else
    swiglu_kernel<BF16><<<blocks_for(args.intermediate, threads), threads, 0, as_stream(stream)>>>(
        static_cast<const B*>(args.gate_up), static_cast<B*>(args.out), args.intermediate);
  return launched("swiglu");
}

}  // namespace luka::cuda::fused
