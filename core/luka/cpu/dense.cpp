// Dense mode of the CPU core, and the exact softmax over per-head sets of keys the sparse modes
// share (attend_sets: Kascade's and press's steps).
#include "core/luka/luka_attention.h"

#include <algorithm>
#include <vector>

#include <ATen/Parallel.h>

#include "core/luka/cpu/internal.h"
#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/vec.h"

namespace luka {

using namespace cpu_core;

// Dense: the kernels/cpu decode attention where it covers the dtype, else the same formula here.
void LukaAttention::decode_dense(Step& s) {
  const AttentionInputs& in = s.in;
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
  if (cpu::decode_attention_available(in.q.scalar_type())) {
    at::Tensor probs;
    s.out.copy_(cpu::dense_decode_attention(in.q, in.k, in.v, in.scale, &probs).view({H, D}));
    s.eff.copy_(probs);
    return;
  }
  float* e = s.eff.mutable_data_ptr<float>();
  float* o = s.out.mutable_data_ptr<float>();
  with_rows(in, layer_, [&](const auto& K, const auto& V) {
    at::parallel_for(0, H, 1, [&](std::int64_t h0, std::int64_t h1) {
      for (std::int64_t h = h0; h < h1; ++h) {
        float* p = e + h * T;
        for (std::int64_t t = 0; t < T; ++t) p[t] = s.scale * dot(s.q + h * D, K.row(h / G, t), D);
        softmax_inplace(p, T);
        for (std::int64_t t = 0; t < T; ++t) axpy(p[t], V.row(h / G, t), o + h * D, D);
      }
    });
  });
}

void LukaAttention::attend_sets(Step& s, const std::vector<const std::vector<std::int64_t>*>& sets, bool renormalize) {
  const AttentionInputs& in = s.in;
  const std::int64_t H = in.q.size(0), D = in.q.size(2), T = in.k.size(1), G = in.group_size;
  float* e = s.eff.mutable_data_ptr<float>();
  float* o = s.out.mutable_data_ptr<float>();
  with_rows(in, layer_, [&](const auto& K, const auto& V) {
    at::parallel_for(0, H, 1, [&](std::int64_t h0, std::int64_t h1) {
      for (std::int64_t h = h0; h < h1; ++h) {
        const std::vector<std::int64_t>& set = *sets[static_cast<std::size_t>(h)];
        const std::int64_t n = static_cast<std::int64_t>(set.size());
        std::vector<float> p(set.size());
        double sum = 0;
        if (renormalize)
          for (std::int64_t i = 0; i < n; ++i) sum += p[i] = e[h * T + set[i]];
        if (sum > 0) {
          const float inv = static_cast<float>(1.0 / sum);
          for (float& x : p) x *= inv;
        } else {
          cpu::gather_dots(s.q + h * D, K.row(h / G, 0), K.row_stride, set.data(), n, D, s.scale, p.data());
          softmax_inplace(p.data(), n);
        }
        std::fill(e + h * T, e + (h + 1) * T, 0.0f);
        std::fill(o + h * D, o + (h + 1) * D, 0.0f);
        for (std::int64_t i = 0; i < n; ++i) e[h * T + set[i]] = p[i];
        cpu::gather_axpy(p.data(), V.row(h / G, 0), V.row_stride, set.data(), n, D, o + h * D);
      }
    });
  });
}

}  // namespace luka
