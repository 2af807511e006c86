// The v2 kernels (kernels/cuda/luka) on the GPU against the CPU: dense v2's output, logits and
// accumulator update against the direct formula in double on the same bf16/fp16 inputs (every
// group size, head dims 64 and 128, short and long contexts, padded rows); the device heavy set
// against the host one (kernels/common/heavy_set.h) step by step over a lined score stream.
// Skips without a CUDA device (scripts/gpu_run.sh runs it on a GPU machine).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <numeric>
#include <string>
#include <random>
#include <vector>

#include "kernels/common/half.h"
#include "kernels/common/heavy_set.h"
#include "kernels/common/luka_rules.h"
#include "kernels/cuda/luka/clustered_a.h"
#include "kernels/cuda/luka/clustered_b.h"
#include "kernels/cuda/luka/dense_v2.h"
#include "kernels/cuda/luka/heavy_set.h"

namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::uint16_t to_bf16(float x) {  // round to nearest even
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<std::uint16_t>(b >> 16);
}
float from_bf16(std::uint16_t h) {
  const std::uint32_t b = static_cast<std::uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

template <class T>
T* upload(const std::vector<T>& host) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, std::max<std::size_t>(1, host.size()) * sizeof(T)), cudaSuccess);
  if (!host.empty())
    EXPECT_EQ(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}
template <class T>
std::vector<T> download(const T* d, std::size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

struct DenseCase {
  bool bf16;
  std::int64_t D, G, T, pad;
};

void check_dense(const DenseCase& c) {
  const std::int64_t KV = 2, H = KV * c.G, D = c.D, T = c.T, row = D + c.pad;
  std::mt19937 rng(static_cast<std::uint32_t>(D * 131 + c.G * 17 + T));
  std::normal_distribution<float> n01(0.0f, 1.0f);
  const auto enc = [&](float x) { return c.bf16 ? to_bf16(x) : luka::float_to_half(x); };
  const auto dec = [&](std::uint16_t h) { return c.bf16 ? from_bf16(h) : luka::half_to_float(h); };
  std::vector<std::uint16_t> q(H * D), k(KV * T * row), v(KV * T * row);
  for (auto& x : q) x = enc(n01(rng));
  for (auto& x : k) x = enc(n01(rng));
  for (auto& x : v) x = enc(n01(rng));
  std::vector<float> h2o0(H * T), imp0(KV * T);
  for (auto& x : h2o0) x = std::fabs(n01(rng));
  for (auto& x : imp0) x = std::fabs(n01(rng));
  const float scale = 1.0f / std::sqrt(static_cast<float>(D)), add_scale = 1.25f;

  luka::cuda::v2::DenseArgs a;
  a.bf16 = c.bf16;
  a.heads = H;
  a.kv_heads = KV;
  a.tokens = T;
  a.head_dim = D;
  a.head_stride = T * row;
  a.token_stride = row;
  a.scale = scale;
  std::uint16_t *dq = upload(q), *dk = upload(k), *dv = upload(v), *dout = upload(std::vector<std::uint16_t>(H * D));
  float* ws = upload(std::vector<float>(luka::cuda::v2::dense_v2_workspace_floats(H, KV, D, T, 0)));
  float *dlog = upload(std::vector<float>(H * T)), *dh2o = upload(h2o0), *dimp = upload(imp0);
  a.q = dq;
  a.k = dk;
  a.v = dv;
  a.out = dout;
  a.workspace = ws;
  a.logits = dlog;
  a.h2o = dh2o;
  a.importance = dimp;
  a.acc_stride = T;
  a.add_scale = add_scale;
  ASSERT_EQ(luka::cuda::v2::dense_v2(a, nullptr), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto out = download(dout, H * D);
  const auto logits = download(dlog, H * T), h2o = download(dh2o, H * T), imp = download(dimp, KV * T);
  for (auto* p : {static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dout),
                  static_cast<void*>(ws), static_cast<void*>(dlog), static_cast<void*>(dh2o), static_cast<void*>(dimp)})
    cudaFree(p);

  // The direct formula in double on the rounded inputs.
  std::vector<double> p(H * T);
  for (std::int64_t h = 0; h < H; ++h) {
    const std::int64_t g = h / c.G;
    double mx = -1e300;
    for (std::int64_t t = 0; t < T; ++t) {
      double s = 0;
      for (std::int64_t d = 0; d < D; ++d)
        s += static_cast<double>(dec(q[h * D + d])) * scale * dec(k[g * T * row + t * row + d]);
      p[h * T + t] = s;
      ASSERT_NEAR(logits[h * T + t], s, 1e-4 * (1 + std::fabs(s))) << "logit h " << h << " t " << t;
      mx = std::max(mx, s);
    }
    double z = 0;
    for (std::int64_t t = 0; t < T; ++t) z += p[h * T + t] = std::exp(p[h * T + t] - mx);
    for (std::int64_t t = 0; t < T; ++t) p[h * T + t] /= z;
    for (std::int64_t d = 0; d < D; ++d) {
      double o = 0;
      for (std::int64_t t = 0; t < T; ++t) o += p[h * T + t] * dec(v[g * T * row + t * row + d]);
      // One rounding of the output to the element type: 2^-8 (bf16) or 2^-11 (fp16) relative.
      ASSERT_NEAR(dec(out[h * D + d]), o, (c.bf16 ? 8e-3 : 1e-3) * std::max(1.0, std::fabs(o)))
          << "out h " << h << " d " << d;
    }
    for (std::int64_t t = 0; t < T; ++t)
      ASSERT_NEAR(h2o[h * T + t], h2o0[h * T + t] + add_scale * p[h * T + t], 2e-6 * (1 + h2o0[h * T + t]))
          << "h2o h " << h;
  }
  for (std::int64_t g = 0; g < KV; ++g)
    for (std::int64_t t = 0; t < T; ++t) {
      double m = 0;
      for (std::int64_t j = 0; j < c.G; ++j) m += p[(g * c.G + j) * T + t];
      ASSERT_NEAR(imp[g * T + t], imp0[g * T + t] + m / c.G, 2e-6 * (1 + imp0[g * T + t]))
          << "importance g " << g << " t " << t;
    }
}

TEST(DenseV2Cuda, MatchesTheDirectFormulaForEveryGroupAndHeadDim) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device on this machine";
  // LUKA_V2_SHORT=1 (scripts/gpu_run.sh v2 under racecheck, which runs far slower): contexts up to
  // 1000 tokens, still several tiles and splits.
  const char* short_env = std::getenv("LUKA_V2_SHORT");
  const bool short_run = short_env && std::string(short_env) == "1";
  for (bool bf16 : {true, false})
    for (std::int64_t D : {64, 128})
      for (std::int64_t G : {1, 2, 4, 8})
        for (std::int64_t T : {1, 15, 1000, 5003}) {
          if (short_run && T > 1000) continue;
          SCOPED_TRACE(::testing::Message() << (bf16 ? "bf16" : "fp16") << " D " << D << " G " << G << " T " << T);
          check_dense({bf16, D, G, T, T == 1000 ? 8 : 0});
          if (HasFatalFailure()) return;
        }
}

TEST(DenseV2Cuda, RefusesWhatItDoesNotCover) {
  luka::cuda::v2::DenseArgs a;
  a.heads = 6;
  a.kv_heads = 2;  // three heads per KV head
  a.head_dim = 128;
  a.tokens = 16;
  EXPECT_NE(luka::cuda::v2::dense_v2(a, nullptr).find("query heads per KV head"), std::string::npos);
  a.heads = 4;
  a.head_dim = 96;
  EXPECT_NE(luka::cuda::v2::dense_v2(a, nullptr).find("head_dim"), std::string::npos);
}

struct ClusteredCase {
  bool bf16, exact, bias;
  std::int64_t D, G, P, R;
  bool overlap = true;  // kernel B as a programmatic dependent of A
};

// Kernels A and B against the clustered step in double: logits (summaries with their bias, the raw
// tail), each head's top 3 pages by logit, the output and every weight under the case's math, and
// the page-level accumulators (page values decayed and added, tail and children per token).
void check_clustered(const ClusteredCase& c) {
  const std::int64_t KV = 2, H = KV * c.G, D = c.D, L = 16, P = c.P, E = P * L, T = E + c.R, N = P + c.R, K3 = 3;
  std::mt19937 rng(static_cast<std::uint32_t>(D + 7 * c.G + 31 * P + c.R + (c.exact ? 1000 : 0)));
  std::normal_distribution<float> n01(0.0f, 1.0f);
  const auto enc = [&](float x) { return c.bf16 ? to_bf16(x) : luka::float_to_half(x); };
  const auto dec = [&](std::uint16_t h) { return c.bf16 ? from_bf16(h) : luka::half_to_float(h); };
  std::vector<std::uint16_t> q(H * D), k(KV * T * D), v(KV * T * D), sk(KV * P * D), sv(KV * P * D);
  for (auto* a : {&q, &k, &v, &sk, &sv})
    for (auto& x : *a) x = enc(n01(rng));
  std::vector<float> bias(KV * P), ph0(H * P), pi0(KV * P), th0(H * T), ti0(KV * T);
  for (auto& x : bias) x = 0.5f * n01(rng);
  for (auto* a : {&ph0, &pi0, &th0, &ti0})
    for (auto& x : *a) x = std::fabs(n01(rng));
  const float scale = 1.0f / std::sqrt(static_cast<float>(D)), decay = 0.9f, add_scale = 1.1f;
  const int splits = static_cast<int>(luka::cuda::v2::clustered_a_splits(KV, N, 0));
  std::uint16_t *dq = upload(q), *dk = upload(k), *dv = upload(v), *dsk = upload(sk), *dsv = upload(sv);
  std::uint16_t* dout = upload(std::vector<std::uint16_t>(H * D));
  float *dbias = upload(bias), *dst = upload(std::vector<float>(H * splits * (D + 2))),
        *dlg = upload(std::vector<float>(H * N));
  float *dph = upload(ph0), *dpi = upload(pi0), *dth = upload(th0), *dti = upload(ti0);
  std::int32_t* dpk = upload(std::vector<std::int32_t>(H * K3, -2));
  unsigned int* dctr = upload(std::vector<unsigned int>(1, 0u));
  luka::cuda::v2::ClusteredAArgs a;
  a.bf16 = c.bf16;
  a.q = dq;
  a.sum_k = dsk;
  a.sum_v = dsv;
  a.bias = c.bias ? dbias : nullptr;
  a.page_cap = P;
  a.pages = P;
  a.k = dk;
  a.v = dv;
  a.head_stride = T * D;
  a.token_stride = D;
  a.heads = H;
  a.kv_heads = KV;
  a.head_dim = D;
  a.tokens = T;
  a.paged_end = E;
  a.scale = scale;
  a.top_k = K3;
  a.states = dst;
  a.logits = dlg;
  a.picks = dpk;
  a.counter = dctr;
  ASSERT_EQ(luka::cuda::v2::clustered_a(a, nullptr), "");
  luka::cuda::v2::ClusteredBArgs b;
  b.bf16 = c.bf16;
  b.exact = c.exact;
  b.q = dq;
  b.sum_v = dsv;
  b.page_cap = P;
  b.pages = P;
  b.page_size = L;
  b.k = dk;
  b.v = dv;
  b.head_stride = T * D;
  b.token_stride = D;
  b.heads = H;
  b.kv_heads = KV;
  b.head_dim = D;
  b.tokens = T;
  b.paged_end = E;
  b.scale = scale;
  b.splits = splits;
  b.top_k = K3;
  b.states = dst;
  b.logits = dlg;
  b.picks = dpk;
  b.out = dout;
  b.page_h2o = dph;
  b.page_imp = dpi;
  b.token_h2o = dth;
  b.token_imp = dti;
  b.acc_stride = T;
  b.page_decay = decay;
  b.add_scale = add_scale;
  b.overlap = c.overlap;
  ASSERT_EQ(luka::cuda::v2::clustered_b(b, nullptr), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto out = download(dout, H * D);
  const auto lg = download(dlg, H * N), ph = download(dph, H * P), pi = download(dpi, KV * P),
             th = download(dth, H * T), ti = download(dti, KV * T);
  const auto pk = download(dpk, H * K3);
  const auto ctr = download(dctr, 1);
  for (void* p :
       std::initializer_list<void*>{dq, dk, dv, dsk, dsv, dout, dbias, dst, dlg, dph, dpi, dth, dti, dpk, dctr})
    cudaFree(p);
  EXPECT_EQ(ctr[0], 0u) << "the last block resets the counter";

  std::vector<double> eph(ph0.begin(), ph0.end()), epi(pi0.begin(), pi0.end()), eth(th0.begin(), th0.end()),
      eti(ti0.begin(), ti0.end());
  for (auto& x : eph) x *= decay;
  for (std::int64_t h = 0; h < H; ++h) {
    const std::int64_t g = h / c.G;
    const auto dot = [&](const std::vector<std::uint16_t>& rows, std::int64_t off) {
      double s = 0;
      for (std::int64_t d = 0; d < D; ++d) s += static_cast<double>(dec(q[h * D + d])) * dec(rows[off + d]);
      return s * scale;
    };
    std::vector<double> l(N);
    for (std::int64_t p = 0; p < P; ++p) l[p] = dot(sk, (g * P + p) * D) + (c.bias ? bias[g * P + p] : 0.0f);
    for (std::int64_t i = 0; i < c.R; ++i) l[P + i] = dot(k, g * T * D + (E + i) * D);
    for (std::int64_t e = 0; e < N; ++e)
      ASSERT_NEAR(lg[h * N + e], l[e], 1e-4 * (1 + std::fabs(l[e]))) << "logit h " << h;
    std::vector<std::int64_t> order(P);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](auto x, auto y) { return l[x] > l[y]; });
    std::vector<std::uint8_t> refined(P, 0);
    for (std::int64_t i = 0; i < K3; ++i) {
      const std::int64_t want = i < P ? order[i] : -1;
      ASSERT_EQ(pk[h * K3 + i], want) << "pick " << i << " of head " << h;
      if (want >= 0) refined[want] = 1;
    }
    // Weights of every entry (pages, tail) and child, under the math.
    std::vector<double> w(N, 0.0), wc(E, 0.0);
    double mx = -1e300, z = 0;
    for (double x : l) mx = std::max(mx, x);
    for (double x : l) z += std::exp(x - mx);
    std::vector<double> cl(E, 0.0);
    for (std::int64_t p = 0; p < P; ++p)
      if (refined[p])
        for (std::int64_t t = p * L; t < (p + 1) * L; ++t) cl[t] = dot(k, g * T * D + t * D);
    if (!c.exact) {
      for (std::int64_t e = 0; e < N; ++e) w[e] = std::exp(l[e] - mx) / z;
      for (std::int64_t p = 0; p < P; ++p) {
        if (!refined[p]) continue;
        double m2 = -1e300, z2 = 0;
        for (std::int64_t t = p * L; t < (p + 1) * L; ++t) m2 = std::max(m2, cl[t]);
        for (std::int64_t t = p * L; t < (p + 1) * L; ++t) z2 += std::exp(cl[t] - m2);
        for (std::int64_t t = p * L; t < (p + 1) * L; ++t) wc[t] = w[p] * std::exp(cl[t] - m2) / z2;
        w[p] = 0;
      }
    } else {
      double m2 = -1e300, z2 = 0;
      for (std::int64_t e = 0; e < N; ++e)
        if (e >= P || !refined[e]) m2 = std::max(m2, l[e]);
      for (std::int64_t t = 0; t < E; ++t)
        if (refined[t / L]) m2 = std::max(m2, cl[t]);
      for (std::int64_t e = 0; e < N; ++e)
        if (e >= P || !refined[e]) z2 += std::exp(l[e] - m2);
      for (std::int64_t t = 0; t < E; ++t)
        if (refined[t / L]) z2 += std::exp(cl[t] - m2);
      for (std::int64_t e = 0; e < N; ++e) w[e] = e < P && refined[e] ? 0.0 : std::exp(l[e] - m2) / z2;
      for (std::int64_t t = 0; t < E; ++t)
        if (refined[t / L]) wc[t] = std::exp(cl[t] - m2) / z2;
    }
    for (std::int64_t d = 0; d < D; ++d) {
      double o = 0;
      for (std::int64_t p = 0; p < P; ++p) o += w[p] * dec(sv[(g * P + p) * D + d]);
      for (std::int64_t i = 0; i < c.R; ++i) o += w[P + i] * dec(v[g * T * D + (E + i) * D + d]);
      for (std::int64_t t = 0; t < E; ++t) o += wc[t] * dec(v[g * T * D + t * D + d]);
      ASSERT_NEAR(dec(out[h * D + d]), o, (c.bf16 ? 8e-3 : 1e-3) * std::max(1.0, std::fabs(o)))
          << "out h " << h << " d " << d;
    }
    for (std::int64_t p = 0; p < P; ++p) {
      eph[h * P + p] += w[p];
      epi[g * P + p] += w[p] / c.G;
    }
    for (std::int64_t i = 0; i < c.R; ++i) {
      eth[h * T + E + i] += add_scale * w[P + i];
      eti[g * T + E + i] += w[P + i] / c.G;
    }
    for (std::int64_t t = 0; t < E; ++t)
      if (wc[t] > 0) {
        eth[h * T + t] += add_scale * wc[t];
        eti[g * T + t] += wc[t] / c.G;
      }
  }
  const auto near = [](double got, double want) {
    return std::fabs(got - want) <= 1e-5 * std::max(1.0, std::fabs(want));
  };
  for (std::size_t i = 0; i < eph.size(); ++i)
    ASSERT_TRUE(near(ph[i], eph[i])) << "page h2o " << i << ": " << ph[i] << " vs " << eph[i];
  for (std::size_t i = 0; i < epi.size(); ++i) ASSERT_TRUE(near(pi[i], epi[i])) << "page importance " << i;
  for (std::size_t i = 0; i < eth.size(); ++i) ASSERT_TRUE(near(th[i], eth[i])) << "token h2o " << i;
  for (std::size_t i = 0; i < eti.size(); ++i) ASSERT_TRUE(near(ti[i], eti[i])) << "token importance " << i;
}

TEST(ClusteredV2Cuda, KernelsAAndBMatchTheClusteredStepInDouble) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device on this machine";
  const char* short_env = std::getenv("LUKA_V2_SHORT");
  const bool short_run = short_env && std::string(short_env) == "1";
  for (bool exact : {true, false})
    for (bool bf16 : {true, false})
      for (std::int64_t D : {64, 128})
        for (std::int64_t G : {1, 2, 4, 8})
          for (std::int64_t P : {2, 40, 600}) {
            if (short_run && P > 40) continue;
            SCOPED_TRACE(::testing::Message() << (exact ? "exact" : "mass") << (bf16 ? " bf16" : " fp16") << " D " << D
                                              << " G " << G << " P " << P);
            // B overlapping A's tail in most cases, after A has finished in the rest.
            check_clustered({bf16, exact, G % 2 == 0, D, G, P, P == 2 ? 5 : 128, G != 4});
            if (HasFatalFailure()) return;
          }
}

// Device heavy sets of 4 units (two heads each) against host ones fed the same scores, over a lined
// stream whose cover's attention comes back into the scores; tied values included.
TEST(HeavySetCuda, DeviceUpdateEqualsHostUpdate) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device on this machine";
  const std::int64_t units = 4, per = 2, H = units * per, prefill = 400, steps = 80, cap = prefill + steps + 1;
  std::mt19937 rng(7);
  std::vector<float> rows(H * cap, 0.0f);
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t t = 0; t < prefill; ++t) rows[h * cap + t] = static_cast<float>(rng() % 5) / 8.0f;
  std::vector<std::int32_t> unit_heads(H);
  for (std::int64_t i = 0; i < H; ++i) unit_heads[i] = static_cast<std::int32_t>(i);
  // Device storage: per unit five arrays of cap.
  std::vector<luka::heavy::HeavySet> sets(units);
  std::vector<void*> owned;
  for (auto& s : sets) {
    cudaMalloc(reinterpret_cast<void**>(&s.place), cap);
    cudaMemset(s.place, 0, cap);
    cudaMalloc(reinterpret_cast<void**>(&s.slot), cap * 4);
    cudaMalloc(reinterpret_cast<void**>(&s.key), cap * 4);
    cudaMalloc(reinterpret_cast<void**>(&s.rest), cap * 4);
    cudaMalloc(reinterpret_cast<void**>(&s.heavy), cap * 4);
    s.capacity = cap;
    owned.insert(owned.end(), {s.place, s.slot, s.key, s.rest, s.heavy});
  }
  luka::heavy::HeavySet* dsets = upload(sets);
  std::int32_t* dunits = upload(unit_heads);
  float* dh2o = upload(rows);
  std::vector<luka::heavy::HostHeavySet> host(units);
  luka::rules::LinedRule rule;
  rule.window = 32;
  for (std::int64_t T = prefill + 1; T <= prefill + steps; ++T) {
    const luka::rules::LinedCover c = luka::rules::lined_cover(rule, T);
    ASSERT_EQ(cudaMemcpy(dh2o, rows.data(), rows.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    luka::cuda::v2::HeavySetArgs a{dsets, dh2o, cap, dunits, units, per, c.select_end, c.heavy, c.window_start};
    ASSERT_EQ(luka::cuda::v2::heavy_set_update(a, nullptr), "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got_sets = download(dsets, units);
    for (std::int64_t u = 0; u < units; ++u) {
      const auto score = [&](std::int64_t t) {
        float s = 0.0f;
        for (std::int64_t i = 0; i < per; ++i) s += rows[(u * per + i) * cap + t];
        return s;
      };
      host[u].update(score, c.select_end, c.heavy, c.window_start);
      std::vector<std::int32_t> dev = download(got_sets[u].heavy, static_cast<std::size_t>(got_sets[u].n_heavy));
      std::vector<std::int64_t> d(dev.begin(), dev.end());
      std::sort(d.begin(), d.end());
      ASSERT_EQ(d, host[u].sorted()) << "unit " << u << " T " << T;
      // The cover's attention back into the unit's rows.
      std::vector<std::int64_t> cover = d;
      for (std::int64_t t = c.window_start; t < T; ++t) cover.push_back(t);
      for (std::int64_t i = 0; i < per; ++i)
        for (std::int64_t t : cover) rows[(u * per + i) * cap + t] += static_cast<float>(rng() % 3) / 64.0f;
    }
  }
  for (void* p : owned) cudaFree(p);
  cudaFree(dsets);
  cudaFree(dunits);
  cudaFree(dh2o);
}

}  // namespace
