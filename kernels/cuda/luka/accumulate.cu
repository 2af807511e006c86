// The accumulator update every LuKA step on the GPU ends with (importance and h2o_score from the
// effective attention, as core/luka/cpu/state.cpp's accumulate does), and the argument check every
// entry point of luka_decode.h starts with.
#include "kernels/cuda/luka_decode.h"

#include "kernels/cuda/luka/step.cuh"

namespace luka::cuda {
namespace {

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

}  // namespace

namespace detail {

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

void launch_accumulate(const DecodeCommon& c, const float* logits, const float* norm, cudaStream_t stream) {
  const int group = static_cast<int>(c.heads / c.kv.kv_heads);
  dim3 grid(static_cast<unsigned>(c.kv.kv_heads), static_cast<unsigned>((c.kv.tokens + kChunk - 1) / kChunk));
  softmax_accumulate_kernel<<<grid, kChunk, 0, stream>>>(logits, norm, c.effective, c.acc.importance, c.acc.h2o, c.acc.ld,
                                                         c.acc.decay, group, c.kv.tokens);
}

}  // namespace detail
}  // namespace luka::cuda
