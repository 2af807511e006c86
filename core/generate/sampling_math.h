// The element math of sampling, shared by the CPU sampler (sampler.cpp) and the CUDA plugin's
// sampler kernels, so that the same parameters, logits and uniform draw give the same id on both:
// the candidate order (descending logit, ascending id), and the draw from sorted candidates under
// temperature, top-k and top-p, all in double in one fixed order.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define LUKA_SAMPLING_HD __host__ __device__
#else
#define LUKA_SAMPLING_HD
#endif

namespace luka::sampling {

// True when candidate (a, ia) comes before (b, ib): the higher logit, ties to the lower id.
LUKA_SAMPLING_HD inline bool before(float a, std::int32_t ia, float b, std::int32_t ib) { return a > b || (a == b && ia < ib); }

// Candidates kept by top_k out of n (0: all).
LUKA_SAMPLING_HD inline std::int64_t kept(std::int64_t n, int top_k) { return top_k > 0 && top_k < n ? top_k : n; }

// The draw: `logits` and `ids` hold the candidates sorted by `before` (at least kept(n, top_k) of
// them), `u01` a uniform number in [0, 1). Softmax of logit / temperature over the kept
// candidates, cut to the smallest prefix whose mass reaches top_p (when below 1), then the
// candidate where the running mass first exceeds u01 times the prefix's mass.
LUKA_SAMPLING_HD inline std::int32_t pick_sorted(const float* logits, const std::int32_t* ids, std::int64_t n, int top_k,
                                                 float temperature, float top_p, double u01) {
  std::int64_t keep = kept(n, top_k);
  const double inv_t = 1.0 / temperature;
  const double top = logits[0];
  double sum = 0;
  for (std::int64_t i = 0; i < keep; ++i) sum += exp((static_cast<double>(logits[i]) - top) * inv_t);
  double total = 1.0;
  if (top_p < 1.0f) {
    double mass = 0;
    std::int64_t cut = keep;
    for (std::int64_t i = 0; i < keep; ++i) {
      mass += exp((static_cast<double>(logits[i]) - top) * inv_t) / sum;
      if (mass >= static_cast<double>(top_p)) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    total = 0;
    for (std::int64_t i = 0; i < keep; ++i) total += exp((static_cast<double>(logits[i]) - top) * inv_t) / sum;
  }
  const double u = u01 * total;
  double acc = 0;
  for (std::int64_t i = 0; i < keep; ++i) {
    acc += exp((static_cast<double>(logits[i]) - top) * inv_t) / sum;
    if (u < acc) return ids[i];
  }
  return ids[keep - 1];
}

// The uniform draw in [0, 1) from one 64-bit random word (its top 53 bits).
LUKA_SAMPLING_HD inline double unit_from_bits(std::uint64_t bits) { return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0); }

}  // namespace luka::sampling
