// Page compression on the GPU (pairs with core/luka/cpu/pages.cpp's add_page): each page's summary
// key and value by the compressor's weights, its bias and its spread.
#include "kernels/cuda/luka_decode.h"

#include "kernels/cuda/luka/step.cuh"

namespace luka::cuda {
namespace {

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

}  // namespace

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
