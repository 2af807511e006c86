// The CPU core's shared pieces (core/luka/cpu/*.cpp, one file per mode of LukaAttention): row
// accessors over the cache, the in-place softmax, top-k and selection units the modes share. Only
// those files include it; the class's one header stays core/luka/luka_attention.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "core/luka/config.h"
#include "core/luka/luka_layer.h"
#include "core/util/error.h"
#include "kernels/cpu/vec.h"

namespace luka::cpu_core {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Row accessors over a [KV, T, D] cache view in fp32 or bf16.
template <typename T>
struct Rows {
  const T* base;
  std::int64_t head_stride, row_stride, d;
  const T* row(std::int64_t head, std::int64_t t) const { return base + head * head_stride + t * row_stride; }
};

using cpu::axpy;
using cpu::dot;

// In-place softmax over `n` logits (−inf allowed); returns nothing, p sums to 1.
inline void softmax_inplace(float* x, std::int64_t n) {
  float m = kNegInf;
  for (std::int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    x[i] = x[i] == kNegInf ? 0.0f : std::exp(x[i] - m);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (std::int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// Indices of the `m` largest scores (ties: lower index first), in ascending index order.
inline std::vector<std::int64_t> top_indices(const float* score, std::int64_t n, std::int64_t m) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  m = std::min(m, n);
  if (m <= 0) return {};
  const auto better = [&](std::int64_t a, std::int64_t b) { return score[a] != score[b] ? score[a] > score[b] : a < b; };
  std::nth_element(idx.begin(), idx.begin() + (m - 1), idx.end(), better);
  idx.resize(static_cast<std::size_t>(m));
  std::sort(idx.begin(), idx.end());
  return idx;
}

// Units that share a selection: per head (each head alone), per KV group, or the whole layer.
inline std::vector<std::vector<std::int64_t>> selection_units(Selection s, std::int64_t heads, std::int64_t group) {
  std::vector<std::vector<std::int64_t>> units;
  if (s == Selection::kPerLayer) {
    units.emplace_back(static_cast<std::size_t>(heads));
    std::iota(units.back().begin(), units.back().end(), 0);
  } else if (s == Selection::kPerGroup) {
    for (std::int64_t g = 0; g < heads / group; ++g) {
      units.emplace_back();
      for (std::int64_t j = 0; j < group; ++j) units.back().push_back(g * group + j);
    }
  } else {
    for (std::int64_t h = 0; h < heads; ++h) units.push_back({h});
  }
  return units;
}

// A capacity to grow to: what is needed, at least twice what is there (amortized growth), at least 64.
inline std::int64_t grow(std::int64_t need, std::int64_t have) { return std::max({need, 2 * have, std::int64_t{64}}); }

// Calls f(K, V) with row accessors over the cache in its element type (fp32 or bf16).
template <typename F>
void with_rows(const AttentionInputs& in, int layer, F&& f) {
  const std::int64_t D = in.k.size(2);
  const auto run = [&](auto tag) {
    using Elem = decltype(tag);
    f(Rows<Elem>{in.k.const_data_ptr<Elem>(), in.k.stride(0), in.k.stride(1), D},
      Rows<Elem>{in.v.const_data_ptr<Elem>(), in.v.stride(0), in.v.stride(1), D});
  };
  if (in.k.scalar_type() == at::kFloat) {
    run(float{});
  } else if (in.k.scalar_type() == at::kBFloat16) {
    run(c10::BFloat16{});
  } else {
    fail("luka layer " + std::to_string(layer), std::string("unsupported cache dtype ") + c10::toString(in.k.scalar_type()));
  }
}

}  // namespace luka::cpu_core
