// Dense split-K decode attention on the GPU against the direct formula in fp64 on the same
// (rounded) inputs. Runs only where a CUDA device is present; elsewhere each test skips.
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/decode_attention.h"
#include "kernels/cuda/device.h"

namespace {

using luka::cuda::ElemType;

struct Case {
  ElemType type;
  int heads, kv_heads, dim, tokens, capacity, splits;
};

// Host values rounded to the element type, and their bytes.
std::vector<float> rounded(const std::vector<float>& x, ElemType t, std::vector<unsigned char>& bytes) {
  std::vector<float> r(x.size());
  const std::size_t size = t == ElemType::kF32 ? 4 : 2;
  bytes.resize(x.size() * size);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (t == ElemType::kF32) {
      r[i] = x[i];
      std::memcpy(&bytes[i * 4], &x[i], 4);
    } else if (t == ElemType::kF16) {
      const __half h = __float2half_rn(x[i]);
      r[i] = __half2float(h);
      std::memcpy(&bytes[i * 2], &h, 2);
    } else {
      const __nv_bfloat16 b = __float2bfloat16_rn(x[i]);
      r[i] = __bfloat162float(b);
      std::memcpy(&bytes[i * 2], &b, 2);
    }
  }
  return r;
}

float to_float(const unsigned char* p, ElemType t) {
  if (t == ElemType::kF32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (t == ElemType::kF16) {
    __half h;
    std::memcpy(&h, p, 2);
    return __half2float(h);
  }
  __nv_bfloat16 b;
  std::memcpy(&b, p, 2);
  return __bfloat162float(b);
}

void run_case(const Case& c) {
  std::mt19937 rng(c.heads * 131 + c.tokens);
  std::normal_distribution<float> normal(0.f, 1.f);
  const std::int64_t D = c.dim, T = c.tokens, cap = c.capacity;
  std::vector<float> q(c.heads * D), k(c.kv_heads * cap * D), v(c.kv_heads * cap * D);
  for (float& x : q) x = normal(rng);
  for (float& x : k) x = normal(rng);
  for (float& x : v) x = normal(rng);
  std::vector<unsigned char> qb, kb, vb;
  const auto qr = rounded(q, c.type, qb), kr = rounded(k, c.type, kb), vr = rounded(v, c.type, vb);
  const std::size_t es = c.type == ElemType::kF32 ? 4 : 2;
  void *dq, *dk, *dv, *dout;
  float* ws;
  const std::int64_t wsn = luka::cuda::decode_attention_workspace_floats(c.heads, c.kv_heads, D, T, c.splits);
  ASSERT_EQ(cudaMalloc(&dq, qb.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dk, kb.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dv, vb.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dout, c.heads * D * es), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ws, wsn * sizeof(float)), cudaSuccess);
  cudaMemcpy(dq, qb.data(), qb.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dk, kb.data(), kb.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dv, vb.data(), vb.size(), cudaMemcpyHostToDevice);
  luka::cuda::DecodeAttentionArgs a;
  a.type = c.type;
  a.q = dq;
  a.k = dk;
  a.v = dv;
  a.out = dout;
  a.heads = c.heads;
  a.kv_heads = c.kv_heads;
  a.tokens = T;
  a.head_dim = D;
  a.head_stride = cap * D;  // the cache holds `capacity` tokens per head, `tokens` of them used
  a.token_stride = D;
  a.scale = 1.f / std::sqrt(static_cast<float>(D));
  a.splits = c.splits;
  a.workspace = ws;
  ASSERT_EQ(luka::cuda::dense_decode_attention(a, nullptr), "");
  std::vector<unsigned char> out(c.heads * D * es);
  ASSERT_EQ(cudaMemcpy(out.data(), dout, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (void* p : {dq, dk, dv, dout}) cudaFree(p);
  cudaFree(ws);

  const int G = c.heads / c.kv_heads;
  const double tol = c.type == ElemType::kF32 ? 2e-5 : c.type == ElemType::kF16 ? 2e-3 : 1.5e-2;
  for (int h = 0; h < c.heads; ++h) {
    const int g = h / G;
    std::vector<double> s(T);
    double mx = -1e300;
    for (std::int64_t t = 0; t < T; ++t) {
      double dot = 0;
      for (std::int64_t d = 0; d < D; ++d) dot += static_cast<double>(qr[h * D + d]) * kr[(g * cap + t) * D + d];
      s[t] = dot * a.scale;
      mx = std::max(mx, s[t]);
    }
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (std::int64_t d = 0; d < D; ++d) {
      double want = 0;
      for (std::int64_t t = 0; t < T; ++t) want += s[t] / sum * vr[(g * cap + t) * D + d];
      const float got = to_float(out.data() + (h * D + d) * es, c.type);
      ASSERT_NEAR(got, want, tol * (1 + std::fabs(want))) << "head " << h << " dim " << d << " T " << T;
    }
  }
}

TEST(CudaDecodeAttention, MatchesTheDirectFormula) {
  if (luka::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  for (const ElemType t : {ElemType::kF32, ElemType::kF16, ElemType::kBF16}) {
    run_case({t, 16, 8, 128, 1000, 1100, 0});  // Qwen3-0.6B shape, GQA 2, length not a multiple of the split
    run_case({t, 8, 2, 64, 4097, 4200, 7});    // GQA 4, head_dim 64, odd split count
    run_case({t, 4, 4, 128, 3, 16, 8});        // more splits than tokens: some splits are empty
    run_case({t, 9, 3, 64, 777, 800, 0});      // SmolLM2's heads
  }
}

TEST(CudaDecodeAttention, RejectsBadSizesWithoutADevice) {
  luka::cuda::DecodeAttentionArgs a;
  EXPECT_EQ(luka::cuda::dense_decode_attention(a, nullptr), "empty sizes");
  a.heads = 6;
  a.kv_heads = 4;
  a.tokens = 10;
  a.head_dim = 128;
  EXPECT_EQ(luka::cuda::dense_decode_attention(a, nullptr), "heads must be a multiple of kv_heads");
  a.heads = 36;
  EXPECT_EQ(luka::cuda::dense_decode_attention(a, nullptr), "more than 8 query heads per KV head");
  a.heads = 8;
  EXPECT_EQ(luka::cuda::dense_decode_attention(a, nullptr), "a null pointer");
  // Automatic splits: one per 256 tokens at least, more (each ≥ 32 tokens) towards 264 blocks of
  // (KV head, split), at most 64; a requested count is used as given, up to the tokens.
  const auto floats = [](std::int64_t kv_heads, std::int64_t tokens, int splits) {
    return luka::cuda::decode_attention_workspace_floats(16, kv_heads, 128, tokens, splits);
  };
  EXPECT_EQ(floats(8, 1000, 0), 16 * 32 * 130);    // 264 / 8 → 33 blocks' worth, 1000 / 32 → 32
  EXPECT_EQ(floats(8, 40, 0), 16 * 2 * 130);       // ≥ 32 tokens each
  EXPECT_EQ(floats(1, 1000, 0), 16 * 32 * 130);    // 32 tokens each caps it
  EXPECT_EQ(floats(8, 100000, 0), 16 * 64 * 130);  // 391 by length, capped at 64
  EXPECT_EQ(floats(8, 1000, 5), 16 * 5 * 130);
  EXPECT_EQ(floats(8, 3, 5), 16 * 3 * 130);
}

}  // namespace
